/*
 * test_gguf_hostile.c — the GGUF reader on hand-built hostile input, and the
 * writer's API contract. Needs nothing from ../shared.
 *
 * A small sample file is built with the writer (all 13 value types, arrays of
 * every element type including strings, three tensors), checked value by
 * value, then corrupted in memory one field at a time: each corruption must
 * be rejected with KVV_ERR_FORMAT and a message naming the field and its
 * byte offset. Every prefix of the file is tried (truncation), and many
 * random byte flips; inputs live in exact-size heap buffers so AddressSanitizer
 * (make test-asan) catches any read past the end.
 */
#include "tests/test_util.h"

#include "model/gguf.h"
#include "model/gguf_internal.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ----------------------------------------------------------- the sample */

static const int64_t ne_a[2] = {4, 3};   /* F32, 48 bytes */
static const int64_t ne_b[2] = {64, 2};  /* Q8_0, 2 rows of 2 blocks = 136 bytes */
static const int64_t ne_c[1] = {5};      /* F16, 10 bytes */

static kvv_gguf_kv scalar_kv(const char *key, kvv_gguf_type type)
{
    kvv_gguf_kv kv = {.key = (char *)key, .type = type};
    return kv;
}

/* All 13 value types. Scalars of the types without a setter go through
 * kvv_gguf_writer_copy_kv. */
static kvv_gguf_writer *sample_writer(void)
{
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    assert_non_null(w);
    kvv_gguf_kv kv;
    assert_int_equal(kvv_gguf_writer_set_str(w, "general.architecture", "llama"), KVV_OK);
    kv = scalar_kv("t.u8", KVV_GGUF_UINT8);   kv.v.u64 = 200;
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    kv = scalar_kv("t.i8", KVV_GGUF_INT8);    kv.v.i64 = -100;
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    kv = scalar_kv("t.u16", KVV_GGUF_UINT16); kv.v.u64 = 60000;
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    kv = scalar_kv("t.i16", KVV_GGUF_INT16);  kv.v.i64 = -30000;
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u32(w, "t.u32", 4000000000u), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_i32(w, "t.i32", -2000000000), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_f32(w, "t.f32", 0.1f), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_bool(w, "t.bool", true), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo"), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u64(w, "t.u64", (1ull << 63) + 5), KVV_OK);
    kv = scalar_kv("t.i64", KVV_GGUF_INT64);  kv.v.i64 = -(1ll << 62);
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    kv = scalar_kv("t.f64", KVV_GGUF_FLOAT64); kv.v.f64 = 0.1;
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    /* numeric arrays: elements {1, 2, 3} (and -1 for the signed ones) */
    static const uint8_t a_u8[3] = {1, 2, 255};
    static const int16_t a_i16[3] = {-1, 2, 3};
    static const uint32_t a_u32[3] = {1, 2, 3};
    static const float a_f32[3] = {0.5f, -2.0f, 3.25f};
    static const double a_f64[3] = {0.1, -2.0, 1e300};
    static const int64_t a_i64[3] = {-1, 2, INT64_MAX};
    static const uint8_t a_bool[3] = {1, 0, 1};
    assert_int_equal(kvv_gguf_writer_set_arr(w, "t.arr.u8", KVV_GGUF_UINT8, a_u8, 3), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "t.arr.i16", KVV_GGUF_INT16, a_i16, 3), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "t.arr.u32", KVV_GGUF_UINT32, a_u32, 3), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "t.arr.f32", KVV_GGUF_FLOAT32, a_f32, 3), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "t.arr.f64", KVV_GGUF_FLOAT64, a_f64, 3), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "t.arr.i64", KVV_GGUF_INT64, a_i64, 3), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "t.arr.bool", KVV_GGUF_BOOL, a_bool, 3), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "t.arr.empty", KVV_GGUF_UINT32, NULL, 0), KVV_OK);
    static const char *const strs[3] = {"a", "", "ccc"};
    assert_int_equal(kvv_gguf_writer_set_arr_str(w, "t.arr.str", strs, 3), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr_str(w, "t.arr.nostr", NULL, 0), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u32(w, "dup.aa", 1), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u32(w, "dup.bb", 2), KVV_OK);

    float fa[12];
    for (int i = 0; i < 12; i++)
        fa[i] = (float)i - 5.5f;
    uint8_t qb[136];
    for (int i = 0; i < 136; i++)
        qb[i] = (uint8_t)(i * 7 + 3);
    uint16_t hc[5] = {0x3c00, 0xbc00, 0x0000, 0x7bff, 0x0001};
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "a", KVV_TYPE_F32, 2, ne_a, fa), KVV_OK);
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "b", KVV_TYPE_Q8_0, 2, ne_b, qb), KVV_OK);
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "c", KVV_TYPE_F16, 1, ne_c, hc), KVV_OK);
    return w;
}

static uint8_t *sample(size_t *size)
{
    kvv_gguf_writer *w = sample_writer();
    uint8_t *buf;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_writer_to_buffer(w, &buf, size, &err), KVV_OK);
    kvv_gguf_writer_free(w);
    return buf;
}

