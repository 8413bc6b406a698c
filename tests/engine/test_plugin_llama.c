/*
 * test_plugin_llama.c — the llama.cpp plugin (plugins/llama.cpp/) on the
 * CPU, on every machine: llama.cpp comes from scripts/install-deps.sh, and
 * a missing piece fails naming it.
 *
 * What is asserted is the adapter, not llama.cpp's numerics: observing a
 * pass through the graph callback leaves its bits unchanged; the kv hook
 * reads exactly what llama.cpp's own state serialization reads back; K/V
 * recomputed from the captured residuals with the prefill's batch shape are
 * the cached bits; an injected residual continues the pass (patching all
 * positions of a layer reproduces the donor run's logits); the cache edits
 * llama.cpp can do are pushed and the others refused — rows written in
 * place are the rows llama.cpp then attends to (another run's cache
 * written over this one's gives that run's logits); a split sliding-window
 * cache (gemma2) reads back every stored row; attention probabilities
 * (flash attention off) are the reference engine's within float noise, on
 * the right positions; micro-batches, threads, devices and options. (What llama.cpp does across batch shapes,
 * threads and devices is measured by the checks: plugins/llama.cpp/README.md.)
 */
#include <math.h>

#include "tests/engine/plugin_fixture.h"

static kvv_engine *open_llama(const fx_model *f, kvv_cache_type ct, int n_ubatch, int n_threads,
                              const char *device, const char *opt, kvv_status want,
                              const char *needle)
{
    const char *opts[] = {opt, NULL};
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = "llama.cpp";
    o.mode = KVV_MODE_INVARIANT; /* what the CLI passes; llama.cpp has no modes */
    o.cache_type = ct;
    o.n_ctx = 32;
    o.n_ubatch = n_ubatch;
    o.n_threads = n_threads;
    o.device = device;
    o.engine_opts = opts;
    o.n_engine_opts = opt ? 1 : 0;
    kvv_engine *e = NULL;
    kvv_error err = {0};
    kvv_status s = kvv_engine_open(f->m, &o, &e, &err);
    if (s != want || (needle && !strstr(err.msg, needle)))
        fail_msg("open llama.cpp (%s %s): status %d (want %d): '%s' (want '%s')",
                 device ? device : "", opt ? opt : "", (int)s, (int)want, err.msg,
                 needle ? needle : "");
    return e;
}

static void tokens(const kvv_hparams *hp, int seed, int n, int32_t *tok, int32_t *pos)
{
    for (int i = 0; i < n; i++) {
        tok[i] = (int32_t)((i * 7919 + seed * 31 + 13) % hp->n_vocab);
        pos[i] = i;
    }
}

