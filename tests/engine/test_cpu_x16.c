/*
 * test_cpu_x16.c — contract K11 of engine/cpu/cpu_kernels.h for every
 * kernel table: the Q4_0, Q5_0, Q4_1, Q5_1 and Q8_0 products on the X16 layout
 * (engine/cpu/cpu_x16.h), each type in turn.
 *
 * Tables run as in test_cpu_kernels.c (kernel_runs.h). Checked:
 *  - packing keeps every value: kvv_cpu_x16_dequant_row equals
 *    kvv_dequantize_row on the file's rows, padding rows included as zeros
 *    in the layout's size; a table's own pack (pack_x16: AVX-512's Q8_0)
 *    writes the same bytes, and its product on the file's rows (rows_x16)
 *    gives the bits below;
 *  - gemm_x16 gives, bit for bit, a scalar model of the header's
 *    order written here from the file's bytes (not the layout), for a row
 *    count that is not a multiple of 16 and 1..11 tokens with a padded ldy;
 *    one token at a time and each 16-row group alone give the same bits (K2);
 *  - on AVX-512, both instances (BW, and VNNI where the CPU has it or
 *    emulated) give those bits; for Q4_1/Q5_1 they are gemm_kq's bits on
 *    the file's rows (cpu_kquant.h);
 *  - the result is the dot product it claims: within 2e-3 (relative to the
 *    sum of |w*x|; the _1 types' block sums s are fp16) of the
 *    double-precision sum over dequantized weights and rounded activations;
 *  - a planted change (one level off by one in the packed copy) is seen.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/cpu_kquant.h"
#include "engine/cpu/cpu_q8dot.h"
#include "engine/cpu/cpu_x16.h"
#include "model/tensor_types.h"
#include "tests/engine/kernel_runs.h"
#include "tests/test_util.h"

#if defined(__x86_64__)
extern const kvv_cpu_x16_fn kvv_cpu_x16_avx512bw_emu[KVV_X16_COUNT];
extern const kvv_cpu_x16_fn kvv_cpu_x16_avx512vnni_emu[KVV_X16_COUNT];
#endif

enum { K = 160, R = 37, T = 11, NB = K / 32, LDY = R + 3, MAXB = 34 };

/* The 32-weight block types; Q4_K has its own fixture (below). */
#define N32 KVV_X16_Q4_K
static const kvv_type types[N32] = {KVV_TYPE_Q4_0, KVV_TYPE_Q5_0, KVV_TYPE_Q4_1, KVV_TYPE_Q5_1,
                                    KVV_TYPE_Q8_0};

static uint64_t rs = 0x243F6A8885A308D3ull;
static float frand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((double)(uint32_t)(rs >> 32) / 4294967296.0 * 2.0 - 1.0);
}

/* One type's fixture. */
typedef struct {
    kvv_x16 x;
    size_t fbb;                 /* the file's block bytes */
    uint8_t file[R * NB * MAXB];
    uint8_t *g;                 /* X16 copy */
    int8_t q[T * K];
    float d[T * NB], s[T * NB];
    int32_t sum[T * NB];
    kvv_cpu_x16_act A;
    float want[T * LDY];
} fixture;

static fixture F[N32];
static float X[T * K];

/* Level of element e of a file block, and where its scale, min live. */
static int file_level(kvv_x16 x, const uint8_t *blk, int e)
{
    if (x == KVV_X16_Q8_0) /* the header's unsigned level: w + 128 */
        return (int8_t)blk[2 + e] + 128;
    const int qs = x == KVV_X16_Q4_0 ? 2 : x == KVV_X16_Q5_0 ? 6 : x == KVV_X16_Q4_1 ? 4 : 8;
    int u = e < 16 ? blk[qs + e] & 15 : blk[qs + e - 16] >> 4;
    if (kvv_cpu_x16_has_qh(x)) {
        const int qh = x == KVV_X16_Q5_0 ? 2 : 4;
        u |= ((blk[qh + e / 8] >> (e % 8)) & 1) << 4;
    }
    return u;
}

static float fp16_at(const uint8_t *p)
{
    return kvv_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8));
}

