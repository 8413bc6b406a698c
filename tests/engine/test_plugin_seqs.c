/*
 * test_plugin_seqs.c — ABI 1.1 sequences through the plugin host
 * (engine/plugin/plugin_seqs.c) and the example plugin
 * (plugins/example/example_seqs.c): a request computed among others in one
 * decode call gives the reference engine's bits for it alone, logits and
 * K/V; prefix copies and removals; sequence 0 stays the mirror's; the
 * seq-leak fault is seen; a plugin built against ABI 1.0 loads and serves
 * one sequence; a 1.1 plugin declaring sequences without their slots is
 * refused.
 */
#include "tests/engine/plugin_fixture.h"

static kvv_status open_eng(const kvv_model *m, const char *name, int n_seq, kvv_cache_type ct,
                           const char *const *opts, kvv_engine **e, kvv_error *err)
{
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = name;
    o.n_ctx = 32;
    o.cache_type = ct;
    o.n_seq_max = n_seq;
    o.engine_opts = opts;
    while (opts && opts[o.n_engine_opts])
        o.n_engine_opts++;
    memset(err, 0, sizeof *err);
    return kvv_engine_open(m, &o, e, err);
}

static kvv_engine *must_open(const kvv_model *m, const char *name, int n_seq, kvv_cache_type ct,
                             const char *const *opts)
{
    kvv_engine *e = NULL;
    kvv_error err;
    if (open_eng(m, name, n_seq, ct, opts, &e, &err))
        fail_msg("open %s: %s", name, err.msg);
    return e;
}


/* Rows pos0..pos0+n-1 of seq's layer l, K then V, as floats (malloc'd). */
static float *rows(kvv_engine *e, int seq, int l, int pos0, int n)
{
    const kvv_hparams *hp = &kvv_engine_model(e)->hp;
    size_t K = (size_t)hp->n_head_kv * hp->head_dim, V = (size_t)hp->n_head_kv * hp->head_dim_v;
    float *b = malloc((size_t)n * (K + V) * sizeof *b);
    uint8_t *pr = malloc((size_t)n * hp->n_head_kv);
    assert_non_null(b);
    assert_non_null(pr);
    kvv_error err = {0};
    if (kvv_engine_seq_kv(e, seq, l, pos0, n, b, b + (size_t)n * K, pr, &err))
        fail_msg("seq_kv %d: %s", seq, err.msg);
    for (int i = 0; i < n * hp->n_head_kv; i++)
        assert_int_equal(pr[i], 1);
    free(pr);
    return b;
}

/* want: every layer's rows bit-identical; !want: some layer's differ */
static void same_rows(kvv_engine *a, int sa, kvv_engine *b, int sb, int pos0, int n, bool want)
{
    const kvv_hparams *hp = &kvv_engine_model(a)->hp;
    size_t bytes = (size_t)n * hp->n_head_kv * (hp->head_dim + hp->head_dim_v) * sizeof(float);
    bool all_same = true;
    for (int l = 0; l < hp->n_layer; l++) {
        float *ra = rows(a, sa, l, pos0, n), *rb = rows(b, sb, l, pos0, n);
        bool same = memcmp(ra, rb, bytes) == 0;
        free(ra);
        free(rb);
        if (!same && want)
            fail_msg("layer %d rows %d..%d of sequences %d and %d differ", l, pos0, pos0 + n - 1,
                     sa, sb);
        all_same &= same;
    }
    if (all_same != want)
        fail_msg("rows %d..%d of sequences %d and %d are the same in every layer", pos0,
                 pos0 + n - 1, sa, sb);
}

