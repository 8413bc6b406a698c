/* test_kvv_vectors.c — golden vectors through the library API: the hash and
 * prompt definitions (values from an independent Python implementation of
 * docs/vectors-format.md), the meta record, and gen/check on a synthetic
 * model with the reference engine, including controls that must diverge. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/shapes.h"
#include "model/synth.h"
#include "tests/test_util.h"
#include "vectors/kvv_meta.h"
#include "vectors/kvv_vectors.h"

static void test_hash_and_prompt(void **state)
{
    (void)state;
    float x[3] = {1.0f, -0.0f, 3.5f};
    assert_true(kvv_vectors_hash_f32(x, 0) == 0xcbf29ce484222325ull);
    assert_true(kvv_vectors_hash_f32(x, 1) == 0x4b72477f9c5c2f98ull);
    assert_true(kvv_vectors_hash_f32(x, 3) == 0x99736dab847ae8b8ull);
    int32_t t[6];
    kvv_vectors_random_tokens(1, 512, t, 6);
    const int32_t want[6] = {193, 103, 350, 267, 441, 128};
    assert_memory_equal(t, want, sizeof want);
    kvv_vectors_random_tokens(0, 32000, t, 3);
    assert_int_equal(t[0], 15535);
    assert_int_equal(t[1], 19700);
    assert_int_equal(t[2], 25679);
}

/* A file holding only a meta record with the given JSON. */
static kvv_status meta_file(const char *json, kvv_file **f, kvv_error *err)
{
    kvv_file_writer *w = kvv_file_writer_new();
    uint8_t *buf = NULL;
    size_t n = 0;
    kvv_status st = kvv_file_writer_add(w, "meta", KVV_REC_JSON, 0, NULL, json, strlen(json), err);
    if (!st)
        st = kvv_file_writer_to_buffer(w, &buf, &n, err);
    kvv_file_writer_free(w);
    if (!st)
        st = kvv_file_read_memory(buf, n, "m.kvv", f, err);
    free(buf);
    return st;
}

static void fill_meta(kvv_meta *m)
{
    kvv_meta_init(m);
    snprintf(m->kvverify_version, sizeof m->kvverify_version, "9.9.9");
    snprintf(m->model_file, sizeof m->model_file, "x.gguf");
    memset(m->model_sha256, 'a', 64);
    snprintf(m->arch, sizeof m->arch, "qwen3");
    m->n_layer = 3, m->n_embd = 64, m->n_vocab = 512;
    m->kv_dim_k = m->kv_dim_v = 64, m->head_dim_k = m->head_dim_v = 32;
    snprintf(m->engine, sizeof m->engine, "ref");
    snprintf(m->mode, sizeof m->mode, "exact");
    snprintf(m->cache_type, sizeof m->cache_type, "bf16");
    m->n_gen = 5;
    m->full = true;
    m->logits_full = false;
    m->seed = 42;
    snprintf(m->prompt_source, sizeof m->prompt_source, "text");
    m->prompt_text = strdup("Once upon a \"time\"\n");
    m->n_prompt = 7;
}

static void test_meta_round_trip(void **state)
{
    (void)state;
    kvv_meta m, back;
    fill_meta(&m);
    char *json;
    kvv_error err = {0};
    assert_int_equal(kvv_meta_to_json(&m, &json, &err), KVV_OK);
    /* sorted keys, no whitespace: engine < format < kvverify_version < model */
    assert_true(strstr(json, "\"engine\"") < strstr(json, "\"format\""));
    assert_true(strstr(json, "\"format\"") < strstr(json, "\"model\""));
    assert_null(strstr(json, ": "));
    kvv_file *f;
    assert_int_equal(meta_file(json, &f, &err), KVV_OK);
    assert_int_equal(kvv_meta_parse(f, &back, &err), KVV_OK);
    assert_string_equal(back.arch, "qwen3");
    assert_string_equal(back.cache_type, "bf16");
    assert_string_equal(back.prompt_text, m.prompt_text);
    assert_int_equal(back.n_gen, 5);
    assert_true(back.full);
    assert_false(back.logits_full);
    assert_true(back.seed == 42);
    assert_string_equal(back.isa, "");
    assert_null(strstr(json, "\"isa\"")); /* not the cpu engine: no kernel table written */
    kvv_meta_free(&back);
    kvv_file_free(f);
    free(json);
    /* the cpu engine's kernel table round-trips as engine.isa */
    snprintf(m.isa, sizeof m.isa, "avx2");
    assert_int_equal(kvv_meta_to_json(&m, &json, &err), KVV_OK);
    assert_non_null(strstr(json, "\"isa\":\"avx2\""));
    assert_int_equal(meta_file(json, &f, &err), KVV_OK);
    assert_int_equal(kvv_meta_parse(f, &back, &err), KVV_OK);
    assert_string_equal(back.isa, "avx2");
    kvv_meta_free(&back);
    kvv_file_free(f);
    free(json);
    kvv_meta_free(&m);
}

