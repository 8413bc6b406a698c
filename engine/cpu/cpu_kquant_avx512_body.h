/*
 * cpu_kquant_avx512_body.h — the AVX-512 (F, BW, VL, DQ) K-quant products
 * (order, layout and bits: cpu_kquant.h; the same bits as every other
 * table), written once for two instances: cpu_kquant_avx512.c (vpmaddwd
 * then vpaddd) and cpu_kquant_avx512vnni.c (vpdpwssd, the two in one
 * step). Include only from those, after defining
 *   KQ_TABLE            the name of the kvv_cpu_kq_fn array to define;
 *   KQ_DOTW(s, a, sv)   s + the int32 sums of the pairs of int16 products
 *                       a * sv (exact: |a| <= 2*63*127 and |sv| <= 128,
 *                       and vpdpwssd, the non-saturating form, wraps as
 *                       vpaddd does: both instances give the same sums).
 *
 * The integer sums are formed 64 levels at a time: a super-block of a row
 * unpacks into 4 zmm of levels in natural order (pair p = elements
 * 64p..64p+63) and 4 zmm of int16 scales (one per element pair, for
 * vpmaddwd), so the activations are read as they are stored.
 *
 * GEMV (one token, decode): 16 rows at a time, each super-block unpacked in
 * registers and multiplied at once; the 16 rows' sums are reduced together
 * (reduce16), so the float steps run 16 lanes wide and no row pays a
 * horizontal sum (it used to, per super-block: Q6_K decode on qwen3-0.6b
 * ran 48 tok/s that way, 68 this way). GEMM (two or more tokens, prompts): groups of
 * GSB super-blocks of 4 rows are unpacked once into a stack buffer, then
 * every 4 tokens run over them with 16 int32 accumulators (4 rows x 4
 * tokens); per super-block the 16 sums are reduced into one zmm and its
 * two float steps run as 16-lane fused multiply-adds (each lane one output,
 * so the per-output order is the header's). Q4_1/Q5_1 use the AVX2 kernels
 * (their order does not depend on the lane width either).
 */
#include <math.h>
#include <string.h>

#include "engine/cpu/cpu_avx2.h"

#define RT 4          /* GEMM rows per tile */
#define TT 4          /* GEMM tokens per tile */
#define GSB 8         /* GEMM super-blocks unpacked at a time */
#define GR 16         /* GEMV rows per tile */

/* One super-block of one row, unpacked. */
typedef struct {
    __m512i u[4];   /* pair p: levels of elements 64p..64p+63 */
    __m512i sv[4];  /* pair p: the group scale of each element pair (int16) */
    __m256i coef;   /* per group: off*sc (Q3_K, Q6_K) or mn (Q2_K, Q4_K, Q5_K) */
    float d, dmin;
} sb512;

static inline uint32_t rd32u(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline float fp16(const uint8_t *p)
{
    return _cvtsh_ss((unsigned short)(p[0] | (p[1] << 8)));
}

/* 8 bytes -> 16 int16, each twice (sub-blocks of 32 = two groups). */
static inline __m256i dup_pairs(uint64_t bytes8)
{
    const __m128i w = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)bytes8));
    return _mm256_set_m128i(_mm_unpackhi_epi16(w, w), _mm_unpacklo_epi16(w, w));
}

/* 32 bytes at p in both halves of a zmm. */
static inline __m512i both(const uint8_t *p)
{
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}

/* The 4 scale vectors from the 16 group scales: element pair k of pair p
 * (elements 64p+2k, +1) belongs to group 4p + k/8. */
