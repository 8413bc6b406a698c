/*
 * test_gguf_corpus.c — the seed corpus of the GGUF fuzz target
 * (tests/fuzz/corpus/gguf/), generated here with the writer and checked:
 *
 *   each seed gets the reader's expected verdict (valid, or rejected with
 *   the named reason), and each committed seed file equals what this test
 *   generates. To regenerate the folder after changing a seed:
 *
 *     KVV_CORPUS_UPDATE=1 build/tests/model/test_gguf_corpus
 *
 * Seeds are small (a few hundred bytes): a valid file with every value
 * type, a vocab-only file, a v2 file with alignment 64, and corrupted or
 * truncated variants that reach each validation rule.
 */
#include "tests/test_util.h"

#include "model/gguf.h"
#include "model/gguf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CORPUS_DIR "tests/fuzz/corpus/gguf"

typedef struct {
    uint8_t *buf;
    size_t n;
} bytes;

static bytes to_bytes(kvv_gguf_writer *w)
{
    bytes b;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_writer_to_buffer(w, &b.buf, &b.n, &err), KVV_OK);
    kvv_gguf_writer_free(w);
    return b;
}

/* Two kvs of every kind that matters, an F32 and a Q8_0 tensor. */
static bytes small_valid(void)
{
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    static const char *const toks[2] = {"<s>", "hi"};
    static const int32_t ints[3] = {-1, 0, 7};
    assert_int_equal(kvv_gguf_writer_set_str(w, "general.architecture", "llama"), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u32(w, "t.n", 7), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u32(w, "t.m", 8), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_f32(w, "t.f", 1e-5f), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr_str(w, "t.tok", toks, 2), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "t.ints", KVV_GGUF_INT32, ints, 3), KVV_OK);
    float wv[16];
    uint8_t q[34];
    for (int i = 0; i < 16; i++)
        wv[i] = (float)i * 0.25f;
    for (int i = 0; i < 34; i++)
        q[i] = (uint8_t)(i * 5);
    const int64_t ne_w[2] = {8, 2}, ne_q[1] = {32};
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "w", KVV_TYPE_F32, 2, ne_w, wv), KVV_OK);
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "q", KVV_TYPE_Q8_0, 1, ne_q, q), KVV_OK);
    return to_bytes(w);
}

static bytes all_types(void)
{
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    kvv_gguf_kv kv = {.key = "a.u8", .type = KVV_GGUF_UINT8, .v.u64 = 9};
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    kv = (kvv_gguf_kv){.key = "a.i8", .type = KVV_GGUF_INT8, .v.i64 = -9};
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    kv = (kvv_gguf_kv){.key = "a.u16", .type = KVV_GGUF_UINT16, .v.u64 = 999};
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    kv = (kvv_gguf_kv){.key = "a.i16", .type = KVV_GGUF_INT16, .v.i64 = -999};
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    kv = (kvv_gguf_kv){.key = "a.i64", .type = KVV_GGUF_INT64, .v.i64 = -99999};
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    kv = (kvv_gguf_kv){.key = "a.f64", .type = KVV_GGUF_FLOAT64, .v.f64 = 0.5};
    assert_int_equal(kvv_gguf_writer_copy_kv(w, &kv), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u32(w, "a.u32", 1), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_i32(w, "a.i32", -1), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u64(w, "a.u64", 1ull << 40), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_f32(w, "a.f32", 2.5f), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_bool(w, "a.bool", true), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_str(w, "a.str", "x"), KVV_OK);
    static const uint8_t bools[2] = {0, 1};
    static const double dbl[2] = {1.0, -1.0};
    assert_int_equal(kvv_gguf_writer_set_arr(w, "a.arr.bool", KVV_GGUF_BOOL, bools, 2), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "a.arr.f64", KVV_GGUF_FLOAT64, dbl, 2), KVV_OK);
    uint16_t h[4] = {0x3c00, 0x4000, 0xc000, 0};
    const int64_t ne[3] = {2, 1, 2};
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "h", KVV_TYPE_F16, 3, ne, h), KVV_OK);
    return to_bytes(w);
}

static bytes vocab_only(void)
{
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    static const char *const toks[4] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81the"};
    static const float scores[4] = {0, 0, 0, -1.5f};
    assert_int_equal(kvv_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 4), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_arr(w, "tokenizer.ggml.scores", KVV_GGUF_FLOAT32,
                                             scores, 4), KVV_OK);
    return to_bytes(w);
}

static bytes v2_align64(void)
{
    kvv_gguf_writer *w = kvv_gguf_writer_new(2, 64);
    uint8_t q[128] = {0};  /* 36 bytes of Q4_0, 128 of F32 */
    const int64_t ne[2] = {32, 2};
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "q4", KVV_TYPE_Q4_0, 2, ne, q), KVV_OK);
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "z", KVV_TYPE_F32, 1, ne, q), KVV_OK);
    return to_bytes(w);
}

/* --------------------------------------------------------------- seeds */

typedef struct {
    const char *name;
    bytes b;
    const char *reason;   /* NULL: valid */
} seed;

/* Patch c in place (c is owned by the caller). */
static bytes patch_in(bytes c, uint64_t pos, int width, uint64_t v)
{
    if (width == 8)
        kvv_gguf_st64(c.buf + pos, v);
    else if (width == 4)
        kvv_gguf_st32(c.buf + pos, (uint32_t)v);
    else
        c.buf[pos] = (uint8_t)v;
    return c;
}

static bytes prefix(bytes base, size_t n);

/* A patched copy of base. */
static bytes patched(bytes base, uint64_t pos, int width, uint64_t v)
{
    return patch_in(prefix(base, base.n), pos, width, v);
}

