/*
 * batch_impl.h — what the batch check's files share (verify/batch.c runs
 * the calls, batch_check.c sizes the workload, compares and concludes).
 * Not a public interface: see verify/batch.h.
 */
#ifndef KVV_BATCH_IMPL_H
#define KVV_BATCH_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "verify/batch.h"

/* The call being built (capacity: every token of every request). */
typedef struct {
    int n;
    int32_t *tok, *pos, *seq;
    uint8_t *lg;
    int *a_pos;         /* A's position of each token, -1 for the others' */
} batch_bb;

/* What one run of A produced: logits rows and K/V rows over npos positions. */
typedef struct {
    int npos;
    float *logits;      /* [npos][V], NaN where the run gave no row */
    uint8_t *have;      /* [npos] rows the run gave */
    float *k, *v;       /* [L][npos][kd], [L][npos][vd] as kvv_engine_seq_kv read them */
} batch_run;

#define BATCH_MAX_STEPS 64

typedef struct {
    const kvv_check_opts *o;
    kvv_check_result *r;
    kvv_engine *e;
    int L, V, kd, vd;
    int T;              /* A's prompt */
    int D;              /* A's decode tokens (the decode mode) */
    int N;              /* requests, A included; sequences 0..N-1 */
    int P;              /* prefix: tokens computed in the other sequence */
    int iso_steps;      /* isolation: decode steps after the shared prompt call */
    int seq_a;          /* A's sequence among the others (alone: 0) */
    int max_call;       /* tokens in the largest call (the engine's n_ctx covers it) */
    int step[BATCH_MAX_STEPS]; /* decode: tokens per request per call */
    int n_steps;
    int32_t *a;         /* A's tokens [T + D] */
    int *olen;          /* [N-1] the others' prompt lengths */
    int *oseq;          /* [N-1] their sequence ids */
    int olen_max;       /* row stride of oth: prompt + continuation */
    int32_t *oth[2];    /* [N-1][olen_max] the others' tokens; [1]: isolation's B' */
    batch_bb bb;
    float *lbuf;        /* [bb capacity][V] the engine's logits rows */
    long n_calls;
    uint64_t max_ulp;   /* over every comparison that differed */
    char summary[400];  /* the differing modes, for the message */
} batch_ctx;

void kvv_bb_clear(batch_bb *b);
/* Each run empties every sequence first, fills *run (allocated for the
 * largest run) and reads A's K/V back. */
/* A alone in sequence 0: the prompt in one call; steps: then the decode
 * mode's calls, alone. */
kvv_status kvv_batch_run_alone(batch_ctx *c, batch_run *run, bool steps, kvv_error *err);
/* single: A's prompt among the others' (A's token at plant_at changed when >= 0). */
kvv_status kvv_batch_run_single(batch_ctx *c, batch_run *run, int plant_at, kvv_error *err);
kvv_status kvv_batch_run_decode(batch_ctx *c, batch_run *run, kvv_error *err);
kvv_status kvv_batch_run_mixed(batch_ctx *c, batch_run *run, kvv_error *err);
/* prefix: the first P tokens in another sequence and copied (copy), or in A. */
kvv_status kvv_batch_run_prefix(batch_ctx *c, batch_run *run, bool copy, kvv_error *err);
/* isolation: A beside the others' token set `set` (0: B, 1: B'). */
kvv_status kvv_batch_run_isolation(batch_ctx *c, batch_run *run, int set, kvv_error *err);

#endif