static inline void scale_vectors(__m256i sc16, __m512i *sv)
{
    const __m512i s = _mm512_inserti64x4(_mm512_setzero_si512(), sc16, 0);
    #pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        const __m512i idx = _mm512_set_epi16(
            (short)(4 * p + 3), (short)(4 * p + 3), (short)(4 * p + 3), (short)(4 * p + 3),
            (short)(4 * p + 3), (short)(4 * p + 3), (short)(4 * p + 3), (short)(4 * p + 3),
            (short)(4 * p + 2), (short)(4 * p + 2), (short)(4 * p + 2), (short)(4 * p + 2),
            (short)(4 * p + 2), (short)(4 * p + 2), (short)(4 * p + 2), (short)(4 * p + 2),
            (short)(4 * p + 1), (short)(4 * p + 1), (short)(4 * p + 1), (short)(4 * p + 1),
            (short)(4 * p + 1), (short)(4 * p + 1), (short)(4 * p + 1), (short)(4 * p + 1),
            (short)(4 * p), (short)(4 * p), (short)(4 * p), (short)(4 * p), (short)(4 * p),
            (short)(4 * p), (short)(4 * p), (short)(4 * p));
        sv[p] = _mm512_permutexvar_epi16(idx, s);
    }
}

/* Shift counts per 64-bit lane: a in the low half, b in the high half. */
static inline __m512i counts(int a, int b)
{
    return _mm512_set_epi64(b, b, b, b, a, a, a, a);
}

