/*
 * ops_oracle.c — the exact op set and the negative control
 * (kvv_ops_open_oracle, engine/engine_ops.h): every op is the MPFR oracle's
 * correctly rounded result (reference/oracle.h), moved by a planted number
 * of ULPs, on the weights of another op set.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/engine_ops.h"
#include "reference/oracle.h"

typedef struct {
    kvv_ops *weights;     /* borrowed: tensor() source */
    kvv_oracle *orc;
    int nudge;
} ops_oracle;

static ops_oracle *ost(kvv_ops *o)
{
    return (ops_oracle *)o->impl;
}

static float nudged(const kvv_ops *o, float x)
{
    const int k = ((const ops_oracle *)o->impl)->nudge;
    for (int i = 0; i < (k < 0 ? -k : k); i++)
        x = nextafterf(x, k < 0 ? -INFINITY : INFINITY);
    return x;
}

static void nudge_all(kvv_ops *o, float *y, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = nudged(o, y[i]);
}

static void oracle_close(kvv_ops *o)
{
    kvv_oracle_free(ost(o)->orc);
    free(o->impl);
    free(o);
}

static void oracle_matmul(kvv_ops *o, int layer, kvv_ops_tensor w, int n, const float *x,
                          float *y)
{
    kvv_ops *wo = ost(o)->weights;
    int rows = 0, cols = 0;
    const float *W = kvv_ops_tensor_is_matrix(w) ? wo->vt->tensor(wo, layer, w, &rows, &cols)
                                                 : NULL;
    if (!W)
        return;
    for (int t = 0; t < n; t++)
        for (int r = 0; r < rows; r++)
            y[(size_t)t * rows + r] = nudged(o, kvv_oracle_dot(ost(o)->orc, x + (size_t)t * cols,
                                                               W + (size_t)r * cols, cols));
}

static float oracle_dot(kvv_ops *o, const float *a, const float *b, int n)
{
    return nudged(o, kvv_oracle_dot(ost(o)->orc, a, b, n));
}

static void oracle_rmsnorm(kvv_ops *o, const float *x, const float *w, int n, float eps, float *y)
{
    kvv_oracle_rmsnorm(ost(o)->orc, x, w, n, eps, y);
    nudge_all(o, y, n);
}

static void oracle_softmax(kvv_ops *o, const float *x, int n, float *y)
{
    kvv_oracle_softmax(ost(o)->orc, x, n, y);
    nudge_all(o, y, n);
}

static void oracle_rope(kvv_ops *o, int layer, int pos, const float *x, float *y)
{
    const kvv_hparams *hp = o->hp;
    kvv_oracle_rope(ost(o)->orc, x, hp->head_dim, hp->n_rot, hp->rope_type == KVV_ROPE_NEOX, pos,
                    kvv_hparams_rope_base(hp, layer), 1.0f, hp->rope_freqs, y);
    nudge_all(o, y, hp->head_dim);
}

static float oracle_silu(kvv_ops *o, float x)
{
    return nudged(o, kvv_oracle_silu(ost(o)->orc, x));
}

static float oracle_gelu(kvv_ops *o, float x)
{
    return nudged(o, kvv_oracle_gelu_tanh(ost(o)->orc, x));
}

static float oracle_softcap(kvv_ops *o, float x, float c)
{
    return nudged(o, kvv_oracle_softcap(ost(o)->orc, x, c));
}

static const float *oracle_tensor(kvv_ops *o, int layer, kvv_ops_tensor t, int *rows, int *cols)
{
    kvv_ops *wo = ost(o)->weights;
    return wo->vt->tensor(wo, layer, t, rows, cols);
}

static const kvv_ops_vtable oracle_vtable = {
    .close = oracle_close,
    .matmul = oracle_matmul,
    .dot = oracle_dot,
    .rmsnorm = oracle_rmsnorm,
    .softmax = oracle_softmax,
    .rope = oracle_rope,
    .silu = oracle_silu,
    .gelu = oracle_gelu,
    .softcap = oracle_softcap,
    .math = {NULL, NULL, NULL, NULL, NULL},
    .tensor = oracle_tensor,
};

kvv_status kvv_ops_open_oracle(kvv_ops *weights, int nudge, kvv_ops **out, kvv_error *err)
{
    *out = NULL;
    if (!weights || !weights->vt->tensor)
        return kvv_error_set(err, KVV_ERR_USAGE, "ops oracle: needs an op set with weights");
    kvv_ops *ops = calloc(1, sizeof *ops);
    ops_oracle *impl = calloc(1, sizeof *impl);
    kvv_oracle *orc = kvv_oracle_new();
    if (!ops || !impl || !orc) {
        free(ops);
        free(impl);
        kvv_oracle_free(orc);
        return kvv_error_set(err, KVV_ERR_NOMEM, "ops oracle: out of memory");
    }
    impl->weights = weights;
    impl->orc = orc;
    impl->nudge = nudge;
    ops->vt = &oracle_vtable;
    ops->impl = impl;
    ops->hp = weights->hp;
    if (nudge == 0)
        snprintf(ops->name, sizeof ops->name, "oracle");
    else
        snprintf(ops->name, sizeof ops->name, "oracle%+dulp", nudge);
    snprintf(ops->desc.name, sizeof ops->desc.name, "oracle");
    snprintf(ops->desc.mode, sizeof ops->desc.mode, "%s", nudge ? "control" : "exact");
    snprintf(ops->desc.kernels, sizeof ops->desc.kernels,
             "MPFR correctly rounded results, moved by %d ULP", nudge);
    for (int i = 0; i < KVV_OP_COUNT; i++)
        ops->where[i] = nudge ? "oracle result + planted ULPs (control)" : "oracle result";
    *out = ops;
    return KVV_OK;
}
