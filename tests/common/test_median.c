/*
 * test_median.c — median and range (common/median.h): odd and even counts,
 * the input left unchanged, NaNs sorted last, more values than the stack
 * copy holds, and n < 1.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/median.h"
#include "tests/test_util.h"

static void test_median(void **state)
{
    (void)state;
    double v[] = {5, 1, 4, 2, 3};
    const double keep[] = {5, 1, 4, 2, 3};
    assert_true(kvv_median(v, 5) == 3.0);
    assert_memory_equal(v, keep, sizeof v); /* not sorted in place */
    assert_true(kvv_median(v, 4) == 3.0);   /* {5,1,4,2}: (2 + 4) / 2 */
    assert_true(kvv_median(v, 1) == 5.0);
    assert_true(kvv_median(v, 0) == 0.0);
    double w[] = {NAN, 1, 2}; /* NaN last: the middle is 2 */
    assert_true(kvv_median(w, 3) == 2.0);
    double *big = malloc(sizeof(double) * 101);
    assert_non_null(big);
    for (int i = 0; i < 101; i++)
        big[i] = (double)(100 - i);
    assert_true(kvv_median(big, 101) == 50.0);
    free(big);
}

static void test_range(void **state)
{
    (void)state;
    double v[] = {3, -1, 7, 2}, lo, hi;
    kvv_range(v, 4, &lo, &hi);
    assert_true(lo == -1.0 && hi == 7.0);
    kvv_range(v, 0, &lo, &hi);
    assert_true(lo == 0.0 && hi == 0.0);
}

static void test_clock(void **state)
{
    (void)state;
    double a = kvv_now_seconds(), b = kvv_now_seconds();
    assert_true(a > 0 && b >= a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_range),
        cmocka_unit_test(test_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
