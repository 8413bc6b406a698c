/*
 * oplocal.c — capture an engine's op taps and measure each op's local
 * error against the exact op on the engine's own inputs (verify/oplocal.h).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tensor_types.h"
#include "runtime/kv_cache.h"
#include "verify/compare_stats.h"
#include "verify/oplocal_impl.h"

#define U_F32 5.9604644775390625e-8 /* 2^-24: the unit of every error and budget */

const char *kvv_opl_state_name(kvv_opl_state s)
{
    switch (s) {
    case KVV_OPL_OK: return "ok";
    case KVV_OPL_BEYOND: return "beyond budget";
    case KVV_OPL_NOT_TAPPED: return "not tapped";
    case KVV_OPL_NO_INPUT: return "input not tapped";
    case KVV_OPL_ABSENT: return "not in model";
    case KVV_OPL_UNCHECKED: return "tapped, not checked";
    }
    return "?";
}

static int slot(const opl_cap *c, int layer, int op)
{
    (void)c;
    return layer * KVV_TAP_COUNT + op;
}

/* ------------------------------------------------------------ capture */

static void cap_op(void *user, int layer, int op, int n, const int32_t *pos, int width,
                   const float *x)
{
    opl_cap *c = user;
    if (op == KVV_TAP_KQ || op == KVV_TAP_SOFTMAX) {
        c->scores |= 1u << op; /* not checked here: widths vary with the keys */
        return;
    }
    const bool final = kvv_tap_is_final(op);
    const int want = kvv_tap_width(c->hp, op, 0);
    if (op < 0 || op >= KVV_TAP_COUNT || layer < 0 || layer > c->n_layer ||
        (final != (layer == c->n_layer)) || width != want) {
        if (!c->bad[0])
            snprintf(c->bad, sizeof c->bad, "op tap %d (%s) of layer %d: width %d, expected %d "
                     "in layers %s", op, kvv_tap_name(op), layer, width, want,
                     final ? "n_layer only" : "0..n_layer-1");
        return;
    }
    const int s = slot(c, layer, op);
    if (!c->tap[s]) {
        c->tap[s] = calloc((size_t)c->n_pos * (size_t)width, sizeof(float));
        c->have[s] = calloc((size_t)c->n_pos, 1);
        if (!c->tap[s] || !c->have[s]) {
            snprintf(c->bad, sizeof c->bad, "out of memory for op taps");
            return;
        }
    }
    for (int t = 0; t < n; t++) {
        if (pos[t] < 0 || pos[t] >= c->n_pos)
            continue;
        memcpy(c->tap[s] + (size_t)pos[t] * width, x + (size_t)t * width,
               (size_t)width * sizeof(float));
        c->have[s][pos[t]] = 1;
    }
}

static void cap_residual(void *user, int layer, int n, const int32_t *pos, float *h)
{
    opl_cap *c = user;
    const int E = c->hp->n_embd;
    if (layer != 0)
        return;
    for (int t = 0; t < n; t++)
        if (pos[t] >= 0 && pos[t] < c->n_pos) {
            memcpy(c->emb + (size_t)pos[t] * E, h + (size_t)t * E, (size_t)E * sizeof(float));
            c->have_emb[pos[t]] = 1;
        }
}

/* ------------------------------------------------------------ hypotheses' arithmetic */

static float round_to(opl_round r, float x)
{
    switch (r) {
    case OPL_ROUND_F16: return kvv_cache_round(KVV_CACHE_F16, x);
    case OPL_ROUND_BF16: return kvv_cache_round(KVV_CACHE_BF16, x);
    case OPL_ROUND_FTZ: return fabsf(x) < FLT_MIN ? 0.0f * x : x;
    default: return x;
    }
}

static double out_round(const kvv_opl_hyp *h, double x)
{
    return h && h->out ? (double)round_to(h->out, (float)x) : x;
}

