/*
 * cpu_kquant_avx2.c — AVX2 K-quant and Q4_1/Q5_1 products and activation
 * rounding (order, layout and bits: cpu_kquant.h; the generic file defines
 * them). The integer sums are ggml's: maddubs(u, q) multiplies the
 * unsigned levels by the signed activations and adds byte pairs into int16
 * (at most 2*63*127 = 16002: no saturation), madd with the group scales
 * adds int16 pairs into int32 (exact); the offsets (-off*sc) and mins
 * come from the activations' 16-element sums (bsums), one madd per
 * super-block.
 *
 * A super-block of a row is first unpacked into a kq_sb: its 8 chunks of
 * 32 levels (u), each chunk's scale vector (sc of its two 16-groups, 8
 * lanes each), the bsum coefficients (off*sc or mn per group) and d, dmin.
 * GEMV (one token, decode) unpacks and multiplies one super-block at a time
 * while streaming the row. The GEMM (two or more tokens) unpacks a super-
 * block of 4 rows once and multiplies it with every token, 2 at a time
 * (8 int32 accumulators); the float steps of each output, one per super-
 * block in ascending order, go through Y.
 */
#include "engine/cpu/cpu_kquant.h"

#if defined(KVV_CPU_EMULATED) || \
    (defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif
#include <math.h>
#include <string.h>

#include "engine/cpu/cpu_avx2.h"

#define RT 4          /* rows per GEMM tile */
#define PF_BYTES 4096 /* GEMV prefetch distance */

/* ---------------------------------------------------------------- activations */

/* 32 int32 (4 vectors, NaN already 0) -> 32 int8 in order. */
static inline __m256i pack32(const __m256i *i32)
{
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256i a = _mm256_packs_epi32(i32[0], i32[1]), b = _mm256_packs_epi32(i32[2], i32[3]);
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(a, b), perm);
}

/* round-to-nearest-even(v * m), NaN -> 0, clamped to -127..127, as int32 */
static inline __m256i round127(__m256 v, __m256 m)
{
    __m256 r = _mm256_round_ps(_mm256_mul_ps(v, m), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q));
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    return _mm256_cvtps_epi32(r);
}

static inline float hmax8(__m256 m)
{
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    return _mm_cvtss_f32(m4);
}

static inline int32_t hsum_i32(__m256i a)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

void kvv_cpu_quantize_q8_k_avx2(int K, const float *x, int8_t *q, float *d, int16_t *bsums)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int b = 0; b < K / 256; b++, x += 256, q += 256) {
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 32; i++) /* max returns its second operand on NaN */
            m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * i), absmask), m);
        const float amax = hmax8(m);
        if (amax == 0.0f) {
            d[b] = 0.0f;
            memset(q, 0, 256);
            memset(bsums + 16 * b, 0, 16 * sizeof(int16_t));
            continue;
        }
        float max = 0.0f; /* the first element of largest |x| */
        const __m256 va = _mm256_set1_ps(amax);
        for (int i = 0; i < 32; i++) {
            int mk = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * i), absmask), va, _CMP_EQ_OQ));
            if (mk) {
                max = x[8 * i + __builtin_ctz((unsigned)mk)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        d[b] = 1.0f / iscale;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
        for (int c = 0; c < 8; c++) { /* 32 elements = groups 2c, 2c+1 */
            __m256i i32[4];
            for (int k = 0; k < 4; k++)
                i32[k] = round127(_mm256_loadu_ps(x + 32 * c + 8 * k), vs);
            const __m256i p = pack32(i32);
            _mm256_storeu_si256((__m256i *)(q + 32 * c), p);
            /* lanes 0..3 sum elements 0..15, 4..7 elements 16..31 */
            __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, p), ones16);
            s = _mm256_hadd_epi32(s, s);
            s = _mm256_hadd_epi32(s, s);
            bsums[16 * b + 2 * c] = (int16_t)_mm256_extract_epi32(s, 0);
            bsums[16 * b + 2 * c + 1] = (int16_t)_mm256_extract_epi32(s, 4);
        }
    }
}

