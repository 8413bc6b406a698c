/*
 * numerics.c — ULP error of each engine's ops against the MPFR oracle on the
 * real inputs of a forward pass (verify/numerics.h), in data-flow order:
 *   capture (hooks) -> per layer: rebuild the op inputs with the reference's
 *   ops, check them against the hooks, measure every op set on the sampled
 *   rows -> output block -> portable math on dense samples.
 */
#include "verify/numerics/numerics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ options */

kvv_numerics_opts kvv_numerics_opts_default(void)
{
    kvv_numerics_opts o;
    memset(&o, 0, sizeof o);
    o.samples = 4;
    o.seed = 1;
    o.max_outputs = 256;
    o.math_samples = 20000;
    return o;
}

/* ------------------------------------------------------------ capture hooks */

typedef struct {
    const kvv_hparams *hp;
    int n;
    float *resid;   /* [n_layer+1][n][E] residual entering each layer; [n_layer] final */
    float *k;       /* [n_layer][n][K] K as cached */
    float *probs;   /* [n_layer][S][n_head][n] attention probabilities of the sampled rows */
    const int *rows;/* [S] the sampled rows */
    int S;
    float *att;     /* [n_layer][n][O] attention output */
    int bad;        /* hook calls with an unexpected shape */
} hooks_capture;

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

/* ------------------------------------------------------------ run state */

typedef struct {
    const kvv_numerics_opts *o;
    const kvv_hparams *hp;
    kvv_ops *cap;                 /* the reference ops (rebuild, weights) */
    kvv_ops *const *ops;          /* op sets measured */
    int n_ops;
    kvv_numerics_report *rep;
    kvv_oracle *orc;
    int n;                        /* prompt length = batch */
    float *got;                   /* scratch: one engine's output */
    float *exact;                 /* scratch: the oracle's output */
    float *tmp;                   /* scratch: one row */
    float *batch;                 /* scratch: [n][max rows] engine matmul output */
} nrun;

static float *falloc(size_t n)
{
    return calloc(n ? n : 1, sizeof(float));
}

static kvv_numerics_cell *cell(kvv_numerics_report *rep, int e, int layer, kvv_op op)
{
    return &rep->engines[e].cells[(size_t)layer * KVV_OP_COUNT + (size_t)op];
}

const kvv_numerics_cell *kvv_numerics_cell_at(const kvv_numerics_report *rep, int e, int layer,
                                              kvv_op op)
{
    if (!rep || e < 0 || e >= rep->n_engines || layer < 0 || layer > rep->n_layer ||
        (unsigned)op >= KVV_OP_COUNT)
        return NULL;
    return &rep->engines[e].cells[(size_t)layer * KVV_OP_COUNT + (size_t)op];
}

static bool worse(uint64_t a, const kvv_numerics_where *w)
{
    if (!w->set)
        return true;
    if (w->ulp == KVV_ULP_NAN)
        return false;
    return a == KVV_ULP_NAN || a > w->ulp;
}

/* ULP of binary32 at |v| (2^-149 below the normal range). */
static double ulp_of(double v)
{
    int ex;
    v = fabs(v);
    if (v < 0x1p-126)
        return 0x1p-149;
    frexp(v, &ex);
    return ldexp(1.0, ex - 24);
}

/* sum |a[i]*b[i]| (double: a scale, not a result). */
static double abs_sum(const float *a, const float *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += fabs((double)a[i] * (double)b[i]);
    return s;
}

static void record_scaled(kvv_numerics_cell *c, float got, float exact, double scale)
{
    double d = fabs((double)got - (double)exact) / ulp_of(scale);
    if (!(d <= c->max_scaled))
        c->max_scaled = d;
}

/* Accumulate engine e's got[0..count) against exact[] for (layer, op, row);
 * element i is output index first + i; in: each element's own input or NULL;
 * scale: sum |a*b| of a dot product (count 1) or 0. */
