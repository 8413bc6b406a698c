/*
 * cpu_forward.c — the cpu engine's forward pass and kv_from_residual, in
 * data-flow order. Semantics are the reference engine's (reference/ref.h,
 * DESIGN.md §7, ../shared/peer/README.md "Architecture semantics"):
 *
 *   x = embd[tok] * embd_scale                         [n][n_embd]
 *   per layer l:
 *     hook residual(l, x)  (may overwrite x: patching)
 *     xn = rmsnorm(x) * attn_norm
 *     q, k, v = xn Wq^T (+bq), xn Wk^T (+bk), xn Wv^T (+bv)
 *     q, k = per-head rmsnorm * q_norm / k_norm (qwen3, gemma3)
 *     q, k = RoPE(pos)  (NORM pairs (2i, 2i+1) or NEOX (i, i+n_rot/2))
 *     k, v rounded to the cache dtype, stored at pos; hook kv(l, k, v)
 *     o = attention(q, cache)      hook attn(l, probs), attn_out(l, o)
 *     y = o Wo^T;  y = rmsnorm(y) * post_attn_norm (gemma);  x += y
 *     xn = rmsnorm(x) * ffn_norm
 *     a = act(xn Wg^T) * (xn Wu^T)   (SiLU, or GELU-tanh for gemma)
 *     y = a Wd^T;  y = rmsnorm(y) * post_ffw_norm (gemma);  x += y
 *   hook residual(n_layer, x)
 *   logits = (rmsnorm(x) * output_norm) Wout^T, then final soft-cap (gemma2)
 *
 * kv_from_residual(l, h) runs exactly the K/V part of layer l on h with the
 * same kernels, so in invariant mode it reproduces the cache bit for bit.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_impl.h"
#include "model/tensor_types.h"
#include "runtime/op_taps.h"

/* The op tap (runtime/op_taps.h) of rows x [n][width], when forward has one. */
static void cpu_tap(const kvv_cpu *c, int layer, int op, int n, const int32_t *pos, int width,
                    const float *x)
{
    if (c->tap && c->tap->op && x)
        c->tap->op(c->tap->user, layer, op, n, pos, width, x);
}

static bool grow(float **p, size_t n)
{
    float *q = realloc(*p, n * sizeof(float) + 64);
    if (!q)
        return false;
    *p = q;
    return true;
}

bool kvv_cpu_reserve(kvv_cpu *c, int n)
{
    if (n <= c->cap_tok)
        return true;
    const kvv_hparams *hp = c->hp;
    size_t N = (size_t)n;
    size_t wide = (size_t)(hp->n_ff > hp->n_embd ? hp->n_ff : hp->n_embd);
    size_t ow = (size_t)hp->n_head * (size_t)hp->head_dim_v;
    size_t in_w = wide > ow ? wide : ow; /* widest matmul input */
    if (!grow(&c->x, N * hp->n_embd) || !grow(&c->xn, N * wide) ||
        !grow(&c->q, N * hp->n_head * hp->head_dim) ||
        !grow(&c->kk, N * hp->n_head_kv * hp->head_dim) ||
        !grow(&c->vv, N * hp->n_head_kv * hp->head_dim_v) ||
        !grow(&c->o, N * hp->n_head * hp->head_dim_v) || !grow(&c->g, N * hp->n_ff) ||
        !grow(&c->u, N * hp->n_ff) || !grow(&c->y, N * hp->n_embd) ||
        !grow(&c->dx, N * in_w / 32 + 1))
        return false;
    int8_t *q8 = realloc(c->qx, N * in_w + 64);
    if (!q8)
        return false;
    c->qx = q8;
    int32_t *sx = realloc(c->sx, (N * in_w / 32 + 1) * sizeof(int32_t));
    if (!sx)
        return false;
    c->sx = sx;
    /* the rounded activations of cpu_kquant.h (Q8_K, Q8_1) */
    kvv_cpu_actbuf *ab[2] = {&c->q8k, &c->q81};
    for (int i = 0; i < 2; i++) {
        int8_t *q = realloc(ab[i]->q, N * in_w + 64);
        if (q)
            ab[i]->q = q;
        float *d = realloc(ab[i]->d, (N * in_w / 32 + 1) * sizeof(float));
        if (d)
            ab[i]->d = d;
        if (!q || !d)
            return false;
    }
    int16_t *bs = realloc(c->q8k.bsums, (N * in_w / 16 + 1) * sizeof(int16_t));
    if (!bs)
        return false;
    c->q8k.bsums = bs;
    float *s1 = realloc(c->q81.s, (N * in_w / 32 + 1) * sizeof(float));
    if (!s1)
        return false;
    c->q81.s = s1;
    c->cap_tok = n;
    return true;
}

