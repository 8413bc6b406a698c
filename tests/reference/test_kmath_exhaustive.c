/*
 * test_kmath_exhaustive.c — EVERY fp32 input of the ranges the engines use
 * through the reference's portable math (reference/kmath.h), against the
 * documented bound < 0.501 ULP. Runs only under KVV_SLOW=1 (make
 * test-slow); otherwise it returns at once (skipped).
 *
 * Ranges (as test_kmath_bounds.c and `kvverify numerics`):
 *   exp   every float in [-104, 89]      (~2.24e9 inputs)
 *   tanh  every float in [-20, 20]       (~2.2e9)
 *   sin, cos  every float in [0, 2^20]   (~1.2e9 each)
 *   pow   every x in [1, 1e8] for y = -2/64 and -2/128 (head dims 64 and
 *         128: the common RoPE theta_scale exponents; ~2.2e8 each)
 *
 * Method: the exact value is first taken from glibc's long double function
 * (64-bit significand, error a few 2^-64 relative: a few 2^-40 ULP of
 * binary32). Where that estimate is within SAFETY (2^-20 ULP) of the bound,
 * of 0.5 (the correct-rounding boundary), or outside the finite float
 * range, the MPFR oracle (reference/oracle.h) decides. The max error found
 * (refined by the oracle) and the count of results that are not correctly
 * rounded are printed per function. Threads: KVV_THREADS (default: online
 * CPUs, at most 16), each with its own oracle. KVV_TEST_FILTER=test_pow_all
 * (a cmocka pattern) runs one sweep.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reference/kmath.h"
#include "reference/oracle.h"
#include "tests/test_util.h"

#define BOUND_ULP 0.501
#define SAFETY 0x1p-20

typedef struct {
    kvv_oracle_op op;
    float y;
    uint32_t a, b;        /* bit patterns [a, b] of |x| */
    float sign;
    /* results */
    double worst;
    float worst_x;
    uint64_t count, not_rounded, oracle_calls, over_bound;
} job;

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

static long double exact_ld(kvv_oracle_op op, float x, float y)
{
    long double X = x;
    switch (op) {
    case KVV_ORACLE_EXP: return expl(X);
    case KVV_ORACLE_TANH: return tanhl(X);
    case KVV_ORACLE_SIN: return sinl(X);
    case KVV_ORACLE_COS: return cosl(X);
    default: return powl(X, (long double)y);
    }
}

/* ULP of binary32 at |v| (2^-149 below the normal range). */
static long double ulp_at(long double v)
{
    v = fabsl(v);
    if (v < 0x1p-126L)
        return 0x1p-149L;
    int e;
    frexpl(v, &e);
    return ldexpl(1.0L, e - 24);
}

static void *run_slice(void *arg)
{
    job *j = arg;
    kvv_oracle *o = kvv_oracle_new();
    if (!o)
        return NULL;
    j->worst = 0;
    for (uint64_t u = j->a; u <= j->b; u++) {
        const float x = j->sign * bitsf((uint32_t)u);
        const float got = ours(j->op, x, j->y);
        const long double ex = exact_ld(j->op, x, j->y);
        double err;
        bool decide = !isfinite(got) || fabsl(ex) > (long double)FLT_MAX;
        if (!decide) {
            err = (double)(fabsl((long double)got - ex) / ulp_at(ex));
            decide = err > BOUND_ULP - SAFETY || fabs(err - 0.5) < SAFETY;
        }
        if (decide) {
            j->oracle_calls++;
            err = kvv_oracle_ulp_error(o, j->op, x, j->y, got);
            if (kvv_oracle_ulp_distance(got, kvv_oracle_eval(o, j->op, x, j->y)) != 0)
                j->not_rounded++;
        } else if (err > 0.5) {
            j->not_rounded++;
        }
        j->count++;
        if (!(err < BOUND_ULP))
            j->over_bound++;
        if (!(err <= j->worst)) {
            j->worst = err;
            j->worst_x = x;
        }
    }
    kvv_oracle_free(o);
    return NULL;
}

static int n_threads(void)
{
    const char *e = getenv("KVV_THREADS");
    long n = e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 16 ? 16 : (int)n;
}

