/*
 * test_kmath_bounds.c — the reference's portable math (reference/kmath.h)
 * within its documented error bound, measured with the MPFR oracle
 * (reference/oracle.h: kvv_oracle_ulp_error, the error against the exact
 * value in ULPs of binary32).
 *
 * Documented bound (kmath.h): at most 0.5 ULP + 2^-40 ULP, asserted as
 * < 0.501 ULP, on the domains the engines use. Dense samples of exactly
 * those ranges (the same as `kvverify numerics`):
 *   exp   [-104, 89]: softmax's x - max <= 0 and SiLU's e^-x
 *   tanh  [-20, 20]: GELU's inner value and the soft-caps (saturated beyond)
 *   sin, cos  [0, 2^20]: RoPE angles pos * theta for pos < 2^20
 *   pow   x in [1, 1e8], y = -2/n_rot: RoPE's theta_scale
 * each as evenly spaced float bit patterns (so every binade is covered),
 * plus every float in windows where errors concentrate: around 0, the
 * exp overflow and subnormal thresholds, near multiples of pi/2, near the
 * common RoPE bases. The exhaustive sweep over every float is
 * test_kmath_exhaustive.c (make test-slow).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "reference/kmath.h"
#include "reference/oracle.h"
#include "tests/test_util.h"

#define BOUND_ULP 0.501

typedef struct {
    kvv_oracle *o;
    kvv_oracle_op op;
    double worst;
    float worst_x, worst_y;
    long count, not_rounded;
} meter;

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float ours(kvv_oracle_op op, float x, float y)
{
    switch (op) {
    case KVV_ORACLE_EXP: return kvv_expf(x);
    case KVV_ORACLE_TANH: return kvv_tanhf(x);
    case KVV_ORACLE_SIN: return kvv_sinf(x);
    case KVV_ORACLE_COS: return kvv_cosf(x);
    default: return kvv_powf(x, y);
    }
}

static void measure(meter *m, float x, float y)
{
    float got = ours(m->op, x, y);
    double e = kvv_oracle_ulp_error(m->o, m->op, x, y, got);
    m->count++;
    if (kvv_oracle_ulp_distance(got, kvv_oracle_eval(m->o, m->op, x, y)) != 0)
        m->not_rounded++;
    if (!(e <= m->worst)) { /* also NaN */
        m->worst = e;
        m->worst_x = x;
        m->worst_y = y;
    }
}

/* count evenly spaced bit patterns of [lo, hi] (same sign, |lo| < |hi|). */
static void sweep(meter *m, float lo, float hi, long count, float y)
{
    const float sign = lo < 0 ? -1.0f : 1.0f;
    uint32_t a = fbits(fabsf(lo)), b = fbits(fabsf(hi));
    for (long i = 0; i < count; i++) {
        uint32_t u = a + (uint32_t)(((uint64_t)(b - a) * (uint64_t)i) / (uint64_t)(count - 1));
        measure(m, sign * bitsf(u), y);
    }
}

/* Every float from x up (or down) for count steps. */
static void window(meter *m, float x, long count, float y)
{
    for (long i = 0; i < count; i++) {
        measure(m, x, y);
        x = nextafterf(x, x < 0 ? -INFINITY : INFINITY);
    }
}

static void report(const char *name, meter *m)
{
    printf("%-5s %7ld samples  max error %.9f ULP at x = %a", name, m->count, m->worst,
           (double)m->worst_x);
    if (m->op == KVV_ORACLE_POW)
        printf(", y = %a", (double)m->worst_y);
    printf("  (%ld not correctly rounded)\n", m->not_rounded);
    if (!(m->worst < BOUND_ULP))
        fail_msg("%s: max error %.9f ULP at x = %a breaks the documented bound %.3f ULP", name,
                 m->worst, (double)m->worst_x, BOUND_ULP);
}

static meter meter_new(kvv_oracle_op op)
{
    meter m = {.o = kvv_oracle_new(), .op = op};
    assert_non_null(m.o);
    return m;
}

static void test_exp(void **state)
{
    (void)state;
    meter m = meter_new(KVV_ORACLE_EXP);
    sweep(&m, -0x1p-30f, -104.0f, 20000, 0);
    sweep(&m, 0x1p-30f, 89.0f, 20000, 0);
    sweep(&m, -0x1p-10f, -30.0f, 10000, 0);          /* softmax's usual x - max */
    window(&m, 88.72f, 2000, 0);                      /* across the overflow threshold */
    window(&m, -87.3365f, 1000, 0);                   /* FLT_MIN: results turn subnormal */
    window(&m, -103.97f, 1000, 0);                    /* the last subnormals */
    window(&m, 0x1p-26f, 500, 0);
    report("exp", &m);
    assert_true(kvv_expf(0.0f) == 1.0f && isinf(kvv_expf(89.0f)) && kvv_expf(-104.0f) == 0.0f);
    kvv_oracle_free(m.o);
}

static void test_tanh(void **state)
{
    (void)state;
    meter m = meter_new(KVV_ORACLE_TANH);
    sweep(&m, 0x1p-30f, 20.0f, 20000, 0);
    sweep(&m, -0x1p-30f, -20.0f, 20000, 0);
    sweep(&m, 0.25f, 10.0f, 10000, 0);               /* GELU's inner value */
    window(&m, 0x1p-13f, 1000, 0);
    window(&m, 9.0f, 1000, 0);                        /* toward saturation */
    report("tanh", &m);
    assert_true(kvv_tanhf(30.0f) == 1.0f && kvv_tanhf(-30.0f) == -1.0f);
    kvv_oracle_free(m.o);
}

static void test_sincos(void **state)
{
    (void)state;
    meter s = meter_new(KVV_ORACLE_SIN), c = meter_new(KVV_ORACLE_COS);
    sweep(&s, 0x1p-30f, 1048576.0f, 20000, 0);
    sweep(&c, 0x1p-30f, 1048576.0f, 20000, 0);
    sweep(&s, 0.5f, 512.0f, 10000, 0);                /* angles of short prompts */
    sweep(&c, 0.5f, 512.0f, 10000, 0);
    for (int k = 1; k < 600000; k += 29989) {         /* near multiples of pi/2 */
        float x = (float)(k * 1.5707963267948966);
        window(&s, nextafterf(x, 0), 40, 0);
        window(&c, nextafterf(x, 0), 40, 0);
    }
    for (int p = 1; p <= 4096; p *= 2) {              /* integer positions: theta_0 = pos */
        window(&s, (float)p, 20, 0);
        window(&c, (float)p, 20, 0);
    }
    report("sin", &s);
    report("cos", &c);
    kvv_oracle_free(s.o);
    kvv_oracle_free(c.o);
}

static void test_pow(void **state)
{
    (void)state;
    meter m = meter_new(KVV_ORACLE_POW);
    static const int nrot[] = {2, 8, 16, 32, 64, 80, 96, 128, 256, 512};
    static const float bases[] = {10000.0f, 500000.0f, 1000000.0f, 1e7f};
    for (size_t i = 0; i < sizeof nrot / sizeof nrot[0]; i++) {
        const float y = -2.0f / (float)nrot[i];
        sweep(&m, 1.0f, 1e8f, 2000, y);
        for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++)
            window(&m, bases[b], 50, y);
    }
    report("pow", &m);
    assert_true(kvv_powf(4.0f, -0.5f) == 0.5f && kvv_powf(10000.0f, 0.0f) == 1.0f);
    kvv_oracle_free(m.o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp),
        cmocka_unit_test(test_tanh),
        cmocka_unit_test(test_sincos),
        cmocka_unit_test(test_pow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
