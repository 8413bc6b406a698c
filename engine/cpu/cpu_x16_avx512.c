/*
 * cpu_x16_avx512.c — the X16 products with AVX-512BW (vpmaddubsw then
 * vpmaddwd, for CPUs without VNNI), and the AVX-512 table's entries, which
 * take the VNNI instance (cpu_x16_avx512vnni.c) when cpuid reports it.
 * Both give the same bits (cpu_x16.h).
 */
#include "engine/cpu/cpu_x16.h"

#if defined(KVV_CPU_EMULATED) ||                                                          \
    (defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) &&                \
     defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__FMA__) && defined(__F16C__))

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif

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

const kvv_cpu_x16_fn kvv_cpu_x16_avx512[KVV_X16_COUNT] = {pick_q4_0, pick_q5_0, pick_q4_1,
                                                          pick_q5_1, pick_q8_0, pick_q4_k};

#elif defined(__x86_64__)
#error "cpu_x16_avx512.c must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq (see the Makefile)"
#endif