static kvv_gguf *open_ok(const uint8_t *buf, size_t n)
{
    kvv_gguf *g = NULL;
    kvv_error err = {0};
    if (kvv_gguf_open_memory(buf, n, "sample.gguf", &g, &err) != KVV_OK)
        fail_msg("%s", err.msg);
    return g;
}

/* -------------------------------------------------------- value checks */

static void test_all_value_types(void **state)
{
    (void)state;
    size_t n;
    uint8_t *buf = sample(&n);
    kvv_gguf *g = open_ok(buf, n);
    kvv_error err = {0};
    const kvv_gguf_kv *kv;
    assert_int_equal(g->n_kv, 25);
    assert_int_equal(g->n_tensors, 3);
#define KV(k, t) (kv = kvv_gguf_find_kv(g, k), assert_non_null(kv), assert_int_equal(kv->type, t))
    KV("t.u8", KVV_GGUF_UINT8);     assert_int_equal(kv->v.u64, 200);
    KV("t.i8", KVV_GGUF_INT8);      assert_int_equal(kv->v.i64, -100);
    KV("t.u16", KVV_GGUF_UINT16);   assert_int_equal(kv->v.u64, 60000);
    KV("t.i16", KVV_GGUF_INT16);    assert_int_equal(kv->v.i64, -30000);
    KV("t.u32", KVV_GGUF_UINT32);   assert_int_equal(kv->v.u64, 4000000000u);
    KV("t.i32", KVV_GGUF_INT32);    assert_int_equal(kv->v.i64, -2000000000);
    KV("t.f32", KVV_GGUF_FLOAT32);  assert_true(kv->v.f64 == (double)0.1f);
    KV("t.bool", KVV_GGUF_BOOL);    assert_int_equal(kv->v.u64, 1);
    KV("t.str", KVV_GGUF_STRING);   assert_int_equal(kv->v.str.len, 6);
    assert_memory_equal(kv->v.str.ptr, "h\xc3\xa9llo", 6);
    KV("t.u64", KVV_GGUF_UINT64);   assert_true(kv->v.u64 == (1ull << 63) + 5);
    KV("t.i64", KVV_GGUF_INT64);    assert_true(kv->v.i64 == -(1ll << 62));
    KV("t.f64", KVV_GGUF_FLOAT64);  assert_true(kv->v.f64 == 0.1);
    KV("t.arr.u8", KVV_GGUF_ARRAY); assert_int_equal(kv->arr_type, KVV_GGUF_UINT8);
    assert_int_equal(kv->arr_n, 3);
    assert_int_equal(kvv_gguf_arr_i64(kv, 2), 255);
    KV("t.arr.i16", KVV_GGUF_ARRAY); assert_int_equal(kvv_gguf_arr_i64(kv, 0), -1);
    assert_true(kvv_gguf_arr_f64(kv, 0) == -1.0);
    KV("t.arr.u32", KVV_GGUF_ARRAY); assert_int_equal(kvv_gguf_arr_i64(kv, 2), 3);
    KV("t.arr.f32", KVV_GGUF_ARRAY); assert_true(kvv_gguf_arr_f64(kv, 2) == 3.25);
    assert_int_equal(kvv_gguf_arr_i64(kv, 1), -2);
    KV("t.arr.f64", KVV_GGUF_ARRAY); assert_true(kvv_gguf_arr_f64(kv, 0) == 0.1);
    assert_true(kvv_gguf_arr_i64(kv, 2) == INT64_MAX);
    KV("t.arr.i64", KVV_GGUF_ARRAY); assert_true(kvv_gguf_arr_i64(kv, 2) == INT64_MAX);
    assert_int_equal(kvv_gguf_arr_i64(kv, 0), -1);
    KV("t.arr.bool", KVV_GGUF_ARRAY); assert_int_equal(kvv_gguf_arr_i64(kv, 1), 0);
    KV("t.arr.empty", KVV_GGUF_ARRAY); assert_int_equal(kv->arr_n, 0);
    KV("t.arr.nostr", KVV_GGUF_ARRAY); assert_int_equal(kv->arr_n, 0);
    assert_int_equal(kv->arr_type, KVV_GGUF_STRING);
    KV("t.arr.str", KVV_GGUF_ARRAY); assert_int_equal(kv->arr_type, KVV_GGUF_STRING);
    assert_int_equal(kv->arr_n, 3);
    assert_int_equal(kv->arr_str[0].len, 1);
    assert_int_equal(kv->arr_str[1].len, 0);
    assert_int_equal(kv->arr_str[2].len, 3);
    assert_memory_equal(kv->arr_str[2].ptr, "ccc", 3);
#undef KV

    /* typed getters and their coercions */
    uint32_t u = 7;
    float f;
    bool b;
    char s[16];
    assert_int_equal(kvv_gguf_get_u32(g, "t.u8", true, &u, &err), KVV_OK);
    assert_int_equal(u, 200);
    assert_int_equal(kvv_gguf_get_u32(g, "t.u32", true, &u, &err), KVV_OK);
    assert_int_equal(u, 4000000000u);
    assert_int_equal(kvv_gguf_get_u32(g, "t.i32", true, &u, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "sample.gguf: kv["));
    assert_non_null(strstr(err.msg, "'t.i32' at byte "));
    assert_non_null(strstr(err.msg, "does not fit in uint32"));
    assert_int_equal(kvv_gguf_get_u32(g, "t.u64", true, &u, &err), KVV_ERR_FORMAT);
    assert_int_equal(kvv_gguf_get_u32(g, "t.f32", true, &u, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "expected an integer, found float32"));
    assert_int_equal(kvv_gguf_get_u32(g, "absent", true, &u, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "missing"));
    u = 7;
    assert_int_equal(kvv_gguf_get_u32(g, "absent", false, &u, &err), KVV_OK);
    assert_int_equal(u, 7);
    assert_int_equal(kvv_gguf_get_f32(g, "t.f32", true, &f, &err), KVV_OK);
    assert_true(f == 0.1f);
    assert_int_equal(kvv_gguf_get_f32(g, "t.u16", true, &f, &err), KVV_OK);
    assert_true(f == 60000.0f);
    assert_int_equal(kvv_gguf_get_f32(g, "t.f64", true, &f, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "not exactly representable"));
    assert_int_equal(kvv_gguf_get_f32(g, "t.u64", true, &f, &err), KVV_ERR_FORMAT);
    assert_int_equal(kvv_gguf_get_f32(g, "t.str", true, &f, &err), KVV_ERR_FORMAT);
    assert_int_equal(kvv_gguf_get_bool(g, "t.bool", true, &b, &err), KVV_OK);
    assert_true(b);
    assert_int_equal(kvv_gguf_get_bool(g, "t.u8", true, &b, &err), KVV_ERR_FORMAT);
    assert_int_equal(kvv_gguf_get_str(g, "t.str", true, s, 7, &err), KVV_OK);
    assert_string_equal(s, "h\xc3\xa9llo");
    assert_int_equal(kvv_gguf_get_str(g, "t.str", true, s, 6, &err), KVV_ERR_FORMAT);
    assert_int_equal(kvv_gguf_get_str(g, "t.u32", true, s, sizeof s, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "expected string, found uint32"));

    /* tensors */
    const kvv_gguf_tensor *t = kvv_gguf_find_tensor(g, "b");
    assert_non_null(t);
    assert_int_equal(t->type, KVV_TYPE_Q8_0);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 64);
    assert_int_equal(t->ne[1], 2);
    assert_int_equal(t->ne[2], 1);
    assert_int_equal(t->nbytes, 136);
    assert_int_equal(t->offset, 64);       /* after a's 48 bytes padded to 64 */
    assert_int_equal(t->data[135], (uint8_t)(135 * 7 + 3));
    t = kvv_gguf_find_tensor(g, "c");
    assert_int_equal(t->offset, 64 + 160);
    assert_int_equal(t->nbytes, 10);
    assert_int_equal(g->size, g->data_offset + 224 + 32);  /* last tensor padded too */
    assert_string_equal(kvv_gguf_type_name(KVV_GGUF_STRING), "string");
    assert_string_equal(kvv_gguf_type_name(13), "unknown");
    kvv_gguf_close(g);
    free(buf);
}

