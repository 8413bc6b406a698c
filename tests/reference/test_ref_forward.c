/*
 * test_ref_forward.c — the reference forward pass on synthetic models of all
 * seven tiny shapes (six architectures, built in memory by model/synth.h, so
 * no ../shared is needed):
 *   - one batch, chunks and one token at a time give the same bits (logits,
 *     K, V, residuals), also with f16 and bf16 caches;
 *   - hooks: with all hooks the logits equal a run without hooks; attention
 *     probabilities sum to 1 per query head, are 0 for future positions and
 *     outside the sliding window; K/V from the hook are representable in the
 *     cache dtype;
 *   - kv_from_residual recomputes the cached K and V bit for bit, for every
 *     layer, one token at a time and all at once; the reversed-sum negative
 *     control makes it differ;
 *   - a select hook sees only causal, in-window candidates; keeping every
 *     key changes nothing, dropping keys gives them probability 0;
 *   - patching: overwriting the residual entering layer l with another run's
 *     gives that run's logits exactly;
 *   - the perturbed-weight control changes the logits; bad arguments are
 *     usage errors;
 *   - llama.cpp emulation (KVV_GGML_*) keeps all of the above, and changes
 *     the numbers only where it applies (GELU, F16/Q8_0 weights);
 *   - weights are read where the file stores them: an F32 model whose rows
 *     are not 4-byte aligned in memory (widened through the row scratch)
 *     gives the bits of the aligned one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/synth.h"
#include "reference/ref.h"
#include "reference/ref_trace.h"
#include "tests/test_util.h"

#define N_TOK 24

typedef struct {
    uint8_t *buf;   /* GGUF bytes (the model maps them) */
    kvv_model *m;
} synth_model;

static void synth_open(synth_model *s, const char *shape, kvv_type type)
{
    kvv_error err = {0};
    kvv_synth_opts o;
    memset(&o, 0, sizeof o);
    o.shape = kvv_shape_find(shape);
    assert_non_null(o.shape);
    o.type = type;
    o.seed = 11;
    kvv_gguf_writer *w;
    if (kvv_synth_build(&o, &w, &err))
        fail_msg("%s", err.msg);
    size_t size;
    if (kvv_gguf_writer_to_buffer(w, &s->buf, &size, &err))
        fail_msg("%s", err.msg);
    kvv_gguf_writer_free(w);
    kvv_gguf *g;
    if (kvv_gguf_open_memory(s->buf, size, shape, &g, &err))
        fail_msg("%s", err.msg);
    if (kvv_model_from_gguf(g, &s->m, &err))
        fail_msg("%s", err.msg);
}

static void synth_close(synth_model *s)
{
    kvv_model_close(s->m);
    free(s->buf);
}

static kvv_ref *ref_open_ggml(const kvv_model *m, kvv_cache_type ct, unsigned control,
                              unsigned ggml)
{
    kvv_ref_opts o = kvv_ref_opts_default();
    o.cache_type = ct;
    o.ggml = ggml;
    o.n_ctx = 64;
    o.control = control;
    kvv_ref *r;
    kvv_error err = {0};
    if (kvv_ref_open(m, &o, &r, &err))
        fail_msg("%s", err.msg);
    return r;
}

static kvv_ref *ref_open(const kvv_model *m, kvv_cache_type ct, unsigned control)
{
    return ref_open_ggml(m, ct, control, 0);
}

#define GGML_ALL (KVV_GGML_GELU_FP16 | KVV_GGML_ACT_QUANT)

static void prompt(int32_t *tok, int32_t *pos, int n_vocab)
{
    for (int i = 0; i < N_TOK; i++) {
        tok[i] = i == 0 ? 1 : (int32_t)(3 + (i * 37 + 11) % (n_vocab - 3));
        pos[i] = i;
    }
}

/* Run the prompt in chunks of the given sizes (0-terminated; the rest in
 * one go), with a trace; hash into hex and logits into lg (N_TOK rows). */