void kvv_cpu_quantize_q8_1_avx2(int K, const float *x, int8_t *q, float *d, float *s)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int b = 0; b < K / 32; b++, x += 32, q += 32) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            m = _mm256_max_ps(_mm256_and_ps(v[k], absmask), m);
        }
        const float amax = hmax8(m);
        const float dd = amax / 127.0f;
        const __m256 vid = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        __m256i i32[4];
        for (int k = 0; k < 4; k++)
            i32[k] = round127(v[k], vid);
        const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]),
                                                  _mm256_add_epi32(i32[2], i32[3])));
        _mm256_storeu_si256((__m256i *)q, pack32(i32));
        d[b] = _cvtsh_ss(_cvtss_sh(dd, _MM_FROUND_TO_NEAREST_INT));
        s[b] = _cvtsh_ss(_cvtss_sh(dd * (float)sum, _MM_FROUND_TO_NEAREST_INT));
    }
}

/* ---------------------------------------------------------------- K super-blocks */

/* One super-block of one row, unpacked (see the header comment). */
typedef struct {
    __m256i u[8];     /* chunk j: levels of elements 32j..32j+31 */
    __m256i sv[8];    /* chunk j: sc of group 2j (low 8 lanes), 2j+1 (high 8) */
    __m256i coef;     /* per group: off*sc (Q3_K, Q6_K) or mn (Q2_K, Q4_K, Q5_K) */
    float d, dmin;
} kq_sb;

