/*
 * capture.c — the real inputs of every op: the reference's forward pass
 * captured through its hooks, and each layer's op inputs rebuilt from it
 * with the reference's own ops (the calls its forward makes), checked bit
 * for bit against what the hooks saw, then measured (measure.c) on the
 * sampled rows. See numerics.h, steps 1-3.
 */
#include "verify/numerics/numerics_impl.h"

#include <stdio.h>
#include <string.h>

/* Copy a hook's [n][width] rows into slot l of dst; count a bad shape. */
static void keep(hooks_capture *c, float *dst, int l, int n_slots, int n, size_t width,
                 const float *src)
{
    if (n != c->n || l < 0 || l >= n_slots) {
        c->bad++;
        return;
    }
    memcpy(dst + (size_t)l * (size_t)n * width, src, (size_t)n * width * sizeof *src);
}

static void cap_resid(void *u, int l, int n, const int32_t *pos, float *h)
{
    hooks_capture *c = u;
    (void)pos;
    keep(c, c->resid, l, c->hp->n_layer + 1, n, (size_t)c->hp->n_embd, h);
}

static void cap_kv(void *u, int l, int n, const int32_t *pos, const float *k, const float *v)
{
    hooks_capture *c = u;
    (void)pos;
    (void)v;
    keep(c, c->k, l, c->hp->n_layer, n, (size_t)c->hp->n_head_kv * c->hp->head_dim, k);
}

static void cap_attn(void *u, int l, int n, const int32_t *pos, int n_keys, const int32_t *kp,
                     const float *p)
{
    hooks_capture *c = u;
    (void)pos;
    (void)kp;
    const size_t row = (size_t)c->hp->n_head * (size_t)n; /* one token's probabilities */
    if (n_keys != c->n || n != c->n || l < 0 || l >= c->hp->n_layer) {
        c->bad++;
        return;
    }
    for (int s = 0; s < c->S; s++)
        memcpy(c->probs + ((size_t)l * c->S + s) * row, p + (size_t)c->rows[s] * row,
               row * sizeof *p);
}

static void cap_att(void *u, int l, int n, const int32_t *pos, const float *o)
{
    hooks_capture *c = u;
    (void)pos;
    keep(c, c->att, l, c->hp->n_layer, n, (size_t)c->hp->n_head * c->hp->head_dim_v, o);
}

kvv_status num_capture(nrun *r, hooks_capture *c, const int32_t *pos, float *logits,
                       kvv_error *err)
{
    kvv_hooks hk = {.user = c, .residual = cap_resid, .kv = cap_kv, .attn = cap_attn,
                    .attn_out = cap_att};
    kvv_engine_reset(r->cap->engine);
    kvv_status st = kvv_engine_forward(r->cap->engine, r->n, r->o->tokens, pos, &hk,
                                       KVV_LOGITS_ALL, logits, err);
    if (!st && c->bad)
        st = kvv_error_set(err, KVV_ERR_INTERNAL,
                           "numerics: the reference's hooks reported %d unexpected shapes",
                           c->bad);
    return st;
}

/* Mismatch bookkeeping of the rebuild against the hooks. */
static void check_same(nrun *r, const float *rebuilt, const float *seen, size_t count,
                       const char *what, int layer)
{
    for (size_t i = 0; i < count; i++) {
        float v = rebuilt[i];
        bool planted = r->o->force_fail && r->rep->capture_checked == 0;
        if (planted) { /* the negative control, in the real comparison */
            uint32_t u;
            memcpy(&u, &v, sizeof u);
            u ^= 1u;
            memcpy(&v, &u, sizeof v);
        }
        r->rep->capture_checked++;
        if (kvv_oracle_ulp_distance(v, seen[i]) == 0)
            continue;
        if (r->rep->capture_mismatch++ == 0)
            snprintf(r->rep->capture_note, sizeof r->rep->capture_note,
                     "%slayer %d %s element %zu: rebuilt %a, forward %a",
                     planted ? "planted: " : "", layer, what, i, (double)v, (double)seen[i]);
    }
}