static void run_chunks(kvv_ref *r, const kvv_model *m, const int *chunks, bool hooks, float *lg,
                       char hex[65])
{
    int32_t tok[N_TOK], pos[N_TOK];
    prompt(tok, pos, m->hp.n_vocab);
    kvv_trace *tr = kvv_trace_new(&m->hp, 64);
    assert_non_null(tr);
    kvv_hooks h = kvv_trace_hooks(tr);
    kvv_error err = {0};
    kvv_kv_cache_clear(kvv_ref_cache(r));
    int done = 0, c = 0;
    while (done < N_TOK) {
        int n = chunks && chunks[c] ? chunks[c++] : N_TOK - done;
        if (n > N_TOK - done)
            n = N_TOK - done;
        float *rows = lg + (size_t)done * m->hp.n_vocab;
        assert_int_equal(kvv_ref_forward(r, n, tok + done, pos + done, hooks ? &h : NULL,
                                         KVV_LOGITS_ALL, rows, &err), KVV_OK);
        for (int i = 0; i < n; i++)
            kvv_trace_add_logits(tr, done + i, rows + (size_t)i * m->hp.n_vocab);
        done += n;
    }
    assert_int_equal(kvv_trace_dropped(tr), 0);
    kvv_trace_sha256_hex(tr, hex);
    kvv_trace_free(tr);
}

static const char *const shapes[] = {"llama-tiny", "llama3-tiny", "qwen2-tiny", "qwen3-tiny",
                                     "gemma2-tiny", "gemma3-tiny", "phi3-tiny"};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* ------------------------------------------------------------ batch invariance */

static void check_invariance(const char *shape, kvv_type type, kvv_cache_type ct, unsigned ggml)
{
    synth_model s;
    synth_open(&s, shape, type);
    kvv_ref *r = ref_open_ggml(s.m, ct, 0, ggml);
    const size_t nl = (size_t)N_TOK * s.m->hp.n_vocab;
    float *a = malloc(nl * sizeof(float)), *b = malloc(nl * sizeof(float));
    assert_true(a && b);
    char ha[65], hb[65];
    run_chunks(r, s.m, NULL, true, a, ha);
    static const int ones[N_TOK + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    static const int odd[] = {3, 5, 1, 7, 0};
    const int *splits[2] = {ones, odd};
    for (int k = 0; k < 2; k++) {
        run_chunks(r, s.m, splits[k], true, b, hb);
        if (strcmp(ha, hb) != 0 || memcmp(a, b, nl * sizeof(float)) != 0)
            fail_msg("%s cache %s: chunking %d changes the bits (%s vs %s)", shape,
                     kvv_cache_type_name(ct), k, ha, hb);
    }
    /* Without hooks: the same logits. */
    run_chunks(r, s.m, odd, false, b, hb);
    assert_memory_equal(a, b, nl * sizeof(float));
    free(a);
    free(b);
    kvv_ref_close(r);
    synth_close(&s);
}

static void test_batch_invariance(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_SHAPES; i++)
        check_invariance(shapes[i], KVV_TYPE_F32, KVV_CACHE_F32, 0);
    check_invariance("llama-tiny", KVV_TYPE_Q8_0, KVV_CACHE_F32, 0);
    check_invariance("gemma3-tiny", KVV_TYPE_F16, KVV_CACHE_F16, 0);
    check_invariance("qwen3-tiny", KVV_TYPE_F32, KVV_CACHE_BF16, 0);
    /* llama.cpp emulation keeps batch invariance */
    check_invariance("phi3-tiny", KVV_TYPE_Q8_0, KVV_CACHE_F32, GGML_ALL);
    check_invariance("gemma2-tiny", KVV_TYPE_F16, KVV_CACHE_F32, GGML_ALL);
}

/* ------------------------------------------------------------ hooks */

typedef struct {
    const kvv_hparams *hp;
    kvv_cache_type ct;
    float *resid;      /* (n_layer, N_TOK, E): residual entering each layer */
    float *k, *v;      /* (n_layer, N_TOK, K/V width) as stored */
    int n_attn, n_out, n_final;
    double worst_sum;  /* max |sum p - 1| */
    int bad_mask;      /* nonzero probabilities where the mask forbids */
    const float *patch; /* (N_TOK, E) residual to write at patch_layer, or NULL */
    int patch_layer;
} capture;

static void cap_resid(void *u, int layer, int n, const int32_t *pos, float *h)
{
    capture *c = u;
    const int E = c->hp->n_embd;
    if (layer == c->hp->n_layer) {
        c->n_final += n;
        return;
    }
    if (c->patch && layer == c->patch_layer)
        for (int i = 0; i < n; i++)
            memcpy(h + (size_t)i * E, c->patch + (size_t)pos[i] * E, sizeof(float) * (size_t)E);
    for (int i = 0; i < n; i++)
        memcpy(c->resid + ((size_t)layer * N_TOK + (size_t)pos[i]) * E, h + (size_t)i * E,
               sizeof(float) * (size_t)E);
}

