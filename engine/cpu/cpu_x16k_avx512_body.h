/*
 * cpu_x16k_avx512_body.h — the AVX-512 X16 product for Q4_K (cpu_x16.h),
 * written once for the BW and VNNI instances like cpu_x16_avx512_body.h
 * (include after it: it uses X16_DOT4, x16_rd32 and x16_store).
 *
 * Per 16-row group and super-block: the 6-bit scales and mins are unpacked
 * lane-wise (lane = row) from the 3 packed words; each sub-block's integer
 * sum comes from 8 chunks of 4 levels (lane = row), is multiplied by its
 * scale (vpmulld) and summed into S; M sums each min times the token's two
 * 16-sums of that sub-block. Both exact, then cpu_kquant.h's two fused
 * steps per super-block: the bits of gemm_kq.
 */
#define TK 4 /* tokens per tile: S, M, two sub-block sums and the float acc each */

/* Byte k of every int32 lane of v. */
static inline __m512i x16k_byte(__m512i v, int k)
{
    return _mm512_and_si512(_mm512_srli_epi32(v, 8 * k), _mm512_set1_epi32(0xFF));
}

static inline __attribute__((always_inline)) void
x16k_tile(const int nsb, const uint8_t *g, const kvv_cpu_x16_act *A, const size_t t0, const int K,
          const int nt, const int nr, float *Y, const size_t ldy)
{
    const __m512i low = _mm512_set1_epi8(0x0F);
    const __m512i m6 = _mm512_set1_epi32(0x3f3f3f3f), m4 = _mm512_set1_epi32(0x0f0f0f0f);
    const __m512i m2 = _mm512_set1_epi32(0x03030303);
    const __m512i ones = _mm512_set1_epi16(1);
    (void)ones;
    __m512 f[TK];
    #pragma GCC unroll 4
    for (int t = 0; t < nt; t++)
        f[t] = _mm512_setzero_ps();
    for (int sb = 0; sb < nsb; sb++) {
        const uint8_t *o = g + (size_t)sb * 2304;
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)o));
        const __m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 32)));
        const __m512i w0 = _mm512_loadu_si512((const void *)(o + 64));
        const __m512i w1 = _mm512_loadu_si512((const void *)(o + 128));
        const __m512i w2 = _mm512_loadu_si512((const void *)(o + 192));
        /* bytes: scales of sub-blocks 0..3, 4..7; mins likewise (scale_min_k4) */
        const __m512i sc[2] = {
            _mm512_and_si512(w0, m6),
            _mm512_or_si512(_mm512_and_si512(w2, m4),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), m2), 4))};
        const __m512i mn[2] = {
            _mm512_and_si512(w1, m6),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), m4),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), m2), 4))};
        __m512i S[TK], M[TK];
        #pragma GCC unroll 4
        for (int t = 0; t < nt; t++)
            S[t] = M[t] = _mm512_setzero_si512();
        #pragma GCC unroll 1
        for (int j = 0; j < 4; j++) { /* sub-blocks 2j (low nibbles) and 2j + 1 (high) */
            __m512i il[TK], ih[TK];
            #pragma GCC unroll 4
            for (int t = 0; t < nt; t++)
                il[t] = ih[t] = _mm512_setzero_si512();
            #pragma GCC unroll 8
            for (int l = 0; l < 8; l++) {
                const __m512i v = _mm512_loadu_si512((const void *)(o + 256 + 64 * (8 * j + l)));
                const __m512i lo = _mm512_and_si512(v, low);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
                #pragma GCC unroll 4
                for (int t = 0; t < nt; t++) {
                    const int8_t *q = A->q + (t0 + (size_t)t) * K + 256 * sb + 64 * j + 4 * l;
                    il[t] = X16_DOT4(il[t], lo, _mm512_set1_epi32(x16_rd32(q)));
                    ih[t] = X16_DOT4(ih[t], hi, _mm512_set1_epi32(x16_rd32(q + 32)));
                }
            }
            const __m512i sa = x16k_byte(sc[j / 2], (2 * j) % 4);
            const __m512i sbv = x16k_byte(sc[j / 2], (2 * j + 1) % 4);
            #pragma GCC unroll 4
            for (int t = 0; t < nt; t++)
                S[t] = _mm512_add_epi32(S[t], _mm512_add_epi32(_mm512_mullo_epi32(il[t], sa),
                                                               _mm512_mullo_epi32(ih[t], sbv)));
        }
        #pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            const __m512i m = x16k_byte(mn[s / 4], s % 4);
            #pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                const int16_t *bs = A->bsums + (t0 + (size_t)t) * (size_t)(K / 16) + 16 * sb + 2 * s;
                M[t] = _mm512_add_epi32(M[t], _mm512_mullo_epi32(m, _mm512_set1_epi32(bs[0] + bs[1])));
            }
        }
        #pragma GCC unroll 4
        for (int t = 0; t < nt; t++) {
            const float dx = A->d[(t0 + (size_t)t) * nsb + sb];
            f[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(dx)), _mm512_cvtepi32_ps(S[t]),
                                   f[t]);
            f[t] = _mm512_fmadd_ps(_mm512_mul_ps(mw, _mm512_set1_ps(-dx)),
                                   _mm512_cvtepi32_ps(M[t]), f[t]);
        }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < nt; t++)
        x16_store(f[t], nr, Y + (size_t)t * ldy);
}

static void x16_q4_k(int K, const void *G, int n_rows, const kvv_cpu_x16_act *A, int n_tok,
                     float *Y, size_t ldy)
{
    const int nsb = K / 256;
    const size_t gstride = (size_t)nsb * 2304;
    for (int r = 0; r < n_rows; r += KVV_CPU_X16) {
        const uint8_t *g = (const uint8_t *)G + (size_t)(r / KVV_CPU_X16) * gstride;
        const int nr = n_rows - r < KVV_CPU_X16 ? n_rows - r : KVV_CPU_X16;
        for (int t = 0; t < n_tok; t += TK) {
            const int nt = n_tok - t < TK ? n_tok - t : TK;
            float *y = Y + (size_t)t * ldy + r;
            switch (nt) {
            case 4: x16k_tile(nsb, g, A, (size_t)t, K, 4, nr, y, ldy); break;
            case 3: x16k_tile(nsb, g, A, (size_t)t, K, 3, nr, y, ldy); break;
            case 2: x16k_tile(nsb, g, A, (size_t)t, K, 2, nr, y, ldy); break;
            default: x16k_tile(nsb, g, A, (size_t)t, K, 1, nr, y, ldy); break;
            }
        }
    }
}

#undef TK
