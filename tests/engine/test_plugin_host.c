/*
 * test_plugin_host.c — the host side of the plugin ABI (engine/plugin/):
 * plugins that break the ABI are refused with the right status and message
 * (ABI major naming both versions, NULL table, capability without slot,
 * a different reading of the model, no entry symbol, no file); options and
 * devices; capabilities (built-ins have all, a plugin what it declares, and
 * every call needing an undeclared one is refused as unsupported, including
 * a residual written back to an engine that cannot take it and cache edits
 * it has no slot for); and the kvverify-side negative controls.
 */
#include "tests/engine/plugin_fixture.h"
#include "model/tensor_types.h"

/* open name with options opts (NULL-terminated); @return status, err filled */
static kvv_status try_open(const fx_model *f, const char *name, const char *const *opts,
                           kvv_engine **e, kvv_error *err)
{
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = name;
    o.n_ctx = 32;
    o.engine_opts = opts;
    while (opts && opts[o.n_engine_opts])
        o.n_engine_opts++;
    memset(err, 0, sizeof *err);
    return kvv_engine_open(f->m, &o, e, err);
}

static void expect_open(const fx_model *f, const char *name, const char *const *opts,
                        kvv_status want, const char *needle)
{
    kvv_engine *e = (kvv_engine *)1;
    kvv_error err;
    kvv_status s = try_open(f, name, opts, &e, &err);
    if (s != want || (needle && !strstr(err.msg, needle)))
        fail_msg("open %s: status %d (want %d), message '%s' (want '%s')", name, (int)s,
                 (int)want, err.msg, needle ? needle : "");
    assert_null(e);
}

static void test_refused(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "llama-tiny", KVV_TYPE_F32);
    const kvv_hparams *hp = &f.m->hp;
    fx_dims dm;
    fx_dims_of(f.m, &dm);
    const char *const *dopts = dm.opts;
    expect_open(&f, fx_bad_plugin("abi"), dopts, KVV_ERR_USAGE, "speaks plugin ABI 2.0, this kvverify speaks 1.1");
    expect_open(&f, fx_bad_plugin("null"), dopts, KVV_ERR_USAGE, "returned NULL");
    expect_open(&f, fx_bad_plugin("slot"), dopts, KVV_ERR_USAGE, "declares kv-read but its kv_read slot is NULL");
    expect_open(&f, fx_bad_plugin("dims"), dopts, KVV_ERR_FORMAT, "n_layer");
    expect_open(&f, fx_bad_plugin("nosym"), dopts, KVV_ERR_IO, "no symbol kvv_plugin_entry");
    expect_open(&f, "plugin:/nonexistent/x.so", NULL, KVV_ERR_IO, "cannot load");
    expect_open(&f, "plugin:", NULL, KVV_ERR_USAGE, "no plugin path");
    expect_open(&f, "nope", NULL, KVV_ERR_USAGE, "plugin:PATH.so");
    /* the plugin's own error messages come through, named */
    kvv_engine *e;
    kvv_error err;
    assert_int_equal(try_open(&f, fx_plugin("example"), NULL, &e, &err), KVV_OK);
    int32_t tok = hp->n_vocab, pos = 0;
    assert_int_equal(kvv_engine_forward(e, 1, &tok, &pos, NULL, KVV_LOGITS_NONE, NULL, &err),
                     KVV_ERR_USAGE);
    if (!strstr(err.msg, "example.so: "))
        fail_msg("%s", err.msg);
    kvv_engine_close(e);
    /* the reference takes no engine options and runs on the cpu only: the
     * registry's one message for an option an engine does not take */
    const char *one[] = {"x=1", NULL};
    expect_open(&f, "ref", one, KVV_ERR_USAGE, "engine ref does not take --engine-opt x=1");
    kvv_engine_opts o = kvv_engine_opts_default();
    o.device = "cuda";
    assert_int_equal(kvv_engine_open(f.m, &o, &e, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "engine ref does not take --device cuda"));
    o.device = "cpu";
    assert_int_equal(kvv_engine_open(f.m, &o, &e, &err), KVV_OK);
    kvv_engine_close(e);
    /* the example plugin's own option checks */
    const char *unk[] = {"colour=blue", NULL}, *fault[] = {"fault=sometimes", NULL};
    const char *cap[] = {"without=wings", NULL};
    expect_open(&f, fx_plugin("example"), unk, KVV_ERR_USAGE, "unknown engine option 'colour=blue'");
    expect_open(&f, fx_plugin("example"), fault, KVV_ERR_USAGE, "option fault");
    expect_open(&f, fx_plugin("example"), cap, KVV_ERR_USAGE, "unknown capability 'wings'");
    o = kvv_engine_opts_default();
    o.name = fx_plugin("example");
    o.device = "vulkan";
    assert_int_equal(kvv_engine_open(f.m, &o, &e, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "unknown device 'vulkan'"));
    o.device = NULL;
    o.mode = KVV_MODE_FAST;
    assert_int_equal(kvv_engine_open(f.m, &o, &e, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "mode 'fast'"));
    fx_model_close(&f);
}