/* shuffle_epi8 patterns: int16 element m of each 128-bit half -> all 8 */
static inline __m256i sc_pattern(int j)
{
    const int lo = (2 * j) % 8, hi = (2 * j + 1) % 8;
    return _mm256_setr_epi8((char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
                            (char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
                            (char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
                            (char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
                            (char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1),
                            (char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1),
                            (char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1),
                            (char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1));
}

/* The 8 chunk scale vectors from the 16 group scales (int16). */
static inline void scale_vectors(__m256i sc16, __m256i *sv)
{
    const __m256i lo = _mm256_permute4x64_epi64(sc16, 0x44); /* groups 0..7 in both halves */
    const __m256i hi = _mm256_permute4x64_epi64(sc16, 0xEE); /* groups 8..15 */
    #pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        sv[j] = _mm256_shuffle_epi8(j < 4 ? lo : hi, sc_pattern(j));
}

/* 8 bytes -> 16 int16, each twice (sub-blocks of 32 = two groups). */
static inline __m256i dup_pairs(uint64_t bytes8)
{
    const __m128i w = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)bytes8));
    return _mm256_set_m128i(_mm_unpackhi_epi16(w, w), _mm_unpacklo_epi16(w, w));
}

static inline uint32_t rd32u(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t rd64u(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Unpack super-block x of kvv_kq kq into o. kq is a constant after
 * inlining. */
static inline __attribute__((always_inline)) void sb_prep(const int kq, const uint8_t *x,
                                                          kq_sb *o)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256i sc16;
    if (kq == KVV_KQ_Q4_K || kq == KVV_KQ_Q5_K) {
        /* 6-bit scales and mins (quant_groups.c, scale_min_k4), 4 at a time */
        const uint32_t w0 = rd32u(x + 4), w1 = rd32u(x + 8), w2 = rd32u(x + 12);
        const uint32_t sc_lo = w0 & 0x3f3f3f3f, mn_lo = w1 & 0x3f3f3f3f;
        const uint32_t sc_hi = (w2 & 0x0f0f0f0f) | (((w0 >> 6) & 0x03030303) << 4);
        const uint32_t mn_hi = ((w2 >> 4) & 0x0f0f0f0f) | (((w1 >> 6) & 0x03030303) << 4);
        o->d = kvv_avx2_fp16(x);
        o->dmin = kvv_avx2_fp16(x + 2);
        sc16 = dup_pairs((uint64_t)sc_lo | (uint64_t)sc_hi << 32);
        o->coef = dup_pairs((uint64_t)mn_lo | (uint64_t)mn_hi << 32);
        const uint8_t *qs = x + (kq == KVV_KQ_Q5_K ? 48 : 16);
        const __m256i qh = kq == KVV_KQ_Q5_K ? _mm256_loadu_si256((const __m256i *)(x + 16))
                                             : _mm256_setzero_si256();
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(qs + 32 * k));
            __m256i lo = _mm256_and_si256(b, m4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
            if (kq == KVV_KQ_Q5_K) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(
                                             _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(
                                             _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k + 1), one), 4));
            }
            o->u[2 * k] = lo;
            o->u[2 * k + 1] = hi;
        }
    } else if (kq == KVV_KQ_Q6_K) {
        o->d = kvv_avx2_fp16(x + 208);
        o->dmin = 0.0f;
        sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x + 192)));
        o->coef = _mm256_slli_epi16(sc16, 5); /* 32 * sc */
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(x + 128 + 32 * h));
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m256i lo = k & 1 ? l1 : l0;
                lo = _mm256_and_si256(k >= 2 ? _mm256_srli_epi16(lo, 4) : lo, m4);
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m3);
                o->u[4 * h + k] = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
            }
        }
    } else if (kq == KVV_KQ_Q3_K) {
        o->d = kvv_avx2_fp16(x + 108);
        o->dmin = 0.0f;
        const uint32_t a0 = rd32u(x + 96), a1 = rd32u(x + 100), h = rd32u(x + 104);
        const __m128i lo = _mm_setr_epi32((int)(a0 & 0x0f0f0f0f), (int)(a1 & 0x0f0f0f0f),
                                          (int)((a0 >> 4) & 0x0f0f0f0f), (int)((a1 >> 4) & 0x0f0f0f0f));
        const __m128i hi = _mm_setr_epi32((int)(h & 0x03030303), (int)((h >> 2) & 0x03030303),
                                          (int)((h >> 4) & 0x03030303), (int)((h >> 6) & 0x03030303));
        const __m128i sc8 = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
        sc16 = _mm256_cvtepi8_epi16(sc8);
        o->coef = _mm256_slli_epi16(sc16, 2); /* 4 * sc */
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x);
        #pragma GCC unroll 2
        for (int hh = 0; hh < 2; hh++) {
            const __m256i qs = _mm256_loadu_si256((const __m256i *)(x + 32 + 32 * hh));
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m256i l = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), m3);
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * hh + k), one);
                o->u[4 * hh + k] = _mm256_or_si256(l, _mm256_slli_epi16(hb, 2));
            }
        }
    } else { /* Q2_K */
        o->d = kvv_avx2_fp16(x + 80);
        o->dmin = kvv_avx2_fp16(x + 82);
        const __m128i sb = _mm_loadu_si128((const __m128i *)x);
        sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(0x0F)));
        o->coef = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0F)));
        #pragma GCC unroll 2
        for (int hh = 0; hh < 2; hh++) {
            const __m256i qs = _mm256_loadu_si256((const __m256i *)(x + 16 + 32 * hh));
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                o->u[4 * hh + k] = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), m3);
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

/* sum_g sc_g * sum_{i in g} u_i q_i over one super-block, as 8 int32 lanes */
static inline __m256i sb_dot(const kq_sb *o, const int8_t *q)
{
    __m256i acc = _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(q + 32 * j));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(o->u[j], x), o->sv[j]));
    }
    return acc;
}

