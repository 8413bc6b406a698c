/*
 * test_cpu_kernels.c — the contracts K1-K9 and K12 of engine/cpu/cpu_kernels.h,
 * for every kernel table, on every machine.
 *
 * Tables run: generic natively; avx2 and avx512 natively where this CPU
 * (capped by KVV_CPU_MAX_ISA, cpu_isa.h) can run them, AND always as the
 * same source compiled against SIMDe (the Makefile's test-only emulated
 * objects, tests/engine/simde_x86.h). Where both run, every kernel's
 * emulated bits must equal the native ones. The order checks (K1, K9) use
 * a plain scalar model of the documented order, so a table whose kernels
 * agree with each other but not with the documentation still fails (the
 * planted lane swap of tests/cli/test_kernel_plant.sh).
 *
 * The last line of the output says which tables ran and how, e.g.
 *   tables: generic (native), avx2 (native, emulated agrees), avx512 (emulated)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_expf.h"
#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/cpu_q8dot.h"
#include "model/tensor_types.h"
#include "tests/test_util.h"

/* The emulated tables (test-only objects, tests/engine/simde_x86.h). */
extern const kvv_cpu_kernels kvv_cpu_kernels_avx2_emu;
extern const kvv_cpu_kernels kvv_cpu_kernels_avx512_emu;

typedef struct {
    const kvv_cpu_kernels *k;
    kvv_cpu_isa isa;
    const char *how; /* "native" or "emulated" */
} table_run;

static table_run runs[2 * KVV_CPU_ISA_COUNT];
static int n_runs;
static const kvv_cpu_kernels *native[KVV_CPU_ISA_COUNT], *emulated[KVV_CPU_ISA_COUNT];

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static float frand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void fill(float *v, int n, float scale)
{
    for (int i = 0; i < n; i++)
        v[i] = frand() * scale;
}

static int setup(void **state)
{
    (void)state;
    kvv_cpu_isa_info ci;
    kvv_error err = {0};
    if (kvv_cpu_isa_probe(&ci, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    emulated[KVV_CPU_ISA_AVX2] = &kvv_cpu_kernels_avx2_emu;
    emulated[KVV_CPU_ISA_AVX512] = &kvv_cpu_kernels_avx512_emu;
    n_runs = 0;
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++) {
        native[i] = ci.can_run[i] ? kvv_cpu_kernels_of((kvv_cpu_isa)i) : NULL;
        if (native[i])
            runs[n_runs++] = (table_run){native[i], (kvv_cpu_isa)i, "native"};
        if (emulated[i])
            runs[n_runs++] = (table_run){emulated[i], (kvv_cpu_isa)i, "emulated"};
    }
    return 0;
}

/* Every run in turn, named in the log; cur names it in assert_bits. */
static const table_run *cur;
#define FOR_EACH_RUN(r)                                                                           \
    for (const table_run *r = runs;                                                               \
         r < runs + n_runs &&                                                                     \
         (cur = r, print_message("  %s (%s)\n", kvv_cpu_isa_name(r->isa), r->how), 1);          \
         r++)

static void assert_bits(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s (%s): %s: element %zu is %a, expected %a",
                     cur ? kvv_cpu_isa_name(cur->isa) : "?", cur ? cur->how : "?", what, i,
                     (double)got[i], (double)want[i]);
}

/* ------------------------------------------------------------ the order */

static float step(int fused, float acc, float w, float x)
{
    return fused ? fmaf(w, x, acc) : acc + w * x;
}

/* The order of cpu_kernels.h, written out plainly (K1). */
static float model_dot(const kvv_cpu_kernels *k, int K, const float *w, const float *x)
{
    const int L = k->lanes;
    float a[16] = {0};
    int KL = K - K % L;
    for (int i = 0; i < KL; i++)
        a[i % L] = step(k->fused, a[i % L], w[i], x[i]);
    for (int j = 0; L == 16 && j < 8; j++)
        a[j] = a[j] + a[j + 8];
    float s = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    for (int i = KL; i < K; i++)
        s = step(k->fused, s, w[i], x[i]);
    return s;
}

/* Q8_0 rows of random weights (r+1 scales the row): bytes, and the
 * dequantized floats (kvv_dequantize_row). */