static void record(nrun *r, int e, int layer, kvv_op op, int row, int first, int count,
                   const float *in, const float *got, const float *exact, const char *what,
                   double scale)
{
    kvv_numerics_cell *c = cell(r->rep, e, layer, op);
    kvv_numerics_cell *t = &r->rep->engines[e].total[op];
    if (scale > 0 && count == 1) {
        record_scaled(c, got[0], exact[0], scale);
        record_scaled(t, got[0], exact[0], scale);
    }
    for (int i = 0; i < count; i++) {
        uint64_t u = kvv_oracle_ulp_distance(got[i], exact[i]);
        kvv_oracle_hist_add(&c->hist, u);
        kvv_oracle_hist_add(&t->hist, u);
        if (!worse(u, &c->worst))
            continue;
        kvv_numerics_where w = {.layer = layer, .row = row, .index = first + i,
                                .input = in ? in[i] : NAN, .got = got[i], .exact = exact[i],
                                .ulp = u, .set = true};
        snprintf(w.what, sizeof w.what, "%s", what);
        c->worst = w;
        if (worse(u, &t->worst))
            t->worst = w;
    }
}

/* ------------------------------------------------------------ per-op measurement */

/* Each engine's op on the same input, against the oracle's out in r->exact. */
static void measure_rmsnorm(nrun *r, int layer, int row, const float *x, const float *w, int n,
                            const char *what)
{
    kvv_oracle_rmsnorm(r->orc, x, w, n, r->hp->norm_eps, r->exact);
    for (int e = 0; e < r->n_ops; e++) {
        r->ops[e]->vt->rmsnorm(r->ops[e], x, w, n, r->hp->norm_eps, r->got);
        record(r, e, layer, KVV_OP_RMSNORM, row, 0, n, x, r->got, r->exact, what, 0);
    }
}

/* y = x W^T over the whole batch per engine; the sampled rows' outputs (at
 * most max_outputs weight rows, evenly spaced) against the oracle dot. */
static void measure_matmul(nrun *r, int layer, kvv_ops_tensor t, const float *x)
{
    int rows = 0, cols = 0;
    const float *W = r->cap->vt->tensor(r->cap, layer, t, &rows, &cols);
    if (!W)
        return;
    const int nout = rows < r->o->max_outputs ? rows : r->o->max_outputs;
    char what[64];
    snprintf(what, sizeof what, "%s (K=%d), output = weight row", kvv_ops_tensor_name(t), cols);
    const int S = r->rep->samples;
    float *ex = falloc((size_t)S * (size_t)nout);
    double *sc = calloc((size_t)S * (size_t)nout, sizeof *sc);
    if (!ex || !sc) {
        free(ex);
        free(sc);
        return;
    }
    for (int s = 0; s < S; s++) {
        const float *xt = x + (size_t)r->rep->rows[s] * (size_t)cols;
        for (int i = 0; i < nout; i++) {
            int wr = (int)((long)i * rows / nout);
            ex[(size_t)s * nout + i] = kvv_oracle_dot(r->orc, xt, W + (size_t)wr * cols, cols);
            sc[(size_t)s * nout + i] = abs_sum(xt, W + (size_t)wr * cols, cols);
        }
    }
    for (int e = 0; e < r->n_ops; e++) {
        r->ops[e]->vt->matmul(r->ops[e], layer == r->hp->n_layer ? 0 : layer, t, r->n, x,
                              r->batch);
        for (int s = 0; s < S; s++) {
            const float *yt = r->batch + (size_t)r->rep->rows[s] * (size_t)rows;
            for (int i = 0; i < nout; i++) {
                int wr = (int)((long)i * rows / nout);
                record(r, e, layer, KVV_OP_MATMUL, r->rep->rows[s], wr, 1, NULL, &yt[wr],
                       &ex[(size_t)s * nout + i], what, sc[(size_t)s * nout + i]);
            }
        }
    }
    free(ex);
    free(sc);
}