/* The header's order, from the file's bytes. */
static float model(const fixture *f, int r, int t)
{
    const uint8_t *row = f->file + (size_t)r * NB * f->fbb;
    const int8_t *q = f->q + (size_t)t * K;
    const int min = kvv_cpu_x16_has_min(f->x), off = kvv_cpu_x16_offset(f->x);
    float acc = 0.0f;
    for (int b = 0; b < NB; b++) {
        const uint8_t *blk = row + f->fbb * b;
        int32_t S = min ? 0 : -off * f->sum[t * NB + b];
        for (int e = 0; e < 32; e++)
            S += file_level(f->x, blk, e) * q[32 * b + e];
        acc = fmaf(fp16_at(blk) * f->d[t * NB + b], (float)S, acc);
        if (min)
            acc = fmaf(fp16_at(blk + 2), f->s[t * NB + b], acc);
    }
    return acc;
}

static int setup(void **state)
{
    if (kernel_runs_setup(state))
        return -1;
    for (int i = 0; i < T * K; i++)
        X[i] = frand() * 3.0f;
    for (int i = 0; i < 32; i++) /* token 0: an all-zero block, then a tiny one */
        X[i] = 0.0f, X[32 + i] = 1e-30f * frand();
    X[K + 7] = NAN;
    float w[K];
    for (int x = 0; x < N32; x++) {
        fixture *f = &F[x];
        f->x = (kvv_x16)x;
        f->fbb = kvv_type_row_size(types[x], 32);
        for (int r = 0; r < R; r++) {
            for (int i = 0; i < K; i++)
                w[i] = frand() * (float)(r + 1) +
                       (kvv_cpu_x16_has_min((kvv_x16)x) ? 0.5f * (float)r : 0.0f);
            if (!kvv_quantize_row(types[x], w, f->file + (size_t)r * NB * f->fbb, K))
                return -1;
        }
        for (int t = 0; t < T; t++) {
            if (kvv_cpu_x16_has_min(f->x))
                kvv_cpu_quantize_q8_1_generic(K, X + (size_t)t * K, f->q + (size_t)t * K,
                                              f->d + t * NB, f->s + t * NB);
            else
                kvv_cpu_quantize_act_generic(K, X + (size_t)t * K, f->q + (size_t)t * K,
                                             f->d + t * NB);
        }
        kvv_cpu_block_sums(K, f->q, T, f->sum);
        f->A = (kvv_cpu_x16_act){f->q, f->d, f->sum, f->s, NULL};
        f->g = malloc(kvv_cpu_x16_bytes(f->x, R, K));
        if (!f->g)
            return -1;
        kvv_cpu_x16_pack(f->x, K, f->file, NB * f->fbb, R, f->g);
        for (int t = 0; t < T; t++)
            for (int r = 0; r < R; r++)
                f->want[t * LDY + r] = model(f, r, t);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int x = 0; x < N32; x++)
        free(F[x].g);
    return 0;
}

static void test_pack(void **state)
{
    (void)state;
    float a[K], b[K];
    for (int x = 0; x < N32; x++) {
        const fixture *f = &F[x];
        assert_int_equal(kvv_cpu_x16_bytes(f->x, R, K), 48 * NB * f->fbb); /* 3 groups */
        assert_int_equal(kvv_cpu_x16_bytes(f->x, 32, K), 32 * NB * f->fbb);
        for (int r = 0; r < R; r++) {
            kvv_cpu_x16_dequant_row(f->x, K, f->g, r, a);
            assert_true(kvv_dequantize_row(types[x], f->file + (size_t)r * NB * f->fbb, b, K));
            assert_memory_equal(a, b, sizeof a);
        }
        for (int r = R; r < 48; r++) { /* padding: scale (and min) 0, so every value is 0 */
            kvv_cpu_x16_dequant_row(f->x, K, f->g, r, a);
            for (int i = 0; i < K; i++)
                assert_true(a[i] == 0.0f);
        }
    }
}

/* A table's own pack (pack_x16) writes kvv_cpu_x16_pack's bytes, every
 * byte of the layout (the destination starts poisoned), for row counts
 * that fill a group, leave one short, or fall below 16. */
