/*
 * audit.h — the one-shot audit (`kvverify MODEL`, `kvverify audit MODEL`):
 * the table of checks it runs, defaults sized to the model, and the run
 * itself, filling a kvv_report (verify/report/report.h).
 *
 *   kvv_check_opts o = kvv_check_opts_default();
 *   o.model = m;
 *   kvv_audit_plan plan;
 *   kvv_audit_plan_engine(m, &o.engine, false, &plan, &err); // sizes, floor, switches
 *   ... make a prompt of plan.n_prompt tokens; o.tokens = ...; o.n_gen = plan.n_gen;
 *   o.chunk = kvv_audit_kv_chunk(&plan, T);
 *   o.n_chunks = kvv_audit_chunks(&plan, T, chunks, KVV_AUDIT_MAX_CHUNKS); o.chunks = chunks;
 *   kvv_report rep;  kvv_report_init(&rep, path, o.seed);
 *   kvv_audit_run(&o, NULL, 0, &rep, &err);       // every check in the table
 *   int code = kvv_report_exit_code(&rep);
 *
 * Adding a check to the audit is one line in the table in audit.c.
 */
#ifndef KVV_AUDIT_H
#define KVV_AUDIT_H

#include <stdint.h>

#include "verify/check.h"
#include "verify/report/report.h"

typedef struct {
    const char *name;      /* "kv", "patch", ... */
    kvv_check_fn run;
    const char *summary;   /* one line */
    const char *engine;    /* the only engine the check applies to ("cpu": the
                              kernel tables), NULL = every engine */
} kvv_check_entry;

/* The audit's checks, in the order they run. @return the table; *n entries. */
const kvv_check_entry *kvv_audit_checks(int *n);
/* Entry by name, or NULL. */
const kvv_check_entry *kvv_audit_find(const char *name);
/* Does the audit run c for engine `engine` (NULL: ref) when no check is
 * named? A check for one engine only (tables: cpu) is left out for the
 * others; named (--checks), it runs and says "unsupported by this engine". */
bool kvv_audit_applies(const kvv_check_entry *c, const char *engine);

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

/* Run the named checks (names NULL: every check in the table that applies
 * to o->engine.name, kvv_audit_applies) with opts o,
 * appending one result per check to rep in table order (fills rep->engine
 * and the timing). o->n_jobs > 1 runs that many checks at a time, the
 * costliest first, each on its own engines (results do not depend on it);
 * the checks' own independent runs share what is left.
 * A check that cannot run is recorded as ERROR/SKIPPED and the audit goes on.
 * @return KVV_OK, KVV_ERR_USAGE for an unknown check name, KVV_ERR_NOMEM. */
kvv_status kvv_audit_run(const kvv_check_opts *o, const char *const *names, int n_names,
                         kvv_report *rep, kvv_error *err);

#endif