/* GEMV: one token, rows one after the other (one read stream). */
static inline __attribute__((always_inline)) void gemv_k(const int kq, int K, const uint8_t *W,
                                                         size_t row_bytes, int n_rows,
                                                         const kvv_cpu_qact *A, float *Y)
{
    const int nsb = K / 256;
    const size_t bb = kq_bytes(kq);
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = W + (size_t)r * row_bytes;
        float acc = 0.0f;
        for (int sb = 0; sb < nsb; sb++) {
            const uint8_t *x = row + (size_t)sb * bb;
            _mm_prefetch((const char *)(x + PF_BYTES), _MM_HINT_T0);
            kq_sb o;
            sb_prep(kq, x, &o);
            const __m256i bs = _mm256_loadu_si256((const __m256i *)(A->bsums + 16 * sb));
            const __m256i s = sb_dot(&o, A->q + 256 * sb);
            const __m256i t = _mm256_madd_epi16(o.coef, bs);
            const float dx = A->d[sb];
            if (kq_mins(kq)) {
#ifdef KVV_CPU_PLANT_KQ_ORDER /* test-only negative control: the two steps swapped */
                acc = fmaf(-(o.dmin * dx), (float)hsum_i32(t), acc);
                acc = fmaf(o.d * dx, (float)hsum_i32(s), acc);
#else
                acc = fmaf(o.d * dx, (float)hsum_i32(s), acc);
                acc = fmaf(-(o.dmin * dx), (float)hsum_i32(t), acc);
#endif
            } else {
                acc = fmaf(o.d * dx, (float)hsum_i32(_mm256_sub_epi32(s, t)), acc);
            }
        }
        Y[r] = acc;
    }
}

/* GEMM: tiles of up to RT rows x 2 tokens; a super-block's rows are
 * unpacked once for all tokens; Y accumulates the float steps. */
static inline __attribute__((always_inline)) void gemm_k(const int kq, int K, const uint8_t *W,
                                                         size_t row_bytes, int n_rows,
                                                         const kvv_cpu_qact *A, int n_tok,
                                                         float *Y, size_t ldy)
{
    const int nsb = K / 256;
    const size_t bb = kq_bytes(kq);
    kq_sb o[RT];
    for (int r0 = 0; r0 < n_rows; r0 += RT) {
        const int nr = n_rows - r0 < RT ? n_rows - r0 : RT;
        for (int t = 0; t < n_tok; t++)
            for (int r = 0; r < nr; r++)
                Y[(size_t)t * ldy + r0 + r] = 0.0f;
        for (int sb = 0; sb < nsb; sb++) {
            for (int r = 0; r < nr; r++)
                sb_prep(kq, W + (size_t)(r0 + r) * row_bytes + (size_t)sb * bb, &o[r]);
            for (int r = nr; r < RT; r++) /* a short tile computes row 0 again, unused */
                o[r] = o[0];
            for (int t0 = 0; t0 < n_tok; t0 += 2) {
                const int nt = n_tok - t0 < 2 ? 1 : 2;
                __m256i s[8], m[8];
                for (int i = 0; i < 8; i++)
                    s[i] = m[i] = _mm256_setzero_si256();
                const int8_t *q0 = A->q + (size_t)t0 * K + 256 * sb;
                const int8_t *q1 = q0 + (nt == 2 ? K : 0);
                #pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    const __m256i x0 = _mm256_loadu_si256((const __m256i *)(q0 + 32 * j));
                    const __m256i x1 = _mm256_loadu_si256((const __m256i *)(q1 + 32 * j));
                    #pragma GCC unroll 4
                    for (int r = 0; r < RT; r++) {
                        s[2 * r] = _mm256_add_epi32(
                            s[2 * r], _mm256_madd_epi16(_mm256_maddubs_epi16(o[r].u[j], x0), o[r].sv[j]));
                        s[2 * r + 1] = _mm256_add_epi32(
                            s[2 * r + 1],
                            _mm256_madd_epi16(_mm256_maddubs_epi16(o[r].u[j], x1), o[r].sv[j]));
                    }
                }
                for (int r = 0; r < RT; r++)
                    for (int k = 0; k < 2; k++) {
                        const __m256i bs = _mm256_loadu_si256(
                            (const __m256i *)(A->bsums + (size_t)(t0 + (k < nt ? k : 0)) * (K / 16) + 16 * sb));
                        const __m256i c = _mm256_madd_epi16(o[r].coef, bs);
                        if (kq_mins(kq))
                            m[2 * r + k] = c;
                        else
                            s[2 * r + k] = _mm256_sub_epi32(s[2 * r + k], c);
                    }
                int32_t S[8], M[8];
                _mm256_storeu_si256((__m256i *)S, kvv_avx2_hsum8x8(s));
                if (kq_mins(kq))
                    _mm256_storeu_si256((__m256i *)M, kvv_avx2_hsum8x8(m));
                for (int r = 0; r < nr; r++)
                    for (int k = 0; k < nt; k++) {
                        const float dx = A->d[(size_t)(t0 + k) * nsb + sb];
                        float *y = &Y[(size_t)(t0 + k) * ldy + r0 + r];
#ifdef KVV_CPU_PLANT_KQ_ORDER
                        float acc = *y;
                        if (kq_mins(kq))
                            acc = fmaf(-(o[r].dmin * dx), (float)M[2 * r + k], acc);
                        acc = fmaf(o[r].d * dx, (float)S[2 * r + k], acc);
#else
                        float acc = fmaf(o[r].d * dx, (float)S[2 * r + k], *y);
                        if (kq_mins(kq))
                            acc = fmaf(-(o[r].dmin * dx), (float)M[2 * r + k], acc);
#endif
                        *y = acc;
                    }
            }
        }
    }
}

