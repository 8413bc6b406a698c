/*
 * test_cpu_kernels.c — the cpu engine's kernel tables.
 *
 * For every kernel table this CPU can run (generic always; AVX2, AVX-512
 * where supported): gemm_f32 gives the same bits whatever the batch size,
 * the token's place in the batch and the row blocking (the invariant-mode
 * contract of cpu_kernels.h), and agrees with a double-precision product;
 * the fused Q8_0 kernels (row-major and 4-row interleaved) give exactly the
 * bits of gemm_f32 on the dequantized rows; the SIMD dequantizers equal kvv_dequantize_row; dot is
 * gemm_f32 of one row and one token.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/cpu_q8dot.h"
#include "model/tensor_types.h"
#include "tests/test_util.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static float frand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static const kvv_cpu_kernels *tables[3];
static int n_tables;

static int setup(void **state)
{
    (void)state;
    n_tables = 0;
    const char *names[] = {"generic", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        const kvv_cpu_kernels *k = kvv_cpu_kernels_select(names[i]);
        if (k)
            tables[n_tables++] = k;
    }
    return 0;
}

static void test_select(void **state)
{
    (void)state;
    const kvv_cpu_kernels *best = kvv_cpu_kernels_select(NULL);
    assert_non_null(best);
    assert_non_null(kvv_cpu_kernels_select("generic"));
    assert_null(kvv_cpu_kernels_select("no-such-isa"));
    /* auto picks the widest the CPU has */
    assert_ptr_equal(best, tables[n_tables - 1]);
}

static void test_gemm_invariant(void **state)
{
    (void)state;
    const int Ks[] = {1, 7, 8, 9, 37, 64, 200, 576};
    const int R = 13, T = 11;
    for (int ti = 0; ti < n_tables; ti++) {
        const kvv_cpu_kernels *k = tables[ti];
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            int K = Ks[ki];
            float *W = malloc(sizeof(float) * R * K), *X = malloc(sizeof(float) * T * K);
            float *Y = malloc(sizeof(float) * T * R), *Y1 = malloc(sizeof(float) * T * R);
            float *Y2 = malloc(sizeof(float) * T * R);
            for (int i = 0; i < R * K; i++)
                W[i] = frand();
            for (int i = 0; i < T * K; i++)
                X[i] = frand();
            k->gemm_f32(K, W, K, R, X, K, T, Y, R);
            for (int t = 0; t < T; t++) /* one token at a time */
                k->gemm_f32(K, W, K, R, X + (size_t)t * K, K, 1, Y1 + (size_t)t * R, R);
            for (int r = 0; r < R; r++) /* one row at a time, tokens 2 by 2 */
                for (int t = 0; t < T; t += 2)
                    k->gemm_f32(K, W + (size_t)r * K, K, 1, X + (size_t)t * K, K,
                                t + 2 <= T ? 2 : 1, Y2 + (size_t)t * R + r, R);
            assert_memory_equal(Y, Y1, sizeof(float) * T * R);
            assert_memory_equal(Y, Y2, sizeof(float) * T * R);
            for (int t = 0; t < T; t++)
                for (int r = 0; r < R; r++) {
                    double s = 0, a = 0;
                    for (int i = 0; i < K; i++) {
                        s += (double)W[r * K + i] * X[t * K + i];
                        a += fabs((double)W[r * K + i] * X[t * K + i]);
                    }
                    assert_true(fabs(Y[t * R + r] - s) <= 1e-6 * a + 1e-30);
                    float d = k->dot(K, W + (size_t)r * K, X + (size_t)t * K);
                    assert_memory_equal(&d, &Y[t * R + r], sizeof d);
                }
            free(W);
            free(X);
            free(Y);
            free(Y1);
            free(Y2);
        }
    }
}

