/*
 * test_plugin_example.c — the example plugin (plugins/example/, the
 * reference engine behind the plugin ABI) gives the reference engine's bits
 * through every operation the checks use: forward with every hook and
 * logits for every position, decode steps, residual patching, K/V read back
 * from the cache (mirror), kv_from_residual, the cache edits policies make
 * (per-head eviction, inserted rows, clearing), micro-batches, and the
 * negative controls the plugin plants itself. All six architectures, the
 * three cache dtypes, and stories260K when ../shared is present.
 */
#include "tests/engine/plugin_fixture.h"

typedef struct {
    kvv_engine *ref, *plug;
    const kvv_hparams *hp;
    fx_tape ta, tb;
    float *la, *lb;
} pair;

static void pair_open(pair *p, const fx_model *f, kvv_engine_opts o, int n_ubatch)
{
    kvv_error err = {0};
    memset(p, 0, sizeof *p);
    p->hp = &f->m->hp;
    o.name = "ref";
    if (kvv_engine_open(f->m, &o, &p->ref, &err))
        fail_msg("ref: %s", err.msg);
    o.name = fx_plugin("example");
    o.n_ubatch = n_ubatch;
    if (kvv_engine_open(f->m, &o, &p->plug, &err))
        fail_msg("%s: %s", o.name, err.msg);
    fx_tape_init(&p->ta, p->hp);
    fx_tape_init(&p->tb, p->hp);
    size_t nl = (size_t)32 * p->hp->n_vocab;
    p->la = calloc(nl, sizeof(float));
    p->lb = calloc(nl, sizeof(float));
    assert_true(p->la && p->lb);
}

static void pair_close(pair *p)
{
    kvv_engine_close(p->ref);
    kvv_engine_close(p->plug);
    fx_tape_free(&p->ta);
    fx_tape_free(&p->tb);
    free(p->la);
    free(p->lb);
}

/* One forward through both engines; tapes (unless ubatch splits the hook
 * calls), logits and the whole cache must be bit-identical. */
static void pair_forward(pair *p, int n, const int32_t *tok, const int32_t *pos,
                         kvv_logits_mode lm, int write_layer, int compare_tape)
{
    kvv_error err = {0};
    p->ta.n = p->tb.n = 0;
    p->ta.write_layer = p->tb.write_layer = write_layer;
    kvv_hooks ha = fx_tape_hooks(&p->ta), hb = fx_tape_hooks(&p->tb);
    if (kvv_engine_forward(p->ref, n, tok, pos, &ha, lm, p->la, &err))
        fail_msg("ref forward: %s", err.msg);
    if (kvv_engine_forward(p->plug, n, tok, pos, &hb, lm, p->lb, &err))
        fail_msg("plugin forward: %s", err.msg);
    size_t rows = lm == KVV_LOGITS_ALL ? (size_t)n : lm == KVV_LOGITS_LAST ? 1 : 0;
    assert_memory_equal(p->la, p->lb, rows * p->hp->n_vocab * sizeof(float));
    if (compare_tape) {
        assert_int_equal(p->ta.n, p->tb.n);
        assert_memory_equal(p->ta.b, p->tb.b, p->ta.n);
    }
    const kvv_kv_cache *a = kvv_engine_cache(p->ref), *b = kvv_engine_cache(p->plug);
    assert_non_null(b);
    assert_int_equal(a->n_pos, b->n_pos);
    size_t es = a->type == KVV_CACHE_F32 ? 4 : 2;
    for (int l = 0; l < a->n_layer; l++) {
        assert_memory_equal(a->present[l], b->present[l], (size_t)a->n_pos * a->n_kv_head);
        for (int t = 0; t < a->n_pos; t++)
            if (kvv_kv_cache_present(a, l, t, 0)) {
                assert_memory_equal((char *)a->k[l] + (size_t)t * a->n_kv_head * a->head_dim_k * es,
                                    (char *)b->k[l] + (size_t)t * b->n_kv_head * b->head_dim_k * es,
                                    (size_t)a->n_kv_head * a->head_dim_k * es);
                assert_memory_equal((char *)a->v[l] + (size_t)t * a->n_kv_head * a->head_dim_v * es,
                                    (char *)b->v[l] + (size_t)t * b->n_kv_head * b->head_dim_v * es,
                                    (size_t)a->n_kv_head * a->head_dim_v * es);
            }
    }
}

/* kv_from_residual of every layer from the same residuals. */
static void pair_recompute(pair *p)
{
    const kvv_hparams *hp = p->hp;
    const int n = 5;
    int32_t pos[5] = {2, 3, 4, 5, 6};
    size_t kd = (size_t)hp->n_head_kv * hp->head_dim, vd = (size_t)hp->n_head_kv * hp->head_dim_v;
    float *h = malloc((size_t)n * hp->n_embd * sizeof *h);
    float *k1 = malloc(n * kd * sizeof *k1), *v1 = malloc(n * vd * sizeof *v1);
    float *k2 = malloc(n * kd * sizeof *k2), *v2 = malloc(n * vd * sizeof *v2);
    assert_true(h && k1 && v1 && k2 && v2);
    for (int i = 0; i < n * hp->n_embd; i++)
        h[i] = (float)((i * 37) % 29) * 0.0625f - 0.875f;
    kvv_error err = {0};
    for (int l = 0; l < hp->n_layer; l++) {
        assert_int_equal(kvv_engine_kv_from_residual(p->ref, l, n, h, pos, k1, v1, &err), KVV_OK);
        if (kvv_engine_kv_from_residual(p->plug, l, n, h, pos, k2, v2, &err))
            fail_msg("plugin kv_from_residual: %s", err.msg);
        assert_memory_equal(k1, k2, n * kd * sizeof *k1);
        assert_memory_equal(v1, v2, n * vd * sizeof *v1);
    }
    free(h);
    free(k1);
    free(v1);
    free(k2);
    free(v2);
}

