/*
 * audit_plan.h — how much work the audit does: the multiply-accumulates a
 * workload costs, the floor no default drops below, and the plan (prompt
 * length, greedy steps, kv's chunk, invariance's chunkings) for a model on
 * an engine. The audit (verify/audit.h), suites and the isolation layer's
 * default time limit (verify/isolate.h) size their work with it; it runs
 * no check itself.
 */
#ifndef KVV_AUDIT_PLAN_H
#define KVV_AUDIT_PLAN_H

#include <stdbool.h>

#include "engine/engine.h"
#include "common/error.h"

/* Multiply-accumulates of one token through the model: the projections and
 * FFN of every layer (layers), and the output head (head). Attention over
 * the context depends on the position and is added by the audit's estimate. */
void kvv_model_macs_per_token(const kvv_hparams *hp, double *layers, double *head);

/* Estimated multiply-accumulates of the whole audit (every check, controls
 * included) for a prompt of T tokens and N greedy steps: what the default
 * workload is sized by, and what an isolated check's default time limit
 * scales with (verify/isolate.h). */
double kvv_audit_cost(const kvv_hparams *hp, int T, int N);

/* THE FLOOR. The default workload never drops below one that exercises
 * every kernel path of the engine under test, whatever the model's size
 * (bigger models make it slower, not smaller; --quick may go lower and
 * every report says so):
 *   - greedy: at least KVV_AUDIT_MIN_STEPS steps;
 *   - prompt: at least KVV_AUDIT_MIN_PROMPT tokens and twice the engine's
 *     largest kernel switch (engine.h kvv_batch_paths), so the whole prompt,
 *     its half (invariance's prefill) and kv's chunk lie above every switch
 *     while token-by-token runs lie below;
 *   - chunkings that straddle every switch: invariance runs chunks of s-1
 *     and s for each switch s besides its 1, 2 and 7, and kv's odd chunk is
 *     at least the largest switch. */
#define KVV_AUDIT_MIN_STEPS 32
#define KVV_AUDIT_MIN_PROMPT 8
#define KVV_AUDIT_MAX_CHUNKS 12

typedef struct {
    int n_prompt;          /* prompt length for every check */
    int n_gen;             /* greedy steps */
    double est_macs;       /* estimated multiply-accumulates of the whole audit */
    kvv_batch_paths paths; /* the engine's kernel switches (known = false: not described) */
    int floor_prompt;      /* the floor (see above) */
    int floor_gen;
    bool quick;            /* sized by the budget alone, below the floor (--quick) */
} kvv_audit_plan;

/* Default work budget of an audit, in multiply-accumulates: sized so a
 * 135M-parameter model finishes in about a minute on two cores with the
 * reference engine (measured ~2.3 GMAC/s on one core: ~35 s of compute). */
#define KVV_AUDIT_BUDGET_MACS 8.0e10

/* Largest (prompt, steps) pair from a fixed ladder whose estimated cost
 * (all checks, controls included) fits `budget` MACs (<= 0: the default
 * budget), never below prompt 4 / 4 steps; then raised to the floor for an
 * engine with switches `paths` (NULL: not described) unless quick.
 * out->paths is a copy of *paths. */
void kvv_audit_plan_for(const kvv_hparams *hp, double budget, const kvv_batch_paths *paths,
                        bool quick, kvv_audit_plan *out);

/* The plan for model m on engine eo: opens the engine once to ask where its
 * kernels switch (kvv_engine_batch_paths), closes it, and sizes the plan
 * with the default budget (kvv_audit_plan_for). Errors of the open (an
 * unknown engine, a mode or table it lacks) are returned as they are. */
kvv_status kvv_audit_plan_engine(const kvv_model *m, const kvv_engine_opts *eo, bool quick,
                                 kvv_audit_plan *out, kvv_error *err);

/* kv's odd chunk for a prompt of T tokens: below T, not dividing it, and
 * (unless quick) at least the largest switch. 1 for T <= 2. */
int kvv_audit_kv_chunk(const kvv_audit_plan *p, int T);
/* invariance's chunk sizes for T tokens into out[max]: 1, 2, 7 and (unless
 * quick) s-1 and s for each switch s, ascending, each below T.
 * @return how many. */
int kvv_audit_chunks(const kvv_audit_plan *p, int T, int *out, int max);

#endif
