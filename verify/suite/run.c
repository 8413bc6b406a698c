/* run.c — running a suite's shard: each case's checks (the audit's table,
 * verify/audit.h) on one opened model, its golden vector, optional models
 * that are absent, and the exit code of the whole shard. See suite.h. */
#include "verify/suite/suite.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/arch.h"
#include "vectors/kvv_vectors.h"
#include "verify/audit.h"
#include "verify/invariance.h"
#include "verify/check.h"
#include "verify/isolate.h"

void kvv_suite_results_free(kvv_suite_results *res)
{
    if (!res)
        return;
    for (int i = 0; i < res->n_out; i++) {
        kvv_check_result_free(&res->out[i].r);
        json_decref(res->out[i].prior);
    }
    free(res->out);
    res->out = NULL;
    res->n_out = res->cap_out = 0;
}

static kvv_check_result *new_outcome(kvv_suite_results *res, int ci, const char *name)
{
    if (res->n_out == res->cap_out) {
        int nc = res->cap_out ? res->cap_out * 2 : 16;
        kvv_suite_outcome *n = realloc(res->out, (size_t)nc * sizeof *n);
        if (!n)
            return NULL;
        res->out = n;
        res->cap_out = nc;
    }
    kvv_suite_outcome *o = &res->out[res->n_out++];
    memset(o, 0, sizeof *o);
    o->case_index = ci;
    o->prior = NULL;
    kvv_check_result_init(&o->r, name);
    return &o->r;
}

static void log_outcome(const kvv_suite_run_opts *ro, const kvv_suite_case *c, const kvv_check_result *r)
{
    if (!ro || !ro->log)
        return;
    fprintf(ro->log, "%-7s %s/%s  %s (%.2f s)%s%s\n", kvv_verdict_name(r->verdict), c->name, r->name,
            r->key_figure, r->seconds, r->message[0] ? "  " : "", r->message);
}

kvv_engine_opts kvv_suite_case_engine(const kvv_suite_case *c)
{
    kvv_engine_opts e = kvv_engine_opts_default();
    e.name = c->engine;
    e.mode = kvv_engine_default_mode(c->engine);
    if (c->mode[0])
        kvv_mode_from_name(c->mode, &e.mode);
    e.n_threads = c->threads;
    kvv_cache_type_from_name(c->cache, &e.cache_type);
    e.device = c->device[0] ? c->device : NULL;
    e.n_ubatch = c->n_ubatch;
    e.isa = c->isa[0] ? c->isa : NULL;
    e.engine_opts = c->n_engine_opts ? c->engine_opts : NULL;
    e.n_engine_opts = c->n_engine_opts;
    return e;
}

