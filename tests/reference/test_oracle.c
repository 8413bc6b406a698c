/*
 * test_oracle.c — the MPFR oracle on cases with known exact answers
 * (including cancellation that naive fp32 gets wrong), and against a naive
 * 2000-bit MPFR evaluation of each formula rounded by mpfr_get_flt (an
 * independent rounding path), plus ULP distances and histograms.
 */
#include "tests/test_util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <mpfr.h>

#include "reference/oracle.h"

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float fbits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

/* uniform in [-scale, scale) */
static float rng_f(uint64_t *s, float scale)
{
    return scale * ((float)(rng_next(s) >> 40) / 8388608.0f - 1.0f);
}

#define assert_same_float(a, b) do {                                          \
        float a_ = (a), b_ = (b);                                             \
        if (bits(a_) != bits(b_)) {                                           \
            fprintf(stderr, "%s = %a (%08x), want %a (%08x)\n", #a, a_, bits(a_), b_, bits(b_)); \
            fail();                                                           \
        }                                                                     \
    } while (0)

/* ------------------------------------------------ naive 2000-bit MPFR */

#define NP 2000

typedef enum { N_EXP, N_TANH, N_SIN, N_COS, N_POW, N_SILU, N_GELU_T, N_GELU_E, N_CAP } naive_op;

/* The formula as written, at 2000 bits, rounded by mpfr_get_flt. */
static float naive(naive_op op, float xf, float yf)
{
    mpfr_t x, y, a, b, r;
    mpfr_inits2(NP, x, y, a, b, r, (mpfr_ptr)0);
    mpfr_set_flt(x, xf, MPFR_RNDN);
    mpfr_set_flt(y, yf, MPFR_RNDN);
    switch (op) {
    case N_EXP: mpfr_exp(r, x, MPFR_RNDN); break;
    case N_TANH: mpfr_tanh(r, x, MPFR_RNDN); break;
    case N_SIN: mpfr_sin(r, x, MPFR_RNDN); break;
    case N_COS: mpfr_cos(r, x, MPFR_RNDN); break;
    case N_POW: mpfr_pow(r, x, y, MPFR_RNDN); break;
    case N_SILU: /* x / (1 + exp(-x)) */
        mpfr_neg(a, x, MPFR_RNDN); mpfr_exp(a, a, MPFR_RNDN); mpfr_add_ui(a, a, 1, MPFR_RNDN);
        mpfr_div(r, x, a, MPFR_RNDN); break;
    case N_GELU_T: /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        mpfr_pow_ui(a, x, 3, MPFR_RNDN);
        mpfr_set_str(b, "0.044715", 10, MPFR_RNDN);
        mpfr_mul(a, a, b, MPFR_RNDN); mpfr_add(a, a, x, MPFR_RNDN);
        mpfr_const_pi(b, MPFR_RNDN); mpfr_ui_div(b, 2, b, MPFR_RNDN); mpfr_sqrt(b, b, MPFR_RNDN);
        mpfr_mul(a, a, b, MPFR_RNDN); mpfr_tanh(a, a, MPFR_RNDN); mpfr_add_ui(a, a, 1, MPFR_RNDN);
        mpfr_mul(a, a, x, MPFR_RNDN); mpfr_div_2ui(r, a, 1, MPFR_RNDN); break;
    case N_GELU_E: /* 0.5 x (1 + erf(x / sqrt 2)) */
        mpfr_sqrt_ui(a, 2, MPFR_RNDN); mpfr_div(a, x, a, MPFR_RNDN); mpfr_erf(a, a, MPFR_RNDN);
        mpfr_add_ui(a, a, 1, MPFR_RNDN); mpfr_mul(a, a, x, MPFR_RNDN); mpfr_div_2ui(r, a, 1, MPFR_RNDN);
        break;
    case N_CAP: /* c tanh(x / c) */
        mpfr_div(a, x, y, MPFR_RNDN); mpfr_tanh(a, a, MPFR_RNDN); mpfr_mul(r, a, y, MPFR_RNDN); break;
    }
    float f = mpfr_get_flt(r, MPFR_RNDN);
    mpfr_clears(x, y, a, b, r, (mpfr_ptr)0);
    return f;
}

/* ------------------------------------------------------------- tests */