static void test_open(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "llama-tiny", KVV_TYPE_F32);
    kvv_engine *e = open_llama(&f, KVV_CACHE_F32, 0, 1, NULL, NULL, KVV_OK, NULL);
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    assert_string_equal(d.name, "llama.cpp");
    assert_string_equal(d.mode, "native");
    if (!strstr(d.version, "llama.cpp v0.5.0") || strncmp(d.variant, "ggml-cpu-", 9) != 0 ||
        strncmp(d.device, "CPU", 3) != 0)
        fail_msg("describe: version '%s' variant '%s' device '%s'", d.version, d.variant, d.device);
    print_message("llama.cpp: %s | %s | %s | %s\n", d.version, d.device, d.variant, d.kernels);
    const unsigned have = KVV_ENGINE_CAP_LOGITS_ALL | KVV_ENGINE_CAP_RESIDUAL_READ |
                          KVV_ENGINE_CAP_RESIDUAL_WRITE | KVV_ENGINE_CAP_KV_HOOK |
                          KVV_ENGINE_CAP_KV_READ | KVV_ENGINE_CAP_KV_FROM_RESIDUAL |
                          KVV_ENGINE_CAP_ATTN_OUT | KVV_ENGINE_CAP_KV_EVICT |
                          KVV_ENGINE_CAP_KV_WRITE | KVV_ENGINE_CAP_THREADS |
                          KVV_ENGINE_CAP_UBATCH | KVV_ENGINE_CAP_OP_TAPS;
    assert_int_equal(kvv_engine_caps(e), have);
    kvv_engine_close(e);
    /* the softmax is a node only with flash attention off */
    e = open_llama(&f, KVV_CACHE_F32, 0, 1, NULL, "flash_attn=off", KVV_OK, NULL);
    assert_int_equal(kvv_engine_caps(e), have | KVV_ENGINE_CAP_ATTN);
    kvv_engine_close(e);
    /* options and devices */
    open_llama(&f, KVV_CACHE_F32, 0, 1, NULL, "flash_attn=maybe", KVV_ERR_USAGE, "flash_attn=auto|on|off");
    open_llama(&f, KVV_CACHE_F32, 0, 1, NULL, "colour=blue", KVV_ERR_USAGE, "'colour=blue' not understood");
    open_llama(&f, KVV_CACHE_F32, 0, 1, "tpu", NULL, KVV_ERR_USAGE, "unknown device 'tpu'");
    open_llama(&f, KVV_CACHE_F32, 0, 1, NULL, "lib_dir=/nonexistent", KVV_ERR_IO, "install-deps.sh");
    kvv_engine *c = open_llama(&f, KVV_CACHE_F32, 0, 1, "cuda", NULL, KVV_ERR_UNSUPPORTED, "no CUDA device");
    assert_null(c);
    fx_model_close(&f);
    /* a split sliding-window cache reads back too */
    fx_model_open(&f, "gemma2-tiny", KVV_TYPE_F32);
    e = open_llama(&f, KVV_CACHE_F16, 0, 1, NULL, NULL, KVV_OK, NULL);
    assert_int_equal(kvv_engine_caps(e), have);
    assert_non_null(kvv_engine_cache(e));
    kvv_engine_close(e);
    fx_model_close(&f);
}

/* ------------------------------------------------------------ capture */

typedef struct {
    const kvv_hparams *hp;
    float *resid;   /* [n_layer+1][32][n_embd] */
    float *k, *v;   /* [n_layer][32][kd|vd] */
    int calls;      /* kv hook calls */
    int patch_layer;
    const float *patch; /* [32][n_embd] written over the residual entering patch_layer */
    int patch_from;     /* first position patched */
} cap;

static void cap_residual(void *u, int layer, int n, const int32_t *pos, float *h)
{
    cap *c = u;
    const int E = c->hp->n_embd;
    for (int i = 0; i < n; i++) {
        if (layer == c->patch_layer && pos[i] >= c->patch_from)
            memcpy(h + (size_t)i * E, c->patch + (size_t)pos[i] * E, (size_t)E * sizeof *h);
        memcpy(c->resid + ((size_t)layer * 32 + pos[i]) * E, h + (size_t)i * E, (size_t)E * sizeof *h);
    }
}

static void cap_kv(void *u, int layer, int n, const int32_t *pos, const float *k, const float *v)
{
    cap *c = u;
    const size_t kd = (size_t)c->hp->n_head_kv * c->hp->head_dim;
    const size_t vd = (size_t)c->hp->n_head_kv * c->hp->head_dim_v;
    c->calls++;
    for (int i = 0; i < n; i++) {
        memcpy(c->k + ((size_t)layer * 32 + pos[i]) * kd, k + i * kd, kd * sizeof *k);
        memcpy(c->v + ((size_t)layer * 32 + pos[i]) * vd, v + i * vd, vd * sizeof *v);
    }
}

static void cap_init(cap *c, const kvv_hparams *hp)
{
    memset(c, 0, sizeof *c);
    c->hp = hp;
    c->resid = calloc((size_t)(hp->n_layer + 1) * 32 * hp->n_embd, sizeof(float));
    c->k = calloc((size_t)hp->n_layer * 32 * hp->n_head_kv * hp->head_dim, sizeof(float));
    c->v = calloc((size_t)hp->n_layer * 32 * hp->n_head_kv * hp->head_dim_v, sizeof(float));
    c->patch_layer = -1;
    assert_true(c->resid && c->k && c->v);
}

static void cap_free(cap *c)
{
    free(c->resid);
    free(c->k);
    free(c->v);
}

static kvv_hooks cap_hooks(cap *c)
{
    kvv_hooks h = {.user = c, .residual = cap_residual, .kv = cap_kv};
    return h;
}

