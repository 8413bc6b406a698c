/*
 * ops_ref.c — the reference engine's ops (engine/engine_ops.h): every slot
 * calls the kernel of reference/ref_ops.c that the reference forward pass
 * calls, on the engine's own weights (matrices as the file stores them;
 * tensor() makes an fp32 copy of a matrix when first asked).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "engine/engine_ops.h"
#include "reference/kmath.h"
#include "reference/ref_internal.h"

/* ------------------------------------------------------------ state */

typedef struct {
    kvv_ref *r;       /* borrowed from the engine */
    float *cs;        /* (n_rot) cos/sin scratch of ref_rope_angles */
    float **mats;     /* ((n_layer + 1) * KVV_T_COUNT) fp32 matrices tensor() made, or NULL */
} ops_ref;

static ops_ref *st(kvv_ops *o)
{
    return (ops_ref *)o->impl;
}

static void ref_ops_close(kvv_ops *o)
{
    for (int i = 0; i < (o->hp->n_layer + 1) * KVV_T_COUNT; i++)
        free(st(o)->mats[i]);
    free(st(o)->mats);
    free(st(o)->cs);
    free(o->impl);
    kvv_engine_close(o->engine);
    free(o);
}

/* ------------------------------------------------------------ tensors */

/* The engine's matrix t of `layer` as stored, or NULL. */
static const ref_mat *ref_matrix(const kvv_ref *r, int layer, kvv_ops_tensor t)
{
    if (t == KVV_T_OUTPUT)
        return &r->w.output;
    if (layer < 0 || layer >= r->hp.n_layer)
        return NULL;
    const ref_layer *L = &r->w.layers[layer];
    switch (t) {
    case KVV_T_WQ: return &L->wq;
    case KVV_T_WK: return &L->wk;
    case KVV_T_WV: return &L->wv;
    case KVV_T_WO: return &L->wo;
    case KVV_T_W_GATE: return &L->w_gate;
    case KVV_T_W_UP: return &L->w_up;
    case KVV_T_W_DOWN: return &L->w_down;
    default: return NULL;
    }
}

/* Matrix t as fp32 (rows, cols), dequantized row by row on first use and
 * kept until close. */
static const float *ref_tensor_f32(kvv_ops *o, int layer, kvv_ops_tensor t, int *rows, int *cols)
{
    const ref_mat *W = ref_matrix(st(o)->r, layer, t);
    if (!W || !W->data)
        return NULL;
    float **slot = &st(o)->mats[(t == KVV_T_OUTPUT ? o->hp->n_layer : layer) * KVV_T_COUNT + t];
    if (!*slot) {
        float *d = malloc((size_t)W->rows * (size_t)W->cols * sizeof(float) + 1);
        if (!d)
            return NULL;
        for (int r = 0; r < W->rows; r++) {
            float *dr = d + (size_t)r * (size_t)W->cols;
            const float *w = ref_mat_row(W, r, dr);
            if (w != dr)
                memcpy(dr, w, (size_t)W->cols * sizeof(float));
        }
        *slot = d;
    }
    if (rows)
        *rows = W->rows;
    if (cols)
        *cols = W->cols;
    return *slot;
}

static const float *ref_tensor(kvv_ops *o, int layer, kvv_ops_tensor t, int *rows, int *cols)
{
    if (kvv_ops_tensor_is_matrix(t))
        return ref_tensor_f32(o, layer, t, rows, cols);
    const kvv_ref *r = st(o)->r;
    const kvv_hparams *hp = &r->hp;
    const int E = hp->n_embd, hd = hp->head_dim;
    const int Q = hp->n_head * hd, K = hp->n_head_kv * hd, V = hp->n_head_kv * hp->head_dim_v;
    const ref_layer *L = NULL;
    if (t != KVV_T_OUTPUT && t != KVV_T_OUTPUT_NORM) {
        if (layer < 0 || layer >= hp->n_layer)
            return NULL;
        L = &r->w.layers[layer];
    }
    const float *p = NULL;
    int nc = E;
    switch (t) {
    case KVV_T_ATTN_NORM: p = L->attn_norm; break;
    case KVV_T_Q_NORM: p = L->q_norm; nc = hd; break;
    case KVV_T_K_NORM: p = L->k_norm; nc = hd; break;
    case KVV_T_POST_ATTN_NORM: p = L->post_attn_norm; break;
    case KVV_T_FFN_NORM: p = L->ffn_norm; break;
    case KVV_T_POST_FFW_NORM: p = L->post_ffw_norm; break;
    case KVV_T_OUTPUT_NORM: p = r->w.output_norm; break;
    case KVV_T_BQ: p = L->bq; nc = Q; break;
    case KVV_T_BK: p = L->bk; nc = K; break;
    case KVV_T_BV: p = L->bv; nc = V; break;
    default: return NULL;
    }
    if (p) {
        if (rows)
            *rows = 1;
        if (cols)
            *cols = nc;
    }
    return p;
}

/* ------------------------------------------------------------ ops */

static void ref_ops_matmul(kvv_ops *o, int layer, kvv_ops_tensor w, int n, const float *x,
                           float *y)
{
    const ref_mat *W = kvv_ops_tensor_is_matrix(w) ? ref_matrix(st(o)->r, layer, w) : NULL;
    if (!W || !W->data)
        return;
    ref_matmul_mat(y, x, W, NULL, n, false, st(o)->r->wrow);
}

