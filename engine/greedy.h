/*
 * greedy.h — greedy decoding, written once: the prompt in one batch, then
 * one token per forward call, each the argmax of the previous row of logits
 * (runtime/logits.h: NaN never wins, the lowest id on ties). `kvverify run`,
 * the greedy check, the golden vectors, the memory check and the cache
 * policies' runs all decode through here, so no two of them can choose a
 * different token from the same row.
 *
 * The forward call is a parameter so an engine (kvv_engine_forward) and a
 * cache policy wrapped around one (kvv_policy_forward) decode alike:
 *
 *   kvv_greedy g = {.forward = kvv_greedy_engine_forward, .ctx = e,
 *                   .n_vocab = V, .prompt = toks, .n_prompt = T, .n_gen = N};
 *   kvv_engine_reset(e);
 *   if (kvv_greedy_decode(&g, logits, tokens, NULL, &err)) ...   // logits [N][V]
 *
 * Positions: the prompt at 0..n_prompt-1; the token chosen from row i is
 * fed at position n_prompt + i and produces row i + 1. Row i is therefore
 * the logits at position n_prompt - 1 + i. Generation does not stop at EOS.
 * Resetting the cache before a run is the caller's (a forward function knows
 * no reset).
 */
#ifndef KVV_ENGINE_GREEDY_H
#define KVV_ENGINE_GREEDY_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "runtime/runtime.h"

/* A forward pass with kvv_engine_forward's contract (engine/engine.h); ctx
 * is the engine, the policy, or a test's fake. */
typedef kvv_status (*kvv_forward_fn)(void *ctx, int n, const int32_t *tokens, const int32_t *pos,
                                     const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                                     kvv_error *err);

/* kvv_engine_forward (ctx: a kvv_engine *) and kvv_policy_forward (ctx: a
 * kvv_policy *, engine/policy/policy.h) as kvv_forward_fn. */
kvv_status kvv_greedy_engine_forward(void *engine, int n, const int32_t *tokens,
                                     const int32_t *pos, const kvv_hooks *hooks,
                                     kvv_logits_mode lm, float *logits, kvv_error *err);
kvv_status kvv_greedy_policy_forward(void *policy, int n, const int32_t *tokens,
                                     const int32_t *pos, const kvv_hooks *hooks,
                                     kvv_logits_mode lm, float *logits, kvv_error *err);

/* One greedy step: *tok = kvv_logits_argmax(row, n_vocab), then that token
 * alone forwarded at position pos, its logits into next [n_vocab] (next may
 * be row). hooks may be NULL. @return the forward's status. */
kvv_status kvv_greedy_step(kvv_forward_fn forward, void *ctx, const kvv_hooks *hooks,
                           const float *row, int n_vocab, int32_t pos, int32_t *tok, float *next,
                           kvv_error *err);

/* Called after row i (0 <= i < n_gen) is written, before its token is fed.
 * argmax: kvv_logits_argmax of the row. A non-zero status stops the run
 * and is returned. */
typedef kvv_status (*kvv_greedy_row_fn)(void *user, int i, const float *row, int32_t argmax,
                                        kvv_error *err);

typedef struct {
    kvv_forward_fn forward;   /* required */
    void *ctx;                /* forward's first argument */
    const kvv_hooks *hooks;   /* every forward call's hooks; may be NULL */
    int n_vocab;
    const int32_t *prompt;    /* [n_prompt], n_prompt >= 1, forwarded in one batch */
    int n_prompt;
    int n_gen;                /* rows of logits (>= 1): n_gen - 1 single-token steps */
    const int32_t *forced;    /* NULL: greedy; else [n_gen] teacher forcing: forced[i]
                                 is fed after row i in place of its argmax */
    bool one_row;             /* logits is one row, overwritten by each step */
    kvv_greedy_row_fn on_row; /* (optional) each row as it comes */
    void *user;               /* on_row's first argument */
} kvv_greedy;

/* Decode as described at the top of this file.
 * logits: [n_gen][n_vocab] (one row when g->one_row), written.
 * tokens: [n_gen] the token chosen after each row (forced[i] when forcing);
 * argmax: [n_gen] each row's argmax, or NULL. On an error the arrays hold
 * the rows done so far. @return KVV_OK, KVV_ERR_USAGE (n_prompt, n_gen or
 * n_vocab < 1), or the first failing forward's or on_row's status. */
kvv_status kvv_greedy_decode(const kvv_greedy *g, float *logits, int32_t *tokens, int32_t *argmax,
                             kvv_error *err);

#endif