static void make_q8_0(int K, int R, uint8_t *q, float *deq)
{
    size_t rb = kvv_type_row_size(KVV_TYPE_Q8_0, K);
    float *src = malloc(sizeof(float) * K);
    for (int r = 0; r < R; r++) {
        fill(src, K, (float)(r + 1));
        assert_true(kvv_quantize_row(KVV_TYPE_Q8_0, src, q + r * rb, K));
        assert_true(kvv_dequantize_row(KVV_TYPE_Q8_0, q + r * rb, deq + (size_t)r * K, K));
    }
    free(src);
}

/* Block b of rows 4g..4g+3 side by side (the KVV_CPU_X4 layout). */
static void make_x4(int K, int R, const uint8_t *q, uint8_t *g)
{
    size_t rb = kvv_type_row_size(KVV_TYPE_Q8_0, K);
    for (int r = 0; r < R; r++)
        for (int b = 0; b < K / 32; b++)
            memcpy(g + (size_t)(r / 4) * 4 * rb + ((size_t)b * 4 + r % 4) * 34, q + r * rb + b * 34,
                   34);
}

/* K1: gemm_f32, dot, gemv_q8_0 and gemv_q8_0_x4 follow the
 * documented order, for lengths around every lane and block boundary (and
 * past the generic table's 4096-element pieces). */
static void test_order(void **state)
{
    (void)state;
    const int Ks[] = {1, 7, 8, 9, 15, 16, 17, 24, 31, 33, 48, 64, 96, 200, 576, 4160};
    const int R = 8, T = 3;
    FOR_EACH_RUN(run) {
        const kvv_cpu_kernels *k = run->k;
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            int K = Ks[ki];
            size_t rb = kvv_type_row_size(KVV_TYPE_Q8_0, K);
            float *W = malloc(sizeof(float) * R * K), *X = malloc(sizeof(float) * T * K);
            float *Y = malloc(sizeof(float) * T * R), *M = malloc(sizeof(float) * T * R);
            uint8_t *q = malloc(rb * R + 24 * (size_t)R * (K / 16 + 1)), *g = malloc(rb * R);
            fill(W, R * K, 1.0f);
            fill(X, T * K, 1.0f);
            for (int t = 0; t < T; t++)
                for (int r = 0; r < R; r++)
                    M[t * R + r] = model_dot(k, K, W + (size_t)r * K, X + (size_t)t * K);
            k->gemm_f32(K, W, K, R, X, K, T, Y, R);
            assert_bits(Y, M, (size_t)T * R, "gemm_f32 vs the order");
            float d = k->dot(K, W, X);
            assert_bits(&d, M, 1, "dot vs the order");
            if (K % 32 == 0) { /* Q8_0: the model on the dequantized rows */
                make_q8_0(K, R, q, W);
                for (int t = 0; t < T; t++)
                    for (int r = 0; r < R; r++)
                        M[t * R + r] = model_dot(k, K, W + (size_t)r * K, X + (size_t)t * K);
                k->gemv_q8_0(K, q, rb, R, X, K, T, Y, R);
                assert_bits(Y, M, (size_t)T * R, "gemv_q8_0 vs the order");
                if (k->gemv_q8_0_x4) {
                    make_x4(K, R, q, g);
                    k->gemv_q8_0_x4(K, g, R / 4, X, Y);
                    assert_bits(Y, M, R, "gemv_q8_0_x4 vs the order");
                }
            }
            free(W);
            free(X);
            free(Y);
            free(M);
            free(q);
            free(g);
        }
    }
}

/* ------------------------------------------------------------ K2, K3, K4 */

/* K2: gemm_f32's bits do not depend on the batch, the token's or the row's
 * place, or the leading dimensions; and it is a dot product (to 1e-6 of
 * the absolute sum, against double). */