/* Scalar op on count inputs: oracle op(x, c) vs each engine's slot. */
static void measure_scalar(nrun *r, int layer, kvv_op op, int row, int first, const float *x,
                           int count, float c, const char *what)
{
    kvv_oracle_op oop = op == KVV_OP_SILU ? KVV_ORACLE_SILU
                      : op == KVV_OP_GELU ? KVV_ORACLE_GELU_TANH : KVV_ORACLE_SOFTCAP;
    for (int i = 0; i < count; i++)
        r->exact[i] = kvv_oracle_eval(r->orc, oop, x[i], c);
    for (int e = 0; e < r->n_ops; e++) {
        const kvv_ops_vtable *vt = r->ops[e]->vt;
        if (op == KVV_OP_SOFTCAP && !vt->softcap)
            continue;
        for (int i = 0; i < count; i++)
            r->got[i] = op == KVV_OP_SILU   ? vt->silu(r->ops[e], x[i])
                      : op == KVV_OP_GELU   ? vt->gelu(r->ops[e], x[i])
                                            : vt->softcap(r->ops[e], x[i], c);
        record(r, e, layer, op, row, first, count, x, r->got, r->exact, what, 0);
    }
}

static void measure_rope(nrun *r, int layer, int row, const float *x, const char *what)
{
    const kvv_hparams *hp = r->hp;
    kvv_oracle_rope(r->orc, x, hp->head_dim, hp->n_rot, hp->rope_type == KVV_ROPE_NEOX, row,
                    kvv_hparams_rope_base(hp, layer), 1.0f, hp->rope_freqs, r->exact);
    for (int e = 0; e < r->n_ops; e++) {
        r->ops[e]->vt->rope(r->ops[e], layer, row, x, r->got);
        record(r, e, layer, KVV_OP_ROPE, row, 0, hp->head_dim, x, r->got, r->exact, what, 0);
    }
}

/* ------------------------------------------------------------ rebuild */

/* Mismatch bookkeeping of the rebuild against the hooks. */
static void check_same(nrun *r, const float *rebuilt, const float *seen, size_t count,
                       const char *what, int layer)
{
    for (size_t i = 0; i < count; i++) {
        r->rep->capture_checked++;
        if (kvv_oracle_ulp_distance(rebuilt[i], seen[i]) == 0)
            continue;
        if (r->rep->capture_mismatch++ == 0)
            snprintf(r->rep->capture_note, sizeof r->rep->capture_note,
                     "layer %d %s element %zu: rebuilt %a, forward %a", layer, what, i,
                     (double)rebuilt[i], (double)seen[i]);
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

typedef struct {
    float *xn, *q, *k, *qpre, *kpre, *proj, *down, *hmid, *xf, *gate, *up, *act, *hout, *sc, *qs;
} layer_buf;

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
        if (measure) {
            float ex = kvv_oracle_dot(r->orc, qh, kj, hd);
            double scale = abs_sum(qh, kj, hd);
            for (int e = 0; e < r->n_ops; e++) {
                float gd = r->ops[e]->vt->dot(r->ops[e], qh, kj, hd);
                record(r, e, l, KVV_OP_DOT, t, j, 1, NULL, &gd, &ex, what, scale);
            }
        }
        if (!prescale)
            s = s * hp->query_scale;
        if (hp->attn_softcap > 0.0f) {
            if (measure) {
                char cw[64];
                snprintf(cw, sizeof cw, "attention score head %d, index = key position", h);
                measure_scalar(r, l, KVV_OP_SOFTCAP, t, j, &s, 1, hp->attn_softcap, cw);
            }
            s = r->cap->vt->softcap(r->cap, s, hp->attn_softcap);
        }
        r->tmp[nv++] = s;
    }
    return nv;
}

