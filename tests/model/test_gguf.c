/*
 * test_gguf.c — the GGUF reader and writer against the real files in
 * ../shared (skipped, with a message, when ../shared is absent):
 *
 *   - every file of models/malformed rejected with the reason README.md
 *     gives (the v2 file accepted);
 *   - every GGUF in models/, models/vocab/ and peer/models/ parsed;
 *   - file size, sha256, tensor count, every tensor's type, the metadata and
 *     the shapes implied by the hyperparameters as peer/models.json lists them;
 *   - a round trip through the writer (copy every kv, add every tensor)
 *     reproduces each file byte for byte, and every tensor's sha256.
 *
 * Hand-built hostile inputs are in test_gguf_hostile.c.
 */
#include "tests/test_util.h"

#include "model/gguf.h"

#include <dirent.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

typedef struct {
    char **names;   /* full paths, sorted */
    size_t n;
} file_list;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every regular *.gguf in dir (sorted). */
static file_list list_gguf(const char *dir)
{
    file_list fl = {0};
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf") != 0)
            continue;
        fl.names = realloc(fl.names, (fl.n + 1) * sizeof *fl.names);
        assert_non_null(fl.names);
        size_t need = strlen(dir) + len + 2;
        fl.names[fl.n] = malloc(need);
        assert_non_null(fl.names[fl.n]);
        snprintf(fl.names[fl.n], need, "%s/%s", dir, e->d_name);
        fl.n++;
    }
    closedir(d);
    qsort(fl.names, fl.n, sizeof *fl.names, cmp_str);
    return fl;
}

static void free_list(file_list *fl)
{
    for (size_t i = 0; i < fl->n; i++)
        free(fl->names[i]);
    free(fl->names);
}

/* Copy of a shared path (kvv_test_shared returns a static buffer). */
static char *shared_dir(const char *rel)
{
    const char *p = kvv_test_shared(rel);
    return p ? strdup(p) : NULL;
}

static void sha256_hex(const void *data, size_t n, char hex[65])
{
    struct sha256_ctx ctx;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, n, data);
    sha256_digest(&ctx, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* ------------------------------------------------------------ malformed */

static void test_malformed_files(void **state)
{
    (void)state;
    char *dir = shared_dir("models/malformed");
    if (!dir) {
        skip();
        return;
    }
    /* expectations from ../shared/models/README.md, by file-name pattern */
    static const struct {
        const char *pattern;
        const char *reason;   /* NULL: the file is valid */
        const char *field;
    } expect[] = {
        {".v1-", "GGUF version 1 is not supported", "header.version at byte 4"},
        {"FUGG", "not a GGUF file (magic 'FUGG')", "header.magic at byte 0"},
        {"dbrx", "duplicate key", "'general.file_type' at byte"},
        {".v2-", NULL, NULL},
    };
    file_list fl = list_gguf(dir);
    assert_int_equal(fl.n, 5);
    int rejected = 0, accepted = 0;
    for (size_t i = 0; i < fl.n; i++) {
        const char *base = strrchr(fl.names[i], '/') + 1;
        size_t k = 0;
        while (k < sizeof expect / sizeof expect[0] && !strstr(base, expect[k].pattern))
            k++;
        if (k == sizeof expect / sizeof expect[0])
            fail_msg("no expectation for %s: add it from README.md", base);
        kvv_gguf *g = NULL;
        kvv_error err = {0};
        kvv_status st = kvv_gguf_open(fl.names[i], &g, &err);
        if (!expect[k].reason) {
            if (st != KVV_OK)
                fail_msg("%s should be accepted: %s", base, err.msg);
            assert_int_equal(g->version, 2);
            assert_int_equal(g->n_tensors, 0);
            const kvv_gguf_kv *tok = kvv_gguf_find_kv(g, "tokenizer.ggml.tokens");
            assert_non_null(tok);
            assert_int_equal(tok->arr_type, KVV_GGUF_STRING);
            assert_true(tok->arr_n > 1000);
            kvv_gguf_close(g);
            accepted++;
            continue;
        }
        print_message("%s -> %s\n", base, err.msg);
        assert_int_equal(st, KVV_ERR_FORMAT);
        assert_null(g);
        assert_non_null(strstr(err.msg, fl.names[i]));
        assert_non_null(strstr(err.msg, expect[k].reason));
        assert_non_null(strstr(err.msg, expect[k].field));
        assert_null(strchr(err.msg, '\n'));
        rejected++;
    }
    assert_int_equal(rejected, 4);
    assert_int_equal(accepted, 1);
    free_list(&fl);
    free(dir);
}

/* dbrx's duplicate is reported at the second occurrence, naming the first. */
static void test_dbrx_duplicate_offset(void **state)
{
    (void)state;
    const char *p = kvv_test_shared("models/malformed/ggml-vocab-dbrx.gguf");
    if (!p) {
        skip();
        return;
    }
    kvv_gguf *g = NULL;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_open(p, &g, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "kv[14] 'general.file_type' at byte 561: duplicate key "
                                    "(first at kv[10])"));
}