static float ref_ops_dot(kvv_ops *o, const float *a, const float *b, int n)
{
    (void)o;
    return ref_dot(a, b, n);
}

static void ref_ops_rmsnorm(kvv_ops *o, const float *x, const float *w, int n, float eps, float *y)
{
    (void)o;
    ref_rmsnorm(y, x, w, 1, n, eps);
}

static void ref_ops_softmax(kvv_ops *o, const float *x, int n, float *y)
{
    (void)o;
    if (y != x)
        memmove(y, x, (size_t)n * sizeof *y);
    ref_softmax(y, n);
}

/* The angles of ref_attn_inputs: theta_scale of the layer's base, angles
 * built by ref_rope_angles, then ref_rope_apply on the head. */
static void ref_ops_rope(kvv_ops *o, int layer, int pos, const float *x, float *y)
{
    const kvv_ref *r = st(o)->r;
    const kvv_hparams *hp = &r->hp;
    if (y != x)
        memmove(y, x, (size_t)hp->head_dim * sizeof *y);
    const float ts = r->theta_scale[hp->swa_layer[layer] ? 1 : 0];
    ref_rope_angles(st(o)->cs, pos, hp->n_rot, ts, hp->rope_freqs);
    ref_rope_apply(y, st(o)->cs, hp->n_rot, hp->rope_type);
}

static float ref_ops_silu(kvv_ops *o, float x)
{
    (void)o;
    return ref_silu(x);
}

static float ref_ops_gelu(kvv_ops *o, float x)
{
    (void)o;
    return ref_gelu_tanh(x);
}

static float ref_ops_softcap(kvv_ops *o, float x, float c)
{
    (void)o;
    return ref_softcap(x, c);
}

static float m_exp(float x, float y)
{
    (void)y;
    return kvv_expf(x);
}

static float m_tanh(float x, float y)
{
    (void)y;
    return kvv_tanhf(x);
}

static float m_sin(float x, float y)
{
    (void)y;
    return kvv_sinf(x);
}

static float m_cos(float x, float y)
{
    (void)y;
    return kvv_cosf(x);
}

static const kvv_ops_vtable ref_ops_vtable = {
    .close = ref_ops_close,
    .matmul = ref_ops_matmul,
    .dot = ref_ops_dot,
    .rmsnorm = ref_ops_rmsnorm,
    .softmax = ref_ops_softmax,
    .rope = ref_ops_rope,
    .silu = ref_ops_silu,
    .gelu = ref_ops_gelu,
    .softcap = ref_ops_softcap,
    .math = {m_exp, m_tanh, m_sin, m_cos, kvv_powf},
    .tensor = ref_tensor,
};

/* ------------------------------------------------------------ open */

kvv_status kvv_ops_open_ref(const kvv_model *m, const kvv_engine_opts *eo, kvv_ops **out,
                            kvv_error *err)
{
    *out = NULL;
    kvv_engine_opts o = *eo;
    o.name = "ref";
    o.mode = KVV_MODE_EXACT;
    kvv_engine *e;
    kvv_status s = kvv_engine_open(m, &o, &e, err);
    if (s)
        return s;
    kvv_ops *ops = calloc(1, sizeof *ops);
    ops_ref *impl = calloc(1, sizeof *impl);
    float *cs = malloc((size_t)(m->hp.n_rot > 0 ? m->hp.n_rot : 1) * sizeof *cs);
    float **mats = calloc((size_t)(m->hp.n_layer + 1) * KVV_T_COUNT, sizeof *mats);
    if (!ops || !impl || !cs || !mats) {
        free(ops);
        free(impl);
        free(cs);
        free(mats);
        kvv_engine_close(e);
        return kvv_error_set(err, KVV_ERR_NOMEM, "ops ref: out of memory");
    }
    impl->r = (kvv_ref *)e->impl;
    impl->cs = cs;
    impl->mats = mats;
    ops->vt = &ref_ops_vtable;
    ops->impl = impl;
    ops->hp = &m->hp;
    ops->engine = e;
    snprintf(ops->name, sizeof ops->name, "ref");
    kvv_engine_describe(e, &ops->desc);
    ops->where[KVV_OP_MATMUL] = "ref_matmul_mat -> ref_dot (reference/ref_ops.c)";
    ops->where[KVV_OP_DOT] = "ref_dot (reference/ref_ops.c)";
    ops->where[KVV_OP_RMSNORM] = "ref_rmsnorm (reference/ref_ops.c)";
    ops->where[KVV_OP_SOFTMAX] = "ref_softmax (reference/ref_ops.c)";
    ops->where[KVV_OP_ROPE] = "ref_rope_angles + ref_rope_apply (reference/ref_ops.c)";
    ops->where[KVV_OP_SILU] = "ref_silu (reference/ref_ops.c)";
    ops->where[KVV_OP_GELU] = "ref_gelu_tanh (reference/ref_ops.c)";
    ops->where[KVV_OP_SOFTCAP] = "ref_softcap (reference/ref_ops.c)";
    ops->math_where[KVV_MATH_EXP] = "kvv_expf (reference/kmath.c)";
    ops->math_where[KVV_MATH_TANH] = "kvv_tanhf (reference/kmath.c)";
    ops->math_where[KVV_MATH_SIN] = "kvv_sinf (reference/kmath.c)";
    ops->math_where[KVV_MATH_COS] = "kvv_cosf (reference/kmath.c)";
    ops->math_where[KVV_MATH_POW] = "kvv_powf (reference/kmath.c)";
    *out = ops;
    return KVV_OK;
}