static void test_gemm_batch_invariant(void **state)
{
    (void)state;
    const int Ks[] = {1, 9, 37, 64, 200, 576};
    const int R = 13, T = 11, PAD = 5;
    FOR_EACH_RUN(run) {
        const kvv_cpu_kernels *k = run->k;
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            int K = Ks[ki], ld = K + PAD;
            float *W = malloc(sizeof(float) * R * ld), *X = malloc(sizeof(float) * T * ld);
            float *Y = malloc(sizeof(float) * T * R), *Y1 = malloc(sizeof(float) * T * R);
            float *Y2 = malloc(sizeof(float) * T * (R + PAD));
            fill(W, R * ld, 1.0f);
            fill(X, T * ld, 1.0f);
            k->gemm_f32(K, W, ld, R, X, ld, T, Y, R);
            for (int t = 0; t < T; t++) /* one token at a time */
                k->gemm_f32(K, W, ld, R, X + (size_t)t * ld, ld, 1, Y1 + (size_t)t * R, R);
            assert_bits(Y1, Y, (size_t)T * R, "gemm_f32 one token at a time");
            for (int r = 0; r < R; r++) /* one row at a time, tokens 2 by 2, wider ldy */
                for (int t = 0; t < T; t += 2)
                    k->gemm_f32(K, W + (size_t)r * ld, ld, 1, X + (size_t)t * ld, ld,
                                t + 2 <= T ? 2 : 1, Y2 + (size_t)t * (R + PAD) + r, R + PAD);
            for (int t = 0; t < T; t++)
                assert_bits(Y2 + (size_t)t * (R + PAD), Y + (size_t)t * R, R,
                            "gemm_f32 row by row");
            for (int t = 0; t < T; t++)
                for (int r = 0; r < R; r++) {
                    double s = 0, a = 0;
                    for (int i = 0; i < K; i++) {
                        s += (double)W[r * ld + i] * X[t * ld + i];
                        a += fabs((double)W[r * ld + i] * X[t * ld + i]);
                    }
                    assert_true(fabs(Y[t * R + r] - s) <= 1e-6 * a + 1e-30);
                }
            free(W);
            free(X);
            free(Y);
            free(Y1);
            free(Y2);
        }
    }
}

/* K3, K4 for Q8_0 / Q4_0: the dequantizers equal kvv_dequantize_row; the
 * fused kernels (row-major for 1..5 tokens, X4) give the bits of gemm_f32
 * on the dequantized rows (K2 across their token counts too). */
static void test_q8_0_fused_and_dequant(void **state)
{
    (void)state;
    const int K = 256, R = 9, T = 5;
    size_t rb = kvv_type_row_size(KVV_TYPE_Q8_0, K), rb4 = kvv_type_row_size(KVV_TYPE_Q4_0, K);
    uint8_t *q = malloc(rb * R), *q4 = malloc(rb4 * R), *g = malloc(rb * 8);
    float *src = malloc(sizeof(float) * K), *Wd = malloc(sizeof(float) * R * K);
    float *X = malloc(sizeof(float) * T * K), *Y = malloc(sizeof(float) * T * R);
    float *Yq = malloc(sizeof(float) * T * R), *a = malloc(sizeof(float) * K);
    float *b = malloc(sizeof(float) * K);
    make_q8_0(K, R, q, Wd);
    for (int r = 0; r < R; r++) {
        fill(src, K, (float)(r + 1));
        assert_true(kvv_quantize_row(KVV_TYPE_Q4_0, src, q4 + r * rb4, K));
    }
    make_x4(K, 8, q, g);
    fill(X, T * K, 1.0f);
    FOR_EACH_RUN(run) {
        const kvv_cpu_kernels *k = run->k;
        for (int r = 0; r < R; r++) {
            k->dequant_q8_0(q + r * rb, a, K);
            assert_bits(a, Wd + (size_t)r * K, K, "dequant_q8_0");
            k->dequant_q4_0(q4 + r * rb4, a, K);
            assert_true(kvv_dequantize_row(KVV_TYPE_Q4_0, q4 + r * rb4, b, K));
            assert_bits(a, b, K, "dequant_q4_0");
        }
        k->gemm_f32(K, Wd, K, R, X, K, T, Y, R);
        for (int nt = 1; nt <= T; nt++) {
            memset(Yq, 0, sizeof(float) * T * R);
            k->gemv_q8_0(K, q, rb, R, X, K, nt, Yq, R);
            assert_bits(Yq, Y, (size_t)nt * R, "gemv_q8_0 vs gemm_f32");
        }
        for (int t = 0; k->gemv_q8_0_x4 && t < T; t++) {
            memset(Yq, 0, sizeof(float) * R);
            k->gemv_q8_0_x4(K, g, 2, X + (size_t)t * K, Yq);
            assert_bits(Yq, Y + (size_t)t * R, 8, "gemv_q8_0_x4 vs gemm_f32");
        }
    }
    free(q);
    free(q4);
    free(g);
    free(src);
    free(Wd);
    free(X);
    free(Y);
    free(Yq);
    free(a);
    free(b);
}

