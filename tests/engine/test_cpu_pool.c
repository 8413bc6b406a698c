/*
 * test_cpu_pool.c — the cpu engine's thread pool (engine/cpu/cpu_pool.h):
 * every chunk of every job runs exactly once, with a valid thread index,
 * for 1..3 threads and 1..8 chunks per job.
 */
#include <stdatomic.h>
#include <string.h>

#include "engine/cpu/cpu_pool.h"
#include "tests/test_util.h"

typedef struct {
    atomic_int calls[8];
    atomic_int total;
} pool_ctx;

static void pool_task(void *ctx, int chunk, int ith)
{
    pool_ctx *p = ctx;
    if (chunk < 0 || chunk >= 8 || ith < 0 || ith >= 3)
        atomic_fetch_add(&p->total, 1000000); /* reported by the caller's check */
    atomic_fetch_add(&p->calls[chunk], 1);
    atomic_fetch_add(&p->total, 1);
}

static void test_pool(void **state)
{
    (void)state;
    for (int nth = 1; nth <= 3; nth++) {
        kvv_cpu_pool *p = kvv_cpu_pool_new(nth);
        assert_non_null(p);
        assert_int_equal(kvv_cpu_pool_threads(p), nth);
        pool_ctx c;
        memset(&c, 0, sizeof c);
        for (int rep = 0; rep < 500; rep++) /* 1..8 chunks */
            kvv_cpu_pool_run(p, pool_task, &c, 1 + rep % 8);
        /* chunk k runs in every job with more than k chunks: 500 jobs, k+1..8 chunks */
        int total = 0;
        for (int k = 0; k < 8; k++) {
            int expect = 0;
            for (int rep = 0; rep < 500; rep++)
                expect += 1 + rep % 8 > k;
            assert_int_equal(atomic_load(&c.calls[k]), expect);
            total += expect;
        }
        assert_int_equal(atomic_load(&c.total), total);
        kvv_cpu_pool_free(p);
    }
    kvv_cpu_pool_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
