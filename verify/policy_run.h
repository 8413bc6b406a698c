/*
 * policy_run.h — decode a sequence through a cache policy, the common step
 * of the kvdirect check, `kvverify evict` and `kvverify memory`.
 *
 * A run opens its own engine (context = prompt + generated tokens), wraps it
 * in a policy (engine/policy/policy.h), prefills the prompt in one batch and
 * then decodes n_gen tokens one at a time. In greedy mode each next token is
 * the run's own argmax; in teacher-forced mode it is taken from `forced`, so
 * two runs see the same inputs and their logits can be compared step by step.
 *
 *   kvv_policy_run_out out;
 *   kvv_policy_run(model, &engine_opts, &cfg, prompt, n_prompt, 64, NULL, &out, &err);
 *   ... out.tokens[i], out.logits + i*n_vocab, out.stats ...
 *   kvv_policy_run_out_free(&out);
 */
#ifndef KVV_POLICY_RUN_H
#define KVV_POLICY_RUN_H

#include <stdint.h>

#include "engine/engine.h"
#include "engine/policy/policy.h"

typedef struct kvv_policy_run_out {
    int n_gen;
    int n_vocab;
    int32_t *tokens;          /* [n_gen]: token chosen (greedy) or fed (forced) at each step */
    int32_t *argmax;          /* [n_gen]: argmax of the logits at each step */
    float *logits;            /* [n_gen][n_vocab]: logits predicting step i */
    kvv_policy_stats stats;   /* final accounting */
    uint64_t *bytes_per_step; /* [n_gen]: live K/V + checkpoint bytes after each step */
    double seconds;
} kvv_policy_run_out;

/* forced: NULL for greedy, else n_gen tokens to feed (forced[i] is the
 * token at step i, fed as the input of step i+1). */
kvv_status kvv_policy_run(const kvv_model *m, const kvv_engine_opts *eo,
                          const kvv_policy_cfg *cfg, const int32_t *prompt, int n_prompt,
                          int n_gen, const int32_t *forced, kvv_policy_run_out *out,
                          kvv_error *err);
void kvv_policy_run_out_free(kvv_policy_run_out *out); /* accepts NULL */

/* The same run on an engine the caller opened (and keeps): its cache is
 * cleared first, and its context must hold n_prompt + n_gen positions. One
 * engine per thread can then serve many runs; a run's result must not
 * depend on what the engine ran before (kvverify evict relies on it and its
 * KV-Direct verdict would catch a leak: full and KV-Direct runs then come
 * from differently used engines). */
kvv_status kvv_policy_run_engine(kvv_engine *e, const kvv_policy_cfg *cfg,
                                 const int32_t *prompt, int n_prompt, int n_gen,
                                 const int32_t *forced, kvv_policy_run_out *out, kvv_error *err);

/* KL(p || q) in double precision of the softmaxes of two logit rows.
 * Exactly 0.0 when the rows are bit-identical. */
double kvv_kl_logits(const float *p_logits, const float *q_logits, int n);

#endif