/* ------------------------------------------------------------ K5, K6, K7 */

/* K5-K7: sum is dot with a row of ones (every length 0..70, so every
 * lane/tail split); axpy is the per-element step in body and tail; wsum
 * over 1..5 heads equals zeroing each output row and one axpy per nonzero
 * weight (column counts with and without a tail); scale is x*a. */
static void test_attention_kernels(void **state)
{
    (void)state;
    const int n = 71, Ds[] = {64, 37, 8, 5};
    float *V = malloc(sizeof(float) * n * 80), *w = malloc(sizeof(float) * 5 * n);
    float *o = malloc(sizeof(float) * 5 * 80), *e = malloc(sizeof(float) * 5 * 80);
    float *ones = malloc(sizeof(float) * n), *x = malloc(sizeof(float) * n);
    float *y = malloc(sizeof(float) * n), *ym = malloc(sizeof(float) * n);
    fill(V, n * 80, 1.0f);
    for (int i = 0; i < 5 * n; i++)
        w[i] = i % 7 == 3 ? 0.0f : frand() * frand();
    for (int i = 0; i < n; i++) {
        ones[i] = 1.0f;
        x[i] = frand() * (i % 5 == 0 ? 1e4f : 1.0f);
    }
    FOR_EACH_RUN(run) {
        const kvv_cpu_kernels *k = run->k;
        for (int m = 0; m <= n; m++) {
            float s = k->sum(m, x), d = k->dot(m, x, ones);
            assert_bits(&s, &d, 1, "sum vs dot(x, ones)");
        }
        for (int m = 1; m <= 40; m++) {
            fill(y, m, 1.0f);
            for (int i = 0; i < m; i++)
                ym[i] = step(k->fused, y[i], 0.37f, x[i]);
            k->axpy(m, 0.37f, x, y);
            assert_bits(y, ym, (size_t)m, "axpy vs y + a*x per element");
        }
        for (int di = 0; di < 4; di++) {
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
                assert_bits(o, e, (size_t)nh * D, "wsum vs the axpy chain");
            }
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
    free(y);
    free(ym);
}

/* K12: widen_f16 / widen_bf16 on all 65536 bit patterns (zeros, subnormals,
 * infinities, quiet and signalling NaNs) give the scalar conversions' bits,
 * and so does every length 1..40 from every start (body and tail). */
static void test_widen(void **state)
{
    (void)state;
    const int N = 65536;
    uint16_t *h = malloc(sizeof(uint16_t) * N);
    float *got = malloc(sizeof(float) * N), *want16 = malloc(sizeof(float) * N),
          *wantb = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) {
        h[i] = (uint16_t)(i * 40503u); /* a permutation: neighbours differ */
        want16[i] = kvv_fp16_to_fp32(h[i]);
        wantb[i] = kvv_bf16_to_fp32(h[i]);
    }
    FOR_EACH_RUN(run) {
        const kvv_cpu_kernels *k = run->k;
        k->widen_f16(N, h, got);
        assert_bits(got, want16, (size_t)N, "widen_f16 vs kvv_fp16_to_fp32");
        k->widen_bf16(N, h, got);
        assert_bits(got, wantb, (size_t)N, "widen_bf16 vs kvv_bf16_to_fp32");
        for (int m = 1; m <= 40; m++)
            for (int at = 0; at < 9; at++) {
                float sentinel = -7.0f;
                got[m] = sentinel;
                k->widen_f16(m, h + 1000 * at + 7, got);
                assert_bits(got, want16 + 1000 * at + 7, (size_t)m, "widen_f16, short rows");
                assert_bits(got + m, &sentinel, 1, "widen_f16 writes past n");
                k->widen_bf16(m, h + 1000 * at + 7, got);
                assert_bits(got, wantb + 1000 * at + 7, (size_t)m, "widen_bf16, short rows");
                assert_bits(got + m, &sentinel, 1, "widen_bf16 writes past n");
            }
    }
    free(h);
    free(got);
    free(want16);
    free(wantb);
}

