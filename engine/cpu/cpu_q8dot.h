/*
 * cpu_q8dot.h — fast mode's integer products for Q8_0 and Q4_0 weights
 * (private to engine/cpu; reached through the kernel table).
 *
 * This is llama.cpp's scheme (ggml_vec_dot_q8_0_q8_0): the activation row
 * is rounded to Q8_0 blocks — per 32 elements d = amax/127 (kept as its
 * fp16 value), q = nearest-even(x * (1/d)) — exactly as the reference's
 * --emulate-ggml does (reference/ref_ggml.c). A weight block times an
 * activation block is then an exact int32 sum, scaled by dw*dx. It trades
 * the numerics contract's fp32 activations (relative logit error ~1e-2, as
 * llama.cpp's own) for 32 multiply-adds per few instructions, so only the
 * fast mode uses it (invariant mode's Q8_0 layers round the same way, with
 * the X16 order of cpu_x16.h; its heads keep fp32 activations).
 *
 * Order, for every table: 8 float lanes; lane j takes, for each block b in
 * ascending order, the exact integer sum of elements 4j..4j+3 of the block,
 * converted to float, times (dw_b * dx_b) and added (fused on AVX2, a
 * rounded multiply then add in the generic table); then the fixed 8-lane
 * tree of cpu_kernels.h. It depends only on K, so the products are batch
 * invariant too (prefill and decode agree bit for bit in fast mode here).
 *
 * Activation layout: q [n_tok][K] int8 and d [n_tok][K/32] float, token
 * rows K and K/32 apart. K is a multiple of 32.
 */
#ifndef KVV_CPU_Q8DOT_H
#define KVV_CPU_Q8DOT_H

#include <stddef.h>
#include <stdint.h>

#define KVV_Q8_BLOCK 32

void kvv_cpu_quantize_act_generic(int K, const float *x, int8_t *q, float *d);
void kvv_cpu_gemm_q8_0_q8_generic(int K, const void *W, size_t row_bytes, int n_rows,
                                  const int8_t *QX, const float *DX, int n_tok, float *Y,
                                  size_t ldy);
void kvv_cpu_gemm_q4_0_q8_generic(int K, const void *W, size_t row_bytes, int n_rows,
                                  const int8_t *QX, const float *DX, int n_tok, float *Y,
                                  size_t ldy);

/* x86-64 only (cpu_q8dot_avx2.c); the AVX-512 table uses them as well. */
void kvv_cpu_quantize_act_avx2(int K, const float *x, int8_t *q, float *d);
void kvv_cpu_gemm_q8_0_q8_avx2(int K, const void *W, size_t row_bytes, int n_rows,
                               const int8_t *QX, const float *DX, int n_tok, float *Y,
                               size_t ldy);
void kvv_cpu_gemm_q4_0_q8_avx2(int K, const void *W, size_t row_bytes, int n_rows,
                               const int8_t *QX, const float *DX, int n_tok, float *Y,
                               size_t ldy);

#endif