/* ------------------------------------------------------- parse them all */

/* Vocabulary sizes from ../shared/models/README.md. */
static const struct {
    const char *file;
    uint64_t n_tokens;
} vocab_sizes[] = {
    {"ggml-vocab-llama-spm.gguf", 32000}, {"ggml-vocab-phi-3.gguf", 32064},
    {"ggml-vocab-baichuan.gguf", 64000},  {"ggml-vocab-gpt-2.gguf", 50257},
    {"ggml-vocab-deepseek-coder.gguf", 32256}, {"ggml-vocab-deepseek-llm.gguf", 102400},
    {"ggml-vocab-falcon.gguf", 65024},    {"ggml-vocab-mpt.gguf", 50432},
    {"ggml-vocab-refact.gguf", 49216},    {"ggml-vocab-starcoder.gguf", 49152},
    {"ggml-vocab-gpt-neox.gguf", 50432},  {"ggml-vocab-stablelm.gguf", 100352},
    {"ggml-vocab-bert-bge.gguf", 30522},
};

static void check_tensors_sane(const kvv_gguf *g)
{
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kvv_gguf_tensor *t = &g->tensors[i];
        assert_ptr_equal(kvv_gguf_find_tensor(g, t->name), t);
        assert_true(t->n_dims >= 1 && t->n_dims <= 4);
        assert_int_equal(t->offset % g->alignment, 0);
        assert_true(g->data_offset + t->offset + t->nbytes <= g->size);
        assert_ptr_equal(t->data, g->base + g->data_offset + t->offset);
        uint64_t rows = (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        assert_int_equal(t->nbytes, kvv_type_row_size(t->type, t->ne[0]) * rows);
    }
    for (uint64_t i = 0; i < g->n_kv; i++)
        assert_ptr_equal(kvv_gguf_find_kv(g, g->kv[i].key), &g->kv[i]);
    assert_null(kvv_gguf_find_kv(g, "no.such.key"));
    assert_null(kvv_gguf_find_tensor(g, "no.such.tensor"));
}

static void parse_dir(const char *rel, bool vocab, int min_files)
{
    char *dir = shared_dir(rel);
    if (!dir) {
        skip();
        return;
    }
    file_list fl = list_gguf(dir);
    assert_true((int)fl.n >= min_files);
    for (size_t i = 0; i < fl.n; i++) {
        kvv_gguf *g = NULL;
        kvv_error err = {0};
        if (kvv_gguf_open(fl.names[i], &g, &err) != KVV_OK)
            fail_msg("%s", err.msg);
        assert_int_equal(g->version, 3);
        check_tensors_sane(g);
        char arch[64];
        assert_int_equal(kvv_gguf_get_str(g, "general.architecture", !vocab, arch, sizeof arch,
                                          &err), KVV_OK);
        if (vocab) {
            assert_int_equal(g->n_tensors, 0);
            const char *base = strrchr(fl.names[i], '/') + 1;
            const kvv_gguf_kv *tok = kvv_gguf_find_kv(g, "tokenizer.ggml.tokens");
            assert_non_null(tok);
            assert_int_equal(tok->type, KVV_GGUF_ARRAY);
            assert_int_equal(tok->arr_type, KVV_GGUF_STRING);
            size_t k = 0;
            while (k < sizeof vocab_sizes / sizeof vocab_sizes[0] &&
                   strcmp(vocab_sizes[k].file, base) != 0)
                k++;
            if (k == sizeof vocab_sizes / sizeof vocab_sizes[0])
                fail_msg("no vocabulary size for %s", base);
            assert_int_equal(tok->arr_n, vocab_sizes[k].n_tokens);
        } else {
            assert_true(g->n_tensors > 0);
            assert_int_equal(g->data_offset % g->alignment, 0);
        }
        kvv_gguf_close(g);
    }
    free_list(&fl);
    free(dir);
}