/* A golden-vector case: one testcase named "vector". */
static kvv_status run_vector(const kvv_suite_case *c, kvv_check_result *r)
{
    kvv_vectors_check_opts co = kvv_vectors_check_opts_default();
    co.engine = c->engine;
    co.mode = c->mode[0] ? c->mode : NULL;
    co.n_threads = c->threads;
    co.device = c->device[0] ? c->device : NULL;
    co.n_ubatch = c->n_ubatch;
    co.isa = c->isa[0] ? c->isa : NULL;
    co.engine_opts = c->n_engine_opts ? c->engine_opts : NULL;
    co.n_engine_opts = c->n_engine_opts;
    co.control = c->control;
    co.perturb_layer = c->perturb_layer;
    co.perturb_pos = c->perturb_pos;
    kvv_vectors_result vr;
    kvv_error err = {0};
    double t0 = kvv_now_seconds();
    kvv_status st = kvv_vectors_check(c->model, c->vector, &co, &vr, &err);
    r->seconds = kvv_now_seconds() - t0;
    if (st == KVV_ERR_NOMEM)
        return st;
    if (st) {
        kvv_check_set_error(r, &err);
        return KVV_OK;
    }
    kvv_check_set_engine(r, &vr.engine);
    uint64_t n = 0;
    for (int i = 0; i < vr.n_tally; i++)
        n += vr.tally[i].compared;
    if (r->details) {
        json_object_set_new(r->details, "vector", json_string(c->vector));
        json_object_set_new(r->details, "values_compared", json_integer((json_int_t)n));
        json_object_set_new(r->details, "divergences", json_integer((json_int_t)vr.n_diverged));
    }
    const bool is_control = c->control || c->perturb_layer >= 0;
    char line[512];
    if (!vr.diverged) {
        if (is_control) {
            kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "control NOT detected: %llu values still "
                                  "bit-identical", (unsigned long long)n);
            kvv_check_set_message(r, "negative control (perturbed %s) was not detected",
                                  c->control ? "weight" : "residual");
        } else {
            kvv_check_set_verdict(r, KVV_VERDICT_PASS, "%llu values bit-identical",
                                  (unsigned long long)n);
        }
    } else if (is_control) {
        kvv_check_set_verdict(r, KVV_VERDICT_PASS, "control detected: %llu of %llu values diverge; "
                              "first divergence: %s", (unsigned long long)vr.n_diverged,
                              (unsigned long long)n,
                              kvv_divergence_format(&vr.first, line, sizeof line));
    } else {
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "%llu of %llu values diverge",
                              (unsigned long long)vr.n_diverged, (unsigned long long)n);
        kvv_check_set_message(r, "first divergence: %s",
                              kvv_divergence_format(&vr.first, line, sizeof line));
    }
    return KVV_OK;
}

/* The sizes a case's checks run with on model m, as a workload: the
 * prompt and steps the case gives, else the floor of the audit for the
 * case's engine (verify/audit.h: at least SUITE_MIN_PROMPT tokens and twice
 * the engine's largest kernel switch, KVV_AUDIT_MIN_STEPS steps) or, quick,
 * SUITE_QUICK tokens and steps, marked; kv's chunk and invariance's
 * chunkings straddle the switches as the audit's do. n_gen, kv_chunk and
 * chunks are what the checks use (filled whatever checks= says); what the
 * case's checks= leave out is trimmed into *stated, the workload reported. */
enum { SUITE_MIN_PROMPT = 16, SUITE_QUICK = 16 };
static void case_workload(const kvv_suite_case *c, const kvv_model *m, bool quick,
                          const kvv_suite_run_opts *ro, kvv_workload *w, kvv_workload *stated)
{
    kvv_engine_opts eo = kvv_suite_case_engine(c);
    kvv_audit_plan plan;
    kvv_error err = {0};
    /* isolated, the engine is opened to ask its switches in a child too: a
     * device initialised here would be inherited half-alive by every check's
     * child (device threads do not survive fork) */
    kvv_check_opts io = kvv_check_opts_default();
    io.engine = eo;
    io.isolate = ro ? ro->isolate : 0;
    io.timeout = ro ? ro->timeout : 0;
    bool known = (kvv_isolate_wanted(&io)
                      ? kvv_isolate_plan_engine(m, &eo, quick,
                                                io.timeout > 0 ? io.timeout : 300, &plan, &err)
                      : kvv_audit_plan_engine(m, &eo, quick, &plan, &err)) == KVV_OK;
    if (!known) /* the checks report why the engine did not open */
        kvv_audit_plan_for(&m->hp, 0, NULL, quick, &plan);
    memset(w, 0, sizeof *w);
    w->set = true;
    w->floor_prompt = plan.floor_prompt > SUITE_MIN_PROMPT ? plan.floor_prompt : SUITE_MIN_PROMPT;
    w->floor_gen = plan.floor_gen;
    w->quick = quick;
    w->n_prompt = c->n_tokens ? c->n_tokens : quick ? SUITE_QUICK : w->floor_prompt;
    w->n_gen = c->n_gen ? c->n_gen : quick ? SUITE_QUICK : w->floor_gen;
    w->kv_chunk = kvv_audit_kv_chunk(&plan, w->n_prompt);
    w->n_chunks = kvv_audit_chunks(&plan, w->n_prompt, w->chunks, KVV_WORKLOAD_MAX);
    w->threads[w->n_threads++] = c->threads;
    for (int t = 1; t <= 2; t++) /* invariance's thread counts (its default) */
        if (t != c->threads)
            w->threads[w->n_threads++] = t;
    if (known)
        kvv_batch_paths_list(&plan.paths, w->switches, sizeof w->switches);
    else
        snprintf(w->switches, sizeof w->switches, "unknown");
    *stated = *w;
    if (!(c->checks & kvv_suite_check_bit("kv")))
        stated->kv_chunk = 0;
    if (!(c->checks & kvv_suite_check_bit("invariance"))) {
        stated->n_chunks = 0;
        stated->n_threads = 1;
    }
    if (!(c->checks & (kvv_suite_check_bit("greedy") | kvv_suite_check_bit("kvdirect"))))
        stated->n_gen = 0;
    kvv_workload_check_floor(stated);
}