/* ---------------------------------------------------------------- Q4_1 / Q5_1 */

/* The 32 levels of a Q4_1 (20-byte) or Q5_1 (24-byte) block. */
static inline __m256i levels_1(const int five, const uint8_t *x)
{
    const __m128i qs = _mm_loadu_si128((const __m128i *)(x + (five ? 8 : 4)));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), m4), _mm_and_si128(qs, m4));
    if (five) { /* bit j of qh is the 5th bit of element j */
        const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                              2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
        const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
        __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)rd32u(x + 4)), shuf);
        b = _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
        u = _mm256_or_si256(u, _mm256_and_si256(b, _mm256_set1_epi8(16)));
    }
    return u;
}

static inline __attribute__((always_inline)) void gemm_1(const int five, int K, const uint8_t *W,
                                                         size_t row_bytes, int n_rows,
                                                         const kvv_cpu_qact *A, int n_tok,
                                                         float *Y, size_t ldy)
{
    const int nb = K / 32;
    const size_t bb = five ? 24 : 20;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = W + (size_t)r * row_bytes;
        for (int t = 0; t < n_tok; t++)
            Y[(size_t)t * ldy + r] = 0.0f;
        for (int b = 0; b < nb; b++) {
            const uint8_t *x = row + (size_t)b * bb;
            if (n_tok == 1)
                _mm_prefetch((const char *)(x + PF_BYTES), _MM_HINT_T0);
            const __m256i u = levels_1(five, x);
            const float dw = kvv_avx2_fp16(x), mw = kvv_avx2_fp16(x + 2);
            for (int t = 0; t < n_tok; t++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(A->q + (size_t)t * K + 32 * b));
                const int32_t S = hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(u, q), ones));
                float *y = &Y[(size_t)t * ldy + r];
                const float acc = fmaf(dw * A->d[(size_t)t * nb + b], (float)S, *y);
                *y = fmaf(mw, A->s[(size_t)t * nb + b], acc);
            }
        }
    }
}

/* ---------------------------------------------------------------- the table */

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

static void gemm_q4_1(int K, const void *W, size_t rb, int nr, const kvv_cpu_qact *A, int nt,
                      float *Y, size_t ldy)
{
    gemm_1(0, K, (const uint8_t *)W, rb, nr, A, nt, Y, ldy);
}

static void gemm_q5_1(int K, const void *W, size_t rb, int nr, const kvv_cpu_qact *A, int nt,
                      float *Y, size_t ldy)
{
    gemm_1(1, K, (const uint8_t *)W, rb, nr, A, nt, Y, ldy);
}

const kvv_cpu_kq_fn kvv_cpu_kq_avx2[KVV_KQ_COUNT] = {
    gemm_q2_k, gemm_q3_k, gemm_q4_k, gemm_q5_k, gemm_q6_k, gemm_q4_1, gemm_q5_1,
};

#elif defined(__x86_64__)
#error "cpu_kquant_avx2.c must be compiled with -mavx2 -mfma -mf16c (see the Makefile)"
#endif