/* Coercions at the edges of the ranges (no cast may overflow). */
static void test_getter_ranges(void **state)
{
    (void)state;
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    kvv_gguf_kv kv = {.key = "big", .type = KVV_GGUF_FLOAT64, .v.f64 = 1e300};
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    kv = (kvv_gguf_kv){.key = "inf", .type = KVV_GGUF_FLOAT64, .v.f64 = -HUGE_VAL};
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    kv = (kvv_gguf_kv){.key = "two", .type = KVV_GGUF_FLOAT64, .v.f64 = 2.0};
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    kv = (kvv_gguf_kv){.key = "imin", .type = KVV_GGUF_INT64, .v.i64 = INT64_MIN};
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u64(w, "umax", UINT64_MAX), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u64(w, "u24", 1u << 24), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u64(w, "u24p1", (1u << 24) + 1), KVV_OK);
    uint8_t *buf;
    size_t n;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_writer_to_buffer(w, &buf, &n, &err), KVV_OK);
    kvv_gguf_writer_free(w);
    kvv_gguf *g = open_ok(buf, n);
    float f = 0;
    uint32_t u = 0;
    assert_int_equal(kvv_gguf_get_f32(g, "big", true, &f, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "float64 value 1.0000000000000001e+300 is not exactly"));
    assert_int_equal(kvv_gguf_get_f32(g, "inf", true, &f, &err), KVV_OK);
    assert_true(f == -HUGE_VALF);
    assert_int_equal(kvv_gguf_get_f32(g, "two", true, &f, &err), KVV_OK);
    assert_true(f == 2.0f);
    assert_int_equal(kvv_gguf_get_f32(g, "imin", true, &f, &err), KVV_OK);
    assert_true(f == -9223372036854775808.0f);
    assert_int_equal(kvv_gguf_get_f32(g, "umax", true, &f, &err), KVV_ERR_FORMAT);
    assert_int_equal(kvv_gguf_get_f32(g, "u24", true, &f, &err), KVV_OK);
    assert_int_equal(kvv_gguf_get_f32(g, "u24p1", true, &f, &err), KVV_ERR_FORMAT);
    assert_int_equal(kvv_gguf_get_u32(g, "imin", true, &u, &err), KVV_ERR_FORMAT);
    assert_int_equal(kvv_gguf_get_u32(g, "umax", true, &u, &err), KVV_ERR_FORMAT);
    assert_int_equal(kvv_gguf_get_u32(g, "u24", true, &u, &err), KVV_OK);
    assert_int_equal(u, 1u << 24);
    kvv_gguf_close(g);
    free(buf);
}

