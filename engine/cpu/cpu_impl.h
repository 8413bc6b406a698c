/*
 * cpu_impl.h — private state and internal functions of the cpu engine.
 * Files: cpu_engine.c (open/close/vtable, weights), cpu_matmul.c (threaded
 * products), cpu_attn.c (attention), cpu_math.c (norms, RoPE, activations),
 * cpu_forward.c (the forward pass and kv_from_residual), cpu_pool.c,
 * cpu_kernels_*.c.
 */
#ifndef KVV_CPU_IMPL_H
#define KVV_CPU_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/cpu/cpu_engine.h"
#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/cpu_kquant.h"
#include "engine/cpu/cpu_pool.h"
#include "engine/engine_impl.h"
#include "runtime/kv_seqs.h"

/* Multi-token products at or above this many tokens use sgemm in fast mode. */
#define KVV_CPU_SGEMM_MIN_TOKENS 4
/* Quantized rows: at most this many tokens use the fused GEMV kernel; more
 * dequantize a tile of rows and run the blocked f32 kernel (same bits). */
#define KVV_CPU_FUSED_MAX_TOKENS 3
/* File-block Q4_1/Q5_1/Q4_K products over at least this many tokens repack
 * 16 rows at a time to X16 (cpu_matmul.c; the same bits as gemm_kq). */
#define KVV_CPU_X16_REPACK_MIN_TOKENS 4
/* Floats in one thread's dequantization tile (sgemm uses all of it, the
 * blocked kernel a quarter, to stay in L2). */
#define KVV_CPU_TILE_FLOATS 262144

/* A weight matrix (or a row range of one): rows of `cols` elements. */
typedef struct {
    int type;               /* KVV_TYPE_F32, Q8_0, Q4_0, or a kq type (below) */
    int kq;                 /* kvv_kq of a K-quant / Q4_1 / Q5_1 type held in the
                             * file's blocks (cpu_kquant.h), else -1 */
    int rows;               /* output dimension */
    int cols;               /* input dimension (row length) */
    const uint8_t *data;    /* first row; borrowed from the map or c->owned */
    size_t row_bytes;
    bool x4;                /* Q8_0 in the 4-row interleaved layout (KVV_CPU_X4) */
    bool x16;               /* in the 16-row layout of cpu_x16.h (an X16 copy) */
    bool x16_fly;           /* in the file's rows, with the X16 products through
                             * 16-row groups packed per call (cpu_matmul.c):
                             * invariant mode's layer Q8_0 with a table pack */
} kvv_cpu_weight;

/* KVV_CPU_X4: invariant mode re-lays a Q8_0 matrix with fp32 activations
 * (rows % 4 == 0: heads widened from Q4_0/Q5_0, and with c->repack Q8_0
 * heads) out at open as groups of 4 rows interleaved by block, so the one-token GEMV
 * reads one linear stream with 4 independent accumulator chains (the
 * kernel table's gemv_q8_0_x4; same bits as gemv_q8_0). A group is 4 rows'
 * bytes, so row r0 (a multiple of 4) still starts at r0 * row_bytes. */
const uint8_t *kvv_cpu_x4_block(const kvv_cpu_weight *w, int r, int b);

/* Rows [r0, r0+n) of w as a weight of its own (fused QKV, gate|up). */
kvv_cpu_weight kvv_cpu_weight_rows(const kvv_cpu_weight *w, int r0, int n);

typedef struct {
    const float *attn_norm;      /* [n_embd] */
    const float *post_attn_norm; /* [n_embd] or NULL */
    const float *ffn_norm;       /* [n_embd] */
    const float *post_ffw_norm;  /* [n_embd] or NULL */
    const float *q_norm;         /* [head_dim] or NULL */
    const float *k_norm;         /* [head_dim] or NULL */
    const float *bq, *bk, *bv;   /* qwen2 biases or NULL */
    kvv_cpu_weight wq;           /* [n_head*head_dim][n_embd] */
    kvv_cpu_weight wk;           /* [n_head_kv*head_dim][n_embd] */
    kvv_cpu_weight wv;           /* [n_head_kv*head_dim_v][n_embd] */
    kvv_cpu_weight wo;           /* [n_embd][n_head*head_dim_v] */
    kvv_cpu_weight wg;           /* [n_ff][n_embd] */
    kvv_cpu_weight wu;           /* [n_ff][n_embd] */
    kvv_cpu_weight wd;           /* [n_embd][n_ff] */
} kvv_cpu_layer;

/* Activations rounded for the integer products (cpu_kquant.h), grown with
 * the token capacity: q [n][max input width]; Q8_K: d [n][width/256],
 * bsums [n][width/16]; Q8_1: d and s [n][width/32]. */
typedef struct {
    int8_t *q;
    float *d;
    int16_t *bsums;
    float *s;
} kvv_cpu_actbuf;