static void test_table_pack(void **state)
{
    (void)state;
    int checked = 0;
    const int rows[] = {1, 7, 16, 21, R};
    FOR_EACH_RUN(run) {
        for (int x = 0; x < N32; x++) {
            const kvv_cpu_x16_pack_fn pack = run->k->pack_x16[x];
            if (!pack)
                continue;
            const fixture *f = &F[x];
            for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
                const size_t n = kvv_cpu_x16_bytes(f->x, rows[i], K);
                uint8_t *want = malloc(n), *got = malloc(n);
                assert_non_null(want);
                assert_non_null(got);
                kvv_cpu_x16_pack(f->x, K, f->file, NB * f->fbb, rows[i], want);
                memset(got, 0xAB, n);
                pack(K, f->file, NB * f->fbb, rows[i], got);
                assert_memory_equal(got, want, n);
                free(want);
                free(got);
            }
            checked++;
        }
    }
#if defined(__x86_64__)
    /* the AVX-512 table has one for Q8_0, native (where the CPU runs it) and
     * emulated: never a test with nothing checked */
    assert_true(checked >= 1);
#endif
    print_message("  %d table packs equal kvv_cpu_x16_pack\n", checked);
}

/* A table's rows product (rows_x16: AVX-512's Q8_0) gives the model's bits
 * token by token on the file's rows, for row counts around a group. */
static void test_table_rows(void **state)
{
    (void)state;
    int checked = 0;
    const int rows[] = {1, 7, 16, 21, R};
    float Y[R];
    FOR_EACH_RUN(run) {
        for (int x = 0; x < N32; x++) {
            const kvv_cpu_x16_rows_fn fn = run->k->rows_x16[x];
            if (!fn)
                continue;
            const fixture *f = &F[x];
            for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
                for (int t = 0; t < T; t++) {
                    const kvv_cpu_x16_act At = {f->q + (size_t)t * K, f->d + t * NB,
                                                f->sum + t * NB, f->s + t * NB, NULL};
                    memset(Y, 0xff, sizeof Y);
                    fn(K, f->file, NB * f->fbb, rows[i], &At, Y);
                    assert_bits(Y, f->want + t * LDY, (size_t)rows[i], "rows_x16 vs the order");
                }
            checked++;
        }
    }
#if defined(__x86_64__)
    assert_true(checked >= 1); /* AVX-512's Q8_0, native where it runs and emulated */
#endif
    print_message("  %d table rows products give gemm_x16's bits\n", checked);
}

/* fn against the model: all at once, one token at a time, group by group. */
static void check_fn(const fixture *f, kvv_cpu_x16_fn fn, const char *what)
{
    static float Y[T * LDY], Y1[T * LDY];
    memset(Y, 0, sizeof Y);
    memset(Y1, 0, sizeof Y1);
    fn(K, f->g, R, &f->A, T, Y, LDY);
    for (int t = 0; t < T; t++)
        assert_bits(Y + t * LDY, f->want + t * LDY, R, what);
    for (int t = 0; t < T; t++) {
        const kvv_cpu_x16_act a = {f->q + (size_t)t * K, f->d + t * NB, f->sum + t * NB,
                                   f->s + t * NB, NULL};
        fn(K, f->g, R, &a, 1, Y1 + t * LDY, LDY);
    }
    assert_bits(Y1, Y, T * LDY, "one token at a time");
    for (int r = 0; r < R; r += 16)
        fn(K, f->g + (size_t)r * NB * f->fbb, R - r < 16 ? R - r : 16, &f->A, T, Y1 + r, LDY);
    assert_bits(Y1, Y, T * LDY, "one group at a time");
}

static void test_order(void **state)
{
    (void)state;
    for (int x = 0; x < N32; x++) {
        const fixture *f = &F[x];
        print_message(" %s\n", kvv_type_name(types[x]));
        FOR_EACH_RUN(run) {
            check_fn(f, run->k->gemm_x16[x], "gemm_x16 vs the order");
        }
        cur = NULL;
#if defined(__x86_64__)
        if (run_cpu.can_run[KVV_CPU_ISA_AVX512]) {
            check_fn(f, kvv_cpu_x16_avx512bw[x], "avx512 BW instance");
            if (__builtin_cpu_supports("avx512vnni"))
                check_fn(f, kvv_cpu_x16_avx512vnni[x], "avx512 VNNI instance");
        }
        check_fn(f, kvv_cpu_x16_avx512bw_emu[x], "emulated avx512 BW instance");
        check_fn(f, kvv_cpu_x16_avx512vnni_emu[x], "emulated avx512 VNNI instance");
#endif
    }
}