/* One layer: rebuild, check, measure. */
static void run_layer(nrun *r, int l, const hooks_capture *c, layer_buf *b)
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
    measure_matmul(r, l, KVV_T_WQ, b->xn);
    measure_matmul(r, l, KVV_T_WK, b->xn);
    measure_matmul(r, l, KVV_T_WV, b->xn);
    measure_matmul(r, l, KVV_T_WO, att);
    measure_matmul(r, l, KVV_T_W_GATE, b->xf);
    measure_matmul(r, l, KVV_T_W_UP, b->xf);
    measure_matmul(r, l, KVV_T_W_DOWN, b->act);
    for (int s = 0; s < r->rep->samples; s++) {
        const int t = r->rep->rows[s];
        measure_rmsnorm(r, l, t, h + (size_t)t * E, T(r, l, KVV_T_ATTN_NORM), E, "attn_norm");
        measure_rmsnorm(r, l, t, b->hmid + (size_t)t * E, T(r, l, KVV_T_FFN_NORM), E,
                        "ffn_norm");
        if (pan)
            measure_rmsnorm(r, l, t, b->proj + (size_t)t * E, pan, E, "post_attention_norm");
        if (pfn)
            measure_rmsnorm(r, l, t, down + (size_t)t * E, pfn, E, "post_ffw_norm");
        for (int hh = 0; hh < hp->n_head; hh++) {
            snprintf(what, sizeof what, "q head %d", hh);
            measure_rope(r, l, t, b->qpre + (size_t)t * Q + (size_t)hh * hd, what);
        }
        for (int g = 0; g < hp->n_head_kv; g++) {
            snprintf(what, sizeof what, "k head %d", g);
            measure_rope(r, l, t, b->kpre + (size_t)t * K + (size_t)g * hd, what);
        }
        for (int hh = 0; hh < hp->n_head; hh++) {
            int nv = scores(r, l, t, hh, b, true);
            kvv_oracle_softmax(r->orc, r->tmp, nv, r->exact);
            snprintf(what, sizeof what, "head %d, %d keys", hh, nv);
            for (int e = 0; e < r->n_ops; e++) {
                if (!r->ops[e]->vt->softmax)
                    continue;
                r->ops[e]->vt->softmax(r->ops[e], r->tmp, nv, r->got);
                record(r, e, l, KVV_OP_SOFTMAX, t, 0, nv, r->tmp, r->got, r->exact, what, 0);
            }
            /* the rebuilt probabilities against the attn hook's */
            cp->vt->softmax(cp, r->tmp, nv, r->got);
            const float *p =
                c->probs + (((size_t)l * r->rep->samples + s) * hp->n_head + hh) * n;
            check_same(r, r->got, p + (t + 1 - nv), (size_t)nv, "attention probabilities", l);
        }
        measure_scalar(r, l, KVV_OP_SILU, t, 0, b->gate + (size_t)t * F, F, 0, "ffn_gate value");
        measure_scalar(r, l, KVV_OP_GELU, t, 0, b->gate + (size_t)t * F, F, 0, "ffn_gate value");
    }
}

/* The output block (layer index n_layer): output_norm, the output matrix,
 * the final soft-cap on the logits. */
static void run_output(nrun *r, const hooks_capture *c, const float *logits, layer_buf *b)
{
    const kvv_hparams *hp = r->hp;
    const int n = r->n, E = hp->n_embd, L = hp->n_layer, V = hp->n_vocab;
    const float *h = c->resid + (size_t)L * n * E;
    const float *on = T(r, 0, KVV_T_OUTPUT_NORM);
    norm_rows(r, b->xn, h, on, n, E);
    float *lg = falloc((size_t)n * V);
    if (!lg)
        return;
    r->cap->vt->matmul(r->cap, 0, KVV_T_OUTPUT, n, b->xn, lg);
    if (hp->final_softcap > 0.0f)
        for (size_t i = 0; i < (size_t)n * V; i++)
            lg[i] = r->cap->vt->softcap(r->cap, lg[i], hp->final_softcap);
    check_same(r, lg, logits, (size_t)n * V, "logits", L);
    r->cap->vt->matmul(r->cap, 0, KVV_T_OUTPUT, n, b->xn, lg); /* before the cap */
    measure_matmul(r, L, KVV_T_OUTPUT, b->xn);
    const float cap = hp->final_softcap > 0.0f ? hp->final_softcap : 30.0f;
    r->rep->final_cap = cap;
    const int nout = V < 8 * r->o->max_outputs ? V : 8 * r->o->max_outputs;
    for (int s = 0; s < r->rep->samples; s++) {
        const int t = r->rep->rows[s];
        measure_rmsnorm(r, L, t, h + (size_t)t * E, on, E, "output_norm");
        for (int i = 0; i < nout; i++) {
            const int v = (int)((long)i * V / nout);
            measure_scalar(r, L, KVV_OP_SOFTCAP, t, v, &lg[(size_t)t * V + v], 1, cap,
                           hp->final_softcap > 0.0f ? "final logits, index = token id"
                                                    : "final logits, cap 30 (model has none)");
        }
    }
    free(lg);
}

