/*
 * test_cpu_kquant_kernels.c — contract K10 of engine/cpu/cpu_kernels.h for
 * every kernel table: the K-quant (Q2_K..Q6_K) and Q4_1/Q5_1 integer
 * products and their activation rounding (engine/cpu/cpu_kquant.h).
 *
 * Tables run as in test_cpu_kernels.c: generic natively, avx2 and avx512
 * natively where this CPU (capped by KVV_CPU_MAX_ISA) runs them, and always
 * as the same source compiled against SIMDe. Checked, for each table:
 *  - quantize_q8_k / quantize_q8_1 give the generic bits (zero, tiny, NaN,
 *    infinite, tied-maximum blocks included), and the generic bits are the
 *    header's definition (the largest element maps to -127, bsums are the
 *    sums, d = 1/(-127/max));
 *  - every gemm_kq gives, bit for bit, a plain scalar model of the header's
 *    order written here (integers from kvv_kblock_unpack, whose values are
 *    checked against kvv_dequantize_row first), for 1..21 rows, 1..5 tokens,
 *    one, two and three super-blocks, with a padded ldy; one token at a
 *    time and one row at a time give the same bits (K2); so do both
 *    instances the AVX-512 table picks from (AVX-512BW, VNNI), each
 *    natively where the CPU has it and emulated always;
 *  - the result is the dot product it claims to be: within 1e-5 (relative to
 *    the sum of |w*x|) of the double-precision sum over the dequantized
 *    weights and activations.
 * tests/cli/test_kernel_plant.sh links this test with a planted AVX2 build
 * whose two float steps per super-block run in the other order
 * (KVV_CPU_PLANT_KQ_ORDER): it must fail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/cpu_kquant.h"
#include "model/tensor_types.h"
#include "tests/engine/kernel_runs.h"
#include "tests/test_util.h"

/* The emulated AVX-512 instances (test-only objects, tests/engine/simde_x86.h). */
extern const kvv_cpu_kq_fn kvv_cpu_kq_avx512bw_emu[KVV_KQ_COUNT];
extern const kvv_cpu_kq_fn kvv_cpu_kq_avx512vnni_emu[KVV_KQ_COUNT];

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 32);
}
static float frand(void)
{
    return (float)((double)rnd() / 4294967296.0 * 2.0 - 1.0);
}

static void put16(uint8_t *p, float v)
{
    uint16_t h = kvv_fp32_to_fp16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* Random blocks of t (every bit pattern of quants and scales occurs) with
 * fp16 super-block scales of a realistic size. */
static void random_blocks(kvv_type t, uint8_t *x, int64_t n)
{
    const kvv_type_traits *tt = kvv_type_traits_of(t);
    const size_t bytes = (size_t)(n / tt->blck_size) * tt->type_size;
    for (size_t i = 0; i < bytes; i++)
        x[i] = (uint8_t)rnd();
    for (uint8_t *b = x; b < x + bytes; b += tt->type_size) {
        const float d = 1e-3f * (1.0f + frand()), m = 1e-3f * (1.0f + frand());
        switch (t) {
        case KVV_TYPE_Q4_K: case KVV_TYPE_Q5_K: put16(b, d); put16(b + 2, m); break;
        case KVV_TYPE_Q6_K: put16(b + 208, d); break;
        case KVV_TYPE_Q2_K: put16(b + 80, 16 * d); put16(b + 82, 16 * m); break;
        case KVV_TYPE_Q3_K: put16(b + 108, 4 * d); break;
        default: put16(b, 30 * d); put16(b + 2, -60 * m); break; /* Q4_1 / Q5_1: d, m */
        }
    }
}

/* ------------------------------------------------------------ the model */

static float le16(const uint8_t *p)
{
    return kvv_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8));
}

