/*
 * cpu_x16_avx2.c — the X16 products with AVX2 (order, layout and bits:
 * cpu_x16.h). A 16-row group is two halves of 8 rows (lane = row);
 * vpmaddubsw (u8 levels x s8 activations, pairs into int16: at most
 * 2*31*127, no saturation; Q8_0 as |w| * sign(x, w), at most 2*128*127)
 * then vpmaddwd by ones gives each lane the sum of 4 products, the same
 * int32 as VNNI's vpdpbusd. Tiles: 8 rows x up to TT tokens. Also the
 * one-token Q8_0 product on the file's rows (rows_x16; the AVX-512 table
 * uses it too).
 */
#include "engine/cpu/cpu_x16.h"

#if defined(KVV_CPU_EMULATED) || \
    (defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif
#include <string.h>

#include "engine/cpu/cpu_avx2.h"

#define TT 4

static inline int32_t rd32(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Per dword lane: its byte k (of the 4 in the lane) in all 4 bytes. */
static inline __m256i spread(int k)
{
    const int b = 0x01010101;
    return _mm256_set_epi32((12 + k) * b, (8 + k) * b, (4 + k) * b, k * b, (12 + k) * b,
                            (8 + k) * b, (4 + k) * b, k * b);
}

/* v + 16 in the bytes whose bit `sel` is set in the broadcast qh bytes. */
static inline __m256i add_fifth(__m256i v, __m256i qh, int k, __m256i sel)
{
    const __m256i h = _mm256_and_si256(_mm256_shuffle_epi8(qh, spread(k)), sel);
    const __m256i m = _mm256_cmpeq_epi8(h, sel);
    return _mm256_or_si256(v, _mm256_and_si256(m, _mm256_set1_epi8(16)));
}

static inline __attribute__((always_inline)) void
tile(const kvv_x16 x, const int nb, const uint8_t *g, const int half, const kvv_cpu_x16_act *A,
     const size_t t0, const int K, const int nt, const int nr, float *Y, const size_t ldy)
{
    const size_t bb = kvv_cpu_x16_block(x), nib = kvv_cpu_x16_nib(x), qho = kvv_cpu_x16_qh(x);
    const int min = kvv_cpu_x16_has_min(x), five = kvv_cpu_x16_has_qh(x);
    const int n_nib = x == KVV_X16_Q8_0 ? 0 : 4;
    const int32_t off = -kvv_cpu_x16_offset(x);
    const __m256i low = _mm256_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i bit0 = _mm256_set1_epi32(0x08040201), bit1 = _mm256_set1_epi32((int)0x80402010);
    __m256 f[TT];
    #pragma GCC unroll 4
    for (int t = 0; t < nt; t++)
        f[t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)b * bb;
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + 16 * half)));
        __m256i qh = _mm256_setzero_si256();
        if (five)
            qh = _mm256_loadu_si256((const __m256i *)(o + qho + 32 * half));
        __m256i s[TT];
        #pragma GCC unroll 4
        for (int t = 0; t < nt; t++) /* Q8_0 takes |w| * sign(x, w) below: no offset */
            s[t] = min || x == KVV_X16_Q8_0
                       ? _mm256_setzero_si256()
                       : _mm256_set1_epi32(off * A->sum[(t0 + (size_t)t) * nb + b]);
        if (x == KVV_X16_Q8_0) {
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const __m256i w = _mm256_xor_si256(
                    _mm256_loadu_si256((const __m256i *)(o + 32 + 64 * c + 32 * half)),
                    _mm256_set1_epi8((char)0x80));
                const __m256i aw = _mm256_sign_epi8(w, w);
                #pragma GCC unroll 4
                for (int t = 0; t < nt; t++) {
                    const int8_t *q = A->q + (t0 + (size_t)t) * K + 32 * b;
                    const __m256i xq = _mm256_sign_epi8(_mm256_set1_epi32(rd32(q + 4 * c)), w);
                    s[t] = _mm256_add_epi32(s[t],
                                            _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xq), ones));
                }
            }
        }
        #pragma GCC unroll 4
        for (int c = 0; c < n_nib; c++) { /* none for Q8_0 */
            const __m256i v = _mm256_loadu_si256((const __m256i *)(o + nib + 64 * c + 32 * half));
            __m256i lo = _mm256_and_si256(v, low);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            if (five) { /* elements 4c+j: qh byte c/2; 16+4c+j: byte 2+c/2 */
                lo = add_fifth(lo, qh, c / 2, c % 2 ? bit1 : bit0);
                hi = add_fifth(hi, qh, 2 + c / 2, c % 2 ? bit1 : bit0);
            }
            #pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                const int8_t *q = A->q + (t0 + (size_t)t) * K + 32 * b;
                const __m256i xl = _mm256_set1_epi32(rd32(q + 4 * c));
                const __m256i xh = _mm256_set1_epi32(rd32(q + 16 + 4 * c));
                s[t] = _mm256_add_epi32(s[t],
                                        _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), ones));
                s[t] = _mm256_add_epi32(s[t],
                                        _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), ones));
            }
        }
        __m256 mw = _mm256_setzero_ps();
        if (min)
            mw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(o + 32 + 16 * half)));
        #pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            const size_t tb = (t0 + (size_t)t) * nb + b;
            const __m256 p = _mm256_mul_ps(dw, _mm256_set1_ps(A->d[tb]));
            f[t] = _mm256_fmadd_ps(p, _mm256_cvtepi32_ps(s[t]), f[t]);
            if (min)
                f[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(A->s[tb]), f[t]);
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

