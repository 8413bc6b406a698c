/*
 * cpu_pool.h — a small fork-join thread pool for the cpu engine (private).
 *
 * kvv_cpu_pool_run(p, fn, ctx) calls fn(ctx, ith, nth) once for every
 * ith in [0, nth) — ith 0 on the calling thread, the others on the pool's
 * workers — and returns when all have returned. Workers spin briefly
 * between jobs (a decode step issues a few hundred jobs) and then sleep on
 * a condition variable. All state lives in the pool object (no globals).
 *
 *   kvv_cpu_pool *p = kvv_cpu_pool_new(2);
 *   kvv_cpu_pool_run(p, work, &ctx);
 *   kvv_cpu_pool_free(p);
 */
#ifndef KVV_CPU_POOL_H
#define KVV_CPU_POOL_H

typedef struct kvv_cpu_pool kvv_cpu_pool;

typedef void (*kvv_cpu_task)(void *ctx, int ith, int nth);

/* n_threads >= 1 (1: no worker threads, run calls fn inline).
 * @return NULL on allocation or thread-creation failure. */
kvv_cpu_pool *kvv_cpu_pool_new(int n_threads);
/* Joins the workers. Accepts NULL. */
void kvv_cpu_pool_free(kvv_cpu_pool *p);
int kvv_cpu_pool_threads(const kvv_cpu_pool *p);
/* Not reentrant: one run at a time per pool, from one thread. */
void kvv_cpu_pool_run(kvv_cpu_pool *p, kvv_cpu_task fn, void *ctx);

#endif