/* The input vector as the hypothesis sees it (rounded; Q8_0 blocks). */
static void prep_input(const kvv_opl_hyp *h, const float *x, int n, float *y)
{
    for (int i = 0; i < n; i++)
        y[i] = h ? round_to(h->in, x[i]) : x[i];
    if (h && h->q8_act)
        for (int b = 0; b + 32 <= n; b += 32) {
            float amax = 0.0f;
            for (int j = 0; j < 32; j++)
                amax = fabsf(y[b + j]) > amax ? fabsf(y[b + j]) : amax;
            const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            const float dh = kvv_fp16_to_fp32(kvv_fp32_to_fp16(d));
            for (int j = 0; j < 32; j++)
                y[b + j] = rintf(y[b + j] * id) * dh;
        }
}

static float sum_pairwise(const float *p, int n)
{
    if (n <= 2)
        return n == 0 ? 0.0f : n == 1 ? p[0] : p[0] + p[1];
    return sum_pairwise(p, n / 2) + sum_pairwise(p + n / 2, n - n / 2);
}

/* sum a[k] * b[k] under the hypothesis' order; prods: scratch (n floats). */
static double dot_h(const kvv_opl_hyp *h, const float *a, const float *b, int n, float *prods)
{
    const opl_sum s = h ? h->sum : OPL_SUM_EXACT;
    if (s == OPL_SUM_EXACT) {
        double acc = 0.0;
        for (int k = 0; k < n; k++)
            acc += (double)a[k] * (double)b[k];
        return acc;
    }
    if (s == OPL_SUM_FMA) {
        float acc = 0.0f;
        for (int k = 0; k < n; k++)
            acc = fmaf(a[k], b[k], acc);
        return acc;
    }
    for (int k = 0; k < n; k++)
        prods[k] = a[k] * b[k];
    if (s == OPL_SUM_PAIRWISE)
        return sum_pairwise(prods, n);
    const int blk = s == OPL_SUM_BLOCK16 ? 16 : s == OPL_SUM_BLOCK32 ? 32 : s == OPL_SUM_BLOCK256 ? 256 : n;
    float acc = 0.0f;
    for (int b0 = 0; b0 < n; b0 += blk) {
        float part = 0.0f;
        for (int k = b0; k < n && k < b0 + blk; k++)
            part = part + prods[k];
        acc = acc + part;
    }
    return acc;
}

/* ------------------------------------------------------------ the ops */

static const float *row_of(const opl_cap *c, int layer, int op, int t)
{
    if (op < 0) /* the residual entering layer 0 */
        return c->have_emb[t] ? c->emb + (size_t)t * c->hp->n_embd : NULL;
    const int s = slot(c, layer, op);
    if (!c->tap[s] || !c->have[s][t])
        return NULL;
    return c->tap[s] + (size_t)t * kvv_tap_width(c->hp, op, 0);
}

/* The residual entering layer l (the previous layer's output). */
static int resid_in(int layer, int *in_layer)
{
    *in_layer = layer - 1;
    return layer == 0 ? -1 : KVV_TAP_FFN_RESID;
}

/* The op whose output is (layer, op)'s main input, and its layer. */
static int input_op(const kvv_hparams *hp, int layer, int op, int *in_layer)
{
    *in_layer = layer;
    switch (op) {
    case KVV_TAP_ATTN_NORM: return resid_in(layer, in_layer);
    case KVV_TAP_Q: case KVV_TAP_K: case KVV_TAP_V: return KVV_TAP_ATTN_NORM;
    case KVV_TAP_Q_NORM: return KVV_TAP_Q;
    case KVV_TAP_K_NORM: return KVV_TAP_K;
    case KVV_TAP_Q_ROPE: return hp->has_qk_norm ? KVV_TAP_Q_NORM : KVV_TAP_Q;
    case KVV_TAP_K_ROPE: return hp->has_qk_norm ? KVV_TAP_K_NORM : KVV_TAP_K;
    case KVV_TAP_ATTN_OUT: return KVV_TAP_Q_ROPE; /* and K_ROPE, V of every position */
    case KVV_TAP_WO: return KVV_TAP_ATTN_OUT;
    case KVV_TAP_POST_ATTN_NORM: return KVV_TAP_WO;
    case KVV_TAP_ATTN_RESID: return hp->has_post_norms ? KVV_TAP_POST_ATTN_NORM : KVV_TAP_WO;
    case KVV_TAP_FFN_NORM: return KVV_TAP_ATTN_RESID;
    case KVV_TAP_GATE: case KVV_TAP_UP: return KVV_TAP_FFN_NORM;
    case KVV_TAP_ACT: return KVV_TAP_GATE; /* and UP */
    case KVV_TAP_DOWN: return KVV_TAP_ACT;
    case KVV_TAP_POST_FFW_NORM: return KVV_TAP_DOWN;
    case KVV_TAP_FFN_RESID: return hp->has_post_norms ? KVV_TAP_POST_FFW_NORM : KVV_TAP_DOWN;
    case KVV_TAP_OUT_NORM: *in_layer = layer - 1; return KVV_TAP_FFN_RESID;
    case KVV_TAP_HEAD: return KVV_TAP_OUT_NORM;
    default: return -2;
    }
}