static kvv_status check_batch(const kvv_cpu *c, int n, const int32_t *pos, kvv_error *err)
{
    if (n <= 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "cpu engine: batch of %d tokens", n);
    for (int i = 0; i < n; i++)
        if (pos[i] < 0 || pos[i] >= c->n_ctx)
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "cpu engine: position %d (token %d of the batch) outside the "
                                 "cache of %d positions",
                                 (int)pos[i], i, c->n_ctx);
    return KVV_OK;
}

static void add_bias(int n, int width, float *y, const float *b)
{
    if (!b)
        return;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < width; i++)
            y[(size_t)t * width + i] = y[(size_t)t * width + i] + b[i];
}

/* Per-head norm and RoPE of n rows of n_heads*hd values (each row on its
 * own: all norms, then all rotations, give the same bits), with the taps of
 * op_norm and op_rope. */
static void qk_finish(const kvv_cpu *c, int layer, int n, const int32_t *pos, int n_heads,
                      float *rows, const float *norm_w, int op_norm, int op_rope)
{
    int hd = c->hp->head_dim;
    for (int t = 0; norm_w && t < n; t++) {
        float *row = rows + (size_t)t * n_heads * hd;
        kvv_cpu_rmsnorm(c, n_heads, hd, row, (size_t)hd, norm_w, c->hp->norm_eps, row,
                        (size_t)hd);
    }
    if (norm_w)
        cpu_tap(c, layer, op_norm, n, pos, n_heads * hd, rows);
    for (int t = 0; t < n; t++)
        kvv_cpu_rope(c, layer, n_heads, hd, pos[t], rows + (size_t)t * n_heads * hd);
    cpu_tap(c, layer, op_rope, n, pos, n_heads * hd, rows);
}

/* K/V of layer l from the normed input xn [n][n_embd] into k, v (cache
 * rounding included). q may be NULL (kv_from_residual). */
static void project_qkv(kvv_cpu *c, int l, int n, const int32_t *pos, const float *xn,
                        float *q, float *k, float *v, bool reversed)
{
    const kvv_hparams *hp = c->hp;
    const kvv_cpu_layer *L = &c->layers[l];
    int qw = hp->n_head * hp->head_dim;
    int kw = hp->n_head_kv * hp->head_dim, vw = hp->n_head_kv * hp->head_dim_v;
    if (reversed) {
        kvv_cpu_matmul_reversed(c, n, xn, (size_t)hp->n_embd, &L->wk, k, (size_t)kw);
        kvv_cpu_matmul_reversed(c, n, xn, (size_t)hp->n_embd, &L->wv, v, (size_t)vw);
    } else {
        kvv_cpu_mm_out outs[3] = {
            {.w = &L->wk, .y = k, .ldy = (size_t)kw},
            {.w = &L->wv, .y = v, .ldy = (size_t)vw},
            {.w = &L->wq, .y = q, .ldy = (size_t)qw},
        };
        kvv_cpu_matmul(c, n, xn, (size_t)hp->n_embd, q ? 3 : 2, outs, true);
    }
    add_bias(n, kw, k, L->bk);
    add_bias(n, vw, v, L->bv);
    if (q)
        add_bias(n, qw, q, L->bq);
    cpu_tap(c, l, KVV_TAP_Q, n, pos, qw, q);
    cpu_tap(c, l, KVV_TAP_K, n, pos, kw, k);
    cpu_tap(c, l, KVV_TAP_V, n, pos, vw, v);
    if (q)
        qk_finish(c, l, n, pos, hp->n_head, q, L->q_norm, KVV_TAP_Q_NORM, KVV_TAP_Q_ROPE);
    qk_finish(c, l, n, pos, hp->n_head_kv, k, L->k_norm, KVV_TAP_K_NORM, KVV_TAP_K_ROPE);
    for (size_t i = 0; i < (size_t)n * kw; i++)
        k[i] = kvv_cache_round(c->cache_type, k[i]);
    for (size_t i = 0; i < (size_t)n * vw; i++)
        v[i] = kvv_cache_round(c->cache_type, v[i]);
}

static void add_rows(size_t count, float *x, const float *y)
{
    for (size_t i = 0; i < count; i++)
        x[i] = x[i] + y[i];
}

