/*
 * ops_cpu.c — the cpu engine's ops (engine/engine_ops.h), bound to a cpu
 * engine this file opens: every slot calls the function the cpu forward pass
 * calls (engine/cpu/cpu_impl.h) on that engine's state — its kernel table,
 * thread pool, weights (kept quantized where the engine keeps them) and RoPE
 * tables — so fast and invariant mode are measured as they run.
 *
 * No separate kernel, so NULL slots (where[] says where the code is):
 *   softmax   inline in attn_one (engine/cpu/cpu_attn.c)
 *   soft-cap  inline in attn_one and kvv_cpu_forward (cap * kvv_cpu_tanhf(x / cap))
 *   sin, cos, pow: the RoPE tables are built once in double with libm
 *             (kvv_cpu_rope_init); the rope op measures their effect.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_impl.h"
#include "engine/engine_ops.h"

static kvv_cpu *cpu_of(kvv_ops *o)
{
    return (kvv_cpu *)o->impl;
}

static void cpu_ops_close(kvv_ops *o)
{
    kvv_engine_close(o->engine);
    free(o);
}

/* The engine's weight for a matrix slot, or NULL. */
static const kvv_cpu_weight *cpu_weight(kvv_cpu *c, int layer, kvv_ops_tensor t)
{
    if (t == KVV_T_OUTPUT)
        return &c->output;
    if (layer < 0 || layer >= c->hp->n_layer)
        return NULL;
    const kvv_cpu_layer *L = &c->layers[layer];
    switch (t) {
    case KVV_T_WQ: return &L->wq;
    case KVV_T_WK: return &L->wk;
    case KVV_T_WV: return &L->wv;
    case KVV_T_WO: return &L->wo;
    case KVV_T_W_GATE: return &L->wg;
    case KVV_T_W_UP: return &L->wu;
    case KVV_T_W_DOWN: return &L->wd;
    default: return NULL;
    }
}

static void cpu_ops_matmul(kvv_ops *o, int layer, kvv_ops_tensor t, int n, const float *x,
                           float *y)
{
    kvv_cpu *c = cpu_of(o);
    const kvv_cpu_weight *w = cpu_weight(c, layer, t);
    if (!w || !w->data)
        return;
    kvv_cpu_mm_out out = {.w = w, .y = y, .ldy = (size_t)w->rows};
    kvv_cpu_matmul(c, n, x, (size_t)w->cols, 1, &out, true);
}

static float cpu_ops_dot(kvv_ops *o, const float *a, const float *b, int n)
{
    return cpu_of(o)->k->dot(n, a, b);
}

static void cpu_ops_rmsnorm(kvv_ops *o, const float *x, const float *w, int n, float eps, float *y)
{
    kvv_cpu_rmsnorm(cpu_of(o), 1, n, x, (size_t)n, w, eps, y, (size_t)n);
}

/* Positions beyond the engine's tables (n_ctx) are not computed: y = NaN. */
static void cpu_ops_rope(kvv_ops *o, int layer, int pos, const float *x, float *y)
{
    kvv_cpu *c = cpu_of(o);
    const int hd = c->hp->head_dim;
    if (y != x)
        memmove(y, x, (size_t)hd * sizeof *y);
    if (pos < 0 || pos >= c->n_ctx || layer < 0 || layer >= c->hp->n_layer) {
        for (int i = 0; i < hd; i++)
            y[i] = NAN;
        return;
    }
    kvv_cpu_rope(c, layer, 1, hd, pos, y);
}

static float cpu_ops_silu(kvv_ops *o, float x)
{
    (void)o;
    return kvv_cpu_silu(x);
}

static float cpu_ops_gelu(kvv_ops *o, float x)
{
    (void)o;
    return kvv_cpu_gelu_tanh(x);
}

static float m_exp(float x, float y)
{
    (void)y;
    return kvv_cpu_expf(x);
}

static float m_tanh(float x, float y)
{
    (void)y;
    return kvv_cpu_tanhf(x);
}

static const kvv_ops_vtable cpu_ops_vtable = {
    .close = cpu_ops_close,
    .matmul = cpu_ops_matmul,
    .dot = cpu_ops_dot,
    .rmsnorm = cpu_ops_rmsnorm,
    .softmax = NULL,
    .rope = cpu_ops_rope,
    .silu = cpu_ops_silu,
    .gelu = cpu_ops_gelu,
    .softcap = NULL,
    .math = {m_exp, m_tanh, NULL, NULL, NULL},
    .tensor = NULL,
};

kvv_status kvv_ops_open_cpu(const kvv_model *m, const kvv_engine_opts *eo, kvv_ops **out,
                            kvv_error *err)
{
    *out = NULL;
    kvv_engine_opts o = *eo;
    o.name = "cpu";
    if (o.mode != KVV_MODE_FAST && o.mode != KVV_MODE_INVARIANT)
        o.mode = KVV_MODE_INVARIANT;
    kvv_engine *e;
    kvv_status s = kvv_engine_open(m, &o, &e, err);
    if (s)
        return s;
    kvv_ops *ops = calloc(1, sizeof *ops);
    if (!ops) {
        kvv_engine_close(e);
        return kvv_error_set(err, KVV_ERR_NOMEM, "ops cpu: out of memory");
    }
    kvv_cpu *c = e->impl;
    ops->vt = &cpu_ops_vtable;
    ops->impl = c;
    ops->hp = &m->hp;
    ops->engine = e;
    snprintf(ops->name, sizeof ops->name, "cpu/%s", kvv_mode_name(c->mode));
    kvv_engine_describe(e, &ops->desc);
    ops->where[KVV_OP_MATMUL] =
        c->mode == KVV_MODE_FAST
            ? "kvv_cpu_matmul: cblas_sgemm for >= 4 tokens, else kernel gemm (cpu_matmul.c)"
            : "kvv_cpu_matmul: kernel gemm_f32 / gemv_q8_0, fixed order (cpu_matmul.c)";
    ops->where[KVV_OP_DOT] = "kernel dot (cpu_kernels_*.c)";
    ops->where[KVV_OP_RMSNORM] = "kvv_cpu_rmsnorm (cpu_math.c)";
    ops->where[KVV_OP_SOFTMAX] = "no separate kernel: inline in attn_one (cpu_attn.c)";
    ops->where[KVV_OP_ROPE] = "kvv_cpu_rope, tables from libm double (cpu_math.c)";
    ops->where[KVV_OP_SILU] = "kvv_cpu_silu (cpu_math.c)";
    ops->where[KVV_OP_GELU] = "kvv_cpu_gelu_tanh (cpu_math.c)";
    ops->where[KVV_OP_SOFTCAP] =
        "no separate kernel: inline cap * kvv_cpu_tanhf(x / cap) (cpu_attn.c, cpu_forward.c)";
    ops->math_where[KVV_MATH_EXP] = "kvv_cpu_expf (cpu_math.c)";
    ops->math_where[KVV_MATH_TANH] = "kvv_cpu_tanhf (cpu_math.c)";
    ops->math_where[KVV_MATH_SIN] = "no separate function: RoPE tables use libm sin in double";
    ops->math_where[KVV_MATH_COS] = "no separate function: RoPE tables use libm cos in double";
    ops->math_where[KVV_MATH_POW] = "no separate function: RoPE tables use libm pow in double";
    *out = ops;
    return KVV_OK;
}
