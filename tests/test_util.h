/*
 * test_util.h — helpers shared by the cmocka tests.
 *
 * Tests that need ../shared (real models, llama.cpp peer outputs) call
 * kvv_test_shared() and skip with a clear message when it is absent; a
 * user's fresh clone has no ../shared. KVV_SHARED overrides the location.
 */
#ifndef KVV_TEST_UTIL_H
#define KVV_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Absolute-or-relative path of shared/ + "/" + rel in a static buffer, or
 * NULL (after printing "SKIP: ../shared/... not found") if absent. */
const char *kvv_test_shared(const char *rel);

/* Same, but calls cmocka's skip() when absent. Use inside a test. */
#define KVV_NEED_SHARED(var, rel)                                  \
    const char *var = kvv_test_shared(rel);                        \
    do { if (!var) { skip(); return; } } while (0)

/* A scratch directory for this test binary (created once, under $O/tmp). */
const char *kvv_test_tmpdir(void);

/* Read a whole file (malloc'ed, caller frees); NULL on error. */
uint8_t *kvv_test_read_file(const char *path, size_t *size);

/* True when KVV_SLOW is set (make test-slow). */
int kvv_test_slow(void);

/* Pages (of sysconf's size) of [p, p + n) present in this process's page
 * table (/proc/self/pagemap, Linux), whole pages from p's down; -1 when
 * the pagemap cannot be read. Unlike mincore, which asks the page cache,
 * this is what the process's resident set holds of a file mapping. */
long kvv_test_present_pages(const void *p, size_t n);

#endif
