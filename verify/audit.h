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
 * Adding a check to the audit is one line in the table in audit.c. How
 * big the workload is (the floor, the plan, the cost estimate) is
 * verify/audit_plan.h's.
 */
#ifndef KVV_AUDIT_H
#define KVV_AUDIT_H

#include <stdint.h>

#include "verify/audit_plan.h"
#include "verify/check.h"
#include "verify/report/report.h"

typedef struct {
    const char *name;      /* "kv", "patch", ... */
    kvv_check_fn run;
    const char *summary;   /* one line */
    unsigned engine_opt;   /* KVV_ENGINE_OPT_* the check exercises (ISA: the kernel
                              tables): it applies to engines taking it; 0 = every engine */
} kvv_check_entry;

/* The audit's checks, in the order they run. @return the table; *n entries. */
const kvv_check_entry *kvv_audit_checks(int *n);
/* Entry by name, or NULL. */
const kvv_check_entry *kvv_audit_find(const char *name);
/* Does the audit run c for engine `engine` (NULL: ref) when no check is
 * named? A check of an option some engines take (tables: --isa, the cpu
 * engine) is left out for the others; named (--checks), it runs and says
 * "unsupported by this engine". */
bool kvv_audit_applies(const kvv_check_entry *c, const char *engine);

/* Run the named checks (names NULL: every check in the table that applies
 * to o->engine.name, kvv_audit_applies) with opts o,
 * appending one result per check to rep in table order (fills rep->engine
 * and the timing). o->n_jobs > 1 runs that many checks at a time, the
 * costliest first, each on its own engines (results do not depend on it);
 * the checks' own independent runs share what is left.
 * A check that cannot run is recorded as ERROR/SKIPPED and the audit goes on.
 * Once *o->stop is set (a signal) no check starts: the ones not started, and
 * isolated ones running (killed), read ERROR "interrupted"; an in-process
 * one running finishes.
 * @return KVV_OK, KVV_ERR_USAGE for an unknown check name, KVV_ERR_NOMEM. */
kvv_status kvv_audit_run(const kvv_check_opts *o, const char *const *names, int n_names,
                         kvv_report *rep, kvv_error *err);

#endif