/* The order of cpu_kquant.h, written out plainly, for one output. */
static float model_dot(kvv_type t, const uint8_t *row, int K, const int8_t *q, const float *d,
                       const int16_t *bs, const float *s)
{
    float acc = 0.0f;
    if (t == KVV_TYPE_Q4_1 || t == KVV_TYPE_Q5_1) {
        const int five = t == KVV_TYPE_Q5_1;
        for (int b = 0; b < K / 32; b++) {
            const uint8_t *x = row + (size_t)b * (five ? 24 : 20);
            const uint8_t *qs = x + (five ? 8 : 4);
            int32_t S = 0;
            for (int j = 0; j < 32; j++) { /* nibble j%16 of qs, 5th bit j of qh */
                const int lo = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
                const int hi = five ? (x[4 + j / 8] >> (j % 8)) & 1 : 0;
                S += (lo | hi << 4) * q[32 * b + j];
            }
            acc = fmaf(le16(x) * d[b], (float)S, acc);
            acc = fmaf(le16(x + 2), s[b], acc);
        }
        return acc;
    }
    const size_t bb = kvv_type_row_size(t, 256);
    const int mins = t == KVV_TYPE_Q2_K || t == KVV_TYPE_Q4_K || t == KVV_TYPE_Q5_K;
    for (int sb = 0; sb < K / 256; sb++) {
        kvv_kblock b;
        assert_true(kvv_kblock_unpack(t, row + sb * bb, &b));
        int64_t S = 0, M = 0; /* wide: the model does not rely on int32 */
        for (int i = 0; i < 256; i++)
            S += (int64_t)b.sc[i / 16] * (b.u[i] - b.off) * q[256 * sb + i];
        for (int g = 0; g < 16; g++)
            M += (int64_t)b.mn[g] * bs[16 * sb + g];
        acc = fmaf(b.d * d[sb], (float)S, acc);
        if (mins)
            acc = fmaf(-(b.dmin * d[sb]), (float)M, acc);
    }
    return acc;
}

/* kvv_kblock_unpack reconstructs kvv_dequantize_row's values. */
static void check_unpack(kvv_type t, const uint8_t *x)
{
    float y[256];
    kvv_kblock b;
    assert_true(kvv_dequantize_row(t, x, y, 256));
    assert_true(kvv_kblock_unpack(t, x, &b));
    for (int i = 0; i < 256; i++) {
        const float v = (b.d * (float)b.sc[i / 16]) * (float)(b.u[i] - b.off) -
                        b.dmin * (float)b.mn[i / 16];
        assert_true(v == y[i]);
    }
}

/* ------------------------------------------------------------ activation rounding */

static void special_activations(float *x, int K)
{
    for (int i = 0; i < K; i++)
        x[i] = frand() * 4.0f;
    for (int i = 0; i < 32 && K >= 512; i++)
        x[256 + i] = 0.0f;
    if (K >= 1024) {
        for (int i = 512; i < 768; i++) /* a block of zeros */
            x[i] = 0.0f;
        for (int i = 768; i < 1024; i++) /* tiny values */
            x[i] *= 1e-30f;
        x[1000] = 1e-38f;
        x[800] = 3.0f; /* tied magnitudes: the first one (negative) wins */
        x[790] = -3.0f;
        x[900] = NAN;
    }
    if (K >= 1280)
        x[1100] = INFINITY;
}

static void test_quantize(void **state)
{
    (void)state;
    enum { K = 1536 };
    float *x = malloc(sizeof(float) * K);
    int8_t q[K], qg[K];
    float d[K / 32], dg[K / 32], s[K / 32], sg[K / 32];
    int16_t bs[K / 16], bsg[K / 16];
    special_activations(x, K);
    kvv_cpu_quantize_q8_k_generic(K, x, qg, dg, bsg);
    /* the definition: block 0's largest element maps to -127 */
    int jmax = 0;
    for (int j = 1; j < 256; j++)
        if (fabsf(x[j]) > fabsf(x[jmax]))
            jmax = j;
    assert_int_equal(qg[jmax], -127);
    assert_true(dg[0] == 1.0f / (-127.0f / x[jmax]));
    assert_true(dg[2] == 0.0f); /* the zero block */
    assert_true(qg[790] == -127 && qg[800] == 127); /* -3 came first */
    assert_int_equal(qg[900], 0);                    /* NaN */
    for (int g = 0; g < K / 16; g++) {
        int sum = 0;
        for (int j = 0; j < 16; j++)
            sum += qg[16 * g + j];
        assert_int_equal(bsg[g], sum);
    }
    FOR_EACH_RUN(run) {
        const kvv_cpu_kernels *k = run->k;
        kvv_cpu_quantize_q8_k_generic(K, x, qg, dg, bsg);
        k->quantize_q8_k(K, x, q, d, bs);
        assert_memory_equal(q, qg, K);
        assert_bits(d, dg, K / 256, "quantize_q8_k scales");
        assert_memory_equal(bs, bsg, sizeof bs);
        kvv_cpu_quantize_q8_1_generic(K, x, qg, dg, sg);
        k->quantize_q8_1(K, x, q, d, s);
        assert_memory_equal(q, qg, K);
        assert_bits(d, dg, K / 32, "quantize_q8_1 scales");
        assert_bits(s, sg, K / 32, "quantize_q8_1 sums");
    }
    free(x);
}

