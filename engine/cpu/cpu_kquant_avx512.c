/*
 * cpu_kquant_avx512.c — the AVX-512 K-quant products with AVX-512BW
 * (vpmaddwd then vpaddd), and the AVX-512 table's entries, which take the
 * VNNI instance (cpu_kquant_avx512vnni.c) for batches when cpuid reports
 * it. Both give the same bits (cpu_kquant_avx512_body.h).
 */
#include "engine/cpu/cpu_kquant.h"

#if defined(KVV_CPU_EMULATED) ||                                                          \
    (defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) &&                \
     defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__FMA__) && defined(__F16C__))

#ifndef KVV_CPU_EMULATED /* the test-only SIMDe build brings its own (cpu_kernels.h) */
#include <immintrin.h>
#endif

#define KQ_TABLE kvv_cpu_kq_avx512bw
#define KQ_DOTW(s, a, sv) _mm512_add_epi32((s), _mm512_madd_epi16((a), (sv)))
#include "engine/cpu/cpu_kquant_avx512_body.h"

/* Batches take VNNI where the CPU has it: prompts of qwen3-0.6b Q5_K_M and
 * Q6_K ran 1.12x faster. One token keeps the BW instance: its vpdpwssd
 * chains ran 5-7% faster with the rows in L2 but decode from memory 0.87x
 * (Q6_K; docs/cpu-engine.md). __builtin_cpu_supports reads what libgcc's
 * constructor found. */
#define PICK(name, k)                                                                             \
    static void name(int K, const void *W, size_t rb, int nr, const kvv_cpu_qact *A, int nt,      \
                     float *Y, size_t ldy)                                                        \
    {                                                                                             \
        (nt > 1 && __builtin_cpu_supports("avx512vnni") ? kvv_cpu_kq_avx512vnni                   \
                                                        : kvv_cpu_kq_avx512bw)[k](K, W, rb, nr, A, \
                                                                                  nt, Y, ldy);     \
    }
PICK(pick_q2_k, KVV_KQ_Q2_K)
PICK(pick_q3_k, KVV_KQ_Q3_K)
PICK(pick_q4_k, KVV_KQ_Q4_K)
PICK(pick_q5_k, KVV_KQ_Q5_K)
PICK(pick_q6_k, KVV_KQ_Q6_K)
PICK(pick_q4_1, KVV_KQ_Q4_1)
PICK(pick_q5_1, KVV_KQ_Q5_1)

const kvv_cpu_kq_fn kvv_cpu_kq_avx512[KVV_KQ_COUNT] = {
    pick_q2_k, pick_q3_k, pick_q4_k, pick_q5_k, pick_q6_k, pick_q4_1, pick_q5_1,
};

#elif defined(__x86_64__)
#error "cpu_kquant_avx512.c must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq"
#endif