/* Unpack super-block x of kvv_kq kq (a constant after inlining) into o. */
static inline __attribute__((always_inline)) void sb_unpack(const int kq, const uint8_t *x,
                                                            sb512 *o)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
    __m256i sc16;
    if (kq == KVV_KQ_Q4_K || kq == KVV_KQ_Q5_K) {
        /* 6-bit scales and mins (quant_groups.c, scale_min_k4) */
        const uint32_t w0 = rd32u(x + 4), w1 = rd32u(x + 8), w2 = rd32u(x + 12);
        const uint32_t sc_lo = w0 & 0x3f3f3f3f, mn_lo = w1 & 0x3f3f3f3f;
        const uint32_t sc_hi = (w2 & 0x0f0f0f0f) | (((w0 >> 6) & 0x03030303) << 4);
        const uint32_t mn_hi = ((w2 >> 4) & 0x0f0f0f0f) | (((w1 >> 6) & 0x03030303) << 4);
        o->d = fp16(x);
        o->dmin = fp16(x + 2);
        sc16 = dup_pairs((uint64_t)sc_lo | (uint64_t)sc_hi << 32);
        o->coef = dup_pairs((uint64_t)mn_lo | (uint64_t)mn_hi << 32);
        const uint8_t *qs = x + (kq == KVV_KQ_Q5_K ? 48 : 16);
        const __m512i shift = counts(0, 4);
        const __m512i qh = kq == KVV_KQ_Q5_K ? both(x + 16) : _mm512_setzero_si512();
        #pragma GCC unroll 4
        for (int p = 0; p < 4; p++) { /* chunk 2p: low nibbles, 2p+1: high nibbles */
            __m512i u = _mm512_and_si512(_mm512_srlv_epi64(both(qs + 32 * p), shift), m4);
            if (kq == KVV_KQ_Q5_K) { /* bit j of qh[l]: +16 for element l of chunk j */
                /* shifted unsigned: a signed shift into the sign bit is undefined */
                const long long b_hi = (long long)(0x0101010101010101ull << (2 * p + 1));
                const long long b_lo = (long long)(0x0101010101010101ull << (2 * p));
                const __m512i bit =
                    _mm512_set_epi64(b_hi, b_hi, b_hi, b_hi, b_lo, b_lo, b_lo, b_lo);
                u = _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(qh, bit), u,
                                         _mm512_set1_epi8(16));
            }
            o->u[p] = u;
        }
    } else if (kq == KVV_KQ_Q6_K) {
        o->d = fp16(x + 208);
        o->dmin = 0.0f;
        sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 192)));
        o->coef = _mm256_slli_epi16(sc16, 5); /* 32 * sc */
        const __m512i m30 = _mm512_set1_epi8(0x30);
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) { /* halves of 128 (quant_groups.c, k_q6_k) */
            const __m512i ql = _mm512_loadu_si512((const void *)(x + 64 * h));
            const __m512i qh = both(x + 128 + 32 * h);
            /* elements l, l+32: low nibbles of ql[l], ql[l+32]; bits 0-1, 2-3 of qh[l] */
            o->u[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                          _mm512_and_si512(_mm512_sllv_epi64(qh, counts(4, 2)), m30));
            /* elements l+64, l+96: high nibbles; bits 4-5, 6-7 of qh[l] */
            o->u[2 * h + 1] =
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                _mm512_and_si512(_mm512_srlv_epi64(qh, counts(0, 2)), m30));
        }
    } else if (kq == KVV_KQ_Q3_K) {
        o->d = fp16(x + 108);
        o->dmin = 0.0f;
        const uint32_t a0 = rd32u(x + 96), a1 = rd32u(x + 100), h = rd32u(x + 104);
        const __m128i lo = _mm_setr_epi32((int)(a0 & 0x0f0f0f0f), (int)(a1 & 0x0f0f0f0f),
                                          (int)((a0 >> 4) & 0x0f0f0f0f), (int)((a1 >> 4) & 0x0f0f0f0f));
        const __m128i hi = _mm_setr_epi32((int)(h & 0x03030303), (int)((h >> 2) & 0x03030303),
                                          (int)((h >> 4) & 0x03030303), (int)((h >> 6) & 0x03030303));
        sc16 = _mm256_cvtepi8_epi16(
            _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32)));
        o->coef = _mm256_slli_epi16(sc16, 2); /* 4 * sc */
        const __m512i hm = both(x);
        #pragma GCC unroll 4
        for (int p = 0; p < 4; p++) { /* chunks 2p, 2p+1 = 4h + k, k = 2(p%2), +1 */
            const int hh = p / 2, k = 2 * (p % 2);
            const __m512i l = _mm512_and_si512(
                _mm512_srlv_epi64(both(x + 32 + 32 * hh), counts(2 * k, 2 * k + 2)), m3);
            const uint64_t b0 = 0x0101010101010101ull << (4 * hh + k); /* unsigned: see Q5_K */
            const long long b_lo = (long long)b0, b_hi = (long long)(b0 << 1);
            const __m512i bit = _mm512_set_epi64(b_hi, b_hi, b_hi, b_hi, b_lo, b_lo, b_lo, b_lo);
            o->u[p] = _mm512_mask_add_epi8(l, _mm512_test_epi8_mask(hm, bit), l,
                                           _mm512_set1_epi8(4));
        }
    } else { /* Q2_K */
        o->d = fp16(x + 80);
        o->dmin = fp16(x + 82);
        const __m128i sb = _mm_loadu_si128((const __m128i *)x);
        sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(0x0F)));
        o->coef = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0F)));
        #pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            const int hh = p / 2, k = 2 * (p % 2);
            o->u[p] = _mm512_and_si512(
                _mm512_srlv_epi64(both(x + 16 + 32 * hh), counts(2 * k, 2 * k + 2)), m3);
        }
    }
    scale_vectors(sc16, o->sv);
}

static inline int kq_mins(int kq)
{
    return kq == KVV_KQ_Q2_K || kq == KVV_KQ_Q4_K || kq == KVV_KQ_Q5_K;
}

static inline size_t kq_bytes(int kq)
{
    static const size_t B[KVV_KQ_COUNT] = {84, 110, 144, 176, 210, 20, 24};
    return B[kq];
}

/* sum_g sc_g * sum_{i in g} u_i q_i over one super-block, as 16 int32 lanes */
static inline __m512i sb_dot(const sb512 *o, const int8_t *q)
{
    __m512i acc = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        const __m512i x = _mm512_loadu_si512((const void *)(q + 64 * p));
        acc = KQ_DOTW(acc, _mm512_maddubs_epi16(o->u[p], x), o->sv[p]);
    }
    return acc;
}