static void test_q8_0_fused_and_dequant(void **state)
{
    (void)state;
    const int K = 256, R = 9, T = 5;
    size_t rb = kvv_type_row_size(KVV_TYPE_Q8_0, K), rb4 = kvv_type_row_size(KVV_TYPE_Q4_0, K);
    uint8_t *q = malloc(rb * R), *q4 = malloc(rb4 * R);
    float *src = malloc(sizeof(float) * K), *Wd = malloc(sizeof(float) * R * K);
    float *X = malloc(sizeof(float) * T * K), *Y = malloc(sizeof(float) * T * R);
    float *Yq = malloc(sizeof(float) * T * R), *a = malloc(sizeof(float) * K);
    float *b = malloc(sizeof(float) * K);
    for (int r = 0; r < R; r++) {
        for (int i = 0; i < K; i++)
            src[i] = frand() * (r + 1);
        assert_true(kvv_quantize_row(KVV_TYPE_Q8_0, src, q + r * rb, K));
        assert_true(kvv_quantize_row(KVV_TYPE_Q4_0, src, q4 + r * rb4, K));
        assert_true(kvv_dequantize_row(KVV_TYPE_Q8_0, q + r * rb, Wd + (size_t)r * K, K));
    }
    for (int i = 0; i < T * K; i++)
        X[i] = frand();
    for (int ti = 0; ti < n_tables; ti++) {
        const kvv_cpu_kernels *k = tables[ti];
        for (int r = 0; r < R; r++) {
            k->dequant_q8_0(q + r * rb, a, K);
            assert_memory_equal(a, Wd + (size_t)r * K, sizeof(float) * K);
            k->dequant_q4_0(q4 + r * rb4, a, K);
            assert_true(kvv_dequantize_row(KVV_TYPE_Q4_0, q4 + r * rb4, b, K));
            assert_memory_equal(a, b, sizeof(float) * K);
        }
        k->gemm_f32(K, Wd, K, R, X, K, T, Y, R);
        for (int nt = 1; nt <= T; nt++) {
            memset(Yq, 0, sizeof(float) * T * R);
            k->gemv_q8_0(K, q, rb, R, X, K, nt, Yq, R);
            assert_memory_equal(Yq, Y, sizeof(float) * nt * R);
        }
        if (k->gemv_q8_0_x4) { /* the first 8 rows in the 4-row interleaved layout */
            uint8_t *g = malloc(rb * 8);
            for (int r = 0; r < 8; r++)
                for (int bl = 0; bl < K / 32; bl++)
                    memcpy(g + (size_t)(r / 4) * 4 * rb + ((size_t)bl * 4 + r % 4) * 34,
                           q + r * rb + bl * 34, 34);
            for (int t = 0; t < T; t++) {
                memset(Yq, 0, sizeof(float) * R);
                k->gemv_q8_0_x4(K, g, 2, X + (size_t)t * K, Yq);
                assert_memory_equal(Yq, Y + (size_t)t * R, sizeof(float) * 8);
            }
            free(g);
        }
    }
    free(q);
    free(q4);
    free(src);
    free(Wd);
    free(X);
    free(Y);
    free(Yq);
    free(a);
    free(b);
}

/* Fast mode's Q8_0-activation products: the SIMD quantizer gives exactly
 * the generic bits (zero, tiny and large blocks included); each table's
 * Q8_0 and Q4_0 products are the same bits for any batch size and row
 * blocking, and equal the exact block-integer sum sum_b dw*dx*isum within
 * float rounding. */