/* Every float of [lo, hi] (same sign) through op, split over threads. */
static void sweep(const char *name, kvv_oracle_op op, float lo, float hi, float y)
{
    const int T = n_threads();
    job jobs[16];
    pthread_t th[16];
    uint32_t a = fbits(fabsf(lo)), b = fbits(fabsf(hi));
    if (a > b) {
        uint32_t t = a;
        a = b;
        b = t;
    }
    const uint64_t span = (uint64_t)b - a + 1;
    for (int t = 0; t < T; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].op = op;
        jobs[t].y = y;
        jobs[t].sign = signbit(lo) || signbit(hi) ? -1.0f : 1.0f;
        jobs[t].a = (uint32_t)(a + span * (uint64_t)t / (uint64_t)T);
        jobs[t].b = (uint32_t)(a + span * (uint64_t)(t + 1) / (uint64_t)T - 1);
        assert_int_equal(pthread_create(&th[t], NULL, run_slice, &jobs[t]), 0);
    }
    job all = {.worst = 0};
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        all.count += jobs[t].count;
        all.not_rounded += jobs[t].not_rounded;
        all.oracle_calls += jobs[t].oracle_calls;
        all.over_bound += jobs[t].over_bound;
        if (!(jobs[t].worst <= all.worst)) {
            all.worst = jobs[t].worst;
            all.worst_x = jobs[t].worst_x;
        }
    }
    assert_int_equal(all.count, span);
    printf("%-5s [%a, %a]%s%s: %llu inputs, max error %.9f ULP at x = %a (%.9g); "
           "%llu not correctly rounded; %llu decided by MPFR\n",
           name, (double)lo, (double)hi, op == KVV_ORACLE_POW ? " y = " : "",
           op == KVV_ORACLE_POW ? (y == -2.0f / 64 ? "-2/64" : "-2/128") : "",
           (unsigned long long)all.count, all.worst, (double)all.worst_x, (double)all.worst_x,
           (unsigned long long)all.not_rounded, (unsigned long long)all.oracle_calls);
    fflush(stdout);
    if (all.over_bound)
        fail_msg("%s: %llu inputs break the documented bound %.3f ULP (max %.9f at x = %a)", name,
                 (unsigned long long)all.over_bound, BOUND_ULP, all.worst, (double)all.worst_x);
}

#define NEED_SLOW()                                                              \
    do {                                                                         \
        if (!kvv_test_slow()) {                                                  \
            printf("SKIP: exhaustive sweep runs only with KVV_SLOW=1 (make test-slow)\n"); \
            skip();                                                              \
            return;                                                              \
        }                                                                        \
    } while (0)

static void test_exp_all(void **state)
{
    (void)state;
    NEED_SLOW();
    sweep("exp", KVV_ORACLE_EXP, -0.0f, -104.0f, 0);
    sweep("exp", KVV_ORACLE_EXP, 0.0f, 89.0f, 0);
}

static void test_tanh_all(void **state)
{
    (void)state;
    NEED_SLOW();
    sweep("tanh", KVV_ORACLE_TANH, -0.0f, -20.0f, 0);
    sweep("tanh", KVV_ORACLE_TANH, 0.0f, 20.0f, 0);
}

static void test_sincos_all(void **state)
{
    (void)state;
    NEED_SLOW();
    sweep("sin", KVV_ORACLE_SIN, 0.0f, 1048576.0f, 0);
    sweep("cos", KVV_ORACLE_COS, 0.0f, 1048576.0f, 0);
}

static void test_pow_all(void **state)
{
    (void)state;
    NEED_SLOW();
    sweep("pow", KVV_ORACLE_POW, 1.0f, 1e8f, -2.0f / 64.0f);
    sweep("pow", KVV_ORACLE_POW, 1.0f, 1e8f, -2.0f / 128.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_all),
        cmocka_unit_test(test_tanh_all),
        cmocka_unit_test(test_sincos_all),
        cmocka_unit_test(test_pow_all),
    };
    if (getenv("KVV_TEST_FILTER"))
        cmocka_set_test_filter(getenv("KVV_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
