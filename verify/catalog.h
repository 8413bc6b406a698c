/*
 * catalog.h — what every check of kvverify proves and the negative control
 * that shows it can fail, in one table (`kvverify checks` prints it; the
 * audit's own table, verify/audit.h, says which of them the audit runs).
 *
 *   int n;
 *   const kvv_check_about *a = kvv_check_catalog(&n);
 *   for (int i = 0; i < n; i++) printf("%s: %s\n", a[i].name, a[i].proves);
 *
 * Adding a check is one row here (and its line in the audit's table when
 * the audit runs it).
 */
#ifndef KVV_CATALOG_H
#define KVV_CATALOG_H

#include <stdbool.h>

typedef struct {
    const char *name;      /* "kv", "evict", ... */
    const char *command;   /* how to run it alone: "kvverify kv MODEL" */
    const char *proves;    /* what a PASS means, one sentence */
    const char *control;   /* the planted difference it must detect */
    bool verdict;          /* false: it measures (a table, no pass/fail of its own) */
} kvv_check_about;

/* Every check, the audit's first in its order. @return the table; *n rows. */
const kvv_check_about *kvv_check_catalog(int *n);

#endif