static inline __attribute__((always_inline)) void
gemm(const kvv_x16 x, int K, const void *G, int n_rows, const kvv_cpu_x16_act *A, int n_tok,
     float *Y, size_t ldy)
{
    const int nb = K / 32;
    const size_t gstride = (size_t)nb * kvv_cpu_x16_block(x);
    for (int r = 0; r < n_rows; r += 8) {
        const uint8_t *g = (const uint8_t *)G + (size_t)(r / KVV_CPU_X16) * gstride;
        const int half = (r / 8) % 2;
        const int nr = n_rows - r < 8 ? n_rows - r : 8;
        for (int t = 0; t < n_tok; t += TT) {
            const int nt = n_tok - t < TT ? n_tok - t : TT;
            float *y = Y + (size_t)t * ldy + r;
            switch (nt) {
            case 4: tile(x, nb, g, half, A, (size_t)t, K, 4, nr, y, ldy); break;
            case 3: tile(x, nb, g, half, A, (size_t)t, K, 3, nr, y, ldy); break;
            case 2: tile(x, nb, g, half, A, (size_t)t, K, 2, nr, y, ldy); break;
            default: tile(x, nb, g, half, A, (size_t)t, K, 1, nr, y, ldy); break;
            }
        }
    }
}

#define X16_FN(name, x)                                                                           \
    static void name(int K, const void *G, int nr, const kvv_cpu_x16_act *A, int nt, float *Y,   \
                     size_t ldy)                                                                  \
    {                                                                                             \
        gemm(x, K, G, nr, A, nt, Y, ldy);                                                         \
    }
X16_FN(x16_q4_0, KVV_X16_Q4_0)
X16_FN(x16_q5_0, KVV_X16_Q5_0)
X16_FN(x16_q4_1, KVV_X16_Q4_1)
X16_FN(x16_q5_1, KVV_X16_Q5_1)
X16_FN(x16_q8_0, KVV_X16_Q8_0)

#define QR 8   /* rows_q8_0: rows per tile */
#define QB 256 /* ... and blocks per pass (8192 columns) */
#define QPF 2048 /* ... prefetch distance in bytes */

/* Exact sums and dw*dx of blocks b0..b0+n8-1 (n8 <= 8) of one row, stored
 * by block: sf[b0+i][r], pv[b0+i][r]. */
