/*
 * engine_ops.h — each engine's individual operations behind one table of
 * function pointers, so `kvverify numerics` (verify/numerics/numerics.h) can
 * feed the SAME fp32 inputs to every engine's op and to the MPFR oracle
 * (reference/oracle.h) and measure the error in ULPs. The names and
 * kvv_ops_close: engine/engine_ops.c; the op sets: engine/ref/ops_ref.c,
 * engine/cpu/ops_cpu.c, engine/ops_oracle.c; which engine has one: the
 * registry (kvv_ops_open).
 *
 * An op set is bound to an engine it opens itself: each slot calls that
 * engine's own kernel — ref_dot / ref_rmsnorm / ref_softmax ... of
 * reference/ref_ops.c for "ref"; the cpu engine's kernel table
 * (engine/cpu/cpu_kernels.h), its matmul path and its cpu_math.c functions
 * for "cpu" — so what is measured is exactly what the engine computes in its
 * forward pass. Where an engine has no separate kernel for an op (the cpu
 * engine's softmax and soft-cap are written inline in its attention loop),
 * the slot is NULL and where[op] says so; nothing is re-implemented here.
 *
 *   kvv_engine_opts eo = kvv_engine_opts_default();
 *   eo.name = "cpu"; eo.mode = KVV_MODE_FAST;
 *   kvv_ops *ops;
 *   if (kvv_ops_open_cpu(model, &eo, &ops, &err)) ...
 *   float d = ops->vt->dot(ops, a, b, 64);
 *   ops->vt->matmul(ops, 3, KVV_T_WQ, n_tok, xn, q);    // y = x Wq^T, batch of n_tok
 *   printf("%s: softmax is %s\n", ops->name, ops->where[KVV_OP_SOFTMAX]);
 *   kvv_ops_close(ops);
 *
 * All vectors are fp32, row-major; outputs never alias inputs unless said.
 */
#ifndef KVV_ENGINE_OPS_H
#define KVV_ENGINE_OPS_H

#include <stdbool.h>

#include "engine/engine.h"

/* The operations measured per layer. */
typedef enum {
    KVV_OP_MATMUL = 0, /* projection dot products through the engine's weight-product path */
    KVV_OP_DOT,        /* one dot product (attention scores q.k) through the dot kernel */
    KVV_OP_RMSNORM,    /* x[i] * w[i] / sqrt(mean(x^2) + eps) */
    KVV_OP_SOFTMAX,    /* exp(x[i]) / sum exp(x[j]) */
    KVV_OP_ROPE,       /* rotation of one head vector at a position */
    KVV_OP_SILU,       /* x / (1 + exp(-x)) */
    KVV_OP_GELU,       /* tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    KVV_OP_SOFTCAP,    /* c tanh(x / c) */
    KVV_OP_COUNT
} kvv_op;

/* The portable scalar math functions an engine carries. */
typedef enum {
    KVV_MATH_EXP = 0,
    KVV_MATH_TANH,
    KVV_MATH_SIN,
    KVV_MATH_COS,
    KVV_MATH_POW,
    KVV_MATH_COUNT
} kvv_math_fn;

/* Weight tensors of a layer (layer index ignored for OUTPUT/OUTPUT_NORM). */
typedef enum {
    KVV_T_WQ = 0, KVV_T_WK, KVV_T_WV, KVV_T_WO,          /* (rows, n_embd) / (n_embd, O) */
    KVV_T_W_GATE, KVV_T_W_UP, KVV_T_W_DOWN,             /* (F, E), (F, E), (E, F) */
    KVV_T_OUTPUT,                                       /* (n_vocab, E) */
    KVV_T_ATTN_NORM, KVV_T_Q_NORM, KVV_T_K_NORM,        /* vectors */
    KVV_T_POST_ATTN_NORM, KVV_T_FFN_NORM, KVV_T_POST_FFW_NORM, KVV_T_OUTPUT_NORM,
    KVV_T_BQ, KVV_T_BK, KVV_T_BV,
    KVV_T_COUNT
} kvv_ops_tensor;

const char *kvv_op_name(kvv_op op);              /* "matmul", "dot", ...; "?" */
const char *kvv_math_fn_name(kvv_math_fn f);     /* "exp", "tanh", "sin", "cos", "pow" */
const char *kvv_ops_tensor_name(kvv_ops_tensor t); /* "attn_q", "ffn_gate", ...; "?" */
/* True for the matrices matmul accepts (WQ .. OUTPUT). */
bool kvv_ops_tensor_is_matrix(kvv_ops_tensor t);

typedef struct kvv_ops kvv_ops;

/* Slots are required unless marked (optional): NULL means the engine has no
 * separate kernel for it, and ops->where[] says where the computation is. */
