/*
 * catalog.h — the one table of kvverify's checks: what each proves, the
 * negative control that shows it can fail, how to run it alone, and, for the
 * checks the one-shot audit runs (verify/audit.h), its entry point and
 * summary. `kvverify checks` prints the table; the audit, the suites and
 * `kvverify audit --checks` read it.
 *
 *   int n;
 *   const kvv_check_entry *c = kvv_check_catalog(&n);
 *   for (int i = 0; i < n; i++) printf("%s: %s\n", c[i].name, c[i].proves);
 *   const kvv_check_entry *kv = kvv_audit_find("kv");
 *   kv->run(&opts, &result, &err);
 *
 * Adding a check is one row in catalog.c; a check the audit runs has a
 * `run` and sits among the first rows (the audit's, in its report order).
 * A check's entry point is named kvv_check_<name> (still to rename:
 * kvv_latency_run and kvv_numerics_run).
 */
#ifndef KVV_CATALOG_H
#define KVV_CATALOG_H

#include <stdbool.h>

#include "verify/check.h"

typedef struct {
    const char *name;      /* "kv", "evict", ... */
    const char *command;   /* how to run it alone: "kvverify kv MODEL" */
    const char *proves;    /* what a PASS means, one sentence */
    const char *control;   /* the planted difference it must detect */
    bool verdict;          /* false: it measures (a table, no pass/fail of its own) */
    /* the audit's columns (NULL / 0 for a check the audit does not run) */
    kvv_check_fn run;      /* the entry point, kvv_check_<name> */
    const char *summary;   /* one line */
    unsigned engine_opt;   /* KVV_ENGINE_OPT_* the check exercises (ISA: the kernel
                              tables): it applies to engines taking it; 0 = every engine */
    int cost;              /* rough relative cost, 0 = the costliest: the audit
                              starts its checks in this order */
} kvv_check_entry;

/* Every check, the audit's first in its order. @return the table; *n rows. */
const kvv_check_entry *kvv_check_catalog(int *n);

/* The audit's checks (the table's first rows, those with a run), in the
 * order they are reported. @return the table; *n of its rows. */
const kvv_check_entry *kvv_audit_checks(int *n);

/* The audit's check by name, or NULL (also for a check the audit does not
 * run). */
const kvv_check_entry *kvv_audit_find(const char *name);

#endif
