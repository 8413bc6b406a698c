/*
 * cpu_q4x16_avx512.c — the X16 Q4_0 product with AVX-512BW (vpmaddubsw
 * then vpmaddwd, for CPUs without VNNI), and the AVX-512 table's entry,
 * which takes the VNNI instance (cpu_q4x16_avx512vnni.c) when cpuid
 * reports it. Both give the same bits (cpu_q4x16.h).
 */
#include "engine/cpu/cpu_q4x16.h"

#if defined(KVV_CPU_EMULATED) ||                                                          \
    (defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) &&                \
     defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__FMA__) && defined(__F16C__))

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif

#define Q4X16_NAME kvv_cpu_gemm_q4_0_x16_avx512bw
#define Q4X16_DOT4(s, u, x) _mm512_add_epi32((s), _mm512_madd_epi16(_mm512_maddubs_epi16((u), (x)), ones))
#include "engine/cpu/cpu_q4x16_avx512_body.h"

void kvv_cpu_gemm_q4_0_x16_avx512(int K, const void *G, int n_rows, const int8_t *QX,
                                  const float *DX, const int32_t *SX, int n_tok, float *Y,
                                  size_t ldy)
{
    /* __builtin_cpu_supports reads what libgcc's constructor found */
    if (__builtin_cpu_supports("avx512vnni"))
        kvv_cpu_gemm_q4_0_x16_avx512vnni(K, G, n_rows, QX, DX, SX, n_tok, Y, ldy);
    else
        kvv_cpu_gemm_q4_0_x16_avx512bw(K, G, n_rows, QX, DX, SX, n_tok, Y, ldy);
}

#elif defined(__x86_64__)
#error "cpu_q4x16_avx512.c must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq (see the Makefile)"
#endif
