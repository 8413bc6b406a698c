/*
 * greedy.h — the greedy check (DESIGN.md §4): decoding with the KV cache and
 * decoding with no cache at all give the same tokens and the same logits.
 *
 * Cached run: prefill the prompt (T tokens), then decode one token per step
 * against the cache, o->n_gen steps (argmax, lowest index on ties).
 * No-cache run: at every step clear the cache and process the whole sequence
 * so far (prompt + generated) from scratch, taking the last row's logits.
 * Tokens must be identical; logits are compared bit for bit at every step up
 * to and including the first divergent token (after it the contexts differ).
 * On a mismatch the report gives the first divergent step, the top-1 and
 * top-2 logits of both runs there and their margins.
 *
 * Control (o->controls): the cached decode on an engine with one perturbed
 * weight (KVV_CTL_PERTURB_WEIGHT: lowest mantissa bit of output_norm[0])
 * against the normal no-cache run: a difference must be seen.
 * o->force_fail runs the main cached decode on the perturbed engine (FAIL).
 *
 * Rows: one "logits" row over all compared steps (layer -1). Details: both
 * token sequences, steps compared, per-step differing counts.
 */
#ifndef KVV_GREEDY_H
#define KVV_GREEDY_H

#include "verify/check.h"

kvv_status kvv_check_greedy(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err);

#endif