static void tokens(const kvv_hparams *hp, int n, int32_t *tok, int32_t *pos)
{
    for (int i = 0; i < n; i++) {
        tok[i] = (int32_t)((i * 7919 + 13) % hp->n_vocab);
        pos[i] = i;
    }
}

/* The operations of every check, through both engines. */
static void run_all(const fx_model *f, kvv_cache_type ct)
{
    kvv_engine_opts o = kvv_engine_opts_default();
    o.cache_type = ct;
    o.n_ctx = 32;
    pair p;
    pair_open(&p, f, o, 0);
    int32_t tok[16], pos[16];
    tokens(p.hp, 16, tok, pos);
    /* prefill with every hook, then three decode steps */
    pair_forward(&p, 9, tok, pos, KVV_LOGITS_ALL, -1, 1);
    for (int t = 9; t < 12; t++)
        pair_forward(&p, 1, tok + t, pos + t, KVV_LOGITS_LAST, -1, 1);
    pair_recompute(&p);
    /* cache edits a policy makes: evict one head, insert a row, then decode */
    const kvv_hparams *hp = p.hp;
    kvv_engine *both[2] = {p.ref, p.plug};
    float *krow = calloc((size_t)hp->n_head_kv * hp->head_dim, sizeof *krow);
    float *vrow = calloc((size_t)hp->n_head_kv * hp->head_dim_v, sizeof *vrow);
    assert_true(krow && vrow);
    for (int i = 0; i < hp->n_head_kv * hp->head_dim; i++)
        krow[i] = 0.01f * (float)i;
    for (int i = 0; i < hp->n_head_kv * hp->head_dim_v; i++)
        vrow[i] = -0.02f * (float)i;
    for (int e = 0; e < 2; e++) {
        kvv_kv_cache *c = kvv_engine_cache(both[e]);
        kvv_kv_cache_evict(c, hp->n_layer - 1, 3, hp->n_head_kv - 1);
        kvv_kv_cache_evict(c, 0, 5, -1);
        kvv_kv_cache_store(c, 0, 5, krow, vrow);
        for (int l = 0; l < hp->n_layer; l++)
            kvv_kv_cache_evict(c, l, 1, -1); /* a whole position */
    }
    pair_forward(&p, 1, tok + 12, pos + 12, KVV_LOGITS_LAST, -1, 1);
    /* patching: a written residual at layer 1 of a fresh sequence */
    kvv_engine_reset(p.ref);
    kvv_engine_reset(p.plug);
    pair_forward(&p, 7, tok, pos, KVV_LOGITS_ALL, hp->n_layer > 1 ? 1 : 0, 1);
    /* overwrite: recompute positions 4..6 of that sequence */
    pair_forward(&p, 3, tok + 8, pos + 4, KVV_LOGITS_ALL, -1, 1);
    free(krow);
    free(vrow);
    pair_close(&p);

    /* micro-batches of 4: hooks come per piece, the bits stay */
    pair_open(&p, f, o, 4);
    pair_forward(&p, 11, tok, pos, KVV_LOGITS_ALL, -1, 0);
    pair_forward(&p, 1, tok + 11, pos + 11, KVV_LOGITS_LAST, -1, 1);
    pair_close(&p);

    /* the reference engine's own negative controls, planted by the plugin */
    o.control = KVV_CTL_KV_REVERSED_SUM | KVV_CTL_PERTURB_WEIGHT;
    pair_open(&p, f, o, 0);
    pair_forward(&p, 6, tok, pos, KVV_LOGITS_ALL, -1, 1);
    pair_recompute(&p);
    kvv_engine_desc da, db;
    kvv_engine_describe(p.ref, &da);
    kvv_engine_describe(p.plug, &db);
    assert_int_equal(da.control, db.control);
    assert_string_equal(db.name, "example");
    assert_string_equal(db.mode, "exact");
    assert_string_equal(da.cache_type, db.cache_type);
    pair_close(&p);
}

static void test_architectures(void **state)
{
    (void)state;
    static const struct { const char *shape; kvv_type t; kvv_cache_type ct; } cases[] = {
        {"llama-tiny", KVV_TYPE_F32, KVV_CACHE_F32},  {"llama3-tiny", KVV_TYPE_F16, KVV_CACHE_F16},
        {"qwen2-tiny", KVV_TYPE_Q8_0, KVV_CACHE_BF16}, {"qwen3-tiny", KVV_TYPE_BF16, KVV_CACHE_F32},
        {"gemma2-tiny", KVV_TYPE_Q4_0, KVV_CACHE_F16}, {"gemma3-tiny", KVV_TYPE_F32, KVV_CACHE_BF16},
        {"phi3-tiny", KVV_TYPE_Q5_0, KVV_CACHE_F16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fx_model f;
        fx_model_open(&f, cases[i].shape, cases[i].t);
        run_all(&f, cases[i].ct);
        fx_model_close(&f);
    }
}

static void test_stories260k(void **state)
{
    (void)state;
    KVV_NEED_SHARED(path, "models/stories260K-f32.gguf");
    fx_model f;
    memset(&f, 0, sizeof f);
    kvv_error err = {0};
    if (kvv_model_open(path, &f.m, &err))
        fail_msg("%s", err.msg);
    run_all(&f, KVV_CACHE_F16);
    kvv_model_close(f.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_architectures),
        cmocka_unit_test(test_stories260k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
