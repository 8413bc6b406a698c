/*
 * table_bounds.h — how far two kernel tables of the cpu engine may differ
 * by design, per tensor type: the bound the `tables` check (tables.h)
 * holds every pair of tables to. From the kernels' contract
 * (engine/cpu/cpu_kernels.h K1-K12, cpu_kquant.h, cpu_x16.h; the weights'
 * forms in docs/cpu-engine.md), in the cpu engine's invariant mode.
 *
 * What is bounded: table A continues each layer from table B's residual
 * (verify/capture.h feed), so each figure is one layer's own computation
 * from the same input —
 *   layers: each layer's residual, relative RMS error over the prompt
 *           (kvv_rel_rms, B the reference);
 *   head:   the logits (A's output norm and head on B's final residual),
 *           max|Δlogit| / max|logit_B| at each position, the largest.
 * End to end the tables are not bounded: one 8-bit activation rounding
 * the other way moves a product by a quantum, which every later layer
 * amplifies (a Q2_K model's logits: 0.014 end to end, 2·10⁻⁷ per layer).
 *
 * Two kinds of product, by the weights' type:
 *   ORDER — fp32 activations: F32, F16, BF16, every type the engine
 *     dequantizes to F32 at load (IQ4_NL, IQ4_XS, MXFP4, TQ1_0, TQ2_0,
 *     Q8_K), and the output head of Q8_0, Q4_0 and Q5_0 (its fused GEMV,
 *     K3). The tables differ only in the order of each sum (K1: 8 or 16
 *     lanes, fused or not); element-wise functions, scaling and the
 *     widening of the cache are the same bits in every table (K6-K8, K12).
 *     One dot product of length K in two orders differs by at most
 *     2·γ_K·Σ|w_i·x_i|, γ_K = K·u / (1 − K·u), u = 2⁻²⁴. A layer chains
 *     n reductions (attention norm, Q/K/V, scores, softmax sum, weighted
 *     sum, output projection, FFN norm, gate/up, down: 9; +1 with q/k
 *     norms, +2 with gemma's post-norms), the head 2 (output norm, head),
 *     so the bound is 2·n·γ_K, K the longest reduction (layers: n_embd,
 *     n_ff, n_head·head_dim_v or the prompt's positions; head: n_embd) —
 *     relative to the terms' magnitudes, which bounds the figure where the
 *     terms do not cancel far below their sum (the residual's exact skip
 *     connection carries most of it).
 *   QUANTUM — 8-bit activations: the layers' Q8_0, Q4_0, Q5_0, Q4_1, Q5_1
 *     (X16, K11) and Q2_K..Q6_K (K10), and a Q4_1, Q5_1 or K-quant head.
 *     The integer products give the SAME bits in every table for the same
 *     rounded activations, but an activation whose fp32 value differs in
 *     its last bits between tables (it comes from ORDER reductions) may
 *     round to the neighbouring level and move its product by one quantum:
 *     layers KVV_COMPARE_LAYER_TOL (1e-2 relative RMS), head
 *     KVV_COMPARE_REL_TOL (1e-3): compare's bounds for the same effect
 *     (compare.h; measured up to 3.3·10⁻³ per layer).
 * A layer takes the larger bound of its matrices: one QUANTUM matrix
 * makes the layer's bound QUANTUM. So does an f16 or bf16 KV cache: the
 * rounding at store is the same function in every table, but of K/V that
 * differ in their last bits, so one may round to the neighbouring value
 * (a quantum of 2⁻¹¹ or 2⁻⁸ of it; measured 1.9·10⁻⁵ of a layer's
 * residual with bf16 on synth qwen3, beside 4·10⁻⁷ with f32). A type classed QUANTUM where the engine
 * happens to keep fp32 activations (a fused matrix split off a multiple of
 * 16) only loosens its bound; no type is classed tighter than it runs.
 */
#ifndef KVV_TABLE_BOUNDS_H
#define KVV_TABLE_BOUNDS_H

#include <stdbool.h>
#include <stddef.h>

#include "model/arch.h"
#include "runtime/runtime.h"

typedef enum {
    KVV_BOUND_ORDER,   /* fp32 activations: summation order only */
    KVV_BOUND_QUANTUM  /* 8-bit activations: a rounding may flip */
} kvv_bound_kind;

typedef struct {
    kvv_bound_kind kind;
    kvv_type type;     /* the weight type that sets it (the first of its kind) */
    bool cache;        /* layers: set by the KV cache's dtype (type F16 or BF16) */
    int K;             /* ORDER: the longest reduction; n its chained reductions */
    int n;
    double bound;      /* relative: RMS per layer (layers), max|Δ|/max|ref| (head) */
} kvv_table_bound;

/* The bounds of model m's layers and head for a prompt of n_pos positions
 * and a KV cache of dtype ct. */
void kvv_table_bounds(const kvv_model *m, int n_pos, kvv_cache_type ct, kvv_table_bound *layers,
                      kvv_table_bound *head);

/* "F32: summation order only, 2·9·γ_K with K 768", "Q2_K: 8-bit
 * activations, a rounding may flip" or "BF16 cache: a rounding at store
 * may flip" into buf. @return buf. */
const char *kvv_table_bound_text(const kvv_table_bound *b, char *buf, size_t size);

#endif
