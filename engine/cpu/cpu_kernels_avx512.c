/*
 * cpu_kernels_avx512.c — AVX-512 (F, BW, VL, DQ) kernels of the cpu engine,
 * selected at run time only on CPUs that have them. Reduction order:
 * cpu_kernels.h with 16 lanes — lane j sums i = j, j+16, ... by fused
 * multiply-add; then lanes j and j+8 are added, then the fixed 8-lane tree;
 * then the K%16 tail by fmaf. Every product, sum and dot of this table uses
 * that order (hsum16), so K1-K5 hold with 16 lanes throughout.
 *
 * gemm_f32 is blocked 4 rows x 4 tokens (16 of the 32 zmm registers hold
 * accumulators); one token (GEMV) streams one row at a time (PF_PAGE), like
 * the AVX2 table. The X4 and G16 GEMVs are the AVX2 ones widened to 16
 * lanes. Element-wise kernels, wsum and fast mode's integer products are
 * per element or keep cpu_q8dot.h's 8-lane order, so the table shares the
 * AVX2 versions of those.
 */
#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/cpu_q8dot.h"

#if defined(KVV_CPU_EMULATED) ||                                                          \
    (defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) &&                \
     defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__FMA__) && defined(__F16C__))

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif
#include <math.h>
#include <string.h>

#include "engine/cpu/cpu_expf.h"

#define RB 4
#define TB 4
#define TOK_TILE 48
#define PF_ROWS 8     /* gemv_q8_0 prefetch distance in rows */
/* The F32 GEMV streams one row at a time and touches the line PF_PAGE bytes
 * ahead once per 4 KB read: the next page's translation and the hardware
 * prefetcher's stream on it are then ready when the loads arrive. Measured
 * on the 2-core EPYC (docs/cpu-engine.md, "F32 GEMV"): 97-106% of the read
 * loop for rows of 2.3-12 KB, against 47-95% for the 4 rows interleaved with
 * a prefetch of every line 8 rows ahead that this table used before. */
#define PF_PAGE 4096
#define PF_BYTES 4096 /* X4 and G16 GEMV prefetch distance (one stream) */

/* The fixed 16-lane reduction of cpu_kernels.h: lanes j and j+8, then
 * (j, j+4), then (0+4)+(2+6) and (1+5)+(3+7), then the two. */
