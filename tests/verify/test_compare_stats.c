/* test_compare_stats.c — the one definition of "equal" (verify/compare_stats.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/test_util.h"
#include "verify/compare_stats.h"

static float f(uint32_t b) { return kvv_f32_from_bits(b); }

static void test_ulp_distance(void **state)
{
    (void)state;
    assert_int_equal(kvv_ulp_distance(1.0f, 1.0f), 0);
    assert_int_equal(kvv_ulp_distance(1.0f, nextafterf(1.0f, 2.0f)), 1);
    assert_int_equal(kvv_ulp_distance(nextafterf(1.0f, 2.0f), 1.0f), 1);
    /* +0 and -0 are 0 ULP apart, the smallest subnormals straddle them */
    assert_int_equal(kvv_ulp_distance(0.0f, -0.0f), 0);
    assert_int_equal(kvv_ulp_distance(f(0x00000001), f(0x80000001)), 2);
    /* across the sign: -1 ulp below +min subnormal ... */
    assert_int_equal(kvv_ulp_distance(f(0x3f800000), f(0xbf800000)), 2ull * 0x3f800000u);
    assert_int_equal(kvv_ulp_distance(INFINITY, f(0x7f7fffff)), 1);
    assert_true(kvv_ulp_distance(NAN, 1.0f) == KVV_ULP_NAN);
    assert_true(kvv_ulp_distance(NAN, NAN) == KVV_ULP_NAN);
}

static void test_bit_equal(void **state)
{
    (void)state;
    assert_true(kvv_f32_bit_equal(1.5f, 1.5f));
    assert_false(kvv_f32_bit_equal(0.0f, -0.0f)); /* bits differ */
    float n = NAN;
    assert_false(kvv_f32_bit_equal(n, n)); /* NaN never equal */
    /* an infinity is never equal either: an overflowed run proves nothing */
    assert_false(kvv_f32_bit_equal(INFINITY, INFINITY));
    assert_false(kvv_f32_bit_equal(-INFINITY, -INFINITY));
}

static void test_stats(void **state)
{
    (void)state;
    float ref[6] = {1, 2, 3, 4, 0.0f, 5};
    float tst[6] = {1, 2, 3.5f, 4, -0.0f, 5};
    kvv_cmp_stats s;
    kvv_cmp_init(&s);
    assert_int_equal(s.first, -1);
    assert_int_equal(kvv_cmp_update(&s, ref, tst, 6), 2);
    assert_int_equal(s.n, 6);
    assert_int_equal(s.n_diff, 2);
    assert_int_equal(s.first, 2);
    assert_true(s.first_ref == 3.0f && s.first_test == 3.5f);
    assert_int_equal(s.max_ulp, kvv_ulp_distance(3.0f, 3.5f));
    assert_true(s.max_abs == 0.5);
    double nmse = 0.25 / (1 + 4 + 9 + 16 + 25);
    assert_true(fabs(kvv_cmp_nmse(&s) - nmse) < 1e-15);
    assert_false(kvv_cmp_equal(&s));

    /* indices are global across calls */
    kvv_cmp_stats t;
    kvv_cmp_init(&t);
    kvv_cmp_update(&t, ref, ref, 6);
    assert_true(kvv_cmp_equal(&t));
    assert_true(kvv_cmp_nmse(&t) == 0.0);
    kvv_cmp_update(&t, ref, tst, 6);
    assert_int_equal(t.first, 8);

    /* merge shifts src's first index */
    kvv_cmp_stats a, b;
    kvv_cmp_init(&a);
    kvv_cmp_init(&b);
    kvv_cmp_update(&a, ref, ref, 6);
    kvv_cmp_update(&b, ref, tst, 6);
    kvv_cmp_merge(&a, &b);
    assert_int_equal(a.n, 12);
    assert_int_equal(a.n_diff, 2);
    assert_int_equal(a.first, 8);
}

static void test_nan_and_inf(void **state)
{
    (void)state;
    float ref[3] = {NAN, 0.0f, 1.0f};
    float tst[3] = {NAN, 0.0f, 1.0f};
    kvv_cmp_stats s;
    kvv_cmp_init(&s);
    kvv_cmp_update(&s, ref, tst, 3);
    assert_int_equal(s.n_diff, 1); /* NaN vs identical NaN bits: different */
    assert_int_equal(s.n_nan, 1);
    assert_true(s.max_ulp == KVV_ULP_NAN);
    assert_int_equal(s.first, 0);

    /* inf against the same inf: counted and never equal (issue 31 item 6) */
    float ri[3] = {1.0f, INFINITY, -INFINITY}, ti[3] = {1.0f, INFINITY, -INFINITY};
    kvv_cmp_init(&s);
    assert_int_equal(kvv_cmp_update(&s, ri, ti, 3), 2);
    assert_int_equal(s.n_inf, 2);
    assert_int_equal(s.first, 1);
    assert_false(kvv_cmp_equal(&s));

    float z[2] = {0, 0}, o[2] = {0, 1};
    kvv_cmp_init(&s);
    kvv_cmp_update(&s, z, o, 2);
    assert_true(isinf(kvv_cmp_nmse(&s)));
}

/* A figure beside its bound: never printed equal when they differ (issue 31
 * item 8: llama.cpp's 0.00102 printed as "rel 0.001 (tol 0.001)"). */
static void test_figure_vs_bound(void **state)
{
    (void)state;
    char v[32], b[32];
    kvv_figure_vs_bound(0.00102, 0.001, v, b, sizeof v);
    assert_string_equal(v, "0.00102");
    assert_string_equal(b, "0.001");
    kvv_figure_vs_bound(3.2e-7, 0.001, v, b, sizeof v);
    assert_string_equal(v, "3.2e-07");
    kvv_figure_vs_bound(0.001, 0.001, v, b, sizeof v);
    assert_string_equal(v, b);
    kvv_figure_vs_bound(nextafter(0.001, 1), 0.001, v, b, sizeof v); /* one ulp past */
    assert_true(strtod(v, NULL) > strtod(b, NULL));
    kvv_figure_vs_bound(0.000999999, 0.001, v, b, sizeof v);
    assert_true(strtod(v, NULL) < strtod(b, NULL));
    kvv_figure_vs_bound(NAN, 0.001, v, b, sizeof v);
    assert_string_equal(v, "NaN");
    kvv_figure_vs_bound(0.5, INFINITY, v, b, sizeof v);
    assert_string_equal(b, "inf");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ulp_distance), cmocka_unit_test(test_bit_equal),
        cmocka_unit_test(test_stats),        cmocka_unit_test(test_nan_and_inf),
        cmocka_unit_test(test_figure_vs_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