/* Q4_1/Q5_1: the same bits as the file-block product of cpu_kquant.h. */
static void test_same_as_kquant(void **state)
{
    (void)state;
    static float Y[T * LDY];
    for (int x = KVV_X16_Q4_1; x <= KVV_X16_Q5_1; x++) { /* the _1 types */
        const fixture *f = &F[x];
        const kvv_cpu_qact a = {f->q, f->d, NULL, f->s};
        kvv_cpu_kq_generic[kvv_cpu_kq_of(types[x])](K, f->file, NB * f->fbb, R, &a, T, Y, LDY);
        for (int t = 0; t < T; t++)
            assert_bits(Y + t * LDY, f->want + t * LDY, R, "gemm_kq vs gemm_x16");
    }
}

/* The claim behind the order: a dot product of dequantized weights and
 * rounded activations. */
static void test_value(void **state)
{
    (void)state;
    float w[K];
    for (int x = 0; x < N32; x++) {
        const fixture *f = &F[x];
        for (int r = 0; r < R; r++) {
            kvv_dequantize_row(types[x], f->file + (size_t)r * NB * f->fbb, w, K);
            for (int t = 0; t < T; t++) {
                double s = 0, mag = 0;
                for (int i = 0; i < K; i++) {
                    double v = (double)f->q[t * K + i] * f->d[t * NB + i / 32];
                    s += (double)w[i] * v;
                    mag += fabs((double)w[i] * v);
                }
                if (kvv_cpu_x16_has_min(f->x)) /* s_b is d * sum q rounded to fp16 */
                    mag *= 1.01;
                assert_true(fabs(f->want[t * LDY + r] - s) <= 2e-3 * (mag > 0 ? mag : 1));
            }
        }
    }
}

/* Negative control: one level changed in the packed copy changes exactly
 * that row's outputs, in every table, for every type. */
static void test_planted_level(void **state)
{
    (void)state;
    static float Y[T * LDY];
    const int row = 21; /* group 1, lane 5 */
    for (int x = 0; x < N32; x++) {
        const fixture *f = &F[x];
        uint8_t *byte = f->g + (size_t)1 * NB * 16 * f->fbb + 2 * 16 * f->fbb +
                        kvv_cpu_x16_nib(f->x) + 64 + 4 * (row % 16) + 2;
        const uint8_t keep = *byte;
        *byte = (uint8_t)((keep & 0xF0) | ((keep & 15) ^ 1));
        FOR_EACH_RUN(run) {
            run->k->gemm_x16[x](K, f->g, R, &f->A, T, Y, LDY);
            int changed = 0;
            for (int t = 0; t < T; t++)
                for (int r = 0; r < R; r++) {
                    int diff = memcmp(&Y[t * LDY + r], &f->want[t * LDY + r], sizeof(float)) != 0;
                    if (diff && r != row)
                        fail_msg("%s (%s): row %d changed", run->name, run->how, r);
                    changed += diff;
                }
            assert_true(changed >= T - 2); /* tokens whose block 2 is all zero stay */
        }
        *byte = keep;
    }
}

/* ---- Q4_K (AVX-512 only): the bits of gemm_kq on the file's rows */

enum { KK = 512, NSB = KK / 256 };

