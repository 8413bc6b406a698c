/*
 * test_kmath.c — the portable math of reference/kmath.h against MPFR.
 *
 * For each function, dense samples of the ranges the reference engine uses
 * (every float bit pattern at a fixed stride through the range, plus every
 * float in windows around 0, the overflow thresholds and multiples of pi/2),
 * compared with the correctly rounded value computed by MPFR at 128 bits.
 * The error is measured in ULPs of the exact result, |ours - exact| /
 * ulp(exact), and must stay below the documented bound 0.501 ULP (kmath.h).
 * The measured maxima are printed. Special values (NaN, +-inf, +-0,
 * overflow, underflow) are checked exactly. KVV_SLOW=1 (make test-slow)
 * samples 64x denser.
 */
#include <float.h>
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference/kmath.h"
#include "tests/test_util.h"

#define BOUND_ULP 0.501

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ULP of a float-rounded value near y: 2^(e-23) for |y| in [2^e, 2^(e+1)),
 * 2^-149 below the normal range. */
static long double ulp_of(long double y)
{
    y = fabsl(y);
    if (y < 0x1p-126L)
        return 0x1p-149L;
    int e;
    frexpl(y, &e); /* y = m 2^e, m in [0.5, 1) */
    return ldexpl(1.0L, e - 24);
}

typedef enum { F_EXP, F_TANH, F_SIN, F_COS, F_POW } fn_id;

typedef struct {
    mpfr_t x, y, r;
    double worst;
    float worst_x, worst_y;
    long count;
} meter;

static void meter_init(meter *m)
{
    mpfr_inits2(128, m->x, m->y, m->r, (mpfr_ptr)0);
    m->worst = 0.0;
    m->worst_x = m->worst_y = 0.0f;
    m->count = 0;
}

static void meter_clear(meter *m)
{
    mpfr_clears(m->x, m->y, m->r, (mpfr_ptr)0);
}

/* Exact f(x[, y]) as long double (128-bit MPFR, then rounded to 64 bits). */
static long double exact(meter *m, fn_id f, float x, float y)
{
    mpfr_set_flt(m->x, x, MPFR_RNDN);
    switch (f) {
    case F_EXP: mpfr_exp(m->r, m->x, MPFR_RNDN); break;
    case F_TANH: mpfr_tanh(m->r, m->x, MPFR_RNDN); break;
    case F_SIN: mpfr_sin(m->r, m->x, MPFR_RNDN); break;
    case F_COS: mpfr_cos(m->r, m->x, MPFR_RNDN); break;
    case F_POW:
        mpfr_set_flt(m->y, y, MPFR_RNDN);
        mpfr_pow(m->r, m->x, m->y, MPFR_RNDN);
        break;
    }
    return mpfr_get_ld(m->r, MPFR_RNDN);
}

static float ours(fn_id f, float x, float y)
{
    switch (f) {
    case F_EXP: return kvv_expf(x);
    case F_TANH: return kvv_tanhf(x);
    case F_SIN: return kvv_sinf(x);
    case F_COS: return kvv_cosf(x);
    case F_POW: return kvv_powf(x, y);
    }
    return 0.0f;
}

static void measure(meter *m, fn_id f, float x, float y)
{
    long double e = exact(m, f, x, y);
    float o = ours(f, x, y);
    m->count++;
    if (e > (long double)FLT_MAX * (1.0L + 0x1p-25L)) { /* rounds to +inf */
        if (!(isinf(o) && o > 0))
            fail_msg("f%d(%a, %a) = %a, expected +inf", (int)f, (double)x, (double)y, (double)o);
        return;
    }
    if (!isfinite(o))
        fail_msg("f%d(%a, %a) = %a, expected %La", (int)f, (double)x, (double)y, (double)o, e);
    double err = (double)(fabsl((long double)o - e) / ulp_of(e));
    if (err > m->worst) {
        m->worst = err;
        m->worst_x = x;
        m->worst_y = y;
    }
}

/* Every float bit pattern in [lo, hi] (same sign) at the given stride. */
static void sweep(meter *m, fn_id f, float lo, float hi, uint32_t stride, float y)
{
    uint32_t a = to_bits(lo), b = to_bits(hi);
    if (a > b) {
        uint32_t t = a;
        a = b;
        b = t;
    }
    for (uint64_t u = a; u <= b; u += stride)
        measure(m, f, from_bits((uint32_t)u), y);
    measure(m, f, from_bits(b), y);
}

