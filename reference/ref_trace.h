/*
 * ref_trace.h — record a run's residuals, K, V and logits per (layer,
 * position) through the engine hooks, and hash them in a canonical order, so
 * two runs that process the same tokens in different batches (one batch,
 * chunks, token by token) hash the same iff every bit is the same. Used by
 * `kvverify run --hash` and the reproducibility tests; works with any engine
 * (it only uses kvv_hooks).
 *
 *   kvv_trace *tr = kvv_trace_new(&model->hp, n_ctx);
 *   kvv_hooks h = kvv_trace_hooks(tr);
 *   kvv_engine_forward(e, n, tok, pos, &h, KVV_LOGITS_ALL, logits, &err);
 *   for (t...) kvv_trace_add_logits(tr, pos[t], logits + t * n_vocab);
 *   char hex[65]; kvv_trace_sha256_hex(tr, hex);
 *   kvv_trace_free(tr);
 *
 * Canonical order of the hash: for each position p ascending that has any
 * record, for each layer l = 0..n_layer: the residual entering l (l ==
 * n_layer: the final residual), then for l < n_layer K(l, p) and V(l, p);
 * then the logits of p. Each record is a tag byte (1 residual, 2 K, 3 V,
 * 4 logits), the layer and position as little-endian u32, then the fp32
 * values as little-endian u32 bit patterns. A later record for the same
 * (kind, layer, position) replaces the earlier one.
 */
#ifndef KVV_REF_TRACE_H
#define KVV_REF_TRACE_H

#include <stdint.h>

#include "model/arch.h"
#include "runtime/runtime.h"

typedef struct kvv_trace kvv_trace;

/* Positions 0..n_ctx-1. NULL on OOM or bad sizes. Copies what it needs of hp. */
kvv_trace *kvv_trace_new(const kvv_hparams *hp, int n_ctx);
void kvv_trace_free(kvv_trace *t); /* accepts NULL */

/* Hooks that record residual (read only) and kv; attn and attn_out NULL.
 * Valid while t lives. Records for positions outside 0..n_ctx-1 are dropped
 * and counted (kvv_trace_dropped). */
kvv_hooks kvv_trace_hooks(kvv_trace *t);

/* Record one row of n_vocab logits for position pos (copied). */
void kvv_trace_add_logits(kvv_trace *t, int pos, const float *row);

/* Rows that could not be recorded (bad position or out of memory); a
 * caller that needs a complete trace checks this is 0. */
long kvv_trace_dropped(const kvv_trace *t);

/* sha256 of the canonical serialization, as 64 lowercase hex digits + NUL. */
void kvv_trace_sha256_hex(const kvv_trace *t, char hex[65]);

#endif