static const float *weight(const opl_cap *c, int layer, kvv_ops_tensor t, int *rows, int *cols)
{
    *rows = *cols = 0;
    return c->w->vt->tensor ? c->w->vt->tensor(c->w, layer, t, rows, cols) : NULL;
}

/* y = x W^T (+ b): n_in inputs, every output row. */
static bool eval_matmul(const opl_cap *c, int layer, kvv_ops_tensor wt, kvv_ops_tensor bt,
                        const float *x, const kvv_opl_hyp *h, double *e, double *scale,
                        double *budget)
{
    int rows, cols, br, bc;
    const float *W = weight(c, layer, wt, &rows, &cols);
    const float *b = bt == KVV_T_COUNT ? NULL : weight(c, layer, bt, &br, &bc);
    if (!W)
        return false;
    float *xi = malloc((size_t)cols * 2 * sizeof(float));
    if (!xi)
        return false;
    prep_input(h, x, cols, xi);
    for (int r = 0; r < rows; r++) {
        const float *wr = W + (size_t)r * cols;
        double s = 0.0;
        for (int k = 0; k < cols; k++)
            s += fabs((double)x[k] * (double)wr[k]);
        double y = dot_h(h, xi, wr, cols, xi + cols);
        if (b) {
            y = h && h->sum ? (double)((float)y + b[r]) : y + b[r];
            s += fabs((double)b[r]);
        }
        e[r] = out_round(h, y);
        scale[r] = s;
        budget[r] = cols + 2 + (b ? 1 : 0);
    }
    free(xi);
    return true;
}

/* rmsnorm of groups of n (per head for q/k norms). */
static bool eval_norm(const opl_cap *c, int layer, kvv_ops_tensor wt, const float *x, int width,
                      int n, const kvv_opl_hyp *h, double *e, double *scale, double *budget)
{
    int rows, cols;
    const float *w = weight(c, layer, wt, &rows, &cols);
    if (!w || cols * rows < n)
        return false;
    const double eps = (double)c->hp->norm_eps;
    for (int g = 0; g + n <= width; g += n) {
        double ss = 0.0;
        float ssf = 0.0f;
        for (int i = 0; i < n; i++) {
            const float xi = h ? round_to(h->in, x[g + i]) : x[g + i];
            ss += (double)xi * xi;
            ssf = ssf + xi * xi;
        }
        const double r = h && h->sum ? 1.0 / sqrt((double)ssf / n + eps) : 1.0 / sqrt(ss / n + eps);
        for (int i = 0; i < n; i++) {
            const float xi = h ? round_to(h->in, x[g + i]) : x[g + i];
            const double y = (double)xi * r * (double)w[i];
            e[g + i] = out_round(h, y);
            scale[g + i] = fabs((double)x[g + i] * r * (double)w[i]);
            budget[g + i] = n / 2.0 + 8.0;
        }
    }
    return true;
}

