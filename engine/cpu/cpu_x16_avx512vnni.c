/*
 * cpu_x16_avx512vnni.c — the X16 products with AVX-512 VNNI (vpdpbusd: 4
 * u8*s8 products summed into each int32 lane in one step). Compiled with
 * -mavx512vnni on top of the AVX-512 flags; the AVX-512 table reaches it
 * only on a CPU with VNNI (cpu_x16_avx512.c).
 */
#include "engine/cpu/cpu_x16.h"

#if defined(KVV_CPU_EMULATED) ||                                                          \
    (defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) &&                \
     defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__))

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif

#define X16_TABLE kvv_cpu_x16_avx512vnni
#define X16_DOT4(s, u, x) _mm512_dpbusd_epi32((s), (u), (x))
#define X16_Q8_INIT(sum) _mm512_set1_epi32(-128 * (sum))
#define X16_DOT8(s, v, x) _mm512_dpbusd_epi32((s), (v), (x))
#include "engine/cpu/cpu_x16_avx512_body.h"

#elif defined(__x86_64__)
#error "cpu_x16_avx512vnni.c must be compiled with the AVX-512 flags and -mavx512vnni (Makefile)"
#endif
