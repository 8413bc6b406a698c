/*
 * invariance.h — the invariance check (DESIGN.md §4): the same tokens give
 * the same bits however the engine is driven.
 *
 * Baseline: the whole prompt in one forward call (prefill, all logits) on
 * the engine as configured. Variants, each compared with the baseline on
 * K and V (kv hook), the residual entering every layer plus the final one
 * (residual hook), and the logits of every row the variant returns:
 *   chunk=1      token-by-token decode (one forward per token)
 *   chunk=2      pieces of 2 tokens
 *   chunk=7      pieces of 7 tokens (a ragged last piece)
 *   prefill+decode  the first half as one batch returning only its last
 *                row of logits (KVV_LOGITS_LAST), then the rest one token at
 *                a time, each returning KVV_LOGITS_LAST
 *   threads=N    all at once and token-by-token with N threads, for each N of
 *                o->thread_counts (default 1, 2) that differs from the
 *                baseline's — only when the engine honours a thread count
 *                (its description reports the requested threads); otherwise
 *                recorded as "engine has no threads" in the details.
 *   ubatch=U     all at once on an engine opened with micro-batches of U
 *                tokens, U = 1, 2, 7 and all (T), those other than the
 *                baseline's — only on an engine with micro-batches
 *                (KVV_ENGINE_CAP_UBATCH, e.g. llama.cpp's n_ubatch); details
 *                "ubatch_sizes" lists those compared.
 *
 * Rows: one per variant and tensor kind (layer -1): "K chunk=7", "V ...",
 * "residual ...", "logits ...". The first mismatch names layer and token.
 * The final residual (before the output norm) is compared where the variant
 * returned logits, like the logits: an engine may compute it only there.
 *
 * Control (o->controls): the chunk=7 run again with the lowest mantissa bit
 * of one residual element flipped (layer L/2, token T/2) by the residual
 * hook, compared with the same chunk=7 run without the flip (so the detection
 * is the plant's, even on an engine that is not invariant): a difference
 * must be seen. o->force_fail plants that flip into the real chunk=7 variant
 * (FAIL).
 *
 * Every recorded slot is filled with NaN before each run, so a position or
 * layer whose hook the engine never called compares as different.
 */
#ifndef KVV_INVARIANCE_H
#define KVV_INVARIANCE_H

#include "verify/check.h"

kvv_status kvv_check_invariance(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err);

/* The thread counts r (an invariance result) ran: base (the baseline's)
 * first, then each count its thread variants compared (details
 * "thread_counts": none on an engine without threads, or when the check
 * stopped before them), at most max, into out. What a report's workload
 * states (what ran, never what was only asked for). @return how many (1 when
 * r is NULL or has none). */
int kvv_invariance_threads_ran(const kvv_check_result *r, int base, int *out, int max);

/* What invariance needs from the engine: every position's logits, the
 * residual and kv hooks, and — for its control, a flipped residual bit —
 * writing the residual (else: unsupported by this engine). Threads and
 * micro-batches are compared where the engine has them. */
#define KVV_CHECK_INVARIANCE_NEEDS(o)                                                        \
    (KVV_ENGINE_CAP_LOGITS_ALL | KVV_ENGINE_CAP_RESIDUAL_READ | KVV_ENGINE_CAP_KV_HOOK |      \
     ((o)->controls || (o)->force_fail ? KVV_ENGINE_CAP_RESIDUAL_WRITE : 0u))

#endif
