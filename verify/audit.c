/* audit.c — the audit's check table, sizing and run (see audit.h). */
#include "verify/audit.h"

#include <string.h>

#include "verify/compare.h"
#include "verify/greedy.h"
#include "verify/invariance.h"
#include "verify/isolate.h"
#include "verify/kv.h"
#include "verify/kvdirect.h"
#include "verify/parallel.h"
#include "verify/patch.h"
#include "verify/tables.h"

/* The audit, one line per check, in run order. */
static const kvv_check_entry checks[] = {
    {"kv", kvv_check_kv, "cached K/V bit-equal to K/V recomputed from residuals", 0},
    {"patch", kvv_check_patch, "residual patching at every layer gives KL exactly 0", 0},
    {"greedy", kvv_check_greedy, "cached and cache-free greedy decoding agree bit for bit", 0},
    {"invariance", kvv_check_invariance, "chunking, decode and threads do not change any bit", 0},
    {"kvdirect", kvv_check_kvdirect, "KV-Direct (residual checkpoints) decodes bit-equal to the full cache", 0},
    {"compare", kvv_check_compare, "the engine against the reference (the reference against the cpu engine when it is the engine) per layer and on logits", 0},
    {"tables", kvv_check_tables, "cpu engine: invariance with each kernel table this CPU runs; the figures between tables", KVV_ENGINE_OPT_ISA},
};
#define N_CHECKS ((int)(sizeof checks / sizeof checks[0]))

const kvv_check_entry *kvv_audit_checks(int *n)
{
    *n = N_CHECKS;
    return checks;
}

bool kvv_audit_applies(const kvv_check_entry *c, const char *engine)
{
    return !c->engine_opt || kvv_engine_takes(engine, c->engine_opt);
}

const kvv_check_entry *kvv_audit_find(const char *name)
{
    for (int i = 0; i < N_CHECKS; i++)
        if (strcmp(checks[i].name, name) == 0)
            return &checks[i];
    return NULL;
}

/* The audit's checks as jobs, on threads in this process (verify/parallel.h)
 * or each in a child (verify/isolate.h): each writes only its own result
 * slot, opens its own engines and reads the shared model and prompt. */
typedef struct {
    const kvv_check_opts *o;       /* inner n_jobs already set */
    const kvv_check_entry *const *sel;
    kvv_check_result *results;     /* [ns], added before the run (no realloc meanwhile) */
    const int *order;              /* job -> index in sel, the costliest first */
} audit_jobs;

static void audit_job(void *user, int job, int worker)
{
    (void)worker;
    const audit_jobs *a = user;
    int i = a->order[job];
    if (a->o->stop && *a->o->stop) { /* a signal: no new check starts */
        kvv_check_set_interrupted(&a->results[i]);
        return;
    }
    kvv_error cerr = {0}; /* the result records any error (verify/check.h) */
    a->sel[i]->run(a->o, &a->results[i], &cerr);
}

/* The same job in an isolated check's child (kvv_isolate_run_jobs). */
static kvv_status audit_child_job(void *user, int job, kvv_check_result *r, kvv_error *err)
{
    const audit_jobs *a = user;
    return a->sel[a->order[job]]->run(a->o, r, err);
}

/* Rough relative cost, to start the long checks first. */
static int cost_rank(const char *name)
{
    static const char *const heavy[] = {"tables", "greedy", "kvdirect", "patch", "invariance", "kv"};
    for (int i = 0; i < (int)(sizeof heavy / sizeof heavy[0]); i++)
        if (strcmp(name, heavy[i]) == 0)
            return i;
    return 5;
}

kvv_status kvv_audit_run(const kvv_check_opts *o, const char *const *names, int n_names,
                         kvv_report *rep, kvv_error *err)
{
    double t0 = kvv_now_seconds();
    const kvv_check_entry *sel[N_CHECKS * 2];
    int ns = 0;
    if (!names) {
        for (int i = 0; i < N_CHECKS; i++)
            if (kvv_audit_applies(&checks[i], o->engine.name))
                sel[ns++] = &checks[i];
    } else {
        for (int i = 0; i < n_names && ns < N_CHECKS * 2; i++) {
            const kvv_check_entry *c = kvv_audit_find(names[i]);
            if (!c)
                return kvv_error_set(err, KVV_ERR_USAGE, "audit: unknown check '%s'", names[i]);
            sel[ns++] = c;
        }
    }
    int first = rep->n_checks;
    for (int i = 0; i < ns; i++)
        if (!kvv_report_add(rep, sel[i]->name))
            return kvv_error_set(err, KVV_ERR_NOMEM, "audit: out of memory");
    /* n_jobs checks at a time; each check's own independent runs share the
     * rest (a check alone gets them all) */
    int jobs = kvv_check_jobs(o);
    int at_once = jobs < ns ? jobs : ns;
    kvv_check_opts inner = *o;
    inner.n_jobs = at_once > 0 ? (jobs + at_once - 1) / at_once : 1;
    int order[N_CHECKS * 2];
    for (int i = 0; i < ns; i++)
        order[i] = i;
    for (int i = 1; i < ns; i++) /* stable insertion sort by cost rank */
        for (int k = i; k > 0 && cost_rank(sel[order[k]]->name) < cost_rank(sel[order[k - 1]]->name);
             k--) {
            int t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    audit_jobs a = {.o = &inner, .sel = sel, .results = rep->checks + first, .order = order};
    if (kvv_isolate_wanted(&inner)) {
        /* children run side by side, all forked from this one thread
         * (verify/isolate.h says why not from threads) */
        kvv_check_result *rs[N_CHECKS * 2];
        for (int j = 0; j < ns; j++)
            rs[j] = &a.results[order[j]];
        kvv_isolate_opts io = kvv_isolate_opts_for(&inner);
        kvv_error ierr = {0}; /* each result records its own error, crash or timeout */
        kvv_isolate_run_jobs(&io, ns, at_once, audit_child_job, &a, rs, &ierr);
    } else {
        kvv_parallel_for(ns, at_once, audit_job, &a);
    }
    for (int i = 0; i < ns && !rep->has_engine; i++) {
        const kvv_check_result *r = &rep->checks[first + i];
        if (r->has_engine) {
            rep->engine = r->engine;
            rep->engine.control = 0;
            rep->has_engine = true;
        }
    }
    rep->seconds += kvv_now_seconds() - t0;
    return KVV_OK;
}