static void cap_kv(void *u, int layer, int n, const int32_t *pos, const float *k, const float *v)
{
    capture *c = u;
    const int K = c->hp->n_head_kv * c->hp->head_dim, V = c->hp->n_head_kv * c->hp->head_dim_v;
    for (int i = 0; i < n; i++) {
        memcpy(c->k + ((size_t)layer * N_TOK + (size_t)pos[i]) * K, k + (size_t)i * K,
               sizeof(float) * (size_t)K);
        memcpy(c->v + ((size_t)layer * N_TOK + (size_t)pos[i]) * V, v + (size_t)i * V,
               sizeof(float) * (size_t)V);
        for (int j = 0; j < K; j++)
            assert_true(kvv_cache_round(c->ct, k[(size_t)i * K + j]) == k[(size_t)i * K + j]);
    }
}

static void cap_attn(void *u, int layer, int n, const int32_t *pos, int n_keys,
                     const int32_t *key_pos, const float *p)
{
    capture *c = u;
    const kvv_hparams *hp = c->hp;
    c->n_attn++;
    for (int i = 0; i < n; i++)
        for (int h = 0; h < hp->n_head; h++) {
            const float *row = p + ((size_t)i * hp->n_head + (size_t)h) * (size_t)n_keys;
            double sum = 0;
            for (int j = 0; j < n_keys; j++) {
                sum += row[j];
                bool masked = key_pos[j] > pos[i] ||
                              (hp->swa_layer[layer] && hp->n_swa > 0 &&
                               pos[i] - key_pos[j] >= hp->n_swa);
                if (masked && row[j] != 0.0f)
                    c->bad_mask++;
            }
            if (fabs(sum - 1.0) > c->worst_sum)
                c->worst_sum = fabs(sum - 1.0);
        }
}

static void cap_out(void *u, int layer, int n, const int32_t *pos, const float *o)
{
    (void)layer, (void)pos, (void)o;
    ((capture *)u)->n_out += n;
}

static void capture_init(capture *c, const kvv_hparams *hp, kvv_cache_type ct)
{
    memset(c, 0, sizeof *c);
    c->hp = hp;
    c->ct = ct;
    c->resid = calloc((size_t)hp->n_layer * N_TOK * hp->n_embd, sizeof(float));
    c->k = calloc((size_t)hp->n_layer * N_TOK * hp->n_head_kv * hp->head_dim, sizeof(float));
    c->v = calloc((size_t)hp->n_layer * N_TOK * hp->n_head_kv * hp->head_dim_v, sizeof(float));
    assert_true(c->resid && c->k && c->v);
}

static void capture_free(capture *c)
{
    free(c->resid);
    free(c->k);
    free(c->v);
}

static kvv_hooks all_hooks(capture *c)
{
    kvv_hooks h;
    memset(&h, 0, sizeof h);
    h.user = c;
    h.residual = cap_resid;
    h.kv = cap_kv;
    h.attn = cap_attn;
    h.attn_out = cap_out;
    return h;
}