static void test_dot_known(void **state)
{
    kvv_oracle *o = *state;
    /* cancellation: naive fp32 left to right gives 0 */
    const float a[3] = {1e8f, 1.0f, -1e8f}, one[3] = {1, 1, 1};
    volatile float naive_sum = 0.0f;
    for (int i = 0; i < 3; i++)
        naive_sum = naive_sum + a[i] * one[i];
    assert_true(naive_sum == 0.0f);
    assert_same_float(kvv_oracle_dot(o, a, one, 3), 1.0f);
    /* ties: 1 + 2^-24 is halfway between 1 and 1 + 2^-23 -> even (1) */
    const float t1[2] = {1.0f, 0x1p-24f};
    assert_same_float(kvv_oracle_dot(o, t1, one, 2), 1.0f);
    const float t2[3] = {1.0f, 0x1p-24f, 0x1p-60f}; /* just above the tie */
    assert_same_float(kvv_oracle_dot(o, t2, one, 3), 1.0f + 0x1p-23f);
    const float t3[3] = {1.0f, 0x1p-24f, -0x1p-60f}; /* just below */
    assert_same_float(kvv_oracle_dot(o, t3, one, 3), 1.0f);
    /* no intermediate overflow; final overflow to inf */
    const float big[3] = {3e38f, 3e38f, -3e38f};
    assert_same_float(kvv_oracle_dot(o, big, one, 3), 3e38f);
    assert_same_float(kvv_oracle_dot(o, big, one, 2), INFINITY);
    /* products below the fp32 range: 2^-150 + 2^-150 = 2^-149 exactly */
    const float s[2] = {0x1p-75f, 0x1p-75f}, s15[1] = {0x1.8p-75f};
    assert_same_float(kvv_oracle_dot(o, s, s, 2), 0x1p-149f);
    assert_same_float(kvv_oracle_dot(o, s, s, 1), 0.0f);            /* 2^-150: tie to 0 */
    assert_same_float(kvv_oracle_dot(o, s, s15, 1), 0x1p-149f);     /* 0.75 * 2^-149 */
    const float sub[2] = {0x1p-100f, 0x1.000002p-100f};
    const float sc[2] = {0x1p-30f, -0x1p-30f};                      /* = -2^-153: tie? no: 2^-153 < 2^-150 */
    assert_same_float(kvv_oracle_dot(o, sub, sc, 2), -0.0f);
    /* empty */
    assert_same_float(kvv_oracle_dot(o, a, a, 0), 0.0f);
    /* NaN / inf propagate */
    const float inf2[2] = {INFINITY, 1.0f}, zero2[2] = {0.0f, 1.0f};
    assert_true(isnan(kvv_oracle_dot(o, inf2, zero2, 2)));
}

/* Integer-valued vectors scaled by powers of two: the exact sum is an int64
 * times 2^-k, and C's int64 -> float conversion rounds it correctly. */
static void test_dot_random_exact(void **state)
{
    kvv_oracle *o = *state;
    uint64_t s = 99;
    enum { N = 4096 };
    static float a[N], b[N];
    for (int rep = 0; rep < 20; rep++) {
        int n = 1 + (int)(rng_next(&s) % N);
        int64_t sum = 0;
        for (int i = 0; i < n; i++) {
            int64_t ia = (int64_t)(rng_next(&s) % 4095) - 2047;
            int64_t ib = (int64_t)(rng_next(&s) % 4095) - 2047;
            a[i] = ldexpf((float)ia, -40);
            b[i] = ldexpf((float)ib, 17);
            sum += ia * ib;
        }
        float want = ldexpf((float)sum, -23); /* (float) rounds once; the scaling is exact */
        assert_same_float(kvv_oracle_dot(o, a, b, n), want);
    }
}

