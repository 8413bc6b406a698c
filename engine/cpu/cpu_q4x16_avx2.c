/*
 * cpu_q4x16_avx2.c — the X16 Q4_0 product with AVX2 (order, layout and
 * bits: cpu_q4x16.h). A 16-row group is two halves of 8 rows (lane = row);
 * vpmaddubsw (u8 levels x s8 activations, pairs into int16: at most
 * 2*15*127, no saturation) then vpmaddwd by ones gives each lane the sum of
 * 4 products, the same int32 as VNNI's vpdpbusd. Tiles: 8 rows x up to TT
 * tokens.
 */
#include "engine/cpu/cpu_q4x16.h"

#if defined(KVV_CPU_EMULATED) || \
    (defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif
#include <string.h>

#define TT 4

static inline int32_t rd32(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline __attribute__((always_inline)) void
tile(const int nb, const uint8_t *g, const int half, const int8_t *QX, const float *DX,
     const int32_t *SX, const int K, const int nt, const int nr, float *Y, const size_t ldy)
{
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 f[TT];
    #pragma GCC unroll 4
    for (int t = 0; t < nt; t++)
        f[t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)b * KVV_CPU_X16_BLOCK;
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + 16 * half)));
        __m256i s[TT];
        #pragma GCC unroll 4
        for (int t = 0; t < nt; t++)
            s[t] = _mm256_set1_epi32(-8 * SX[(size_t)t * nb + b]);
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(o + 32 + 64 * c + 32 * half));
            const __m256i lo = _mm256_and_si256(v, low);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            #pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                const int8_t *q = QX + (size_t)t * K + 32 * b;
                const __m256i xl = _mm256_set1_epi32(rd32(q + 4 * c));
                const __m256i xh = _mm256_set1_epi32(rd32(q + 16 + 4 * c));
                s[t] = _mm256_add_epi32(s[t],
                                        _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), ones));
                s[t] = _mm256_add_epi32(s[t],
                                        _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), ones));
            }
        }
        #pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            const __m256 p = _mm256_mul_ps(dw, _mm256_set1_ps(DX[(size_t)t * nb + b]));
            f[t] = _mm256_fmadd_ps(p, _mm256_cvtepi32_ps(s[t]), f[t]);
        }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
        if (nr == 8) {
            _mm256_storeu_ps(Y + (size_t)t * ldy, f[t]);
        } else {
            float v[8];
            _mm256_storeu_ps(v, f[t]);
            memcpy(Y + (size_t)t * ldy, v, sizeof(float) * (size_t)nr);
        }
    }
}

void kvv_cpu_gemm_q4_0_x16_avx2(int K, const void *G, int n_rows, const int8_t *QX,
                                const float *DX, const int32_t *SX, int n_tok, float *Y,
                                size_t ldy)
{
    const int nb = K / 32;
    const size_t gstride = (size_t)nb * KVV_CPU_X16_BLOCK;
    for (int r = 0; r < n_rows; r += 8) {
        const uint8_t *g = (const uint8_t *)G + (size_t)(r / KVV_CPU_X16) * gstride;
        const int half = (r / 8) % 2;
        const int nr = n_rows - r < 8 ? n_rows - r : 8;
        for (int t = 0; t < n_tok; t += TT) {
            const int nt = n_tok - t < TT ? n_tok - t : TT;
            const int8_t *q = QX + (size_t)t * K;
            const float *dx = DX + (size_t)t * nb;
            const int32_t *sx = SX + (size_t)t * nb;
            float *y = Y + (size_t)t * ldy + r;
            switch (nt) {
            case 4: tile(nb, g, half, q, dx, sx, K, 4, nr, y, ldy); break;
            case 3: tile(nb, g, half, q, dx, sx, K, 3, nr, y, ldy); break;
            case 2: tile(nb, g, half, q, dx, sx, K, 2, nr, y, ldy); break;
            default: tile(nb, g, half, q, dx, sx, K, 1, nr, y, ldy); break;
            }
        }
    }
}

#elif defined(__x86_64__)
#error "cpu_q4x16_avx2.c must be compiled with -mavx2 -mfma -mf16c (see the Makefile)"
#endif