static void check_hooks_and_recompute(const char *shape, kvv_type type, kvv_cache_type ct,
                                      unsigned ggml)
{
    synth_model s;
    synth_open(&s, shape, type);
    const kvv_hparams *hp = &s.m->hp;
    kvv_ref *r = ref_open_ggml(s.m, ct, 0, ggml);
    int32_t tok[N_TOK], pos[N_TOK];
    prompt(tok, pos, hp->n_vocab);
    const size_t nl = (size_t)N_TOK * hp->n_vocab;
    float *plain = malloc(nl * sizeof(float)), *hooked = malloc(nl * sizeof(float));
    assert_true(plain && hooked);
    kvv_error err = {0};
    assert_int_equal(kvv_ref_forward(r, N_TOK, tok, pos, NULL, KVV_LOGITS_ALL, plain, &err), 0);
    kvv_kv_cache_clear(kvv_ref_cache(r));
    capture c;
    capture_init(&c, hp, ct);
    kvv_hooks h = all_hooks(&c);
    assert_int_equal(kvv_ref_forward(r, N_TOK, tok, pos, &h, KVV_LOGITS_ALL, hooked, &err), 0);
    assert_memory_equal(plain, hooked, nl * sizeof(float));
    assert_int_equal(c.n_attn, hp->n_layer);
    assert_int_equal(c.n_out, hp->n_layer * N_TOK);
    assert_int_equal(c.n_final, N_TOK);
    assert_int_equal(c.bad_mask, 0);
    assert_true(c.worst_sum < 1e-5);

    /* kv_from_residual == cached K/V, all at once and one token at a time. */
    const int K = hp->n_head_kv * hp->head_dim, V = hp->n_head_kv * hp->head_dim_v;
    float *k = malloc(sizeof(float) * N_TOK * (size_t)K), *v = malloc(sizeof(float) * N_TOK * (size_t)V);
    float *row = malloc(sizeof(float) * (size_t)K);
    assert_true(k && v && row);
    for (int l = 0; l < hp->n_layer; l++) {
        const float *hl = c.resid + (size_t)l * N_TOK * hp->n_embd;
        assert_int_equal(kvv_ref_kv_from_residual(r, l, N_TOK, hl, pos, k, v, &err), 0);
        assert_memory_equal(k, c.k + (size_t)l * N_TOK * K, sizeof(float) * N_TOK * (size_t)K);
        assert_memory_equal(v, c.v + (size_t)l * N_TOK * V, sizeof(float) * N_TOK * (size_t)V);
        for (int t = 0; t < N_TOK; t += 5) {
            assert_int_equal(kvv_ref_kv_from_residual(r, l, 1, hl + (size_t)t * hp->n_embd,
                                                      &pos[t], k, v, &err), 0);
            assert_memory_equal(k, c.k + ((size_t)l * N_TOK + (size_t)t) * K, sizeof(float) * (size_t)K);
            /* ... and equal to the cache itself. */
            kvv_kv_cache_load_k(kvv_ref_cache(r), l, t, row);
            assert_memory_equal(k, row, sizeof(float) * (size_t)K);
        }
    }
    /* Negative control: reversed sums must change some K bit (f32 cache:
     * with f16/bf16 storage a last-bit difference mostly rounds away). */
    kvv_ref *rc = ref_open_ggml(s.m, ct, KVV_CTL_KV_REVERSED_SUM, ggml);
    int differ = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        const float *hl = c.resid + (size_t)l * N_TOK * hp->n_embd;
        assert_int_equal(kvv_ref_kv_from_residual(rc, l, N_TOK, hl, pos, k, v, &err), 0);
        differ += memcmp(k, c.k + (size_t)l * N_TOK * K, sizeof(float) * N_TOK * (size_t)K) != 0;
    }
    if (ct == KVV_CACHE_F32)
        assert_true(differ > 0);
    kvv_ref_close(rc);
    free(k);
    free(v);
    free(row);
    free(plain);
    free(hooked);
    capture_free(&c);
    kvv_ref_close(r);
    synth_close(&s);
}

static void test_hooks_and_kv_recompute(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_SHAPES; i++)
        check_hooks_and_recompute(shapes[i], KVV_TYPE_F32, KVV_CACHE_F32, 0);
    check_hooks_and_recompute("gemma2-tiny", KVV_TYPE_F32, KVV_CACHE_F16, 0);
    check_hooks_and_recompute("qwen2-tiny", KVV_TYPE_F32, KVV_CACHE_BF16, 0);
    check_hooks_and_recompute("qwen2-tiny", KVV_TYPE_Q8_0, KVV_CACHE_F32, GGML_ALL);
    check_hooks_and_recompute("phi3-tiny", KVV_TYPE_F16, KVV_CACHE_F32, GGML_ALL);
}

/* ------------------------------------------------------------ patching */