/* Per-thread scratch. */
typedef struct {
    float *scores;  /* [n_head/n_head_kv][n_ctx] attention scores / probabilities */
    float *krows;   /* [n_ctx][max(head_dim, head_dim_v)] K or V rows widened from an
                     * f16/bf16 cache */
    float *tile;    /* [KVV_CPU_TILE_FLOATS or 5*max_cols] dequantized weight rows, or
                     * 16 rows packed to X16 (at most 17 bytes per column) */
    float *qs;      /* [n_head/n_head_kv][head_dim] pre-scaled query heads */
} kvv_cpu_scratch;

typedef struct {
    const kvv_model *m;          /* borrowed */
    const kvv_hparams *hp;       /* = &m->hp */
    kvv_mode mode;               /* FAST or INVARIANT */
    unsigned control;            /* KVV_CTL_* */
    kvv_cache_type cache_type;
    const kvv_cpu_kernels *k;    /* chosen once at open */
    kvv_cpu_pool *pool;
    int n_threads;
    int n_ctx;
    kvv_kv_cache *cache;         /* owned: sequence 0's */
    kvv_kv_seqs seqs;            /* every sequence's (cpu_seqs.c); c[0] = cache */
    const int32_t *seq;          /* during a decode pass: the rows' sequences; else NULL */
    kvv_cpu_opts copts;

    kvv_cpu_layer *layers;       /* [n_layer] */
    const float *output_norm;    /* [n_embd] */
    kvv_cpu_weight tok_embd;     /* [n_vocab][n_embd] */
    kvv_cpu_weight output;       /* [n_vocab][n_embd] */
    void **owned;                /* allocations freed at close */
    int n_owned, cap_owned;

    /* RoPE tables per base (0: rope_base, 1: rope_base_swa): [n_ctx][n_rot/2] */
    float *rope_cos[2], *rope_sin[2];

    /* Activations, [cap_tok][width] each (grown on demand). */
    int cap_tok;
    float *x;    /* residual [n][n_embd] */
    float *xn;   /* normed input [n][max(n_embd, n_ff)] */
    float *q;    /* [n][n_head*head_dim] */
    float *kk;   /* [n][n_head_kv*head_dim] */
    float *vv;   /* [n][n_head_kv*head_dim_v] */
    float *o;    /* [n][n_head*head_dim_v] */
    float *g;    /* [n][n_ff] */
    float *u;    /* [n][n_ff] */
    float *y;    /* [n][n_embd] */
    int8_t *qx;  /* [n][max input width] activations rounded to Q8_0 */
    float *dx;   /* [n][max input width / 32] their block scales */
    int32_t *sx; /* [n][max input width / 32] their block sums (X16 Q4_0) */
    bool q8_act; /* fast mode: Q8_0/Q4_0 products take Q8_0 activations */
    unsigned x16_outside; /* 1 << kvv_x16 of a layer matrix left out of X16 (split off 16) */
    bool kq_act; /* K-quant, Q4_1, Q5_1 products round activations to Q8_K /
                  * Q8_1 (both modes; not with --f32-act or --dequant-all) */
    bool repack; /* invariant mode: fast mode's X16 copies and X4 heads instead of
                  * the file's rows (kvv_engine_opts.repack; the same bits) */
    kvv_cpu_actbuf q8k, q81;   /* activations as Q8_K and as Q8_1 */
    float *probs;        /* attention probabilities for the attn hook (grown) */
    size_t cap_probs;
    int32_t *key_pos;    /* [n_ctx] positions reported to the attn hook */
    int32_t *key_idx;    /* [n_ctx] index of a position in key_pos, or -1 */
    kvv_cpu_scratch *ts; /* [n_threads] */
    const kvv_hooks *tap;/* during forward: hooks whose op tap cpu_tap calls; else NULL */
    char kernels[192];
} kvv_cpu;

/* ---- cpu_weights.c ---- */
/* Load every weight of c->m in the form cpu_weights.c describes. */
kvv_status kvv_cpu_load_weights(kvv_cpu *c, kvv_error *err);
/* Bytes kvv_cpu_load_weights will allocate for c's model, mode and options
 * (an upper bound: weights used in place from the map count 0), for the
 * pre-check of runtime/mem_limit.h. */
uint64_t kvv_cpu_weights_plan(const kvv_cpu *c);

/* Rows [r0, r0+nr) of w (any form but F32: X16, X4, the file's blocks, a
 * widened Q8_0) as floats into dst[nr][w->cols]: exactly the values of
 * kvv_dequantize_row on the file's rows. */
void kvv_cpu_dequant_rows(const kvv_cpu *c, const kvv_cpu_weight *w, int r0, int nr,
                          float *dst);

/* ---- cpu_matmul.c ---- */
/* Does the product with w round its activations (Q8_0 in fast mode, Q8_K
 * or Q8_1 for the kq types)? */
