/* test_policy_select.c — each selection rule on hand-made scores, with the
 * survivors worked out by hand. */
#include "tests/test_util.h"

#include <string.h>

#include "engine/policy/select.h"

static void expect_mask(const uint8_t *got, const char *want)
{
    size_t n = strlen(want);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(got[i], want[i] == '1');
}

static void test_window(void **state)
{
    (void)state;
    uint8_t k[8];
    kvv_select_window(8, 3, k);
    expect_mask(k, "00000111");
    kvv_select_window(2, 3, k);
    expect_mask(k, "11");
}

static void test_streaming(void **state)
{
    (void)state;
    uint8_t k[10];
    kvv_select_streaming(10, 2, 5, k);   /* 2 sinks + last 3 */
    expect_mask(k, "1100000111");
    kvv_select_streaming(10, 4, 3, k);   /* budget below the sinks: first 3 */
    expect_mask(k, "1110000000");
}

static void test_topk_scores_and_ties(void **state)
{
    (void)state;
    /* scores: positions 1 and 3 tie at 0.5; the lower (1) wins the last slot */
    double s[6] = {0.9, 0.5, 0.1, 0.5, 0.2, 0.8};
    uint8_t k[6];
    kvv_select_topk(s, NULL, 6, 3, k);
    expect_mask(k, "110001");
    /* forced recent window of 2 (positions 4, 5) + 1 heavy hitter (0) */
    uint8_t forced[6] = {0, 0, 0, 0, 1, 1};
    kvv_select_topk(s, forced, 6, 3, k);
    expect_mask(k, "100011");
    /* more forced than budget: the highest forced positions win */
    uint8_t all[6] = {1, 1, 1, 1, 1, 1};
    kvv_select_topk(s, all, 6, 2, k);
    expect_mask(k, "000011");
    /* budget >= n keeps everything */
    kvv_select_topk(s, NULL, 6, 9, k);
    expect_mask(k, "111111");
}

static void test_pool(void **state)
{
    (void)state;
    double s[5] = {3, 0, 0, 0, 6}, out[5];
    kvv_select_pool(s, 5, 3, out);
    /* zero padding, divide by the kernel: (0+3+0)/3, (3+0+0)/3, 0, (0+0+6)/3, (0+6+0)/3 */
    assert_true(out[0] == 1.0 && out[1] == 1.0 && out[2] == 0.0 && out[3] == 2.0 && out[4] == 2.0);
}

static void test_pyramid(void **state)
{
    (void)state;
    /* budget 20 over 5 layers: b_min 10, b_max 30, step 5 */
    int want[5] = {30, 25, 20, 15, 10}, sum = 0;
    for (int l = 0; l < 5; l++) {
        assert_int_equal(kvv_select_pyramid_budget(20, 5, l), want[l]);
        sum += want[l];
    }
    assert_int_equal(sum / 5, 20);
    assert_int_equal(kvv_select_pyramid_budget(20, 1, 0), 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_streaming),
        cmocka_unit_test(test_topk_scores_and_ties),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_pyramid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