/* 16 vectors of 16 int32 -> one vector of their 16 sums, in order. */
static inline __m512i reduce16(const __m512i *a)
{
    __m512i b[8], c[4];
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        b[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]),
                                _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]));
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) /* each 128-bit segment: partial sums of a[4i..4i+3] */
        c[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(b[2 * i], b[2 * i + 1]),
                                _mm512_unpackhi_epi64(b[2 * i], b[2 * i + 1]));
    const __m512i e01 = _mm512_add_epi32(_mm512_shuffle_i32x4(c[0], c[1], 0x88),
                                         _mm512_shuffle_i32x4(c[0], c[1], 0xDD));
    const __m512i e23 = _mm512_add_epi32(_mm512_shuffle_i32x4(c[2], c[3], 0x88),
                                         _mm512_shuffle_i32x4(c[2], c[3], 0xDD));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(e01, e23, 0x88),
                            _mm512_shuffle_i32x4(e01, e23, 0xDD));
}

/* The GEMV tiles' rows r0..r0+GR-1 (a short tile repeats its last row);
 * returns what to prefetch while this tile is multiplied: the next tile's
 * bytes, or this tile's own for the last tile of the call. The rows past
 * the call are another chunk's, maybe another thread's (cpu_matmul.c), and
 * reading them ahead cost a tile of traffic per chunk. */
static inline const uint8_t *tile_rows(const uint8_t *W, size_t row_bytes, int r0, int nr,
                                       int n_rows, const uint8_t **row)
{
    for (int r = 0; r < GR; r++)
        row[r] = W + (size_t)(r0 + (r < nr ? r : nr - 1)) * row_bytes;
    return W + (size_t)(r0 + GR < n_rows ? r0 + GR : r0) * row_bytes;
}

/* The first nr lanes of a tile's outputs to y. */
static inline void store_tile(float *y, __m512 v, int nr)
{
    float out[GR];
    _mm512_storeu_ps(out, v);
    memcpy(y, out, sizeof(float) * (size_t)nr);
}

/* GEMV: 16 rows at a time (a short tile repeats its last row, never
 * stored). Per super-block each row's integer sums stay a vector until
 * reduce16 turns the 16 rows' vectors into one (lane = row), so the two
 * float steps run as 16-lane fused multiply-adds, each lane the header's
 * order for its output: no horizontal sum per row and super-block. The
 * next tile (the same bytes ahead, one linear region) is prefetched while
 * this one is multiplied. */
static inline __attribute__((always_inline)) void gemv_k(const int kq, int K, const uint8_t *W,
                                                         size_t row_bytes, int n_rows,
                                                         const kvv_cpu_qact *A, float *Y)
{
    const int nsb = K / 256;
    const size_t bb = kq_bytes(kq);
    for (int r0 = 0; r0 < n_rows; r0 += GR) {
        const int nr = n_rows - r0 < GR ? n_rows - r0 : GR;
        const uint8_t *row[GR];
        const uint8_t *pf = tile_rows(W, row_bytes, r0, nr, n_rows, row);
        __m512 vacc = _mm512_setzero_ps();
        for (int sb = 0; sb < nsb; sb++) {
            const int8_t *q = A->q + 256 * sb;
            const __m512i bs = _mm512_castsi256_si512(
                _mm256_loadu_si256((const __m256i *)(A->bsums + 16 * sb)));
            __m512i s[GR], m[GR];
            float dv[GR], nmv[GR];
            #pragma GCC unroll 2
            for (int r = 0; r < GR; r++) {
                _mm_prefetch((const char *)pf, _MM_HINT_T0);
                _mm_prefetch((const char *)(pf + 64), _MM_HINT_T0);
                _mm_prefetch((const char *)(pf + bb - 1), _MM_HINT_T0);
                pf += bb;
                sb512 o;
                sb_unpack(kq, row[r] + (size_t)sb * bb, &o);
                s[r] = sb_dot(&o, q);
                m[r] = _mm512_madd_epi16(_mm512_inserti64x4(_mm512_setzero_si512(), o.coef, 0), bs);
                dv[r] = o.d;
                nmv[r] = -o.dmin;
            }
            const __m512 dx = _mm512_set1_ps(A->d[sb]);
            const __m512i S = reduce16(s), M = reduce16(m);
            if (kq_mins(kq)) {
                vacc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(dv), dx),
                                       _mm512_cvtepi32_ps(S), vacc);
                vacc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(nmv), dx),
                                       _mm512_cvtepi32_ps(M), vacc);
            } else {
                vacc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(dv), dx),
                                       _mm512_cvtepi32_ps(_mm512_sub_epi32(S, M)), vacc);
            }
        }
        store_tile(Y + r0, vacc, nr);
    }
}