static void test_parse_models(void **state) { (void)state; parse_dir("models", false, 3); }
static void test_parse_vocab(void **state) { (void)state; parse_dir("models/vocab", true, 13); }
static void test_parse_peer(void **state) { (void)state; parse_dir("peer/models", false, 11); }

/* stories260K-q8_0: 48 tensors, 32 Q8_0, 5 F16 (ffn_down), 11 F32. */
static void test_stories_q8_0_types(void **state)
{
    (void)state;
    const char *p = kvv_test_shared("models/stories260K-q8_0.gguf");
    if (!p) {
        skip();
        return;
    }
    kvv_gguf *g;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_open(p, &g, &err), KVV_OK);
    int n[KVV_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < g->n_tensors; i++)
        n[g->tensors[i].type]++;
    assert_int_equal(g->n_tensors, 48);
    assert_int_equal(n[KVV_TYPE_Q8_0], 32);
    assert_int_equal(n[KVV_TYPE_F16], 5);
    assert_int_equal(n[KVV_TYPE_F32], 11);
    const kvv_gguf_tensor *t = kvv_gguf_find_tensor(g, "blk.0.ffn_down.weight");
    assert_non_null(t);
    assert_int_equal(t->type, KVV_TYPE_F16);
    assert_int_equal(t->ne[0], 172);
    assert_int_equal(t->ne[1], 64);
    uint32_t u;
    float f;
    assert_int_equal(kvv_gguf_get_u32(g, "llama.block_count", true, &u, &err), KVV_OK);
    assert_int_equal(u, 5);
    assert_int_equal(kvv_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", true, &f,
                                      &err), KVV_OK);
    assert_true(f == 1e-5f);
    kvv_gguf_close(g);
}

/* ------------------------------------------------------------ models.json */

static void check_metadata(const kvv_gguf *g, json_t *meta)
{
    const char *key;
    json_t *val;
    json_object_foreach(meta, key, val) {
        if (strcmp(key, "GGUF.version") == 0) {
            assert_int_equal(g->version, json_integer_value(val));
            continue;
        }
        if (strcmp(key, "GGUF.tensor_count") == 0) {
            assert_int_equal(g->n_tensors, json_integer_value(val));
            continue;
        }
        if (strcmp(key, "GGUF.kv_count") == 0) {
            assert_int_equal(g->n_kv, json_integer_value(val));
            continue;
        }
        const kvv_gguf_kv *kv = kvv_gguf_find_kv(g, key);
        if (!kv)
            fail_msg("%s: key %s missing", g->path, key);
        if (json_is_string(val)) {
            assert_int_equal(kv->type, KVV_GGUF_STRING);
            assert_int_equal(kv->v.str.len, strlen(json_string_value(val)));
            assert_memory_equal(kv->v.str.ptr, json_string_value(val), kv->v.str.len);
        } else if (json_is_integer(val)) {
            json_int_t want = json_integer_value(val);
            if (kv->type == KVV_GGUF_INT32 || kv->type == KVV_GGUF_INT64)
                assert_int_equal(kv->v.i64, want);
            else
                assert_int_equal(kv->v.u64, (uint64_t)want);
        } else if (json_is_real(val)) {
            assert_true(kv->type == KVV_GGUF_FLOAT32 || kv->type == KVV_GGUF_FLOAT64);
            if (kv->v.f64 != json_real_value(val))
                fail_msg("%s: %s is %.17g, models.json says %.17g", g->path, key, kv->v.f64,
                         json_real_value(val));
        } else if (json_is_boolean(val)) {
            assert_int_equal(kv->type, KVV_GGUF_BOOL);
            assert_int_equal(kv->v.u64, json_is_true(val) ? 1 : 0);
        } else {
            fail_msg("%s: unexpected JSON value for %s", g->path, key);
        }
    }
}

static void check_shape(const kvv_gguf *g, const char *name, int64_t ne0, int64_t ne1)
{
    const kvv_gguf_tensor *t = kvv_gguf_find_tensor(g, name);
    if (!t)
        fail_msg("%s: tensor %s missing", g->path, name);
    if (t->ne[0] != ne0 || t->ne[1] != ne1)
        fail_msg("%s: %s is [%lld, %lld], expected [%lld, %lld]", g->path, name,
                 (long long)t->ne[0], (long long)t->ne[1], (long long)ne0, (long long)ne1);
}