static inline float hsum16(__m512 a)
{
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
#ifdef KVV_CPU_PLANT_HSUM_SWAP
    /* Negative control, test builds only (tests/cli/test_kernel_plant.sh):
     * lanes 1 and 2 of the tree exchanged, ((0+4)+(1+5)) + ((2+6)+(3+7)).
     * Every kernel of this table stays consistent with every other, so only
     * the order check (K1) and the native/emulated comparison can see it. */
    s = _mm_shuffle_ps(s, s, _MM_SHUFFLE(3, 1, 2, 0));
#endif
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

static inline __attribute__((always_inline)) void block(int K, const float *W, size_t ldw,
                                                        const float *X, size_t ldx, float *Y,
                                                        size_t ldy, const int nr, const int nt)
{
    __m512 acc[RB][TB];
    #pragma GCC unroll 16
    for (int r = 0; r < nr; r++)
        #pragma GCC unroll 16
        for (int t = 0; t < nt; t++)
            acc[r][t] = _mm512_setzero_ps();
    int K16 = K & ~15;
    for (int i = 0; i < K16; i += 16) {
        if (nt == 1 && nr == 1 && (i & 1023) == 0) /* GEMV: see PF_PAGE */
            _mm_prefetch((const char *)(W + i) + PF_PAGE, _MM_HINT_T0);
        __m512 w[RB];
        #pragma GCC unroll 16
        for (int r = 0; r < nr; r++)
            w[r] = _mm512_loadu_ps(W + (size_t)r * ldw + i);
        #pragma GCC unroll 16
        for (int t = 0; t < nt; t++) {
            __m512 x = _mm512_loadu_ps(X + (size_t)t * ldx + i);
            #pragma GCC unroll 16
            for (int r = 0; r < nr; r++)
                acc[r][t] = _mm512_fmadd_ps(w[r], x, acc[r][t]);
        }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < nr; r++)
        #pragma GCC unroll 16
        for (int t = 0; t < nt; t++) {
            float s = hsum16(acc[r][t]);
            for (int i = K16; i < K; i++)
                s = fmaf(W[(size_t)r * ldw + i], X[(size_t)t * ldx + i], s);
            Y[(size_t)t * ldy + r] = s;
        }
}

static inline __attribute__((always_inline)) void rows_block(int K, const float *W, size_t ldw,
                                                             const float *X, size_t ldx,
                                                             int n_tok, float *Y, size_t ldy,
                                                             const int nr)
{
    int t = 0;
    for (; t + TB <= n_tok; t += TB)
        block(K, W, ldw, X + (size_t)t * ldx, ldx, Y + (size_t)t * ldy, ldy, nr, TB);
    switch (n_tok - t) {
    case 3: block(K, W, ldw, X + (size_t)t * ldx, ldx, Y + (size_t)t * ldy, ldy, nr, 3); break;
    case 2: block(K, W, ldw, X + (size_t)t * ldx, ldx, Y + (size_t)t * ldy, ldy, nr, 2); break;
    case 1: block(K, W, ldw, X + (size_t)t * ldx, ldx, Y + (size_t)t * ldy, ldy, nr, 1); break;
    default: break;
    }
}

static void avx512_gemm_f32(int K, const float *W, size_t ldw, int n_rows, const float *X,
                            size_t ldx, int n_tok, float *Y, size_t ldy)
{
    if (n_tok == 1) { /* GEMV: one linear stream, a row at a time */
        for (int r = 0; r < n_rows; r++)
            block(K, W + (size_t)r * ldw, ldw, X, ldx, Y + r, ldy, 1, 1);
        return;
    }
    for (int t0 = 0; t0 < n_tok; t0 += TOK_TILE) {
        int nt = n_tok - t0 < TOK_TILE ? n_tok - t0 : TOK_TILE;
        const float *Xt = X + (size_t)t0 * ldx;
        float *Yt = Y + (size_t)t0 * ldy;
        int r = 0;
        for (; r + RB <= n_rows; r += RB)
            rows_block(K, W + (size_t)r * ldw, ldw, Xt, ldx, nt, Yt + r, ldy, RB);
        for (; r < n_rows; r++)
            rows_block(K, W + (size_t)r * ldw, ldw, Xt, ldx, nt, Yt + r, ldy, 1);
    }
}

static float avx512_dot(int K, const float *a, const float *b)
{
    float y;
    block(K, a, 0, b, 0, &y, 0, 1, 1);
    return y;
}

static inline float fp16_to_f32(const uint8_t *p)
{
    return _cvtsh_ss((uint16_t)(p[0] | (p[1] << 8)));
}

/* 16 dequantized weights of a Q8_0 block (16 int8 at q): (float)q * d. */
static inline __m512 q8_w16(const uint8_t *q, __m512 d)
{
    __m128i b = _mm_loadu_si128((const __m128i *)q);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), d);
}

static void avx512_dequant_q8_0(const void *src, float *dst, int n)
{
    const uint8_t *p = src;
    for (int b = 0; b < n / 32; b++, p += 34) {
        __m512 d = _mm512_set1_ps(fp16_to_f32(p));
        for (int j = 0; j < 2; j++)
            _mm512_storeu_ps(dst + b * 32 + 16 * j, q8_w16(p + 2 + 16 * j, d));
    }
}

static void avx512_dequant_q4_0(const void *src, float *dst, int n)
{
    const uint8_t *p = src;
    const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    for (int b = 0; b < n / 32; b++, p += 18) {
        __m512 d = _mm512_set1_ps(fp16_to_f32(p));
        __m128i qs = _mm_loadu_si128((const __m128i *)(p + 2));
        __m128i lo = _mm_sub_epi8(_mm_and_si128(qs, m4), eight);
        __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), m4), eight);
        _mm512_storeu_ps(dst + b * 32, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), d));
        _mm512_storeu_ps(dst + b * 32 + 16,
                         _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), d));
    }
}