static void layer_forward(kvv_cpu *c, int l, int n, const int32_t *pos, const kvv_hooks *hooks)
{
    const kvv_hparams *hp = c->hp;
    const kvv_cpu_layer *L = &c->layers[l];
    int E = hp->n_embd, F = hp->n_ff;
    int kw = hp->n_head_kv * hp->head_dim, vw = hp->n_head_kv * hp->head_dim_v;
    int ow = hp->n_head * hp->head_dim_v;

    if (hooks && hooks->residual)
        hooks->residual(hooks->user, l, n, pos, c->x);

    /* attention block */
    kvv_cpu_rmsnorm(c, n, E, c->x, (size_t)E, L->attn_norm, hp->norm_eps, c->xn, (size_t)E);
    cpu_tap(c, l, KVV_TAP_ATTN_NORM, n, pos, E, c->xn);
    project_qkv(c, l, n, pos, c->xn, c->q, c->kk, c->vv, false);
    for (int t = 0; t < n; t++)
        kvv_kv_cache_store(kvv_cpu_row_cache(c, t), l, pos[t], c->kk + (size_t)t * kw,
                           c->vv + (size_t)t * vw);
    if (hooks && hooks->kv)
        hooks->kv(hooks->user, l, n, pos, c->kk, c->vv);
    kvv_cpu_attention_runs(c, l, n, pos, hooks);
    if (hooks && hooks->attn_out)
        hooks->attn_out(hooks->user, l, n, pos, c->o);
    cpu_tap(c, l, KVV_TAP_ATTN_OUT, n, pos, ow, c->o);
    kvv_cpu_mm_out wo = {.w = &L->wo, .y = c->y, .ldy = (size_t)E};
    kvv_cpu_matmul(c, n, c->o, (size_t)ow, 1, &wo, true);
    cpu_tap(c, l, KVV_TAP_WO, n, pos, E, c->y);
    if (L->post_attn_norm) {
        kvv_cpu_rmsnorm(c, n, E, c->y, (size_t)E, L->post_attn_norm, hp->norm_eps, c->y,
                        (size_t)E);
        cpu_tap(c, l, KVV_TAP_POST_ATTN_NORM, n, pos, E, c->y);
    }
    add_rows((size_t)n * E, c->x, c->y);
    cpu_tap(c, l, KVV_TAP_ATTN_RESID, n, pos, E, c->x);

    /* feed-forward block */
    kvv_cpu_rmsnorm(c, n, E, c->x, (size_t)E, L->ffn_norm, hp->norm_eps, c->xn, (size_t)E);
    cpu_tap(c, l, KVV_TAP_FFN_NORM, n, pos, E, c->xn);
    kvv_cpu_mm_out gu[2] = {
        {.w = &L->wg, .y = c->g, .ldy = (size_t)F},
        {.w = &L->wu, .y = c->u, .ldy = (size_t)F},
    };
    kvv_cpu_matmul(c, n, c->xn, (size_t)E, 2, gu, true);
    cpu_tap(c, l, KVV_TAP_GATE, n, pos, F, c->g);
    cpu_tap(c, l, KVV_TAP_UP, n, pos, F, c->u);
    size_t nf = (size_t)n * F;
    if (hp->act == KVV_ACT_GELU_TANH)
        for (size_t i = 0; i < nf; i++)
            c->g[i] = kvv_cpu_gelu_tanh(c->g[i]) * c->u[i];
    else
        c->k->silu_mul((int)nf, c->g, c->u);
    cpu_tap(c, l, KVV_TAP_ACT, n, pos, F, c->g);
    kvv_cpu_mm_out wd = {.w = &L->wd, .y = c->y, .ldy = (size_t)E};
    kvv_cpu_matmul(c, n, c->g, (size_t)F, 1, &wd, true);
    cpu_tap(c, l, KVV_TAP_DOWN, n, pos, E, c->y);
    if (L->post_ffw_norm) {
        kvv_cpu_rmsnorm(c, n, E, c->y, (size_t)E, L->post_ffw_norm, hp->norm_eps, c->y,
                        (size_t)E);
        cpu_tap(c, l, KVV_TAP_POST_FFW_NORM, n, pos, E, c->y);
    }
    add_rows((size_t)n * E, c->x, c->y);
    cpu_tap(c, l, KVV_TAP_FFN_RESID, n, pos, E, c->x);
}

static void embed(const kvv_cpu *c, int n, const int32_t *tokens)
{
    const kvv_hparams *hp = c->hp;
    const kvv_cpu_weight *w = &c->tok_embd;
    for (int t = 0; t < n; t++) {
        float *x = c->x + (size_t)t * hp->n_embd;
        const uint8_t *src = w->data + (size_t)tokens[t] * w->row_bytes;
        if (w->type == KVV_TYPE_F32)
            memcpy(x, src, (size_t)hp->n_embd * sizeof(float));
        else if (w->x4 || w->x16) /* the tied head's copy (cpu_weights.c) */
            kvv_cpu_dequant_rows(c, w, tokens[t], 1, x);
        else
            kvv_dequantize_row((kvv_type)w->type, src, x, hp->n_embd);
        if (hp->embd_scale != 1.0f)
            for (int i = 0; i < hp->n_embd; i++)
                x[i] = x[i] * hp->embd_scale;
    }
}