static inline __attribute__((always_inline)) void q8_row8(const uint8_t *row, const kvv_cpu_x16_act *A,
                                                          int b0, int n8, int r,
                                                          float (*sf)[QR], float (*pv)[QR])
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i v[8];
    uint16_t d16[8] = {0};
    float dx[8] = {0};
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        if (i < n8) {
            const uint8_t *x = row + (size_t)(b0 + i) * 34;
            if (i % 2 == 0) /* one stream: a line every other block, QPF bytes ahead */
                _mm_prefetch((const char *)(x + QPF), _MM_HINT_T0);
            const __m256i w = _mm256_loadu_si256((const __m256i *)(x + 2));
            const __m256i q = _mm256_loadu_si256((const __m256i *)(A->q + 32 * (b0 + i)));
            v[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(q, w)),
                                     ones);
            memcpy(&d16[i], x, 2);
            dx[i] = A->d[b0 + i];
        } else {
            v[i] = _mm256_setzero_si256();
        }
    }
    const __m128i dh = _mm_setr_epi16((short)d16[0], (short)d16[1], (short)d16[2], (short)d16[3],
                                      (short)d16[4], (short)d16[5], (short)d16[6], (short)d16[7]);
    float s8[8], p8[8];
    _mm256_storeu_ps(s8, _mm256_cvtepi32_ps(kvv_avx2_hsum8x8(v)));
    _mm256_storeu_ps(p8, _mm256_mul_ps(_mm256_cvtph_ps(dh), _mm256_loadu_ps(dx)));
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        sf[i][r] = s8[i];
        pv[i][r] = p8[i];
    }
}

/* Q8_0 rows in the file's layout, one token, with gemm_x16's bits (the
 * AVX2 and AVX-512 tables' rows_x16): per block the exact S = sum w*q
 * (|w| times q with w's sign, vpmaddubsw then vpmaddwd), which equals the
 * X16 form's sum u*q - 128*sum q, then acc = fmaf(dw*dx, (float)S, acc) in
 * ascending blocks.
 * The rows are read one after another, each in one run (up to QB blocks),
 * so the reads form one stream: 8 blocks' integer sums are reduced at once
 * (kvv_avx2_hsum8x8, lane = block) and stored by block with dw*dx; then
 * the QR rows' fused steps run QR lanes wide (lane = row). Measured on one
 * core from DRAM (qwen3-0.6b-sized rows): 17.4 GB/s, against 11 for 8 rows
 * interleaved block by block, 15 for one row with its own scalar chain and
 * 19 for invariant mode's former X4 copy (fp32). A short tile repeats its
 * last row. */
static void rows_q8_0(int K, const void *W, size_t row_bytes, int n_rows,
                      const kvv_cpu_x16_act *A, float *Y)
{
    const int nb = K / 32;
    float sf[QB + 8][QR], pv[QB + 8][QR];
    for (int r0 = 0; r0 < n_rows; r0 += QR) {
        const int nr = n_rows - r0 < QR ? n_rows - r0 : QR;
        __m256 vacc = _mm256_setzero_ps();
        for (int c0 = 0; c0 < nb; c0 += QB) {
            const int nc = nb - c0 < QB ? nb - c0 : QB;
            const int8_t *q = A->q + (size_t)32 * c0;
            const kvv_cpu_x16_act Ac = {q, A->d + c0, NULL, NULL, NULL};
            for (int r = 0; r < QR; r++) {
                const uint8_t *row = (const uint8_t *)W +
                                     (size_t)(r0 + (r < nr ? r : nr - 1)) * row_bytes +
                                     (size_t)c0 * 34;
                int b0 = 0;
                for (; b0 + 8 <= nc; b0 += 8)
                    q8_row8(row, &Ac, b0, 8, r, sf + b0, pv + b0);
                if (b0 < nc)
                    q8_row8(row, &Ac, b0, nc - b0, r, sf + b0, pv + b0);
            }
            for (int b = 0; b < nc; b++)
                vacc = _mm256_fmadd_ps(_mm256_loadu_ps(pv[b]), _mm256_loadu_ps(sf[b]), vacc);
        }
        float out[QR];
        _mm256_storeu_ps(out, vacc);
        memcpy(Y + r0, out, sizeof(float) * (size_t)nr);
    }
}

const kvv_cpu_x16_rows_fn kvv_cpu_x16_rows_avx2[KVV_X16_COUNT] = {
    [KVV_X16_Q8_0] = rows_q8_0,
};

const kvv_cpu_x16_fn kvv_cpu_x16_avx2[KVV_X16_COUNT] = {x16_q4_0, x16_q5_0, x16_q4_1, x16_q5_1,
                                                        x16_q8_0, NULL};

#elif defined(__x86_64__)
#error "cpu_x16_avx2.c must be compiled with -mavx2 -mfma -mf16c (see the Makefile)"
#endif
