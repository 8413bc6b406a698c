/*
 * batch.h — the batch check (issue 33): request A alone against A among
 * other requests sharing the same forward calls, as a server batches them.
 * Every logit row and every K/V row of A (kvv_engine_seq_kv, every layer)
 * must be bit-equal, per mode:
 *
 *   single     A's prompt in one call with the other requests' prompts (other
 *              lengths), against A's prompt alone in one call;
 *   decode     A's next tokens in the same calls as the others' next tokens,
 *              1, 2 and k tokens per request per call over the steps, against
 *              the same calls of A alone;
 *   mixed      A's prompt in the same call as one decode token of each other
 *              request (continuous batching), against A's prompt alone;
 *   prefix     A's first P tokens computed in another sequence and copied into
 *              A (kvv_engine_seq_cp), the rest computed in A, against the same
 *              split without the copy (the copy's own effect), and that split
 *              against A computed fresh in one call (the split's effect);
 *   isolation  A beside neighbours B against A beside B' (same lengths, other
 *              tokens): the same shapes run the same kernels, so any
 *              difference is a leak between requests — on every engine, fast
 *              modes included.
 *
 * A sits in sequence 0 alone and in a middle sequence among the others.
 * Rows: "logits MODE", "K MODE", "V MODE" (prefix: "... prefix copy" and
 * "... prefix split"); details "modes": one object per mode with its
 * verdict, first difference (tensor, layer, position, decode step), max ULP,
 * NMSE and how many rows differ; details "ulp_by_layer" per mode for the
 * HTML figure; details "workload" the requests, lengths and steps.
 *
 * Control (o->controls): the single mode's shared call again with A's last
 * prompt token changed, compared with the unplanted shared call: the
 * difference must be found. o->force_fail plants it into the single mode's
 * real comparison (FAIL).
 *
 * An engine without sequences (no KVV_ENGINE_CAP_SEQS, or serving fewer
 * than the requests) is unsupported (SKIPPED), never passed; a mode the
 * engine refuses (KVV_ERR_UNSUPPORTED, e.g. seq_cp) is reported
 * unsupported while the others still give the verdict.
 */
#ifndef KVV_BATCH_H
#define KVV_BATCH_H

#include "verify/check.h"

/* The modes (kvv_check_opts.batch_modes bits). */
enum {
    KVV_BATCH_MODE_SINGLE = 1u << 0,
    KVV_BATCH_MODE_DECODE = 1u << 1,
    KVV_BATCH_MODE_MIXED = 1u << 2,
    KVV_BATCH_MODE_PREFIX = 1u << 3,
    KVV_BATCH_MODE_ISOLATION = 1u << 4,
    KVV_BATCH_MODE_ALL = 0x1fu
};
#define KVV_BATCH_N_MODES 5
#define KVV_BATCH_DEFAULT_REQUESTS 4
/* Tokens per request per call of the decode mode's largest step (k): above
 * the cpu engine's GEMM switch (4) so the steps straddle it. */
#define KVV_BATCH_DECODE_K 5

/* "single", "decode", ... for mode bit i (0..KVV_BATCH_N_MODES-1); NULL past. */
const char *kvv_batch_mode_name(int i);
/* Parse "single,decode" (or "all") into *modes. @return 1, or 0 naming the
 * unknown mode in bad[size]. */
int kvv_batch_modes_parse(const char *s, unsigned *modes, char *bad, size_t size);

kvv_status kvv_check_batch(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err);

#endif
