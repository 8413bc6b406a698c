/*
 * cpu_pool.c — see cpu_pool.h.
 *
 * One 64-bit word `claim` holds (generation << 32 | next chunk). The caller
 * publishes a job by storing fn/ctx/n_chunks and then claim = (g+1) << 32.
 * A thread claims chunk k of generation g by compare-and-swap of (g, k) ->
 * (g, k+1); a successful swap proves generation g is still running (its
 * chunk k was unclaimed, so the caller cannot have finished it), hence the
 * fn/ctx it read belong to g. `done` counts finished chunks; the caller
 * returns when done == n_chunks. Sleeping workers are woken only when one
 * is actually asleep (Dekker-style: the caller stores claim then reads
 * n_sleeping; a worker stores n_sleeping then re-reads claim, both
 * sequentially consistent).
 */
#include "engine/cpu/cpu_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define WORKER_SPINS 4000   /* pause iterations before a worker starts yielding */
#define WORKER_YIELDS 64    /* sched_yield rounds before a worker sleeps */
#define CALLER_SPINS 2000   /* pause iterations before the caller yields */

typedef struct {
    kvv_cpu_pool *pool;
    int ith;
} worker_arg;

struct kvv_cpu_pool {
    int n;                          /* threads including the caller */
    pthread_t *threads;             /* n-1 workers */
    worker_arg *args;               /* n-1 */
    int n_started;
    _Atomic(kvv_cpu_task) fn;       /* current job */
    _Atomic(void *) ctx;
    atomic_int n_chunks;
    atomic_uint_fast64_t claim;     /* gen << 32 | next chunk */
    atomic_int done;                /* chunks finished in the current job */
    atomic_int n_sleeping;
    atomic_int quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claim and run chunks of the job visible in `c` until none is left.
 * @return the number of chunks run. */
static int work(kvv_cpu_pool *p, uint_fast64_t c, int ith)
{
    int ran = 0;
    for (;;) {
        uint32_t gen = (uint32_t)(c >> 32), k = (uint32_t)c;
        kvv_cpu_task fn = atomic_load(&p->fn);
        void *ctx = atomic_load(&p->ctx);
        int n = atomic_load(&p->n_chunks);
        if ((int)k >= n)
            return ran;
        uint_fast64_t want = ((uint_fast64_t)gen << 32) | (k + 1);
        if (atomic_compare_exchange_weak(&p->claim, &c, want)) {
            fn(ctx, (int)k, ith);
            atomic_fetch_add(&p->done, 1);
            ran++;
            c = want;
        }
        /* on failure c holds the current word: retry (maybe a new job) */
    }
}

static int has_work(kvv_cpu_pool *p, uint_fast64_t c)
{
    return (int)(uint32_t)c < atomic_load(&p->n_chunks);
}

static void *worker_main(void *a)
{
    worker_arg *wa = a;
    kvv_cpu_pool *p = wa->pool;
    for (;;) {
        uint_fast64_t c = atomic_load(&p->claim);
        int s = 0;
        while (!has_work(p, c) && !atomic_load(&p->quit) && s < WORKER_SPINS + WORKER_YIELDS) {
            if (s++ < WORKER_SPINS)
                cpu_relax();
            else
                sched_yield();
            c = atomic_load(&p->claim);
        }
        if (atomic_load(&p->quit))
            return NULL;
        if (has_work(p, c)) {
            work(p, c, wa->ith);
            continue;
        }
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add(&p->n_sleeping, 1);
        while (!has_work(p, atomic_load(&p->claim)) && !atomic_load(&p->quit))
            pthread_cond_wait(&p->cv, &p->mu);
        atomic_fetch_sub(&p->n_sleeping, 1);
        pthread_mutex_unlock(&p->mu);
    }
}

kvv_cpu_pool *kvv_cpu_pool_new(int n_threads)
{
    if (n_threads < 1)
        n_threads = 1;
    kvv_cpu_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = n_threads;
    atomic_init(&p->fn, NULL);
    atomic_init(&p->ctx, NULL);
    atomic_init(&p->n_chunks, 0);
    atomic_init(&p->claim, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->n_sleeping, 0);
    atomic_init(&p->quit, 0);
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        p->args = calloc((size_t)n_threads - 1, sizeof *p->args);
        if (!p->threads || !p->args) {
            kvv_cpu_pool_free(p);
            return NULL;
        }
        for (int i = 0; i < n_threads - 1; i++) {
            p->args[i].pool = p;
            p->args[i].ith = i + 1;
            if (pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]) != 0) {
                kvv_cpu_pool_free(p);
                return NULL;
            }
            p->n_started++;
        }
    }
    return p;
}

void kvv_cpu_pool_free(kvv_cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p->args);
    free(p);
}

double kvv_cpu_pool_worker_cpu_seconds(const kvv_cpu_pool *p)
{
    double sum = 0;
    for (int i = 0; p && i < p->n_started; i++) {
        clockid_t cid;
        struct timespec ts;
        if (pthread_getcpuclockid(p->threads[i], &cid) == 0 && clock_gettime(cid, &ts) == 0)
            sum += (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    return sum;
}

int kvv_cpu_pool_threads(const kvv_cpu_pool *p)
{
    return p ? p->n : 1;
}

void kvv_cpu_pool_run(kvv_cpu_pool *p, kvv_cpu_task fn, void *ctx, int n_chunks)
{
    if (p->n == 1 || n_chunks <= 1) {
        for (int k = 0; k < n_chunks; k++)
            fn(ctx, k, 0);
        return;
    }
    /* Between jobs n_chunks is 0 with claim's chunk at or past it, so no
     * thread can claim while fn/ctx change. */
    uint_fast64_t gen = (atomic_load(&p->claim) >> 32) + 1;
    atomic_store(&p->n_chunks, 0);
    atomic_store(&p->fn, fn);
    atomic_store(&p->ctx, ctx);
    atomic_store(&p->done, 0);
    atomic_store(&p->claim, (gen & 0xffffffffu) << 32);
    atomic_store(&p->n_chunks, n_chunks);
    if (atomic_load(&p->n_sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    work(p, atomic_load(&p->claim), 0);
    for (int s = 0; atomic_load(&p->done) < n_chunks; s++) {
        if (s < CALLER_SPINS)
            cpu_relax();
        else
            sched_yield();
    }
    atomic_store(&p->n_chunks, 0);
}
