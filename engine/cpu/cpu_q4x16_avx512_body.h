/*
 * cpu_q4x16_avx512_body.h — the AVX-512 X16 product (cpu_q4x16.h), written
 * once for its two instances: cpu_q4x16_avx512.c (AVX-512BW: vpmaddubsw +
 * vpmaddwd) and cpu_q4x16_avx512vnni.c (vpdpbusd). Include only from those,
 * after defining
 *   Q4X16_NAME          the function to define;
 *   Q4X16_DOT4(s, u, x) s + the 16 lanes' sums of 4 u8*s8 products.
 * Both give the same exact int32 sums (|products| <= 15*127, no int16
 * saturation in vpmaddubsw), so the same bits.
 *
 * Tiles: one 16-row group (lane = row) by up to TT tokens. Per block the
 * group's 4 chunks are loaded once and split into low and high nibbles;
 * each token's 4-byte groups of activations are broadcast against them.
 * The int32 block sum starts at -8 * s_b, then one conversion, one rounded
 * multiply (dw * dx) and one fused multiply-add per 16 outputs.
 */
#include <string.h>

#define TT 8 /* tokens per tile: 8 int32 + 8 float accumulators */

static inline int32_t q4x16_rd32(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline __attribute__((always_inline)) void
q4x16_tile(const int nb, const uint8_t *g, const int8_t *QX, const float *DX, const int32_t *SX,
           const int K, const int nt, const int nr, float *Y, const size_t ldy)
{
    const __m512i low = _mm512_set1_epi8(0x0F);
    const __m512i ones = _mm512_set1_epi16(1);
    (void)ones;
    __m512 f[TT];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        f[t] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)b * KVV_CPU_X16_BLOCK;
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)o));
        __m512i s[TT];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            s[t] = _mm512_set1_epi32(-8 * SX[(size_t)t * nb + b]);
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512((const void *)(o + 32 + 64 * c));
            const __m512i lo = _mm512_and_si512(v, low);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
            #pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                const int8_t *q = QX + (size_t)t * K + 32 * b;
                s[t] = Q4X16_DOT4(s[t], lo, _mm512_set1_epi32(q4x16_rd32(q + 4 * c)));
                s[t] = Q4X16_DOT4(s[t], hi, _mm512_set1_epi32(q4x16_rd32(q + 16 + 4 * c)));
            }
        }
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const __m512 p = _mm512_mul_ps(dw, _mm512_set1_ps(DX[(size_t)t * nb + b]));
            f[t] = _mm512_fmadd_ps(p, _mm512_cvtepi32_ps(s[t]), f[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        if (nr == KVV_CPU_X16) {
            _mm512_storeu_ps(Y + (size_t)t * ldy, f[t]);
        } else { /* the last group's rows only (SIMDe 0.7.4 has no masked store) */
            float v[KVV_CPU_X16];
            _mm512_storeu_ps(v, f[t]);
            memcpy(Y + (size_t)t * ldy, v, sizeof(float) * (size_t)nr);
        }
    }
}

void Q4X16_NAME(int K, const void *G, int n_rows, const int8_t *QX, const float *DX,
                const int32_t *SX, int n_tok, float *Y, size_t ldy)
{
    const int nb = K / 32;
    const size_t gstride = (size_t)nb * KVV_CPU_X16_BLOCK;
    for (int r = 0; r < n_rows; r += KVV_CPU_X16) {
        const uint8_t *g = (const uint8_t *)G + (size_t)(r / KVV_CPU_X16) * gstride;
        const int nr = n_rows - r < KVV_CPU_X16 ? n_rows - r : KVV_CPU_X16;
        for (int t = 0; t < n_tok; t += TT) {
            const int nt = n_tok - t < TT ? n_tok - t : TT;
            const int8_t *q = QX + (size_t)t * K;
            const float *dx = DX + (size_t)t * nb;
            const int32_t *sx = SX + (size_t)t * nb;
            float *y = Y + (size_t)t * ldy + r;
            switch (nt) {
            case 8: q4x16_tile(nb, g, q, dx, sx, K, 8, nr, y, ldy); break;
            case 7: q4x16_tile(nb, g, q, dx, sx, K, 7, nr, y, ldy); break;
            case 6: q4x16_tile(nb, g, q, dx, sx, K, 6, nr, y, ldy); break;
            case 5: q4x16_tile(nb, g, q, dx, sx, K, 5, nr, y, ldy); break;
            case 4: q4x16_tile(nb, g, q, dx, sx, K, 4, nr, y, ldy); break;
            case 3: q4x16_tile(nb, g, q, dx, sx, K, 3, nr, y, ldy); break;
            case 2: q4x16_tile(nb, g, q, dx, sx, K, 2, nr, y, ldy); break;
            default: q4x16_tile(nb, g, q, dx, sx, K, 1, nr, y, ldy); break;
            }
        }
    }
}

#undef TT
