/*
 * cpu_x16_avx512_body.h — the AVX-512 X16 products (cpu_x16.h), written
 * once for their two instances: cpu_x16_avx512.c (AVX-512BW: vpmaddubsw +
 * vpmaddwd) and cpu_x16_avx512vnni.c (vpdpbusd). Include only from those,
 * after defining
 *   X16_TABLE           the name of the kvv_cpu_x16_fn array to define;
 *   X16_DOT4(s, u, x)   s + the 16 lanes' sums of 4 u8*s8 products.
 *   X16_Q8_INIT(sum)    a Q8_0 block's starting int32 (from the q's sum);
 *   X16_DOT8(s, v, x)   s + the lanes' sums of 4 products of Q8_0 weights
 *                       (v: levels w + 128) and activations.
 * Both give the same exact int32 sums (pairs of products at most 2*31*127
 * in vpmaddubsw; Q8_0 there as |w| * sign(x, w), at most 2*128*127), so
 * the same bits.
 *
 * Tiles: one 16-row group (lane = row) by up to TT tokens. Per block the
 * group's 4 chunks are loaded once and split into low and high nibbles
 * (with the Q5 types' fifth bit: the lane's high-bit byte broadcast to its
 * 4 bytes, tested against each byte's bit, +16 where set); each token's
 * 4-byte groups of activations are broadcast against them. Then per 16
 * outputs: one conversion, one rounded multiply (dw * dx) and one fused
 * multiply-add (two with a minimum).
 */
#include <string.h>

#define TT 8 /* tokens per tile: 8 int32 + 8 float accumulators */