/* The kv hook's rows equal what the cache reads back, bit for bit. */
static void assert_hook_is_cache(kvv_engine *e, const cap *c, int T)
{
    const kvv_hparams *hp = c->hp;
    const size_t kd = (size_t)hp->n_head_kv * hp->head_dim, vd = (size_t)hp->n_head_kv * hp->head_dim_v;
    float *row = malloc((kd > vd ? kd : vd) * sizeof *row);
    assert_non_null(row);
    const kvv_kv_cache *m = kvv_engine_cache(e);
    for (int l = 0; l < hp->n_layer; l++)
        for (int t = 0; t < T; t++) {
            assert_true(kvv_kv_cache_present(m, l, t, 0));
            kvv_kv_cache_load_k(m, l, t, row);
            assert_memory_equal(row, c->k + ((size_t)l * 32 + t) * kd, kd * sizeof *row);
            kvv_kv_cache_load_v(m, l, t, row);
            assert_memory_equal(row, c->v + ((size_t)l * 32 + t) * vd, vd * sizeof *row);
        }
    free(row);
}

static void hooks_and_recompute(const fx_model *f, kvv_cache_type ct)
{
    const kvv_hparams *hp = &f->m->hp;
    const int T = 12;
    int32_t tok[32], pos[32];
    tokens(hp, 1, T, tok, pos);
    kvv_engine *e = open_llama(f, ct, 0, 1, NULL, NULL, KVV_OK, NULL);
    kvv_error err = {0};
    const size_t nl = (size_t)T * hp->n_vocab;
    float *l0 = malloc(nl * sizeof *l0), *l1 = malloc(nl * sizeof *l1);
    assert_true(l0 && l1);
    if (kvv_engine_forward(e, T, tok, pos, NULL, KVV_LOGITS_ALL, l0, &err))
        fail_msg("%s", err.msg);
    kvv_engine_reset(e);
    cap c;
    cap_init(&c, hp);
    kvv_hooks h = cap_hooks(&c);
    if (kvv_engine_forward(e, T, tok, pos, &h, KVV_LOGITS_ALL, l1, &err))
        fail_msg("%s", err.msg);
    /* observing the pass (graph split at every observed node) changes no bit */
    assert_memory_equal(l0, l1, nl * sizeof *l0);
    assert_int_equal(c.calls, hp->n_layer);
    assert_hook_is_cache(e, &c, T);
    /* recompute every layer from its residuals, all positions at once */
    const size_t kd = (size_t)hp->n_head_kv * hp->head_dim, vd = (size_t)hp->n_head_kv * hp->head_dim_v;
    float *k = malloc((size_t)T * kd * sizeof *k), *v = malloc((size_t)T * vd * sizeof *v);
    assert_true(k && v);
    for (int l = 0; l < hp->n_layer; l++) {
        if (kvv_engine_kv_from_residual(e, l, T, c.resid + (size_t)l * 32 * hp->n_embd, pos, k, v, &err))
            fail_msg("layer %d: %s", l, err.msg);
        assert_memory_equal(k, c.k + (size_t)l * 32 * kd, (size_t)T * kd * sizeof *k);
        assert_memory_equal(v, c.v + (size_t)l * 32 * vd, (size_t)T * vd * sizeof *v);
    }
    /* the cache was untouched by the recomputes */
    assert_hook_is_cache(e, &c, T);
    free(k);
    free(v);
    cap_free(&c);
    free(l0);
    free(l1);
    kvv_engine_close(e);
}

static void test_hooks_and_recompute(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "llama-tiny", KVV_TYPE_F32);
    hooks_and_recompute(&f, KVV_CACHE_F32);
    hooks_and_recompute(&f, KVV_CACHE_F16);
    fx_model_close(&f);
    fx_model_open(&f, "qwen2-tiny", KVV_TYPE_Q8_0);
    hooks_and_recompute(&f, KVV_CACHE_BF16);
    fx_model_close(&f);
}

/* gemma2: two caches (full and sliding-window, window 16); over 24
 * positions the window-masked rows still read back as stored. */
