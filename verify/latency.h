/*
 * latency.h — `kvverify latency`: per layer, the time to read cached K/V
 * against the time to recompute them from checkpointed residuals with the
 * engine's kv_from_residual, for batch sizes 1 ... 4096 tokens (DESIGN.md §4
 * latency). Bytes moved, FLOPs, achieved GB/s and GFLOP/s, beside the
 * machine's roofline (common/roofline.h: streaming read bandwidth, OpenBLAS
 * sgemm, with the engine's threads). Medians over repeats.
 *
 * Reading: K and V rows of the batch's positions loaded from the engine's
 * cache into fp32 buffers (what attention must read). Recomputing: the
 * batch's residuals [n][n_embd] through attn_norm and the K/V projections
 * (+ q/k-norm and RoPE where the architecture has them).
 * The residuals are seeded (timing does not depend on their values) and the
 * cache holds kv_from_residual of them, computed once in a batch of every
 * position.
 *
 * Verdict: the two timed paths must do the same work — every recomputed
 * K/V element, rounded to the cache's type, bit-equal to the one read — so
 * PASS iff they are, at every batch size and layer measured (an engine
 * whose K/V depend on the batch size fails: KV-Direct's premise does not
 * hold there). Which is faster is the key figure, a finding. Control: a
 * residual changed by +1 must change the recomputed K/V; force_fail plants
 * that change into the timed recomputes.
 */
#ifndef KVV_LATENCY_H
#define KVV_LATENCY_H

#include <stdio.h>

#include "common/roofline.h"
#include "verify/check.h"


typedef struct {
    int layer;             /* -1: mean over the layers measured */
    int batch;
    double read_s, recompute_s;      /* medians */
    double read_bytes, recompute_bytes, recompute_flops;
    uint64_t compared, differing;    /* recomputed K/V elements vs the cache's, bit for bit */
} kvv_latency_row;

typedef struct {
    kvv_check_opts check;  /* model, engine, seed, progress */
    const int *batches;    /* NULL = 1, 4, 16, 64, 256, 1024, 4096 */
    int n_batches;
    int repeats;           /* default 5 */
    bool all_layers;       /* default: first, middle, last */
} kvv_latency_opts;

typedef struct {
    kvv_roofline roof;
    kvv_latency_row *rows;
    int n_rows;
    int crossover;         /* smallest batch where recompute < read (mean rows), 0 if none */
    uint64_t compared, differing;    /* over every measured row */
} kvv_latency_result;

/* Time reading against recomputing K/V for every batch size of o on the
 * layers measured, with the engine of o->check (opened here with a cache of
 * the largest batch), comparing every recomputed K/V element with the
 * cached one; then the control (o->check.controls) and the roofline probe.
 * res gets, per batch size, one row per layer and their mean (layer -1),
 * the crossover and the compared/differing counts; r gets the engine, the
 * rows as JSON details, the control and the verdict (PASS iff bit-equal
 * everywhere and the control detected; o->check.force_fail plants the
 * control so it must FAIL). @return KVV_OK, or KVV_ERR_USAGE (a batch size
 * outside 1..65536), KVV_ERR_UNSUPPORTED (an engine without a host KV
 * cache), KVV_ERR_NOMEM or the engine's error — then r is ERROR/SKIPPED and res
 * holds nothing. Free res with kvv_latency_result_free. */
kvv_status kvv_latency_run(const kvv_latency_opts *o, kvv_latency_result *res,
                           kvv_check_result *r, kvv_error *err);

/* Free res's rows; accepts NULL and a result that holds nothing. */
void kvv_latency_result_free(kvv_latency_result *res);

/* The table to f: the roofline line, then per batch size the mean row (and
 * every layer's row when per_layer): read and recompute times in us, GB/s,
 * GFLOP/s, % of the sgemm peak, which is faster. */
void kvv_latency_print(FILE *f, const kvv_latency_result *res, bool per_layer);

#endif