static void expect_meta_error(const char *json, const char *needle)
{
    kvv_file *f;
    kvv_meta m;
    kvv_error err = {0};
    assert_int_equal(meta_file(json, &f, &err), KVV_OK);
    assert_int_equal(kvv_meta_parse(f, &m, &err), KVV_ERR_FORMAT);
    if (!strstr(err.msg, needle))
        fail_msg("meta error '%s' lacks '%s'", err.msg, needle);
    assert_non_null(strstr(err.msg, "m.kvv: record meta at byte 16: field "));
    kvv_file_free(f);
}

static void test_meta_errors(void **state)
{
    (void)state;
    kvv_meta m;
    fill_meta(&m);
    char *json;
    kvv_error err = {0};
    assert_int_equal(kvv_meta_to_json(&m, &json, &err), KVV_OK);
    kvv_meta_free(&m);
    expect_meta_error("[1,2]", "field (json): not a JSON object");
    expect_meta_error("{\"format\":", "field (json)");
    expect_meta_error("{\"format\":\"kvv/2\"}", "field format: unknown metadata format");
    /* one field broken at a time */
    struct {
        const char *from, *to, *needle;
    } cases[] = {
        {"\"n_layer\":3", "\"n_layer\":0", "field model.n_layer: out of range"},
        {"\"n_layer\":3", "\"n_layers\":3", "field model.n_layer: missing"},
        {"\"mode\":\"exact\"", "\"mode\":\"sloppy\"", "field engine.mode"},
        {"\"mode\":\"exact\"", "\"isa\":\"avx9\",\"mode\":\"exact\"",
         "field engine.isa: not generic, avx2 or avx512"},
        {"\"mode\":\"exact\"", "\"isa\":16,\"mode\":\"exact\"", "field engine.isa: wrong JSON type"},
        {"\"cache_type\":\"bf16\"", "\"cache_type\":7", "field engine.cache_type: wrong JSON type"},
        {"\"logits\":\"hash\"", "\"logits\":\"some\"", "field options.logits"},
        {"\"seed\":42", "\"seed\":-1", "field seed: outside"},
        {"aaaaaaaa", "AAAAAAAA", "field model.sha256: not 64 lower-case hex digits"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *at = strstr(json, cases[i].from);
        assert_non_null(at);
        char buf[2048];
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - json), json, cases[i].to,
                 at + strlen(cases[i].from));
        expect_meta_error(buf, cases[i].needle);
    }
    free(json);
}

/* ------------------------------------------------------------ gen/check */

/* Paths shared by the gen/check tests (the group state). */
typedef struct {
    char model_a[4200], model_b[4200], vec_full[4200], vec_hash[4200];
} fixture;

