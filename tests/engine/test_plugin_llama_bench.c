/*
 * test_plugin_llama_bench.c — the llama.cpp plugin's bench mode (engine
 * option bench=1, what `kvverify bench` times llama.cpp with): llama.cpp's
 * context as llama-bench makes it, with no graph callback.
 *
 * Asserted: the option is taken and described; the capabilities that need
 * the callback are gone and a hooked forward is refused; no callback runs
 * on the engine's context (the plugin fails the forward if one does);
 * the logits of the rows it computes (a prompt's last row, every row when
 * asked, each decode step) are bit for bit those of the normal mode, which
 * observes the pass through the callback. Runs on every machine, like
 * test_plugin_llama.c (llama.cpp comes from scripts/install-deps.sh).
 */
#include "tests/engine/plugin_fixture.h"

static kvv_engine *open_mode(const fx_model *f, const char *opt, int n_threads)
{
    const char *opts[] = {opt};
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = "llama.cpp";
    o.mode = KVV_MODE_INVARIANT;
    o.cache_type = KVV_CACHE_F16; /* llama-bench's default, and bench's for --against */
    o.n_ctx = 48;
    o.n_threads = n_threads;
    o.engine_opts = opts;
    o.n_engine_opts = opt ? 1 : 0;
    kvv_engine *e = NULL;
    kvv_error err = {0};
    if (kvv_engine_open(f->m, &o, &e, &err))
        fail_msg("open llama.cpp %s: %s", opt ? opt : "", err.msg);
    return e;
}

/* The logits of a T-token prompt (all rows: lm ALL; else the last) and of
 * G decode steps after it, into out [(T or 1) + G][n_vocab]. */
static void run(kvv_engine *e, const kvv_hparams *hp, int T, int G, kvv_logits_mode lm,
                float *out)
{
    int32_t tok[64], pos[64];
    for (int i = 0; i < T + G; i++) {
        tok[i] = (int32_t)((i * 7919 + 13) % hp->n_vocab);
        pos[i] = i;
    }
    kvv_error err = {0};
    kvv_engine_reset(e);
    if (kvv_engine_forward(e, T, tok, pos, NULL, lm, out, &err))
        fail_msg("prompt: %s", err.msg);
    float *row = out + (size_t)(lm == KVV_LOGITS_ALL ? T : 1) * hp->n_vocab;
    for (int i = T; i < T + G; i++, row += hp->n_vocab)
        if (kvv_engine_forward(e, 1, tok + i, pos + i, NULL, KVV_LOGITS_LAST, row, &err))
            fail_msg("decode %d: %s", i, err.msg);
}

static void hook_residual(void *user, int layer, int n, const int32_t *pos, float *h)
{
    (void)layer, (void)n, (void)pos, (void)h;
    ++*(int *)user;
}

static void same_logits(const char *shape)
{
    fx_model f;
    fx_model_open(&f, shape, KVV_TYPE_F32);
    const kvv_hparams *hp = &f.m->hp;
    kvv_engine *normal = open_mode(&f, NULL, 2), *bench = open_mode(&f, "bench=1", 2);

    kvv_engine_desc d;
    kvv_engine_describe(bench, &d);
    if (!strstr(d.kernels, "bench=1") || !strstr(d.kernels, "no eval callback") ||
        !strstr(d.kernels, "threadpool=ggml"))
        fail_msg("bench=1 not described: '%s'", d.kernels);
    kvv_engine_describe(normal, &d);
    assert_null(strstr(d.kernels, "bench"));
    const unsigned observed = KVV_ENGINE_CAP_RESIDUAL_READ | KVV_ENGINE_CAP_RESIDUAL_WRITE |
                              KVV_ENGINE_CAP_KV_HOOK | KVV_ENGINE_CAP_KV_FROM_RESIDUAL |
                              KVV_ENGINE_CAP_ATTN | KVV_ENGINE_CAP_ATTN_OUT |
                              KVV_ENGINE_CAP_KV_WRITE;
    assert_int_equal(kvv_engine_caps(bench) & observed, 0);
    assert_true(kvv_engine_caps(bench) & KVV_ENGINE_CAP_LOGITS_ALL);
    assert_true(kvv_engine_caps(normal) & KVV_ENGINE_CAP_KV_HOOK);

    const int T = 20, G = 5;
    const size_t V = (size_t)hp->n_vocab;
    float *a = malloc(sizeof(float) * (T + G) * V), *b = malloc(sizeof(float) * (T + G) * V);
    assert_non_null(a);
    assert_non_null(b);
    const kvv_logits_mode modes[2] = {KVV_LOGITS_LAST, KVV_LOGITS_ALL};
    for (int k = 0; k < 2; k++) {
        const size_t rows = (size_t)(modes[k] == KVV_LOGITS_ALL ? T : 1) + G;
        run(normal, hp, T, G, modes[k], a);
        run(bench, hp, T, G, modes[k], b);
        for (size_t i = 0; i < rows * V; i++)
            if (memcmp(&a[i], &b[i], sizeof *a) != 0)
                fail_msg("%s, logits %s: row %zu [%zu] normal %.9g, bench=1 %.9g", shape,
                         k ? "all" : "last", i / V, i % V, a[i], b[i]);
    }
    print_message("%s: bench=1 gives the normal mode's logits (prompt %d rows, %d decode steps)\n",
                  shape, T, G);

    /* hooks need the callback: refused, nothing called */
    int calls = 0;
    kvv_hooks h = {.user = &calls, .residual = hook_residual};
    int32_t tok[1] = {1}, pos[1] = {0};
    kvv_error err = {0};
    kvv_engine_reset(bench);
    assert_int_equal(kvv_engine_forward(bench, 1, tok, pos, &h, KVV_LOGITS_LAST, a, &err),
                     KVV_ERR_UNSUPPORTED);
    assert_int_equal(calls, 0);
    free(a);
    free(b);
    kvv_engine_close(normal);
    kvv_engine_close(bench);
    fx_model_close(&f);
}

static void test_same_logits(void **state)
{
    (void)state;
    same_logits("qwen3-tiny");
    same_logits("llama-tiny");
    same_logits("gemma2-tiny");
}

/* bench=0 is the normal mode; other values are refused. */
static void test_option(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "llama-tiny", KVV_TYPE_F32);
    kvv_engine *e = open_mode(&f, "bench=0", 1);
    assert_true(kvv_engine_caps(e) & KVV_ENGINE_CAP_KV_HOOK);
    kvv_engine_close(e);
    const char *opts[] = {"bench=2"};
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = "llama.cpp";
    o.n_ctx = 16;
    o.engine_opts = opts;
    o.n_engine_opts = 1;
    kvv_error err = {0};
    e = NULL;
    assert_int_equal(kvv_engine_open(f.m, &o, &e, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "bench=0|1"));
    assert_null(e);
    fx_model_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_option),
        cmocka_unit_test(test_same_logits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
