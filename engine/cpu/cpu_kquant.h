/*
 * cpu_kquant.h — integer products of the K-quant (Q2_K..Q6_K) and
 * Q4_1/Q5_1 weights, read in the file's own blocks (private to engine/cpu;
 * reached through the kernel table, cpu_kernels.h contract K10).
 *
 * This is ggml's scheme for these types, with one fixed float order of our
 * own. The activation row is first rounded the way ggml rounds it for the
 * weight type's vec_dot_type:
 *   Q8_K (for Q2_K..Q6_K; ggml's quantize_row_q8_K_ref, which x86 uses):
 *     per 256 elements, max = the first element of largest |x| (NaN
 *     skipped), iscale = -127/max, d = 1/iscale (fp32), q = round-to-
 *     nearest-even(iscale*x) in -127..127 (NaN -> 0), and bsums = the sums
 *     of each 16 q; an all-zero block has d = 0, q = 0;
 *   Q8_1 (for Q4_1/Q5_1; ggml's x86 quantize_row_q8_1): per 32 elements,
 *     amax = max |x| (NaN skipped), d = amax/127, id = amax ? 127/amax : 0,
 *     q = round-to-nearest-even(x*id) (NaN -> 0); kept: fp16(d) and
 *     s = fp16(d * sum q) (d in fp32 there, as ggml).
 *
 * Then, per output (row r, token t), with exact int32 block sums:
 *   K types, per super-block b ascending (kvv_kblock: w = d*sc*(u-off) -
 *   dmin*mn), from acc = +0:
 *     S = sum_g sc_g * sum_{i in g} u_i*q_i  -  off * sum_g sc_g*bsum_g
 *     M = sum_g mn_g * bsum_g
 *     acc = fmaf(dw_b*dx_b, (float)S, acc)
 *     acc = fmaf(-(dminw_b*dx_b), (float)M, acc)       (Q2_K, Q4_K, Q5_K)
 *   Q4_1/Q5_1 (y = d*u + m), per block b ascending, from acc = +0:
 *     acc = fmaf(dw_b*dx_b, (float)(sum_i u_i*q_i), acc)
 *     acc = fmaf(mw_b, s_b, acc)
 *   Y[t*ldy + r] = acc.
 * Every product is rounded once (fp32), every fmaf is one fused step, in
 * every table (the generic C table calls fmaf): so the bits depend only on
 * K and the inputs — not on the table, the batch, the row's or token's
 * place, or the thread split (batch invariance by construction: tiles only
 * change which outputs share registers). The integer sums are exact
 * (|S| < 2^29), so how a table forms them is free.
 *
 * Layout of the rounded activations: q [n_tok][K] int8, token rows K
 * apart; Q8_K: d [n_tok][K/256], bsums [n_tok][K/16] int16; Q8_1:
 * d and s [n_tok][K/32] float. K is a multiple of 256 (K types) or 32.
 */
#ifndef KVV_CPU_KQUANT_H
#define KVV_CPU_KQUANT_H

#include <stddef.h>
#include <stdint.h>

#include "model/tensor_types.h"

/* The weight types with an integer product here (index of the table's
 * gemm_kq). */
typedef enum {
    KVV_KQ_Q2_K,
    KVV_KQ_Q3_K,
    KVV_KQ_Q4_K,
    KVV_KQ_Q5_K,
    KVV_KQ_Q6_K,
    KVV_KQ_Q4_1,
    KVV_KQ_Q5_1,
    KVV_KQ_COUNT
} kvv_kq;

/* kvv_kq of a ggml type, or -1. */
int kvv_cpu_kq_of(kvv_type t);
/* Q8_K (1) for the K types, Q8_1 (0) for Q4_1/Q5_1. */
static inline int kvv_cpu_kq_is_k(kvv_kq k)
{
    return k <= KVV_KQ_Q6_K;
}

/* Rounded activations of n_tok tokens (layout above). */
typedef struct {
    const int8_t *q;
    const float *d;
    const int16_t *bsums;   /* Q8_K only */
    const float *s;         /* Q8_1 only */
} kvv_cpu_qact;

/* Y[t*ldy + r] for r < n_rows, t < n_tok: rows of `row_bytes` bytes in the
 * file's blocks of the kvv_kq's type, activations A. */
typedef void (*kvv_cpu_kq_fn)(int K, const void *W, size_t row_bytes, int n_rows,
                              const kvv_cpu_qact *A, int n_tok, float *Y, size_t ldy);

/* The generic (portable C) kernels, which define the bits. */
void kvv_cpu_quantize_q8_k_generic(int K, const float *x, int8_t *q, float *d, int16_t *bsums);
void kvv_cpu_quantize_q8_1_generic(int K, const float *x, int8_t *q, float *d, float *s);
extern const kvv_cpu_kq_fn kvv_cpu_kq_generic[KVV_KQ_COUNT];

/* x86-64 builds only: the AVX2 and AVX-512 kernels (cpu_kquant_avx2.c,
 * cpu_kquant_avx512.c); same bits. */
void kvv_cpu_quantize_q8_k_avx2(int K, const float *x, int8_t *q, float *d, int16_t *bsums);
void kvv_cpu_quantize_q8_1_avx2(int K, const float *x, int8_t *q, float *d, float *s);
extern const kvv_cpu_kq_fn kvv_cpu_kq_avx2[KVV_KQ_COUNT];
/* The AVX-512 table's entries: for batches the VNNI instance where cpuid
 * reports it, else the AVX-512BW one; both are reachable for tests. */
extern const kvv_cpu_kq_fn kvv_cpu_kq_avx512[KVV_KQ_COUNT];
extern const kvv_cpu_kq_fn kvv_cpu_kq_avx512bw[KVV_KQ_COUNT];
extern const kvv_cpu_kq_fn kvv_cpu_kq_avx512vnni[KVV_KQ_COUNT];

#endif