/* A's prompt (8 tokens) through the reference, logits of every row. */
static void ref_a(const kvv_model *m, kvv_cache_type ct, const int32_t *a, float *logits,
                  kvv_engine **out)
{
    kvv_engine *r = must_open(m, "ref", 0, ct, NULL);
    int32_t pos[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    kvv_error err = {0};
    if (kvv_engine_forward(r, 8, a, pos, NULL, KVV_LOGITS_ALL, logits, &err))
        fail_msg("%s", err.msg);
    *out = r;
}

static void run_seqs(const kvv_model *m, kvv_cache_type ct)
{
    const int V = m->hp.n_vocab;
    int32_t a[8];
    for (int i = 0; i < 8; i++)
        a[i] = (int32_t)((7 + 13 * i) % V);
    float *want = malloc((size_t)8 * V * sizeof *want), *got = malloc((size_t)16 * V * sizeof *got);
    assert_non_null(want);
    assert_non_null(got);
    kvv_engine *r;
    ref_a(m, ct, a, want, &r);

    kvv_engine *e = must_open(m, fx_plugin("example"), 4, ct, NULL);
    assert_true(kvv_engine_caps(e) & KVV_ENGINE_CAP_SEQS);
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    assert_int_equal(d.n_seq_max, 64);
    assert_int_equal(d.kv_unified, 0);
    assert_int_equal(kvv_engine_n_seq(e), 64);

    /* A's first 6 tokens in sequence 2, interleaved with B (sequence 1) and
     * sequence 0: A's rows are the reference's for A alone */
    fx_batch b = {0};
    for (int i = 0; i < 6; i++) {
        fx_add(&b, 2, i, a[i], 1);
        if (i < 4)
            fx_add(&b, 1, i, (int32_t)((3 + 5 * i) % V), i == 3);
        if (i < 3)
            fx_add(&b, 0, i, (int32_t)((11 * i + 1) % V), 0);
    }
    fx_must_decode(e, &b, got);
    for (int i = 0, out = 0; i < b.n; i++) {
        if (b.seq[i] == 2 && memcmp(got + (size_t)out * V, want + (size_t)b.pos[i] * V,
                                    (size_t)V * sizeof *got) != 0)
            fail_msg("logits of A at position %d differ from the reference's", b.pos[i]);
        out += b.want[i];
    }
    same_rows(e, 2, r, 0, 0, 6, true);
    /* sequence 0 is also the mirror's: what kvv_engine_cache shows is it */
    {
        const kvv_kv_cache *c = kvv_engine_cache(e);
        assert_non_null(c);
        assert_int_equal(c->n_pos, 3);
        float *r0 = rows(e, 0, 0, 0, 3);
        const kvv_hparams *hp = &m->hp;
        float k[256];
        assert_true((size_t)hp->n_head_kv * hp->head_dim <= 256);
        kvv_kv_cache_load_k(c, 0, 2, k);
        assert_memory_equal(k, r0 + (size_t)2 * hp->n_head_kv * hp->head_dim,
                            (size_t)hp->n_head_kv * hp->head_dim * sizeof *k);
        free(r0);
    }
    /* a decode step: A's token 6 beside B's token 4 */
    b.n = 0;
    fx_add(&b, 1, 4, 9 % V, 1);
    fx_add(&b, 2, 6, a[6], 1);
    fx_must_decode(e, &b, got);
    assert_memory_equal(got + V, want + (size_t)6 * V, (size_t)V * sizeof *got);
    /* prefix: A's first 4 positions copied into sequence 3, the rest
     * computed there: the reference's bits */
    kvv_error err = {0};
    if (kvv_engine_seq_cp(e, 2, 3, 0, 4, &err))
        fail_msg("seq_cp: %s", err.msg);
    b.n = 0;
    fx_add(&b, 3, 4, a[4], 1);
    fx_add(&b, 3, 5, a[5], 1);
    fx_must_decode(e, &b, got);
    assert_memory_equal(got, want + (size_t)4 * V, (size_t)2 * V * sizeof *got);
    same_rows(e, 3, r, 0, 0, 6, true);
    /* removal to the end, then recomputing: the same bits again */
    if (kvv_engine_seq_rm(e, 2, 3, -1, &err))
        fail_msg("seq_rm: %s", err.msg);
    b.n = 0;
    fx_add(&b, 2, 3, a[3], 1);
    fx_must_decode(e, &b, got);
    assert_memory_equal(got, want + (size_t)3 * V, (size_t)V * sizeof *got);
    /* the plugin refuses a gap in a sequence's positions, naming it */
    b.n = 0;
    fx_add(&b, 2, 9, a[3], 0);
    assert_int_equal(fx_decode(e, &b, NULL, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "expected 4"));
    /* copying into sequence 0 updates the mirror; clearing it too */
    if (kvv_engine_seq_rm(e, 0, 0, -1, &err) || kvv_engine_seq_cp(e, 3, 0, 0, -1, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(kvv_engine_cache(e)->n_pos, 6);
    same_rows(e, 0, r, 0, 0, 6, true);
    kvv_engine_close(e);

    /* isolation: A beside B vs A beside B' (same lengths): equal bits; with
     * fault=seq-leak A's rows take B's and differ */
    for (int leak = 0; leak < 2; leak++) {
        const char *opts[] = {"fault=seq-leak", NULL};
        kvv_engine *x[2];
        for (int other = 0; other < 2; other++) {
            x[other] = must_open(m, fx_plugin("example"), 3, ct, leak ? opts : NULL);
            b.n = 0;
            for (int i = 0; i < 5; i++) {
                fx_add(&b, 0, i, a[i], 0);
                fx_add(&b, 1, i, (int32_t)((other * 17 + 3 * i + 1) % V), 0);
            }
            fx_must_decode(x[other], &b, NULL);
        }
        same_rows(x[0], 0, x[1], 0, 0, 5, !leak);
        same_rows(x[0], 0, r, 0, 0, 5, !leak);
        kvv_engine_close(x[0]);
        kvv_engine_close(x[1]);
    }
    kvv_engine_close(r);
    free(want);
    free(got);
}

static void test_example_seqs(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "llama-tiny", KVV_TYPE_F32);
    run_seqs(f.m, KVV_CACHE_F32);
    run_seqs(f.m, KVV_CACHE_F16);
    fx_model_close(&f);
    fx_model_open(&f, "gemma3-tiny", KVV_TYPE_Q8_0);
    run_seqs(f.m, KVV_CACHE_BF16);
    fx_model_close(&f);
}

static void test_stories260k(void **state)
{
    (void)state;
    KVV_NEED_SHARED(path, "models/stories260K-f32.gguf");
    kvv_model *m = NULL;
    kvv_error err = {0};
    if (kvv_model_open(path, &m, &err))
        fail_msg("%s", err.msg);
    run_seqs(m, KVV_CACHE_F32);
    kvv_model_close(m);
}

/* A 1.0 plugin, a plugin without the capability, and a broken 1.1 one. */
static void test_versions(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "llama-tiny", KVV_TYPE_F32);
    const kvv_hparams *hp = &f.m->hp;
    fx_dims dm;
    fx_dims_of(f.m, &dm);
    const char *const *dopts = dm.opts;
    /* 1.0: loads, no sequences (its bit 15 was not a capability then) */
    kvv_engine *e = must_open(f.m, fx_bad_plugin("v10"), 0, KVV_CACHE_F32, dopts);
    assert_false(kvv_engine_caps(e) & KVV_ENGINE_CAP_SEQS);
    assert_int_equal(kvv_engine_n_seq(e), 1);
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    assert_int_equal(d.n_seq_max, 1);
    assert_int_equal(d.kv_unified, -1);
    fx_batch b = {0};
    fx_add(&b, 1, 0, 1, 0);
    kvv_error err;
    assert_int_equal(fx_decode(e, &b, NULL, &err), KVV_ERR_UNSUPPORTED);
    assert_int_equal(kvv_engine_seq_cp(e, 0, 1, 0, -1, &err), KVV_ERR_UNSUPPORTED);
    kvv_engine_close(e);
    e = (kvv_engine *)1;
    assert_int_equal(open_eng(f.m, fx_bad_plugin("v10"), 4, KVV_CACHE_F32, dopts, &e, &err),
                     KVV_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "serves one sequence"));
    assert_null(e);
    /* 1.1 declaring sequences without the decode slot: refused at open */
    e = (kvv_engine *)1;
    assert_int_equal(open_eng(f.m, fx_bad_plugin("seqs"), 0, KVV_CACHE_F32, dopts, &e, &err),
                     KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "declares seqs but its decode slot is NULL"));
    assert_null(e);
    /* the example without the capability: one sequence, sequence 0 still
     * decodes (through forward) */
    const char *without[] = {"without=seqs", NULL};
    e = must_open(f.m, fx_plugin("example"), 0, KVV_CACHE_F32, without);
    assert_false(kvv_engine_caps(e) & KVV_ENGINE_CAP_SEQS);
    b.n = 0;
    fx_add(&b, 0, 0, 1, 1);
    float *lg = malloc((size_t)hp->n_vocab * sizeof *lg);
    assert_non_null(lg);
    assert_int_equal(fx_decode(e, &b, lg, &err), KVV_OK);
    b.seq[0] = 1;
    b.pos[0] = 0;
    assert_int_equal(fx_decode(e, &b, lg, &err), KVV_ERR_UNSUPPORTED);
    free(lg);
    kvv_engine_close(e);
    /* asked for more than it serves: the plugin says so at open */
    e = (kvv_engine *)1;
    assert_int_equal(open_eng(f.m, fx_plugin("example"), KVV_ENGINE_MAX_SEQS, KVV_CACHE_F32, NULL,
                              &e, &err),
                     KVV_OK);
    kvv_engine_close(e);
    fx_model_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_seqs),
        cmocka_unit_test(test_stories260k),
        cmocka_unit_test(test_versions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