static inline __m512 i32_to_f32(__m512i v)
{
    return _mm512_cvtepi32_ps(v);
}

/* GEMM: 4 rows x 4 tokens; lane t*4 + r of the float accumulator is
 * output (row r0+r, token t0+t), carried in Y between groups of GSB
 * super-blocks. A short tile repeats its first row / token (never stored). */
static inline __attribute__((always_inline)) void gemm_k(const int kq, int K, const uint8_t *W,
                                                         size_t row_bytes, int n_rows,
                                                         const kvv_cpu_qact *A, int n_tok,
                                                         float *Y, size_t ldy)
{
    const int nsb = K / 256;
    const size_t bb = kq_bytes(kq);
    sb512 buf[GSB][RT];
    __m512i coefz[GSB][RT];            /* coef in the low half, zeros above */
    float dv[GSB][16], nmv[GSB][16];   /* lane t*4 + r: d of row r, -dmin of row r */
    const __m512i lane_t = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    for (int r0 = 0; r0 < n_rows; r0 += RT) {
        const int nr = n_rows - r0 < RT ? n_rows - r0 : RT;
        for (int g0 = 0; g0 < nsb; g0 += GSB) {
            const int ng = nsb - g0 < GSB ? nsb - g0 : GSB;
            for (int g = 0; g < ng; g++) {
                for (int r = 0; r < RT; r++) {
                    sb_unpack(kq, W + (size_t)(r0 + (r < nr ? r : 0)) * row_bytes +
                                      (size_t)(g0 + g) * bb,
                              &buf[g][r]);
                    coefz[g][r] = _mm512_inserti64x4(_mm512_setzero_si512(), buf[g][r].coef, 0);
                }
                for (int i = 0; i < 16; i++) {
                    dv[g][i] = buf[g][i % 4].d;
                    nmv[g][i] = -buf[g][i % 4].dmin;
                }
            }
            for (int t0 = 0; t0 < n_tok; t0 += TT) {
                const int nt = n_tok - t0 < TT ? n_tok - t0 : TT;
                int tk[TT];
                for (int t = 0; t < TT; t++)
                    tk[t] = t0 + (t < nt ? t : 0);
                float acc[16];
                for (int i = 0; i < 16; i++)
                    acc[i] = g0 == 0 ? 0.0f : Y[(size_t)tk[i / 4] * ldy + r0 + (i % 4 < nr ? i % 4 : 0)];
                __m512 vacc = _mm512_loadu_ps(acc);
                for (int g = 0; g < ng; g++) {
                    const int sb = g0 + g;
                    const sb512 *o = buf[g];
                    __m512i s[16];
                    #pragma GCC unroll 16
                    for (int i = 0; i < 16; i++)
                        s[i] = _mm512_setzero_si512();
                    #pragma GCC unroll 4
                    for (int p = 0; p < 4; p++) {
                        __m512i x[TT];
                        #pragma GCC unroll 4
                        for (int t = 0; t < TT; t++)
                            x[t] = _mm512_loadu_si512(
                                (const void *)(A->q + (size_t)tk[t] * K + 256 * sb + 64 * p));
                        #pragma GCC unroll 4
                        for (int r = 0; r < RT; r++) {
                            const __m512i u = o[r].u[p], sv = o[r].sv[p];
                            #pragma GCC unroll 4
                            for (int t = 0; t < TT; t++)
                                s[4 * t + r] = KQ_DOTW(s[4 * t + r], _mm512_maddubs_epi16(u, x[t]), sv);
                        }
                    }
                    /* offsets and mins from the activations' 16-sums: the
                     * upper half of the product is zero (coefz) */
                    __m512i m[16];
                    #pragma GCC unroll 4
                    for (int t = 0; t < TT; t++) {
                        const __m512i bs = _mm512_castsi256_si512(_mm256_loadu_si256(
                            (const __m256i *)(A->bsums + (size_t)tk[t] * (K / 16) + 16 * sb)));
                        #pragma GCC unroll 4
                        for (int r = 0; r < RT; r++) {
                            const __m512i c = _mm512_madd_epi16(coefz[g][r], bs);
                            if (kq_mins(kq))
                                m[4 * t + r] = c;
                            else
                                s[4 * t + r] = _mm512_sub_epi32(s[4 * t + r], c);
                        }
                    }
                    /* lane t*4 + r: dx of token t */
                    const __m512 dx = _mm512_permutexvar_ps(
                        lane_t, _mm512_castps128_ps512(_mm_setr_ps(
                                    A->d[(size_t)tk[0] * nsb + sb], A->d[(size_t)tk[1] * nsb + sb],
                                    A->d[(size_t)tk[2] * nsb + sb], A->d[(size_t)tk[3] * nsb + sb])));
                    vacc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(dv[g]), dx),
                                           i32_to_f32(reduce16(s)), vacc);
                    if (kq_mins(kq))
                        vacc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(nmv[g]), dx),
                                               i32_to_f32(reduce16(m)), vacc);
                }
                _mm512_storeu_ps(acc, vacc);
                for (int t = 0; t < nt; t++)
                    for (int r = 0; r < nr; r++)
                        Y[(size_t)(t0 + t) * ldy + r0 + r] = acc[4 * t + r];
            }
        }
    }
}