bool kvv_cpu_rounds_act(const kvv_cpu *c, const kvv_cpu_weight *w);

typedef struct {
    const kvv_cpu_weight *w;
    float *y;       /* y[t*ldy + r] for r < w->rows */
    size_t ldy;
} kvv_cpu_mm_out;

/* For each of n_out outputs (sharing the input x [n][ldx], w->cols used):
 * y = x * W^T, threads splitting the rows. allow_fast: sgemm may be used in
 * fast mode. */
void kvv_cpu_matmul(kvv_cpu *c, int n, const float *x, size_t ldx, int n_out,
                    const kvv_cpu_mm_out *outs, bool allow_fast);
/* The negative control KVV_CTL_KV_REVERSED_SUM: plain dot products summed
 * from the last element to the first, single-threaded. */
/* The batch sizes where kvv_cpu_matmul's route for c's weights changes
 * (the engine's batch_paths; engine.h kvv_batch_paths), read off the same
 * conditions mm_rows tests. */
void kvv_cpu_batch_paths(const kvv_cpu *c, kvv_batch_paths *p);

void kvv_cpu_matmul_reversed(kvv_cpu *c, int n, const float *x, size_t ldx,
                             const kvv_cpu_weight *w, float *y, size_t ldy);

/* ---- cpu_attn.c ---- */
/* Attention of n queries q [n][n_head*head_dim] at positions pos against
 * the cache of layer `layer`; o [n][n_head*head_dim_v]. If hooks->attn is
 * set, probabilities are reported. */
void kvv_cpu_attention(kvv_cpu *c, int layer, int n, const int32_t *pos, const float *q,
                       float *o, const kvv_hooks *hooks);
/* The same against cache kc (a sequence's, cpu_seqs.c). */
void kvv_cpu_attention_in(kvv_cpu *c, const kvv_kv_cache *kc, int layer, int n,
                          const int32_t *pos, const float *q, float *o, const kvv_hooks *hooks);

/* ---- cpu_math.c ---- */
float kvv_cpu_expf(float x);
float kvv_cpu_tanhf(float x);
float kvv_cpu_silu(float x);
float kvv_cpu_gelu_tanh(float x);
/* y[i] = x[i] * (1/sqrt(mean(x^2) + eps)) * w[i], for n rows of len elements
 * (ld apart); mean from the kernel dot (fixed order). In-place allowed. */
void kvv_cpu_rmsnorm(const kvv_cpu *c, int n, int len, const float *x, size_t ldx,
                     const float *w, float eps, float *y, size_t ldy);
/* RoPE of n_heads heads of head_dim elements (row of a token) at position pos. */
void kvv_cpu_rope(const kvv_cpu *c, int layer, int n_heads, int head_dim, int pos, float *row);
/* Build the RoPE tables. @return false on OOM. */
bool kvv_cpu_rope_init(kvv_cpu *c);

/* ---- cpu_forward.c ---- */
kvv_status kvv_cpu_forward(kvv_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                           const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                           kvv_error *err);
kvv_status kvv_cpu_kv_from_residual(kvv_engine *e, int layer, int n, const float *h,
                                    const int32_t *pos, float *k, float *v, kvv_error *err);
/* Grow the activation buffers to n tokens. @return false on OOM. */
bool kvv_cpu_reserve(kvv_cpu *c, int n);
/* The pass of forward (c->seq NULL) and decode (c->seq set, caches
 * allocated): logits as lm says, or, with want, one row per flagged token
 * in call order. Arguments checked by the caller. */
kvv_status kvv_cpu_run(kvv_cpu *c, int n, const int32_t *tokens, const int32_t *pos,
                       const kvv_hooks *hooks, kvv_logits_mode lm, const uint8_t *want,
                       float *logits, kvv_error *err);

/* ---- cpu_seqs.c ---- */
/* The cache row t of the pass stores into: its sequence's, or c->cache. */
kvv_kv_cache *kvv_cpu_row_cache(const kvv_cpu *c, int t);
/* Attention of the pass's n rows (c->q into c->o), each run of consecutive
 * rows of one sequence against that sequence's cache. */
void kvv_cpu_attention_runs(kvv_cpu *c, int layer, int n, const int32_t *pos,
                            const kvv_hooks *hooks);
/* The vtable's sequence slots. */
kvv_status kvv_cpu_decode(kvv_engine *e, const kvv_batch *b, float *logits, kvv_error *err);
kvv_status kvv_cpu_seq_rm(kvv_engine *e, int seq, int p0, int p1, kvv_error *err);
kvv_status kvv_cpu_seq_cp(kvv_engine *e, int src, int dst, int p0, int p1, kvv_error *err);
kvv_status kvv_cpu_seq_kv(kvv_engine *e, int seq, int layer, int pos0, int n, float *k, float *v,
                          uint8_t *present, kvv_error *err);

#endif