/* Row-wise RMSNorm of n rows of width d through the capture ops. */
static void norm_rows(nrun *r, float *y, const float *x, const float *w, int n, int d)
{
    for (int t = 0; t < n; t++)
        r->cap->vt->rmsnorm(r->cap, x + (size_t)t * d, w, d, r->hp->norm_eps, y + (size_t)t * d);
}

static void add_bias(float *y, const float *b, int n, int width)
{
    if (!b)
        return;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < width; i++)
            y[(size_t)t * width + i] = y[(size_t)t * width + i] + b[i];
}

static const float *T(nrun *r, int layer, kvv_ops_tensor t)
{
    return r->cap->vt->tensor(r->cap, layer, t, NULL, NULL);
}

/* Attention scores of row t, head h over its visible keys into r->tmp (nv
 * of them), through the capture ops, with the dot and soft-cap measured. */
static int scores(nrun *r, int l, int t, int h, const layer_buf *b, bool measure)
{
    const kvv_hparams *hp = r->hp;
    const int hd = hp->head_dim, Q = hp->n_head * hd, K = hp->n_head_kv * hd;
    const int g = h / (hp->n_head / hp->n_head_kv);
    const bool prescale = hp->arch == KVV_ARCH_GEMMA2 || hp->arch == KVV_ARCH_GEMMA3 ||
                          hp->arch == KVV_ARCH_PHI3;
    const bool swa = hp->swa_layer[l] && hp->n_swa > 0;
    const float *qh = b->q + (size_t)t * Q + (size_t)h * hd;
    if (prescale) {
        for (int d = 0; d < hd; d++)
            b->qs[d] = qh[d] * hp->query_scale;
        qh = b->qs;
    }
    int nv = 0;
    char what[64];
    snprintf(what, sizeof what, "q.k head %d (K=%d), index = key position", h, hd);
    for (int j = 0; j <= t; j++) {
        if (swa && t - j >= hp->n_swa)
            continue;
        const float *kj = b->k + (size_t)j * K + (size_t)g * hd;
        float s = r->cap->vt->dot(r->cap, qh, kj, hd);
        if (measure)
            num_measure_dot(r, l, t, j, qh, kj, hd, what);
        if (!prescale)
            s = s * hp->query_scale;
        if (hp->attn_softcap > 0.0f) {
            if (measure) {
                char cw[64];
                snprintf(cw, sizeof cw, "attention score head %d, index = key position", h);
                num_measure_scalar(r, l, KVV_OP_SOFTCAP, t, j, &s, 1, hp->attn_softcap, cw);
            }
            s = r->cap->vt->softcap(r->cap, s, hp->attn_softcap);
        }
        r->tmp[nv++] = s;
    }
    return nv;
}