/* ------------------------------------------------------------ portable math */

/* The ranges the engines use (magnitudes by sign; bit patterns sampled
 * evenly between lo and hi). */
typedef struct {
    kvv_math_fn fn;
    float lo, hi;
    const char *range;
} math_range;

static const math_range MATH_RANGES[] = {
    {KVV_MATH_EXP, -104.0f, -0x1p-24f, "[-104, -2^-24] (softmax x - max, silu)"},
    {KVV_MATH_EXP, 0x1p-24f, 89.0f, "[2^-24, 89] (silu e^-x)"},
    {KVV_MATH_TANH, -20.0f, -0x1p-24f, "[-20, -2^-24] (gelu, soft-cap)"},
    {KVV_MATH_TANH, 0x1p-24f, 20.0f, "[2^-24, 20] (gelu, soft-cap)"},
    {KVV_MATH_SIN, 0x1p-24f, 1048576.0f, "[2^-24, 2^20] (RoPE angles)"},
    {KVV_MATH_COS, 0x1p-24f, 1048576.0f, "[2^-24, 2^20] (RoPE angles)"},
    {KVV_MATH_POW, 1.0f, 1e8f, "x in [1, 1e8], y = -2/n_rot (RoPE theta_scale)"},
};
#define N_MATH_RANGES (int)(sizeof MATH_RANGES / sizeof MATH_RANGES[0])

/* pow's y: -2/n_rot as the engines round it, for common n_rot. */
static const int POW_NROT[] = {8, 16, 32, 64, 80, 96, 128, 256};
#define N_POW_NROT (int)(sizeof POW_NROT / sizeof POW_NROT[0])

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Sample i of count evenly spaced bit patterns between |lo| and |hi|. */
static float sample_at(const math_range *m, long i, long count)
{
    uint32_t a = fbits(fabsf(m->lo)), b = fbits(fabsf(m->hi));
    if (a > b) {
        uint32_t t = a;
        a = b;
        b = t;
    }
    const uint64_t steps = (uint64_t)(count > 1 ? count - 1 : 1);
    uint32_t u = a + (uint32_t)(((uint64_t)(b - a) * (uint64_t)i) / steps);
    float x = bitsf(u);
    return m->lo < 0 ? -x : x;
}

static const kvv_oracle_op MATH_ORACLE_OP[KVV_MATH_COUNT] = {
    KVV_ORACLE_EXP, KVV_ORACLE_TANH, KVV_ORACLE_SIN, KVV_ORACLE_COS, KVV_ORACLE_POW,
};