static void test_split_cache(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "gemma2-tiny", KVV_TYPE_F32);
    const kvv_hparams *hp = &f.m->hp;
    assert_true(hp->n_swa > 0 && hp->n_swa < 24);
    const int T = 24;
    int32_t tok[32], pos[32];
    tokens(hp, 5, T, tok, pos);
    for (int fa = 0; fa < 2; fa++) { /* V element-major (off) and row-major (on) */
        kvv_engine *e = open_llama(&f, KVV_CACHE_F16, 7, 1, NULL,
                                   fa ? "flash_attn=on" : "flash_attn=off", KVV_OK, NULL);
        kvv_error err = {0};
        cap c;
        cap_init(&c, hp);
        kvv_hooks h = cap_hooks(&c);
        if (kvv_engine_forward(e, T, tok, pos, &h, KVV_LOGITS_LAST, c.resid, &err))
            fail_msg("%s", err.msg);
        assert_hook_is_cache(e, &c, T);
        cap_free(&c);
        kvv_engine_close(e);
    }
    fx_model_close(&f);
}

/* kv_write: engine B's cache written over engine A's (every row of every
 * layer through the mirror, pushed before A's next forward) makes A decode
 * exactly B's next logits — the rows land in the cells llama.cpp reads. */
static void cache_write(const char *shape, kvv_cache_type ct, const char *opt)
{
    fx_model f;
    fx_model_open(&f, shape, KVV_TYPE_F32);
    const kvv_hparams *hp = &f.m->hp;
    const int T = 20;
    int32_t ta[32], tb[32], pos[32];
    tokens(hp, 6, T + 3, ta, pos);
    tokens(hp, 7, T + 3, tb, pos);
    tb[T] = ta[T];
    kvv_engine *a = open_llama(&f, ct, 0, 1, NULL, opt, KVV_OK, NULL);
    kvv_engine *b = open_llama(&f, ct, 0, 1, NULL, opt, KVV_OK, NULL);
    kvv_error err = {0};
    float *la = malloc((size_t)hp->n_vocab * sizeof *la), *lb = malloc((size_t)hp->n_vocab * sizeof *lb);
    assert_true(la && lb);
    if (kvv_engine_forward(a, T, ta, pos, NULL, KVV_LOGITS_LAST, la, &err) ||
        kvv_engine_forward(b, T, tb, pos, NULL, KVV_LOGITS_LAST, lb, &err))
        fail_msg("%s", err.msg);
    kvv_kv_cache *ma = kvv_engine_cache(a), *mb = kvv_engine_cache(b);
    const size_t es = ct == KVV_CACHE_F32 ? 4 : 2;
    const size_t kb = (size_t)hp->n_head_kv * hp->head_dim * es, vb = (size_t)hp->n_head_kv * hp->head_dim_v * es;
    for (int l = 0; l < hp->n_layer; l++)
        for (int t = 0; t < T; t++) {
            memcpy(kvv_kv_cache_k_ptr(ma, l, t), kvv_kv_cache_k_ptr(mb, l, t), kb);
            memcpy(kvv_kv_cache_v_ptr(ma, l, t), kvv_kv_cache_v_ptr(mb, l, t), vb);
        }
    if (kvv_engine_forward(a, 1, ta + T, pos + T, NULL, KVV_LOGITS_LAST, la, &err) ||
        kvv_engine_forward(b, 1, tb + T, pos + T, NULL, KVV_LOGITS_LAST, lb, &err))
        fail_msg("%s %s: %s", shape, opt, err.msg);
    assert_memory_equal(la, lb, (size_t)hp->n_vocab * sizeof *la);
    /* a position llama.cpp dropped cannot be written back */
    for (int l = 0; l < hp->n_layer; l++)
        kvv_kv_cache_evict(ma, l, 2, -1);
    if (kvv_engine_forward(a, 1, ta, pos + T + 1, NULL, KVV_LOGITS_LAST, la, &err))
        fail_msg("%s %s: after an eviction: %s", shape, opt, err.msg);
    float *kr = malloc(kb / es * sizeof *kr), *vr = malloc(vb / es * sizeof *vr);
    assert_true(kr && vr);
    for (int l = 0; l < hp->n_layer; l++) {
        kvv_kv_cache_load_k(mb, l, 3, kr);
        kvv_kv_cache_load_v(mb, l, 3, vr);
        kvv_kv_cache_store(ma, l, 2, kr, vr);
    }
    free(kr);
    free(vr);
    kvv_status s = kvv_engine_forward(a, 1, ta, pos + T + 2, NULL, KVV_LOGITS_LAST, la, &err);
    if (s != KVV_ERR_UNSUPPORTED || !strstr(err.msg, "holds no cell for position 2"))
        fail_msg("writing an evicted position: status %d '%s'", (int)s, err.msg);
    free(la);
    free(lb);
    kvv_engine_close(a);
    kvv_engine_close(b);
    fx_model_close(&f);
}