/* After a case's checks (outcomes first.. of res): the thread counts its
 * invariance compared (an engine without threads compares none) replace
 * those asked for in every outcome's workload, which the log then states. */
static void workload_ran(kvv_suite_results *res, int first, kvv_workload *stated,
                         const kvv_suite_run_opts *ro, const kvv_suite_case *c)
{
    const kvv_check_result *inv = NULL;
    for (int i = first; i < res->n_out && !inv; i++)
        if (strcmp(res->out[i].r.name, "invariance") == 0)
            inv = &res->out[i].r;
    if (stated->n_threads)
        stated->n_threads = kvv_invariance_threads_ran(inv, stated->threads[0], stated->threads,
                                                       KVV_WORKLOAD_MAX);
    for (int i = first; i < res->n_out; i++)
        res->out[i].workload = *stated;
    if (ro && ro->log) {
        char line[512];
        fprintf(ro->log, "workload %s: %s\n", c->name,
                kvv_workload_format(stated, line, sizeof line));
    }
}

static kvv_status vector_body(void *ctx, kvv_check_result *r, kvv_error *err)
{
    kvv_status st = run_vector(ctx, r);
    return st ? kvv_error_set(err, st, "vector: out of memory") : KVV_OK;
}

/* The vector testcase, in a child process when the case's checks would be
 * (verify/isolate.h; default limit 600 s: a vector replays a whole run). */
static kvv_status run_vector_maybe_isolated(const kvv_suite_case *c, const kvv_suite_run_opts *ro,
                                            kvv_check_result *r)
{
    kvv_check_opts o = kvv_check_opts_default();
    o.engine = kvv_suite_case_engine(c);
    o.isolate = ro ? ro->isolate : KVV_ISOLATE_OFF;
    if (!kvv_isolate_wanted(&o))
        return run_vector(c, r);
    kvv_isolate_opts io = {.timeout = ro->timeout > 0 ? ro->timeout : 600, .stop = ro->stop};
    kvv_error err = {0};
    kvv_status st = kvv_isolate_run(&io, vector_body, (void *)c, r, &err);
    return st == KVV_ERR_NOMEM ? st : KVV_OK;
}

