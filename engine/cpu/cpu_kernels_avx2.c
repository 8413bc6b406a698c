/*
 * cpu_kernels_avx2.c — AVX2 + FMA + F16C kernels of the cpu engine
 * (compiled with -mavx2 -mfma -mf16c; selected at run time only on CPUs
 * that have all three). Reduction order: cpu_kernels.h, 8 lanes, one fused
 * multiply-add per step, fixed horizontal sum, fmaf tail.
 *
 * gemm_f32 is register-blocked 4 rows x 3 tokens (12 accumulators + 4
 * weight vectors in 16 ymm registers). Rows are the outer loop, so a
 * 4-row weight block stays in L1 while the token blocks stream past it;
 * tokens are tiled by 48 so the activation tile stays in L2. GEMV (one
 * token) streams one weight row at a time (PF_BYTES): on the 2-core EPYC
 * we measure on, 4 rows read interleaved reached 3-6 GB/s of one core's
 * ~10, one linear stream 8-10.
 * The blocking never changes an accumulator's sequence, so it is free to
 * differ between GEMV and GEMM.
 */
#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/cpu_q8dot.h"

#if defined(KVV_CPU_EMULATED) || \
    (defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif

#include "engine/cpu/cpu_avx2.h"
#include <math.h>

#include "engine/cpu/cpu_expf.h"

#define RB 4        /* rows per register block */
#define TB 3        /* tokens per register block */
#define TOK_TILE 48 /* tokens per L2 tile (a multiple of TB) */
/* GEMV: the line PF_BYTES ahead is touched once per 4 KB read, which
 * readies the next page's translation and the hardware prefetcher's stream
 * on it. On the 2-core EPYC (docs/cpu-engine.md, "F32 GEMV") that reached
 * 95-99% of the read loop, against 80-90% with a prefetch of every line. */
#define PF_BYTES 4096

#ifdef KVV_CPU_PLANT_GEMM_TILE
/* Test-only negative control (never in ./kvverify; Makefile PLANT_TILE_BIN,
 * tests/cli/test_isa.sh): full 3-token register tiles reduce their lanes
 * left to right instead of the fixed tree, so a token's bits depend on how
 * many tokens share its call — the invariant GEMM made batch-dependent,
 * which the tables check must report for this table. */
static inline float plant_hsum(__m256 a)
{
    float l[8];
    _mm256_storeu_ps(l, a);
    float s = l[0];
    for (int j = 1; j < 8; j++)
        s += l[j];
    return s;
}
#endif

static inline __attribute__((always_inline)) void block(int K, const float *W, size_t ldw,
                                                        const float *X, size_t ldx, float *Y,
                                                        size_t ldy, const int nr, const int nt)
{
    __m256 acc[RB][TB];
    #pragma GCC unroll 16
    for (int r = 0; r < nr; r++)
        #pragma GCC unroll 16
        for (int t = 0; t < nt; t++)
            acc[r][t] = _mm256_setzero_ps();
    int K8 = K & ~7;
    for (int i = 0; i < K8; i += 8) {
        if (nt == 1 && nr == 1 && (i & 1023) == 0) /* GEMV: once per 4 KB, see PF_BYTES */
            _mm_prefetch((const char *)(W + i) + PF_BYTES, _MM_HINT_T0);
        __m256 w[RB];
        #pragma GCC unroll 16
        for (int r = 0; r < nr; r++)
            w[r] = _mm256_loadu_ps(W + (size_t)r * ldw + i);
        #pragma GCC unroll 16
        for (int t = 0; t < nt; t++) {
            __m256 x = _mm256_loadu_ps(X + (size_t)t * ldx + i);
            #pragma GCC unroll 16
            for (int r = 0; r < nr; r++)
                acc[r][t] = _mm256_fmadd_ps(w[r], x, acc[r][t]);
        }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < nr; r++)
        #pragma GCC unroll 16
        for (int t = 0; t < nt; t++) {
#ifdef KVV_CPU_PLANT_GEMM_TILE
            float s = nt == TB ? plant_hsum(acc[r][t]) : kvv_avx2_hsum(acc[r][t]);
#else
            float s = kvv_avx2_hsum(acc[r][t]);
#endif
            for (int i = K8; i < K; i++)
                s = fmaf(W[(size_t)r * ldw + i], X[(size_t)t * ldx + i], s);
            Y[(size_t)t * ldy + r] = s;
        }
}

/* A row block of nr (compile-time after inlining) rows against tokens
 * [0, n_tok). */
static inline __attribute__((always_inline)) void rows_block(int K, const float *W, size_t ldw,
                                                             const float *X, size_t ldx,
                                                             int n_tok, float *Y, size_t ldy,
                                                             const int nr)
{
    int t = 0;
    for (; t + TB <= n_tok; t += TB)
        block(K, W, ldw, X + (size_t)t * ldx, ldx, Y + (size_t)t * ldy, ldy, nr, TB);
    if (n_tok - t == 2)
        block(K, W, ldw, X + (size_t)t * ldx, ldx, Y + (size_t)t * ldy, ldy, nr, 2);
    else if (n_tok - t == 1)
        block(K, W, ldw, X + (size_t)t * ldx, ldx, Y + (size_t)t * ldy, ldy, nr, 1);
}

static void avx2_gemm_f32(int K, const float *W, size_t ldw, int n_rows, const float *X,
                          size_t ldx, int n_tok, float *Y, size_t ldy)
{
    for (int t0 = 0; t0 < n_tok; t0 += TOK_TILE) {
        int nt = n_tok - t0 < TOK_TILE ? n_tok - t0 : TOK_TILE;
        const float *Xt = X + (size_t)t0 * ldx;
        float *Yt = Y + (size_t)t0 * ldy;
        int r = 0;
        if (nt == 1) { /* GEMV: one linear stream */
            for (; r < n_rows; r++)
                block(K, W + (size_t)r * ldw, ldw, Xt, ldx, Yt + r, ldy, 1, 1);
            continue;
        }
        for (; r + RB <= n_rows; r += RB)
            rows_block(K, W + (size_t)r * ldw, ldw, Xt, ldx, nt, Yt + r, ldy, RB);
        switch (n_rows - r) {
        case 3: rows_block(K, W + (size_t)r * ldw, ldw, Xt, ldx, nt, Yt + r, ldy, 3); break;
        case 2: rows_block(K, W + (size_t)r * ldw, ldw, Xt, ldx, nt, Yt + r, ldy, 2); break;
        case 1: rows_block(K, W + (size_t)r * ldw, ldw, Xt, ldx, nt, Yt + r, ldy, 1); break;
        default: break;
        }
    }
}

static float avx2_dot(int K, const float *a, const float *b)
{
    float y;
    block(K, a, 0, b, 0, &y, 0, 1, 1);
    return y;
}

/* 8 dequantized weights of a Q8_0 block: (float)q * d. */
static inline __m256 q8_w(const int8_t *q, __m256 d)
{
    __m128i b = _mm_loadl_epi64((const __m128i *)q);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), d);
}

