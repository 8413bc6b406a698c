/*
 * ref_internal.h — private to reference/: the reference engine's state and
 * the scalar kernels its forward pass is built from. Not a public header;
 * engine/ref/ops_ref.c (per-op comparisons) also calls the kernels, so keep
 * their signatures stable.
 *
 * State is split by lifetime, like llama2.c's run.c:
 *   ref_weights  dequantized fp32 weights (built at open, read-only after)
 *   kvv_kv_cache the KV cache (lives as long as the engine)
 *   per-call scratch buffers are allocated by each forward call (ref_forward.c)
 *
 * Matrix convention: a projection W with GGUF ne = {cols, rows} is stored
 * row-major as float[rows][cols]; out[r] = dot(W[r], x) over cols.
 */
#ifndef KVV_REF_INTERNAL_H
#define KVV_REF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "reference/ref.h"

/* Weights of one layer, all fp32; NULL where the architecture has none.
 * E = n_embd, Q = n_head*head_dim, K = n_head_kv*head_dim,
 * V = n_head_kv*head_dim_v, O = n_head*head_dim_v, F = n_ff. */
typedef struct {
    const float *attn_norm;      /* (E) */
    const float *wq;             /* (Q, E); phi3: rows [0, Q) of attn_qkv */
    const float *wk;             /* (K, E); phi3: rows [Q, Q+K) */
    const float *wv;             /* (V, E); phi3: rows [Q+K, Q+K+V) */
    const float *bq, *bk, *bv;   /* (Q), (K), (V): qwen2 */
    const float *q_norm;         /* (head_dim): qwen3, gemma3 */
    const float *k_norm;         /* (head_dim) */
    const float *wo;             /* (E, O) */
    const float *post_attn_norm; /* (E): gemma */
    const float *ffn_norm;       /* (E) */
    const float *w_gate;         /* (F, E); phi3: rows [0, F) of ffn_up */
    const float *w_up;           /* (F, E); phi3: rows [F, 2F) of ffn_up */
    const float *w_down;         /* (E, F) */
    const float *post_ffw_norm;  /* (E): gemma */
} ref_layer;

typedef struct {
    const float *tok_embd;     /* (n_vocab, E) */
    const float *output_norm;  /* (E) */
    const float *output;       /* (n_vocab, E); = tok_embd when tied */
    ref_layer *layers;         /* (n_layer) */
    float **owned;             /* every malloc'ed buffer above, freed at close */
    int n_owned;
} ref_weights;

struct kvv_ref {
    const kvv_model *model;    /* borrowed */
    kvv_hparams hp;            /* copy of model->hp */
    kvv_ref_opts opts;
    ref_weights w;
    kvv_kv_cache *cache;
    float theta_scale[2];      /* RoPE: powf(base, -2/n_rot) for [0] global, [1] local layers */
    float *rope_cs;            /* (n_rot) scratch: cos/sin of one position's angles */
};

/* ------------------------------------------------------------ kernels (ref_ops.c) */

/* Dot product of length n in the reference order (see ref_ops.c): 8
 * interleaved fp32 partial sums, lane j takes elements i with i % 8 == j of
 * the first 8*floor(n/8); combined ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)); then
 * the tail elements added in ascending order. */
float ref_dot(const float *a, const float *b, int n);
/* Negative control: the same products summed one by one from the last
 * element to the first. */
float ref_dot_reversed(const float *a, const float *b, int n);

/* out[t][r] = dot(W[r], x[t]) (+ bias[r] if bias) for t < n, r < rows;
 * W (rows, cols), x (n, cols), out (n, rows). reversed: ref_dot_reversed. */
void ref_matmul(float *out, const float *x, const float *W, const float *bias, int n, int rows,
                int cols, bool reversed);

/* RMSNorm of each of n rows of length d: y = (x * s) * w with
 * s = 1 / sqrtf(mean + eps), mean = (float)(sum_i (double)(x_i*x_i) / d),
 * the sum in double, ascending i. y may alias x. */
void ref_rmsnorm(float *y, const float *x, const float *w, int n, int d, float eps);

