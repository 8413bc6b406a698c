/*
 * cpu_q8dot_avx2.c — AVX2 versions of the Q8_0-activation products (order
 * and layout: cpu_q8dot.h). A block's integer dot product is ggml's:
 * maddubs(|w|, x * sign(w)) sums byte pairs into int16 (at most
 * 2*128*127 = 32512, no saturation), madd with ones sums int16 pairs into
 * the 8 int32 lanes (lane j = elements 4j..4j+3), exact.
 *
 * Register blocking: 4 weight rows x 2 tokens (8 accumulators); rows outer
 * so a row block's bytes are read once per token tile. GEMV (one token)
 * streams one row at a time with a software prefetch PF_BYTES ahead: on
 * the 2-core EPYC we measure on, reading 4 rows interleaved reached 3-6 GB/s
 * of one core's ~10, a single linear stream 8-10.
 */
#include "engine/cpu/cpu_q8dot.h"

#if defined(KVV_CPU_EMULATED) || \
    (defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif

#include "engine/cpu/cpu_avx2.h"

#define RB 4         /* weight rows per register block */
#define TB 2         /* tokens per register block */
#define TOK_TILE 64  /* tokens per activation tile (K int8 each, stays in L2) */
#define PF_BYTES 4096

void kvv_cpu_quantize_act_avx2(int K, const float *x, int8_t *q, float *d)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int b = 0; b < K / KVV_Q8_BLOCK; b++) {
        const float *xb = x + (size_t)b * KVV_Q8_BLOCK;
        __m256 v[4], m = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(xb + 8 * j);
            /* max returns its second operand when either is NaN: a NaN
             * element leaves m as it was, as in the generic version */
            m = _mm256_max_ps(_mm256_and_ps(v[j], absmask), m);
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        const float amax = _mm_cvtss_f32(m4);
        const float dd = amax / 127.0f;
        const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i i32[4];
        for (int j = 0; j < 4; j++) {
            __m256 r = _mm256_round_ps(_mm256_mul_ps(v[j], vid),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            /* NaN lanes (unordered) become 0, as in the generic version */
            r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q));
            i32[j] = _mm256_cvtps_epi32(r);
        }
        /* pack 32 int32 -> 32 int8 (saturating; values are within +-127) and
         * undo the lane interleave of the 256-bit packs */
        __m256i p16a = _mm256_packs_epi32(i32[0], i32[1]);
        __m256i p16b = _mm256_packs_epi32(i32[2], i32[3]);
        __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        p8 = _mm256_permutevar8x32_epi32(p8, perm);
        _mm256_storeu_si256((__m256i *)(q + (size_t)b * KVV_Q8_BLOCK), p8);
        d[b] = _cvtsh_ss(_cvtss_sh(dd, _MM_FROUND_TO_NEAREST_INT));
    }
}

/* 32 int8 weights of block b of a row: Q8_0 (34-byte blocks) or Q4_0
 * (18-byte blocks, element j = lo nibble of byte j - 8, j+16 = hi - 8). */
static inline __m256i weights(const uint8_t *blk, const int is_q4)
{
    if (!is_q4)
        return _mm256_loadu_si256((const __m256i *)(blk + 2));
    __m128i qs = _mm_loadu_si128((const __m128i *)(blk + 2));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m128i lo = _mm_and_si128(qs, m4), hi = _mm_and_si128(_mm_srli_epi16(qs, 4), m4);
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

static inline __attribute__((always_inline)) void block(const int is_q4, int K, const uint8_t *W,
                                                        size_t row_bytes, const int8_t *QX,
                                                        const float *DX, float *Y, size_t ldy,
                                                        const int nr, const int nt)
{
    const int nb = K / KVV_Q8_BLOCK;
    const size_t bb = is_q4 ? 18 : 34;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[RB][TB];
    #pragma GCC unroll 8
    for (int r = 0; r < nr; r++)
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        if (nt == 1 && nr == 1)
            _mm_prefetch((const char *)(W + (size_t)b * bb + PF_BYTES), _MM_HINT_T0);
        #pragma GCC unroll 8
        for (int r = 0; r < nr; r++) {
            const uint8_t *blk = W + (size_t)r * row_bytes + (size_t)b * bb;
            const __m256i w = weights(blk, is_q4);
            const __m256i aw = _mm256_sign_epi8(w, w);
            const __m256 dw = _mm256_set1_ps(kvv_avx2_fp16(blk));
            #pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                const __m256i x = _mm256_loadu_si256((const __m256i *)(QX + (size_t)t * K +
                                                                       (size_t)b * KVV_Q8_BLOCK));
                const __m256i s = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w)), ones);
                const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(DX[(size_t)t * nb + b]));
                acc[r][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc[r][t]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < nr; r++)
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            Y[(size_t)t * ldy + r] = kvv_avx2_hsum(acc[r][t]);
}