/* One layer: rebuild, check, measure. */
void num_rebuild_layer(nrun *r, int l, const hooks_capture *c, layer_buf *b)
{
    const kvv_hparams *hp = r->hp;
    const int n = r->n, E = hp->n_embd, F = hp->n_ff, hd = hp->head_dim;
    const int Q = hp->n_head * hd, K = hp->n_head_kv * hd, O = hp->n_head * hp->head_dim_v;
    const float *h = c->resid + (size_t)l * n * E;
    const float *att = c->att + (size_t)l * n * O;
    kvv_ops *cp = r->cap;
    char what[64];

    /* attention inputs, as ref_attn_inputs */
    norm_rows(r, b->xn, h, T(r, l, KVV_T_ATTN_NORM), n, E);
    cp->vt->matmul(cp, l, KVV_T_WQ, n, b->xn, b->qpre);
    cp->vt->matmul(cp, l, KVV_T_WK, n, b->xn, b->kpre);
    add_bias(b->qpre, T(r, l, KVV_T_BQ), n, Q);
    add_bias(b->kpre, T(r, l, KVV_T_BK), n, K);
    if (hp->has_qk_norm) {
        norm_rows(r, b->qpre, b->qpre, T(r, l, KVV_T_Q_NORM), n * hp->n_head, hd);
        norm_rows(r, b->kpre, b->kpre, T(r, l, KVV_T_K_NORM), n * hp->n_head_kv, hd);
    }
    for (int t = 0; t < n; t++) {
        for (int hh = 0; hh < hp->n_head; hh++)
            cp->vt->rope(cp, l, t, b->qpre + (size_t)t * Q + (size_t)hh * hd,
                         b->q + (size_t)t * Q + (size_t)hh * hd);
        for (int g = 0; g < hp->n_head_kv; g++)
            cp->vt->rope(cp, l, t, b->kpre + (size_t)t * K + (size_t)g * hd,
                         b->k + (size_t)t * K + (size_t)g * hd);
    }
    check_same(r, b->k, c->k + (size_t)l * n * K, (size_t)n * K, "K after RoPE", l);

    /* attention output projection and residual */
    cp->vt->matmul(cp, l, KVV_T_WO, n, att, b->proj);
    const float *pan = T(r, l, KVV_T_POST_ATTN_NORM);
    memcpy(b->hmid, h, (size_t)n * E * sizeof *h);
    for (size_t i = 0; i < (size_t)n * E; i++)
        b->hmid[i] = b->hmid[i] + b->proj[i];
    if (pan) {
        norm_rows(r, b->sc, b->proj, pan, n, E);
        for (size_t i = 0; i < (size_t)n * E; i++)
            b->hmid[i] = h[i] + b->sc[i];
    }

    /* feed-forward */
    norm_rows(r, b->xf, b->hmid, T(r, l, KVV_T_FFN_NORM), n, E);
    cp->vt->matmul(cp, l, KVV_T_W_GATE, n, b->xf, b->gate);
    cp->vt->matmul(cp, l, KVV_T_W_UP, n, b->xf, b->up);
    for (size_t i = 0; i < (size_t)n * F; i++) {
        float a = hp->act == KVV_ACT_GELU_TANH ? cp->vt->gelu(cp, b->gate[i])
                                               : cp->vt->silu(cp, b->gate[i]);
        b->act[i] = a * b->up[i];
    }
    float *down = b->down;
    cp->vt->matmul(cp, l, KVV_T_W_DOWN, n, b->act, down);
    const float *pfn = T(r, l, KVV_T_POST_FFW_NORM);
    for (size_t i = 0; i < (size_t)n * E; i++)
        b->hout[i] = b->hmid[i] + down[i];
    if (pfn) {
        norm_rows(r, b->sc, down, pfn, n, E);
        for (size_t i = 0; i < (size_t)n * E; i++)
            b->hout[i] = b->hmid[i] + b->sc[i];
    }
    check_same(r, b->hout, c->resid + (size_t)(l + 1) * n * E, (size_t)n * E,
               "residual leaving the layer", l);

    /* measurements on the sampled rows */
    num_measure_matmul(r, l, KVV_T_WQ, b->xn);
    num_measure_matmul(r, l, KVV_T_WK, b->xn);
    num_measure_matmul(r, l, KVV_T_WV, b->xn);
    num_measure_matmul(r, l, KVV_T_WO, att);
    num_measure_matmul(r, l, KVV_T_W_GATE, b->xf);
    num_measure_matmul(r, l, KVV_T_W_UP, b->xf);
    num_measure_matmul(r, l, KVV_T_W_DOWN, b->act);
    for (int s = 0; s < r->rep->samples; s++) {
        const int t = r->rep->rows[s];
        num_measure_rmsnorm(r, l, t, h + (size_t)t * E, T(r, l, KVV_T_ATTN_NORM), E, "attn_norm");
        num_measure_rmsnorm(r, l, t, b->hmid + (size_t)t * E, T(r, l, KVV_T_FFN_NORM), E,
                            "ffn_norm");
        if (pan)
            num_measure_rmsnorm(r, l, t, b->proj + (size_t)t * E, pan, E, "post_attention_norm");
        if (pfn)
            num_measure_rmsnorm(r, l, t, down + (size_t)t * E, pfn, E, "post_ffw_norm");
        for (int hh = 0; hh < hp->n_head; hh++) {
            snprintf(what, sizeof what, "q head %d", hh);
            num_measure_rope(r, l, t, b->qpre + (size_t)t * Q + (size_t)hh * hd, what);
        }
        for (int g = 0; g < hp->n_head_kv; g++) {
            snprintf(what, sizeof what, "k head %d", g);
            num_measure_rope(r, l, t, b->kpre + (size_t)t * K + (size_t)g * hd, what);
        }
        for (int hh = 0; hh < hp->n_head; hh++) {
            int nv = scores(r, l, t, hh, b, true);
            snprintf(what, sizeof what, "head %d, %d keys", hh, nv);
            num_measure_softmax(r, l, t, r->tmp, nv, what);
            /* the rebuilt probabilities against the attn hook's */
            cp->vt->softmax(cp, r->tmp, nv, r->got);
            const float *p =
                c->probs + (((size_t)l * r->rep->samples + s) * hp->n_head + hh) * n;
            check_same(r, r->got, p + (t + 1 - nv), (size_t)nv, "attention probabilities", l);
        }
        const float *gate = b->gate + (size_t)t * F;
        num_measure_scalar(r, l, KVV_OP_SILU, t, 0, gate, F, 0, "ffn_gate value");
        num_measure_scalar(r, l, KVV_OP_GELU, t, 0, gate, F, 0, "ffn_gate value");
    }
}