/* Residual hook that writes (patching). */
static void writes_residual(void *u, int layer, int n, const int32_t *pos, float *h)
{
    (void)u, (void)layer, (void)pos;
    h[0] += (float)n;
}

static kvv_engine *open_example(const fx_model *f, const char *opt, unsigned control)
{
    const char *opts[] = {opt, NULL};
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = fx_plugin("example");
    o.n_ctx = 32;
    o.engine_opts = opts;
    o.n_engine_opts = opt ? 1 : 0;
    o.control = control;
    kvv_engine *e;
    kvv_error err = {0};
    if (kvv_engine_open(f->m, &o, &e, &err))
        fail_msg("%s %s: %s", o.name, opt ? opt : "", err.msg);
    return e;
}

static void expect_status(kvv_status s, const kvv_error *err, kvv_status want, const char *needle)
{
    if (s != want || (needle && !strstr(err->msg, needle)))
        fail_msg("status %d (want %d), message '%s' (want '%s')", (int)s, (int)want, err->msg,
                 needle ? needle : "");
}

static void test_capabilities(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "qwen2-tiny", KVV_TYPE_F32);
    const kvv_hparams *hp = &f.m->hp;
    kvv_error err = {0};
    char names[256];
    assert_string_equal(kvv_engine_cap_names(KVV_ENGINE_CAP_LOGITS_ALL | KVV_ENGINE_CAP_KV_WRITE,
                                             names, sizeof names),
                        "logits-all,kv-write");
    kvv_engine_opts o = kvv_engine_opts_default();
    kvv_engine *ref;
    assert_int_equal(kvv_engine_open(f.m, &o, &ref, &err), KVV_OK);
    assert_int_equal(kvv_engine_caps(ref), KVV_ENGINE_CAP_BUILTIN | KVV_ENGINE_CAP_SEQS);
    assert_int_equal(kvv_engine_require(ref, KVV_ENGINE_CAP_BUILTIN, "everything", &err), KVV_OK);
    expect_status(kvv_engine_require(ref, KVV_ENGINE_CAP_UBATCH, "micro-batches", &err), &err,
                  KVV_ERR_UNSUPPORTED, "engine ref does not offer ubatch (needed by micro-batches)");
    kvv_engine_close(ref);
    assert_int_equal(kvv_engine_caps(NULL), 0);

    kvv_engine *e = open_example(&f, NULL, 0);
    assert_int_equal(kvv_engine_caps(e),
                     (KVV_ENGINE_CAP_ALL & ~KVV_ENGINE_CAP_THREADS) | KVV_ENGINE_CAP_SEQS |
                         KVV_ENGINE_CAP_OP_TAPS);
    expect_status(kvv_engine_require(e, KVV_ENGINE_CAP_THREADS, "invariance over threads", &err),
                  &err, KVV_ERR_UNSUPPORTED, "does not offer threads (needed by invariance over threads)");
    kvv_engine_close(e);

    int32_t tok[6] = {1, 2, 3, 4, 5, 6}, pos[6] = {0, 1, 2, 3, 4, 5};
    float *logits = calloc((size_t)6 * hp->n_vocab, sizeof *logits);
    assert_non_null(logits);
    fx_tape t;
    fx_tape_init(&t, hp);
    kvv_hooks all = fx_tape_hooks(&t);

    e = open_example(&f, "without=attn,logits-all", 0);
    kvv_hooks h = {.user = &t, .attn = fx_attn};
    expect_status(kvv_engine_forward(e, 6, tok, pos, &h, KVV_LOGITS_LAST, logits, &err), &err,
                  KVV_ERR_UNSUPPORTED, "does not offer attn (needed by the attention hook)");
    expect_status(kvv_engine_forward(e, 6, tok, pos, NULL, KVV_LOGITS_ALL, logits, &err), &err,
                  KVV_ERR_UNSUPPORTED, "logits-all");
    assert_int_equal(kvv_engine_forward(e, 6, tok, pos, NULL, KVV_LOGITS_LAST, logits, &err), KVV_OK);
    kvv_engine_close(e);

    /* a residual written back to an engine without residual-write */
    e = open_example(&f, "without=residual-write", 0);
    kvv_hooks w = {.residual = writes_residual};
    expect_status(kvv_engine_forward(e, 6, tok, pos, &w, KVV_LOGITS_LAST, logits, &err), &err,
                  KVV_ERR_UNSUPPORTED, "does not offer residual-write");
    kvv_engine_reset(e);
    assert_int_equal(kvv_engine_forward(e, 6, tok, pos, &all, KVV_LOGITS_LAST, logits, &err), KVV_OK);
    kvv_engine_close(e);

    e = open_example(&f, "without=kv-from-residual,kv-read", 0);
    assert_null(kvv_engine_cache(e));
    float hbuf[256] = {0}, kb[256], vb[256];
    assert_true(hp->n_embd <= 256 && hp->n_head_kv * hp->head_dim <= 256);
    expect_status(kvv_engine_kv_from_residual(e, 0, 1, hbuf, pos, kb, vb, &err), &err,
                  KVV_ERR_UNSUPPORTED, "kv-from-residual");
    kvv_engine_close(e);

    /* cache edits the plugin has no slot for */
    e = open_example(&f, "without=kv-evict-head", 0);
    assert_int_equal(kvv_engine_forward(e, 4, tok, pos, NULL, KVV_LOGITS_LAST, logits, &err), KVV_OK);
    kvv_kv_cache_evict(kvv_engine_cache(e), 1, 2, 0);
    expect_status(kvv_engine_forward(e, 1, tok + 4, pos + 4, NULL, KVV_LOGITS_LAST, logits, &err),
                  &err, KVV_ERR_UNSUPPORTED, "kv-evict-head");
    kvv_engine_close(e);
    e = open_example(&f, "without=kv-write", 0);
    assert_int_equal(kvv_engine_forward(e, 4, tok, pos, NULL, KVV_LOGITS_LAST, logits, &err), KVV_OK);
    ((uint8_t *)kvv_kv_cache_k_ptr(kvv_engine_cache(e), 0, 1))[0] ^= 1u;
    expect_status(kvv_engine_forward(e, 1, tok + 4, pos + 4, NULL, KVV_LOGITS_LAST, logits, &err),
                  &err, KVV_ERR_UNSUPPORTED, "kv-write");
    kvv_engine_close(e);

    /* without overwrite: the tail is recomputed after evicting it; a gap is refused */
    e = open_example(&f, "without=overwrite", 0);
    assert_int_equal(kvv_engine_forward(e, 6, tok, pos, NULL, KVV_LOGITS_LAST, logits, &err), KVV_OK);
    assert_int_equal(kvv_engine_forward(e, 2, tok, pos + 4, NULL, KVV_LOGITS_LAST, logits, &err), KVV_OK);
    expect_status(kvv_engine_forward(e, 1, tok, pos + 2, NULL, KVV_LOGITS_LAST, logits, &err), &err,
                  KVV_ERR_UNSUPPORTED, "while it holds position 3");
    kvv_engine_close(e);
    e = open_example(&f, "without=overwrite,kv-evict", 0);
    assert_int_equal(kvv_engine_forward(e, 6, tok, pos, NULL, KVV_LOGITS_LAST, logits, &err), KVV_OK);
    expect_status(kvv_engine_forward(e, 1, tok, pos + 5, NULL, KVV_LOGITS_LAST, logits, &err), &err,
                  KVV_ERR_UNSUPPORTED, "kv-evict");
    /* positions must increase */
    int32_t back[2] = {8, 7};
    expect_status(kvv_engine_forward(e, 2, tok, back, NULL, KVV_LOGITS_LAST, logits, &err), &err,
                  KVV_ERR_UNSUPPORTED, "strictly increasing");
    kvv_engine_close(e);
    fx_tape_free(&t);
    free(logits);
    fx_model_close(&f);
}

