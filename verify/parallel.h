/*
 * parallel.h — run independent jobs of a check on a few threads (evict runs
 * hundreds of policy decodes that share nothing but the read-only model).
 *
 *   static void job(void *user, int i, int worker) { ... writes only slot i ... }
 *   kvv_parallel_for(n_jobs, 2, job, &ctx);
 *
 * Jobs are claimed in index order (list the costly ones first for a good
 * balance); `worker` in [0, n_threads) says which thread runs the job, so a
 * job may use per-worker scratch (an open engine) without locking. Which
 * worker runs a job must not change its result. The caller's thread is
 * worker 0; there is no pool left behind when the call returns.
 */
#ifndef KVV_PARALLEL_H
#define KVV_PARALLEL_H

typedef void (*kvv_parallel_job)(void *user, int job, int worker);

/* Call fn(user, i, worker) once for every i in [0, n_jobs) on up to
 * n_threads threads (< 1 is taken as 1; at most n_jobs are started) and
 * return when every call has returned. A thread that cannot be created is
 * simply not used: the others run its jobs. */
void kvv_parallel_for(int n_jobs, int n_threads, kvv_parallel_job fn, void *user);

/* Processors online (sysconf), at least 1: the default thread count. */
int kvv_parallel_cpus(void);

#endif