/* The output block (layer index n_layer): output_norm, the output matrix,
 * the final soft-cap on the logits. */
void num_rebuild_output(nrun *r, const hooks_capture *c, const float *logits, layer_buf *b)
{
    const kvv_hparams *hp = r->hp;
    const int n = r->n, E = hp->n_embd, L = hp->n_layer, V = hp->n_vocab;
    const float *h = c->resid + (size_t)L * n * E;
    const float *on = T(r, 0, KVV_T_OUTPUT_NORM);
    norm_rows(r, b->xn, h, on, n, E);
    float *lg = num_falloc((size_t)n * V);
    if (!lg)
        return;
    r->cap->vt->matmul(r->cap, 0, KVV_T_OUTPUT, n, b->xn, lg);
    if (hp->final_softcap > 0.0f)
        for (size_t i = 0; i < (size_t)n * V; i++)
            lg[i] = r->cap->vt->softcap(r->cap, lg[i], hp->final_softcap);
    check_same(r, lg, logits, (size_t)n * V, "logits", L);
    r->cap->vt->matmul(r->cap, 0, KVV_T_OUTPUT, n, b->xn, lg); /* before the cap */
    num_measure_matmul(r, L, KVV_T_OUTPUT, b->xn);
    const float cap = hp->final_softcap > 0.0f ? hp->final_softcap : 30.0f;
    r->rep->final_cap = cap;
    const int nout = V < 8 * r->o->max_outputs ? V : 8 * r->o->max_outputs;
    for (int s = 0; s < r->rep->samples; s++) {
        const int t = r->rep->rows[s];
        num_measure_rmsnorm(r, L, t, h + (size_t)t * E, on, E, "output_norm");
        for (int i = 0; i < nout; i++) {
            const int v = (int)((long)i * V / nout);
            num_measure_scalar(r, L, KVV_OP_SOFTCAP, t, v, &lg[(size_t)t * V + v], 1, cap,
                               hp->final_softcap > 0.0f ? "final logits, index = token id"
                                                        : "final logits, cap 30 (model has none)");
        }
    }
    free(lg);
}