/* Attention probabilities, densely by key position: [layer][query pos][head][key pos]. */
typedef struct {
    const kvv_hparams *hp;
    float *p;
    int calls;
} attn_rec;

static void rec_attn(void *u, int layer, int n, const int32_t *pos, int n_keys,
                     const int32_t *key_pos, const float *prob)
{
    attn_rec *a = u;
    const int H = a->hp->n_head;
    a->calls++;
    for (int j = 1; j < n_keys; j++)
        assert_true(key_pos[j] > key_pos[j - 1]);
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++)
            for (int j = 0; j < n_keys; j++)
                a->p[(((size_t)layer * 32 + pos[i]) * H + h) * 32 + key_pos[j]] =
                    prob[((size_t)i * H + h) * n_keys + j];
}

/* llama.cpp's kq_soft_max, cells turned into positions, against the
 * reference engine's probabilities: the same entries are zero (future and
 * outside the window) and the rest agree within float noise. */
static void attention(const char *shape, int T, int n_ubatch, double tol)
{
    fx_model f;
    fx_model_open(&f, shape, KVV_TYPE_F32);
    const kvv_hparams *hp = &f.m->hp;
    int32_t tok[32], pos[32];
    tokens(hp, 8, T, tok, pos);
    const size_t cnt = (size_t)hp->n_layer * 32 * hp->n_head * 32;
    attn_rec a = {hp, calloc(cnt, sizeof(float)), 0}, r = {hp, calloc(cnt, sizeof(float)), 0};
    assert_true(a.p && r.p);
    kvv_engine *e = open_llama(&f, KVV_CACHE_F32, n_ubatch, 1, NULL, "flash_attn=off", KVV_OK, NULL);
    kvv_engine_opts ro = kvv_engine_opts_default();
    ro.n_ctx = 32;
    kvv_engine *ref;
    kvv_error err = {0};
    assert_int_equal(kvv_engine_open(f.m, &ro, &ref, &err), KVV_OK);
    float *logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    assert_non_null(logits);
    kvv_hooks ha = {.user = &a, .attn = rec_attn}, hr = {.user = &r, .attn = rec_attn};
    if (kvv_engine_forward(e, T, tok, pos, &ha, KVV_LOGITS_LAST, logits, &err) ||
        kvv_engine_forward(ref, T, tok, pos, &hr, KVV_LOGITS_LAST, logits, &err))
        fail_msg("%s: %s", shape, err.msg);
    assert_int_equal(a.calls, hp->n_layer * (n_ubatch ? (T + n_ubatch - 1) / n_ubatch : 1));
    double worst = 0;
    for (size_t i = 0; i < cnt; i++) {
        if ((a.p[i] == 0) != (r.p[i] == 0))
            fail_msg("%s: entry %zu: llama.cpp %g, reference %g", shape, i, (double)a.p[i],
                     (double)r.p[i]);
        double d = fabs((double)a.p[i] - (double)r.p[i]);
        worst = d > worst ? d : worst;
    }
    /* the same rows one key over are far apart: the positions are the right ones */
    double shifted = 0;
    for (size_t i = 0; i + 1 < cnt; i++)
        if (i % 32 != 31 && a.p[i] != 0 && r.p[i + 1] != 0) {
            double d = fabs((double)a.p[i] - (double)r.p[i + 1]);
            shifted = d > shifted ? d : shifted;
        }
    print_message("%s: attention probabilities within %.3g of the reference's (one key off: "
                  "%.3g)\n", shape, worst, shifted);
    assert_true(worst < tol && shifted > 10 * worst);
    free(a.p);
    free(r.p);
    free(logits);
    kvv_engine_close(e);
    kvv_engine_close(ref);
    fx_model_close(&f);
}

