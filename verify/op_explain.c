/*
 * op_explain.c — named hypotheses for an op beyond budget
 * (verify/op_explain.h), on oplocal's evaluation (oplocal_impl.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify/compare_stats.h"
#include "verify/op_explain.h"
#include "verify/oplocal_impl.h"

#define U_F32 5.9604644775390625e-8

typedef struct {
    const char *name;
    kvv_opl_hyp h;
    int kind; /* 0 any op, 1 products (and norms for sums), 2 the activation, 3 products only */
} hyp_def;

static const hyp_def hyps[KVV_OPL_N_HYP] = {
    {"inputs rounded to f16", {.in = OPL_ROUND_F16}, 0},
    {"inputs rounded to bf16", {.in = OPL_ROUND_BF16}, 0},
    {"output rounded to f16", {.out = OPL_ROUND_F16}, 0},
    {"output rounded to bf16", {.out = OPL_ROUND_BF16}, 0},
    {"function from a 16-bit lookup table (fp16 in, fp16 out)", {.lut = true}, 2},
    {"FMA contraction (fp32, ascending)", {.sum = OPL_SUM_FMA}, 3},
    {"fp32 sum, ascending", {.sum = OPL_SUM_SEQ}, 1},
    {"fp32 sum, pairwise", {.sum = OPL_SUM_PAIRWISE}, 3},
    {"fp32 sum, blocks of 16", {.sum = OPL_SUM_BLOCK16}, 3},
    {"fp32 sum, blocks of 32", {.sum = OPL_SUM_BLOCK32}, 3},
    {"fp32 sum, blocks of 256", {.sum = OPL_SUM_BLOCK256}, 3},
    {"denormals flushed to zero", {.in = OPL_ROUND_FTZ, .out = OPL_ROUND_FTZ}, 0},
    {"activations quantized to Q8_0 (ggml vec_dot_type)", {.q8_act = true}, 3},
};

static bool is_product(int op)
{
    return op == KVV_TAP_Q || op == KVV_TAP_K || op == KVV_TAP_V || op == KVV_TAP_WO ||
           op == KVV_TAP_GATE || op == KVV_TAP_UP || op == KVV_TAP_DOWN || op == KVV_TAP_HEAD;
}

static bool is_norm(int op)
{
    return op == KVV_TAP_ATTN_NORM || op == KVV_TAP_FFN_NORM || op == KVV_TAP_Q_NORM ||
           op == KVV_TAP_K_NORM || op == KVV_TAP_POST_ATTN_NORM || op == KVV_TAP_POST_FFW_NORM ||
           op == KVV_TAP_OUT_NORM;
}

static bool applies(const hyp_def *d, int op)
{
    switch (d->kind) {
    case 1: return is_product(op) || is_norm(op) || op == KVV_TAP_ATTN_RESID || op == KVV_TAP_FFN_RESID;
    case 2: return op == KVV_TAP_ACT;
    case 3: return is_product(op);
    default: return true;
    }
}

bool kvv_opl_explain(const kvv_opl_report *rep, int layer, int op, kvv_opl_explanation *out)
{
    memset(out, 0, sizeof *out);
    const kvv_opl_row *row = kvv_opl_row_at(rep, layer, op);
    const opl_cap *c = rep->cap;
    if (!row || !c || (row->state != KVV_OPL_OK && row->state != KVV_OPL_BEYOND))
        return false;
    out->layer = layer;
    out->op = op;
    out->err = row->max_err;
    out->budget = row->budget;
    const int width = kvv_tap_width(c->hp, op, 0);
    const float *tap = c->tap[layer * KVV_TAP_COUNT + op];
    const uint8_t *have = c->have[layer * KVV_TAP_COUNT + op];
    double *buf = malloc((size_t)width * 6 * sizeof(double));
    if (!buf)
        return false;
    double *ex = buf, *sc = buf + width, *bu = buf + 2 * width, *hv = buf + 3 * width,
           *hs = buf + 4 * width, *hb = buf + 5 * width;
    for (int k = 0; k < KVV_OPL_N_HYP; k++) {
        kvv_opl_hyp_result *r = &out->h[k];
        r->name = hyps[k].name;
        r->applies = applies(&hyps[k], op);
        if (!r->applies)
            continue;
        long n = 0, eq = 0;
        bool ok = true;
        double worst_ratio = 0.0;
        for (int t = 0; t < c->n_pos && ok; t++) {
            if (!have[t])
                continue;
            ok = opl_eval(c, layer, op, t, NULL, ex, sc, bu) &&
                 opl_eval(c, layer, op, t, &hyps[k].h, hv, hs, hb);
            const float *b = tap + (size_t)t * width;
            for (int i = 0; ok && i < width; i++) {
                const double s = sc[i] > 0 ? sc[i] * U_F32 : 0;
                const double d = fabs((double)b[i] - hv[i]), dh = fabs(hv[i] - ex[i]);
                const double res = s > 0 ? d / s : (d == 0 ? 0 : INFINITY);
                const double own = s > 0 ? dh / s : (dh == 0 ? 0 : INFINITY);
                n++;
                if (kvv_f32_bit_equal(b[i], (float)hv[i]))
                    eq++;
                r->resid = res > r->resid ? res : r->resid;
                r->hyp_err = own > r->hyp_err ? own : r->hyp_err;
                const double ratio = res / bu[i];
                worst_ratio = ratio > worst_ratio ? ratio : worst_ratio;
            }
        }
        if (!ok || n == 0) {
            r->applies = false;
            continue;
        }
        r->bits_equal = (double)eq / (double)n;
        r->reproduces = r->bits_equal >= 0.99;
        r->explains = r->reproduces ||
                      (worst_ratio <= 1.0 && r->hyp_err >= 0.5 * row->max_err &&
                       r->hyp_err <= 2.0 * row->max_err);
        if (r->explains)
            out->n_explained++;
    }
    free(buf);
    return true;
}
