/*
 * cpu_kernels.h — the cpu engine's SIMD kernel table (private to engine/cpu).
 *
 * One table per instruction set: a portable generic C table (always
 * present), AVX2+FMA+F16C (cpu_kernels_avx2.c, compiled with -mavx2 -mfma
 * -mf16c) and AVX-512 (cpu_kernels_avx512.c). kvv_cpu_kernels_select()
 * picks one once at engine open from cpuid (__builtin_cpu_supports); the
 * engine then calls only through the table.
 *
 * THE REDUCTION ORDER (what makes invariant mode invariant). Every dot
 * product of length K computed by gemm_f32, gemv_q8_0 or dot sums in one
 * order that depends on K only:
 *   - L lanes (L = 8 for generic and AVX2, 16 for AVX-512); lane j holds
 *     the running sum of w[i]*x[i] for i = j, j+L, j+2L, ... < K - K%L,
 *     accumulated in ascending i (AVX2/AVX-512: one fused multiply-add per
 *     step; generic: a rounded multiply then a rounded add);
 *   - a fixed horizontal reduction of the lanes (AVX-512 first adds lane j
 *     and j+8, then the 8-lane tree below): s = ((a0+a4)+(a2+a6)) +
 *     ((a1+a5)+(a3+a7));
 *   - the K%L tail elements added to s in ascending i (fmaf / mul+add).
 * Register blocking over several rows and several tokens only changes which
 * accumulators live in registers together, never an accumulator's sequence,
 * so the result for (row, token) is the same whatever the batch size, the
 * token's place in the batch, the row's place in a thread's slice or the
 * thread count.
 *
 * Quantized weights: w = (float)q * d exactly as ggml's dequantize_row_*
 * computes it, so gemv_q8_0 on Q8_0 bytes and gemm_f32 on the dequantized
 * row give identical bits.
 */
#ifndef KVV_CPU_KERNELS_H
#define KVV_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;   /* "generic", "avx2", "avx512" */
    int lanes;          /* accumulator lanes per dot product */
    /* Y[t*ldy + r] = dot(W[r*ldw ...], X[t*ldx ...]) for r < n_rows,
     * t < n_tok, each over K elements in the order above. */
    void (*gemm_f32)(int K, const float *W, size_t ldw, int n_rows, const float *X, size_t ldx,
                     int n_tok, float *Y, size_t ldy);
    /* The same on Q8_0 rows (K a multiple of 32, row_bytes apart), fused
     * dequantization; bit-identical to gemm_f32 on the dequantized rows. */
    void (*gemv_q8_0)(int K, const void *W, size_t row_bytes, int n_rows, const float *X,
                      size_t ldx, int n_tok, float *Y, size_t ldy);
    /* One token against n_groups groups of 4 Q8_0 rows stored interleaved
     * by block (KVV_CPU_X4 layout: block b of rows 4g..4g+3 at
     * G + ((g*nb + b)*4 + i)*34, nb = K/32): y[4g+i], in the order of
     * gemv_q8_0 (so the same bits), with 4 independent accumulator chains
     * read from one linear stream. NULL where a table has none. */
    void (*gemv_q8_0_x4)(int K, const void *G, int n_groups, const float *x, float *y);
    /* KVV_CPU_G16 rows (cpu_impl.h: 16 int8, fp32 s, fp32 m per 16
     * weights): dequantize n elements (w = s*q - m, each operation rounded),
     * and one token's products y[r] = dot(row r, x) in the order of
     * gemm_f32, so the same bits as gemm_f32 on the dequantized rows.
     * gemv_g16 is NULL where a table has none. */
    void (*dequant_g16)(const void *src, float *dst, int n);
    void (*gemv_g16)(int K, const void *W, size_t row_bytes, int n_rows, const float *x,
                     float *y);
    /* One dot product in the same order (attention scores, norms). */
    float (*dot)(int K, const float *a, const float *b);
    /* y[i] += a * x[i] for i < n (fused on FMA machines, identically in the
     * vector body and the tail). */
    void (*axpy)(int n, float a, const float *x, float *y);
    /* For each of nh weight rows h (w + h*ldw): o[h*ldo + i] = sum over p < n
     * with w_h[p] != 0, ascending p, of w_h[p] * V[p*ldv + i], for i < D,
     * starting from 0: exactly the bits of zeroing the row and calling
     * axpy(D, w_h[p], V + p*ldv, o_h) for each such p in order (the
     * attention's weighted sum of value rows; the query heads sharing a KV
     * head read each value row once, with o kept in registers). */
    void (*wsum)(int n, int D, int nh, const float *w, size_t ldw, const float *V, size_t ldv,
                 float *o, size_t ldo);
    /* sum of x[0..n) in the order of dot (lanes, fixed tree, tail), so the
     * same as dot(n, x, ones) */
    float (*sum)(int n, const float *x);
    /* x[i] = x[i] * a */
    void (*scale)(int n, float *x, float a);
    /* Dequantize n elements (a multiple of 32) of Q8_0 / Q4_0: bit-identical
     * to kvv_dequantize_row. */
    void (*dequant_q8_0)(const void *src, float *dst, int n);
    void (*dequant_q4_0)(const void *src, float *dst, int n);
    /* Element-wise, bit-identical to the scalar functions of cpu_expf.h in
     * every lane and in the tail: g[i] = silu(g[i]) * u[i]; and
     * e[i] = s[i] == -inf ? 0 : exp(s[i] - m) (softmax numerators). */
    void (*silu_mul)(int n, float *g, const float *u);
    void (*exp_shift)(int n, const float *s, float m, float *e);

    /* Fast mode's products with quantized weights (cpu_q8dot_*.c): the
     * activations are first rounded to Q8_0 like ggml's vec_dot_type, then
     * each block is an exact integer dot product (see cpu_q8dot.h). */
    void (*quantize_act)(int K, const float *x, int8_t *q, float *d);
    void (*gemm_q8_0_q8)(int K, const void *W, size_t row_bytes, int n_rows, const int8_t *QX,
                         const float *DX, int n_tok, float *Y, size_t ldy);
    void (*gemm_q4_0_q8)(int K, const void *W, size_t row_bytes, int n_rows, const int8_t *QX,
                         const float *DX, int n_tok, float *Y, size_t ldy);
} kvv_cpu_kernels;

extern const kvv_cpu_kernels kvv_cpu_kernels_generic;
/* Defined only on x86-64 builds. */
extern const kvv_cpu_kernels kvv_cpu_kernels_avx2;
extern const kvv_cpu_kernels kvv_cpu_kernels_avx512;
/* AVX2 kernels the AVX-512 table shares (x86-64 builds only). */
void kvv_cpu_avx2_wsum(int n, int D, int nh, const float *w, size_t ldw, const float *V,
                       size_t ldv, float *o, size_t ldo);
float kvv_cpu_avx2_sum(int n, const float *x);
void kvv_cpu_avx2_dequant_g16(const void *src, float *dst, int n);
void kvv_cpu_avx2_scale(int n, float *x, float a);

/* The best table this CPU supports. `force` ("generic", "avx2", "avx512" or
 * NULL/"" for auto) restricts the choice; a forced ISA the CPU lacks returns
 * NULL. */
const kvv_cpu_kernels *kvv_cpu_kernels_select(const char *force);

#endif