static void test_softmax(void **state)
{
    kvv_oracle *o = *state;
    float p[8];
    const float eq[4] = {1.5f, 1.5f, 1.5f, 1.5f};
    kvv_oracle_softmax(o, eq, 4, p);
    for (int i = 0; i < 4; i++) assert_same_float(p[i], 0.25f);
    const float m[3] = {0.0f, -INFINITY, 0.0f};
    kvv_oracle_softmax(o, m, 3, p);
    assert_same_float(p[0], 0.5f); assert_same_float(p[1], 0.0f); assert_same_float(p[2], 0.5f);
    const float allm[2] = {-INFINITY, -INFINITY};
    kvv_oracle_softmax(o, allm, 2, p);
    assert_true(isnan(p[0]) && isnan(p[1]));
    /* wide range: e^-100 / (1 + e^-100) is a subnormal; e^-200 underflows */
    const float w[3] = {0.0f, -100.0f, -200.0f};
    kvv_oracle_softmax(o, w, 3, p);
    assert_same_float(p[0], 1.0f);
    assert_same_float(p[1], (float)exp(-100.0));   /* 26 * 2^-149; double is far from a tie */
    assert_same_float(p[2], 0.0f);
    /* in place, and against the naive 2000-bit evaluation; sums near 1 */
    uint64_t s = 5;
    for (int rep = 0; rep < 20; rep++) {
        float x[64], y[64];
        for (int i = 0; i < 64; i++) x[i] = rng_f(&s, 20.0f);
        memcpy(y, x, sizeof x);
        kvv_oracle_softmax(o, y, 64, y);
        mpfr_t e[64], sum, r;
        mpfr_init2(sum, NP); mpfr_init2(r, NP);
        mpfr_set_zero(sum, 1);
        for (int i = 0; i < 64; i++) {
            mpfr_init2(e[i], NP);
            mpfr_set_flt(e[i], x[i], MPFR_RNDN);
            mpfr_exp(e[i], e[i], MPFR_RNDN);
            mpfr_add(sum, sum, e[i], MPFR_RNDN);
        }
        double total = 0;
        for (int i = 0; i < 64; i++) {
            mpfr_div(r, e[i], sum, MPFR_RNDN);
            assert_same_float(y[i], mpfr_get_flt(r, MPFR_RNDN));
            total += y[i];
            mpfr_clear(e[i]);
        }
        mpfr_clears(sum, r, (mpfr_ptr)0);
        assert_true(fabs(total - 1.0) <= 64 * 0x1p-24);
    }
}

static void test_rmsnorm(void **state)
{
    kvv_oracle *o = *state;
    float y[4];
    const float x[4] = {3.0f, 4.0f, 0.0f, 0.0f};        /* mean x^2 = 25/4, r = 2.5 */
    kvv_oracle_rmsnorm(o, x, NULL, 4, 0.0f, y);
    assert_same_float(y[0], 1.2f); assert_same_float(y[1], 1.6f);
    assert_same_float(y[2], 0.0f); assert_same_float(y[3], 0.0f);
    const float x2[2] = {1.0f, 1.0f}, w2[2] = {3.0f, -1.0f};  /* r = sqrt(1 + 3) = 2 */
    kvv_oracle_rmsnorm(o, x2, w2, 2, 3.0f, y);
    assert_same_float(y[0], 1.5f); assert_same_float(y[1], -0.5f);
    const float z[2] = {0.0f, 0.0f};
    kvv_oracle_rmsnorm(o, z, NULL, 2, 0.0f, y);          /* 0/0 as in fp32 */
    assert_true(isnan(y[0]));
    kvv_oracle_rmsnorm(o, z, NULL, 2, 1e-5f, y);
    assert_same_float(y[0], 0.0f);
    /* random rows, weights and eps against the naive 2000-bit formula */
    uint64_t s = 17;
    for (int rep = 0; rep < 10; rep++) {
        float xr[96], wr[96], yr[96];
        for (int i = 0; i < 96; i++) { xr[i] = rng_f(&s, 1e-3f); wr[i] = rng_f(&s, 2.0f); }
        const float eps = 1e-6f;
        kvv_oracle_rmsnorm(o, xr, wr, 96, eps, yr);
        mpfr_t acc, t, r;
        mpfr_inits2(NP, acc, t, r, (mpfr_ptr)0);
        mpfr_set_zero(acc, 1);
        for (int i = 0; i < 96; i++) {
            mpfr_set_flt(t, xr[i], MPFR_RNDN);
            mpfr_sqr(t, t, MPFR_RNDN);
            mpfr_add(acc, acc, t, MPFR_RNDN);
        }
        mpfr_div_ui(acc, acc, 96, MPFR_RNDN);
        mpfr_set_flt(t, eps, MPFR_RNDN);
        mpfr_add(acc, acc, t, MPFR_RNDN);
        mpfr_sqrt(acc, acc, MPFR_RNDN);
        for (int i = 0; i < 96; i++) {
            mpfr_set_flt(r, xr[i], MPFR_RNDN);
            mpfr_div(r, r, acc, MPFR_RNDN);
            mpfr_set_flt(t, wr[i], MPFR_RNDN);
            mpfr_mul(r, r, t, MPFR_RNDN);
            assert_same_float(yr[i], mpfr_get_flt(r, MPFR_RNDN));
        }
        mpfr_clears(acc, t, r, (mpfr_ptr)0);
    }
}