static uint32_t stride_for(float lo, float hi, long samples)
{
    uint32_t a = to_bits(lo), b = to_bits(hi);
    uint64_t span = a > b ? a - b : b - a;
    if (kvv_test_slow())
        samples *= 64;
    uint64_t s = span / (uint64_t)samples;
    return s ? (uint32_t)(s | 1) : 1; /* odd: visits varied low bits */
}

static void report(const char *name, const meter *m)
{
    printf("%-8s %9ld samples  max error %.9f ULP  at x = %a (%.9g)", name, m->count, m->worst,
           (double)m->worst_x, (double)m->worst_x);
    if (m->worst_y != 0.0f)
        printf(", y = %a", (double)m->worst_y);
    printf("\n");
    if (m->worst >= BOUND_ULP)
        fail_msg("%s: max error %.6f ULP exceeds the documented bound %.3f", name, m->worst,
                 BOUND_ULP);
}

/* ------------------------------------------------------------ tests */

static void test_expf(void **state)
{
    (void)state;
    meter m;
    meter_init(&m);
    /* Whole finite range, both signs, and dense near 0. */
    sweep(&m, F_EXP, 0x1p-149f, 89.0f, stride_for(0x1p-149f, 89.0f, 50000), 0);
    sweep(&m, F_EXP, -0x1p-149f, -104.0f, stride_for(-0x1p-149f, -104.0f, 50000), 0);
    sweep(&m, F_EXP, -1.0f, -0x1p-20f, stride_for(-1.0f, -0x1p-20f, 25000), 0);
    sweep(&m, F_EXP, 0x1p-20f, 1.0f, stride_for(0x1p-20f, 1.0f, 25000), 0);
    /* Softmax arguments s - max in [-30, 0]: dense. */
    sweep(&m, F_EXP, -0x1p-10f, -30.0f, stride_for(-0x1p-10f, -30.0f, 50000), 0);
    /* Around overflow and the subnormal range, every float. */
    sweep(&m, F_EXP, 88.70f, 88.7228317f, 1, 0);
    sweep(&m, F_EXP, -87.0f, -86.0f, 61, 0);
    sweep(&m, F_EXP, -103.95f, -103.0f, 13, 0);
    report("expf", &m);
    meter_clear(&m);

    /* Specials. */
    assert_true(isnan(kvv_expf(NAN)));
    assert_true(isinf(kvv_expf(INFINITY)) && kvv_expf(INFINITY) > 0);
    assert_true(kvv_expf(-INFINITY) == 0.0f);
    assert_true(kvv_expf(0.0f) == 1.0f && kvv_expf(-0.0f) == 1.0f);
    assert_true(isinf(kvv_expf(88.7228394f)));   /* first float past ln(FLT_MAX) */
    assert_true(kvv_expf(88.7228317f) <= FLT_MAX);
    assert_true(kvv_expf(-104.0f) == 0.0f);
    assert_true(kvv_expf(-103.0f) > 0.0f);       /* subnormal, not flushed */
}

static void test_tanhf(void **state)
{
    (void)state;
    meter m;
    meter_init(&m);
    sweep(&m, F_TANH, 0x1p-149f, 20.0f, stride_for(0x1p-149f, 20.0f, 75000), 0);
    sweep(&m, F_TANH, -0x1p-149f, -20.0f, stride_for(-0x1p-149f, -20.0f, 75000), 0);
    /* GELU / soft-cap arguments: dense in [-10, 10]. */
    sweep(&m, F_TANH, 0x1p-12f, 10.0f, stride_for(0x1p-12f, 10.0f, 50000), 0);
    sweep(&m, F_TANH, 20.0f, FLT_MAX, stride_for(20.0f, FLT_MAX, 2500), 0);
    report("tanhf", &m);
    meter_clear(&m);
    assert_true(isnan(kvv_tanhf(NAN)));
    assert_true(kvv_tanhf(INFINITY) == 1.0f && kvv_tanhf(-INFINITY) == -1.0f);
    assert_true(to_bits(kvv_tanhf(-0.0f)) == 0x80000000u && kvv_tanhf(0.0f) == 0.0f);
    assert_true(kvv_tanhf(0x1p-149f) == 0x1p-149f);
}