static void test_deterministic(void **state)
{
    (void)state;
    size_t n1, n2;
    uint8_t *a = sample(&n1), *b = sample(&n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1);
    free(a);
    free(b);
}

/* ---------------------------------------------------------- corruptions */

typedef struct {
    uint8_t *buf;
    size_t n;
    kvv_gguf *g;   /* the intact sample, for field positions */
} fixture;

static fixture fx_open(void)
{
    fixture f;
    f.buf = sample(&f.n);
    f.g = open_ok(f.buf, f.n);
    return f;
}

static void fx_close(fixture *f)
{
    kvv_gguf_close(f->g);
    free(f->buf);
}

static uint64_t kv_type_at(const fixture *f, const char *key)
{
    const kvv_gguf_kv *kv = kvv_gguf_find_kv(f->g, key);
    assert_non_null(kv);
    return kv->offset + 8 + strlen(key);
}

static uint64_t t_ndims_at(const fixture *f, const char *name)
{
    const kvv_gguf_tensor *t = kvv_gguf_find_tensor(f->g, name);
    assert_non_null(t);
    return t->info_offset + 8 + strlen(name);
}

static uint64_t t_type_at(const fixture *f, const char *name)
{
    return t_ndims_at(f, name) + 4 + 8 * (uint64_t)kvv_gguf_find_tensor(f->g, name)->n_dims;
}

/* Patch width bytes (4 or 8; 1 for a byte) at pos of a copy; the reader must
 * reject it with a message containing want and "at byte AT" (AT < 0: any). */
static void expect_bad(const fixture *f, uint64_t pos, int width, uint64_t value,
                       const char *want, int64_t at)
{
    uint8_t *c = malloc(f->n);
    assert_non_null(c);
    memcpy(c, f->buf, f->n);
    if (width == 8)
        kvv_gguf_st64(c + pos, value);
    else if (width == 4)
        kvv_gguf_st32(c + pos, (uint32_t)value);
    else
        c[pos] = (uint8_t)value;
    kvv_gguf *g = NULL;
    kvv_error err = {0};
    kvv_status st = kvv_gguf_open_memory(c, f->n, "bad.gguf", &g, &err);
    if (st != KVV_ERR_FORMAT)
        fail_msg("patch at %llu accepted (status %d), wanted '%s'", (unsigned long long)pos, st,
                 want);
    assert_null(g);
    if (!strstr(err.msg, want))
        fail_msg("message '%s' lacks '%s'", err.msg, want);
    assert_true(strncmp(err.msg, "bad.gguf: ", 10) == 0);
    if (at >= 0) {
        char where[48];
        snprintf(where, sizeof where, " at byte %lld: ", (long long)at);
        if (!strstr(err.msg, where))
            fail_msg("message '%s' lacks '%s'", err.msg, where);
    }
    free(c);
}

static void test_bad_header(void **state)
{
    (void)state;
    fixture f = fx_open();
    expect_bad(&f, 0, 1, 'X', "header.magic at byte 0: not a GGUF file (magic 'XGUF')", 0);
    expect_bad(&f, 0, 4, 0x01020300, "not a GGUF file (magic '\\x00\\x03\\x02\\x01')", 0);
    expect_bad(&f, 4, 4, 1, "header.version at byte 4: GGUF version 1 is not supported", 4);
    expect_bad(&f, 4, 4, 4, "GGUF version 4 is not supported", 4);
    expect_bad(&f, 4, 4, 0x03000000, "big-endian GGUF", 4);
    expect_bad(&f, 8, 8, UINT64_MAX, "header.n_tensors at byte 8: tensor count", 8);
    expect_bad(&f, 16, 8, UINT64_MAX, "header.n_kv at byte 16: kv count", 16);
    expect_bad(&f, 16, 8, f.g->n_kv + 1, "", -1);    /* tensor infos read as a kv */
    expect_bad(&f, 8, 8, f.g->n_tensors + 1, "", -1);
    fx_close(&f);
}