static void check_model_entry(const char *stem, json_t *m)
{
    const char *file = json_string_value(json_object_get(m, "file"));
    assert_non_null(file);
    char rel[256];
    snprintf(rel, sizeof rel, "%s/%s", strncmp(file, "synth-", 6) == 0 ? "peer/models" : "models",
             file);
    const char *p = kvv_test_shared(rel);
    if (!p)
        fail_msg("models.json lists %s (%s) but it is missing", stem, rel);
    kvv_gguf *g;
    kvv_error err = {0};
    if (kvv_gguf_open(p, &g, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(g->size, json_integer_value(json_object_get(m, "size")));
    char hex[65];
    sha256_hex(g->base, g->size, hex);
    assert_string_equal(hex, json_string_value(json_object_get(m, "sha256")));
    assert_int_equal(g->n_tensors, json_integer_value(json_object_get(m, "n_tensors")));

    json_t *types = json_object_get(m, "tensor_types");
    assert_int_equal(json_object_size(types), g->n_tensors);
    const char *name;
    json_t *tv;
    json_object_foreach(types, name, tv) {
        const kvv_gguf_tensor *t = kvv_gguf_find_tensor(g, name);
        if (!t)
            fail_msg("%s: tensor %s missing", p, name);
        assert_string_equal(kvv_type_name(t->type), json_string_value(tv));
    }
    json_t *counts = json_object_get(m, "tensor_type_counts");
    json_object_foreach(counts, name, tv) {
        json_int_t n = 0;
        for (uint64_t i = 0; i < g->n_tensors; i++)
            n += strcmp(kvv_type_name(g->tensors[i].type), name) == 0;
        assert_int_equal(n, json_integer_value(tv));
    }
    check_metadata(g, json_object_get(m, "metadata"));

    /* shapes implied by the hyperparameters (ne0 is the input dimension) */
    int64_t n_embd = json_integer_value(json_object_get(m, "n_embd"));
    int64_t n_vocab = json_integer_value(json_object_get(m, "n_vocab"));
    int64_t n_ff = json_integer_value(json_object_get(m, "n_ff"));
    int64_t hd = json_integer_value(json_object_get(m, "head_dim"));
    int64_t nh = json_integer_value(json_object_get(m, "n_head"));
    int64_t nkv = json_integer_value(json_object_get(m, "n_head_kv"));
    int64_t n_layer = json_integer_value(json_object_get(m, "n_layer"));
    check_shape(g, "token_embd.weight", n_embd, n_vocab);
    check_shape(g, "output_norm.weight", n_embd, 1);
    for (int64_t l = 0; l < n_layer; l++) {
        char t[64];
        snprintf(t, sizeof t, "blk.%lld.attn_output.weight", (long long)l);
        check_shape(g, t, nh * hd, n_embd);
        snprintf(t, sizeof t, "blk.%lld.ffn_down.weight", (long long)l);
        check_shape(g, t, n_ff, n_embd);
        snprintf(t, sizeof t, "blk.%lld.attn_q.weight", (long long)l);
        if (kvv_gguf_find_tensor(g, t)) {  /* phi3 fuses q, k, v into attn_qkv */
            check_shape(g, t, n_embd, nh * hd);
            snprintf(t, sizeof t, "blk.%lld.attn_k.weight", (long long)l);
            check_shape(g, t, n_embd, nkv * hd);
        } else {
            snprintf(t, sizeof t, "blk.%lld.attn_qkv.weight", (long long)l);
            check_shape(g, t, n_embd, (nh + 2 * nkv) * hd);
        }
    }
    bool tied = json_is_true(json_object_get(m, "tied_embeddings"));
    assert_int_equal(kvv_gguf_find_tensor(g, "output.weight") == NULL, tied);
    if (!tied)
        check_shape(g, "output.weight", n_embd, n_vocab);

    json_t *rf = json_object_get(m, "rope_freqs");
    if (json_is_array(rf)) {
        const kvv_gguf_tensor *t = kvv_gguf_find_tensor(g, "rope_freqs.weight");
        assert_non_null(t);
        assert_int_equal(t->type, KVV_TYPE_F32);
        assert_int_equal(t->ne[0], json_array_size(rf));
        for (size_t i = 0; i < json_array_size(rf); i++) {
            float f;
            memcpy(&f, t->data + 4 * i, 4);
            assert_true((double)f == json_number_value(json_array_get(rf, i)));
        }
    }
    kvv_gguf_close(g);
}

static void test_models_json(void **state)
{
    (void)state;
    const char *p = kvv_test_shared("peer/models.json");
    if (!p) {
        skip();
        return;
    }
    json_error_t jerr;
    json_t *root = json_load_file(p, 0, &jerr);
    if (!root)
        fail_msg("%s:%d: %s", p, jerr.line, jerr.text);
    const char *stem;
    json_t *m;
    size_t n = 0;
    json_object_foreach(root, stem, m) {
        check_model_entry(stem, m);
        n++;
    }
    assert_int_equal(n, 13);
    json_decref(root);
}

/* ------------------------------------------------------------ round trip */

/* Read, copy every kv and tensor into a writer, serialize, re-read. */
static void round_trip_file(const char *path, const char *out_path)
{
    kvv_gguf *g, *h;
    kvv_error err = {0};
    if (kvv_gguf_open(path, &g, &err))
        fail_msg("%s", err.msg);
    kvv_gguf_writer *w = kvv_gguf_writer_new(g->version, KVV_GGUF_DEFAULT_ALIGNMENT);
    assert_non_null(w);
    for (uint64_t i = 0; i < g->n_kv; i++)
        assert_int_equal(kvv_gguf_writer_copy_kv(w, &g->kv[i]), KVV_OK);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kvv_gguf_tensor *t = &g->tensors[i];
        assert_int_equal(kvv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data),
                         KVV_OK);
    }
    uint8_t *buf;
    size_t size;
    if (out_path) {
        if (kvv_gguf_writer_write(w, out_path, &err))
            fail_msg("%s", err.msg);
        buf = kvv_test_read_file(out_path, &size);
        assert_non_null(buf);
    } else {
        assert_int_equal(kvv_gguf_writer_to_buffer(w, &buf, &size, &err), KVV_OK);
    }
    kvv_gguf_writer_free(w);
    /* llama.cpp's and gguf-py's layout is the one the writer produces */
    assert_int_equal(size, g->size);
    assert_memory_equal(buf, g->base, size);
    assert_int_equal(kvv_gguf_open_memory(buf, size, "round-trip", &h, &err), KVV_OK);
    assert_int_equal(h->n_tensors, g->n_tensors);
    assert_int_equal(h->n_kv, g->n_kv);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kvv_gguf_tensor *a = &g->tensors[i], *b = kvv_gguf_find_tensor(h, a->name);
        assert_non_null(b);
        assert_int_equal(a->type, b->type);
        assert_memory_equal(a->ne, b->ne, sizeof a->ne);
        char ha[65], hb[65];
        sha256_hex(a->data, a->nbytes, ha);
        sha256_hex(b->data, b->nbytes, hb);
        assert_string_equal(ha, hb);
    }
    kvv_gguf_close(h);
    free(buf);
    kvv_gguf_close(g);
}

