/*
 * cpu_pool.h — a small fork-join thread pool for the cpu engine (private).
 *
 * kvv_cpu_pool_run(p, fn, ctx, n_chunks) calls fn(ctx, chunk, ith) once for
 * every chunk in [0, n_chunks) and returns when all have returned. Chunks
 * are claimed dynamically: the calling thread (ith 0) and the workers
 * (ith 1..n-1) take the next unclaimed chunk until none is left, so a worker
 * the OS has not scheduled never holds the caller up (on a shared machine
 * the caller simply does more chunks itself). Which thread runs a chunk
 * must therefore not change its result: chunks own disjoint outputs and
 * `ith` only selects per-thread scratch. All state lives in the pool object
 * (no globals). Workers spin briefly between jobs, then yield, then sleep
 * on a condition variable.
 *
 *   kvv_cpu_pool *p = kvv_cpu_pool_new(2);
 *   kvv_cpu_pool_run(p, work, &ctx, 64);
 *   kvv_cpu_pool_free(p);
 */
#ifndef KVV_CPU_POOL_H
#define KVV_CPU_POOL_H

typedef struct kvv_cpu_pool kvv_cpu_pool;

typedef void (*kvv_cpu_task)(void *ctx, int chunk, int ith);

/* n_threads >= 1 (1: no worker threads, run calls fn inline).
 * @return NULL on allocation or thread-creation failure. */
kvv_cpu_pool *kvv_cpu_pool_new(int n_threads);
/* Joins the workers. Accepts NULL. */
void kvv_cpu_pool_free(kvv_cpu_pool *p);
int kvv_cpu_pool_threads(const kvv_cpu_pool *p);
/* CPU seconds the worker threads (not the caller) have used since they
 * started (their thread CPU clocks); 0 for a pool without workers or NULL. */
double kvv_cpu_pool_worker_cpu_seconds(const kvv_cpu_pool *p);
/* Not reentrant: one run at a time per pool, from one thread. n_chunks <= 1
 * runs inline on the caller. */
void kvv_cpu_pool_run(kvv_cpu_pool *p, kvv_cpu_task fn, void *ctx, int n_chunks);

#endif