static void test_rope(void **state)
{
    kvv_oracle *o = *state;
    float y0, y1;
    /* pos 0: identity */
    kvv_oracle_rope_pair(o, 0.3f, -0.7f, 0, 3, 64, 10000.0f, 1.0f, 1.0f, &y0, &y1);
    assert_same_float(y0, 0.3f); assert_same_float(y1, -0.7f);
    /* i = 0: theta = pos; (1, 0) -> (cos, sin), (0, 1) -> (-sin, cos) */
    for (int pos = 1; pos < 200; pos += 7) {
        kvv_oracle_rope_pair(o, 1.0f, 0.0f, pos, 0, 64, 10000.0f, 1.0f, 1.0f, &y0, &y1);
        assert_same_float(y0, kvv_oracle_cos(o, (float)pos));
        assert_same_float(y1, kvv_oracle_sin(o, (float)pos));
        kvv_oracle_rope_pair(o, 0.0f, 1.0f, pos, 0, 64, 10000.0f, 1.0f, 1.0f, &y0, &y1);
        assert_same_float(y0, -kvv_oracle_sin(o, (float)pos));
        assert_same_float(y1, kvv_oracle_cos(o, (float)pos));
    }
    /* base 4, n_dims 4, i = 1: base^(-2/4) = 1/2; freq_scale 0.25, factor 2:
     * theta = pos * 0.25 * 0.5 / 2 = pos / 16 */
    kvv_oracle_rope_pair(o, 1.0f, 0.0f, 24, 1, 4, 4.0f, 0.25f, 2.0f, &y0, &y1);
    assert_same_float(y0, kvv_oracle_cos(o, 1.5f));
    assert_same_float(y1, kvv_oracle_sin(o, 1.5f));
    /* huge angle: pos 1e6 */
    kvv_oracle_rope_pair(o, 1.0f, 0.0f, 1000000, 0, 8, 10000.0f, 1.0f, 1.0f, &y0, &y1);
    assert_same_float(y0, kvv_oracle_cos(o, 1e6f));
    /* cancellation: x = (fl(sin t), fl(cos t)) -> y0 = x0 cos t - x1 sin t is tiny;
     * naive 2000-bit evaluation rounds it once */
    const double th = 0.7;
    float sx = (float)sin(th), cx = (float)cos(th);
    /* theta = 7 * 10^(-2*1/2) = 0.7 with base 10, n_dims 2 is not a float but exact */
    kvv_oracle_rope_pair(o, sx, cx, 7, 1, 2, 10.0f, 1.0f, 1.0f, &y0, &y1);
    mpfr_t t, c, sn, a, b;
    mpfr_inits2(NP, t, c, sn, a, b, (mpfr_ptr)0);
    mpfr_set_ui(t, 7, MPFR_RNDN); mpfr_div_ui(t, t, 10, MPFR_RNDN);
    mpfr_sin_cos(sn, c, t, MPFR_RNDN);
    mpfr_set_flt(a, sx, MPFR_RNDN); mpfr_mul(a, a, c, MPFR_RNDN);
    mpfr_set_flt(b, cx, MPFR_RNDN); mpfr_mul(b, b, sn, MPFR_RNDN);
    mpfr_sub(a, a, b, MPFR_RNDN);
    float want0 = mpfr_get_flt(a, MPFR_RNDN);
    assert_same_float(y0, want0);
    assert_true(fabsf(y0) < 1e-7f && y0 != 0.0f);
    float naive0 = sx * (float)cos(th) - cx * (float)sin(th); /* fp32: wrong digits */
    fprintf(stderr, "rope cancellation: exact %a, naive fp32 %a\n", y0, naive0);
    mpfr_clears(t, c, sn, a, b, (mpfr_ptr)0);
    /* whole head: llama pairs (2i, 2i+1), neox pairs (i, i+half), tail copied */
    float x[10] = {1, 0, 1, 0, 1, 0, 1, 0, 5, 6}, out[10];
    kvv_oracle_rope(o, x, 10, 8, false, 3, 10000.0f, 1.0f, NULL, out);
    assert_same_float(out[0], kvv_oracle_cos(o, 3.0f));
    assert_same_float(out[1], kvv_oracle_sin(o, 3.0f));
    assert_same_float(out[8], 5.0f); assert_same_float(out[9], 6.0f);
    float xn[8] = {1, 1, 1, 1, 0, 0, 0, 0};
    const float ff[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    kvv_oracle_rope(o, xn, 8, 8, true, 3, 10000.0f, 1.0f, ff, xn);
    assert_same_float(xn[0], kvv_oracle_cos(o, 3.0f));
    assert_same_float(xn[4], kvv_oracle_sin(o, 3.0f));
}

static void test_scalars_known(void **state)
{
    kvv_oracle *o = *state;
    assert_same_float(kvv_oracle_exp(o, 0.0f), 1.0f);
    assert_same_float(kvv_oracle_exp(o, 1.0f), 0x1.5bf0a8p+1f);       /* e */
    assert_same_float(kvv_oracle_exp(o, 89.0f), INFINITY);
    assert_same_float(kvv_oracle_exp(o, -104.0f), 0.0f);
    assert_same_float(kvv_oracle_exp(o, -INFINITY), 0.0f);
    assert_same_float(kvv_oracle_exp(o, -103.0f), (float)exp(-103.0)); /* subnormal */
    assert_true(isnan(kvv_oracle_exp(o, NAN)));
    assert_same_float(kvv_oracle_tanh(o, 20.0f), 1.0f);
    assert_same_float(kvv_oracle_tanh(o, -0.0f), -0.0f);
    assert_same_float(kvv_oracle_sin(o, 0.0f), 0.0f);
    assert_same_float(kvv_oracle_cos(o, 0.0f), 1.0f);
    assert_same_float(kvv_oracle_pow(o, 2.0f, 10.0f), 1024.0f);
    assert_same_float(kvv_oracle_pow(o, 2.0f, 0.5f), 0x1.6a09e6p+0f);  /* sqrt 2 */
    assert_same_float(kvv_oracle_pow(o, 2.0f, -149.0f), 0x1p-149f);
    assert_same_float(kvv_oracle_pow(o, 2.0f, -150.0f), 0.0f);         /* tie to even */
    assert_same_float(kvv_oracle_pow(o, 2.0f, 128.0f), INFINITY);
    assert_same_float(kvv_oracle_pow(o, 10000.0f, -0.5f), 0.01f);
    assert_same_float(kvv_oracle_silu(o, 0.0f), 0.0f);
    assert_same_float(kvv_oracle_silu(o, -0.0f), -0.0f);
    assert_same_float(kvv_oracle_silu(o, 100.0f), 100.0f);
    assert_same_float(kvv_oracle_silu(o, -200.0f), -0.0f);
    assert_same_float(kvv_oracle_silu(o, 1.0f), 0.7310585786f);        /* 1/(1+e^-1) */
    assert_same_float(kvv_oracle_gelu_erf(o, 1.0f), 0.841344746f);
    assert_same_float(kvv_oracle_gelu_erf(o, -1.0f), -0.158655254f);
    assert_same_float(kvv_oracle_gelu_erf(o, 10.0f), 10.0f);
    assert_same_float(kvv_oracle_gelu_erf(o, -20.0f), naive(N_GELU_E, -20.0f, 0));
    assert_same_float(kvv_oracle_gelu_tanh(o, 10.0f), 10.0f);
    assert_same_float(kvv_oracle_gelu_tanh(o, -1e30f), -0.0f);
    assert_same_float(kvv_oracle_softcap(o, 1000.0f, 30.0f), 30.0f);
    assert_same_float(kvv_oracle_softcap(o, -1000.0f, 30.0f), -30.0f);
    assert_same_float(kvv_oracle_softcap(o, 0.0f, 30.0f), 0.0f);
    assert_same_float(kvv_oracle_softcap(o, 30.0f, 30.0f), (float)(30.0 * tanh(1.0))); /* 22.847... */
    assert_same_float(kvv_oracle_eval(o, KVV_ORACLE_SOFTCAP, 30.0f, 30.0f),
                      kvv_oracle_softcap(o, 30.0f, 30.0f));
    assert_string_equal(kvv_oracle_op_name(KVV_ORACLE_GELU_TANH), "gelu_tanh");
    assert_string_equal(kvv_oracle_op_name(KVV_ORACLE_OP_COUNT), "unknown");
}

/* Every op over random inputs of many magnitudes, and tiny, subnormal and
 * large ones, against the naive 2000-bit formula. */
static void test_scalars_vs_naive(void **state)
{
    kvv_oracle *o = *state;
    static const naive_op nops[KVV_ORACLE_OP_COUNT] = {
        N_EXP, N_TANH, N_SIN, N_COS, N_POW, N_SILU, N_GELU_T, N_GELU_E, N_CAP};
    uint64_t s = 2024;
    const float special[] = {0x1p-149f, -0x1p-149f, 0x1p-126f, 1e-30f, -1e-20f, 1e-5f, 0.5f,
                             -3.0f, 15.9f, -15.9f, 88.7f, -87.0f, -103.5f, 300.0f, -300.0f};
    for (int op = 0; op < KVV_ORACLE_OP_COUNT; op++) {
        int n = 0;
        for (int i = 0; i < 400 + (int)(sizeof special / sizeof special[0]); i++) {
            float x;
            if (i < (int)(sizeof special / sizeof special[0]))
                x = special[i];
            else
                x = ldexpf(rng_f(&s, 1.0f), (int)(rng_next(&s) % 20) - 12);
            float y = 0.0f;
            if (op == KVV_ORACLE_POW) {          /* RoPE-like: base^(-2i/n), and x^y for x > 0 */
                x = x < 0 ? -x : x;
                if (x == 0.0f) x = 1.0f;
                y = rng_f(&s, 8.0f);
            } else if (op == KVV_ORACLE_SOFTCAP) {
                y = (float)(1 + rng_next(&s) % 50);
            }
            float got = kvv_oracle_eval(o, (kvv_oracle_op)op, x, y);
            float want = naive(nops[op], x, y);
            if (bits(got) != bits(want) && !(isnan(got) && isnan(want))) {
                fprintf(stderr, "%s(%a, %a) = %a, naive 2000-bit %a\n",
                        kvv_oracle_op_name((kvv_oracle_op)op), x, y, got, want);
                fail();
            }
            double e = kvv_oracle_ulp_error(o, (kvv_oracle_op)op, x, y, got);
            assert_true(e <= 0.5);
            n++;
        }
        assert_true(n > 400);
    }
    kvv_oracle_stats st = kvv_oracle_get_stats(o);
    assert_int_equal(st.unresolved, 0);
    assert_true(st.results > 0);
}

static void test_ulp_error(void **state)
{
    kvv_oracle *o = *state;
    const float e = kvv_oracle_exp(o, 1.0f);
    double ce = kvv_oracle_ulp_error(o, KVV_ORACLE_EXP, 1.0f, 0, e);
    assert_true(ce >= 0.0 && ce <= 0.5);
    double ne = kvv_oracle_ulp_error(o, KVV_ORACLE_EXP, 1.0f, 0, nextafterf(e, 10.0f));
    assert_true(ne > 0.5 && ne < 1.5);
    assert_true(fabs(ne + ce - 1.0) < 1e-9 || fabs(ne - ce - 1.0) < 1e-9);
    assert_true(kvv_oracle_ulp_error(o, KVV_ORACLE_EXP, 100.0f, 0, INFINITY) == 0.0);
    assert_true(isinf(kvv_oracle_ulp_error(o, KVV_ORACLE_EXP, 100.0f, 0, FLT_MAX)));
    assert_true(isinf(kvv_oracle_ulp_error(o, KVV_ORACLE_EXP, 1.0f, 0, NAN)));
    /* subnormal results: ulp is 2^-149 */
    float sub = kvv_oracle_exp(o, -100.0f);
    double se = kvv_oracle_ulp_error(o, KVV_ORACLE_EXP, -100.0f, 0, fbits(bits(sub) + 2));
    assert_true(se > 1.5 && se < 2.5);
}

static void test_ulp_distance_hist(void **state)
{
    (void)state;
    assert_int_equal(kvv_oracle_ulp_distance(1.0f, 1.0f), 0);
    assert_int_equal(kvv_oracle_ulp_distance(1.0f, nextafterf(1.0f, 2.0f)), 1);
    assert_int_equal(kvv_oracle_ulp_distance(nextafterf(1.0f, 0.0f), 1.0f), 1);
    assert_int_equal(kvv_oracle_ulp_distance(0.0f, -0.0f), 0);
    assert_int_equal(kvv_oracle_ulp_distance(0x1p-149f, -0x1p-149f), 2);
    assert_int_equal(kvv_oracle_ulp_distance(FLT_MAX, INFINITY), 1);
    assert_int_equal(kvv_oracle_ulp_distance(-INFINITY, INFINITY), 2 * (uint64_t)0x7f800000u);
    assert_int_equal(kvv_oracle_ulp_distance(1.0f, 2.0f), 1u << 23);
    assert_true(kvv_oracle_ulp_distance(NAN, NAN) == KVV_ULP_NAN);
    assert_true(kvv_oracle_ulp_distance(1.0f, NAN) == KVV_ULP_NAN);

    kvv_oracle_hist h, g;
    kvv_oracle_hist_init(&h);
    const uint64_t d[] = {0, 0, 1, 2, 3, 4, 5, 8, 9, 1000, 1u << 20};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        kvv_oracle_hist_add(&h, d[i]);
    kvv_oracle_hist_add(&h, KVV_ULP_NAN);
    assert_int_equal(h.n, 12);
    assert_int_equal(h.nan, 1);
    assert_int_equal(h.max, 1u << 20);
    assert_int_equal(h.bins[0], 2);
    assert_int_equal(h.bins[1], 1);
    assert_int_equal(h.bins[2], 1);
    assert_int_equal(h.bins[3], 2);          /* 3, 4 */
    assert_int_equal(h.bins[4], 2);          /* 5, 8 */
    assert_int_equal(h.bins[5], 1);          /* 9 */
    assert_int_equal(h.bins[kvv_oracle_hist_bin(1000)], 1);
    assert_int_equal(kvv_oracle_hist_bin(1000), 11); /* (2^9, 2^10] */
    assert_int_equal(h.bins[KVV_ULP_HIST_BINS - 1], 1);
    double mean = (0 + 0 + 1 + 2 + 3 + 4 + 5 + 8 + 9 + 1000 + (double)(1u << 20)) / 11.0;
    assert_true(fabs(kvv_oracle_hist_mean(&h) - mean) < 1e-9);
    char buf[32];
    assert_string_equal(kvv_oracle_hist_label(0, buf, sizeof buf), "0");
    assert_string_equal(kvv_oracle_hist_label(3, buf, sizeof buf), "3-4");
    assert_string_equal(kvv_oracle_hist_label(4, buf, sizeof buf), "5-8");
    assert_string_equal(kvv_oracle_hist_label(11, buf, sizeof buf), "513-1024");
    assert_string_equal(kvv_oracle_hist_label(KVV_ULP_HIST_BINS - 1, buf, sizeof buf), ">131072");
    kvv_oracle_hist_init(&g);
    kvv_oracle_hist_add(&g, 7);
    kvv_oracle_hist_merge(&g, &h);
    assert_int_equal(g.n, 13);
    assert_int_equal(g.bins[4], 3);
    assert_int_equal(g.max, 1u << 20);
}

static int setup(void **state)
{
    *state = kvv_oracle_new();
    return *state ? 0 : -1;
}

static int teardown(void **state)
{
    kvv_oracle_free(*state);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dot_known, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dot_random_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_softmax, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rmsnorm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rope, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scalars_known, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scalars_vs_naive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ulp_error, setup, teardown),
        cmocka_unit_test(test_ulp_distance_hist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
