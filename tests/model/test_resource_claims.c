/*
 * test_resource_claims.c — sizes a GGUF file declares are checked before
 * anything is sized from them: a 2^40-element tensor, a 2^31 vocabulary
 * (declared, or as a token count) and a context of 2^40 are each a format
 * error naming the field and its byte offset, never an allocation.
 * Needs nothing from ../shared: the files are kvverify's own synthetic
 * llama model, re-written with kvverify's writer or patched in place.
 *
 *   build/tests/model/test_resource_claims              # the cmocka tests
 *   build/tests/model/test_resource_claims --write DIR  # write the hostile files
 *                                                       # (tests/cli/test_hostile.sh)
 */
#include "tests/test_util.h"

#include "model/arch.h"
#include "model/gguf.h"
#include "model/shapes.h"
#include "model/synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the files */

/* The synthetic llama-tiny model, serialized. */
static uint8_t *base_model(size_t *n)
{
    kvv_synth_opts o;
    memset(&o, 0, sizeof o);
    o.shape = kvv_shape_find("llama-tiny");
    o.type = KVV_TYPE_F32;
    o.seed = 1;
    kvv_gguf_writer *w = NULL;
    kvv_error err = {0};
    if (kvv_synth_build(&o, &w, &err) != KVV_OK)
        return NULL;
    uint8_t *buf = NULL;
    if (kvv_gguf_writer_to_buffer(w, &buf, n, &err) != KVV_OK)
        buf = NULL;
    kvv_gguf_writer_free(w);
    return buf;
}

/* The base model re-written with kv `key` replaced by `repl` (same key). */
static uint8_t *with_kv(const kvv_gguf_kv *repl, size_t *n)
{
    size_t bn;
    uint8_t *base = base_model(&bn);
    kvv_gguf *g = NULL;
    kvv_error err = {0};
    if (!base || kvv_gguf_open_memory(base, bn, "base.gguf", &g, &err) != KVV_OK) {
        free(base);
        return NULL;
    }
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, KVV_GGUF_DEFAULT_ALIGNMENT);
    bool ok = w != NULL;
    for (uint64_t i = 0; ok && i < g->n_kv; i++)
        ok = kvv_gguf_writer_copy_kv(w, strcmp(g->kv[i].key, repl->key) == 0 ? repl : &g->kv[i]) ==
             KVV_OK;
    for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
        const kvv_gguf_tensor *t = &g->tensors[i];
        ok = kvv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data) == KVV_OK;
    }
    uint8_t *out = NULL;
    if (ok && kvv_gguf_writer_to_buffer(w, &out, n, &err) != KVV_OK)
        out = NULL;
    kvv_gguf_writer_free(w);
    kvv_gguf_close(g);
    free(base);
    return out;
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The base model with a field patched in place: the u64 count of array kv
 * `key`, or dimensions ne[0] and ne[1] of tensor `tensor`. */
static uint8_t *patched(const char *key, uint64_t count, const char *tensor, uint64_t ne0,
                        uint64_t ne1, size_t *n)
{
    uint8_t *buf = base_model(n);
    kvv_gguf *g = NULL;
    kvv_error err = {0};
    if (!buf || kvv_gguf_open_memory(buf, *n, "base.gguf", &g, &err) != KVV_OK) {
        free(buf);
        return NULL;
    }
    if (key) {
        const kvv_gguf_kv *kv = kvv_gguf_find_kv(g, key);
        /* key length, key, value type, element type, then the count */
        put_le(buf + kv->offset + 8 + strlen(key) + 4 + 4, count, 8);
    } else {
        const kvv_gguf_tensor *t = kvv_gguf_find_tensor(g, tensor);
        uint64_t ne_at = t->info_offset + 8 + strlen(tensor) + 4;
        put_le(buf + ne_at, ne0, 8);
        put_le(buf + ne_at + 8, ne1, 8);
    }
    kvv_gguf_close(g);
    return buf;
}

typedef struct {
    const char *file;   /* name for --write */
    const char *field;  /* what the message must name */
    const char *what;   /* and say */
} hostile_case;