/* Q8_0 block: 2-byte fp16 d, then 32 int8. */
static inline __attribute__((always_inline)) void q8_block(int K, const uint8_t *W,
                                                           size_t row_bytes, const float *X,
                                                           size_t ldx, float *Y, size_t ldy,
                                                           const int nr, const int nt)
{
    __m256 acc[RB][TB];
    #pragma GCC unroll 16
    for (int r = 0; r < nr; r++)
        #pragma GCC unroll 16
        for (int t = 0; t < nt; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (int b = 0; b < K / 32; b++) {
        if (nt == 1 && nr == 1) /* GEMV streams weights from DRAM */
            _mm_prefetch((const char *)(W + (size_t)b * 34) + PF_BYTES, _MM_HINT_T0);
        #pragma GCC unroll 16
        for (int r = 0; r < nr; r++) {
            const uint8_t *blk = W + (size_t)r * row_bytes + (size_t)b * 34;
            __m256 d = _mm256_set1_ps(kvv_avx2_fp16(blk));
            const int8_t *q = (const int8_t *)(blk + 2);
            #pragma GCC unroll 16
            for (int j = 0; j < 4; j++) {
                __m256 w = q8_w(q + 8 * j, d);
                #pragma GCC unroll 16
                for (int t = 0; t < nt; t++)
                    acc[r][t] = _mm256_fmadd_ps(
                        w, _mm256_loadu_ps(X + (size_t)t * ldx + (size_t)b * 32 + 8 * j),
                        acc[r][t]);
            }
        }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < nr; r++)
        #pragma GCC unroll 16
        for (int t = 0; t < nt; t++)
            Y[(size_t)t * ldy + r] = kvv_avx2_hsum(acc[r][t]);
}

static void avx2_gemv_q8_0(int K, const void *W, size_t row_bytes, int n_rows, const float *X,
                           size_t ldx, int n_tok, float *Y, size_t ldy)
{
    const uint8_t *wb = W;
    for (int t = 0; t < n_tok; t += TB) {
        int nt = n_tok - t < TB ? n_tok - t : TB;
        const float *Xt = X + (size_t)t * ldx;
        float *Yt = Y + (size_t)t * ldy;
        int r = 0;
        if (nt == 1) { /* GEMV: one linear stream */
            for (; r < n_rows; r++)
                q8_block(K, wb + (size_t)r * row_bytes, row_bytes, Xt, ldx, Yt + r, ldy, 1, 1);
            continue;
        }
        for (; r + RB <= n_rows; r += RB) {
            const uint8_t *w = wb + (size_t)r * row_bytes;
            if (nt == 3)
                q8_block(K, w, row_bytes, Xt, ldx, Yt + r, ldy, RB, 3);
            else if (nt == 2)
                q8_block(K, w, row_bytes, Xt, ldx, Yt + r, ldy, RB, 2);
            else
                q8_block(K, w, row_bytes, Xt, ldx, Yt + r, ldy, RB, 1);
        }
        for (; r < n_rows; r++) {
            const uint8_t *w = wb + (size_t)r * row_bytes;
            if (nt == 3)
                q8_block(K, w, row_bytes, Xt, ldx, Yt + r, ldy, 1, 3);
            else if (nt == 2)
                q8_block(K, w, row_bytes, Xt, ldx, Yt + r, ldy, 1, 2);
            else
                q8_block(K, w, row_bytes, Xt, ldx, Yt + r, ldy, 1, 1);
        }
    }
}

static void avx2_gemv_q8_0_x4(int K, const void *G, int n_groups, const float *x, float *y)
{
    const int nb = K / 32;
    const uint8_t *g4 = G;
    for (int g = 0; g < n_groups; g++, g4 += (size_t)nb * 4 * 34) {
        __m256 acc[4];
        #pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            acc[i] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const uint8_t *blk4 = g4 + (size_t)b * 4 * 34; /* 136 bytes, 4 rows */
            _mm_prefetch((const char *)blk4 + PF_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *)blk4 + PF_BYTES + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)blk4 + PF_BYTES + 128, _MM_HINT_T0);
            #pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                const uint8_t *blk = blk4 + i * 34;
                const __m256 d = _mm256_set1_ps(kvv_avx2_fp16(blk));
                const int8_t *q = (const int8_t *)(blk + 2);
                #pragma GCC unroll 4
                for (int j = 0; j < 4; j++)
                    acc[i] = _mm256_fmadd_ps(q8_w(q + 8 * j, d),
                                             _mm256_loadu_ps(x + (size_t)b * 32 + 8 * j), acc[i]);
            }
        }
        #pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            y[4 * g + i] = kvv_avx2_hsum(acc[i]);
    }
}