static void math_one(nrun *r, const kvv_ops *ops, const math_range *m, kvv_numerics_math *out)
{
    float (*fn)(float, float) = ops->vt->math[m->fn];
    memset(out, 0, sizeof *out);
    snprintf(out->engine, sizeof out->engine, "%s",
             ops->desc.name[0] ? ops->desc.name : ops->name);
    snprintf(out->range, sizeof out->range, "%s", m->range);
    snprintf(out->where, sizeof out->where, "%s",
             ops->math_where[m->fn] ? ops->math_where[m->fn] : "");
    out->fn = m->fn;
    const long count = r->o->math_samples;
    const kvv_oracle_op op = MATH_ORACLE_OP[m->fn];
    for (long i = 0; i < count; i++) {
        float x = sample_at(m, i, count), y = 0.0f;
        if (m->fn == KVV_MATH_POW)
            y = -2.0f / (float)POW_NROT[i % N_POW_NROT];
        float got = fn(x, y);
        float cr = kvv_oracle_eval(r->orc, op, x, y);
        double err = kvv_oracle_ulp_error(r->orc, op, x, y, got);
        uint64_t u = kvv_oracle_ulp_distance(got, cr);
        out->samples++;
        if (u != 0)
            out->n_not_rounded++;
        if (u != KVV_ULP_NAN && u > out->max_ulp)
            out->max_ulp = u;
        if (u == KVV_ULP_NAN)
            out->max_ulp = KVV_ULP_NAN;
        if (err > out->max_err || (isnan(err) && !isnan(out->max_err)) || i == 0) {
            out->max_err = err;
            out->worst_x = x;
            out->worst_y = y;
            out->worst_got = got;
            out->worst_exact = cr;
        }
    }
}

/* Every op set's math, once per distinct function (cpu fast and invariant
 * share theirs). */
static kvv_status run_math(nrun *r, kvv_error *err)
{
    kvv_numerics_report *rep = r->rep;
    if (r->o->math_samples <= 0)
        return KVV_OK;
    rep->math = calloc((size_t)r->n_ops * N_MATH_RANGES, sizeof *rep->math);
    if (!rep->math)
        return kvv_error_set(err, KVV_ERR_NOMEM, "numerics: out of memory");
    for (int e = 0; e < r->n_ops; e++) {
        const kvv_ops *ops = r->ops[e];
        for (int k = 0; k < N_MATH_RANGES; k++) {
            const math_range *m = &MATH_RANGES[k];
            bool seen = !ops->vt->math[m->fn];
            for (int p = 0; p < e && !seen; p++)
                seen = r->ops[p]->vt->math[m->fn] == ops->vt->math[m->fn];
            if (!seen)
                math_one(r, ops, m, &rep->math[rep->n_math++]);
            if (r->o->progress)
                r->o->progress(r->o->progress_user, "numerics math",
                               (long)e * N_MATH_RANGES + k + 1, (long)r->n_ops * N_MATH_RANGES);
        }
    }
    return KVV_OK;
}

/* ------------------------------------------------------------ run */

static void pick_rows(const kvv_numerics_opts *o, int *rows, int S, int n)
{
    /* Row n-1 (it sees every key) plus S-1 distinct others from the seed
     * (splitmix64), sorted. */
    uint64_t x = o->seed;
    int k = 0;
    rows[k++] = n - 1;
    while (k < S) {
        x += 0x9e3779b97f4a7c15ull;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        int t = (int)(z % (uint64_t)n);
        bool dup = false;
        for (int i = 0; i < k; i++)
            dup = dup || rows[i] == t;
        if (!dup)
            rows[k++] = t;
    }
    for (int i = 1; i < S; i++)
        for (int j = i; j > 0 && rows[j - 1] > rows[j]; j--) {
            int t = rows[j];
            rows[j] = rows[j - 1];
            rows[j - 1] = t;
        }
}

void kvv_numerics_report_free(kvv_numerics_report *rep)
{
    if (!rep)
        return;
    for (int e = 0; e < rep->n_engines; e++)
        free(rep->engines[e].cells);
    free(rep->engines);
    free(rep->math);
    free(rep->rows);
    memset(rep, 0, sizeof *rep);
}