/* ------------------------------------------------------------ the products */

static const kvv_type TYPES[KVV_KQ_COUNT] = {KVV_TYPE_Q2_K, KVV_TYPE_Q3_K, KVV_TYPE_Q4_K,
                                             KVV_TYPE_Q5_K, KVV_TYPE_Q6_K, KVV_TYPE_Q4_1,
                                             KVV_TYPE_Q5_1};

typedef struct {
    int K, R, T;
    uint8_t *W;
    size_t rb;
    float *X;
    int8_t *q;
    float *d, *s;
    int16_t *bs;
    float *M; /* [T][R] the model */
} case_data;

static void make_case(kvv_kq kq, int K, int R, int T, case_data *c)
{
    const kvv_type t = TYPES[kq];
    c->K = K;
    c->R = R;
    c->T = T;
    c->rb = kvv_type_row_size(t, K);
    c->W = malloc(c->rb * R);
    c->X = malloc(sizeof(float) * K * T);
    c->q = malloc((size_t)K * T);
    c->d = malloc(sizeof(float) * (K / 32) * T);
    c->s = malloc(sizeof(float) * (K / 32) * T);
    c->bs = malloc(sizeof(int16_t) * (K / 16) * T);
    c->M = malloc(sizeof(float) * R * T);
    random_blocks(t, c->W, (int64_t)K * R);
    if (kvv_cpu_kq_is_k(kq))
        for (int r = 0; r < R; r++)
            for (int sb = 0; sb < K / 256; sb++)
                check_unpack(t, c->W + r * c->rb + sb * kvv_type_row_size(t, 256));
    for (int i = 0; i < K * T; i++)
        c->X[i] = frand() * (1.0f + (float)(i % 7));
    for (int tk = 0; tk < T; tk++) {
        if (kvv_cpu_kq_is_k(kq))
            kvv_cpu_quantize_q8_k_generic(K, c->X + tk * K, c->q + tk * K, c->d + tk * (K / 256),
                                          c->bs + tk * (K / 16));
        else
            kvv_cpu_quantize_q8_1_generic(K, c->X + tk * K, c->q + tk * K, c->d + tk * (K / 32),
                                          c->s + tk * (K / 32));
    }
    const int kk = kvv_cpu_kq_is_k(kq);
    for (int tk = 0; tk < T; tk++)
        for (int r = 0; r < R; r++)
            c->M[tk * R + r] = model_dot(t, c->W + r * c->rb, K, c->q + tk * K,
                                         c->d + tk * (K / (kk ? 256 : 32)),
                                         kk ? c->bs + tk * (K / 16) : NULL,
                                         kk ? NULL : c->s + tk * (K / 32));
}

static void free_case(case_data *c)
{
    free(c->W);
    free(c->X);
    free(c->q);
    free(c->d);
    free(c->s);
    free(c->bs);
    free(c->M);
}

/* The product is a dot product: against double over the dequantized rows
 * and the rounded activations' values. */
static void check_is_dot(kvv_kq kq, const case_data *c)
{
    const kvv_type t = TYPES[kq];
    const int kk = kvv_cpu_kq_is_k(kq), K = c->K;
    float *w = malloc(sizeof(float) * K);
    for (int r = 0; r < c->R; r++) {
        assert_true(kvv_dequantize_row(t, c->W + r * c->rb, w, K));
        for (int tk = 0; tk < c->T; tk++) {
            double s = 0, a = 0;
            for (int i = 0; i < K; i++) {
                const double xv = (double)c->q[tk * K + i] *
                                  c->d[tk * (K / (kk ? 256 : 32)) + i / (kk ? 256 : 32)];
                s += (double)w[i] * xv;
                a += fabs((double)w[i] * xv);
            }
            /* Q4_1/Q5_1 use the fp16 sum s instead of d * sum q: its rounding */
            const double tol = kk ? 1e-5 * a : 2e-3 * a;
            assert_true(fabs(c->M[tk * c->R + r] - s) <= tol + 1e-30);
        }
    }
    free(w);
}

