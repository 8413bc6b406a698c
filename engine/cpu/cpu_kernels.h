/*
 * cpu_kernels.h — the cpu engine's SIMD kernel tables (private to
 * engine/cpu) and the contracts every table keeps.
 *
 * One table per instruction set (cpu_isa.h): portable C (generic, always
 * present), AVX2+FMA+F16C (cpu_kernels_avx2.c, cpu_q8dot_avx2.c, compiled
 * with -mavx2 -mfma -mf16c) and AVX-512 (cpu_kernels_avx512.c, compiled
 * with -mavx512f/bw/vl/dq). The engine picks one at open
 * (kvv_cpu_isa_choose, kvv_cpu_kernels_of) and then calls only through it.
 *
 * THE REDUCTION ORDER (what makes invariant mode invariant). Every dot
 * product of length K computed by gemm_f32, gemv_q8_0, gemv_q8_0_x4 or dot
 * sums in one order that depends on K and the table only:
 *   1. L = lanes accumulators (8 for generic and AVX2, 16 for AVX-512);
 *      lane j holds the running sum of w[i]*x[i] for i = j, j+L, j+2L, ...
 *      < K - K%L, in ascending i, starting from +0: with `fused`, one
 *      fused multiply-add per step (fmaf); without, a rounded multiply then
 *      a rounded add;
 *   2. a fixed horizontal reduction: with 16 lanes, a[j] = a[j] + a[j+8]
 *      for j < 8 first; then s = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7));
 *   3. the K%L tail elements added to s in ascending i (fmaf when fused,
 *      else multiply then add).
 * Register blocking over rows and tokens only changes which accumulators
 * share the registers, never an accumulator's sequence.
 *
 * THE CONTRACTS. Each table keeps all of them, bit for bit;
 * tests/engine/test_cpu_kernels.c checks each one for each table, natively
 * where the CPU has the instructions and compiled against SIMDe where it
 * has not (tests/engine/simde_x86.h; -DKVV_CPU_EMULATED, test-only), and
 * requires the emulated bits to equal the native ones where both run.
 *   K1 order: every element of gemm_f32, gemv_q8_0, gemv_q8_0_x4 and dot
 *      is the order above on (dequantized) w and x.
 *   K2 batch invariance: an element's bits do not depend on n_rows, n_tok,
 *      the row's or the token's place in the call, or ld* (so neither the
 *      batch size, the chunking nor the thread split changes a bit); for
 *      gemm_f32, gemv_q8_0, gemm_q8_0_q8 and gemm_q4_0_q8.
 *   K3 fused = dequantize, then gemm_f32: gemv_q8_0 and gemv_q8_0_x4 on
 *      Q8_0 bytes give the bits of gemm_f32 on the dequantized rows.
 *   K4 dequantization is exact: dequant_q8_0 / dequant_q4_0 equal
 *      kvv_dequantize_row.
 *   K5 sum(n, x) is dot(n, x, ones).
 *   K6 axpy is y[i] + a*x[i] per element (fused iff `fused`), the same in
 *      the vector body and the tail; wsum is zeroing each output row then
 *      the axpy chain over the nonzero weights in ascending p.
 *   K7 scale is x[i]*a per element.
 *   K8 silu_mul and exp_shift give, per element, the bits of the scalar
 *      functions of cpu_expf.h (so a value's result never depends on its
 *      index).
 *   K9 fast mode's integer products (cpu_q8dot.h): quantize_act gives the
 *      generic bits; gemm_q8_0_q8 / gemm_q4_0_q8 follow that header's order
 *      (8 lanes in every table, fused iff `fused`).
 *   K10 the K-quant and Q4_1/Q5_1 products (cpu_kquant.h): quantize_q8_k
 *      and quantize_q8_1 give the generic bits; every gemm_kq gives the bits
 *      of that header's order — the SAME bits in every table (fused steps
 *      everywhere, exact integer block sums) — for any batch, row blocking
 *      or row and token place (K2).
 *   K11 fast mode's Q4_0/Q5_0/Q4_1/Q5_1 products on the X16 layout
 *      (cpu_x16.h): every gemm_x16 gives the bits of that header's order —
 *      the same bits in every table (and in both AVX-512 instances, BW and
 *      VNNI; for Q4_1/Q5_1 the bits of gemm_kq) — for any batch, row count
 *      or token place (K2).
 *   K12 widen_f16 / widen_bf16 give kvv_fp16_to_fp32 / kvv_bf16_to_fp32
 *      of every element, bit for bit (every one of the 65536 inputs, NaNs
 *      quieted as those functions do), in the vector body and the tail.
 * A table may leave gemv_q8_0_x4 NULL; the engine then takes a slower route
 * with the same bits (K3).
 *
 * Adding a table (or a kernel): write it in a file named *_ISA.c (the
 * Makefile gives it the ISA's flags), keep K1-K12, add it to
 * kvv_cpu_kernels_of (cpu_isa.c) and to the test's list of tables; x86
 * files must also compile against SIMDe (guard: KVV_CPU_EMULATED).
 */