/* ------------------------------------------------------------ controls */

/* The bits of x as dtype ct stores them. */
static uint32_t dtype_bits(kvv_cache_type ct, float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return ct == KVV_CACHE_F16 ? kvv_fp32_to_fp16(x) : ct == KVV_CACHE_BF16 ? kvv_fp32_to_bf16(x) : u;
}

static void test_host_controls(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "gemma2-tiny", KVV_TYPE_F32);
    const kvv_hparams *hp = &f.m->hp;
    kvv_error err = {0};
    const kvv_cache_type cts[2] = {KVV_CACHE_F32, KVV_CACHE_F16};
    int32_t tok[5] = {3, 3, 9, 27, 81}, pos[5] = {0, 1, 2, 3, 4};
    const size_t kd = (size_t)hp->n_head_kv * hp->head_dim, vd = (size_t)hp->n_head_kv * hp->head_dim_v;
    float *h = malloc(5 * (size_t)hp->n_embd * sizeof *h);
    float *k0 = malloc(5 * kd * sizeof *k0), *v0 = malloc(5 * vd * sizeof *v0);
    float *k1 = malloc(5 * kd * sizeof *k1), *v1 = malloc(5 * vd * sizeof *v1);
    assert_true(h && k0 && v0 && k1 && v1);
    for (int i = 0; i < 5 * hp->n_embd; i++)
        h[i] = (float)(i % 11) * 0.125f - 0.5f;
    /* host-kv-ulp on the reference engine: K[t][0] moved by one ULP of the dtype, nothing else */
    for (int c = 0; c < 2; c++) {
        kvv_engine_opts o = kvv_engine_opts_default();
        o.cache_type = cts[c];
        kvv_engine *a, *b;
        assert_int_equal(kvv_engine_open(f.m, &o, &a, &err), KVV_OK);
        o.control = KVV_CTL_HOST_KV_ULP;
        assert_int_equal(kvv_engine_open(f.m, &o, &b, &err), KVV_OK);
        assert_int_equal(kvv_engine_kv_from_residual(a, 1, 5, h, pos, k0, v0, &err), KVV_OK);
        assert_int_equal(kvv_engine_kv_from_residual(b, 1, 5, h, pos, k1, v1, &err), KVV_OK);
        assert_memory_equal(v0, v1, 5 * vd * sizeof *v0);
        for (size_t i = 0; i < 5 * kd; i++) {
            if (i % kd != 0) {
                assert_memory_equal(&k0[i], &k1[i], sizeof *k0);
                continue;
            }
            assert_true(k0[i] != k1[i]);
            /* still representable in the dtype: storage cannot round it away */
            assert_true(kvv_cache_round(cts[c], k1[i]) == k1[i]);
            assert_int_equal(dtype_bits(cts[c], k0[i]) ^ dtype_bits(cts[c], k1[i]), 1);
        }
        kvv_engine_desc d;
        kvv_engine_describe(b, &d);
        assert_non_null(strstr(d.kernels, "control=host-kv-ulp"));
        kvv_engine_close(a);
        kvv_engine_close(b);
    }
    /* the example plugin leaving its controls to the host: same bits as ref + host control */
    const struct { unsigned ask; const char *opt; unsigned host; } cases[] = {
        {KVV_CTL_KV_REVERSED_SUM, "native_controls=0", KVV_CTL_HOST_KV_ULP},
        {KVV_CTL_PERTURB_WEIGHT, "native_controls=0", KVV_CTL_HOST_RESIDUAL},
        {KVV_CTL_PERTURB_WEIGHT, "without=residual-write", KVV_CTL_HOST_REORDER},
    };
    const size_t nl = (size_t)5 * hp->n_vocab;
    float *la = malloc(nl * sizeof *la), *lb = malloc(nl * sizeof *lb), *lc = malloc(nl * sizeof *lc);
    assert_true(la && lb && lc);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *opts[3] = {"native_controls=0", cases[i].opt, NULL};
        kvv_engine_opts o = kvv_engine_opts_default();
        o.name = fx_plugin("example");
        o.n_ctx = 32;
        o.engine_opts = opts;
        o.n_engine_opts = 2;
        o.control = cases[i].ask;
        kvv_engine *p, *r, *plain;
        if (kvv_engine_open(f.m, &o, &p, &err))
            fail_msg("%s", err.msg);
        assert_int_equal(kvv_engine_options(p)->control, cases[i].host);
        kvv_engine_desc d;
        kvv_engine_describe(p, &d);
        assert_int_equal(d.control, cases[i].host);
        kvv_engine_opts ro = kvv_engine_opts_default();
        ro.n_ctx = 32;
        assert_int_equal(kvv_engine_open(f.m, &ro, &plain, &err), KVV_OK);
        ro.control = cases[i].host;
        assert_int_equal(kvv_engine_open(f.m, &ro, &r, &err), KVV_OK);
        assert_int_equal(kvv_engine_forward(p, 5, tok, pos, NULL, KVV_LOGITS_ALL, la, &err), KVV_OK);
        assert_int_equal(kvv_engine_forward(r, 5, tok, pos, NULL, KVV_LOGITS_ALL, lb, &err), KVV_OK);
        assert_int_equal(kvv_engine_forward(plain, 5, tok, pos, NULL, KVV_LOGITS_ALL, lc, &err), KVV_OK);
        assert_memory_equal(la, lb, nl * sizeof *la);
        assert_int_equal(kvv_engine_kv_from_residual(p, 0, 5, h, pos, k0, v0, &err), KVV_OK);
        assert_int_equal(kvv_engine_kv_from_residual(r, 0, 5, h, pos, k1, v1, &err), KVV_OK);
        assert_memory_equal(k0, k1, 5 * kd * sizeof *k0);
        if (cases[i].host != KVV_CTL_HOST_KV_ULP) /* the control must show in the logits */
            assert_true(memcmp(la, lc, nl * sizeof *la) != 0);
        kvv_engine_close(p);
        kvv_engine_close(r);
        kvv_engine_close(plain);
    }
    /* host-reorder is exactly a swap of the first two distinct tokens */
    kvv_engine_opts o = kvv_engine_opts_default();
    o.control = KVV_CTL_HOST_REORDER;
    kvv_engine *r, *plain;
    assert_int_equal(kvv_engine_open(f.m, &o, &r, &err), KVV_OK);
    o.control = 0;
    assert_int_equal(kvv_engine_open(f.m, &o, &plain, &err), KVV_OK);
    int32_t swapped[5] = {9, 3, 3, 27, 81};
    assert_int_equal(kvv_engine_forward(r, 5, tok, pos, NULL, KVV_LOGITS_ALL, la, &err), KVV_OK);
    assert_int_equal(kvv_engine_forward(plain, 5, swapped, pos, NULL, KVV_LOGITS_ALL, lb, &err), KVV_OK);
    assert_memory_equal(la, lb, nl * sizeof *la);
    assert_int_equal(tok[0], 3); /* the caller's tokens are untouched */
    kvv_engine_close(r);
    kvv_engine_close(plain);
    free(la);
    free(lb);
    free(lc);
    free(h);
    free(k0);
    free(v0);
    free(k1);
    free(v1);
    fx_model_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_capabilities),
        cmocka_unit_test(test_host_controls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
