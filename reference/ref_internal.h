/*
 * ref_internal.h — private to reference/: the reference engine's state and
 * the scalar kernels its forward pass is built from. Not a public header;
 * engine/ref/ops_ref.c (per-op comparisons) also calls the kernels, so keep
 * their signatures stable.
 *
 * State is split by lifetime, like llama2.c's run.c:
 *   ref_weights  the weights: matrices as the file stores them (borrowed
 *                from the model's mapping, never copied), norm and bias
 *                vectors dequantized to fp32 at open; read-only after
 *   kvv_kv_cache the KV cache (lives as long as the engine)
 *   wrow         one weight row dequantized, reused by every projection
 *   per-call scratch buffers are allocated by each forward call (ref_forward.c)
 *
 * Matrix convention: a projection W with GGUF ne = {cols, rows} has rows of
 * cols elements; out[r] = dot(W[r], x) over cols, W[r] being row r
 * dequantized exactly (kvv_dequantize_row), so the values are those a full
 * fp32 copy of W would hold.
 */
#ifndef KVV_REF_INTERNAL_H
#define KVV_REF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/tensor_types.h"
#include "reference/ref.h"

/* A weight matrix as the file stores it: row r < rows is the row_bytes
 * bytes at data + r * row_bytes, cols elements of GGUF type `type`. phi3's
 * fused attn_qkv and gate|up are views of row ranges of one tensor. */
typedef struct {
    const uint8_t *data;  /* row 0: into the model's mapping (borrowed), or a
                           * caller's float[rows][cols] (ref_mat_f32); NULL = none */
    size_t row_bytes;     /* bytes of one row */
    kvv_type type;        /* any type kvv_dequantize_row accepts */
    int rows, cols;
} ref_mat;

/* Weights of one layer; a NULL vector or a matrix with data NULL where the
 * architecture has none. E = n_embd, Q = n_head*head_dim, K =
 * n_head_kv*head_dim, V = n_head_kv*head_dim_v, O = n_head*head_dim_v, F = n_ff. */
typedef struct {
    const float *attn_norm;      /* (E) */
    ref_mat wq;                  /* (Q, E); phi3: rows [0, Q) of attn_qkv */
    ref_mat wk;                  /* (K, E); phi3: rows [Q, Q+K) */
    ref_mat wv;                  /* (V, E); phi3: rows [Q+K, Q+K+V) */
    const float *bq, *bk, *bv;   /* (Q), (K), (V): qwen2 */
    const float *q_norm;         /* (head_dim): qwen3, gemma3 */
    const float *k_norm;         /* (head_dim) */
    ref_mat wo;                  /* (E, O) */
    const float *post_attn_norm; /* (E): gemma */
    const float *ffn_norm;       /* (E) */
    ref_mat w_gate;              /* (F, E); phi3: rows [0, F) of ffn_up */
    ref_mat w_up;                /* (F, E); phi3: rows [F, 2F) of ffn_up */
    ref_mat w_down;              /* (E, F) */
    const float *post_ffw_norm;  /* (E): gemma */
} ref_layer;

typedef struct {
    ref_mat tok_embd;          /* (n_vocab, E) */
    const float *output_norm;  /* (E) */
    ref_mat output;            /* (n_vocab, E); = tok_embd when tied */
    ref_layer *layers;         /* (n_layer) */
    int max_cols;              /* the widest matrix row: kvv_ref.wrow's length */
    float **owned;             /* every dequantized vector above, freed at close */
    int n_owned;
} ref_weights;