#ifndef KVV_CPU_KERNELS_H
#define KVV_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/cpu/cpu_isa.h"
#include "engine/cpu/cpu_kquant.h"
#include "engine/cpu/cpu_x16.h"

typedef struct {
    const char *name;   /* "generic", "avx2", "avx512" (kvv_cpu_isa_name) */
    int lanes;          /* L of the reduction order: 8 or 16 */
    int fused;          /* 1: each step of the order is one fused multiply-add */
    /* Y[t*ldy + r] = dot(W[r*ldw ...], X[t*ldx ...]) for r < n_rows,
     * t < n_tok, each over K elements in the order above. */
    void (*gemm_f32)(int K, const float *W, size_t ldw, int n_rows, const float *X, size_t ldx,
                     int n_tok, float *Y, size_t ldy);
    /* The same on Q8_0 rows (K a multiple of 32, row_bytes apart), fused
     * dequantization (K3). */
    void (*gemv_q8_0)(int K, const void *W, size_t row_bytes, int n_rows, const float *X,
                      size_t ldx, int n_tok, float *Y, size_t ldy);
    /* One token against n_groups groups of 4 Q8_0 rows stored interleaved
     * by block (KVV_CPU_X4 layout: block b of rows 4g..4g+3 at
     * G + ((g*nb + b)*4 + i)*34, nb = K/32): y[4g+i], in the order of
     * gemv_q8_0 (K3), with 4 independent accumulator chains read from one
     * linear stream. NULL where a table has none. */
    void (*gemv_q8_0_x4)(int K, const void *G, int n_groups, const float *x, float *y);
    /* One dot product in the same order (attention scores, norms). */
    float (*dot)(int K, const float *a, const float *b);
    /* y[i] += a * x[i] for i < n (K6). */
    void (*axpy)(int n, float a, const float *x, float *y);
    /* For each of nh weight rows h (w + h*ldw): o[h*ldo + i] = sum over p < n
     * with w_h[p] != 0, ascending p, of w_h[p] * V[p*ldv + i], for i < D
     * (K6: the attention's weighted sum of value rows; the query heads
     * sharing a KV head read each value row once, with o kept in registers). */
    void (*wsum)(int n, int D, int nh, const float *w, size_t ldw, const float *V, size_t ldv,
                 float *o, size_t ldo);
    /* sum of x[0..n) in the order of dot (K5; the softmax denominator) */
    float (*sum)(int n, const float *x);
    /* x[i] = x[i] * a (K7) */
    void (*scale)(int n, float *x, float a);
    /* Dequantize n elements (a multiple of 32) of Q8_0 / Q4_0 (K4). */
    void (*dequant_q8_0)(const void *src, float *dst, int n);
    void (*dequant_q4_0)(const void *src, float *dst, int n);
    /* dst[i] = src[i] as fp32 for i < n (K12): the rows of an f16 or bf16
     * KV cache, widened for the attention (exact conversions). */
    void (*widen_f16)(int n, const uint16_t *src, float *dst);
    void (*widen_bf16)(int n, const uint16_t *src, float *dst);
    /* Element-wise (K8): g[i] = silu(g[i]) * u[i]; and
     * e[i] = s[i] == -inf ? 0 : exp(s[i] - m) (softmax numerators). */
    void (*silu_mul)(int n, float *g, const float *u);
    void (*exp_shift)(int n, const float *s, float m, float *e);

    /* Fast mode's products with quantized weights (cpu_q8dot_*.c, K9): the
     * activations are first rounded to Q8_0 like ggml's vec_dot_type, then
     * each block is an exact integer dot product (see cpu_q8dot.h). */
    void (*quantize_act)(int K, const float *x, int8_t *q, float *d);
    void (*gemm_q8_0_q8)(int K, const void *W, size_t row_bytes, int n_rows, const int8_t *QX,
                         const float *DX, int n_tok, float *Y, size_t ldy);
    void (*gemm_q4_0_q8)(int K, const void *W, size_t row_bytes, int n_rows, const int8_t *QX,
                         const float *DX, int n_tok, float *Y, size_t ldy);

    /* Both modes' products with K-quant (Q2_K..Q6_K) and Q4_1/Q5_1 weights,
     * read in the file's blocks (cpu_kquant.h, K10): the activations rounded
     * like ggml's vec_dot_type (Q8_K; Q8_1), exact integer block sums, one
     * fixed fp32 order; gemm_kq[kvv_kq] for each type. */
    void (*quantize_q8_k)(int K, const float *x, int8_t *q, float *d, int16_t *bsums);
    void (*quantize_q8_1)(int K, const float *x, int8_t *q, float *d, float *s);
    const kvv_cpu_kq_fn *gemm_kq;

    /* Products on 16-row groups (cpu_x16.h, K11): gemm_x16[kvv_x16] for
     * each type; pack_x16[kvv_x16] a faster kvv_cpu_x16_pack (the same
     * bytes) or NULL; rows_x16[kvv_x16] one token on the file's rows with
     * gemm_x16's bits, or NULL. */
    const kvv_cpu_x16_fn *gemm_x16;
    const kvv_cpu_x16_pack_fn *pack_x16;
    const kvv_cpu_x16_rows_fn *rows_x16;
} kvv_cpu_kernels;

