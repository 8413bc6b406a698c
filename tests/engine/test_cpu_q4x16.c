/*
 * test_cpu_q4x16.c — contract K11 of engine/cpu/cpu_kernels.h for every
 * kernel table: fast mode's Q4_0 product on the X16 layout
 * (engine/cpu/cpu_q4x16.h).
 *
 * Tables run as in test_cpu_kernels.c (kernel_runs.h). Checked:
 *  - packing keeps every value: kvv_cpu_x16_dequant_row equals
 *    kvv_dequantize_row on the file's rows, padding rows included as zeros
 *    in the layout's size;
 *  - gemm_q4_0_x16 gives, bit for bit, a scalar model of the header's
 *    order written here from the file's bytes (not the layout), for a row
 *    count that is not a multiple of 16 and 1..11 tokens with a padded ldy;
 *    one token at a time and each 16-row group alone give the same bits (K2);
 *  - on AVX-512, both instances (BW, and VNNI where the CPU has it or
 *    emulated) give those bits;
 *  - the result is the dot product it claims: within 1e-5 (relative to the
 *    sum of |w*x|) of the double-precision sum over dequantized weights and
 *    rounded activations;
 *  - a planted change (one level off by one in the packed copy) is seen.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/cpu_q4x16.h"
#include "engine/cpu/cpu_q8dot.h"
#include "model/tensor_types.h"
#include "tests/engine/kernel_runs.h"
#include "tests/test_util.h"

#if defined(__x86_64__)
void kvv_cpu_gemm_q4_0_x16_avx512bw_emu(int K, const void *G, int n_rows, const int8_t *QX,
                                        const float *DX, const int32_t *SX, int n_tok, float *Y,
                                        size_t ldy);
void kvv_cpu_gemm_q4_0_x16_avx512vnni_emu(int K, const void *G, int n_rows, const int8_t *QX,
                                          const float *DX, const int32_t *SX, int n_tok,
                                          float *Y, size_t ldy);
#endif

enum { K = 160, R = 37, T = 11, NB = K / 32, LDY = R + 3 };

static uint64_t rs = 0x243F6A8885A308D3ull;
static float frand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((double)(uint32_t)(rs >> 32) / 4294967296.0 * 2.0 - 1.0);
}

typedef struct {
    uint8_t file[R * NB * 18];
    uint8_t *g;                 /* X16 copy */
    float X[T * K];
    int8_t qx[T * K];
    float dx[T * NB];
    int32_t sx[T * NB];
    float want[T * LDY];
} fixture;

static fixture F;

/* The header's order, from the file's bytes. */
static float model(int r, int t)
{
    const uint8_t *row = F.file + (size_t)r * NB * 18;
    const int8_t *q = F.qx + (size_t)t * K;
    float acc = 0.0f;
    for (int b = 0; b < NB; b++) {
        const uint8_t *blk = row + 18 * b;
        int32_t S = 0;
        for (int e = 0; e < 32; e++) {
            int u = e < 16 ? blk[2 + e] & 15 : blk[2 + e - 16] >> 4;
            S += (u - 8) * q[32 * b + e];
        }
        const float dw = kvv_fp16_to_fp32((uint16_t)(blk[0] | blk[1] << 8));
        acc = fmaf(dw * F.dx[t * NB + b], (float)S, acc);
    }
    return acc;
}

static int setup(void **state)
{
    if (kernel_runs_setup(state))
        return -1;
    float w[K];
    for (int r = 0; r < R; r++) {
        for (int i = 0; i < K; i++)
            w[i] = frand() * (float)(r + 1);
        if (!kvv_quantize_row(KVV_TYPE_Q4_0, w, F.file + (size_t)r * NB * 18, K))
            return -1;
    }
    for (int i = 0; i < T * K; i++)
        F.X[i] = frand() * 3.0f;
    for (int i = 0; i < 32; i++) /* token 0: an all-zero block, then a tiny one */
        F.X[i] = 0.0f, F.X[32 + i] = 1e-30f * frand();
    F.X[K + 7] = NAN;
    for (int t = 0; t < T; t++)
        kvv_cpu_quantize_act_generic(K, F.X + (size_t)t * K, F.qx + (size_t)t * K, F.dx + t * NB);
    kvv_cpu_block_sums(K, F.qx, T, F.sx);
    F.g = malloc(kvv_cpu_x16_bytes(R, K));
    if (!F.g)
        return -1;
    kvv_cpu_x16_pack(K, F.file, NB * 18, R, F.g);
    for (int t = 0; t < T; t++)
        for (int r = 0; r < R; r++)
            F.want[t * LDY + r] = model(r, t);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(F.g);
    return 0;
}