/* nr x nt block with compile-time shapes after inlining. */
#define SHAPES(Q4)                                                                                \
    switch (nr * 4 + nt) {                                                                       \
    case 4 * 4 + 2: block(Q4, K, W, rb, QX, DX, Y, ldy, 4, 2); break;                            \
    case 4 * 4 + 1: block(Q4, K, W, rb, QX, DX, Y, ldy, 4, 1); break;                            \
    case 3 * 4 + 2: block(Q4, K, W, rb, QX, DX, Y, ldy, 3, 2); break;                            \
    case 3 * 4 + 1: block(Q4, K, W, rb, QX, DX, Y, ldy, 3, 1); break;                            \
    case 2 * 4 + 2: block(Q4, K, W, rb, QX, DX, Y, ldy, 2, 2); break;                            \
    case 2 * 4 + 1: block(Q4, K, W, rb, QX, DX, Y, ldy, 2, 1); break;                            \
    case 1 * 4 + 2: block(Q4, K, W, rb, QX, DX, Y, ldy, 1, 2); break;                            \
    default: block(Q4, K, W, rb, QX, DX, Y, ldy, 1, 1); break;                                   \
    }

static void block_q8(int K, const uint8_t *W, size_t rb, const int8_t *QX, const float *DX,
                     float *Y, size_t ldy, int nr, int nt)
{
    SHAPES(0)
}

static void block_q4(int K, const uint8_t *W, size_t rb, const int8_t *QX, const float *DX,
                     float *Y, size_t ldy, int nr, int nt)
{
    SHAPES(1)
}

typedef void (*block_fn)(int K, const uint8_t *W, size_t rb, const int8_t *QX, const float *DX,
                         float *Y, size_t ldy, int nr, int nt);

static void gemm(block_fn fn, int K, const void *W, size_t row_bytes, int n_rows,
                 const int8_t *QX, const float *DX, int n_tok, float *Y, size_t ldy)
{
    const int nb = K / KVV_Q8_BLOCK;
    if (n_tok == 1) { /* GEMV: one linear stream */
        for (int r = 0; r < n_rows; r++)
            fn(K, (const uint8_t *)W + (size_t)r * row_bytes, row_bytes, QX, DX, Y + r, ldy, 1, 1);
        return;
    }
    for (int t0 = 0; t0 < n_tok; t0 += TOK_TILE) {
        int t1 = n_tok - t0 < TOK_TILE ? n_tok : t0 + TOK_TILE;
        for (int r = 0; r < n_rows; r += RB) {
            int nr = n_rows - r < RB ? n_rows - r : RB;
            const uint8_t *w = (const uint8_t *)W + (size_t)r * row_bytes;
            for (int t = t0; t < t1; t += TB) {
                int nt = t1 - t < TB ? t1 - t : TB;
                fn(K, w, row_bytes, QX + (size_t)t * K, DX + (size_t)t * nb,
                   Y + (size_t)t * ldy + r, ldy, nr, nt);
            }
        }
    }
}

void kvv_cpu_gemm_q8_0_q8_avx2(int K, const void *W, size_t row_bytes, int n_rows,
                               const int8_t *QX, const float *DX, int n_tok, float *Y,
                               size_t ldy)
{
    gemm(block_q8, K, W, row_bytes, n_rows, QX, DX, n_tok, Y, ldy);
}

void kvv_cpu_gemm_q4_0_q8_avx2(int K, const void *W, size_t row_bytes, int n_rows,
                               const int8_t *QX, const float *DX, int n_tok, float *Y,
                               size_t ldy)
{
    gemm(block_q4, K, W, row_bytes, n_rows, QX, DX, n_tok, Y, ldy);
}

#elif defined(__x86_64__)
#error "cpu_q8dot_avx2.c must be compiled with -mavx2 -mfma -mf16c (see the Makefile)"
#endif