static bytes prefix(bytes base, size_t n)
{
    bytes c = {malloc(n), n};
    assert_non_null(c.buf);
    memcpy(c.buf, base.buf, n);
    return c;
}

static size_t make_seeds(seed *s, size_t max)
{
    bytes base = small_valid();
    kvv_gguf *g;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_open_memory(base.buf, base.n, "base", &g, &err), KVV_OK);
    const kvv_gguf_kv *kn = kvv_gguf_find_kv(g, "t.n"), *km = kvv_gguf_find_kv(g, "t.m");
    const kvv_gguf_kv *kt = kvv_gguf_find_kv(g, "t.tok");
    const kvv_gguf_tensor *tw = kvv_gguf_find_tensor(g, "w"), *tq = kvv_gguf_find_tensor(g, "q");
    uint64_t kn_type = kn->offset + 8 + 3, kt_type = kt->offset + 8 + 5;
    uint64_t w_nd = tw->info_offset + 8 + 1, q_nd = tq->info_offset + 8 + 1;
    uint64_t q_type = q_nd + 4 + 8, q_off = q_type + 4, w_type = w_nd + 4 + 16;
    uint64_t data_end = g->data_offset + tq->offset + tq->nbytes;
    size_t n = 0;
    s[n++] = (seed){"valid-small.gguf", base, NULL};
    s[n++] = (seed){"valid-all-types.gguf", all_types(), NULL};
    s[n++] = (seed){"valid-vocab-only.gguf", vocab_only(), NULL};
    s[n++] = (seed){"valid-v2-align64.gguf", v2_align64(), NULL};
    s[n++] = (seed){"bad-magic.gguf", patch_in(prefix(base, 64), 0, 4, 0x47475546), "not a GGUF file"};
    s[n++] = (seed){"bad-version1.gguf", patch_in(prefix(base, 64), 4, 4, 1), "version 1"};
    s[n++] = (seed){"bad-huge-n-kv.gguf", patch_in(prefix(base, 64), 16, 8, UINT64_MAX), "kv count"};
    s[n++] = (seed){"bad-value-type.gguf", patched(base, kn_type, 4, 13), "unknown value type"};
    s[n++] = (seed){"bad-nested-array.gguf", patched(base, kt_type + 4, 4, 9), "nested arrays"};
    s[n++] = (seed){"bad-string-length.gguf", patched(base, kt_type + 16, 8, 1ull << 40),
                    "string length"};
    s[n++] = (seed){"bad-duplicate-key.gguf", patched(base, km->offset + 10, 1, 'n'),
                    "duplicate key"};
    s[n++] = (seed){"bad-duplicate-tensor.gguf", patched(base, tq->info_offset + 8, 1, 'w'),
                    "duplicate tensor name"};
    s[n++] = (seed){"bad-n-dims.gguf", patched(base, w_nd, 4, 5), "dimensions"};
    s[n++] = (seed){"bad-dims-overflow.gguf", patched(base, w_nd + 4, 8, 1ull << 62),
                    "overflows int64"};
    s[n++] = (seed){"bad-tensor-type.gguf", patched(base, w_type, 4, 5), "unknown tensor type 5"};
    s[n++] = (seed){"bad-row-length.gguf", patched(base, q_nd + 4, 8, 16), "block size"};
    s[n++] = (seed){"bad-misaligned.gguf", patched(base, q_off, 8, tq->offset + 8), "alignment"};
    s[n++] = (seed){"bad-overlap.gguf", patched(base, q_off, 8, 32), "overlaps"};
    s[n++] = (seed){"bad-out-of-range.gguf", patched(base, q_off, 8, 1u << 20), "lies outside"};
    s[n++] = (seed){"bad-truncated-kv.gguf", prefix(base, (size_t)kt_type + 20), "truncated"};
    s[n++] = (seed){"bad-truncated-data.gguf", prefix(base, (size_t)data_end - 1), "lies outside"};
    assert_true(n <= max);
    kvv_gguf_close(g);
    return n;
}

static void test_seed_corpus(void **state)
{
    (void)state;
    seed s[32];
    size_t n = make_seeds(s, 32);
    const char *update = getenv("KVV_CORPUS_UPDATE");
    bool write = update && *update && strcmp(update, "0") != 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        kvv_gguf *g = NULL;
        kvv_error err = {0};
        kvv_status st = kvv_gguf_open_memory(s[i].b.buf, s[i].b.n, s[i].name, &g, &err);
        if (s[i].reason == NULL) {
            if (st != KVV_OK)
                fail_msg("%s should be valid: %s", s[i].name, err.msg);
            kvv_gguf_close(g);
        } else {
            if (st != KVV_ERR_FORMAT || !strstr(err.msg, s[i].reason))
                fail_msg("%s: wanted '%s', got status %d '%s'", s[i].name, s[i].reason, st,
                         err.msg);
        }
        char path[256];
        snprintf(path, sizeof path, "%s/%s", CORPUS_DIR, s[i].name);
        if (write) {
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(s[i].b.buf, 1, s[i].b.n, f) != s[i].b.n || fclose(f) != 0)
                fail_msg("cannot write %s", path);
        } else {
            size_t got_n = 0;
            uint8_t *got = kvv_test_read_file(path, &got_n);
            if (!got)
                fail_msg("%s missing: regenerate with KVV_CORPUS_UPDATE=1 %s", path,
                         "build/tests/model/test_gguf_corpus (from the repository root)");
            if (got_n != s[i].b.n || memcmp(got, s[i].b.buf, got_n) != 0)
                fail_msg("%s differs from the generated seed: regenerate with "
                         "KVV_CORPUS_UPDATE=1", path);
            free(got);
        }
        total += s[i].b.n;
        free(s[i].b.buf);
    }
    print_message("%zu seeds, %zu bytes%s\n", n, total, write ? " (written)" : "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
