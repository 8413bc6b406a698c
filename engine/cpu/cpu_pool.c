/*
 * cpu_pool.c — see cpu_pool.h. A job is published by bumping `gen` (release)
 * after storing fn/ctx; workers that see a new generation run their share
 * and decrement `pending`. Waiting is spin-then-yield for the caller and
 * spin-then-sleep for workers.
 */
#include "engine/cpu/cpu_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#define WORKER_SPINS 4000   /* pause iterations before a worker starts yielding */
#define WORKER_YIELDS 64    /* sched_yield rounds before a worker sleeps */
#define CALLER_SPINS 2000   /* pause iterations before the caller yields */

typedef struct {
    kvv_cpu_pool *pool;
    int ith;
} worker_arg;

struct kvv_cpu_pool {
    int n;                      /* threads including the caller */
    pthread_t *threads;         /* n-1 workers */
    worker_arg *args;           /* n-1 */
    int n_started;
    kvv_cpu_task fn;            /* current job (written before gen is bumped) */
    void *ctx;
    atomic_uint gen;            /* job generation */
    atomic_int pending;         /* workers still running the current job */
    atomic_int quit;
    pthread_mutex_t mu;         /* guards sleeping on cv */
    pthread_cond_t cv;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *a)
{
    worker_arg *wa = a;
    kvv_cpu_pool *p = wa->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
        for (int s = 0; g == seen && s < WORKER_SPINS + WORKER_YIELDS; s++) {
            if (s < WORKER_SPINS)
                cpu_relax();
            else
                sched_yield();
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
                   !atomic_load(&p->quit))
                pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit))
            return NULL;
        seen = g;
        p->fn(p->ctx, wa->ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
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
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
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
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
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

int kvv_cpu_pool_threads(const kvv_cpu_pool *p)
{
    return p ? p->n : 1;
}

void kvv_cpu_pool_run(kvv_cpu_pool *p, kvv_cpu_task fn, void *ctx)
{
    if (p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    for (int s = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; s++) {
        if (s < CALLER_SPINS)
            cpu_relax();
        else
            sched_yield();
    }
}