static const hostile_case k_cases[] = {
    {"tensor-2e40.gguf", "'token_embd.weight'.ne at byte",
     "1099511627776 elements of F32 need 4398046511104 bytes, more than the whole"},
    {"vocab-2e31.gguf", "llama.vocab_size at byte", "2147483648 is out of range (1..16777216)"},
    {"tokens-2e31.gguf", "'tokenizer.ggml.tokens'.array_count at byte",
     "array count 2147483648 cannot fit in the"},
    {"ctx-2e40.gguf", "'llama.context_length' at byte", "value 1099511627776 does not fit in uint32"},
    {"ctx-2e32.gguf", "llama.context_length at byte", "4294967295 is out of range (1..2147483647)"},
};
enum { N_CASES = sizeof k_cases / sizeof k_cases[0] };

/* The bytes of case i (malloc'ed). */
static uint8_t *make_case(int i, size_t *n)
{
    kvv_gguf_kv kv;
    memset(&kv, 0, sizeof kv);
    switch (i) {
    case 0:
        return patched(NULL, 0, "token_embd.weight", 1ull << 20, 1ull << 20, n);
    case 1:
        kv.key = (char *)"llama.vocab_size";
        kv.type = KVV_GGUF_UINT32;
        kv.v.u64 = 1ull << 31;
        return with_kv(&kv, n);
    case 2:
        return patched("tokenizer.ggml.tokens", 1ull << 31, NULL, 0, 0, n);
    case 3:
        kv.key = (char *)"llama.context_length";
        kv.type = KVV_GGUF_UINT64;
        kv.v.u64 = 1ull << 40;
        return with_kv(&kv, n);
    default:
        kv.key = (char *)"llama.context_length";
        kv.type = KVV_GGUF_UINT32;
        kv.v.u64 = 0xffffffffu;
        return with_kv(&kv, n);
    }
}

/* ------------------------------------------------------------ tests */

static void test_claims_refused_by_name(void **state)
{
    (void)state;
    for (int i = 0; i < N_CASES; i++) {
        size_t n;
        uint8_t *buf = make_case(i, &n);
        assert_non_null(buf);
        kvv_gguf *g = NULL;
        kvv_model *m = NULL;
        kvv_error err = {0};
        kvv_status st = kvv_gguf_open_memory(buf, n, k_cases[i].file, &g, &err);
        if (st == KVV_OK) {
            st = kvv_model_from_gguf(g, &m, &err);
            if (st)
                kvv_gguf_close(g);
        }
        printf("%-18s %s\n", k_cases[i].file, err.msg);
        assert_int_equal(st, KVV_ERR_FORMAT);
        assert_null(m);
        assert_non_null(strstr(err.msg, k_cases[i].file));
        assert_non_null(strstr(err.msg, k_cases[i].field));
        assert_non_null(strstr(err.msg, k_cases[i].what));
        free(buf);
    }
}

/* The unpatched base model binds (the cases fail for their field alone). */
static void test_base_binds(void **state)
{
    (void)state;
    size_t n;
    uint8_t *buf = base_model(&n);
    assert_non_null(buf);
    kvv_gguf *g = NULL;
    kvv_model *m = NULL;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_open_memory(buf, n, "base.gguf", &g, &err), KVV_OK);
    assert_int_equal(kvv_model_from_gguf(g, &m, &err), KVV_OK);
    assert_int_equal(m->hp.n_vocab, 512);
    kvv_model_close(m);
    free(buf);
}

static int write_cases(const char *dir)
{
    for (int i = 0; i < N_CASES; i++) {
        size_t n;
        uint8_t *buf = make_case(i, &n);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, k_cases[i].file);
        FILE *f = buf ? fopen(path, "wb") : NULL;
        if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
            fprintf(stderr, "test_resource_claims: cannot write %s\n", path);
            free(buf);
            return 2;
        }
        printf("%s\t%s\t%s\n", k_cases[i].file, k_cases[i].field, k_cases[i].what);
        free(buf);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write") == 0)
        return write_cases(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base_binds),
        cmocka_unit_test(test_claims_refused_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