static void test_bad_kvs(void **state)
{
    (void)state;
    fixture f = fx_open();
    expect_bad(&f, 24, 8, UINT64_MAX, "kv[0].key at byte 24: string length", 24);
    expect_bad(&f, 24, 8, 0, "kv[0].key at byte 24: empty key", 24);
    uint64_t p = kv_type_at(&f, "t.u8");
    expect_bad(&f, p, 4, 13, "'t.u8'.type at byte", (int64_t)p);
    expect_bad(&f, p, 4, 13, "unknown value type 13", -1);
    expect_bad(&f, p - 1, 1, 0, "key contains a NUL byte", -1);
    p = kv_type_at(&f, "t.str");
    expect_bad(&f, p + 4, 8, 1ull << 40, "'t.str'.value at byte", (int64_t)(p + 4));
    p = kv_type_at(&f, "t.bool");
    expect_bad(&f, p + 4, 1, 2, "bool value 2 is neither 0 nor 1", (int64_t)(p + 4));
    p = kv_type_at(&f, "t.arr.u32");
    expect_bad(&f, p + 4, 4, KVV_GGUF_ARRAY, "nested arrays are not supported", (int64_t)(p + 4));
    expect_bad(&f, p + 4, 4, 200, "unknown array element type 200", (int64_t)(p + 4));
    expect_bad(&f, p + 8, 8, UINT64_MAX / 2, "'t.arr.u32'.array_count at byte", (int64_t)(p + 8));
    expect_bad(&f, p + 8, 8, 1ull << 62, "array count", -1);
    p = kv_type_at(&f, "t.arr.bool");
    expect_bad(&f, p + 16 + 2, 1, 9, "'t.arr.bool'[2] at byte", (int64_t)(p + 18));
    p = kv_type_at(&f, "t.arr.str");
    expect_bad(&f, p + 8, 8, UINT64_MAX, "'t.arr.str'.array_count", (int64_t)(p + 8));
    expect_bad(&f, p + 16, 8, 1ull << 50, "'t.arr.str'[0] at byte", (int64_t)(p + 16));
    expect_bad(&f, p + 16 + 9, 8, UINT64_MAX - 3, "'t.arr.str'[1] at byte", (int64_t)(p + 25));
    /* duplicate key: rename dup.bb to dup.aa */
    p = kvv_gguf_find_kv(f.g, "dup.bb")->offset;
    uint64_t first = (uint64_t)(kvv_gguf_find_kv(f.g, "dup.aa") - f.g->kv);
    char want[96];
    snprintf(want, sizeof want, "'dup.aa' at byte %llu: duplicate key (first at kv[%llu])",
             (unsigned long long)p, (unsigned long long)first);
    uint8_t *c = malloc(f.n);
    memcpy(c, f.buf, f.n);
    memcpy(c + p + 8, "dup.aa", 6);
    kvv_gguf *g = NULL;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_open_memory(c, f.n, "bad.gguf", &g, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, want));
    free(c);
    fx_close(&f);
}

static void test_bad_alignment(void **state)
{
    (void)state;
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    assert_int_equal(kvv_gguf_writer_set_u32(w, "general.alignment", 64), KVV_OK);
    float x[3] = {1, 2, 3};
    int64_t ne = 3;
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "x", KVV_TYPE_F32, 1, &ne, x), KVV_OK);
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "y", KVV_TYPE_F32, 1, &ne, x), KVV_OK);
    fixture f;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_writer_to_buffer(w, &f.buf, &f.n, &err), KVV_OK);
    kvv_gguf_writer_free(w);
    f.g = open_ok(f.buf, f.n);
    assert_int_equal(f.g->alignment, 64);
    assert_int_equal(f.g->data_offset % 64, 0);
    assert_int_equal(kvv_gguf_find_tensor(f.g, "y")->offset, 64);
    uint64_t p = kv_type_at(&f, "general.alignment");
    expect_bad(&f, p + 4, 4, 0, "alignment 0 is not a power of two", (int64_t)(p + 4));
    expect_bad(&f, p + 4, 4, 48, "alignment 48 is not a power of two", (int64_t)(p + 4));
    expect_bad(&f, p + 4, 4, 1u << 31, "is not a power of two", -1);
    expect_bad(&f, p, 4, KVV_GGUF_INT32, "general.alignment must be uint32, not int32", (int64_t)p);
    /* 32 instead of 64: y's offset 64 still aligned, data start moves */
    uint64_t y_off = t_type_at(&f, "y") + 4;
    expect_bad(&f, y_off, 8, 96, "not a multiple of the alignment 64", (int64_t)y_off);
    fx_close(&f);
}