static kvv_status validate(const kvv_numerics_opts *o, kvv_ops *capture, kvv_ops *const *ops,
                           int n_ops, kvv_error *err)
{
    if (!o || !o->model)
        return kvv_error_set(err, KVV_ERR_USAGE, "numerics: no model");
    if (!o->tokens || o->n_tokens < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "numerics: the prompt is empty");
    for (int t = 0; t < o->n_tokens; t++)
        if (o->tokens[t] < 0 || o->tokens[t] >= o->model->hp.n_vocab)
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "numerics: token %d (prompt row %d) is outside the vocabulary "
                                 "0..%d", (int)o->tokens[t], t, o->model->hp.n_vocab - 1);
    if (o->samples < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "numerics: samples must be >= 1 (got %d)",
                             o->samples);
    if (o->max_outputs < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "numerics: max_outputs must be >= 1 (got %d)",
                             o->max_outputs);
    if (!capture || !capture->engine || !capture->vt->tensor || !capture->vt->softmax ||
        !capture->vt->softcap)
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "numerics: the capture op set must be the reference's");
    if (n_ops < 1 || !ops)
        return kvv_error_set(err, KVV_ERR_USAGE, "numerics: no op set to measure");
    for (int e = 0; e < n_ops; e++)
        if (!ops[e] || !ops[e]->vt->matmul || !ops[e]->vt->dot || !ops[e]->vt->rmsnorm ||
            !ops[e]->vt->rope || !ops[e]->vt->silu || !ops[e]->vt->gelu)
            return kvv_error_set(err, KVV_ERR_USAGE, "numerics: op set %d lacks a required op",
                                 e);
    return KVV_OK;
}

