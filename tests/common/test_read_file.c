/*
 * test_read_file.c — read-whole-file (common/read_file.h): contents with a
 * NUL after them, an empty file, NUL bytes inside, the size limit, and the
 * errors — a missing file, and a read that fails (a folder opens but every
 * read says EISDIR: the old manifest reader parsed that as an empty file).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/read_file.h"
#include "tests/test_util.h"

static const char *put(const char *name, const void *data, size_t n)
{
    static char p[4096];
    snprintf(p, sizeof p, "%s/%s", kvv_test_tmpdir(), name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    return p;
}

static void test_contents(void **state)
{
    (void)state;
    kvv_error err = {0};
    char *d;
    size_t n;
    const char *p = put("three.txt", "a\0b", 3);
    assert_int_equal(kvv_read_file(p, 0, &d, &n, &err), KVV_OK);
    assert_int_equal(n, 3);
    assert_memory_equal(d, "a\0b", 4); /* and the NUL after */
    free(d);
    p = put("empty.txt", "", 0);
    assert_int_equal(kvv_read_file(p, 0, &d, &n, &err), KVV_OK);
    assert_int_equal(n, 0);
    assert_int_equal(d[0], 0);
    free(d);
    /* larger than the first buffer (64 KiB), so it grows */
    size_t big = 200000;
    char *b = malloc(big);
    assert_non_null(b);
    for (size_t i = 0; i < big; i++)
        b[i] = (char)(i * 7);
    p = put("big.bin", b, big);
    assert_int_equal(kvv_read_file(p, big, &d, &n, &err), KVV_OK); /* exactly max: fine */
    assert_int_equal(n, big);
    assert_memory_equal(d, b, big);
    free(d);
    assert_int_equal(kvv_read_file(p, big - 1, &d, &n, &err), KVV_ERR_FORMAT);
    assert_null(d);
    assert_non_null(strstr(err.msg, "larger than"));
    free(b);
}

static void test_errors(void **state)
{
    (void)state;
    kvv_error err = {0};
    char *d = (char *)1;
    size_t n = 1;
    char p[4096];
    snprintf(p, sizeof p, "%s/no_such_file", kvv_test_tmpdir());
    assert_int_equal(kvv_read_file(p, 0, &d, &n, &err), KVV_ERR_IO);
    assert_null(d);
    assert_int_equal(n, 0);
    assert_non_null(strstr(err.msg, p));
    assert_non_null(strstr(err.msg, strerror(ENOENT)));
    /* a folder: fopen succeeds, fread fails; ferror must be seen */
    assert_int_equal(kvv_read_file(kvv_test_tmpdir(), 0, &d, &n, &err), KVV_ERR_IO);
    assert_null(d);
    assert_non_null(strstr(err.msg, "read error"));
    assert_non_null(strstr(err.msg, strerror(EISDIR)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contents),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