static void test_bad_tensors(void **state)
{
    (void)state;
    fixture f = fx_open();
    uint64_t nd = t_ndims_at(&f, "a"), ty = t_type_at(&f, "a");
    expect_bad(&f, nd, 4, 0, "tensor[0] 'a'.n_dims at byte", (int64_t)nd);
    expect_bad(&f, nd, 4, 0, "0 dimensions (must be 1 to 4)", -1);
    expect_bad(&f, nd, 4, 5, "5 dimensions", (int64_t)nd);
    expect_bad(&f, nd + 4 + 8, 8, (uint64_t)-3, "'a'.ne[1] at byte", (int64_t)(nd + 12));
    expect_bad(&f, nd + 4 + 8, 8, (uint64_t)-3, "dimension -3 is negative", -1);
    expect_bad(&f, nd + 4 + 8, 8, 1ull << 62, "product of dimensions overflows int64",
               (int64_t)(nd + 12));
    expect_bad(&f, nd + 4, 8, 1ull << 61, "tensor size in bytes overflows int64", -1);
    expect_bad(&f, nd + 4 + 8, 8, 1000, "'a'.ne at byte", (int64_t)(nd + 4));
    expect_bad(&f, nd + 4 + 8, 8, 1000, "4000 elements of F32 need 16000 bytes, more than the whole", -1);
    expect_bad(&f, nd + 4 + 8, 8, 1ull << 38, "1099511627776 elements of F32", (int64_t)(nd + 4));
    expect_bad(&f, ty, 4, 4, "'a'.type at byte", (int64_t)ty);
    expect_bad(&f, ty, 4, 4, "unknown tensor type 4", -1);
    expect_bad(&f, ty, 4, 0xffffffffu, "unknown tensor type 4294967295", -1);
    expect_bad(&f, ty, 4, KVV_TYPE_COUNT, "unknown tensor type", -1);
    uint64_t bnd = t_ndims_at(&f, "b");
    expect_bad(&f, bnd + 4, 8, 48, "row length 48 is not a multiple of Q8_0's block size 32",
               (int64_t)(bnd + 4));
    uint64_t coff = t_type_at(&f, "c") + 4, boff = t_type_at(&f, "b") + 4;
    expect_bad(&f, coff, 8, 64 + 160 + 4, "'c'.offset at byte", (int64_t)coff);
    expect_bad(&f, coff, 8, 64 + 160 + 4, "not a multiple of the alignment 32", -1);
    expect_bad(&f, coff, 8, 4096, "lies outside the", (int64_t)coff);
    expect_bad(&f, coff, 8, UINT64_MAX - 31, "lies outside the", (int64_t)coff);
    expect_bad(&f, boff, 8, 32, "overlaps tensor[0] 'a'", -1);
    expect_bad(&f, coff, 8, 64 + 128, "'c'.offset at byte", (int64_t)coff);
    expect_bad(&f, coff, 8, 64 + 128, "overlaps tensor[1] 'b'", -1);
    expect_bad(&f, boff, 8, 0, "overlaps", -1);
    /* duplicate and malformed names */
    uint64_t bname = bnd - 1;
    expect_bad(&f, bname, 1, 'a', "tensor[1] 'a' at byte", (int64_t)(bname - 8));
    expect_bad(&f, bname, 1, 'a', "duplicate tensor name (first at tensor[0])", -1);
    expect_bad(&f, bname, 1, 0, "tensor name contains a NUL byte", -1);
    expect_bad(&f, bname - 8, 8, 0, "empty tensor name", (int64_t)(bname - 8));
    fx_close(&f);
}

/* Every prefix of the sample: rejected unless it still holds all tensor data. */
static void test_truncation_everywhere(void **state)
{
    (void)state;
    fixture f = fx_open();
    uint64_t data_end = 0;
    for (uint64_t i = 0; i < f.g->n_tensors; i++) {
        uint64_t e = f.g->data_offset + f.g->tensors[i].offset + f.g->tensors[i].nbytes;
        data_end = e > data_end ? e : data_end;
    }
    size_t rejected = 0;
    for (size_t len = 0; len < f.n; len++) {
        uint8_t *c = malloc(len ? len : 1);
        assert_non_null(c);
        memcpy(c, f.buf, len);
        kvv_gguf *g = NULL;
        kvv_error err = {0};
        kvv_status st = kvv_gguf_open_memory(c, len, "cut.gguf", &g, &err);
        if (len < data_end) {
            if (st != KVV_ERR_FORMAT)
                fail_msg("prefix of %zu bytes accepted", len);
            assert_non_null(strstr(err.msg, "cut.gguf: "));
            assert_non_null(strstr(err.msg, " at byte "));
            rejected++;
        } else {
            assert_int_equal(st, KVV_OK);
            kvv_gguf_close(g);
        }
        free(c);
    }
    assert_int_equal(rejected, data_end);
    print_message("%zu prefixes rejected, %zu accepted (tensor data ends at %llu)\n", rejected,
                  f.n - rejected, (unsigned long long)data_end);
    fx_close(&f);
}

/* Random byte flips (fixed seed): never a crash; every failure well-formed. */
static void test_random_corruption(void **state)
{
    (void)state;
    fixture f = fx_open();
    uint64_t rng = 0x9e3779b97f4a7c15u;
    uint8_t *c = malloc(f.n);
    int rejected = 0, accepted = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(c, f.buf, f.n);
        int flips = 1 + it % 4;
        for (int k = 0; k < flips; k++) {
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
            c[(rng >> 8) % f.n] = (uint8_t)(rng >> 40);
        }
        kvv_gguf *g = NULL;
        kvv_error err = {0};
        if (kvv_gguf_open_memory(c, f.n, "flip.gguf", &g, &err) == KVV_OK) {
            accepted++;
            for (uint64_t i = 0; i < g->n_tensors; i++)
                assert_true(g->tensors[i].data + g->tensors[i].nbytes <= c + f.n);
            kvv_gguf_close(g);
        } else {
            assert_true(err.status == KVV_ERR_FORMAT);
            assert_non_null(strstr(err.msg, " at byte "));
            rejected++;
        }
    }
    print_message("random flips: %d rejected, %d accepted\n", rejected, accepted);
    assert_true(rejected > 0);
    free(c);
    fx_close(&f);
}

