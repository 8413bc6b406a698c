/*
 * patch.h — the patch check (DESIGN.md §4): the residual stream is the whole
 * state. Run prompt A and prompt B (same length, different content); then,
 * for every layer l = 0..n_layer (n_layer = the final residual before the
 * output norm), run B again while the residual hook overwrites B's whole
 * layer-l residual matrix [T][n_embd] with A's, and finish the pass. The
 * logits must equal A's bit for bit at every position, and KL(p_A || p_patched)
 * must be exactly 0.0 at every position (double precision, libm; printed
 * with %.9g and as a hex float, never rounded).
 *
 * Rows: one per patched layer, "logits" (all T positions x n_vocab).
 * Details: kl_max per layer (number, %.9g text and %a hex), the unpatched
 * KL(p_A || p_B) to show the prompts really differ.
 *
 * Control (o->controls): patch only the LAST position at layer L/2 — the
 * earlier positions still carry B, so KL at the last position must be > 0.
 * o->force_fail makes the main sweep patch only the last position (FAIL).
 *
 * Prompt B: o->tokens_b when set (same length), else derived from o->seed
 * (same first token as A). A and B must differ before the last position.
 */
#ifndef KVV_PATCH_H
#define KVV_PATCH_H

#include "verify/check.h"

kvv_status kvv_check_patch(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err);

/* What patch needs from the engine: every position's logits and residuals
 * it can read and overwrite (else: unsupported by this engine). */
#define KVV_CHECK_PATCH_NEEDS                                                                \
    (KVV_ENGINE_CAP_LOGITS_ALL | KVV_ENGINE_CAP_RESIDUAL_READ | KVV_ENGINE_CAP_RESIDUAL_WRITE)

/* Prompt B for prompt A: same length and first token, the rest drawn from
 * seed; guaranteed to differ from A before the last position when n >= 2
 * and n_vocab >= 2. */
void kvv_patch_prompt_b(const int32_t *a, int n, int n_vocab, uint64_t seed, int32_t *b);

#endif