extern const kvv_cpu_kernels kvv_cpu_kernels_generic;
/* Defined only on x86-64 builds. */
extern const kvv_cpu_kernels kvv_cpu_kernels_avx2;
extern const kvv_cpu_kernels kvv_cpu_kernels_avx512;
/* AVX2 kernels the AVX-512 table shares (x86-64 builds only; per element,
 * the 8-lane order of cpu_q8dot.h, or cpu_kquant.h's, so the lane count
 * does not matter). */
void kvv_cpu_avx2_scale(int n, float *x, float a);
void kvv_cpu_avx2_widen_f16(int n, const uint16_t *src, float *dst);
void kvv_cpu_avx2_widen_bf16(int n, const uint16_t *src, float *dst);
/* wsum's columns [c0, D) one at a time, fused steps (K6): the scalar tail of
 * the AVX2 and AVX-512 wsum kernels. */
void kvv_cpu_wsum_tail(int c0, int n, int D, int nh, const float *w, size_t ldw,
                       const float *V, size_t ldv, float *o, size_t ldo);

/* The table of isa in this build, whether or not the CPU can run it; NULL
 * when the build has none (avx2/avx512 off x86-64). Check the CPU first
 * (kvv_cpu_isa_choose): calling a table the CPU lacks faults. */
const kvv_cpu_kernels *kvv_cpu_kernels_of(kvv_cpu_isa isa);

#endif