static int setup_models(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    if (!fx)
        return -1;
    *state = fx;
    char *model_a = fx->model_a, *model_b = fx->model_b;
    char *vec_full = fx->vec_full, *vec_hash = fx->vec_hash;
    const size_t cap = sizeof fx->model_a;
    kvv_error err = {0};
    const char *d = kvv_test_tmpdir();
    snprintf(model_a, cap, "%s/a.gguf", d);
    snprintf(model_b, cap, "%s/b.gguf", d);
    snprintf(vec_full, cap, "%s/full.kvv", d);
    snprintf(vec_hash, cap, "%s/hash.kvv", d);
    kvv_synth_opts so = {.shape = kvv_shape_find("llama-tiny"), .type = KVV_TYPE_F32, .seed = 5};
    if (!so.shape || kvv_synth_write(&so, model_a, &err))
        return -1;
    so.seed = 6;
    if (kvv_synth_write(&so, model_b, &err))
        return -1;
    int32_t toks[9] = {1, 7, 300, 12, 99, 5, 411, 2, 64};
    kvv_vectors_opts o = kvv_vectors_opts_default();
    o.tokens = toks;
    o.n_tokens = 9;
    o.n_gen = 5;
    o.full = true;
    o.kvverify_version = "test";
    if (kvv_vectors_gen(model_a, &o, vec_full, &err)) {
        fprintf(stderr, "gen: %s\n", err.msg);
        return -1;
    }
    o.full = false;
    o.logits_full = false;
    if (kvv_vectors_gen(model_a, &o, vec_hash, &err)) {
        fprintf(stderr, "gen: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown_models(void **state)
{
    free(*state);
    return 0;
}

#define FIXTURE                                               \
    const fixture *fx = *state;                               \
    const char *model_a = fx->model_a, *model_b = fx->model_b; \
    const char *vec_full = fx->vec_full, *vec_hash = fx->vec_hash; \
    (void)model_a, (void)model_b, (void)vec_full, (void)vec_hash

static void test_gen_records(void **state)
{
    FIXTURE;
    kvv_file *f;
    kvv_error err = {0};
    assert_int_equal(kvv_file_read(vec_full, &f, &err), KVV_OK);
    const char *names[] = {"meta", "prompt", "greedy", "logits", "hash.resid", "hash.k", "hash.v",
                           "full.resid", "full.k", "full.v", "kv", "patch.donor", "patch"};
    assert_int_equal(f->n_records, 13);
    for (int i = 0; i < 13; i++)
        assert_string_equal(f->records[i].name, names[i]);
    const kvv_record *r = kvv_file_find(f, "full.k");
    assert_int_equal(r->n_dims, 3);
    assert_int_equal(r->dims[1], 9 + 5 - 1); /* n_pos */
    /* the hash of each full row is the stored hash */
    const kvv_record *h = kvv_file_find(f, "hash.k");
    float row[512];
    for (uint64_t j = 0; j < r->dims[2]; j++) {
        uint32_t b = kvv_record_u32(r, r->dims[2] * 4 + j); /* layer 0, position 4 */
        memcpy(&row[j], &b, 4);
    }
    assert_true(kvv_vectors_hash_f32(row, r->dims[2]) == kvv_record_u64(h, 4));
    /* the reference engine: kv recompute and patch are exact */
    const kvv_record *kv = kvv_file_find(f, "kv");
    for (uint64_t l = 0; l < kv->dims[0]; l++) {
        assert_true(kvv_record_u64(kv, l * 5) > 0);
        for (int c = 1; c < 5; c++)
            assert_true(kvv_record_u64(kv, l * 5 + (uint64_t)c) == 0);
    }
    const kvv_record *p = kvv_file_find(f, "patch");
    for (uint64_t l = 0; l < p->dims[0]; l++)
        assert_true(kvv_record_u64(p, l * 2) == 0);
    kvv_file_free(f);
}

static void test_check_pass_and_controls(void **state)
{
    FIXTURE;
    kvv_vectors_result r;
    kvv_error err = {0};
    kvv_vectors_check_opts co = kvv_vectors_check_opts_default();
    assert_int_equal(kvv_vectors_check(model_a, vec_full, &co, &r, &err), KVV_OK);
    assert_false(r.diverged);
    assert_true(r.n_diverged == 0);
    assert_int_equal(r.n_tally, 11); /* every record but meta and prompt */

    /* a flipped residual bit at layer 1, position 6: named exactly, with the
     * full tensors giving head-less index 0 of the residual row */
    co.perturb_layer = 1;
    co.perturb_pos = 6;
    assert_int_equal(kvv_vectors_check(model_a, vec_full, &co, &r, &err), KVV_OK);
    assert_true(r.diverged);
    assert_string_equal(r.first.record, "full.resid");
    assert_int_equal(r.first.layer, 1);
    assert_int_equal(r.first.position, 6);
    assert_int_equal(r.first.index, 0);
    assert_true((r.first.expected ^ r.first.actual) == 1u);
    assert_true(r.n_diverged > 1);
    char line[512];
    kvv_divergence_format(&r.first, line, sizeof line);
    assert_non_null(strstr(line, "full.resid layer 1 position 6 index 0: expected 0x"));

    /* hashes only: layer and position, no index */
    assert_int_equal(kvv_vectors_check(model_a, vec_hash, &co, &r, &err), KVV_OK);
    assert_true(r.diverged);
    assert_string_equal(r.first.record, "hash.resid");
    assert_int_equal(r.first.layer, 1);
    assert_int_equal(r.first.position, 6);
    assert_int_equal(r.first.index, -1);

    /* the engine's perturbed-weight control: output_norm only moves logits */
    co = kvv_vectors_check_opts_default();
    co.control = KVV_CTL_PERTURB_WEIGHT;
    assert_int_equal(kvv_vectors_check(model_a, vec_full, &co, &r, &err), KVV_OK);
    assert_true(r.diverged);
    assert_string_equal(r.first.record, "logits");
    assert_int_equal(r.first.step, 0);
    assert_int_equal(r.first.position, 8);
    assert_true(r.first.is_f32);
}

static void test_check_rejects(void **state)
{
    FIXTURE;
    kvv_vectors_result r;
    kvv_error err = {0};
    kvv_vectors_check_opts co = kvv_vectors_check_opts_default();
    assert_int_equal(kvv_vectors_check(model_b, vec_full, &co, &r, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "wrong model"));
    assert_non_null(strstr(err.msg, "field model.sha256"));
    co.perturb_layer = 50;
    co.perturb_pos = 0;
    assert_int_equal(kvv_vectors_check(model_a, vec_full, &co, &r, &err), KVV_ERR_USAGE);
    co = kvv_vectors_check_opts_default();
    co.engine = "no-such-engine";
    assert_int_equal(kvv_vectors_check(model_a, vec_full, &co, &r, &err), KVV_ERR_USAGE);
    assert_int_equal(kvv_vectors_check(model_a, "/nonexistent.kvv", NULL, &r, &err), KVV_ERR_IO);
    /* a vector cannot be made with a control on */
    int32_t t[2] = {1, 2};
    kvv_vectors_opts o = kvv_vectors_opts_default();
    o.tokens = t;
    o.n_tokens = 2;
    o.engine.control = KVV_CTL_PERTURB_WEIGHT;
    assert_int_equal(kvv_vectors_gen(model_a, &o, vec_hash, &err), KVV_ERR_USAGE);
}

/* Rewrite src into dst leaving out record `drop` and adding record `extra`
 * (either may be NULL). Little-endian hosts: stored bytes = host order. */
static void rewrite(const char *src, const char *dst, const char *drop, const char *extra)
{
    kvv_file *f;
    kvv_error err = {0};
    assert_int_equal(kvv_file_read(src, &f, &err), KVV_OK);
    kvv_file_writer *w = kvv_file_writer_new();
    for (int i = 0; i < f->n_records; i++) {
        const kvv_record *r = &f->records[i];
        if (drop && strcmp(r->name, drop) == 0)
            continue;
        assert_int_equal(kvv_file_writer_add(w, r->name, r->type, r->n_dims, r->dims, r->data,
                                             r->raw_size, &err), KVV_OK);
    }
    if (extra)
        assert_int_equal(kvv_file_writer_add(w, extra, KVV_REC_BYTES, 0, NULL, "x", 1, &err), KVV_OK);
    assert_int_equal(kvv_file_writer_write(w, dst, &err), KVV_OK);
    kvv_file_writer_free(w);
    kvv_file_free(f);
}

/* Records that do not match what meta announces are format errors (exit 2),
 * not divergences. */
static void test_check_record_set(void **state)
{
    FIXTURE;
    uint16_t one = 1;
    uint8_t le;
    memcpy(&le, &one, 1);
    if (!le)
        skip(); /* rewrite() copies stored little-endian bytes as host order */
    char dst[4300];
    snprintf(dst, sizeof dst, "%s/edited.kvv", kvv_test_tmpdir());
    kvv_vectors_result r;
    kvv_error err = {0};
    rewrite(vec_hash, dst, NULL, NULL);
    assert_int_equal(kvv_vectors_check(model_a, dst, NULL, &r, &err), KVV_OK);
    assert_false(r.diverged);
    rewrite(vec_hash, dst, "patch", NULL);
    assert_int_equal(kvv_vectors_check(model_a, dst, NULL, &r, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "record patch: missing"));
    rewrite(vec_hash, dst, NULL, "extra");
    assert_int_equal(kvv_vectors_check(model_a, dst, NULL, &r, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "record extra at byte"));
    rewrite(vec_hash, dst, "greedy", NULL);
    assert_int_equal(kvv_vectors_check(model_a, dst, NULL, &r, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "record greedy (absent)"));
}

int main(void)
{
    const struct CMUnitTest unit[] = {
        cmocka_unit_test(test_hash_and_prompt),
        cmocka_unit_test(test_meta_round_trip),
        cmocka_unit_test(test_meta_errors),
    };
    const struct CMUnitTest engine[] = {
        cmocka_unit_test(test_gen_records),
        cmocka_unit_test(test_check_pass_and_controls),
        cmocka_unit_test(test_check_rejects),
        cmocka_unit_test(test_check_record_set),
    };
    int failed = cmocka_run_group_tests(unit, NULL, NULL);
    failed += cmocka_run_group_tests(engine, setup_models, teardown_models);
    return failed;
}