/* Every product of f (one table's gemm_kq[kq], or one AVX-512 instance's)
 * against the model: 1, 5, .., 21 rows (GEMV tiles of 16: full, short),
 * 1, 3, 5 tokens, a padded ldy; one token and one row at a time. */
static void check_fn(kvv_kq kq, const case_data *c, kvv_cpu_kq_fn f, const char *what)
{
    const int kk = kvv_cpu_kq_is_k(kq), R = c->R, T = c->T, PAD = 3;
    const kvv_cpu_qact A = {c->q, c->d, c->bs, c->s};
    float *Y = malloc(sizeof(float) * T * (R + PAD)), *Y1 = malloc(sizeof(float) * T * R);
    for (int nr = 1; nr <= R; nr += 4)
        for (int nt = 1; nt <= T; nt += 2) {
            memset(Y, 0xff, sizeof(float) * T * (R + PAD));
            f(c->K, c->W, c->rb, nr, &A, nt, Y, R + PAD);
            for (int tk = 0; tk < nt; tk++)
                assert_bits(Y + tk * (R + PAD), c->M + tk * R, (size_t)nr, what);
        }
    for (int tk = 0; tk < T; tk++) { /* one token at a time */
        const kvv_cpu_qact At = {c->q + tk * c->K, c->d + tk * (c->K / (kk ? 256 : 32)),
                                 c->bs + tk * (c->K / 16), c->s + tk * (c->K / 32)};
        f(c->K, c->W, c->rb, R, &At, 1, Y1 + tk * R, R);
    }
    assert_bits(Y1, c->M, (size_t)T * R, "one token at a time");
    for (int r = 0; r < R; r++) /* one row at a time */
        f(c->K, c->W + r * c->rb, c->rb, 1, &A, T, Y1 + r, R);
    assert_bits(Y1, c->M, (size_t)T * R, "one row at a time");
    free(Y);
    free(Y1);
}

static void test_products(void **state)
{
    (void)state;
    for (int kq = 0; kq < KVV_KQ_COUNT; kq++) {
        const int kk = kvv_cpu_kq_is_k((kvv_kq)kq);
        const int Ks[3] = {kk ? 256 : 32, kk ? 512 : 96, kk ? 768 : 256};
        for (int ki = 0; ki < 3; ki++) {
            case_data c;
            make_case((kvv_kq)kq, Ks[ki], 21, 5, &c);
            check_is_dot((kvv_kq)kq, &c);
            print_message("  %s K=%d\n", kvv_type_name(TYPES[kq]), Ks[ki]);
            FOR_EACH_RUN(run) {
                check_fn((kvv_kq)kq, &c, run->k->gemm_kq[kq], "gemm_kq vs the order");
            }
            cur = NULL;
#if defined(__x86_64__)
            /* the AVX-512 table picks one of two instances by cpuid: both */
            if (run_cpu.can_run[KVV_CPU_ISA_AVX512]) {
                check_fn((kvv_kq)kq, &c, kvv_cpu_kq_avx512bw[kq], "avx512 BW instance");
                if (__builtin_cpu_supports("avx512vnni"))
                    check_fn((kvv_kq)kq, &c, kvv_cpu_kq_avx512vnni[kq], "avx512 VNNI instance");
            }
            check_fn((kvv_kq)kq, &c, kvv_cpu_kq_avx512bw_emu[kq], "emulated avx512 BW instance");
            check_fn((kvv_kq)kq, &c, kvv_cpu_kq_avx512vnni_emu[kq],
                     "emulated avx512 VNNI instance");
#endif
            free_case(&c);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize),
        cmocka_unit_test(test_products),
    };
    return cmocka_run_group_tests(tests, kernel_runs_setup, NULL);
}