static double gelu_tanh_d(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/* ggml's GELU from its fp16 table (ref_gelu_ggml's rule). */
static double gelu_lut(float x)
{
    if (x <= -10.0f)
        return 0.0;
    if (x >= 10.0f)
        return x;
    const float xh = kvv_fp16_to_fp32(kvv_fp32_to_fp16(x));
    const float g = (float)gelu_tanh_d(xh);
    return kvv_fp16_to_fp32(kvv_fp32_to_fp16(g));
}

static double silu_d(double x)
{
    return x / (1.0 + exp(-x));
}

static void eval_act(const opl_cap *c, const float *g, const float *u, const kvv_opl_hyp *h,
                     double *e, double *scale, double *budget)
{
    const bool gelu = c->hp->act == KVV_ACT_GELU_TANH;
    for (int i = 0; i < c->hp->n_ff; i++) {
        const float gi = h ? round_to(h->in, g[i]) : g[i];
        const float ui = h ? round_to(h->in, u[i]) : u[i];
        double a;
        if (h && h->lut)
            a = gelu ? gelu_lut(gi) : (double)kvv_fp16_to_fp32(kvv_fp32_to_fp16(
                                               (float)silu_d(kvv_fp16_to_fp32(kvv_fp32_to_fp16(gi)))));
        else
            a = gelu ? gelu_tanh_d(gi) : silu_d(gi);
        e[i] = out_round(h, a * ui);
        scale[i] = fabs((double)g[i] * (double)u[i]);
        budget[i] = 16.0;
    }
}

static void eval_add(const float *a, const float *b, int n, const kvv_opl_hyp *h, double *e,
                     double *scale, double *budget)
{
    for (int i = 0; i < n; i++) {
        const double y = h && h->sum ? (double)(a[i] + b[i]) : (double)a[i] + (double)b[i];
        e[i] = out_round(h, y);
        scale[i] = fabs((double)a[i]) + fabs((double)b[i]);
        budget[i] = 1.0;
    }
}

static bool eval_rope(const opl_cap *c, int layer, int t, const float *x, int n_heads,
                      const kvv_opl_hyp *h, double *e, double *scale, double *budget)
{
    const kvv_hparams *hp = c->hp;
    const int hd = hp->head_dim;
    /* the fp32 angle's error bound: theta_i (i + 2) u, theta_i = pos base^(-2i/n_rot) */
    const double base = kvv_hparams_rope_base(hp, layer);
    double dth = 0.0;
    for (int i = 0; i < hp->n_rot / 2; i++) {
        const double th = t * pow(base, -2.0 * i / hp->n_rot) * (i + 2);
        dth = th > dth ? th : dth;
    }
    float in[1024], out[1024];
    if (hd > 1024)
        return false;
    for (int hh = 0; hh < n_heads; hh++) {
        const float *xh = x + (size_t)hh * hd;
        float amax = 0.0f;
        for (int d = 0; d < hd; d++) {
            in[d] = h ? round_to(h->in, xh[d]) : xh[d];
            amax = fabsf(xh[d]) > amax ? fabsf(xh[d]) : amax;
        }
        c->orc->vt->rope(c->orc, layer, t, in, out);
        for (int d = 0; d < hd; d++) {
            e[hh * hd + d] = out_round(h, out[d]);
            scale[hh * hd + d] = 2.0 * amax;
            budget[hh * hd + d] = 4.0 + dth;
        }
    }
    return true;
}

/* Attention of query t over keys 0..t from B's q (after RoPE) and the K and
 * V it stored (rounded to the cache dtype). */
static bool eval_attn(const opl_cap *c, int layer, int t, const kvv_opl_hyp *h, double *e,
                      double *scale, double *budget)
{
    const kvv_hparams *hp = c->hp;
    const int hd = hp->head_dim, hdv = hp->head_dim_v;

    const int group = hp->n_head / hp->n_head_kv;
    const bool swa = hp->swa_layer[layer] && hp->n_swa > 0;
    const float *q = row_of(c, layer, KVV_TAP_Q_ROPE, t);
    if (!q)
        return false;
    for (int j = 0; j <= t; j++)
        if (!row_of(c, layer, KVV_TAP_K_ROPE, j) || !row_of(c, layer, KVV_TAP_V, j))
            return false;
    double *sc = malloc((size_t)(t + 1) * 2 * sizeof(double));
    if (!sc)
        return false;
    double *bnd = sc + t + 1;
    for (int hh = 0; hh < hp->n_head; hh++) {
        const int g = hh / group;
        const float *qh = q + (size_t)hh * hd;
        double mx = -INFINITY, smax = 0.0;
        int nv = 0;
        for (int j = 0; j <= t; j++) {
            if (swa && t - j >= hp->n_swa) {
                sc[j] = -INFINITY;
                continue;
            }
            const float *kj = row_of(c, layer, KVV_TAP_K_ROPE, j) + (size_t)g * hd;
            double s = 0.0, sa = 0.0;
            for (int d = 0; d < hd; d++) {
                const float qd = h ? round_to(h->in, qh[d]) : qh[d];
                const float kd = kvv_cache_round(c->cache_type, h ? round_to(h->in, kj[d]) : kj[d]);
                s += (double)qd * kd;
                sa += fabs((double)qd * kd);
            }
            s *= hp->query_scale;
            sa *= fabs((double)hp->query_scale);
            if (hp->attn_softcap > 0.0f)
                s = hp->attn_softcap * tanh(s / hp->attn_softcap);
            sc[j] = s;
            bnd[j] = sa;
            smax = sa > smax ? sa : smax;
            mx = s > mx ? s : mx;
            nv++;
        }
        double den = 0.0;
        for (int j = 0; j <= t; j++)
            den += sc[j] == -INFINITY ? 0.0 : exp(sc[j] - mx);
        /* softmax relative error: twice the score error (hd + 2) u sum|q k|, + nv + 4 */
        const double bp = 2.0 * (hd + 2) * smax + nv + 4.0;
        for (int d = 0; d < hdv; d++) {
            double o = 0.0, s = 0.0;
            for (int j = 0; j <= t; j++) {
                if (sc[j] == -INFINITY)
                    continue;
                const float *vj = row_of(c, layer, KVV_TAP_V, j) + (size_t)g * hdv;
                const float vd = kvv_cache_round(c->cache_type, h ? round_to(h->in, vj[d]) : vj[d]);
                const double p = exp(sc[j] - mx) / den;
                o += p * vd;
                s += p * fabs((double)vd);
            }
            e[hh * hdv + d] = out_round(h, o);
            scale[hh * hdv + d] = s;
            budget[hh * hdv + d] = bp + nv + 2.0;
        }
    }
    free(sc);
    return true;
}

bool opl_eval(const opl_cap *c, int layer, int op, int t, const kvv_opl_hyp *h, double *e,
              double *scale, double *budget)
{
    const kvv_hparams *hp = c->hp;
    int il;
    const int in_op = input_op(hp, layer, op, &il);
    const float *x = in_op == -2 ? NULL : row_of(c, il, in_op, t);
    if (!x && op != KVV_TAP_ATTN_OUT)
        return false;
    const int E = hp->n_embd;
    switch (op) {
    case KVV_TAP_ATTN_NORM: return eval_norm(c, layer, KVV_T_ATTN_NORM, x, E, E, h, e, scale, budget);
    case KVV_TAP_FFN_NORM: return eval_norm(c, layer, KVV_T_FFN_NORM, x, E, E, h, e, scale, budget);
    case KVV_TAP_POST_ATTN_NORM: return eval_norm(c, layer, KVV_T_POST_ATTN_NORM, x, E, E, h, e, scale, budget);
    case KVV_TAP_POST_FFW_NORM: return eval_norm(c, layer, KVV_T_POST_FFW_NORM, x, E, E, h, e, scale, budget);
    case KVV_TAP_OUT_NORM: return eval_norm(c, 0, KVV_T_OUTPUT_NORM, x, E, E, h, e, scale, budget);
    case KVV_TAP_Q_NORM:
        return eval_norm(c, layer, KVV_T_Q_NORM, x, hp->n_head * hp->head_dim, hp->head_dim, h, e, scale, budget);
    case KVV_TAP_K_NORM:
        return eval_norm(c, layer, KVV_T_K_NORM, x, hp->n_head_kv * hp->head_dim, hp->head_dim, h, e, scale, budget);
    case KVV_TAP_Q: return eval_matmul(c, layer, KVV_T_WQ, KVV_T_BQ, x, h, e, scale, budget);
    case KVV_TAP_K: return eval_matmul(c, layer, KVV_T_WK, KVV_T_BK, x, h, e, scale, budget);
    case KVV_TAP_V: return eval_matmul(c, layer, KVV_T_WV, KVV_T_BV, x, h, e, scale, budget);
    case KVV_TAP_WO: return eval_matmul(c, layer, KVV_T_WO, KVV_T_COUNT, x, h, e, scale, budget);
    case KVV_TAP_GATE: return eval_matmul(c, layer, KVV_T_W_GATE, KVV_T_COUNT, x, h, e, scale, budget);
    case KVV_TAP_UP: return eval_matmul(c, layer, KVV_T_W_UP, KVV_T_COUNT, x, h, e, scale, budget);
    case KVV_TAP_DOWN: return eval_matmul(c, layer, KVV_T_W_DOWN, KVV_T_COUNT, x, h, e, scale, budget);
    case KVV_TAP_HEAD: return eval_matmul(c, 0, KVV_T_OUTPUT, KVV_T_COUNT, x, h, e, scale, budget);
    case KVV_TAP_Q_ROPE: return eval_rope(c, layer, t, x, hp->n_head, h, e, scale, budget);
    case KVV_TAP_K_ROPE: return eval_rope(c, layer, t, x, hp->n_head_kv, h, e, scale, budget);
    case KVV_TAP_ATTN_OUT: return eval_attn(c, layer, t, h, e, scale, budget);
    case KVV_TAP_ACT: {
        const float *u = row_of(c, layer, KVV_TAP_UP, t);
        if (!u)
            return false;
        eval_act(c, x, u, h, e, scale, budget);
        return true;
    }
    case KVV_TAP_ATTN_RESID:
    case KVV_TAP_FFN_RESID: {
        int rl;
        const int r_op = op == KVV_TAP_ATTN_RESID ? resid_in(layer, &rl) : KVV_TAP_ATTN_RESID;
        if (op == KVV_TAP_FFN_RESID)
            rl = layer;
        const float *a = row_of(c, rl, r_op, t);
        if (!a)
            return false;
        eval_add(a, x, E, h, e, scale, budget);
        return true;
    }
    default:
        return false;
    }
}

/* Which input of (layer, op) at position t is missing: its op, -1 for the
 * layer-0 residual; -2 when none is. */
static int missing_input(const opl_cap *c, int layer, int op, int t)
{
    int il;
    const int in_op = input_op(c->hp, layer, op, &il);
    if (op == KVV_TAP_ATTN_OUT) {
        if (!row_of(c, layer, KVV_TAP_Q_ROPE, t))
            return KVV_TAP_Q_ROPE;
        for (int j = 0; j <= t; j++) {
            if (!row_of(c, layer, KVV_TAP_K_ROPE, j))
                return KVV_TAP_K_ROPE;
            if (!row_of(c, layer, KVV_TAP_V, j))
                return KVV_TAP_V;
        }
        return -2;
    }
    if (!row_of(c, il, in_op, t))
        return in_op;
    if (op == KVV_TAP_ACT && !row_of(c, layer, KVV_TAP_UP, t))
        return KVV_TAP_UP;
    if (op == KVV_TAP_ATTN_RESID || op == KVV_TAP_FFN_RESID) {
        int rl = layer;
        const int r_op = op == KVV_TAP_ATTN_RESID ? resid_in(layer, &rl) : KVV_TAP_ATTN_RESID;
        if (!row_of(c, rl, r_op, t))
            return r_op;
    }
    return -2;
}

/* ------------------------------------------------------------ checking */

static void check_one(const opl_cap *c, kvv_opl_row *row, double *e, double *scale,
                      double *budget)
{
    const int width = kvv_tap_width(c->hp, row->op, 0);
    const int s = slot(c, row->layer, row->op);
    row->state = KVV_OPL_OK;
    for (int t = 0; t < c->n_pos; t++) {
        if (!c->have[s][t])
            continue;
        const int miss = missing_input(c, row->layer, row->op, t);
        if (miss != -2 || !opl_eval(c, row->layer, row->op, t, NULL, e, scale, budget)) {
            row->state = KVV_OPL_NO_INPUT;
            row->input = miss == -2 ? row->op : miss;
            return;
        }
        const float *b = c->tap[s] + (size_t)t * width;
        for (int i = 0; i < width; i++) {
            const double d = fabs((double)b[i] - e[i]);
            double err = scale[i] > 0 ? d / (scale[i] * U_F32) : (d == 0 ? 0 : INFINITY);
            if (isnan(b[i]))
                err = INFINITY;
            const double ratio = err / budget[i];
            const uint64_t ulp = kvv_ulp_distance(b[i], (float)e[i]);
            row->n++;
            if (!kvv_f32_bit_equal(b[i], (float)e[i]))
                row->n_diff++;
            if (ulp > row->max_ulp)
                row->max_ulp = ulp;
            if (err > row->max_err)
                row->max_err = err;
            const double rel = scale[i] > 0 ? d / scale[i] : (d == 0 ? 0 : INFINITY);
            if (rel > row->max_rel || isnan(b[i]))
                row->max_rel = isnan(b[i]) ? INFINITY : rel;
            if (ratio > row->max_ratio || (row->n == 1) || isnan(b[i])) {
                if (ratio > row->max_ratio || row->n == 1) {
                    row->max_ratio = ratio;
                    row->budget = budget[i];
                    row->where_pos = t;
                    row->where_i = i;
                    row->got = b[i];
                    row->want = e[i];
                }
            }
        }
    }
    if (row->max_ratio > 1.0 || isnan(row->max_ratio))
        row->state = KVV_OPL_BEYOND;
}

void kvv_opl_check_all(kvv_opl_report *rep)
{
    opl_cap *c = rep->cap;
    const kvv_hparams *hp = c->hp;
    size_t wmax = (size_t)hp->n_vocab;
    const size_t cand[] = {(size_t)hp->n_embd, (size_t)hp->n_ff,
                           (size_t)hp->n_head * hp->head_dim, (size_t)hp->n_head * hp->head_dim_v};
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        wmax = cand[i] > wmax ? cand[i] : wmax;
    double *e = malloc(wmax * 3 * sizeof(double));
    rep->first = -1;
    rep->n_checked = rep->n_beyond = rep->n_tapped = 0;
    for (int l = 0; l <= c->n_layer; l++)
        for (int op = 0; op < KVV_TAP_COUNT; op++) {
            kvv_opl_row *row = &rep->rows[slot(c, l, op)];
            memset(row, 0, sizeof *row);
            row->layer = l;
            row->op = op;
            row->input = -2;
            const bool final = kvv_tap_is_final(op);
            if (final != (l == c->n_layer) || (op != KVV_TAP_KQ && op != KVV_TAP_SOFTMAX &&
                                               kvv_tap_width(hp, op, 0) == 0)) {
                row->state = KVV_OPL_ABSENT;
                continue;
            }
            if (op == KVV_TAP_KQ || op == KVV_TAP_SOFTMAX) {
                row->state = (c->scores & (1u << op)) ? KVV_OPL_UNCHECKED : KVV_OPL_NOT_TAPPED;
                continue;
            }
            if (!c->tap[slot(c, l, op)]) {
                row->state = KVV_OPL_NOT_TAPPED;
                continue;
            }
            rep->n_tapped++;
            if (!e) {
                row->state = KVV_OPL_UNCHECKED;
                continue;
            }
            check_one(c, row, e, e + wmax, e + 2 * wmax);
            if (row->state == KVV_OPL_OK || row->state == KVV_OPL_BEYOND)
                rep->n_checked++;
            if (row->state == KVV_OPL_BEYOND) {
                rep->n_beyond++;
                if (rep->first < 0)
                    rep->first = slot(c, l, op);
            }
        }
    free(e);
}

const kvv_opl_row *kvv_opl_row_at(const kvv_opl_report *rep, int layer, int op)
{
    if (layer < 0 || layer > rep->n_layer || op < 0 || op >= KVV_TAP_COUNT)
        return NULL;
    return &rep->rows[layer * KVV_TAP_COUNT + op];
}

void kvv_opl_plant(kvv_opl_report *rep, int layer, int op, int pos, int i, double rel)
{
    opl_cap *c = rep->cap;
    if (!c || layer < 0 || layer > c->n_layer || op < 0 || op >= KVV_TAP_COUNT)
        return;
    const int s = slot(c, layer, op), w = kvv_tap_width(c->hp, op, 0);
    if (c->tap[s] && pos >= 0 && pos < c->n_pos && c->have[s][pos] && i >= 0 && i < w) {
        float *x = &c->tap[s][(size_t)pos * w + i];
        *x = (float)(*x * (1.0 + rel));
    }
}

/* ------------------------------------------------------------ run */

static void cap_free(opl_cap *c)
{
    if (!c)
        return;
    for (int s = 0; c->tap && s < (c->n_layer + 1) * KVV_TAP_COUNT; s++) {
        free(c->tap[s]);
        free(c->have[s]);
    }
    free(c->tap);
    free(c->have);
    free(c->emb);
    free(c->have_emb);
    kvv_ops_close(c->orc);
    kvv_ops_close(c->w);
    free(c);
}

void kvv_opl_free(kvv_opl_report *rep)
{
    if (!rep)
        return;
    cap_free(rep->cap);
    free(rep->rows);
    memset(rep, 0, sizeof *rep);
}

kvv_status kvv_opl_run(const kvv_model *m, const kvv_engine_opts *eo, const int32_t *tokens,
                       int n, kvv_opl_report *rep, kvv_error *err)
{
    memset(rep, 0, sizeof *rep);
    rep->first = -1;
    if (!m || !eo || !tokens || n <= 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "ops: no model, engine or tokens");
    const kvv_hparams *hp = &m->hp;
    const int L = hp->n_layer, slots = (L + 1) * KVV_TAP_COUNT;
    opl_cap *c = calloc(1, sizeof *c);
    if (!c)
        return kvv_error_set(err, KVV_ERR_NOMEM, "ops: out of memory");
    c->hp = hp;
    c->n_layer = L;
    c->n_pos = n;
    c->cache_type = eo->cache_type;
    c->tap = calloc((size_t)slots, sizeof *c->tap);
    c->have = calloc((size_t)slots, sizeof *c->have);
    c->emb = calloc((size_t)n * hp->n_embd, sizeof(float));
    c->have_emb = calloc((size_t)n, 1);
    rep->rows = calloc((size_t)slots, sizeof *rep->rows);
    rep->cap = c;
    rep->n_layer = L;
    rep->n_pos = n;
    if (!c->tap || !c->have || !c->emb || !c->have_emb || !rep->rows) {
        kvv_opl_free(rep);
        return kvv_error_set(err, KVV_ERR_NOMEM, "ops: out of memory");
    }

    kvv_engine *e = NULL;
    kvv_status st = kvv_engine_open(m, eo, &e, err);
    if (!st)
        st = kvv_engine_require(e, KVV_ENGINE_CAP_OP_TAPS, "ops (op taps)", err);
    float *logits = NULL;
    int32_t *pos = malloc((size_t)n * sizeof(int32_t));
    if (!st) {
        kvv_engine_desc d;
        kvv_engine_describe(e, &d);
        snprintf(rep->engine, sizeof rep->engine, "%s (%s)", d.name, d.mode);
        const bool all = (kvv_engine_caps(e) & KVV_ENGINE_CAP_LOGITS_ALL) != 0;
        logits = malloc((size_t)(all ? n : 1) * hp->n_vocab * sizeof(float));
        if (!logits || !pos)
            st = kvv_error_set(err, KVV_ERR_NOMEM, "ops: out of memory");
        for (int t = 0; !st && t < n; t++)
            pos[t] = t;
        kvv_hooks hk = {.user = c, .op = cap_op};
        if (kvv_engine_caps(e) & KVV_ENGINE_CAP_RESIDUAL_READ)
            hk.residual = cap_residual;
        if (!st)
            st = kvv_engine_forward(e, n, tokens, pos, &hk, all ? KVV_LOGITS_ALL : KVV_LOGITS_LAST,
                                    logits, err);
    }
    free(logits);
    free(pos);
    kvv_engine_close(e);
    if (!st && c->bad[0])
        st = kvv_error_set(err, KVV_ERR_ENGINE, "ops: %s", c->bad);
    if (!st) {
        kvv_engine_opts ro = kvv_engine_opts_default();
        ro.cache_type = eo->cache_type;
        ro.n_ctx = eo->n_ctx;
        st = kvv_ops_open_ref(m, &ro, &c->w, err);
        if (!st)
            st = kvv_ops_open_oracle(c->w, 0, &c->orc, err);
    }
    if (st) {
        kvv_opl_free(rep);
        return st;
    }
    kvv_opl_check_all(rep);
    return KVV_OK;
}