static void test_q4_k(void **state)
{
    (void)state;
    static uint8_t file[R * NSB * 144];
    static float x[T * KK], w[KK], a[KK], b[KK], want[T * LDY], Y[T * LDY], Y1[T * LDY];
    static int8_t q[T * KK];
    static float d[T * NSB];
    static int16_t bs[T * KK / 16];
    for (int r = 0; r < R; r++) {
        for (int i = 0; i < KK; i++)
            w[i] = frand() * (float)(r + 1) + 0.3f * (float)(r % 5);
        assert_true(kvv_quantize_row(KVV_TYPE_Q4_K, w, file + (size_t)r * NSB * 144, KK));
    }
    for (int i = 0; i < T * KK; i++)
        x[i] = frand() * 2.0f;
    for (int i = 0; i < 256; i++) /* token 0: an all-zero super-block */
        x[i] = 0.0f;
    for (int t = 0; t < T; t++)
        kvv_cpu_quantize_q8_k_generic(KK, x + (size_t)t * KK, q + (size_t)t * KK, d + t * NSB,
                                      bs + t * (KK / 16));
    const kvv_cpu_qact qa = {q, d, bs, NULL};
    kvv_cpu_kq_generic[KVV_KQ_Q4_K](KK, file, NSB * 144, R, &qa, T, want, LDY);
    uint8_t *g = malloc(kvv_cpu_x16_bytes(KVV_X16_Q4_K, R, KK));
    assert_non_null(g);
    assert_int_equal(kvv_cpu_x16_bytes(KVV_X16_Q4_K, R, KK), (size_t)48 * NSB * 144);
    kvv_cpu_x16_pack(KVV_X16_Q4_K, KK, file, NSB * 144, R, g);
    for (int r = 0; r < R; r++) {
        kvv_cpu_x16_dequant_row(KVV_X16_Q4_K, KK, g, r, a);
        assert_true(kvv_dequantize_row(KVV_TYPE_Q4_K, file + (size_t)r * NSB * 144, b, KK));
        assert_memory_equal(a, b, sizeof a);
    }
    const kvv_cpu_x16_act A = {q, d, NULL, NULL, bs};
    kvv_cpu_x16_fn fns[6];
    const char *names[6];
    int n = 0;
    FOR_EACH_RUN(run) {
        if (run->k->gemm_x16[KVV_X16_Q4_K])
            fns[n] = run->k->gemm_x16[KVV_X16_Q4_K], names[n++] = run->name;
        else /* tables without it keep the file's blocks */
            assert_true(strcmp(run->name, "avx512") != 0);
    }
    cur = NULL;
#if defined(__x86_64__)
    if (run_cpu.can_run[KVV_CPU_ISA_AVX512]) {
        fns[n] = kvv_cpu_x16_avx512bw[KVV_X16_Q4_K], names[n++] = "avx512 BW";
        if (__builtin_cpu_supports("avx512vnni"))
            fns[n] = kvv_cpu_x16_avx512vnni[KVV_X16_Q4_K], names[n++] = "avx512 VNNI";
    }
    fns[n] = kvv_cpu_x16_avx512bw_emu[KVV_X16_Q4_K], names[n++] = "emulated avx512 BW";
    fns[n] = kvv_cpu_x16_avx512vnni_emu[KVV_X16_Q4_K], names[n++] = "emulated avx512 VNNI";
#endif
    assert_true(n >= 2);
    for (int i = 0; i < n; i++) {
        print_message("  Q4_K %s\n", names[i]);
        memset(Y, 0, sizeof Y);
        fns[i](KK, g, R, &A, T, Y, LDY);
        for (int t = 0; t < T; t++)
            assert_bits(Y + t * LDY, want + t * LDY, R, "Q4_K x16 vs gemm_kq");
        for (int t = 0; t < T; t++) {
            const kvv_cpu_x16_act a1 = {q + (size_t)t * KK, d + t * NSB, NULL, NULL,
                                        bs + t * (KK / 16)};
            fns[i](KK, g, R, &a1, 1, Y1 + t * LDY, LDY);
        }
        assert_bits(Y1, Y, T * LDY, "Q4_K one token at a time");
        /* a planted level in row 21 changes that row only */
        uint8_t *byte = g + (size_t)1 * NSB * 2304 + 2304 + 256 + 64 * 9 + 4 * 5 + 1;
        const uint8_t keep = *byte;
        *byte = (uint8_t)((keep & 0xF0) | ((keep & 15) ^ 1));
        fns[i](KK, g, R, &A, T, Y1, LDY);
        *byte = keep;
        int changed = 0;
        for (int t = 0; t < T; t++)
            for (int r = 0; r < R; r++) {
                int diff = memcmp(&Y1[t * LDY + r], &Y[t * LDY + r], sizeof(float)) != 0;
                if (diff && r != 21)
                    fail_msg("%s: planted level changed row %d", names[i], r);
                changed += diff;
            }
        assert_true(changed >= T - 2);
    }
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack),
        cmocka_unit_test(test_table_pack),
        cmocka_unit_test(test_table_rows),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_same_as_kquant),
        cmocka_unit_test(test_value),
        cmocka_unit_test(test_planted_level),
        cmocka_unit_test(test_q4_k),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