static inline int32_t x16_rd32(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Store the first nr lanes of f at y (SIMDe 0.7.4 has no masked store). */
static inline void x16_store(__m512 f, int nr, float *y)
{
    if (nr == KVV_CPU_X16) {
        _mm512_storeu_ps(y, f);
    } else {
        float v[KVV_CPU_X16];
        _mm512_storeu_ps(v, f);
        memcpy(y, v, sizeof(float) * (size_t)nr);
    }
}

/* Per dword lane: its byte k (of the 4 in the lane) in all 4 bytes. */
static inline __m512i x16_spread(int k)
{
    const int b = 0x01010101;
    return _mm512_set_epi32((12 + k) * b, (8 + k) * b, (4 + k) * b, k * b, (12 + k) * b,
                            (8 + k) * b, (4 + k) * b, k * b, (12 + k) * b, (8 + k) * b,
                            (4 + k) * b, k * b, (12 + k) * b, (8 + k) * b, (4 + k) * b, k * b);
}

static inline __attribute__((always_inline)) void
x16_tile(const kvv_x16 x, const int nb, const uint8_t *g, const kvv_cpu_x16_act *A,
         const size_t t0, const int K, const int nt, const int nr, float *Y, const size_t ldy)
{
    const size_t bb = kvv_cpu_x16_block(x), nib = kvv_cpu_x16_nib(x), qho = kvv_cpu_x16_qh(x);
    const int min = kvv_cpu_x16_has_min(x), five = kvv_cpu_x16_has_qh(x);
    const int n_nib = x == KVV_X16_Q8_0 ? 0 : 4;
    const int32_t off = -kvv_cpu_x16_offset(x);
    (void)off;
    const __m512i low = _mm512_set1_epi8(0x0F);
    const __m512i ones = _mm512_set1_epi16(1);
    const __m512i sixteen = _mm512_set1_epi8(16);
    /* bit j (+4 for odd chunks) of byte j of each lane */
    const __m512i bit0 = _mm512_set1_epi32(0x08040201), bit1 = _mm512_set1_epi32((int)0x80402010);
    (void)ones, (void)sixteen, (void)bit0, (void)bit1;
    __m512 f[TT];
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        f[t] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)b * bb;
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)o));
        __m512i qh = _mm512_setzero_si512();
        if (five)
            qh = _mm512_loadu_si512((const void *)(o + qho));
        __m512i s[TT];
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            s[t] = min ? _mm512_setzero_si512()
                   : x == KVV_X16_Q8_0 ? X16_Q8_INIT(A->sum[(t0 + (size_t)t) * nb + b])
                                       : _mm512_set1_epi32(off * A->sum[(t0 + (size_t)t) * nb + b]);
        if (x == KVV_X16_Q8_0) { /* 8 chunks of unsigned levels, no nibbles */
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const __m512i v = _mm512_loadu_si512((const void *)(o + 32 + 64 * c));
                #pragma GCC unroll 8
                for (int t = 0; t < nt; t++) {
                    const int8_t *q = A->q + (t0 + (size_t)t) * K + 32 * b;
                    s[t] = X16_DOT8(s[t], v, _mm512_set1_epi32(x16_rd32(q + 4 * c)));
                }
            }
        }
        #pragma GCC unroll 4
        for (int c = 0; c < n_nib; c++) { /* none for Q8_0 */
            const __m512i v = _mm512_loadu_si512((const void *)(o + nib + 64 * c));
            __m512i lo = _mm512_and_si512(v, low);
            __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
            if (five) { /* elements 4c+j: qh byte c/2; 16+4c+j: byte 2+c/2 */
                const __m512i sel = c % 2 ? bit1 : bit0;
                const __mmask64 kl =
                    _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, x16_spread(c / 2)), sel);
                const __mmask64 kh =
                    _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, x16_spread(2 + c / 2)), sel);
                lo = _mm512_mask_add_epi8(lo, kl, lo, sixteen);
                hi = _mm512_mask_add_epi8(hi, kh, hi, sixteen);
            }
            #pragma GCC unroll 8
            for (int t = 0; t < nt; t++) {
                const int8_t *q = A->q + (t0 + (size_t)t) * K + 32 * b;
                s[t] = X16_DOT4(s[t], lo, _mm512_set1_epi32(x16_rd32(q + 4 * c)));
                s[t] = X16_DOT4(s[t], hi, _mm512_set1_epi32(x16_rd32(q + 16 + 4 * c)));
            }
        }
        __m512 mw = _mm512_setzero_ps();
        if (min)
            mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 32)));
        #pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            const size_t tb = (t0 + (size_t)t) * nb + b;
            const __m512 p = _mm512_mul_ps(dw, _mm512_set1_ps(A->d[tb]));
            f[t] = _mm512_fmadd_ps(p, _mm512_cvtepi32_ps(s[t]), f[t]);
            if (min)
                f[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(A->s[tb]), f[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        x16_store(f[t], nr, Y + (size_t)t * ldy);
}

static inline __attribute__((always_inline)) void
x16_gemm(const kvv_x16 x, int K, const void *G, int n_rows, const kvv_cpu_x16_act *A, int n_tok,
         float *Y, size_t ldy)
{
    const int nb = K / 32;
    const size_t gstride = (size_t)nb * kvv_cpu_x16_block(x);
    for (int r = 0; r < n_rows; r += KVV_CPU_X16) {
        const uint8_t *g = (const uint8_t *)G + (size_t)(r / KVV_CPU_X16) * gstride;
        const int nr = n_rows - r < KVV_CPU_X16 ? n_rows - r : KVV_CPU_X16;
        for (int t = 0; t < n_tok; t += TT) {
            const int nt = n_tok - t < TT ? n_tok - t : TT;
            float *y = Y + (size_t)t * ldy + r;
            switch (nt) {
            case 8: x16_tile(x, nb, g, A, (size_t)t, K, 8, nr, y, ldy); break;
            case 7: x16_tile(x, nb, g, A, (size_t)t, K, 7, nr, y, ldy); break;
            case 6: x16_tile(x, nb, g, A, (size_t)t, K, 6, nr, y, ldy); break;
            case 5: x16_tile(x, nb, g, A, (size_t)t, K, 5, nr, y, ldy); break;
            case 4: x16_tile(x, nb, g, A, (size_t)t, K, 4, nr, y, ldy); break;
            case 3: x16_tile(x, nb, g, A, (size_t)t, K, 3, nr, y, ldy); break;
            case 2: x16_tile(x, nb, g, A, (size_t)t, K, 2, nr, y, ldy); break;
            default: x16_tile(x, nb, g, A, (size_t)t, K, 1, nr, y, ldy); break;
            }
        }
    }
}

#define X16_FN(name, x)                                                                           \
    static void name(int K, const void *G, int nr, const kvv_cpu_x16_act *A, int nt, float *Y,   \
                     size_t ldy)                                                                  \
    {                                                                                             \
        x16_gemm(x, K, G, nr, A, nt, Y, ldy);                                                     \
    }
X16_FN(x16_q4_0, KVV_X16_Q4_0)
X16_FN(x16_q5_0, KVV_X16_Q5_0)
X16_FN(x16_q4_1, KVV_X16_Q4_1)
X16_FN(x16_q5_1, KVV_X16_Q5_1)
X16_FN(x16_q8_0, KVV_X16_Q8_0)
#undef X16_FN

#include "engine/cpu/cpu_x16k_avx512_body.h"

const kvv_cpu_x16_fn X16_TABLE[KVV_X16_COUNT] = {x16_q4_0, x16_q5_0, x16_q4_1, x16_q5_1,
                                                 x16_q8_0, x16_q4_k};

#undef TT