/* The checks= part of a case, on one opened model. */
static kvv_status run_checks(const kvv_suite_case *c, int ci, const kvv_suite_run_opts *ro,
                             kvv_suite_results *res)
{
    kvv_model *m = NULL;
    kvv_error err = {0};
    kvv_status st = kvv_model_open(c->model, &m, &err);
    int32_t *toks = NULL;
    kvv_workload w, stated;
    memset(&w, 0, sizeof w);
    memset(&stated, 0, sizeof stated);
    if (!st) {
        case_workload(c, m, ro && ro->quick, ro, &w, &stated);
        toks = malloc(sizeof(int32_t) * (size_t)w.n_prompt);
        if (!toks)
            st = kvv_error_set(&err, KVV_ERR_NOMEM, "out of memory");
        else
            kvv_prompt_random(c->seed, m->hp.n_vocab, -1, toks, w.n_prompt);
    }
    int first = res->n_out; /* the case's outcomes: its workload, as it ran, after them */
    int n_table;
    const kvv_check_entry *table = kvv_audit_checks(&n_table);
    for (int k = 0; k < n_table; k++) {
        if (!(c->checks & (1u << k)))
            continue;
        kvv_check_result *r = new_outcome(res, ci, table[k].name);
        if (!r) {
            st = KVV_ERR_NOMEM;
            break;
        }
        res->out[res->n_out - 1].workload = stated; /* not set when the model did not open */
        if (st) {
            /* the model did not open: every requested check reports why */
            kvv_check_set_error(r, &err);
        } else {
            kvv_check_opts o = kvv_check_opts_default();
            o.model = m;
            o.engine = kvv_suite_case_engine(c);
            o.tokens = toks;
            o.n_tokens = w.n_prompt;
            o.n_gen = w.n_gen;
            o.chunk = w.kv_chunk;
            o.chunks = w.n_chunks ? w.chunks : NULL;
            o.n_chunks = w.n_chunks;
            o.seed = c->seed;
            o.force_fail = c->force_fail;
            if (ro) {
                o.progress = ro->progress;
                o.progress_user = ro->progress_user;
                o.isolate = ro->isolate;
                o.timeout = ro->timeout;
                o.stop = ro->stop;
            }
            kvv_error e2 = {0};
            double t0 = kvv_now_seconds();
            /* in a child process when isolating (verify/isolate.h) */
            kvv_status cs = kvv_isolate_check(&o, table[k].run, r, &e2);
            if (ro && ro->stop && *ro->stop)
                break; /* interrupted: the caller drops this case */
            if (r->seconds <= 0)
                r->seconds = kvv_now_seconds() - t0;
            if (cs == KVV_ERR_NOMEM) {
                st = cs;
                break;
            }
            if (cs && r->verdict != KVV_VERDICT_ERROR && r->verdict != KVV_VERDICT_SKIPPED)
                kvv_check_set_error(r, &e2);
            if (c->force_fail && r->verdict == KVV_VERDICT_FAIL) {
                /* the planted difference was found: the control passes */
                char *key = strdup(kvv_check_key_figure(r));
                kvv_check_set_verdict(r, KVV_VERDICT_PASS, "control detected: %s",
                                      key ? key : r->key_figure);
                free(key);
            } else if (c->force_fail && r->verdict == KVV_VERDICT_PASS) {
                kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "control NOT detected");
                kvv_check_set_message(r, "force-fail planted a difference the check did not find");
            }
        }
        log_outcome(ro, c, r);
    }
    if (!st)
        workload_ran(res, first, &stated, ro, c);
    free(toks);
    kvv_model_close(m);
    return st == KVV_ERR_NOMEM ? st : KVV_OK;
}

/* Drop the outcomes of case ci from the end of res (an interrupted case). */
static void drop_case(kvv_suite_results *res, int ci)
{
    while (res->n_out > 0 && res->out[res->n_out - 1].case_index == ci &&
           !res->out[res->n_out - 1].prior) {
        res->n_out--;
        kvv_check_result_free(&res->out[res->n_out].r);
    }
}

static kvv_status run_cases(const kvv_suite *s, int shard_i, int shard_n,
                            const kvv_suite_run_opts *ro, kvv_suite_results *res,
                            const bool *done, kvv_error *err);

static bool stopped(const kvv_suite_run_opts *ro)
{
    return ro && ro->stop && *ro->stop;
}

