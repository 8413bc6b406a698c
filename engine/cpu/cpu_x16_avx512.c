/*
 * cpu_x16_avx512.c — the X16 products with AVX-512BW (vpmaddubsw then
 * vpmaddwd, for CPUs without VNNI), and the AVX-512 table's entries, which
 * take the VNNI instance (cpu_x16_avx512vnni.c) when cpuid reports it.
 * Both give the same bits (cpu_x16.h). Also the table's Q8_0 pack.
 */
#include "engine/cpu/cpu_x16.h"

#if defined(KVV_CPU_EMULATED) ||                                                          \
    (defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) &&                \
     defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__FMA__) && defined(__F16C__))

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif
#include <string.h>

#define X16_TABLE kvv_cpu_x16_avx512bw
#define X16_DOT4(s, u, x)                                                                        \
    _mm512_add_epi32((s), _mm512_madd_epi16(_mm512_maddubs_epi16((u), (x)), ones))
/* Q8_0 without VNNI: |w| times x with w's sign (AVX-512 has no vpsignb) */
#define X16_Q8_INIT(sum) ((void)(sum), _mm512_setzero_si512())
#define X16_DOT8(s, v, x) x16_dot8_bw((s), (v), (x))

static inline __m512i x16_dot8_bw(__m512i s, __m512i v, __m512i x)
{
    const __m512i w = _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80));
    const __m512i xs = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
    return _mm512_add_epi32(
        s, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w), xs), _mm512_set1_epi16(1)));
}
#include "engine/cpu/cpu_x16_avx512_body.h"

/* __builtin_cpu_supports reads what libgcc's constructor found */
#define PICK(name, x)                                                                             \
    static void name(int K, const void *G, int nr, const kvv_cpu_x16_act *A, int nt, float *Y,   \
                     size_t ldy)                                                                  \
    {                                                                                             \
        (__builtin_cpu_supports("avx512vnni") ? kvv_cpu_x16_avx512vnni                            \
                                              : kvv_cpu_x16_avx512bw)[x](K, G, nr, A, nt, Y, ldy); \
    }
PICK(pick_q4_0, KVV_X16_Q4_0)
PICK(pick_q5_0, KVV_X16_Q5_0)
PICK(pick_q4_1, KVV_X16_Q4_1)
PICK(pick_q5_1, KVV_X16_Q5_1)
PICK(pick_q8_0, KVV_X16_Q8_0)
PICK(pick_q4_k, KVV_X16_Q4_K)

/* Q8_0: rows k and k + 8 of a group share a zmm (halves), and the 8x8
 * transpose of 4-byte groups runs in both halves at once (unpack 32, unpack
 * 64); the last step interleaves the 128-bit lanes so that chunk c holds
 * bytes 4c..4c+3 of rows 0..15 in order. Levels are w + 128 (xor 0x80);
 * rows past n_rows are zero bytes, as kvv_cpu_x16_pack's memset leaves. */
static void pack_q8_0(int K, const void *src, size_t row_bytes, int n_rows, void *dst)
{
    const int nb = K / 32;
    const size_t bb = kvv_cpu_x16_block(KVV_X16_Q8_0);
    const uint8_t *s = src;
    uint8_t *d = dst;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i lo = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
    const __m512i hi = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    for (int g = 0; g < n_rows; g += KVV_CPU_X16) {
        const int ng = n_rows - g < KVV_CPU_X16 ? n_rows - g : KVV_CPU_X16;
        const uint8_t *rows = s + (size_t)g * row_bytes;
        uint8_t *G = d + (size_t)(g / KVV_CPU_X16) * (size_t)nb * bb;
        for (int b = 0; b < nb; b++) {
            uint8_t *o = G + (size_t)b * bb;
            __m512i z[8];
            #pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const uint8_t *r0 = rows + (size_t)k * row_bytes + (size_t)b * 34 + 2;
                const uint8_t *r1 = rows + (size_t)(k + 8) * row_bytes + (size_t)b * 34 + 2;
                const __m256i a = k < ng ? _mm256_loadu_si256((const __m256i *)r0)
                                         : _mm512_castsi512_si256(flip);
                const __m256i c = k + 8 < ng ? _mm256_loadu_si256((const __m256i *)r1)
                                             : _mm512_castsi512_si256(flip);
                z[k] = _mm512_inserti64x4(_mm512_castsi256_si512(a), c, 1);
            }
            __m512i t[8], u[8];
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                t[2 * k] = _mm512_unpacklo_epi32(z[2 * k], z[2 * k + 1]);
                t[2 * k + 1] = _mm512_unpackhi_epi32(z[2 * k], z[2 * k + 1]);
            }
            #pragma GCC unroll 2
            for (int h = 0; h < 2; h++) { /* rows 0-3 (t0..t3), rows 4-7 (t4..t7) */
                u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
                u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
                u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
                u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
            }
            /* u[c] (c < 4), 128-bit lane L: rows 4*(L/2)..+3 (of 0-3 / 8-11),
             * group c + 4*(L%2); u[c + 4] the same for rows 4-7 / 12-15 */
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                _mm512_storeu_si512((void *)(o + 32 + 64 * c),
                                    _mm512_xor_si512(_mm512_permutex2var_epi64(u[c], lo, u[c + 4]), flip));
                _mm512_storeu_si512((void *)(o + 32 + 64 * (c + 4)),
                                    _mm512_xor_si512(_mm512_permutex2var_epi64(u[c], hi, u[c + 4]), flip));
            }
            for (int i = 0; i < KVV_CPU_X16; i++) {
                uint16_t dw = 0;
                if (i < ng)
                    memcpy(&dw, rows + (size_t)i * row_bytes + (size_t)b * 34, 2);
                memcpy(o + 2 * i, &dw, 2);
            }
        }
    }
}

const kvv_cpu_x16_pack_fn kvv_cpu_x16_pack_avx512[KVV_X16_COUNT] = {
    [KVV_X16_Q8_0] = pack_q8_0,
};

const kvv_cpu_x16_fn kvv_cpu_x16_avx512[KVV_X16_COUNT] = {pick_q4_0, pick_q5_0, pick_q4_1,
                                                          pick_q5_1, pick_q8_0, pick_q4_k};

#elif defined(__x86_64__)
#error "cpu_x16_avx512.c must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq (see the Makefile)"
#endif
