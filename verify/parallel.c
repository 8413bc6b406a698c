/* parallel.c — see parallel.h. */
#include "verify/parallel.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    pthread_mutex_t lock;
    int next;                 /* next unclaimed job */
    int n_jobs;
    kvv_parallel_job fn;
    void *user;
} shared_state;

typedef struct {
    shared_state *s;
    int worker;
} worker_arg;

static void run_jobs(shared_state *s, int worker)
{
    for (;;) {
        pthread_mutex_lock(&s->lock);
        int i = s->next < s->n_jobs ? s->next++ : -1;
        pthread_mutex_unlock(&s->lock);
        if (i < 0)
            return;
        s->fn(s->user, i, worker);
    }
}

static void *thread_main(void *p)
{
    worker_arg *a = p;
    run_jobs(a->s, a->worker);
    return NULL;
}

void kvv_parallel_for(int n_jobs, int n_threads, kvv_parallel_job fn, void *user)
{
    if (n_jobs < 1)
        return;
    if (n_threads > n_jobs)
        n_threads = n_jobs;
    if (n_threads < 1)
        n_threads = 1;
    shared_state s = {.next = 0, .n_jobs = n_jobs, .fn = fn, .user = user};
    pthread_mutex_init(&s.lock, NULL);
    pthread_t *th = n_threads > 1 ? calloc((size_t)n_threads, sizeof *th) : NULL;
    worker_arg *args = n_threads > 1 ? calloc((size_t)n_threads, sizeof *args) : NULL;
    int started = 0;
    /* Worker numbers stay dense: a thread that fails to start gives its
     * number to the next one. */
    for (int w = 1; th && args && w < n_threads; w++) {
        args[started + 1] = (worker_arg){.s = &s, .worker = started + 1};
        if (pthread_create(&th[started + 1], NULL, thread_main, &args[started + 1]) == 0)
            started++;
    }
    run_jobs(&s, 0);
    for (int w = 1; w <= started; w++)
        pthread_join(th[w], NULL);
    pthread_mutex_destroy(&s.lock);
    free(th);
    free(args);
}

int kvv_parallel_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}