kvv_status kvv_suite_run(const kvv_suite *s, int shard_i, int shard_n,
                         const kvv_suite_run_opts *ro, kvv_suite_results *res, kvv_error *err)
{
    memset(res, 0, sizeof *res);
    res->suite = s;
    res->shard_i = shard_i;
    res->shard_n = shard_n;
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(res->started, sizeof res->started, "%Y-%m-%dT%H:%M:%SZ", &tm);
    double t0 = kvv_now_seconds();
    bool *done = calloc((size_t)s->n_cases + 1, sizeof *done);
    if (!done)
        return kvv_error_set(err, KVV_ERR_NOMEM, "suite: out of memory");
    if (ro && ro->resume) {
        kvv_status st = kvv_suite_resume_load(s, ro->resume, res, done, err);
        if (st) {
            free(done);
            return st;
        }
    }
    kvv_status st = run_cases(s, shard_i, shard_n, ro, res, done, err);
    free(done);
    res->seconds = kvv_now_seconds() - t0;
    return st;
}

/* The shard's cases not done yet, one after another. */
static kvv_status run_cases(const kvv_suite *s, int shard_i, int shard_n,
                            const kvv_suite_run_opts *ro, kvv_suite_results *res,
                            const bool *done, kvv_error *err)
{
    for (int i = 0; i < s->n_cases; i++) {
        if (!kvv_suite_in_shard(i, shard_i, shard_n))
            continue;
        if (stopped(ro)) {
            res->interrupted = true;
            return KVV_OK;
        }
        res->n_cases_run++;
        if (done[i])
            continue; /* reported by the run being resumed */
        const kvv_suite_case *c = &s->cases[i];
        FILE *probe = fopen(c->model, "rb");
        if (!probe && c->optional) {
            /* an optional model that is absent (e.g. no ../shared): skipped */
            int n_table;
            const kvv_check_entry *table = kvv_audit_checks(&n_table);
            for (int k = 0; k <= n_table; k++) {
                bool vec = k == n_table;
                if (vec ? !c->vector[0] : !(c->checks & (1u << k)))
                    continue;
                kvv_check_result *r = new_outcome(res, i, vec ? "vector" : table[k].name);
                if (!r)
                    return kvv_error_set(err, KVV_ERR_NOMEM, "suite: out of memory");
                kvv_check_set_verdict(r, KVV_VERDICT_SKIPPED, "model not present");
                kvv_check_set_message(r, "SKIP: %s not found (optional=yes)", c->model);
                log_outcome(ro, c, r);
            }
            continue;
        }
        if (probe)
            fclose(probe);
        if (c->checks && run_checks(c, i, ro, res) == KVV_ERR_NOMEM)
            return kvv_error_set(err, KVV_ERR_NOMEM, "suite: out of memory");
        if (c->vector[0] && !stopped(ro)) {
            kvv_check_result *r = new_outcome(res, i, "vector");
            if (!r || run_vector_maybe_isolated(c, ro, r) == KVV_ERR_NOMEM)
                return kvv_error_set(err, KVV_ERR_NOMEM, "suite: out of memory");
            log_outcome(ro, c, r);
        }
        if (stopped(ro)) { /* this case did not finish: not reported */
            drop_case(res, i);
            res->n_cases_run--;
            res->interrupted = true;
            return KVV_OK;
        }
        if (ro && ro->case_done)
            ro->case_done(ro->case_done_user, res);
    }
    return KVV_OK;
}

int kvv_suite_exit_code(const kvv_suite_results *res)
{
    if (res->interrupted)
        return KVV_EXIT_INTERRUPTED;
    int n[4] = {0, 0, 0, 0};
    for (int i = 0; i < res->n_out; i++)
        n[res->out[i].r.verdict]++;
    if (n[KVV_VERDICT_FAIL])
        return KVV_EXIT_FAIL;
    if (n[KVV_VERDICT_ERROR])
        return KVV_EXIT_BAD_INPUT;
    if (!n[KVV_VERDICT_PASS])
        return KVV_EXIT_NOTHING;
    return KVV_EXIT_PASS;
}