/* -------------------------------------------------------------- writer */

static void test_writer_rejects(void **state)
{
    (void)state;
    assert_null(kvv_gguf_writer_new(1, 32));
    assert_null(kvv_gguf_writer_new(4, 32));
    assert_null(kvv_gguf_writer_new(3, 0));
    assert_null(kvv_gguf_writer_new(3, 24));
    kvv_gguf_writer_free(NULL);
    kvv_gguf_close(NULL);
    kvv_gguf_writer *w = kvv_gguf_writer_new(2, 32);
    assert_int_equal(kvv_gguf_writer_set_u32(w, "k", 1), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_str(w, "k", "x"), KVV_ERR_USAGE);
    assert_int_equal(kvv_gguf_writer_set_u32(w, "", 1), KVV_ERR_USAGE);
    assert_int_equal(kvv_gguf_writer_set_u32(w, NULL, 1), KVV_ERR_USAGE);
    assert_int_equal(kvv_gguf_writer_set_str(w, "general.alignment", "32"), KVV_ERR_USAGE);
    assert_int_equal(kvv_gguf_writer_set_u64(w, "general.alignment", 32), KVV_ERR_USAGE);
    assert_int_equal(kvv_gguf_writer_set_u32(w, "general.alignment", 3), KVV_ERR_USAGE);
    uint8_t bad_bool[2] = {1, 2};
    assert_int_equal(kvv_gguf_writer_set_arr(w, "b", KVV_GGUF_BOOL, bad_bool, 2), KVV_ERR_USAGE);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "b", KVV_GGUF_STRING, bad_bool, 2), KVV_ERR_USAGE);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "b", KVV_GGUF_ARRAY, bad_bool, 2), KVV_ERR_USAGE);
    float x[64] = {0};
    int64_t ne[5] = {33, 1, 1, 1, 1};
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "q", KVV_TYPE_Q8_0, 1, ne, x), KVV_ERR_USAGE);
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "q", KVV_TYPE_F32, 0, ne, x), KVV_ERR_USAGE);
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "q", KVV_TYPE_F32, 5, ne, x), KVV_ERR_USAGE);
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "q", (kvv_type)4, 1, ne, x), KVV_ERR_USAGE);
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "q", KVV_TYPE_F32, 1, ne, NULL), KVV_ERR_USAGE);
    int64_t neg[2] = {4, -1};
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "q", KVV_TYPE_F32, 2, neg, x), KVV_ERR_USAGE);
    int64_t huge[2] = {1ll << 40, 1ll << 40};
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "q", KVV_TYPE_F32, 2, huge, x), KVV_ERR_USAGE);
    char name[80];
    memset(name, 'n', sizeof name);
    name[64] = '\0';
    assert_int_equal(kvv_gguf_writer_add_tensor(w, name, KVV_TYPE_F32, 1, ne, x), KVV_ERR_USAGE);
    name[63] = '\0';
    assert_int_equal(kvv_gguf_writer_add_tensor(w, name, KVV_TYPE_F32, 1, ne, x), KVV_OK);
    assert_int_equal(kvv_gguf_writer_add_tensor(w, name, KVV_TYPE_F32, 1, ne, x), KVV_ERR_USAGE);
    uint8_t *buf;
    size_t n;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_writer_to_buffer(w, &buf, &n, &err), KVV_OK);
    kvv_gguf *g = open_ok(buf, n);
    assert_int_equal(g->version, 2);
    assert_int_equal(g->n_kv, 1);      /* failed setters left nothing behind */
    assert_int_equal(g->n_tensors, 1);
    kvv_gguf_close(g);
    free(buf);
    kvv_gguf_writer_free(w);
}

/* A writer made with alignment 64 records it as general.alignment. */
static void test_writer_alignment(void **state)
{
    (void)state;
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 64);
    float x[5] = {1, 2, 3, 4, 5};
    int64_t ne = 5;
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "p", KVV_TYPE_F32, 1, &ne, x), KVV_OK);
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "q", KVV_TYPE_F32, 1, &ne, x), KVV_OK);
    uint8_t *buf;
    size_t n;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_writer_to_buffer(w, &buf, &n, &err), KVV_OK);
    kvv_gguf *g = open_ok(buf, n);
    uint32_t a = 0;
    assert_int_equal(kvv_gguf_get_u32(g, "general.alignment", true, &a, &err), KVV_OK);
    assert_int_equal(a, 64);
    assert_int_equal(g->alignment, 64);
    assert_int_equal(g->data_offset % 64, 0);
    assert_int_equal(kvv_gguf_find_tensor(g, "q")->offset, 64);
    assert_int_equal(n, g->data_offset + 128);
    kvv_gguf_close(g);
    free(buf);
    kvv_gguf_writer_free(w);
}