/* Fused Q8_0: dequantize one 32-block of up to RB rows into registers, then
 * FMA against each token; the per-(row, token) order equals gemm_f32 on the
 * dequantized rows (K is a multiple of 32, so there is no tail). */
static void avx512_gemv_q8_0(int K, const void *W, size_t row_bytes, int n_rows, const float *X,
                             size_t ldx, int n_tok, float *Y, size_t ldy)
{
    const uint8_t *wb = W;
    for (int t0 = 0; t0 < n_tok; t0 += TB) {
        int nt = n_tok - t0 < TB ? n_tok - t0 : TB;
        for (int r0 = 0; r0 < n_rows; r0 += RB) {
            int nr = n_rows - r0 < RB ? n_rows - r0 : RB;
            __m512 acc[RB][TB];
            #pragma GCC unroll 16
            for (int r = 0; r < RB; r++)
                #pragma GCC unroll 16
                for (int t = 0; t < TB; t++)
                    acc[r][t] = _mm512_setzero_ps();
            for (int b = 0; b < K / 32; b++) {
                for (int r = 0; r < nr; r++)
                    _mm_prefetch((const char *)(wb + (size_t)(r0 + r + PF_ROWS) * row_bytes +
                                                (size_t)b * 34),
                                 _MM_HINT_T0);
                #pragma GCC unroll 16
                for (int r = 0; r < nr; r++) {
                    const uint8_t *blk = wb + (size_t)(r0 + r) * row_bytes + (size_t)b * 34;
                    __m512 d = _mm512_set1_ps(fp16_to_f32(blk));
                    #pragma GCC unroll 16
                    for (int j = 0; j < 2; j++) {
                        __m512 w = q8_w16(blk + 2 + 16 * j, d);
                        #pragma GCC unroll 16
                        for (int t = 0; t < nt; t++)
                            acc[r][t] = _mm512_fmadd_ps(
                                w, _mm512_loadu_ps(X + (size_t)(t0 + t) * ldx + b * 32 + 16 * j),
                                acc[r][t]);
                    }
                }
            }
            #pragma GCC unroll 16
            for (int r = 0; r < nr; r++)
                #pragma GCC unroll 16
                for (int t = 0; t < nt; t++)
                    Y[(size_t)(t0 + t) * ldy + r0 + r] = hsum16(acc[r][t]);
        }
    }
}

/* One token against groups of 4 Q8_0 rows in the X4 layout (cpu_impl.h):
 * 4 independent 16-lane chains read from one linear stream; each row's
 * sequence is gemv_q8_0's, so the bits are too (K3). */
static void avx512_gemv_q8_0_x4(int K, const void *G, int n_groups, const float *x, float *y)
{
    const int nb = K / 32;
    const uint8_t *g4 = G;
    for (int g = 0; g < n_groups; g++, g4 += (size_t)nb * 4 * 34) {
        __m512 acc[4];
        #pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            acc[i] = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const uint8_t *blk4 = g4 + (size_t)b * 4 * 34; /* 136 bytes, 4 rows */
            _mm_prefetch((const char *)blk4 + PF_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *)blk4 + PF_BYTES + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)blk4 + PF_BYTES + 128, _MM_HINT_T0);
            const __m512 x0 = _mm512_loadu_ps(x + (size_t)b * 32);
            const __m512 x1 = _mm512_loadu_ps(x + (size_t)b * 32 + 16);
            #pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                const uint8_t *blk = blk4 + i * 34;
                const __m512 d = _mm512_set1_ps(fp16_to_f32(blk));
                acc[i] = _mm512_fmadd_ps(q8_w16(blk + 2, d), x0, acc[i]);
                acc[i] = _mm512_fmadd_ps(q8_w16(blk + 18, d), x1, acc[i]);
            }
        }
        #pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            y[4 * g + i] = hsum16(acc[i]);
    }
}