static void test_q8_activation_products(void **state)
{
    (void)state;
    const int K = 192, R = 11, T = 7, NB = K / 32;
    size_t rb8 = kvv_type_row_size(KVV_TYPE_Q8_0, K), rb4 = kvv_type_row_size(KVV_TYPE_Q4_0, K);
    uint8_t *w8 = malloc(rb8 * R), *w4 = malloc(rb4 * R);
    float *src = malloc(sizeof(float) * K), *X = malloc(sizeof(float) * T * K);
    int8_t *qx = malloc((size_t)T * K), *qg = malloc((size_t)T * K);
    float *dx = malloc(sizeof(float) * T * NB), *dg = malloc(sizeof(float) * T * NB);
    float *Y = malloc(sizeof(float) * T * R), *Y1 = malloc(sizeof(float) * T * R);
    float *wd = malloc(sizeof(float) * K);
    for (int r = 0; r < R; r++) {
        for (int i = 0; i < K; i++)
            src[i] = frand() * (r + 1);
        assert_true(kvv_quantize_row(KVV_TYPE_Q8_0, src, w8 + r * rb8, K));
        assert_true(kvv_quantize_row(KVV_TYPE_Q4_0, src, w4 + r * rb4, K));
    }
    for (int i = 0; i < T * K; i++)
        X[i] = frand() * 3.0f;
    for (int i = 0; i < 32; i++) {
        X[i] = 0.0f;          /* an all-zero block: d = 0, q = 0 */
        X[32 + i] = 1e-30f * frand(); /* a block whose scale is an fp16 subnormal or 0 */
    }
    kvv_cpu_quantize_act_generic(K, X, qg, dg);
    for (int t = 1; t < T; t++)
        kvv_cpu_quantize_act_generic(K, X + (size_t)t * K, qg + (size_t)t * K, dg + t * NB);
    assert_true(dg[0] == 0.0f);
    for (int ti = 0; ti < n_tables; ti++) {
        const kvv_cpu_kernels *k = tables[ti];
        for (int t = 0; t < T; t++)
            k->quantize_act(K, X + (size_t)t * K, qx + (size_t)t * K, dx + t * NB);
        assert_memory_equal(qx, qg, (size_t)T * K);
        assert_memory_equal(dx, dg, sizeof(float) * T * NB);
        for (int type = 0; type < 2; type++) {
            const uint8_t *W = type ? w4 : w8;
            size_t rb = type ? rb4 : rb8;
            kvv_type ty = type ? KVV_TYPE_Q4_0 : KVV_TYPE_Q8_0;
            void (*gemm)(int, const void *, size_t, int, const int8_t *, const float *, int,
                         float *, size_t) = type ? k->gemm_q4_0_q8 : k->gemm_q8_0_q8;
            gemm(K, W, rb, R, qx, dx, T, Y, R);
            for (int t = 0; t < T; t++) /* one token at a time */
                gemm(K, W, rb, R, qx + (size_t)t * K, dx + t * NB, 1, Y1 + (size_t)t * R, R);
            assert_memory_equal(Y, Y1, sizeof(float) * T * R);
            for (int r = 0; r < R; r++) /* one row at a time, all tokens */
                gemm(K, W + r * rb, rb, 1, qx, dx, T, Y1 + r, R);
            assert_memory_equal(Y, Y1, sizeof(float) * T * R);
            for (int r = 0; r < R; r++) {
                assert_true(kvv_dequantize_row(ty, W + r * rb, wd, K));
                for (int t = 0; t < T; t++) {
                    double s = 0, a = 0;
                    for (int i = 0; i < K; i++) {
                        /* dequantized weight * (q * d) of the activation */
                        double p = (double)wd[i] * qx[t * K + i] * dx[t * NB + i / 32];
                        s += p;
                        a += fabs(p);
                    }
                    assert_true(fabs(Y[t * R + r] - s) <= 1e-6 * a + 1e-30);
                }
            }
        }
    }
    free(w8);
    free(w4);
    free(src);
    free(X);
    free(qx);
    free(qg);
    free(dx);
    free(dg);
    free(Y);
    free(Y1);
    free(wd);
}

/* The attention's kernels: wsum over 1..5 heads equals zeroing each output
 * row and one axpy per nonzero weight, bit for bit (column counts with and
 * without a tail); sum equals dot with a row of ones; scale is x*a. */
static void test_attention_kernels(void **state)
{
    (void)state;
    const int n = 45, Ds[] = {64, 37, 8};
    float *V = malloc(sizeof(float) * n * 80), *w = malloc(sizeof(float) * 5 * n);
    float *o = malloc(sizeof(float) * 5 * 64), *e = malloc(sizeof(float) * 5 * 64);
    float *ones = malloc(sizeof(float) * n), *x = malloc(sizeof(float) * n);
    for (int i = 0; i < n * 80; i++)
        V[i] = frand();
    for (int i = 0; i < 5 * n; i++)
        w[i] = i % 7 == 3 ? 0.0f : frand() * frand();
    for (int i = 0; i < n; i++) {
        ones[i] = 1.0f;
        x[i] = frand();
    }
    for (int ti = 0; ti < n_tables; ti++) {
        const kvv_cpu_kernels *k = tables[ti];
        for (int di = 0; di < 3; di++) {
            int D = Ds[di];
            for (int nh = 1; nh <= 5; nh++) {
                k->wsum(n, D, nh, w, (size_t)n, V, 80, o, (size_t)D);
                for (int h = 0; h < nh; h++) {
                    float *eh = e + (size_t)h * D;
                    memset(eh, 0, sizeof(float) * D);
                    for (int p = 0; p < n; p++)
                        if (w[h * n + p] != 0.0f)
                            k->axpy(D, w[h * n + p], V + (size_t)p * 80, eh);
                }
                assert_memory_equal(o, e, sizeof(float) * nh * D);
            }
        }
        for (int m = 1; m <= n; m += 11) {
            float s = k->sum(m, x), d = k->dot(m, x, ones);
            assert_memory_equal(&s, &d, sizeof s);
        }
        memcpy(o, x, sizeof(float) * n);
        k->scale(n, o, 0.37f);
        for (int i = 0; i < n; i++)
            assert_true(o[i] == x[i] * 0.37f);
    }
    free(V);
    free(w);
    free(o);
    free(e);
    free(ones);
    free(x);
}