static void test_patch_residual(void **state)
{
    (void)state;
    synth_model s;
    synth_open(&s, "gemma3-tiny", KVV_TYPE_F32);
    const kvv_hparams *hp = &s.m->hp;
    kvv_ref *r = ref_open(s.m, KVV_CACHE_F32, 0);
    int32_t ta[N_TOK], tb[N_TOK], pos[N_TOK];
    prompt(ta, pos, hp->n_vocab);
    for (int i = 0; i < N_TOK; i++)
        tb[i] = i == 0 ? 1 : (int32_t)(3 + (i * 101 + 5) % (hp->n_vocab - 3));
    const size_t nl = (size_t)N_TOK * hp->n_vocab;
    float *la = malloc(nl * sizeof(float)), *lb = malloc(nl * sizeof(float));
    assert_true(la && lb);
    kvv_error err = {0};
    capture a;
    capture_init(&a, hp, KVV_CACHE_F32);
    kvv_hooks h = all_hooks(&a);
    assert_int_equal(kvv_ref_forward(r, N_TOK, ta, pos, &h, KVV_LOGITS_ALL, la, &err), 0);
    for (int l = 0; l < hp->n_layer; l++) {
        kvv_kv_cache_clear(kvv_ref_cache(r));
        capture b;
        capture_init(&b, hp, KVV_CACHE_F32);
        b.patch = a.resid + (size_t)l * N_TOK * hp->n_embd;
        b.patch_layer = l;
        kvv_hooks hb = all_hooks(&b);
        assert_int_equal(kvv_ref_forward(r, N_TOK, tb, pos, &hb, KVV_LOGITS_ALL, lb, &err), 0);
        assert_memory_equal(la, lb, nl * sizeof(float));
        capture_free(&b);
    }
    /* Control: B unpatched differs from A. */
    kvv_kv_cache_clear(kvv_ref_cache(r));
    assert_int_equal(kvv_ref_forward(r, N_TOK, tb, pos, NULL, KVV_LOGITS_ALL, lb, &err), 0);
    assert_true(memcmp(la, lb, nl * sizeof(float)) != 0);
    capture_free(&a);
    free(la);
    free(lb);
    kvv_ref_close(r);
    synth_close(&s);
}

/* ------------------------------------------------------------ select hook */

typedef struct {
    const kvv_hparams *hp;
    int keep_last;    /* keep only keys with qpos - key < keep_last (0: keep all) */
    long calls;
    int bad;          /* candidates that are not causal or outside the window */
    int leaked;       /* nonzero probability on a dropped key */
} selector;

static void sel_select(void *u, int layer, int qpos, int head, const float *q, int n_keys,
                       const int32_t *key_pos, uint8_t *keep)
{
    selector *s = u;
    s->calls++;
    assert_non_null(q);
    assert_true(head >= 0 && head < s->hp->n_head);
    for (int j = 0; j < n_keys; j++) {
        if (key_pos[j] > qpos || (j > 0 && key_pos[j] <= key_pos[j - 1]) ||
            (s->hp->swa_layer[layer] && qpos - key_pos[j] >= s->hp->n_swa))
            s->bad++;
        assert_int_equal(keep[j], 1);
        if (s->keep_last && qpos - key_pos[j] >= s->keep_last)
            keep[j] = 0;
    }
}

static void sel_attn(void *u, int layer, int n, const int32_t *pos, int n_keys,
                     const int32_t *key_pos, const float *p)
{
    selector *s = u;
    (void)layer;
    for (int i = 0; i < n; i++)
        for (int h = 0; h < s->hp->n_head; h++)
            for (int j = 0; j < n_keys; j++)
                if (s->keep_last && pos[i] - key_pos[j] >= s->keep_last &&
                    p[((size_t)i * s->hp->n_head + (size_t)h) * (size_t)n_keys + (size_t)j] != 0.0f)
                    s->leaked++;
}

static void test_select_hook(void **state)
{
    (void)state;
    synth_model sm;
    synth_open(&sm, "gemma2-tiny", KVV_TYPE_F32);
    const kvv_hparams *hp = &sm.m->hp;
    kvv_ref *r = ref_open(sm.m, KVV_CACHE_F32, 0);
    int32_t tok[N_TOK], pos[N_TOK];
    prompt(tok, pos, hp->n_vocab);
    const size_t nl = (size_t)N_TOK * hp->n_vocab;
    float *plain = malloc(nl * sizeof(float)), *lg = malloc(nl * sizeof(float));
    assert_true(plain && lg);
    kvv_error err = {0};
    assert_int_equal(kvv_ref_forward(r, N_TOK, tok, pos, NULL, KVV_LOGITS_ALL, plain, &err), 0);
    for (int keep_last = 0; keep_last <= 4; keep_last += 4) {
        selector s = {hp, keep_last, 0, 0, 0};
        kvv_hooks h;
        memset(&h, 0, sizeof h);
        h.user = &s;
        h.select = sel_select;
        h.attn = sel_attn;
        kvv_kv_cache_clear(kvv_ref_cache(r));
        assert_int_equal(kvv_ref_forward(r, N_TOK, tok, pos, &h, KVV_LOGITS_ALL, lg, &err), 0);
        assert_int_equal(s.calls, (long)N_TOK * hp->n_head * hp->n_layer);
        assert_int_equal(s.bad, 0);
        assert_int_equal(s.leaked, 0);
        if (keep_last == 0)
            assert_memory_equal(lg, plain, nl * sizeof(float));
        else
            assert_true(memcmp(lg, plain, nl * sizeof(float)) != 0);
    }
    free(plain);
    free(lg);
    kvv_ref_close(r);
    synth_close(&sm);
}