#define KQ_FN(name, kq)                                                                           \
    static void name(int K, const void *W, size_t rb, int nr, const kvv_cpu_qact *A, int nt,      \
                     float *Y, size_t ldy)                                                        \
    {                                                                                             \
        if (nt == 1)                                                                              \
            gemv_k(kq, K, (const uint8_t *)W, rb, nr, A, Y);                                      \
        else                                                                                      \
            gemm_k(kq, K, (const uint8_t *)W, rb, nr, A, nt, Y, ldy);                             \
    }
KQ_FN(gemm_q2_k, KVV_KQ_Q2_K)
KQ_FN(gemm_q3_k, KVV_KQ_Q3_K)
KQ_FN(gemm_q4_k, KVV_KQ_Q4_K)
KQ_FN(gemm_q5_k, KVV_KQ_Q5_K)
KQ_FN(gemm_q6_k, KVV_KQ_Q6_K)

/* The 32 levels of a Q4_1 (20-byte) or Q5_1 (24-byte) block: the 16 qs
 * bytes in both halves, low nibbles kept below and high ones above; Q5_1's
 * qh (bit j: the fifth bit of element j = byte j) is itself the byte mask. */
static inline __m256i levels_1(const int five, const uint8_t *x)
{
    const __m256i qs =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x + (five ? 8 : 4))));
    const __m256i cnt = _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
    __m256i u = _mm256_and_si256(_mm256_srlv_epi16(qs, cnt), _mm256_set1_epi8(0x0F));
    if (five)
        u = _mm256_mask_mov_epi8(u, (__mmask32)rd32u(x + 4),
                                 _mm256_or_si256(u, _mm256_set1_epi8(16)));
    return u;
}

