/*
 * measure.c — one op, measured: the same fp32 inputs through every op set
 * (engine/engine_ops.h) and through the MPFR oracle, each output element's
 * distance from the correctly rounded result in ULPs accumulated per
 * engine, layer and op (histogram, max, mean, where the max is). See
 * numerics.h, step 3.
 */
#include "verify/numerics/numerics_impl.h"

#include <math.h>
#include <stdio.h>

static kvv_numerics_cell *cell(kvv_numerics_report *rep, int e, int layer, kvv_op op)
{
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

/* Each engine's op on the same input, against the oracle's out in r->exact. */
void num_measure_rmsnorm(nrun *r, int layer, int row, const float *x, const float *w, int n,
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
void num_measure_matmul(nrun *r, int layer, kvv_ops_tensor t, const float *x)
{
    int rows = 0, cols = 0;
    const float *W = r->cap->vt->tensor(r->cap, layer, t, &rows, &cols);
    if (!W)
        return;
    const int nout = rows < r->o->max_outputs ? rows : r->o->max_outputs;
    char what[64];
    snprintf(what, sizeof what, "%s (K=%d), output = weight row", kvv_ops_tensor_name(t), cols);
    const int S = r->rep->samples;
    float *ex = num_falloc((size_t)S * (size_t)nout);
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
void num_measure_scalar(nrun *r, int layer, kvv_op op, int row, int first, const float *x,
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

/* One attention-score product q.k (key position j of row t). */
void num_measure_dot(nrun *r, int layer, int row, int key, const float *q,
                     const float *k, int n, const char *what)
{
    float ex = kvv_oracle_dot(r->orc, q, k, n);
    double scale = abs_sum(q, k, n);
    for (int e = 0; e < r->n_ops; e++) {
        float gd = r->ops[e]->vt->dot(r->ops[e], q, k, n);
        record(r, e, layer, KVV_OP_DOT, row, key, 1, NULL, &gd, &ex, what, scale);
    }
}

/* Softmax of one head's n scores x (the op sets that have one); uses
 * r->got and r->exact as scratch. */
void num_measure_softmax(nrun *r, int layer, int row, const float *x, int n,
                         const char *what)
{
    kvv_oracle_softmax(r->orc, x, n, r->exact);
    for (int e = 0; e < r->n_ops; e++) {
        if (!r->ops[e]->vt->softmax)
            continue;
        r->ops[e]->vt->softmax(r->ops[e], x, n, r->got);
        record(r, e, layer, KVV_OP_SOFTMAX, row, 0, n, x, r->got, r->exact, what, 0);
    }
}

void num_measure_rope(nrun *r, int layer, int row, const float *x, const char *what)
{
    const kvv_hparams *hp = r->hp;
    kvv_oracle_rope(r->orc, x, hp->head_dim, hp->n_rot, hp->rope_type == KVV_ROPE_NEOX, row,
                    kvv_hparams_rope_base(hp, layer), 1.0f, hp->rope_freqs, r->exact);
    for (int e = 0; e < r->n_ops; e++) {
        r->ops[e]->vt->rope(r->ops[e], layer, row, x, r->got);
        record(r, e, layer, KVV_OP_ROPE, row, 0, hp->head_dim, x, r->got, r->exact, what, 0);
    }
}