kvv_status kvv_numerics_run(const kvv_numerics_opts *o, kvv_ops *capture, kvv_ops *const *ops,
                            int n_ops, kvv_numerics_report *rep, kvv_error *err)
{
    memset(rep, 0, sizeof *rep);
    kvv_status st = validate(o, capture, ops, n_ops, err);
    if (st)
        return st;
    const double t0 = kvv_now_seconds();
    const kvv_hparams *hp = &o->model->hp;
    const int n = o->n_tokens, L = hp->n_layer, E = hp->n_embd, F = hp->n_ff;
    const int hd = hp->head_dim, Q = hp->n_head * hd, K = hp->n_head_kv * hd;
    const int O = hp->n_head * hp->head_dim_v, V = hp->n_vocab;
    const int S = o->samples < n ? o->samples : n;

    rep->n_layer = L;
    rep->n_tokens = n;
    rep->samples = S;
    rep->max_outputs = o->max_outputs;
    rep->attn_cap = hp->attn_softcap;
    for (int op = 0; op < KVV_OP_COUNT; op++)
        rep->used[op] = true;
    rep->used[KVV_OP_SILU] = hp->act == KVV_ACT_SILU;
    rep->used[KVV_OP_GELU] = hp->act == KVV_ACT_GELU_TANH;
    rep->used[KVV_OP_SOFTCAP] = hp->attn_softcap > 0.0f || hp->final_softcap > 0.0f;
    rep->rows = calloc((size_t)S, sizeof *rep->rows);
    rep->engines = calloc((size_t)n_ops, sizeof *rep->engines);
    rep->n_engines = rep->engines ? n_ops : 0;
    bool ok = rep->rows && rep->engines;
    for (int e = 0; ok && e < n_ops; e++) {
        kvv_numerics_engine *en = &rep->engines[e];
        snprintf(en->name, sizeof en->name, "%s", ops[e]->name);
        en->desc = ops[e]->desc;
        for (int op = 0; op < KVV_OP_COUNT; op++) {
            en->measured[op] = !(op == KVV_OP_SOFTMAX && !ops[e]->vt->softmax) &&
                               !(op == KVV_OP_SOFTCAP && !ops[e]->vt->softcap);
            snprintf(en->where[op], sizeof en->where[op], "%s",
                     ops[e]->where[op] ? ops[e]->where[op] : "");
            kvv_oracle_hist_init(&en->total[op].hist);
        }
        en->cells = calloc((size_t)(L + 1) * KVV_OP_COUNT, sizeof *en->cells);
        ok = en->cells != NULL;
        for (size_t i = 0; ok && i < (size_t)(L + 1) * KVV_OP_COUNT; i++)
            kvv_oracle_hist_init(&en->cells[i].hist);
    }
    if (!ok) {
        kvv_numerics_report_free(rep);
        return kvv_error_set(err, KVV_ERR_NOMEM, "numerics: out of memory");
    }
    pick_rows(o, rep->rows, S, n);

    /* 1. the forward pass, captured */
    hooks_capture c = {.hp = hp, .n = n};
    c.resid = falloc((size_t)(L + 1) * n * E);
    c.k = falloc((size_t)L * n * K);
    c.probs = falloc((size_t)L * S * hp->n_head * n);
    c.rows = rep->rows;
    c.S = S;
    c.att = falloc((size_t)L * n * O);
    float *logits = falloc((size_t)n * V);
    int32_t *pos = calloc((size_t)n, sizeof *pos);
    const int dims[] = {E, F, Q, K, hp->n_head_kv * hp->head_dim_v, O, V};
    size_t wide = (size_t)n;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        wide = (size_t)dims[i] > wide ? (size_t)dims[i] : wide;
    nrun r = {.o = o, .hp = hp, .cap = capture, .ops = ops, .n_ops = n_ops, .rep = rep, .n = n,
              .orc = kvv_oracle_new(), .got = falloc(wide), .exact = falloc(wide),
              .tmp = falloc(wide), .batch = falloc((size_t)n * wide)};
    layer_buf b;
    float **bufs[] = {&b.xn, &b.q, &b.k, &b.qpre, &b.kpre, &b.proj, &b.down, &b.hmid,
                      &b.xf, &b.gate, &b.up, &b.act, &b.hout, &b.sc, &b.qs};
    const size_t sizes[] = {(size_t)n * E, (size_t)n * Q, (size_t)n * K, (size_t)n * Q,
                            (size_t)n * K, (size_t)n * E, (size_t)n * E, (size_t)n * E,
                            (size_t)n * E, (size_t)n * F, (size_t)n * F, (size_t)n * F,
                            (size_t)n * E, (size_t)n * E + (size_t)V, (size_t)hd};
    ok = c.resid && c.k && c.probs && c.att && logits && pos && r.orc && r.got && r.exact &&
         r.tmp && r.batch;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ok = (*bufs[i] = falloc(sizes[i])) != NULL && ok;
    if (ok) {
        for (int t = 0; t < n; t++)
            pos[t] = t;
        kvv_hooks hk = {.user = &c, .residual = cap_resid, .kv = cap_kv, .attn = cap_attn,
                        .attn_out = cap_att};
        kvv_engine_reset(capture->engine);
        st = kvv_engine_forward(capture->engine, n, o->tokens, pos, &hk, KVV_LOGITS_ALL, logits,
                                err);
        if (!st && c.bad)
            st = kvv_error_set(err, KVV_ERR_INTERNAL,
                               "numerics: the reference's hooks reported %d unexpected shapes",
                               c.bad);
        /* 2.-3. per layer, then the output block */
        for (int l = 0; !st && l < L; l++) {
            run_layer(&r, l, &c, &b);
            if (o->progress)
                o->progress(o->progress_user, "numerics layers", l + 1, L + 1);
        }
        if (!st) {
            run_output(&r, &c, logits, &b);
            if (o->progress)
                o->progress(o->progress_user, "numerics layers", L + 1, L + 1);
            st = run_math(&r, err);
        }
    } else {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "numerics: out of memory for %d tokens", n);
    }
    if (r.orc)
        rep->oracle = kvv_oracle_get_stats(r.orc);
    kvv_oracle_free(r.orc);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(*bufs[i]);
    free(r.got);
    free(r.exact);
    free(r.tmp);
    free(r.batch);
    free(c.resid);
    free(c.k);
    free(c.probs);
    free(c.att);
    free(logits);
    free(pos);
    if (st) {
        kvv_numerics_report_free(rep);
        return st;
    }
    rep->seconds = kvv_now_seconds() - t0;
    return KVV_OK;
}