struct kvv_ref {
    const kvv_model *model;    /* borrowed */
    kvv_hparams hp;            /* copy of model->hp */
    kvv_ref_opts opts;
    ref_weights w;
    float *wrow;               /* (max cols) scratch: one weight row dequantized */
    kvv_kv_cache *cache;       /* sequence 0's */
    kvv_kv_seqs seqs;          /* every sequence's (kvv_ref_decode); c[0] = cache */
    float theta_scale[2];      /* RoPE: powf(base, -2/n_rot) for [0] global, [1] local layers */
    float *rope_cs;            /* (n_rot) scratch: cos/sin of one position's angles */
    const kvv_hooks *tap;      /* during forward: hooks whose op tap ref_tap calls; else NULL */
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

/* The view of a caller's fp32 matrix W[rows][cols] (borrowed). */
ref_mat ref_mat_f32(const float *W, int rows, int cols);

/* Row r (< W->rows) of W as fp32: the stored row itself when W is F32 and
 * 4-byte aligned, else kvv_dequantize_row into buf (W->cols floats; may be
 * NULL for an aligned F32 W). Exact per element. W must have passed
 * kvv_type_row_size/can_dequantize (ref_engine.c checks at open); a row
 * that still cannot be dequantized reads as NaNs. @return the row
 * (borrowed: W's storage or buf). */
const float *ref_mat_row(const ref_mat *W, int r, float *buf);

/* out[t][r] = dot(W[r], x[t]) (+ bias[r] if bias) for t < n, r < W->rows;
 * x (n, W->cols), out (n, W->rows). reversed: ref_dot_reversed. Each row of
 * W is dequantized once (into wrow, W->cols floats) and dotted with every
 * token. */
void ref_matmul_mat(float *out, const float *x, const ref_mat *W, const float *bias, int n,
                    bool reversed, float *wrow);

/* ref_matmul_mat on the fp32 matrix W (rows, cols). */
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
    int8_t *qx;   /* (n, max_cols) Q8_0 / Q8_K / Q8_1 quants of the activations */
    float *dx;    /* (n * max_cols / 32) their block scales */
    float *sx;    /* (n * max_cols / 32) Q8_1: fp16(d * sum q) */
    int16_t *bsums; /* (n * max_cols / 16) Q8_K: sums of 16 quants */
} ref_ggml_scratch;

bool ref_ggml_scratch_alloc(ref_ggml_scratch *g, int n, int max_cols); /* false on OOM */
void ref_ggml_scratch_free(ref_ggml_scratch *g);                       /* accepts zeroed */

/* GELU through ggml's fp16 table (KVV_GGML_GELU_FP16). */
float ref_gelu_ggml(float x);

/* ref_matmul_mat with ggml's activation handling for W's type, as `flags`
 * (KVV_GGML_*) ask: ACT_QUANT: F16 -> activations rounded to fp16; Q8_0 ->
 * activations quantized to Q8_0 and block-integer dot products with W's
 * stored blocks; KQ_ACT: Q2_K..Q6_K -> Q8_K, Q4_1/Q5_1 -> Q8_1 activations
 * and block-integer products; Q40_ACT: Q4_0/Q5_0 -> Q8_0 activations and
 * block-integer products; other types: plain ref_matmul_mat. */
void ref_matmul_ggml(float *out, const float *x, const ref_mat *W, const float *bias, int n,
                     bool reversed, float *wrow, ref_ggml_scratch *g, unsigned flags);

/* ------------------------------------------------------------ shared projection (ref_forward.c) */

/* attn_norm(h), then Q (if q != NULL), K, V projections (+ qwen2 biases),
 * per-head q/k norms, RoPE at pos[t], and K/V rounding to the cache dtype:
 * the one code path both forward and kv_from_residual use.
 * h (n, E); xn scratch (n, E); q (n, Q); k (n, K); v (n, V); g: ggml
 * emulation scratch for n rows of E columns, or NULL when it is off. */
void ref_attn_inputs(kvv_ref *r, int layer, int n, const float *h, const int32_t *pos,
                     float *xn, float *q, float *k, float *v, bool reversed,
                     ref_ggml_scratch *g);

/* One projection out (n, W->rows) = x (n, W->cols) through W: ref_matmul_mat
 * with the engine's row scratch, or ref_matmul_ggml when KVV_GGML_ACT_QUANT,
 * KVV_GGML_KQ_ACT or KVV_GGML_Q40_ACT is on (g then required). */
void ref_proj(const kvv_ref *r, float *out, const float *x, const ref_mat *W, const float *bias,
              int n, bool reversed, ref_ggml_scratch *g);

/* The cache size kvv_ref_open uses for a requested n_ctx (0 = the model's
 * training context, at most 4096). ref_plan.c. */
int kvv_ref_resolve_ctx(const kvv_model *m, int n_ctx);

#endif