/* ------------------------------------------------------------ K8 */

/* K8: silu_mul and exp_shift give the scalar bits (cpu_expf.h) in every
 * lane and the tail, with the lane/tail split shifted; exp is accurate to
 * a few ulp with the right special values. */
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
    for (int i = 0; i < N; i++) { /* the scalar functions */
        a[i] = kvv_cpu_silu_mul_inline(g[i], u[i]);
        e0[i] = g[i] == -INFINITY ? 0.0f : kvv_cpu_expf_inline(g[i]);
    }
    FOR_EACH_RUN(run) {
        for (int off = 0; off < 17; off += 4) { /* shift the lane/tail split */
            memcpy(b, g + off, sizeof(float) * (N - off));
            run->k->silu_mul(N - off, b, u + off);
            run->k->exp_shift(N - off, g + off, 0.0f, e1);
            for (int i = 0; i < N - off; i++) {
                if (a[i + off] == a[i + off] || b[i] == b[i]) /* NaN payloads may differ */
                    assert_bits(&b[i], &a[i + off], 1, "silu_mul vs scalar");
                assert_bits(&e1[i], &e0[i + off], 1, "exp_shift vs scalar");
            }
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

/* ------------------------------------------------------------ K9 */

/* The order of cpu_q8dot.h written out: 8 lanes, lane j takes block b's
 * exact integer sum of elements 4j..4j+3 times (dw*dx), fused iff the table
 * is; then the 8-lane tree. w: int8 weights, dw: their block scales. */
static float model_q8(const kvv_cpu_kernels *k, int K, const int8_t *w, const float *dw,
                      const int8_t *qx, const float *dx)
{
    float a[8] = {0};
    for (int b = 0; b < K / 32; b++) {
        const float d = dw[b] * dx[b];
        for (int j = 0; j < 8; j++) {
            int32_t s = 0;
            for (int i = 4 * j; i < 4 * j + 4; i++)
                s += (int32_t)w[b * 32 + i] * qx[b * 32 + i];
            a[j] = step(k->fused, a[j], d, (float)s);
        }
    }
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* Row r of Q8_0 (type 0) or Q4_0 (type 1) bytes as int8 and block scales. */
static void unpack_row(int type, const uint8_t *row, int K, int8_t *w, float *dw)
{
    const size_t bb = type ? 18 : 34;
    for (int b = 0; b < K / 32; b++) {
        const uint8_t *blk = row + b * bb;
        dw[b] = kvv_fp16_to_fp32((uint16_t)(blk[0] | blk[1] << 8));
        for (int j = 0; j < 32; j++)
            w[b * 32 + j] = type ? (int8_t)(j < 16 ? (blk[2 + j] & 0x0F) - 8 : (blk[2 + j - 16] >> 4) - 8)
                                 : (int8_t)blk[2 + j];
    }
}

/* K9: each table's quantize_act gives the generic bits (zero, tiny, NaN and
 * infinite blocks included); its Q8_0 and Q4_0 products follow the order of
 * cpu_q8dot.h and are the same bits for any batch size and row blocking
 * (K2). */
static void test_q8_activation_products(void **state)
{
    (void)state;
    const int K = 192, R = 11, T = 7, NB = K / 32;
    size_t rb8 = kvv_type_row_size(KVV_TYPE_Q8_0, K), rb4 = kvv_type_row_size(KVV_TYPE_Q4_0, K);
    uint8_t *w8 = malloc(rb8 * R), *w4 = malloc(rb4 * R);
    float *src = malloc(sizeof(float) * K), *X = malloc(sizeof(float) * T * K);
    int8_t *qx = malloc((size_t)T * K), *qg = malloc((size_t)T * K), *wi = malloc((size_t)K);
    float *dx = malloc(sizeof(float) * T * NB), *dg = malloc(sizeof(float) * T * NB);
    float *Y = malloc(sizeof(float) * T * R), *Y1 = malloc(sizeof(float) * T * R);
    float *dw = malloc(sizeof(float) * NB);
    for (int r = 0; r < R; r++) {
        fill(src, K, (float)(r + 1));
        assert_true(kvv_quantize_row(KVV_TYPE_Q8_0, src, w8 + r * rb8, K));
        assert_true(kvv_quantize_row(KVV_TYPE_Q4_0, src, w4 + r * rb4, K));
    }
    fill(X, T * K, 3.0f);
    for (int i = 0; i < 32; i++) {
        X[i] = 0.0f;                  /* an all-zero block: d = 0, q = 0 */
        X[32 + i] = 1e-30f * frand(); /* a block whose scale is an fp16 subnormal or 0 */
    }
    X[K + 94] = NAN; /* token 1: a NaN in a block's last 8 (ignored by amax, q = 0) */
    X[K + 140] = INFINITY;
    for (int t = 0; t < T; t++)
        kvv_cpu_quantize_act_generic(K, X + (size_t)t * K, qg + (size_t)t * K, dg + t * NB);
    assert_true(dg[0] == 0.0f);
    FOR_EACH_RUN(run) {
        const kvv_cpu_kernels *k = run->k;
        for (int t = 0; t < T; t++)
            k->quantize_act(K, X + (size_t)t * K, qx + (size_t)t * K, dx + t * NB);
        assert_memory_equal(qx, qg, (size_t)T * K);
        assert_bits(dx, dg, (size_t)T * NB, "quantize_act scales vs generic");
        for (int type = 0; type < 2; type++) {
            const uint8_t *W = type ? w4 : w8;
            size_t rb = type ? rb4 : rb8;
            void (*gemm)(int, const void *, size_t, int, const int8_t *, const float *, int,
                         float *, size_t) = type ? k->gemm_q4_0_q8 : k->gemm_q8_0_q8;
            gemm(K, W, rb, R, qx, dx, T, Y, R);
            for (int t = 0; t < T; t++) /* one token at a time */
                gemm(K, W, rb, R, qx + (size_t)t * K, dx + t * NB, 1, Y1 + (size_t)t * R, R);
            assert_bits(Y1, Y, (size_t)T * R, "q8 product one token at a time");
            for (int r = 0; r < R; r++) /* one row at a time, all tokens */
                gemm(K, W + r * rb, rb, 1, qx, dx, T, Y1 + r, R);
            assert_bits(Y1, Y, (size_t)T * R, "q8 product one row at a time");
            for (int r = 0; r < R; r++) {
                unpack_row(type, W + r * rb, K, wi, dw);
                for (int t = 2; t < T; t++) { /* tokens with finite activations */
                    float m = model_q8(k, K, wi, dw, qx + (size_t)t * K, dx + t * NB);
                    assert_bits(&Y[t * R + r], &m, 1, "q8 product vs the order");
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
    free(wi);
    free(dx);
    free(dg);
    free(Y);
    free(Y1);
    free(dw);
}

/* ------------------------------------------------------------ selection */

/* The probe, the default and the refusals (cpu_isa.h), and KVV_CPU_MAX_ISA
 * (set here, then restored) capping them. */
static void test_isa_choice(void **state)
{
    (void)state;
    kvv_cpu_isa_info ci;
    kvv_error err = {0};
    assert_int_equal(kvv_cpu_isa_probe(&ci, &err), KVV_OK);
    assert_true(ci.can_run[KVV_CPU_ISA_GENERIC]);
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++) /* best: the widest it can run */
        assert_true(!ci.can_run[i] || (int)ci.best >= i);
    assert_true(ci.can_run[ci.best]);
    kvv_cpu_isa isa;
    assert_int_equal(kvv_cpu_isa_choose(NULL, &isa, &err), KVV_OK);
    assert_int_equal(isa, ci.best);
    assert_int_equal(kvv_cpu_isa_choose("auto", &isa, &err), KVV_OK);
    assert_int_equal(isa, ci.best);
    assert_int_equal(kvv_cpu_isa_choose("no-such-isa", &isa, &err), KVV_ERR_USAGE);
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++) {
        kvv_status st = kvv_cpu_isa_choose(kvv_cpu_isa_name((kvv_cpu_isa)i), &isa, &err);
        assert_int_equal(st, ci.can_run[i] ? KVV_OK : KVV_ERR_USAGE);
        if (st)
            assert_non_null(strstr(err.msg, "tables available: generic"));
    }
    char *saved = getenv("KVV_CPU_MAX_ISA") ? strdup(getenv("KVV_CPU_MAX_ISA")) : NULL;
    setenv("KVV_CPU_MAX_ISA", "generic", 1);
    assert_int_equal(kvv_cpu_isa_probe(&ci, &err), KVV_OK);
    assert_true(ci.can_run[KVV_CPU_ISA_GENERIC] && !ci.can_run[KVV_CPU_ISA_AVX2] &&
                !ci.can_run[KVV_CPU_ISA_AVX512]);
    assert_int_equal(ci.best, KVV_CPU_ISA_GENERIC);
    assert_int_equal(kvv_cpu_isa_choose("avx512", &isa, &err), KVV_ERR_USAGE);
    print_message("  capped: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "tables available: generic"));
    setenv("KVV_CPU_MAX_ISA", "avx9000", 1);
    assert_int_equal(kvv_cpu_isa_probe(&ci, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "KVV_CPU_MAX_ISA"));
    assert_int_equal(kvv_cpu_isa_choose(NULL, &isa, &err), KVV_ERR_USAGE);
    if (saved)
        setenv("KVV_CPU_MAX_ISA", saved, 1);
    else
        unsetenv("KVV_CPU_MAX_ISA");
    free(saved);
}

/* ------------------------------------------------------------ emulated = native */

enum { EX_MAX = 4096, EX_SEGS = 24 };

typedef struct {
    float v[EX_MAX];
    size_t n, n_seg, end[EX_SEGS];
    const char *name[EX_SEGS];
} exercise_out;

static float *ex_seg(exercise_out *o, const char *name, size_t n)
{
    assert_true(o->n + n <= EX_MAX && o->n_seg < EX_SEGS);
    float *p = o->v + o->n;
    o->n += n;
    o->name[o->n_seg] = name;
    o->end[o->n_seg++] = o->n;
    return p;
}

/* Every kernel of k on the same inputs (special values included); the
 * outputs in segments named after the kernel. */
static void exercise(const kvv_cpu_kernels *k, exercise_out *o)
{
    enum { K = 128, R = 8, T = 3, N = 45 };
    rng_state = 0x2545F4914F6CDD1Dull;
    memset(o, 0, sizeof *o);
    static float W[R * K], X[T * K], Wd[R * K], V[N * 40], e[N];
    static uint8_t q[R * 136], g[R * 136], q4[R * 72];
    static int8_t qx[T * K];
    fill(W, R * K, 1.0f);
    fill(X, T * K, 2.0f);
    fill(V, N * 40, 1.0f);
    make_q8_0(K, R, q, Wd);
    make_x4(K, R, q, g);
    for (int r = 0; r < R; r++)
        assert_true(kvv_quantize_row(KVV_TYPE_Q4_0, W + r * K, q4 + r * 72, K));
    k->gemm_f32(K - 51, W, K, 6, X, K, T, ex_seg(o, "gemm_f32", 6 * T), 6);
    k->gemm_f32(K - 3, W, K, R, X, K, 1, ex_seg(o, "gemm_f32 (gemv)", R), R);
    *ex_seg(o, "dot", 1) = k->dot(N, W, X);
    k->gemv_q8_0(K, q, 136, R, X, K, T, ex_seg(o, "gemv_q8_0", R * T), R);
    if (k->gemv_q8_0_x4)
        k->gemv_q8_0_x4(K, g, R / 4, X, ex_seg(o, "gemv_q8_0_x4", R));
    k->dequant_q8_0(q, ex_seg(o, "dequant_q8_0", K), K);
    k->dequant_q4_0(q4, ex_seg(o, "dequant_q4_0", K), K);
    float *y = ex_seg(o, "axpy", N);
    memcpy(y, X, sizeof(float) * N);
    k->axpy(N, -0.3f, W, y);
    for (int i = 0; i < 3 * N; i++)
        Wd[i] = i % 5 == 1 ? 0.0f : W[i] * W[i];
    k->wsum(N, 37, 3, Wd, N, V, 40, ex_seg(o, "wsum", 3 * 37), 37);
    *ex_seg(o, "sum", 1) = k->sum(N, X);
    y = ex_seg(o, "scale", N);
    memcpy(y, X, sizeof(float) * N);
    k->scale(N, y, 1.7f);
    const float special[] = {-INFINITY, NAN, 88.7f, -87.3f, -0.0f, 100.0f, -100.0f, 1e-40f};
    memcpy(e, special, sizeof special);
    fill(e + 8, N - 8, 30.0f);
    k->exp_shift(N, e, 1.5f, ex_seg(o, "exp_shift", N));
    y = ex_seg(o, "silu_mul", N);
    memcpy(y, e, sizeof(float) * N);
    k->silu_mul(N, y, X);
    X[40] = NAN; /* activations for the integer products: one NaN, one tiny block */
    for (int i = 64; i < 96; i++)
        X[i] = 1e-30f * X[i];
    float *qd = ex_seg(o, "quantize_act", T * K + T * K / 32);
    for (int t = 0; t < T; t++)
        k->quantize_act(K, X + t * K, qx + t * K, qd + T * K + t * K / 32);
    for (int i = 0; i < T * K; i++)
        qd[i] = qx[i];
    const float *dx = qd + T * K;
    k->gemm_q8_0_q8(K, q, 136, R, qx, dx, T, ex_seg(o, "gemm_q8_0_q8", R * T), R);
    k->gemm_q4_0_q8(K, q4, 72, R, qx, dx, T, ex_seg(o, "gemm_q4_0_q8", R * T), R);
    /* K10: Q4_K rows over Q8_K activations, GEMM and GEMV
     * (test_cpu_kquant_kernels.c checks every type against the order) */
    enum { KK = 256 };
    static float xk[T * KK];
    static uint8_t wk[R * 144];
    static int8_t q8k[T * KK];
    static float d8k[T];
    static int16_t bs8k[T * 16];
    fill(xk, T * KK, 2.0f);
    for (int i = 0; i < R * 144; i++)
        wk[i] = (uint8_t)(i * 37 + 11);
    for (int r = 0; r < R; r++) { /* fp16 d = dmin = 2^-10 */
        wk[r * 144] = 0x00, wk[r * 144 + 1] = 0x14, wk[r * 144 + 2] = 0x00, wk[r * 144 + 3] = 0x14;
    }
    for (int t = 0; t < T; t++)
        k->quantize_q8_k(KK, xk + t * KK, q8k + t * KK, d8k + t, bs8k + t * 16);
    const kvv_cpu_qact A = {q8k, d8k, bs8k, NULL};
    k->gemm_kq[KVV_KQ_Q4_K](KK, wk, 144, R, &A, T, ex_seg(o, "gemm_kq q4_k", R * T), R);
    k->gemm_kq[KVV_KQ_Q4_K](KK, wk, 144, R, &A, 1, ex_seg(o, "gemm_kq q4_k gemv", R), R);
}

/* Where the CPU runs a table natively, the emulated build of the same
 * source gives the same bits in every kernel (the check that SIMDe and its
 * fallbacks emulate exactly what the native code computes). Prints which
 * tables this binary ran, and how. */
static void test_emulated_agrees(void **state)
{
    (void)state;
    static exercise_out a, b;
    char line[256] = "tables:";
    size_t off = strlen(line);
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++) {
        const char *how = native[i] && emulated[i] ? "native, emulated agrees"
                          : native[i]              ? "native"
                                                   : "emulated";
        if (native[i] && emulated[i]) {
            exercise(native[i], &a);
            exercise(emulated[i], &b);
            assert_int_equal(a.n, b.n);
            for (size_t s = 0, i0 = 0; s < a.n_seg; i0 = a.end[s++])
                for (size_t j = i0; j < a.end[s]; j++)
                    if (memcmp(&a.v[j], &b.v[j], sizeof(float)) != 0)
                        fail_msg("%s: %s element %zu: native %a, emulated %a",
                                 kvv_cpu_isa_name((kvv_cpu_isa)i), a.name[s], j - i0,
                                 (double)a.v[j], (double)b.v[j]);
        }
        off += (size_t)snprintf(line + off, sizeof line - off, "%s %s (%s)", i ? "," : "",
                                kvv_cpu_isa_name((kvv_cpu_isa)i), how);
    }
    printf("%s\n", line);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_choice),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_gemm_batch_invariant),
        cmocka_unit_test(test_q8_0_fused_and_dequant),
        cmocka_unit_test(test_attention_kernels),
        cmocka_unit_test(test_widen),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_q8_activation_products),
        cmocka_unit_test(test_emulated_agrees),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