kvv_status kvv_cpu_forward(kvv_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                           const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                           kvv_error *err)
{
    kvv_cpu *c = e->impl;
    const kvv_hparams *hp = c->hp;
    kvv_status st = check_batch(c, n, pos, err);
    if (st)
        return st;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "cpu engine: token id %d (token %d of the batch) outside the "
                                 "vocabulary of %d",
                                 (int)tokens[i], i, hp->n_vocab);
    if (lm != KVV_LOGITS_NONE && !logits)
        return kvv_error_set(err, KVV_ERR_USAGE, "cpu engine: logits requested into NULL");
    c->seq = NULL;
    return kvv_cpu_run(c, n, tokens, pos, hooks, lm, NULL, logits, err);
}

kvv_status kvv_cpu_run(kvv_cpu *c, int n, const int32_t *tokens, const int32_t *pos,
                       const kvv_hooks *hooks, kvv_logits_mode lm, const uint8_t *want,
                       float *logits, kvv_error *err)
{
    const kvv_hparams *hp = c->hp;
    if (!kvv_cpu_reserve(c, n))
        return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory for %d tokens", n);
    if (hooks && hooks->attn) {
        int maxp = 0;
        for (int i = 0; i < n; i++)
            maxp = pos[i] > maxp ? pos[i] : maxp;
        size_t need = (size_t)n * hp->n_head * (size_t)(maxp + 1);
        if (need > c->cap_probs) {
            if (!grow(&c->probs, need))
                return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory");
            c->cap_probs = need;
        }
    }

    embed(c, n, tokens);
    c->tap = hooks && hooks->op ? hooks : NULL;
    for (int l = 0; l < hp->n_layer; l++)
        layer_forward(c, l, n, pos, hooks);
    if (hooks && hooks->residual)
        hooks->residual(hooks->user, hp->n_layer, n, pos, c->x);

    int E = hp->n_embd, rows = 0;
    const int32_t *row_pos = NULL; /* the rows' positions for the taps; a decode
                                      call's picked rows are not tapped */
    if (want) { /* the flagged rows, normed one by one (a row's bits are its own) */
        for (int t = 0; t < n; t++)
            if (want[t])
                kvv_cpu_rmsnorm(c, 1, E, c->x + (size_t)t * E, (size_t)E, c->output_norm,
                                hp->norm_eps, c->xn + (size_t)rows++ * E, (size_t)E);
    } else if (lm != KVV_LOGITS_NONE) {
        int first = lm == KVV_LOGITS_LAST ? n - 1 : 0;
        rows = n - first;
        row_pos = pos + first;
        kvv_cpu_rmsnorm(c, rows, E, c->x + (size_t)first * E, (size_t)E, c->output_norm,
                        hp->norm_eps, c->xn, (size_t)E);
    }
    if (rows == 0) {
        c->tap = NULL;
        return KVV_OK;
    }
    if (row_pos)
        cpu_tap(c, hp->n_layer, KVV_TAP_OUT_NORM, rows, row_pos, E, c->xn);
    kvv_cpu_mm_out out = {.w = &c->output, .y = logits, .ldy = (size_t)hp->n_vocab};
    kvv_cpu_matmul(c, rows, c->xn, (size_t)E, 1, &out, true);
    if (row_pos)
        cpu_tap(c, hp->n_layer, KVV_TAP_HEAD, rows, row_pos, hp->n_vocab, logits);
    c->tap = NULL;
    if (hp->final_softcap > 0.0f) {
        float cap = hp->final_softcap;
        for (size_t i = 0; i < (size_t)rows * hp->n_vocab; i++)
            logits[i] = cap * kvv_cpu_tanhf(logits[i] / cap);
    }
    return KVV_OK;
}

kvv_status kvv_cpu_kv_from_residual(kvv_engine *e, int layer, int n, const float *h,
                                    const int32_t *pos, float *k, float *v, kvv_error *err)
{
    kvv_cpu *c = e->impl;
    const kvv_hparams *hp = c->hp;
    if (layer < 0 || layer >= hp->n_layer)
        return kvv_error_set(err, KVV_ERR_USAGE, "cpu engine: layer %d outside 0..%d", layer,
                             hp->n_layer - 1);
    kvv_status st = check_batch(c, n, pos, err);
    if (st)
        return st;
    if (!kvv_cpu_reserve(c, n))
        return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory for %d tokens", n);
    int E = hp->n_embd;
    kvv_cpu_rmsnorm(c, n, E, h, (size_t)E, c->layers[layer].attn_norm, hp->norm_eps, c->xn,
                    (size_t)E);
    project_qkv(c, layer, n, pos, c->xn, NULL, k, v,
                (c->control & KVV_CTL_KV_REVERSED_SUM) != 0);
    return KVV_OK;
}
