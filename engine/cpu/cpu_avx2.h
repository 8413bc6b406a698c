/*
 * cpu_avx2.h — small AVX2 helpers shared by the AVX2 kernel files and the AVX-512
 * ones, which use them for 256-bit work (include only from files compiled
 * with -mavx2 -mfma -mf16c or wider).
 */
#ifndef KVV_CPU_AVX2_H
#define KVV_CPU_AVX2_H

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif
#include <stdint.h>

/* The fixed 8-lane reduction of cpu_kernels.h: lanes (j, j+4) first, then
 * (0+4)+(2+6) and (1+5)+(3+7), then the two. */
static inline float kvv_avx2_hsum(__m256 a)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* A little-endian fp16 at p, exactly as fp32. */
static inline float kvv_avx2_fp16(const uint8_t *p)
{
    return _cvtsh_ss((unsigned short)(p[0] | (p[1] << 8)));
}

/* 8 vectors of 8 int32 -> their 8 sums, in order. */
static inline __m256i kvv_avx2_hsum8x8(const __m256i *v)
{
    const __m256i a = _mm256_hadd_epi32(v[0], v[1]), b = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i c = _mm256_hadd_epi32(v[4], v[5]), d = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
    /* ab = [v0 v1 v2 v3 (low halves) | v0 v1 v2 v3 (high halves)], cd likewise */
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20),
                            _mm256_permute2x128_si256(ab, cd, 0x31));
}

#endif