/* The order of dot with a row of ones (K5): x*1 + acc is x + acc, one
 * rounding either way. */
static float avx512_sum(int n, const float *x)
{
    __m512 acc = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16)
        acc = _mm512_add_ps(acc, _mm512_loadu_ps(x + i));
    float s = hsum16(acc);
    for (; i < n; i++)
        s = s + x[i];
    return s;
}

static void avx512_axpy(int n, float a, const float *x, float *y)
{
    __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

/* wsum's columns [0, 16*NV) for NH heads, in NH*NV registers: each output
 * a chain of fused steps over the nonzero weights in ascending p (K6), as
 * avx512_axpy's. 128 columns at once read a head_dim-128 value row in one
 * pass, where the AVX2 kernel's 32-column passes read each row four times,
 * 128 bytes at a 4 KB stride. */
static inline __attribute__((always_inline)) void wsum16_block(int n, const float *w, size_t ldw,
                                                               const float *V, size_t ldv,
                                                               float *o, size_t ldo, const int NH,
                                                               const int NV)
{
    __m512 acc[2][8];
    #pragma GCC unroll 8
    for (int h = 0; h < NH; h++)
        #pragma GCC unroll 8
        for (int v = 0; v < NV; v++)
            acc[h][v] = _mm512_setzero_ps();
    for (int p = 0; p < n; p++) {
        const float *row = V + (size_t)p * ldv;
        __m512 x[8];
        #pragma GCC unroll 8
        for (int v = 0; v < NV; v++)
            x[v] = _mm512_loadu_ps(row + 16 * v);
        #pragma GCC unroll 8
        for (int h = 0; h < NH; h++) {
            const float wp = w[(size_t)h * ldw + p];
            if (wp == 0.0f)
                continue;
            const __m512 a = _mm512_set1_ps(wp);
            #pragma GCC unroll 8
            for (int v = 0; v < NV; v++)
                acc[h][v] = _mm512_fmadd_ps(a, x[v], acc[h][v]);
        }
    }
    #pragma GCC unroll 8
    for (int h = 0; h < NH; h++)
        #pragma GCC unroll 8
        for (int v = 0; v < NV; v++)
            _mm512_storeu_ps(o + (size_t)h * ldo + 16 * v, acc[h][v]);
}

#define WSUM16_CASE(NV)                                                                           \
    case NV:                                                                                      \
        if (nh2 == 2)                                                                             \
            wsum16_block(n, wh, ldw, V + c, ldv, oh + c, ldo, 2, NV);                             \
        else                                                                                      \
            wsum16_block(n, wh, ldw, V + c, ldv, oh + c, ldo, 1, NV);                             \
        break;

static void avx512_wsum(int n, int D, int nh, const float *w, size_t ldw, const float *V,
                        size_t ldv, float *o, size_t ldo)
{
    const int D16 = D - D % 16;
    for (int h0 = 0; h0 < nh; h0 += 2) { /* two heads share each value row */
        const int nh2 = nh - h0 < 2 ? nh - h0 : 2;
        const float *wh = w + (size_t)h0 * ldw;
        float *oh = o + (size_t)h0 * ldo;
        for (int c = 0; c < D16; c += 128) {
            switch ((D16 - c < 128 ? D16 - c : 128) / 16) {
                WSUM16_CASE(1)
                WSUM16_CASE(2)
                WSUM16_CASE(3)
                WSUM16_CASE(4)
                WSUM16_CASE(5)
                WSUM16_CASE(6)
                WSUM16_CASE(7)
                WSUM16_CASE(8)
            default: break;
            }
        }
    }
    kvv_cpu_wsum_tail(D16, n, D, nh, w, ldw, V, ldv, o, ldo);
}

/* exp of 16 lanes: exactly the operations of kvv_cpu_expf_inline. */
static inline __m512 exp16(__m512 x)
{
    __m512 kf = _mm512_mul_ps(x, _mm512_set1_ps(KVV_CPU_LOG2E));
    __mmask16 ge = _mm512_cmp_ps_mask(kf, _mm512_setzero_ps(), _CMP_GE_OQ);
    __m512 half = _mm512_mask_blend_ps(ge, _mm512_set1_ps(-0.5f), _mm512_set1_ps(0.5f));
    __m512i k = _mm512_cvttps_epi32(_mm512_add_ps(kf, half));
    __m512 fk = _mm512_cvtepi32_ps(k);
    __m512 r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(fk, _mm512_set1_ps(KVV_CPU_LN2_HI))),
                             _mm512_mul_ps(fk, _mm512_set1_ps(KVV_CPU_LN2_LO)));
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    __mmask16 big = _mm512_cmpgt_epi32_mask(k, _mm512_set1_epi32(127));
    p = _mm512_mask_mul_ps(p, big, p, _mm512_set1_ps(2.0f));
    k = _mm512_mask_sub_epi32(k, big, k, _mm512_set1_epi32(1));
    __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23));
    __m512 y = _mm512_mul_ps(p, scale);
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(KVV_CPU_EXP_LO), _CMP_LT_OQ), y,
                             _mm512_setzero_ps());
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(KVV_CPU_EXP_HI), _CMP_GT_OQ), y,
                             _mm512_set1_ps(INFINITY));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

