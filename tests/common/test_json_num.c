/*
 * test_json_num.c — the one JSON number encoding (common/json_num.h): a
 * finite double is a number, a non-finite one a string; a ULP distance is
 * an integer, and KVV_ULP_NAN is null (cmd_numerics.c once wrote "nan");
 * a float carries its exact bits and a hex float.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_num.h"
#include "tests/test_util.h"

static void assert_dumps(json_t *j, const char *want)
{
    assert_non_null(j);
    char *s = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(s);
    assert_string_equal(s, want);
    free(s);
    json_decref(j);
}

static void test_number(void **state)
{
    (void)state;
    assert_dumps(kvv_json_number(1.5), "1.5");
    assert_dumps(kvv_json_number(NAN), "\"nan\"");
    assert_dumps(kvv_json_number(INFINITY), "\"inf\"");
    assert_dumps(kvv_json_number(-INFINITY), "\"-inf\"");
}

static void test_ulp(void **state)
{
    (void)state;
    assert_dumps(kvv_json_ulp(0), "0");
    assert_dumps(kvv_json_ulp(12345), "12345");
    assert_dumps(kvv_json_ulp(KVV_ULP_NAN), "null");
}

static void test_float(void **state)
{
    (void)state;
    assert_dumps(kvv_json_float(1.0f), "{\"bits\":\"0x3f800000\",\"hex\":\"0x1p+0\",\"value\":1.0}");
    assert_dumps(kvv_json_float(NAN), "{\"bits\":\"0x7fc00000\",\"hex\":\"nan\",\"value\":\"nan\"}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_number),
        cmocka_unit_test(test_ulp),
        cmocka_unit_test(test_float),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