/* ------------------------------------------------------------ controls, errors */

static void test_perturb_and_errors(void **state)
{
    (void)state;
    synth_model s;
    synth_open(&s, "llama-tiny", KVV_TYPE_F32);
    const kvv_hparams *hp = &s.m->hp;
    kvv_ref *r = ref_open(s.m, KVV_CACHE_F32, 0);
    kvv_ref *rp = ref_open(s.m, KVV_CACHE_F32, KVV_CTL_PERTURB_WEIGHT);
    int32_t tok[N_TOK], pos[N_TOK];
    prompt(tok, pos, hp->n_vocab);
    const size_t nl = (size_t)N_TOK * hp->n_vocab;
    float *a = malloc(nl * sizeof(float)), *b = malloc(nl * sizeof(float));
    assert_true(a && b);
    kvv_error err = {0};
    assert_int_equal(kvv_ref_forward(r, N_TOK, tok, pos, NULL, KVV_LOGITS_ALL, a, &err), 0);
    assert_int_equal(kvv_ref_forward(rp, N_TOK, tok, pos, NULL, KVV_LOGITS_ALL, b, &err), 0);
    assert_true(memcmp(a, b, nl * sizeof(float)) != 0);
    /* LAST equals the last row of ALL. */
    kvv_kv_cache_clear(kvv_ref_cache(r));
    assert_int_equal(kvv_ref_forward(r, N_TOK, tok, pos, NULL, KVV_LOGITS_LAST, b, &err), 0);
    assert_memory_equal(b, a + (size_t)(N_TOK - 1) * hp->n_vocab, sizeof(float) * (size_t)hp->n_vocab);

    int32_t bad_tok = hp->n_vocab, bad_pos = 64, p0 = 0;
    assert_int_equal(kvv_ref_forward(r, 1, &bad_tok, &p0, NULL, KVV_LOGITS_LAST, b, &err),
                     KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "vocabulary"));
    assert_int_equal(kvv_ref_forward(r, 1, tok, &bad_pos, NULL, KVV_LOGITS_LAST, b, &err),
                     KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "position 64"));
    assert_int_equal(kvv_ref_forward(r, 1, tok, &p0, NULL, KVV_LOGITS_LAST, NULL, &err),
                     KVV_ERR_USAGE);
    assert_int_equal(kvv_ref_forward(r, 0, tok, &p0, NULL, KVV_LOGITS_NONE, NULL, &err),
                     KVV_ERR_USAGE);
    float k[1024], v[1024];
    assert_int_equal(kvv_ref_kv_from_residual(r, hp->n_layer, 1, a, &p0, k, v, &err),
                     KVV_ERR_USAGE);
    kvv_ref_opts o = kvv_ref_opts_default();
    o.n_ctx = -1;
    kvv_ref *bad;
    assert_int_equal(kvv_ref_open(s.m, &o, &bad, &err), KVV_ERR_USAGE);
    assert_null(bad);
    kvv_ref_close(NULL);
    free(a);
    free(b);
    kvv_ref_close(r);
    kvv_ref_close(rp);
    synth_close(&s);
}

/* llama.cpp emulation changes the numbers of a Q8_0 gemma model (GELU table
 * and activation quantization) but not of an F32 llama (no F16/Q8_0 weight,
 * no GELU); bad flags are a usage error. */