static void avx2_axpy(int n, float a, const float *x, float *y)
{
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

/* Columns [0, 8*NV) of the weighted sums of NH heads, in NH*NV registers;
 * a head whose weight is 0 skips the key (as the axpy loop does). */
static inline __attribute__((always_inline)) void wsum_block(int n, const float *w, size_t ldw,
                                                             const float *V, size_t ldv, float *o,
                                                             size_t ldo, const int NH,
                                                             const int NV)
{
    __m256 acc[3][4];
    #pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
        #pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            acc[h][v] = _mm256_setzero_ps();
    for (int p = 0; p < n; p++) {
        const float *row = V + (size_t)p * ldv;
        _mm_prefetch((const char *)(row + 8 * ldv), _MM_HINT_T0);
        __m256 x[4];
        #pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            x[v] = _mm256_loadu_ps(row + 8 * v);
        #pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            const float wp = w[(size_t)h * ldw + p];
            if (wp == 0.0f)
                continue;
            const __m256 a = _mm256_set1_ps(wp);
            #pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                acc[h][v] = _mm256_fmadd_ps(a, x[v], acc[h][v]);
        }
    }
    #pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
        #pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            _mm256_storeu_ps(o + (size_t)h * ldo + 8 * v, acc[h][v]);
}

#define WSUM_NV(NH)                                                                               \
    do {                                                                                          \
        int c = 0;                                                                                \
        for (; c + 32 <= D; c += 32)                                                              \
            wsum_block(n, wh, ldw, V + c, ldv, oh + c, ldo, NH, 4);                              \
        for (; c + 8 <= D; c += 8)                                                                \
            wsum_block(n, wh, ldw, V + c, ldv, oh + c, ldo, NH, 1);                              \
    } while (0)