static void test_pack(void **state)
{
    (void)state;
    assert_int_equal(kvv_cpu_x16_bytes(R, K), (size_t)48 * NB * 18); /* 3 groups */
    assert_int_equal(kvv_cpu_x16_bytes(32, K), (size_t)32 * NB * 18);
    float a[K], b[K];
    for (int r = 0; r < R; r++) {
        kvv_cpu_x16_dequant_row(K, F.g, r, a);
        assert_true(kvv_dequantize_row(KVV_TYPE_Q4_0, F.file + (size_t)r * NB * 18, b, K));
        assert_memory_equal(a, b, sizeof a);
    }
    for (int r = R; r < 48; r++) { /* padding: scale 0, so every value is 0 */
        kvv_cpu_x16_dequant_row(K, F.g, r, a);
        for (int i = 0; i < K; i++)
            assert_true(a[i] == 0.0f);
    }
}

/* fn against the model: all at once, one token at a time, group by group. */
static void check_fn(kvv_cpu_x16_fn fn, const char *what)
{
    static float Y[T * LDY], Y1[T * LDY];
    memset(Y, 0, sizeof Y);
    memset(Y1, 0, sizeof Y1);
    fn(K, F.g, R, F.qx, F.dx, F.sx, T, Y, LDY);
    for (int t = 0; t < T; t++)
        assert_bits(Y + t * LDY, F.want + t * LDY, R, what);
    for (int t = 0; t < T; t++)
        fn(K, F.g, R, F.qx + (size_t)t * K, F.dx + t * NB, F.sx + t * NB, 1, Y1 + t * LDY, LDY);
    assert_bits(Y1, Y, T * LDY, "one token at a time");
    for (int r = 0; r < R; r += 16)
        fn(K, F.g + (size_t)r * NB * 18, R - r < 16 ? R - r : 16, F.qx, F.dx, F.sx, T, Y1 + r,
           LDY);
    assert_bits(Y1, Y, T * LDY, "one group at a time");
}

static void test_order(void **state)
{
    (void)state;
    FOR_EACH_RUN(run) {
        check_fn(run->k->gemm_q4_0_x16, "gemm_q4_0_x16 vs the order");
    }
#if defined(__x86_64__)
    if (run_cpu.can_run[KVV_CPU_ISA_AVX512]) {
        check_fn(kvv_cpu_gemm_q4_0_x16_avx512bw, "avx512 BW instance");
        if (__builtin_cpu_supports("avx512vnni"))
            check_fn(kvv_cpu_gemm_q4_0_x16_avx512vnni, "avx512 VNNI instance");
    }
    check_fn(kvv_cpu_gemm_q4_0_x16_avx512bw_emu, "emulated avx512 BW instance");
    check_fn(kvv_cpu_gemm_q4_0_x16_avx512vnni_emu, "emulated avx512 VNNI instance");
#endif
}

/* The claim behind the order: a dot product of dequantized weights and
 * rounded activations. */
static void test_value(void **state)
{
    (void)state;
    float w[K];
    for (int r = 0; r < R; r++) {
        kvv_dequantize_row(KVV_TYPE_Q4_0, F.file + (size_t)r * NB * 18, w, K);
        for (int t = 0; t < T; t++) {
            double s = 0, mag = 0;
            for (int i = 0; i < K; i++) {
                double x = (double)F.qx[t * K + i] * F.dx[t * NB + i / 32];
                s += (double)w[i] * x;
                mag += fabs((double)w[i] * x);
            }
            assert_true(fabs(F.want[t * LDY + r] - s) <= 1e-5 * (mag > 0 ? mag : 1));
        }
    }
}

/* Negative control: one level changed in the packed copy changes exactly
 * that row's outputs, in every table. */
static void test_planted_level(void **state)
{
    (void)state;
    static float Y[T * LDY];
    const int row = 21; /* group 1, lane 5 */
    uint8_t *byte = F.g + (size_t)1 * NB * KVV_CPU_X16_BLOCK + 2 * KVV_CPU_X16_BLOCK + 32 + 64 +
                    4 * (row % 16) + 2;
    const uint8_t keep = *byte;
    *byte = (uint8_t)((keep & 0xF0) | ((keep & 15) ^ 1));
    FOR_EACH_RUN(run) {
        run->k->gemm_q4_0_x16(K, F.g, R, F.qx, F.dx, F.sx, T, Y, LDY);
        int changed = 0;
        for (int t = 0; t < T; t++)
            for (int r = 0; r < R; r++) {
                int diff = memcmp(&Y[t * LDY + r], &F.want[t * LDY + r], sizeof(float)) != 0;
                if (diff && r != row)
                    fail_msg("%s (%s): row %d changed", run->name, run->how, r);
                changed += diff;
            }
        assert_true(changed >= T - 2); /* tokens whose block 2 is all zero stay */
    }
    *byte = keep;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_value),
        cmocka_unit_test(test_planted_level),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