static void round_trip_dir(const char *rel)
{
    char *dir = shared_dir(rel);
    if (!dir) {
        skip();
        return;
    }
    file_list fl = list_gguf(dir);
    assert_true(fl.n > 0);
    for (size_t i = 0; i < fl.n; i++)
        round_trip_file(fl.names[i], NULL);
    free_list(&fl);
    free(dir);
}

static void test_round_trip_models(void **state) { (void)state; round_trip_dir("models"); }
static void test_round_trip_vocab(void **state) { (void)state; round_trip_dir("models/vocab"); }
static void test_round_trip_peer(void **state) { (void)state; round_trip_dir("peer/models"); }

static void test_round_trip_v2_to_file(void **state)
{
    (void)state;
    const char *p = kvv_test_shared("models/malformed/ggml-vocab-falcon.v2-5dd6f5ac.gguf");
    if (!p) {
        skip();
        return;
    }
    char *src = strdup(p);
    char out[4200];
    snprintf(out, sizeof out, "%s/falcon-v2-copy.gguf", kvv_test_tmpdir());
    round_trip_file(src, out);
    /* and over an existing file (the rename replaces it) */
    round_trip_file(src, out);
    remove(out);
    free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed_files),
        cmocka_unit_test(test_dbrx_duplicate_offset),
        cmocka_unit_test(test_parse_models),
        cmocka_unit_test(test_parse_vocab),
        cmocka_unit_test(test_parse_peer),
        cmocka_unit_test(test_stories_q8_0_types),
        cmocka_unit_test(test_models_json),
        cmocka_unit_test(test_round_trip_models),
        cmocka_unit_test(test_round_trip_vocab),
        cmocka_unit_test(test_round_trip_peer),
        cmocka_unit_test(test_round_trip_v2_to_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
