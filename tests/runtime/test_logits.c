/*
 * test_logits.c — runtime/logits.c: the one argmax (NaN never wins, also at
 * id 0; the lowest id on ties; +inf wins; -0 ties +0; all-NaN and empty rows
 * give 0) and the top-K / top-2 views agreeing with it.
 */
#include <math.h>

#include "runtime/logits.h"
#include "tests/test_util.h"

static void test_argmax_rule(void **state)
{
    (void)state;
    const float ties[5] = {1, 3, NAN, 3, 2};
    assert_int_equal(kvv_logits_argmax(ties, 5), 1);
    /* the case the old `run` got wrong: a NaN at id 0 won every row */
    const float nan0[4] = {NAN, 2, 5, 5};
    assert_int_equal(kvv_logits_argmax(nan0, 4), 2);
    const float nans[3] = {NAN, NAN, NAN};
    assert_int_equal(kvv_logits_argmax(nans, 3), 0);
    assert_int_equal(kvv_logits_argmax(nans, 0), 0);
    const float inf[4] = {1e30f, INFINITY, NAN, INFINITY};
    assert_int_equal(kvv_logits_argmax(inf, 4), 1);
    const float zeros[3] = {-1, -0.0f, 0.0f};
    assert_int_equal(kvv_logits_argmax(zeros, 3), 1);
    const float neg[3] = {-INFINITY, NAN, -INFINITY};
    assert_int_equal(kvv_logits_argmax(neg, 3), 0);
}

static void test_top_k_order(void **state)
{
    (void)state;
    const float x[6] = {NAN, 2, 7, NAN, 7, -1};
    int ids[6];
    kvv_logits_top_k(x, 6, 6, ids);
    const int want[6] = {2, 4, 1, 5, 0, 3}; /* ties by id, NaNs last by id */
    for (int i = 0; i < 6; i++)
        assert_int_equal(ids[i], want[i]);
    assert_int_equal(ids[0], kvv_logits_argmax(x, 6));
}

static void test_top2(void **state)
{
    (void)state;
    const float x[5] = {1, 3, NAN, 3, 2};
    int i1, i2;
    float v1, v2;
    kvv_logits_top2(x, 5, &i1, &v1, &i2, &v2);
    assert_int_equal(i1, 1);
    assert_int_equal(i2, 3);
    assert_true(v1 == 3 && v2 == 3);
    const float y[1] = {7};
    kvv_logits_top2(y, 1, &i1, &v1, &i2, &v2);
    assert_int_equal(i1, 0);
    assert_int_equal(i2, -1);
    assert_true(isnan(v2));
    const float z[3] = {NAN, 4, NAN};
    kvv_logits_top2(z, 3, &i1, &v1, &i2, &v2);
    assert_int_equal(i1, kvv_logits_argmax(z, 3));
    assert_int_equal(i2, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argmax_rule),
        cmocka_unit_test(test_top_k_order),
        cmocka_unit_test(test_top2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