/* RoPE on one head vector x (head_dim) at position pos: rotates the first
 * n_rot dims (NORM: pairs (2i, 2i+1); NEOX: pairs (i, i + n_rot/2)), angle
 * theta_i = (pos * theta_scale^i) / ff_i, theta built by repeated fp32
 * multiplication as ggml does, ff = rope_freqs or 1. cs: (n_rot) scratch,
 * filled by ref_rope_angles. */
void ref_rope_angles(float *cs, int pos, int n_rot, float theta_scale, const float *freq_factors);
void ref_rope_apply(float *x, const float *cs, int n_rot, kvv_rope_type type);

/* Softmax of s[0..n) in place: m = max; e_j = expf(s_j - m); sum in double,
 * ascending j; p_j = e_j * (float)(1 / sum). */
void ref_softmax(float *s, int n);

/* SiLU x / (1 + expf(-x)) and GELU-tanh 0.5 x (1 + tanh(sqrt(2/pi) x (1 +
 * 0.044715 x^2))), both on fp32 with kmath. */
float ref_silu(float x);
float ref_gelu_tanh(float x);

/* Soft-cap: cap * tanhf(x * (1 / cap)) (ggml's scale, tanh, scale). */
float ref_softcap(float x, float cap);

/* ------------------------------------------------------------ ggml emulation (ref_ggml.c) */

/* Scratch of ref_matmul_ggml for n rows of at most max_cols. */
typedef struct {
    float *xh;    /* (n, max_cols) fp16-rounded activations */
    int8_t *qx;   /* (n, max_cols) Q8_0 quants of the activations */
    float *dx;    /* (n * max_cols / 32) their block scales */
} ref_ggml_scratch;

bool ref_ggml_scratch_alloc(ref_ggml_scratch *g, int n, int max_cols); /* false on OOM */
void ref_ggml_scratch_free(ref_ggml_scratch *g);                       /* accepts zeroed */

/* GELU through ggml's fp16 table (KVV_GGML_GELU_FP16). */
float ref_gelu_ggml(float x);

/* ref_matmul with ggml's activation handling for the weight's source type
 * (KVV_GGML_ACT_QUANT): F16 -> activations rounded to fp16; Q8_0 ->
 * activations quantized to Q8_0 and block-integer dot products with the raw
 * weight rows [row0, row0 + rows) of raw; other types: plain ref_matmul. */
void ref_matmul_ggml(float *out, const float *x, const float *W, const kvv_gguf_tensor *raw,
                     int64_t row0, const float *bias, int n, int rows, int cols, bool reversed,
                     ref_ggml_scratch *g);

/* ------------------------------------------------------------ shared projection (ref_forward.c) */

/* attn_norm(h), then Q (if q != NULL), K, V projections (+ qwen2 biases),
 * per-head q/k norms, RoPE at pos[t], and K/V rounding to the cache dtype:
 * the one code path both forward and kv_from_residual use.
 * h (n, E); xn scratch (n, E); q (n, Q); k (n, K); v (n, V); g: ggml
 * emulation scratch for n rows of E columns, or NULL when it is off. */
void ref_attn_inputs(kvv_ref *r, int layer, int n, const float *h, const int32_t *pos,
                     float *xn, float *q, float *k, float *v, bool reversed,
                     ref_ggml_scratch *g);

/* One projection through W (rows, cols) = rows [row0, row0 + rows) of the
 * source tensor raw: ref_matmul, or ref_matmul_ggml when KVV_GGML_ACT_QUANT
 * is on (g then required). */
void ref_proj(const kvv_ref *r, float *out, const float *x, const float *W,
              const kvv_gguf_tensor *raw, int64_t row0, const float *bias, int n, int rows,
              int cols, bool reversed, ref_ggml_scratch *g);

/* The cache size kvv_ref_open uses for a requested n_ctx (0 = the model's
 * training context, at most 4096). ref_plan.c. */
int kvv_ref_resolve_ctx(const kvv_model *m, int n_ctx);

#endif