/* Q4_1 / Q5_1 GEMV: 16 rows at a time as gemv_k. Per 32-weight block each
 * row's levels meet the token's 32 activations in one 256-bit maddubs +
 * madd; kvv_avx2_hsum8x8 turns 8 rows' vectors into their 8 exact sums, and
 * the two float steps run 16 lanes wide (lane = row, the header's order).
 * The row-at-a-time kernel carried both steps through memory per block. */
static inline __attribute__((always_inline)) void gemv_1(const int five, int K, const uint8_t *W,
                                                         size_t row_bytes, int n_rows,
                                                         const kvv_cpu_qact *A, float *Y)
{
    const int nb = K / 32;
    const size_t bb = five ? 24 : 20;
    const __m256i ones = _mm256_set1_epi16(1);
    /* the 16-bit halves: d of row r at 2r, m at 2r + 1 */
    const __m512i even16 = _mm512_set_epi16(
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd16 = _mm512_add_epi16(even16, _mm512_set1_epi16(1));
    for (int r0 = 0; r0 < n_rows; r0 += GR) {
        const int nr = n_rows - r0 < GR ? n_rows - r0 : GR;
        const uint8_t *row[GR];
        const uint8_t *pf = tile_rows(W, row_bytes, r0, nr, n_rows, row);
        __m512 vacc = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(A->q + 32 * b));
            __m256i v[GR];
            uint32_t dm[GR]; /* d | m << 16 of each row's block */
            #pragma GCC unroll 4
            for (int r = 0; r < GR; r++) {
                _mm_prefetch((const char *)pf, _MM_HINT_T0);
                pf += bb;
                const uint8_t *x = row[r] + (size_t)b * bb;
                v[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(levels_1(five, x), q), ones);
                dm[r] = rd32u(x);
            }
            const __m512i S = _mm512_inserti64x4(_mm512_castsi256_si512(kvv_avx2_hsum8x8(v)),
                                                 kvv_avx2_hsum8x8(v + 8), 1);
            const __m512i dmv = _mm512_loadu_si512((const void *)dm);
            const __m512 dw = _mm512_cvtph_ps(
                _mm512_castsi512_si256(_mm512_permutexvar_epi16(even16, dmv)));
            const __m512 mw = _mm512_cvtph_ps(
                _mm512_castsi512_si256(_mm512_permutexvar_epi16(odd16, dmv)));
            vacc = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(A->d[b])),
                                   _mm512_cvtepi32_ps(S), vacc);
            vacc = _mm512_fmadd_ps(mw, _mm512_set1_ps(A->s[b]), vacc);
        }
        store_tile(Y + r0, vacc, nr);
    }
}

/* Q4_1 / Q5_1: gemv_1 for one token, the AVX2 kernels for more (32-element
 * blocks, the same order) */
static void gemm_q4_1(int K, const void *W, size_t rb, int nr, const kvv_cpu_qact *A, int nt,
                      float *Y, size_t ldy)
{
    if (nt == 1)
        gemv_1(0, K, (const uint8_t *)W, rb, nr, A, Y);
    else
        kvv_cpu_kq_avx2[KVV_KQ_Q4_1](K, W, rb, nr, A, nt, Y, ldy);
}

static void gemm_q5_1(int K, const void *W, size_t rb, int nr, const kvv_cpu_qact *A, int nt,
                      float *Y, size_t ldy)
{
    if (nt == 1)
        gemv_1(1, K, (const uint8_t *)W, rb, nr, A, Y);
    else
        kvv_cpu_kq_avx2[KVV_KQ_Q5_1](K, W, rb, nr, A, nt, Y, ldy);
}

const kvv_cpu_kq_fn KQ_TABLE[KVV_KQ_COUNT] = {
    gemm_q2_k, gemm_q3_k, gemm_q4_k, gemm_q5_k, gemm_q6_k, gemm_q4_1, gemm_q5_1,
};
