/* test_kvv_file.c — the .kvv container: round trip, determinism, and a
 * hostile reader (every truncation and every single-byte flip is caught). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "tests/test_util.h"
#include "vectors/kvv_file.h"

static const char meta_json[] = "{\"format\":\"kvv/1\",\"seed\":7}";

/* A small file with one record of every type. Caller frees *buf. */
static void build_sample(uint8_t **buf, size_t *size)
{
    kvv_error err = {0};
    kvv_file_writer *w = kvv_file_writer_new();
    assert_non_null(w);
    assert_int_equal(kvv_file_writer_add(w, "meta", KVV_REC_JSON, 0, NULL, meta_json,
                                         strlen(meta_json), &err), KVV_OK);
    int32_t tok[5] = {1, 403, 407, -3, 511};
    uint64_t d1[1] = {5};
    assert_int_equal(kvv_file_writer_add(w, "prompt", KVV_REC_I32, 1, d1, tok, sizeof tok, &err), KVV_OK);
    float lg[2][3] = {{1.0f, -0.0f, 3.5e-38f}, {0.1f, 2.0f, -7.25f}};
    uint64_t d2[2] = {2, 3};
    assert_int_equal(kvv_file_writer_add(w, "logits", KVV_REC_F32, 2, d2, lg, sizeof lg, &err), KVV_OK);
    uint64_t h[4] = {0x0123456789abcdefull, 0, ~0ull, 42};
    uint64_t d3[2] = {2, 2};
    assert_int_equal(kvv_file_writer_add(w, "hash.k", KVV_REC_U64, 2, d3, h, sizeof h, &err), KVV_OK);
    assert_int_equal(kvv_file_writer_add(w, "empty", KVV_REC_BYTES, 0, NULL, "", 0, &err), KVV_OK);
    assert_int_equal(kvv_file_writer_to_buffer(w, buf, size, &err), KVV_OK);
    kvv_file_writer_free(w);
}

static void test_round_trip(void **state)
{
    (void)state;
    uint8_t *buf;
    size_t size;
    build_sample(&buf, &size);
    kvv_file *f;
    kvv_error err = {0};
    assert_int_equal(kvv_file_read_memory(buf, size, "mem.kvv", &f, &err), KVV_OK);
    assert_int_equal(f->n_records, 5);
    assert_int_equal(f->version, KVV_FILE_VERSION);
    assert_string_equal(f->records[0].name, "meta");
    assert_string_equal((const char *)f->records[0].data, meta_json);
    const kvv_record *p = kvv_file_find(f, "prompt");
    assert_non_null(p);
    assert_int_equal(p->type, KVV_REC_I32);
    assert_int_equal(p->n_elem, 5);
    assert_int_equal(kvv_record_i32(p, 1), 403);
    assert_int_equal(kvv_record_i32(p, 3), -3);
    const kvv_record *l = kvv_file_find(f, "logits");
    assert_int_equal(l->n_dims, 2);
    assert_int_equal(l->dims[0], 2);
    assert_int_equal(l->dims[1], 3);
    float m0 = -0.0f, m1 = 3.5e-38f;
    uint32_t b0, b1;
    memcpy(&b0, &m0, 4);
    memcpy(&b1, &m1, 4);
    assert_int_equal(kvv_record_u32(l, 1), b0); /* the sign of -0 survives */
    assert_int_equal(kvv_record_u32(l, 2), b1);
    const kvv_record *h = kvv_file_find(f, "hash.k");
    assert_true(kvv_record_u64(h, 0) == 0x0123456789abcdefull);
    assert_true(kvv_record_u64(h, 2) == ~0ull);
    assert_int_equal(kvv_file_find(f, "empty")->raw_size, 0);
    assert_null(kvv_file_find(f, "nope"));
    kvv_file_free(f);
    free(buf);
}

static void test_deterministic_and_atomic(void **state)
{
    (void)state;
    uint8_t *a, *b;
    size_t na, nb;
    build_sample(&a, &na);
    build_sample(&b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);

    /* a write goes through a temp file; the result equals the buffer */
    char path[4200];
    snprintf(path, sizeof path, "%s/sample.kvv", kvv_test_tmpdir());
    kvv_error err = {0};
    kvv_file_writer *w = kvv_file_writer_new();
    assert_int_equal(kvv_file_writer_add(w, "meta", KVV_REC_JSON, 0, NULL, meta_json,
                                         strlen(meta_json), &err), KVV_OK);
    assert_int_equal(kvv_file_writer_write(w, path, &err), KVV_OK);
    /* writing into a missing folder fails and leaves nothing */
    char bad[4300];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.kvv", kvv_test_tmpdir());
    assert_int_equal(kvv_file_writer_write(w, bad, &err), KVV_ERR_IO);
    kvv_file_writer_free(w);
    kvv_file *f;
    assert_int_equal(kvv_file_read(path, &f, &err), KVV_OK);
    assert_int_equal(f->n_records, 1);
    kvv_file_free(f);
    free(a);
    free(b);
}

static void test_writer_rejects(void **state)
{
    (void)state;
    kvv_error err = {0};
    kvv_file_writer *w = kvv_file_writer_new();
    int32_t x[2] = {1, 2};
    /* meta must come first */
    assert_int_equal(kvv_file_writer_add(w, "prompt", KVV_REC_I32, 0, NULL, x, 8, &err), KVV_ERR_USAGE);
    assert_int_equal(kvv_file_writer_add(w, "meta", KVV_REC_JSON, 0, NULL, "{}", 2, &err), KVV_OK);
    assert_int_equal(kvv_file_writer_add(w, "meta", KVV_REC_JSON, 0, NULL, "{}", 2, &err), KVV_ERR_USAGE);
    assert_int_equal(kvv_file_writer_add(w, "Bad Name", KVV_REC_I32, 0, NULL, x, 8, &err), KVV_ERR_USAGE);
    assert_int_equal(kvv_file_writer_add(w, "odd", KVV_REC_I32, 0, NULL, x, 7, &err), KVV_ERR_USAGE);
    uint64_t d[1] = {3};
    assert_int_equal(kvv_file_writer_add(w, "shape", KVV_REC_I32, 1, d, x, 8, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "dims give 3"));
    kvv_file_writer_free(w);
}