/* No tensors: the file ends right after the kv section (no padding). */
static void test_vocab_only(void **state)
{
    (void)state;
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    static const char *const toks[2] = {"<s>", "x"};
    assert_int_equal(kvv_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 2), KVV_OK);
    uint8_t *buf;
    size_t n;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_writer_to_buffer(w, &buf, &n, &err), KVV_OK);
    size_t key = strlen("tokenizer.ggml.tokens");
    assert_int_equal(n, 24 + 8 + key + 4 + 4 + 8 + (8 + 3) + (8 + 1));
    kvv_gguf *g = open_ok(buf, n);
    assert_int_equal(g->n_tensors, 0);
    kvv_gguf_close(g);
    free(buf);
    kvv_gguf_writer_free(w);
}

/* Many keys, tensors and strings: hash lookups and a fast parse. */
static void test_large_counts(void **state)
{
    (void)state;
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    enum { NKEYS = 3000, NSTR = 200000 };
    char key[32];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof key, "k.%d", i);
        assert_int_equal(kvv_gguf_writer_set_u32(w, key, (uint32_t)i), KVV_OK);
    }
    char **strs = malloc(NSTR * sizeof *strs);
    char *pool = malloc(NSTR * 16);
    for (int i = 0; i < NSTR; i++) {
        strs[i] = pool + 16 * i;
        snprintf(strs[i], 16, "tok%d", i);
    }
    assert_int_equal(kvv_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens",
                                                 (const char *const *)strs, NSTR), KVV_OK);
    float x = 1.0f;
    int64_t ne = 1;
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof key, "blk.%d.w", i);
        assert_int_equal(kvv_gguf_writer_add_tensor(w, key, KVV_TYPE_F32, 1, &ne, &x), KVV_OK);
    }
    uint8_t *buf;
    size_t n;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_writer_to_buffer(w, &buf, &n, &err), KVV_OK);
    kvv_gguf_writer_free(w);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kvv_gguf *g = open_ok(buf, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    print_message("parsed %d keys, %d tensors, %d strings (%zu bytes) in %.2f ms\n", NKEYS,
                  NKEYS, NSTR, n, ms);
    assert_true(ms < 1000.0);
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof key, "k.%d", i);
        uint32_t v;
        assert_int_equal(kvv_gguf_get_u32(g, key, true, &v, &err), KVV_OK);
        assert_int_equal(v, i);
        snprintf(key, sizeof key, "blk.%d.w", i);
        assert_int_equal(kvv_gguf_find_tensor(g, key) - g->tensors, i);
    }
    const kvv_gguf_kv *tk = kvv_gguf_find_kv(g, "tokenizer.ggml.tokens");
    assert_int_equal(tk->arr_n, NSTR);
    assert_memory_equal(tk->arr_str[NSTR - 1].ptr, "tok199999", 9);
    kvv_gguf_close(g);
    free(buf);
    free(strs);
    free(pool);
}

static int count_tmp_files(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".tmp") != NULL;
    closedir(d);
    return n;
}

static void test_atomic_write(void **state)
{
    (void)state;
    const char *dir = kvv_test_tmpdir();
    char path[4200], bad[4300];
    snprintf(path, sizeof path, "%s/atomic.gguf", dir);
    kvv_gguf_writer *w = sample_writer();
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_writer_write(w, path, &err), KVV_OK);
    kvv_gguf *g;
    assert_int_equal(kvv_gguf_open(path, &g, &err), KVV_OK);
    assert_int_equal(g->n_tensors, 3);
    kvv_gguf_close(g);
    assert_int_equal(count_tmp_files(dir), 0);
    /* a directory where the file should go: not replaced, nothing left */
    snprintf(bad, sizeof bad, "%s/a-dir", dir);
    assert_int_equal(mkdir(bad, 0755), 0);
    snprintf(bad, sizeof bad, "%s/a-dir/keep", dir);
    FILE *keep = fopen(bad, "w");
    assert_non_null(keep);
    fclose(keep);
    snprintf(bad, sizeof bad, "%s/a-dir", dir);
    assert_int_equal(kvv_gguf_writer_write(w, bad, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, bad));
    struct stat sb;
    assert_int_equal(stat(bad, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(count_tmp_files(dir), 0);
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.gguf", dir);
    assert_int_equal(kvv_gguf_writer_write(w, bad, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "x.gguf"));
    /* reader I/O errors */
    assert_int_equal(kvv_gguf_open(bad, &g, &err), KVV_ERR_IO);
    assert_null(g);
    assert_non_null(strstr(err.msg, "cannot open"));
    assert_int_equal(kvv_gguf_open(dir, &g, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "not a regular file"));
    snprintf(bad, sizeof bad, "%s/empty.gguf", dir);
    keep = fopen(bad, "w");
    fclose(keep);
    assert_int_equal(kvv_gguf_open(bad, &g, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "header.magic at byte 0: truncated"));
    kvv_gguf_writer_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_value_types),
        cmocka_unit_test(test_getter_ranges),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_bad_kvs),
        cmocka_unit_test(test_bad_alignment),
        cmocka_unit_test(test_bad_tensors),
        cmocka_unit_test(test_truncation_everywhere),
        cmocka_unit_test(test_random_corruption),
        cmocka_unit_test(test_writer_rejects),
        cmocka_unit_test(test_writer_alignment),
        cmocka_unit_test(test_vocab_only),
        cmocka_unit_test(test_large_counts),
        cmocka_unit_test(test_atomic_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