static void test_attention(void **state)
{
    (void)state;
    attention("llama-tiny", 12, 5, 1e-5);
    /* window 16: old keys masked on alternate layers; llama.cpp's gemma2
     * (soft-capped scores) is further from the reference: its logits differ
     * by ~1% too (compare) */
    attention("gemma2-tiny", 24, 0, 1e-2);
}

static void test_cache_write(void **state)
{
    (void)state;
    cache_write("llama-tiny", KVV_CACHE_F32, "flash_attn=off");
    cache_write("llama-tiny", KVV_CACHE_F16, "flash_attn=on");
    cache_write("gemma2-tiny", KVV_CACHE_F16, "flash_attn=off");
}

/* Writing run A's residuals into run B at one layer, every position:
 * B continues as A (same batch shape, so the same bits); from a later
 * position only: B's logits differ. */
static void test_patch(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "phi3-tiny", KVV_TYPE_F16);
    const kvv_hparams *hp = &f.m->hp;
    const int T = 10;
    int32_t ta[32], tb[32], pos[32];
    tokens(hp, 1, T, ta, pos);
    tokens(hp, 2, T, tb, pos);
    kvv_engine *e = open_llama(&f, KVV_CACHE_F16, 0, 1, NULL, NULL, KVV_OK, NULL);
    kvv_error err = {0};
    const size_t nl = (size_t)T * hp->n_vocab;
    float *la = malloc(nl * sizeof *la), *lb = malloc(nl * sizeof *lb);
    assert_true(la && lb);
    cap a, b;
    cap_init(&a, hp);
    cap_init(&b, hp);
    kvv_hooks h = cap_hooks(&a);
    assert_int_equal(kvv_engine_forward(e, T, ta, pos, &h, KVV_LOGITS_ALL, la, &err), KVV_OK);
    for (int layer = 0; layer <= hp->n_layer; layer++) {
        for (int from = 0; from <= 4; from += 4) {
            kvv_engine_reset(e);
            b.patch_layer = layer;
            b.patch = a.resid + (size_t)layer * 32 * hp->n_embd;
            b.patch_from = from;
            h = cap_hooks(&b);
            if (kvv_engine_forward(e, T, tb, pos, &h, KVV_LOGITS_ALL, lb, &err))
                fail_msg("%s", err.msg);
            if (from == 0)
                assert_memory_equal(la, lb, nl * sizeof *la);
            else /* positions before `from` keep B's context */
                assert_true(memcmp(la, lb, nl * sizeof *la) != 0);
        }
    }
    cap_free(&a);
    cap_free(&b);
    free(la);
    free(lb);
    kvv_engine_close(e);
    fx_model_close(&f);
}

static void expect(kvv_status s, const kvv_error *err, kvv_status want, const char *needle)
{
    if (s != want || (needle && !strstr(err->msg, needle)))
        fail_msg("status %d (want %d): '%s' (want '%s')", (int)s, (int)want, err->msg,
                 needle ? needle : "");
}