static void avx2_wsum(int n, int D, int nh, const float *w, size_t ldw, const float *V,
                      size_t ldv, float *o, size_t ldo)
{
    for (int h0 = 0; h0 < nh; h0 += 3) { /* up to 3 heads share each value row */
        const float *wh = w + (size_t)h0 * ldw;
        float *oh = o + (size_t)h0 * ldo;
        if (nh - h0 >= 3)
            WSUM_NV(3);
        else if (nh - h0 == 2)
            WSUM_NV(2);
        else
            WSUM_NV(1);
    }
    kvv_cpu_wsum_tail(D - D % 8, n, D, nh, w, ldw, V, ldv, o, ldo);
}

void kvv_cpu_wsum_tail(int c0, int n, int D, int nh, const float *w, size_t ldw,
                       const float *V, size_t ldv, float *o, size_t ldo)
{
    for (int c = c0; c < D; c++) /* as the axpy kernels' scalar tails: fused steps */
        for (int h = 0; h < nh; h++) {
            float s = 0.0f;
            for (int p = 0; p < n; p++)
                if (w[(size_t)h * ldw + p] != 0.0f)
                    s = fmaf(w[(size_t)h * ldw + p], V[(size_t)p * ldv + c], s);
            o[(size_t)h * ldo + c] = s;
        }
}

static float avx2_sum(int n, const float *x)
{
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + i));
    float s = kvv_avx2_hsum(acc);
    for (; i < n; i++)
        s = s + x[i];
    return s;
}

void kvv_cpu_avx2_scale(int n, float *x, float a)
{
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), va));
    for (; i < n; i++)
        x[i] = x[i] * a;
}

/* 8 fp16 -> fp32. F16C converts exactly and quiets a NaN keeping its
 * payload, as kvv_fp16_to_fp32 does (K12); the quiet bit is set again here
 * because SIMDe's emulation of vcvtph2ps (the test build) leaves it. */
static inline __m256 widen8_f16(const uint16_t *src)
{
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)src));
    const __m256 quiet = _mm256_castsi256_ps(_mm256_set1_epi32(0x400000));
    return _mm256_or_ps(v, _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), quiet));
}

/* The tail goes through a zero-padded vector. */
void kvv_cpu_avx2_widen_f16(int n, const uint16_t *src, float *dst)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, widen8_f16(src + i));
    if (i < n) {
        uint16_t h[8] = {0};
        float f[8];
        memcpy(h, src + i, sizeof(uint16_t) * (size_t)(n - i));
        _mm256_storeu_ps(f, widen8_f16(h));
        memcpy(dst + i, f, sizeof(float) * (size_t)(n - i));
    }
}

/* bf16 is the top half of an fp32: a shift, NaNs untouched (K12). */
void kvv_cpu_avx2_widen_bf16(int n, const uint16_t *src, float *dst)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++) {
        const uint32_t u = (uint32_t)src[i] << 16;
        memcpy(dst + i, &u, sizeof u);
    }
}

static void avx2_dequant_q8_0(const void *src, float *dst, int n)
{
    const uint8_t *p = src;
    for (int b = 0; b < n / 32; b++, p += 34) {
        __m256 d = _mm256_set1_ps(kvv_avx2_fp16(p));
        for (int j = 0; j < 4; j++)
            _mm256_storeu_ps(dst + b * 32 + 8 * j, q8_w((const int8_t *)(p + 2) + 8 * j, d));
    }
}

/* Q4_0 block: fp16 d, 16 bytes; element j = (lo nibble of byte j) - 8,
 * element j+16 = (hi nibble of byte j) - 8; weight = (float)q * d. */
