/*
 * cpu_kquant_avx512vnni.c — the AVX-512 K-quant products with AVX-512 VNNI
 * (vpdpwssd: the int16 pair products summed into each int32 lane in one
 * step). Compiled with -mavx512vnni on top of the AVX-512 flags; the
 * AVX-512 table reaches it for batches, on a CPU with VNNI (cpu_kquant_avx512.c).
 */
#include "engine/cpu/cpu_kquant.h"

#if defined(KVV_CPU_EMULATED) ||                                                          \
    (defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) &&                \
     defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__AVX512VNNI__) &&           \
     defined(__FMA__) && defined(__F16C__))

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif

#define KQ_TABLE kvv_cpu_kq_avx512vnni
#define KQ_DOTW(s, a, sv) _mm512_dpwssd_epi32((s), (a), (sv))
#include "engine/cpu/cpu_kquant_avx512_body.h"

#elif defined(__x86_64__)
#error "cpu_kquant_avx512vnni.c must be compiled with the AVX-512 flags and -mavx512vnni (Makefile)"
#endif