/* Every proper prefix of a valid file is rejected as a format error. */
static void test_every_truncation(void **state)
{
    (void)state;
    uint8_t *buf;
    size_t size;
    build_sample(&buf, &size);
    for (size_t n = 0; n < size; n++) {
        kvv_file *f = (kvv_file *)1;
        kvv_error err = {0};
        kvv_status st = kvv_file_read_memory(buf, n, "t.kvv", &f, &err);
        if (st != KVV_ERR_FORMAT)
            fail_msg("prefix of %zu bytes: status %d", n, st);
        assert_null(f);
        assert_non_null(strstr(err.msg, "t.kvv: record "));
        assert_non_null(strstr(err.msg, " at byte "));
    }
    free(buf);
}

/* Every single-byte change anywhere in the file is caught, and the message
 * names the record whose bytes were hit (or the header). */
static void test_every_byte_flip(void **state)
{
    (void)state;
    uint8_t *buf;
    size_t size;
    build_sample(&buf, &size);
    kvv_file *good;
    kvv_error err = {0};
    assert_int_equal(kvv_file_read_memory(buf, size, "g.kvv", &good, &err), KVV_OK);
    for (size_t i = 0; i < size; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            buf[i] ^= (uint8_t)(1u << bit);
            kvv_file *f = NULL;
            kvv_error e = {0};
            kvv_status st = kvv_file_read_memory(buf, size, "g.kvv", &f, &e);
            buf[i] ^= (uint8_t)(1u << bit);
            if (st != KVV_ERR_FORMAT)
                fail_msg("flip of bit %d at byte %zu not detected (status %d)", bit, i, st);
            /* which record owns byte i, and where does it end? */
            const char *owner = "header";
            uint64_t lo = 0, hi = KVV_FILE_HEADER_SIZE;
            for (int r = 0; r < good->n_records; r++)
                if (i >= good->records[r].offset) {
                    owner = good->records[r].name;
                    lo = good->records[r].offset;
                    hi = r + 1 < good->n_records ? good->records[r + 1].offset : size;
                }
            /* the message names the owning record, or (when the flip hit the
             * name itself, or a count in the header) points inside it */
            char want[96];
            snprintf(want, sizeof want, "record %s at byte", owner);
            const char *at = strstr(e.msg, " at byte ");
            unsigned long long where = at ? strtoull(at + 9, NULL, 10) : ~0ull;
            bool named = strstr(e.msg, want) != NULL;
            bool inside = where >= lo && where < hi;
            bool header_count = strstr(e.msg, "record header at byte 8") != NULL;
            if (!named && !inside && !header_count)
                fail_msg("byte %zu (in %s): message '%s'", i, owner, e.msg);
        }
    }
    kvv_file_free(good);
    free(buf);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void test_header_messages(void **state)
{
    (void)state;
    uint8_t *buf;
    size_t size;
    build_sample(&buf, &size);
    kvv_file *f;
    kvv_error err = {0};

    put32(buf + 4, 2);
    assert_int_equal(kvv_file_read_memory(buf, size, "v.kvv", &f, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "v.kvv: record header at byte 4: unknown format version 2"));
    put32(buf + 4, KVV_FILE_VERSION);

    buf[0] = 'G';
    assert_int_equal(kvv_file_read_memory(buf, size, "m.kvv", &f, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "not a .kvv file"));
    buf[0] = 'K';

    put32(buf + 8, 1000000);
    assert_int_equal(kvv_file_read_memory(buf, size, "n.kvv", &f, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "at byte 8"));
    put32(buf + 8, 5);

    /* trailing garbage */
    uint8_t *more = malloc(size + 3);
    memcpy(more, buf, size);
    memset(more + size, 0, 3);
    assert_int_equal(kvv_file_read_memory(more, size + 3, "x.kvv", &f, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "3 bytes after the last record"));
    free(more);

    assert_int_equal(kvv_file_read("/nonexistent/dir/a.kvv", &f, &err), KVV_ERR_IO);
    free(buf);
}

/* A record claiming a huge uncompressed size for a few compressed bytes is
 * rejected before any allocation (decompression-bomb bound). */
static void test_size_bounds(void **state)
{
    (void)state;
    uint8_t b[16 + 2 + 1 + 4 + 8 + 8 + 4 + 8];
    memset(b, 0, sizeof b);
    memcpy(b, KVV_FILE_MAGIC, 4);
    put32(b + 4, KVV_FILE_VERSION);
    put32(b + 8, 1);
    uint8_t *p = b + 16;
    p[0] = 1; /* name length 1 */
    p[2] = 'm';
    p[3] = KVV_REC_BYTES;
    /* raw size 2^31 with 8 compressed bytes */
    uint8_t *sz = p + 3 + 4;
    put32(sz, 0);
    put32(sz + 4, 0);
    sz[3] = 0x80; /* 0x80000000 */
    put32(sz + 8, 8);
    kvv_file *f;
    kvv_error err = {0};
    assert_int_equal(kvv_file_read_memory(b, sizeof b, "bomb.kvv", &f, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "impossible for 8 compressed bytes"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_deterministic_and_atomic),
        cmocka_unit_test(test_writer_rejects),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_every_byte_flip),
        cmocka_unit_test(test_header_messages),
        cmocka_unit_test(test_size_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