static void avx2_dequant_q4_0(const void *src, float *dst, int n)
{
    const uint8_t *p = src;
    const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    for (int b = 0; b < n / 32; b++, p += 18) {
        __m256 d = _mm256_set1_ps(kvv_avx2_fp16(p));
        __m128i qs = _mm_loadu_si128((const __m128i *)(p + 2));
        __m128i lo = _mm_sub_epi8(_mm_and_si128(qs, m4), eight);
        __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), m4), eight);
        float *o = dst + b * 32;
        _mm256_storeu_ps(o + 0, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
        _mm256_storeu_ps(o + 8, _mm256_mul_ps(
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
        _mm256_storeu_ps(o + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
        _mm256_storeu_ps(o + 24, _mm256_mul_ps(
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
    }
}


/* exp of 8 lanes: exactly the operations of kvv_cpu_expf_inline. */
static inline __m256 exp8(__m256 x)
{
    __m256 kf = _mm256_mul_ps(x, _mm256_set1_ps(KVV_CPU_LOG2E));
    __m256 half = _mm256_blendv_ps(_mm256_set1_ps(-0.5f), _mm256_set1_ps(0.5f),
                                   _mm256_cmp_ps(kf, _mm256_setzero_ps(), _CMP_GE_OQ));
    __m256i k = _mm256_cvttps_epi32(_mm256_add_ps(kf, half));
    __m256 fk = _mm256_cvtepi32_ps(k);
    __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(fk, _mm256_set1_ps(KVV_CPU_LN2_HI))),
                             _mm256_mul_ps(fk, _mm256_set1_ps(KVV_CPU_LN2_LO)));
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.5f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    __m256i big = _mm256_cmpgt_epi32(k, _mm256_set1_epi32(127));
    p = _mm256_blendv_ps(p, _mm256_mul_ps(p, _mm256_set1_ps(2.0f)), _mm256_castsi256_ps(big));
    k = _mm256_add_epi32(k, big); /* big lanes are -1: k - 1 */
    __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
    __m256 y = _mm256_mul_ps(p, scale);
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(),
                         _mm256_cmp_ps(x, _mm256_set1_ps(KVV_CPU_EXP_LO), _CMP_LT_OQ));
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY),
                         _mm256_cmp_ps(x, _mm256_set1_ps(KVV_CPU_EXP_HI), _CMP_GT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static void avx2_silu_mul(int n, float *g, const float *u)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++)
        g[i] = kvv_cpu_silu_mul_inline(g[i], u[i]);
}

static void avx2_exp_shift(int n, const float *s, float m, float *e)
{
    int i = 0;
    __m256 vm = _mm256_set1_ps(m), ninf = _mm256_set1_ps(-INFINITY);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(s + i);
        __m256 y = exp8(_mm256_sub_ps(x, vm));
        _mm256_storeu_ps(e + i, _mm256_blendv_ps(y, _mm256_setzero_ps(),
                                                 _mm256_cmp_ps(x, ninf, _CMP_EQ_OQ)));
    }
    for (; i < n; i++)
        e[i] = s[i] == -INFINITY ? 0.0f : kvv_cpu_expf_inline(s[i] - m);
}

const kvv_cpu_kernels kvv_cpu_kernels_avx2 = {
    .name = "avx2",
    .lanes = 8,
    .fused = 1,
    .gemm_f32 = avx2_gemm_f32,
    .gemv_q8_0 = avx2_gemv_q8_0,
    .gemv_q8_0_x4 = avx2_gemv_q8_0_x4,
    .dot = avx2_dot,
    .axpy = avx2_axpy,
    .wsum = avx2_wsum,
    .sum = avx2_sum,
    .scale = kvv_cpu_avx2_scale,
    .widen_f16 = kvv_cpu_avx2_widen_f16,
    .widen_bf16 = kvv_cpu_avx2_widen_bf16,
    .dequant_q8_0 = avx2_dequant_q8_0,
    .dequant_q4_0 = avx2_dequant_q4_0,
    .silu_mul = avx2_silu_mul,
    .exp_shift = avx2_exp_shift,
    .quantize_act = kvv_cpu_quantize_act_avx2,
    .gemm_q8_0_q8 = kvv_cpu_gemm_q8_0_q8_avx2,
    .gemm_q4_0_q8 = kvv_cpu_gemm_q4_0_q8_avx2,
    .quantize_q8_k = kvv_cpu_quantize_q8_k_avx2,
    .quantize_q8_1 = kvv_cpu_quantize_q8_1_avx2,
    .gemm_kq = kvv_cpu_kq_avx2,
    .pack_x16 = kvv_cpu_x16_pack_none,
    .rows_x16 = kvv_cpu_x16_rows_avx2,
    .gemm_x16 = kvv_cpu_x16_avx2,
};

#elif defined(__x86_64__)
#error "cpu_kernels_avx2.c must be compiled with -mavx2 -mfma -mf16c (see the Makefile)"
#endif
