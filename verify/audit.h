/*
 * audit.h — the one-shot audit (`kvverify MODEL`, `kvverify audit MODEL`):
 * the table of checks it runs, defaults sized to the model, and the run
 * itself, filling a kvv_report (verify/report/report.h).
 *
 *   kvv_check_opts o = kvv_check_opts_default();
 *   o.model = m;
 *   kvv_audit_plan plan;
 *   kvv_audit_plan_for(&m->hp, &plan);          // prompt length, greedy steps
 *   ... make a prompt of plan.n_prompt tokens; o.tokens = ...; o.n_gen = plan.n_gen;
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
} kvv_check_entry;

/* The audit's checks, in the order they run. @return the table; *n entries. */
const kvv_check_entry *kvv_audit_checks(int *n);
/* Entry by name, or NULL. */
const kvv_check_entry *kvv_audit_find(const char *name);

/* Multiply-accumulates of one token through the model: the projections and
 * FFN of every layer (layers), and the output head (head). Attention over
 * the context depends on the position and is added by the audit's estimate. */
void kvv_model_macs_per_token(const kvv_hparams *hp, double *layers, double *head);

typedef struct {
    int n_prompt;          /* prompt length for every check */
    int n_gen;             /* greedy steps */
    double est_macs;       /* estimated multiply-accumulates of the whole audit */
} kvv_audit_plan;

/* Default work budget of an audit, in multiply-accumulates: sized so a
 * 135M-parameter model finishes in about a minute on two cores with the
 * reference engine (measured ~2.3 GMAC/s on one core: ~35 s of compute). */
#define KVV_AUDIT_BUDGET_MACS 8.0e10

/* Largest (prompt, steps) pair from a fixed ladder whose estimated cost
 * (all four checks, controls included) fits `budget` MACs (<= 0: the
 * default budget). Never below prompt 4 / 4 steps. */
void kvv_audit_plan_for(const kvv_hparams *hp, double budget, kvv_audit_plan *out);

/* Run the named checks (names NULL: every check in the table) with opts o,
 * appending one result per check to rep (fills rep->engine and the timing).
 * A check that cannot run is recorded as ERROR/SKIPPED and the audit goes on.
 * @return KVV_OK, KVV_ERR_USAGE for an unknown check name, KVV_ERR_NOMEM. */
kvv_status kvv_audit_run(const kvv_check_opts *o, const char *const *names, int n_names,
                         kvv_report *rep, kvv_error *err);

#endif