static void test_ggml_emulation(void **state)
{
    (void)state;
    const char *shape[2] = {"gemma3-tiny", "llama-tiny"};
    const kvv_type type[2] = {KVV_TYPE_Q8_0, KVV_TYPE_F32};
    for (int c = 0; c < 2; c++) {
        synth_model s;
        synth_open(&s, shape[c], type[c]);
        const size_t nl = (size_t)N_TOK * s.m->hp.n_vocab;
        float *a = malloc(nl * sizeof(float)), *b = malloc(nl * sizeof(float));
        assert_true(a && b);
        char ha[65], hb[65];
        kvv_ref *r0 = ref_open(s.m, KVV_CACHE_F32, 0);
        kvv_ref *r1 = ref_open_ggml(s.m, KVV_CACHE_F32, 0, GGML_ALL);
        run_chunks(r0, s.m, NULL, true, a, ha);
        run_chunks(r1, s.m, NULL, true, b, hb);
        if (c == 0)
            assert_true(strcmp(ha, hb) != 0);
        else
            assert_string_equal(ha, hb);
        kvv_ref_close(r0);
        kvv_ref_close(r1);
        free(a);
        free(b);
        if (c == 1) {
            kvv_ref_opts o = kvv_ref_opts_default();
            o.ggml = 1u << 7;
            kvv_ref *bad;
            kvv_error err = {0};
            assert_int_equal(kvv_ref_open(s.m, &o, &bad, &err), KVV_ERR_USAGE);
        }
        synth_close(&s);
    }
}

/* The default cache size is min(context_length, 4096). */
/* The same GGUF bytes at an aligned and at an odd address: every F32 row is
 * read in place in the first, copied through the row scratch in the second;
 * the bits must not change (phi3: fused row views too). */
static void test_misaligned_map(void **state)
{
    (void)state;
    static const char *const which[] = {"llama-tiny", "phi3-tiny", "gemma3-tiny"};
    for (size_t i = 0; i < sizeof which / sizeof which[0]; i++) {
        synth_model s;
        synth_open(&s, which[i], KVV_TYPE_F32);
        const kvv_gguf *g0 = s.m->gguf;
        uint8_t *odd = malloc(g0->size + 8);
        assert_non_null(odd);
        memcpy(odd + 5, g0->base, g0->size);
        kvv_gguf *g;
        kvv_model *m;
        kvv_error err = {0};
        if (kvv_gguf_open_memory(odd + 5, g0->size, which[i], &g, &err) ||
            kvv_model_from_gguf(g, &m, &err))
            fail_msg("%s", err.msg);
        assert_true((uintptr_t)m->layers[0].w_down->data % 4 != 0);
        const size_t nl = (size_t)N_TOK * s.m->hp.n_vocab;
        float *a = malloc(nl * sizeof(float)), *b = malloc(nl * sizeof(float));
        assert_true(a && b);
        char ha[65], hb[65];
        kvv_ref *ra = ref_open(s.m, KVV_CACHE_F32, 0), *rb = ref_open(m, KVV_CACHE_F32, 0);
        static const int chunks[] = {5, 1, 0};
        run_chunks(ra, s.m, chunks, true, a, ha);
        run_chunks(rb, m, chunks, true, b, hb);
        if (strcmp(ha, hb) != 0)
            fail_msg("%s: misaligned F32 rows change the bits (%s vs %s)", which[i], ha, hb);
        kvv_ref_close(ra);
        kvv_ref_close(rb);
        kvv_model_close(m);
        free(odd);
        free(a);
        free(b);
        synth_close(&s);
    }
}

static void test_default_ctx(void **state)
{
    (void)state;
    synth_model s;
    synth_open(&s, "qwen3-tiny", KVV_TYPE_F32);
    kvv_ref *r;
    kvv_error err = {0};
    kvv_ref_opts o = kvv_ref_opts_default();
    assert_int_equal(kvv_ref_open(s.m, &o, &r, &err), 0);
    int want = s.m->hp.n_ctx_train < 4096 ? s.m->hp.n_ctx_train : 4096;
    assert_int_equal(kvv_ref_cache(r)->n_ctx, want);
    assert_int_equal(kvv_ref_cache(r)->type, KVV_CACHE_F32);
    kvv_ref_close(r);
    synth_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_hooks_and_kv_recompute),
        cmocka_unit_test(test_patch_residual),
        cmocka_unit_test(test_select_hook),
        cmocka_unit_test(test_perturb_and_errors),
        cmocka_unit_test(test_ggml_emulation),
        cmocka_unit_test(test_default_ctx),
        cmocka_unit_test(test_misaligned_map),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