static void test_sincosf(void **state)
{
    (void)state;
    meter ms, mc;
    meter_init(&ms);
    meter_init(&mc);
    /* RoPE angles: pos * theta for pos < 2^20; dense over the whole domain. */
    const float lo = 0x1p-149f, hi = 1048576.0f;
    uint32_t st = stride_for(lo, hi, 75000);
    sweep(&ms, F_SIN, lo, hi, st, 0);
    sweep(&mc, F_COS, lo, hi, st, 0);
    sweep(&ms, F_SIN, -lo, -hi, st, 0);
    sweep(&mc, F_COS, -lo, -hi, st, 0);
    /* Every float in [0, 8] at a small stride (the typical angles of the
     * high-frequency pairs), and near multiples of pi/2. */
    sweep(&ms, F_SIN, 0x1p-10f, 8.0f, 1031, 0);
    sweep(&mc, F_COS, 0x1p-10f, 8.0f, 1031, 0);
    for (int k = 1; k < 200000; k += 3989) {
        float c = (float)(k * 1.5707963267948966);
        sweep(&ms, F_SIN, c * (1 - 0x1p-20f), c * (1 + 0x1p-20f), 3, 0);
        sweep(&mc, F_COS, c * (1 - 0x1p-20f), c * (1 + 0x1p-20f), 3, 0);
    }
    report("sinf", &ms);
    report("cosf", &mc);
    meter_clear(&ms);
    meter_clear(&mc);
    float s, c;
    kvv_sincosf(0.0f, &s, &c);
    assert_true(s == 0.0f && c == 1.0f);
    kvv_sincosf(NAN, &s, &c);
    assert_true(isnan(s) && isnan(c));
    kvv_sincosf(2097152.0f, &s, &c); /* outside the documented domain */
    assert_true(isnan(s) && isnan(c));
}

static void test_powf(void **state)
{
    (void)state;
    meter m;
    meter_init(&m);
    /* RoPE: powf(freq_base, -2/n_rot) for bases 1..1e8 and n_rot 2..1024. */
    for (int n_rot = 2; n_rot <= 1024; n_rot += 6) {
        const float y = -2.0f / (float)n_rot;
        sweep(&m, F_POW, 1.0f, 1e8f, stride_for(1.0f, 1e8f, 100), y);
    }
    /* General: x in [1e-6, 1e6], y in [-8, 8]. */
    for (int i = -64; i <= 64; i++) {
        const float y = (float)i / 8.0f + 0x1p-7f;
        sweep(&m, F_POW, 1e-6f, 1e6f, stride_for(1e-6f, 1e6f, 500), y);
    }
    report("powf", &m);
    meter_clear(&m);
    assert_true(kvv_powf(10000.0f, 0.0f) == 1.0f);
    assert_true(kvv_powf(2.0f, 10.0f) == 1024.0f);
    assert_true(kvv_powf(4.0f, 0.5f) == 2.0f);
    assert_true(isnan(kvv_powf(-1.0f, 0.5f)) && isnan(kvv_powf(0.0f, 2.0f)));
    assert_true(isinf(kvv_powf(10.0f, 39.0f)));
    assert_true(kvv_powf(10.0f, -46.0f) == 0.0f);
}

/* The double kernels the float functions are built from. */
static void test_double_kernels(void **state)
{
    (void)state;
    mpfr_t x, r;
    mpfr_inits2(160, x, r, (mpfr_ptr)0);
    double worst_exp = 0, worst_log = 0, worst_em1 = 0;
    for (int i = -7000; i <= 7000; i++) {
        double v = i * 0.1 + 0.0123;
        mpfr_set_d(x, v, MPFR_RNDN);
        mpfr_exp(r, x, MPFR_RNDN);
        long double e = mpfr_get_ld(r, MPFR_RNDN);
        double rel = (double)fabsl(((long double)kvv_exp_d(v) - e) / e);
        if (rel > worst_exp)
            worst_exp = rel;
        if (v > 0) {
            mpfr_expm1(r, x, MPFR_RNDN);
            e = mpfr_get_ld(r, MPFR_RNDN);
            rel = (double)fabsl(((long double)kvv_expm1_d(v) - e) / e);
            if (rel > worst_em1)
                worst_em1 = rel;
            mpfr_log(r, x, MPFR_RNDN);
            e = mpfr_get_ld(r, MPFR_RNDN);
            rel = (double)fabsl((long double)kvv_log_d(v) - e);
            if (rel > worst_log)
                worst_log = rel;
        }
    }
    mpfr_clears(x, r, (mpfr_ptr)0);
    printf("exp_d max rel %.3g, expm1_d max rel %.3g, log_d max abs %.3g\n", worst_exp,
           worst_em1, worst_log);
    assert_true(worst_exp < 1e-15 && worst_em1 < 1e-15 && worst_log < 1e-14);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expf),
        cmocka_unit_test(test_tanhf),
        cmocka_unit_test(test_sincosf),
        cmocka_unit_test(test_powf),
        cmocka_unit_test(test_double_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