/* KVV_CPU_G16 rows (16 int8, fp32 s, fp32 m per group): dequant_g16 is
 * s*q - m in every element, and gemv_g16 gives exactly the bits of
 * gemm_f32 on the dequantized rows (odd and even row counts). */
static void test_g16(void **state)
{
    (void)state;
    const int K = 96, R = 7, NG = K / 16;
    uint8_t *W = malloc((size_t)R * NG * 24);
    float *Wd = malloc(sizeof(float) * R * K), *x = malloc(sizeof(float) * K);
    float *y = malloc(sizeof(float) * R), *ye = malloc(sizeof(float) * R);
    for (int r = 0; r < R; r++)
        for (int g = 0; g < NG; g++) {
            uint8_t *b = W + ((size_t)r * NG + g) * 24;
            float s = frand() * 0.1f, m = g % 3 ? frand() * 0.01f : 0.0f;
            for (int j = 0; j < 16; j++) {
                b[j] = (uint8_t)(int8_t)(frand() * 60.0f);
                Wd[r * K + g * 16 + j] = s * (float)(int8_t)b[j] - m;
            }
            memcpy(b + 16, &s, 4);
            memcpy(b + 20, &m, 4);
        }
    for (int i = 0; i < K; i++)
        x[i] = frand();
    for (int ti = 0; ti < n_tables; ti++) {
        const kvv_cpu_kernels *k = tables[ti];
        float *d = malloc(sizeof(float) * R * K);
        for (int r = 0; r < R; r++)
            k->dequant_g16(W + (size_t)r * NG * 24, d + (size_t)r * K, K);
        assert_memory_equal(d, Wd, sizeof(float) * R * K);
        free(d);
        if (!k->gemv_g16)
            continue;
        k->gemm_f32(K, Wd, K, R, x, K, 1, ye, R);
        k->gemv_g16(K, W, (size_t)NG * 24, R, x, y);
        assert_memory_equal(y, ye, sizeof(float) * R);
    }
    free(W);
    free(Wd);
    free(x);
    free(y);
    free(ye);
}

/* silu_mul and exp_shift give the scalar bits in every lane and the tail, in
 * every table (so an element's result never depends on its index), and exp
 * is accurate to a few ulp with the right special values. */
static void test_elementwise(void **state)
{
    (void)state;
    enum { N = 4099 };
    float *g = malloc(sizeof(float) * N), *u = malloc(sizeof(float) * N);
    float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
    float *e0 = malloc(sizeof(float) * N), *e1 = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) {
        g[i] = frand() * (i % 7 == 0 ? 120.0f : 12.0f);
        u[i] = frand();
    }
    g[5] = -INFINITY;
    g[6] = NAN;
    g[7] = 88.7f;
    g[8] = -87.3f;
    g[9] = -0.0f;
    g[10] = 100.0f;
    const kvv_cpu_kernels *gen = tables[0];
    memcpy(a, g, sizeof(float) * N);
    gen->silu_mul(N, a, u);
    gen->exp_shift(N, g, 0.0f, e0);
    for (int ti = 1; ti < n_tables; ti++)
        for (int off = 0; off < 9; off++) { /* shift the lane/tail split */
            memcpy(b, g + off, sizeof(float) * (N - off));
            tables[ti]->silu_mul(N - off, b, u + off);
            tables[ti]->exp_shift(N - off, g + off, 0.0f, e1);
            for (int i = 0; i < N - off; i++) {
                float x, y;
                memcpy(&x, &a[i + off], 4);
                memcpy(&y, &b[i], 4);
                if (x == x || y == y)
                    assert_memory_equal(&a[i + off], &b[i], sizeof(float));
                assert_memory_equal(&e0[i + off], &e1[i], sizeof(float));
            }
        }
    assert_true(e0[5] == 0.0f);
    assert_true(isnan(e0[6]));
    assert_true(e0[10] == INFINITY);
    for (int i = 11; i < N; i++) {
        double want = exp((double)g[i]);
        if (want > 1e-37 && want < 1e38)
            assert_true(fabs(e0[i] - want) <= 4e-7 * want);
    }
    free(g);
    free(u);
    free(a);
    free(b);
    free(e0);
    free(e1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_gemm_invariant),
        cmocka_unit_test(test_q8_0_fused_and_dequant),
        cmocka_unit_test(test_q8_activation_products),
        cmocka_unit_test(test_attention_kernels),
        cmocka_unit_test(test_g16),
        cmocka_unit_test(test_elementwise),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