static void avx512_silu_mul(int n, float *g, const float *u)
{
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(g + i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        __m512 s = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(g + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        g[i] = kvv_cpu_silu_mul_inline(g[i], u[i]);
}

static void avx512_exp_shift(int n, const float *s, float m, float *e)
{
    int i = 0;
    __m512 vm = _mm512_set1_ps(m), ninf = _mm512_set1_ps(-INFINITY);
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(s + i);
        __m512 y = exp16(_mm512_sub_ps(x, vm));
        _mm512_storeu_ps(e + i, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, ninf, _CMP_EQ_OQ), y,
                                                     _mm512_setzero_ps()));
    }
    for (; i < n; i++)
        e[i] = s[i] == -INFINITY ? 0.0f : kvv_cpu_expf_inline(s[i] - m);
}

const kvv_cpu_kernels kvv_cpu_kernels_avx512 = {
    .name = "avx512",
    .lanes = 16,
    .fused = 1,
    .gemm_f32 = avx512_gemm_f32,
    .gemv_q8_0 = avx512_gemv_q8_0,
    .gemv_q8_0_x4 = avx512_gemv_q8_0_x4,
    .dot = avx512_dot,
    .axpy = avx512_axpy,
    .wsum = avx512_wsum,
    .sum = avx512_sum,
    .scale = kvv_cpu_avx2_scale,
    .widen_f16 = kvv_cpu_avx2_widen_f16, /* exact per element: the width does not matter */
    .widen_bf16 = kvv_cpu_avx2_widen_bf16,
    .dequant_q8_0 = avx512_dequant_q8_0,
    .dequant_q4_0 = avx512_dequant_q4_0,
    .silu_mul = avx512_silu_mul,
    .exp_shift = avx512_exp_shift,
    .quantize_act = kvv_cpu_quantize_act_avx2,
    .gemm_q8_0_q8 = kvv_cpu_gemm_q8_0_q8_avx2,
    .gemm_q4_0_q8 = kvv_cpu_gemm_q4_0_q8_avx2,
    .quantize_q8_k = kvv_cpu_quantize_q8_k_avx2, /* per element: the lane width does not matter */
    .quantize_q8_1 = kvv_cpu_quantize_q8_1_avx2,
    .gemm_kq = kvv_cpu_kq_avx512,
    .gemm_x16 = kvv_cpu_x16_avx512,
    .pack_x16 = kvv_cpu_x16_pack_avx512,
    .rows_x16 = kvv_cpu_x16_rows_avx2, /* 8 rows wide measured no slower */
};

#elif defined(__x86_64__)
#error "cpu_kernels_avx512.c must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq"
#endif
