/* decode.c — one decode, step by step (see decode.h). */
#include "verify/decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/greedy.h"
#include "reference/ref_trace.h"
#include "runtime/logits.h"

/* Wall-clock and process CPU seconds. */
typedef struct {
    double wall, cpu;
} stamp;

static stamp now_s(void)
{
    struct timespec w, c;
    clock_gettime(CLOCK_MONOTONIC, &w);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
    stamp s = {(double)w.tv_sec + 1e-9 * (double)w.tv_nsec,
               (double)c.tv_sec + 1e-9 * (double)c.tv_nsec};
    return s;
}

typedef struct {
    const kvv_decode_opts *o;
    kvv_decode_result *res;
    kvv_trace *tr;            /* o->hash, else NULL */
    int n_vocab, k;
    int *top;                 /* [k] */
    stamp t0, last;           /* before the prompt; when the last row was done with */
} run;

/* Count the rows' non-finite logits. */
static void count_logits(kvv_decode_result *res, const float *rows, long n)
{
    for (long i = 0; i < n; i++) {
        res->n_nan += isnan(rows[i]) != 0;
        res->n_inf += isinf(rows[i]) != 0;
    }
    res->n_logits += n;
}

static void report(run *x, int step, int pos, int32_t input, const float *row, int32_t am)
{
    if (!x->o->on_step)
        return;
    if (x->k > 0)
        kvv_logits_top_k(row, x->n_vocab, x->k, x->top);
    const kvv_decode_step s = {step, pos, input, am, x->top, x->k, row};
    x->o->on_step(x->o->user, &s);
}

/* Greedy row i: timed (the forward calls only), hashed, counted, reported. */
static kvv_status greedy_row(void *user, int i, const float *row, int32_t argmax, kvv_error *err)
{
    (void)err;
    run *x = user;
    kvv_decode_result *res = x->res;
    const stamp t = now_s(), from = i == 0 ? x->t0 : x->last;
    *(i == 0 ? &res->prompt_wall : &res->dec_wall) += t.wall - from.wall;
    *(i == 0 ? &res->prompt_cpu : &res->dec_cpu) += t.cpu - from.cpu;
    const int np = x->o->n_prompt, pos = np - 1 + i;
    if (x->tr)
        kvv_trace_add_logits(x->tr, pos, row);
    count_logits(res, row, x->n_vocab);
    report(x, i, pos, i == 0 ? x->o->prompt[np - 1] : res->gen[i - 1], row, argmax);
    if (x->o->progress)
        x->o->progress(x->o->progress_user, "run", i + 1, res->n_gen);
    x->last = now_s();
    return KVV_OK;
}

static kvv_status greedy(run *x, const kvv_hooks *h, kvv_error *err)
{
    const kvv_decode_opts *o = x->o;
    const kvv_greedy g = {.forward = kvv_greedy_engine_forward, .ctx = o->engine, .hooks = h,
                          .n_vocab = x->n_vocab, .prompt = o->prompt, .n_prompt = o->n_prompt,
                          .n_gen = o->n_gen, .one_row = true, .on_row = greedy_row, .user = x};
    return kvv_greedy_decode(&g, x->res->logits, x->res->gen, NULL, err);
}

/* Teacher forcing: the whole prompt in one batch, logits at every position. */
static kvv_status teacher(run *x, const kvv_hooks *h, kvv_error *err)
{
    const kvv_decode_opts *o = x->o;
    kvv_decode_result *res = x->res;
    const int n = o->n_prompt, V = x->n_vocab;
    int32_t *pos = malloc(sizeof *pos * (size_t)n);
    if (!pos)
        return kvv_error_set(err, KVV_ERR_NOMEM, "run: out of memory");
    for (int i = 0; i < n; i++)
        pos[i] = i;
    kvv_status st = kvv_engine_forward(o->engine, n, o->prompt, pos, h, KVV_LOGITS_ALL,
                                       res->logits, err);
    free(pos);
    if (st)
        return st;
    const stamp t = now_s();
    res->prompt_wall = t.wall - x->t0.wall;
    res->prompt_cpu = t.cpu - x->t0.cpu;
    count_logits(res, res->logits, (long)n * V);
    for (int i = 0; i < n; i++) {
        const float *row = res->logits + (size_t)i * (size_t)V;
        if (x->tr)
            kvv_trace_add_logits(x->tr, i, row);
        report(x, i, i, o->prompt[i], row, kvv_logits_argmax(row, V));
    }
    return KVV_OK;
}

kvv_status kvv_decode(const kvv_decode_opts *o, kvv_decode_result *res, kvv_error *err)
{
    memset(res, 0, sizeof *res);
    const kvv_model *m = kvv_engine_model(o->engine);
    const int V = m->hp.n_vocab, n_gen = o->teacher ? 0 : o->n_gen;
    const int n_ctx = kvv_engine_options(o->engine)->n_ctx;
    if (o->n_prompt < 1 || (!o->teacher && o->n_gen < 1))
        return kvv_error_set(err, KVV_ERR_USAGE, "run: %d prompt tokens and %d to generate "
                             "(both must be >= 1)", o->n_prompt, o->n_gen);
    /* greedy evaluates n_prompt + n_gen - 1 positions */
    if (o->n_prompt + (n_gen > 0 ? n_gen - 1 : 0) > n_ctx)
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "run: %d prompt tokens + %d generated do not fit the %d-position "
                             "cache (see --n-ctx)", o->n_prompt, n_gen, n_ctx);
    run x = {.o = o, .res = res, .n_vocab = V, .k = o->top_k < V ? o->top_k : V};
    if (x.k < 0)
        x.k = 0;
    res->n_gen = n_gen;
    res->n_rows = o->teacher ? o->n_prompt : 1;
    res->logits = malloc(sizeof(float) * (size_t)res->n_rows * (size_t)V);
    res->gen = n_gen > 0 ? malloc(sizeof(int32_t) * (size_t)n_gen) : NULL;
    x.top = malloc(sizeof(int) * (size_t)(x.k > 0 ? x.k : 1));
    if (o->hash && !(x.tr = kvv_trace_new(&m->hp, n_ctx)))
        return kvv_error_set(err, KVV_ERR_NOMEM, "run: out of memory for --hash");
    kvv_status st = KVV_OK;
    if (!res->logits || (n_gen > 0 && !res->gen) || !x.top)
        st = kvv_error_set(err, KVV_ERR_NOMEM, "run: out of memory");
    kvv_hooks h;
    if (x.tr)
        h = kvv_trace_hooks(x.tr);
    x.t0 = x.last = now_s();
    if (!st)
        st = o->teacher ? teacher(&x, x.tr ? &h : NULL, err) : greedy(&x, x.tr ? &h : NULL, err);
    if (!st && x.tr) {
        if (kvv_trace_dropped(x.tr))
            st = kvv_error_set(err, KVV_ERR_NOMEM, "run: --hash could not record %ld rows",
                               kvv_trace_dropped(x.tr));
        else
            kvv_trace_sha256_hex(x.tr, res->sha256);
    }
    kvv_trace_free(x.tr);
    free(x.top);
    return st;
}

void kvv_decode_result_free(kvv_decode_result *res)
{
    if (!res)
        return;
    free(res->gen);
    free(res->logits);
    memset(res, 0, sizeof *res);
}