static void test_cache_edits(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "llama-tiny", KVV_TYPE_Q8_0);
    const kvv_hparams *hp = &f.m->hp;
    int32_t tok[32], pos[32];
    tokens(hp, 3, 16, tok, pos);
    kvv_engine *e = open_llama(&f, KVV_CACHE_F32, 0, 1, NULL, NULL, KVV_OK, NULL);
    kvv_error err = {0};
    float *l0 = malloc((size_t)8 * hp->n_vocab * sizeof *l0), *l1 = malloc((size_t)8 * hp->n_vocab * sizeof *l1);
    assert_true(l0 && l1);
    assert_int_equal(kvv_engine_forward(e, 8, tok, pos, NULL, KVV_LOGITS_ALL, l0, &err), KVV_OK);
    kvv_kv_cache *m = kvv_engine_cache(e);
    /* a whole position evicted by the host reaches llama.cpp */
    for (int l = 0; l < hp->n_layer; l++)
        kvv_kv_cache_evict(m, l, 3, -1);
    assert_int_equal(kvv_engine_forward(e, 1, tok + 8, pos + 8, NULL, KVV_LOGITS_LAST, l1, &err), KVV_OK);
    assert_false(kvv_kv_cache_present(m, 0, 3, 0));
    assert_true(kvv_kv_cache_present(m, 0, 8, 0));
    /* recomputing the tail: the host removes it first (no overwrite) */
    assert_int_equal(kvv_engine_forward(e, 2, tok + 7, pos + 7, NULL, KVV_LOGITS_LAST, l1, &err), KVV_OK);
    /* a gap would lose position 8 */
    expect(kvv_engine_forward(e, 1, tok + 6, pos + 6, NULL, KVV_LOGITS_LAST, l1, &err), &err,
           KVV_ERR_UNSUPPORTED, "while it holds position");
    /* llama.cpp's cells span all heads and layers */
    kvv_kv_cache_evict(m, 1, 2, 0);
    expect(kvv_engine_forward(e, 1, tok + 9, pos + 9, NULL, KVV_LOGITS_LAST, l1, &err), &err,
           KVV_ERR_UNSUPPORTED, "kv-evict-head");
    kvv_engine_reset(e);
    assert_int_equal(kvv_engine_forward(e, 8, tok, pos, NULL, KVV_LOGITS_ALL, l1, &err), KVV_OK);
    assert_memory_equal(l0, l1, (size_t)8 * hp->n_vocab * sizeof *l0); /* a clear is a clear */
    /* a changed row is written into llama.cpp's cache: the next token sees it */
    float *l2 = malloc((size_t)hp->n_vocab * sizeof *l2);
    assert_non_null(l2);
    assert_int_equal(kvv_engine_forward(e, 1, tok + 8, pos + 8, NULL, KVV_LOGITS_LAST, l2, &err),
                     KVV_OK);
    kvv_engine_reset(e);
    assert_int_equal(kvv_engine_forward(e, 8, tok, pos, NULL, KVV_LOGITS_ALL, l1, &err), KVV_OK);
    ((uint8_t *)kvv_kv_cache_k_ptr(m, 0, 1))[2] ^= 0x40u; /* flash attention reads K at f16 */
    assert_int_equal(kvv_engine_forward(e, 1, tok + 8, pos + 8, NULL, KVV_LOGITS_LAST, l1, &err),
                     KVV_OK);
    assert_true(memcmp(l1, l2, (size_t)hp->n_vocab * sizeof *l1) != 0);
    free(l2);
    /* positions llama.cpp cannot take in one call */
    int32_t gap[2] = {8, 10};
    expect(kvv_engine_forward(e, 2, tok, gap, NULL, KVV_LOGITS_LAST, l1, &err), &err,
           KVV_ERR_UNSUPPORTED, "consecutive positions");
    free(l0);
    free(l1);
    kvv_engine_close(e);
    fx_model_close(&f);
}

/* Micro-batches of 4 and two threads: hooks per micro-batch, placed by
 * position, still equal the cache. */
static void test_ubatch_threads(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "qwen3-tiny", KVV_TYPE_F32);
    const kvv_hparams *hp = &f.m->hp;
    const int T = 10;
    int32_t tok[32], pos[32];
    tokens(hp, 4, T, tok, pos);
    kvv_error err = {0};
    const int variants[2][2] = {{4, 1}, {0, 2}}; /* {n_ubatch, n_threads} */
    for (int i = 0; i < 2; i++) {
        kvv_engine *e = open_llama(&f, KVV_CACHE_F16, variants[i][0], variants[i][1], NULL, NULL,
                                   KVV_OK, NULL);
        kvv_engine_desc d;
        kvv_engine_describe(e, &d);
        assert_int_equal(d.n_threads, variants[i][1]);
        if (variants[i][0])
            assert_int_equal(d.n_ubatch, variants[i][0]);
        cap c;
        cap_init(&c, hp);
        kvv_hooks h = cap_hooks(&c);
        assert_int_equal(kvv_engine_forward(e, T, tok, pos, &h, KVV_LOGITS_LAST,
                                            c.resid /* any buffer of n_vocab */, &err),
                         KVV_OK);
        assert_int_equal(c.calls, hp->n_layer * (variants[i][0] ? (T + 3) / 4 : 1));
        assert_hook_is_cache(e, &c, T);
        cap_free(&c);
        kvv_engine_close(e);
    }
    fx_model_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open),
        cmocka_unit_test(test_hooks_and_recompute),
        cmocka_unit_test(test_patch),
        cmocka_unit_test(test_cache_edits),
        cmocka_unit_test(test_split_cache),
        cmocka_unit_test(test_cache_write),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_ubatch_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