typedef struct {
    void (*close)(kvv_ops *o);
    /* y[t*rows + r] = sum_k x[t*cols + k] * W[r][k] for t < n over every row r
     * of weight w of `layer` (no bias), exactly as the engine's forward pass
     * computes a projection of an n-token batch: in cpu fast mode the batch
     * size picks sgemm or the kernels, so pass the batch the engine saw. */
    void (*matmul)(kvv_ops *o, int layer, kvv_ops_tensor w, int n, const float *x, float *y);
    /* sum a[i]*b[i], i < n, in the engine's dot-kernel order. */
    float (*dot)(kvv_ops *o, const float *a, const float *b, int n);
    /* y[i] = RMSNorm of x[0..n) with weights w and eps (y may alias x). */
    void (*rmsnorm)(kvv_ops *o, const float *x, const float *w, int n, float eps, float *y);
    /* (optional) y = softmax(x[0..n)) (y may alias x). */
    void (*softmax)(kvv_ops *o, const float *x, int n, float *y);
    /* y = RoPE of one head vector x[head_dim] at position pos with the
     * model's rope type, n_rot, base of `layer` (swa layers: base_swa) and
     * rope_freqs (y may alias x). */
    void (*rope)(kvv_ops *o, int layer, int pos, const float *x, float *y);
    float (*silu)(kvv_ops *o, float x);
    float (*gelu)(kvv_ops *o, float x);
    /* (optional) c * tanh(x / c) as the engine computes its soft-caps. */
    float (*softcap)(kvv_ops *o, float x, float c);
    /* (optional each) the engine's scalar math; pow(x, y), y ignored by the others. */
    float (*math[KVV_MATH_COUNT])(float x, float y);
    /* (optional) the engine's fp32 weights: rows x cols (vectors: 1 x n);
     * NULL when the model has no such tensor or the engine keeps it
     * quantized. Borrowed; valid until close. */
    const float *(*tensor)(kvv_ops *o, int layer, kvv_ops_tensor t, int *rows, int *cols);
} kvv_ops_vtable;

struct kvv_ops {
    const kvv_ops_vtable *vt;
    void *impl;                        /* the op set's own state */
    const kvv_hparams *hp;             /* the model's (borrowed) */
    kvv_engine *engine;                /* the engine the ops are bound to (owned), or NULL */
    char name[32];                     /* "ref", "cpu/fast", "cpu/invariant", ... */
    kvv_engine_desc desc;              /* the engine's description (zero when engine NULL) */
    const char *where[KVV_OP_COUNT];   /* the engine's code for each op, or why none */
    const char *math_where[KVV_MATH_COUNT];
};

/* How an engine's row in the registry opens its op set
 * (engine/engine_registry.c: the reference's and the cpu engine's). */
typedef kvv_status (*kvv_ops_open_fn)(const kvv_model *m, const kvv_engine_opts *eo,
                                      kvv_ops **out, kvv_error *err);

/* Has engine `name` an op set? (A registry column: ref and cpu.) */
bool kvv_ops_available(const char *name);
/* Open the op set of engine eo->name in mode eo->mode (one of its modes),
 * as the functions below do. Errors: KVV_ERR_UNSUPPORTED for an engine
 * without one (the message names those with one), KVV_ERR_USAGE for a mode
 * it lacks, those of the engine's own. Close with kvv_ops_close. */
kvv_status kvv_ops_open(const kvv_model *m, const kvv_engine_opts *eo, kvv_ops **out,
                        kvv_error *err);

/* Open the reference engine on m (borrowed; must outlive the ops) with eo
 * (name and mode are ignored: ref, exact) and bind its ops. The engine is
 * usable (o->engine) for forward passes too. Errors: those of
 * kvv_engine_open, KVV_ERR_NOMEM. Close with kvv_ops_close. */
kvv_status kvv_ops_open_ref(const kvv_model *m, const kvv_engine_opts *eo, kvv_ops **out,
                            kvv_error *err);

/* Open the cpu engine on m with eo (eo->mode FAST or INVARIANT; name
 * ignored) and bind its ops: matmul through its threaded matmul (sgemm in
 * fast mode for batches of >= 4 tokens), dot/rmsnorm through the kernel
 * table it chose at open, RoPE through its tables, SiLU/GELU/exp/tanh from
 * cpu_math.c. softmax, soft-cap, sin, cos and pow have no separate kernel. */
kvv_status kvv_ops_open_cpu(const kvv_model *m, const kvv_engine_opts *eo, kvv_ops **out,
                            kvv_error *err);

/* The exact op set and the negative control: every op returns the
 * correctly rounded result (reference/oracle.h) moved by `nudge` ULPs
 * (nextafterf |nudge| times toward +inf, or -inf when nudge < 0), so a
 * measurement must find exactly |nudge| ULP on every element; nudge 0 is an
 * exact engine (0 ULP). Named "oracle" or "oracle+Nulp". weights: an op set
 * with tensor() (the reference's; borrowed, must outlive this one) whose
 * fp32 weights matmul uses; RoPE uses the model's hparams. No engine, no
 * math slots. Slow (MPFR): meant for tests and --control. */
kvv_status kvv_ops_open_oracle(kvv_ops *weights, int nudge, kvv_ops **out, kvv_error *err);

/* Close the op set and its engine. Accepts NULL. */
void kvv_ops_close(kvv_ops *o);

#endif
