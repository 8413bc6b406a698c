/* check_cli.c — shared options and run path of the check commands (see
 * check_cli.h). */
#include "cli/check_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/interrupt.h"
#include "engine/cpu/cpu_isa.h"
#include "common/sha256.h"
#include "verify/audit.h"
#include "verify/invariance.h"
#include "verify/isolate.h"
#include "verify/parallel.h"
#include "verify/report/report.h"

void kvv_check_cli_init(kvv_check_cli *c, const char *cmd)
{
    memset(c, 0, sizeof *c);
    c->cmd = cmd;
    c->accepts = KVV_CHECK_OPT_ALL;
    kvv_engine_cli_init(&c->engine, cmd, "ref", KVV_ENGINE_OPT_ALL);
    kvv_prompt_cli_init(&c->prompt, cmd);
    kvv_output_cli_init(&c->out, cmd,
                        KVV_OUT_JSON | KVV_OUT_JUNIT | KVV_OUT_HTML | KVV_OUT_QUIET |
                            KVV_OUT_PROGRESS);
    c->out.html_help = "a self-contained HTML report with every check's figures";
    c->out.json_help = "the JSON report (docs/report-schema.md)";
    c->out.quiet_help = "print only the summary table and failures";
    c->controls = true;
}

void kvv_check_cli_free(kvv_check_cli *c)
{
    if (!c)
        return;
    kvv_prompt_cli_free(&c->prompt);
}

/* MODEL and the controls; a control option the command does not take is
 * "not used by CMD". */
static bool parse(void *state, kvv_opts *o)
{
    kvv_check_cli *c = state;
    if (kvv_opts_positional(o)) {
        if (c->model_path)
            kvv_opts_unknown(o);
        else
            c->model_path = o->arg;
        return true;
    }
    unsigned need;
    if (!(c->accepts & KVV_CHECK_OPT_PROMPT) &&
        (kvv_opts_value(o, "-p") || kvv_opts_value(o, "--prompt") ||
         kvv_opts_value(o, "--tokens") || kvv_opts_value(o, "--random"))) {
        /* a prompt the command would not use is refused, not ignored */
        need = KVV_CHECK_OPT_PROMPT;
    } else if (kvv_opts_flag(o, "--no-controls")) {
        c->controls = false;
        need = KVV_CHECK_OPT_CONTROLS;
    } else if (kvv_opts_flag(o, "--force-fail")) {
        c->force_fail = true;
        need = KVV_CHECK_OPT_CONTROLS;
    } else if (kvv_opts_flag(o, "--layers")) {
        c->layers = true;
        need = KVV_CHECK_OPT_LAYERS;
    } else if (kvv_opts_flag(o, "--quick")) {
        c->quick = true;
        need = KVV_CHECK_OPT_QUICK;
    } else if (kvv_opts_flag(o, "--isolate")) {
        c->isolate = 1;
        need = KVV_CHECK_OPT_ISOLATE;
    } else if (kvv_opts_flag(o, "--no-isolate")) {
        c->isolate = 2;
        need = KVV_CHECK_OPT_ISOLATE;
    } else if (kvv_opts_value(o, "--timeout")) {
        double t;
        if (o->value && kvv_opts_double(o, "--timeout", o->value, &t)) {
            if (!(t > 0) || t > 1e7)
                kvv_opts_error(o, "option --timeout: %s is not a number of seconds in (0, 1e7]",
                               o->value);
            c->timeout = t;
        }
        need = KVV_CHECK_OPT_ISOLATE;
    } else if (kvv_opts_value(o, "--jobs")) {
        if (o->value)
            kvv_opts_int(o, "--jobs", o->value, 1, 256, &c->jobs);
        need = KVV_CHECK_OPT_JOBS;
    } else {
        return false;
    }
    if (!(c->accepts & need)) {
        size_t n = strcspn(o->arg, "="); /* the option as given, without =VALUE */
        kvv_opts_error(o, "option %.*s: not used by %s", (int)n, o->arg, c->cmd);
    }
    return true;
}

int kvv_check_cli_parse(kvv_check_cli *c, int argc, char **argv, void (*help)(FILE *f),
                        const kvv_opt_group *own)
{
    kvv_opts o;
    kvv_opts_init(&o, c->cmd, argc, argv);
    kvv_opt_group g[5] = {{parse, NULL, c}, kvv_engine_cli_group(&c->engine),
                          kvv_prompt_cli_group(&c->prompt), kvv_output_cli_group(&c->out)};
    int n = 4;
    if (own)
        g[n++] = *own;
    int code = kvv_opts_parse(&o, help, g, n);
    if (code != KVV_OPTS_RUN)
        kvv_check_cli_free(c);
    return code;
}

void kvv_check_cli_help(FILE *f, const kvv_check_cli *c)
{
    kvv_check_cli def;
    if (!c) {
        kvv_check_cli_init(&def, "CMD");
        c = &def;
    }
    kvv_engine_cli_help(f, &c->engine, true);
    if (c->accepts & KVV_CHECK_OPT_PROMPT)
        kvv_prompt_cli_help(f, "random tokens sized to the model");
    else
        fprintf(f, "seed (-p, --tokens and --random are not used by %s):\n"
                   "  --seed N            seed of its pseudo-random data (default 1)\n",
                c->cmd);
    fprintf(f, "%s:\n", c->accepts & KVV_CHECK_OPT_CONTROLS ? "controls and output" : "output");
    if (c->accepts & KVV_CHECK_OPT_CONTROLS)
        fprintf(f, "  --no-controls       skip the negative controls (on by default); every\n"
                "                      passing check is then reported unproven, never passed\n"
                "  --force-fail        plant each check's control into the real comparison so\n"
                "                      the check must FAIL (exit 1); for testing pipelines\n");
    if (c->accepts & KVV_CHECK_OPT_QUICK)
        fprintf(f, "  --quick             the default workload sized to a time budget alone,\n"
                   "                      below the floor (every report says so)\n");
    if (c->accepts & KVV_CHECK_OPT_JOBS)
        fprintf(f, "  --jobs N            independent runs at a time: checks, cache-free steps,\n"
                   "                      evict's decodes (default: processors online / --threads;\n"
                   "                      results never depend on it)\n");
    if (c->accepts & KVV_CHECK_OPT_ISOLATE)
        fprintf(f, "isolation (docs/isolation.md):\n"
               "  --isolate           run each check in a child process: a crash or hang of the\n"
               "                      engine fails that check (fault crash/timeout) and the run\n"
               "                      goes on (default for plugin engines)\n"
               "  --no-isolate        run the checks in this process, plugins too\n"
               "  --timeout SECONDS   an isolated check's time limit (implies --isolate; default\n"
               "                      120 s + 1 s per 1e7 multiply-adds of the workload)\n");
    kvv_output_cli_help(f, &c->out);
    if (c->accepts & KVV_CHECK_OPT_LAYERS)
        fprintf(f, "  --layers            print the per-layer tables\n");
    if (c->exit_codes)
        fprintf(f, "%s", c->exit_codes);
    else if (c->accepts & KVV_CHECK_OPT_CONTROLS)
        fprintf(f, "exit codes: 0 every check that could run passed (a check the engine cannot\n"
                "run is listed as unsupported, never passed), 1 a check failed (or a control\n"
                "was not detected), 2 bad input or usage, 77 nothing could be checked,\n"
                "130 interrupted: SIGINT/SIGTERM stops the run (an isolated check at once),\n"
                "and the reports are written with what finished, marked interrupted.\n");
}

/* The library's message without its "check: " (the command's name replaces it). */
static const char *own_message(const kvv_error *err)
{
    const char *prefix = "check: ";
    return strncmp(err->msg, prefix, strlen(prefix)) ? err->msg : err->msg + strlen(prefix);
}

/* What every check would refuse, refused before any runs: prompt tokens
 * outside the vocabulary. @return 0 or 2. */
static int validate(const kvv_check_cli *c, const kvv_check_opts *o)
{
    kvv_error err = {0};
    if (kvv_check_opts_validate(o, o->n_tokens, &err)) {
        fprintf(stderr, "kvverify %s: prompt: %s\n", c->cmd, own_message(&err));
        return KVV_EXIT_BAD_INPUT;
    }
    return 0;
}

int kvv_check_cli_steps(const kvv_check_cli *c, kvv_check_run *run, long n_gen)
{
    kvv_check_opts *o = &run->opts;
    kvv_error err = {0};
    o->n_gen = (int)n_gen;
    if (kvv_check_opts_validate(o, o->n_tokens + o->n_gen - 1, &err)) {
        fprintf(stderr, "kvverify %s: option -n: %d steps after a %d-token prompt: %s\n",
                c->cmd, o->n_gen, o->n_tokens, own_message(&err));
        return KVV_EXIT_BAD_INPUT;
    }
    return 0;
}

/* Keep in the report's workload what the named checks use: kv its chunk,
 * invariance its chunkings and thread counts, the decoding checks their
 * steps; every run its prompt and the engine's threads. */
static void trim_workload(kvv_workload *w, const char *const *names, int n)
{
    if (!names)
        return; /* the whole audit uses everything */
    bool kv = false, inv = false, steps = false;
    for (int i = 0; i < n; i++) {
        kv |= strcmp(names[i], "kv") == 0;
        inv |= strcmp(names[i], "invariance") == 0;
        steps |= strcmp(names[i], "greedy") == 0 || strcmp(names[i], "kvdirect") == 0 ||
                 strcmp(names[i], "evict") == 0 || strcmp(names[i], "memory") == 0;
    }
    if (!kv)
        w->kv_chunk = 0;
    if (!inv) {
        w->n_chunks = 0;
        w->n_threads = w->n_threads ? 1 : 0;
    }
    if (!steps)
        w->n_gen = 0;
    kvv_workload_check_floor(w);
}

/* The workload's thread counts as they ran: the engine's, and those
 * invariance compared (none on an engine without threads, e.g. ref), not
 * the counts it was asked to try. */
static void threads_ran(kvv_report *rep)
{
    for (int i = 0; i < rep->n_checks; i++) /* batch: the requests it ran */
        if (strcmp(rep->checks[i].name, "batch") == 0) {
            const char *t = json_string_value(json_object_get(
                json_object_get(rep->checks[i].details, "workload"), "text"));
            if (t)
                snprintf(rep->workload.requests, sizeof rep->workload.requests, "%s", t);
        }
    kvv_workload *w = &rep->workload;
    if (!w->n_threads)
        return;
    const kvv_check_result *inv = NULL;
    for (int i = 0; i < rep->n_checks && !inv; i++)
        if (strcmp(rep->checks[i].name, "invariance") == 0)
            inv = &rep->checks[i];
    w->n_threads = kvv_invariance_threads_ran(inv, w->threads[0], w->threads, KVV_WORKLOAD_MAX);
}

/* The workload every report states: the sizes o runs with, the engine's
 * switches and the floor of the plan. */
static void fill_workload(kvv_workload *w, const kvv_audit_plan *plan, const kvv_check_opts *o)
{
    memset(w, 0, sizeof *w);
    w->set = true;
    w->n_prompt = o->n_tokens;
    w->n_gen = o->n_gen;
    w->kv_chunk = o->chunk;
    for (int i = 0; i < o->n_chunks && i < KVV_WORKLOAD_MAX; i++)
        w->chunks[w->n_chunks++] = o->chunks[i];
    static const int default_threads[] = {1, 2};
    const int *tc = o->thread_counts ? o->thread_counts : default_threads;
    int ntc = o->thread_counts ? o->n_thread_counts : 2;
    w->threads[w->n_threads++] = o->engine.n_threads;
    for (int i = 0; i < ntc && w->n_threads < KVV_WORKLOAD_MAX; i++) {
        bool seen = false;
        for (int j = 0; j < w->n_threads; j++)
            seen |= w->threads[j] == tc[i];
        if (!seen)
            w->threads[w->n_threads++] = tc[i];
    }
    kvv_batch_paths_list(&plan->paths, w->switches, sizeof w->switches);
    w->floor_prompt = plan->floor_prompt;
    w->floor_gen = plan->floor_gen;
    w->quick = plan->quick;
    kvv_workload_check_floor(w);
}

static int prepare(kvv_check_cli *c, kvv_check_run *run)
{
    memset(run, 0, sizeof *run);
    if (c->isolate == 2 && c->timeout > 0) {
        fprintf(stderr, "kvverify %s: option --timeout: needs isolation, and --no-isolate was "
                        "given\n", c->cmd);
        return KVV_EXIT_BAD_INPUT;
    }
    if (!c->model_path) {
        fprintf(stderr, "kvverify %s: missing MODEL (see kvverify %s --help)\n", c->cmd, c->cmd);
        return KVV_EXIT_BAD_INPUT;
    }
    kvv_engine_opts eo = kvv_engine_cli_opts(&c->engine);
    kvv_error err = {0};
    if (kvv_model_open(c->model_path, &run->model, &err)) {
        int code = kvv_cli_fail(&err);
        if (code == KVV_EXIT_NOTHING)
            fprintf(stderr, "kvverify %s: nothing could be checked\n", c->cmd);
        return code;
    }
    const kvv_model *m = run->model;
    kvv_audit_plan plan; /* the floor needs the engine's kernel switches: ask it */
    /* isolated checks: the engine is opened in a child here too (an engine
     * initialised in this process would be inherited half-alive by every
     * check's child: device threads do not survive fork) */
    bool isolated = c->isolate != 2 && (c->isolate == 1 || c->timeout > 0 ||
                                         !kvv_engine_name_concurrent(eo.name));
    if (isolated ? kvv_isolate_plan_engine(m, &eo, c->quick, c->timeout > 0 ? c->timeout : 300,
                                           &plan, &err)
                 : kvv_audit_plan_engine(m, &eo, c->quick, &plan, &err))
        return kvv_cli_fail(&err);
    run->n_default_prompt = plan.n_prompt;
    run->n_default_gen = plan.n_gen;
    const char *source = "random";
    int code = kvv_prompt_cli_make(&c->prompt, m, plan.n_prompt, &run->prompt, &run->n_prompt,
                                   &source);
    if (code)
        return code;

    kvv_check_opts *o = &run->opts;
    *o = kvv_check_opts_default();
    o->model = m;
    o->engine = eo;
    o->tokens = run->prompt;
    o->n_tokens = run->n_prompt;
    o->n_gen = plan.n_gen;
    o->chunk = kvv_audit_kv_chunk(&plan, run->n_prompt);
    run->n_chunks = kvv_audit_chunks(&plan, run->n_prompt, run->chunks, KVV_AUDIT_MAX_CHUNKS);
    o->chunks = run->chunks;
    o->n_chunks = run->n_chunks;
    o->controls = c->controls;
    o->force_fail = c->force_fail;
    o->seed = c->prompt.seed;
    o->progress = kvv_output_progress;
    o->progress_user = &c->out;
    o->isolate = c->isolate == 2 ? KVV_ISOLATE_OFF
                 : c->isolate == 1 || c->timeout > 0 ? KVV_ISOLATE_ON
                                                     : KVV_ISOLATE_AUTO;
    o->timeout = c->timeout;
    o->stop = kvv_interrupt_flag(); /* caught while the checks run (cli/interrupt.h) */
    int per = eo.n_threads > 0 ? eo.n_threads : 1;
    o->n_jobs = c->jobs > 0 ? (int)c->jobs
                            : (kvv_parallel_cpus() / per > 1 ? kvv_parallel_cpus() / per : 1);
    if ((code = validate(c, o)) || (c->own_opts && (code = c->own_opts(c->own_user, run))))
        return code;

    kvv_report *rep = &run->report;
    kvv_report_init(rep, c->model_path, c->prompt.seed);
    snprintf(rep->architecture, sizeof rep->architecture, "%s", m->hp.arch_name);
    snprintf(rep->prompt_source, sizeof rep->prompt_source, "%s", source);
    rep->n_prompt = run->n_prompt;
    rep->controls_off = !c->controls; /* every PASS is then unproven */
    fill_workload(&rep->workload, &plan, o);
    if (strcmp(c->cmd, "audit") != 0) /* a single check's command: what that check uses */
        trim_workload(&rep->workload, &c->cmd, 1);
    if (kvv_sha256_file(c->model_path, rep->model_sha256, &err))
        return kvv_cli_fail(&err);
    return 0;
}

static void run_free(kvv_check_run *run)
{
    kvv_report_free(&run->report);
    free(run->prompt);
    kvv_model_close(run->model);
    memset(run, 0, sizeof *run);
}

int kvv_check_cli_prepare(kvv_check_cli *c, kvv_check_run *run)
{
    int code = prepare(c, run);
    if (code) {
        run_free(run);
        kvv_check_cli_free(c);
    }
    return code;
}

kvv_status kvv_check_cli_run_body(const kvv_check_run *run, double passes, kvv_isolate_fn fn,
                                  void *ctx, kvv_check_result *r, kvv_error *err)
{
    const kvv_check_opts *o = &run->opts;
    kvv_interrupt_catch(); /* until finish: the report is written, marked interrupted */
    if (!kvv_isolate_wanted(o))
        return fn(ctx, r, err);
    kvv_isolate_opts io = {.timeout = o->timeout > 0 ? o->timeout
                                                     : (passes > 1 ? passes : 1) *
                                                           kvv_isolate_default_timeout(o),
                           .stop = o->stop};
    return kvv_isolate_run(&io, fn, ctx, r, err);
}

void kvv_check_cli_close(kvv_check_cli *c, kvv_check_run *run)
{
    kvv_interrupt_release();
    run_free(run);
    kvv_check_cli_free(c);
}

void kvv_check_cli_own_workload(kvv_check_run *run, int n_prompt, int n_gen)
{
    kvv_workload *w = &run->report.workload;
    w->n_prompt = n_prompt;
    w->n_gen = n_gen;
    w->kv_chunk = 0;
    w->n_chunks = 0;
    w->floor_prompt = w->floor_gen = 0; /* not a batch-shape comparison: no floor */
    w->below_floor = false;
    w->set = n_prompt > 0 || n_gen > 0;
}

kvv_check_result *kvv_check_cli_report(kvv_check_run *run, const char *name)
{
    return kvv_report_add(&run->report, name);
}

void kvv_check_cli_print_header(const kvv_check_cli *c, kvv_check_run *run)
{
    kvv_report *rep = &run->report;
    if (!rep->has_engine) {
        const kvv_engine_opts *e = &run->opts.engine;
        kvv_engine_desc *d = &rep->engine;
        memset(d, 0, sizeof *d);
        /* plugin:PATH is too long for the name: its file name says which
         * (the run reports the plugin's own name after it) */
        const char *slash = strrchr(e->name, '/');
        snprintf(d->name, sizeof d->name, "%s",
                 strncmp(e->name, "plugin:", 7) == 0 ? (slash ? slash + 1 : e->name + 7) : e->name);
        /* a plugin has no kvverify modes: it runs as it is ("native") */
        snprintf(d->mode, sizeof d->mode, "%s",
                 kvv_engine_is_plugin(e->name) ? "native" : kvv_mode_name(e->mode));
        snprintf(d->cache_type, sizeof d->cache_type, "%s", kvv_cache_type_name(e->cache_type));
        d->n_threads = e->n_threads;
        kvv_cpu_isa isa; /* the cpu engine's kernel table: the one it will choose */
        kvv_error ierr = {0};
        if (kvv_engine_takes(e->name, KVV_ENGINE_OPT_ISA) &&
            kvv_cpu_isa_choose(e->isa, &isa, &ierr) == KVV_OK)
            snprintf(d->isa, sizeof d->isa, "%s", kvv_cpu_isa_name(isa));
        rep->has_engine = true;
        run->header_from_opts = true;
    }
    if (!c->out.quiet && !c->out.stdout_taken) {
        kvv_report_print_header(stdout, rep);
        printf("\n");
        fflush(stdout);
    }
    run->header_printed = true;
}

int kvv_check_cli_finish(kvv_check_cli *c, kvv_check_run *run)
{
    kvv_report *rep = &run->report;
    kvv_error err = {0};
    /* a signal while the checks ran: what finished, marked interrupted,
     * exit 130; a signal from here on ends the command as usual */
    rep->interrupted = run->opts.stop && *run->opts.stop;
    kvv_interrupt_release();
    kvv_report_mark_unproven(rep); /* --no-controls: no PASS reads as passed */
    if (rep->seconds == 0)
        for (int i = 0; i < rep->n_checks; i++)
            rep->seconds += rep->checks[i].seconds;
    /* The engine as the check described it (the header's was only the options). */
    bool want = !rep->has_engine || run->header_printed;
    for (int i = 0; i < rep->n_checks && want; i++)
        if (rep->checks[i].has_engine) {
            rep->engine = rep->checks[i].engine;
            rep->engine.control = 0;
            rep->has_engine = true;
            want = false;
        }
    unsigned flags = c->out.quiet ? KVV_CONSOLE_QUIET : (c->layers ? KVV_CONSOLE_LAYERS : 0);
    if (run->header_printed)
        flags |= KVV_CONSOLE_NO_HEADER;
    char id[400];
    if (run->header_from_opts && !want && kvv_engine_desc_identity(&rep->engine, id, sizeof id)[0])
        flags |= KVV_CONSOLE_ENGINE; /* what the header could not say: version, device */
    if (!c->out.stdout_taken) {
        kvv_report_print_console(stdout, rep, flags);
        fflush(stdout);
    }
    /* why a check could not run, on stderr too (stdout may be a report) */
    for (int i = 0; i < rep->n_checks; i++) {
        const kvv_check_result *r = &rep->checks[i];
        if ((r->verdict == KVV_VERDICT_ERROR && !r->interrupted) ||
            r->verdict == KVV_VERDICT_SKIPPED)
            fprintf(stderr, "kvverify %s: %s %s: %s\n", c->cmd, r->name,
                    r->verdict == KVV_VERDICT_ERROR ? "could not run" : "nothing checked",
                    r->message[0] ? r->message : r->key_figure);
    }
    int code = kvv_report_exit_code(rep);
    if (c->out.json_path && kvv_report_write_json(rep, c->out.json_path, &err))
        code = kvv_cli_fail(&err);
    if (c->out.html_path) { /* drawn from the same JSON document */
        json_t *doc = kvv_report_to_json(rep);
        kvv_status st = doc ? kvv_html_write(doc, c->out.html_path, &err)
                            : kvv_error_set(&err, KVV_ERR_NOMEM, "%s: out of memory",
                                            c->out.html_path);
        json_decref(doc);
        if (st)
            code = kvv_cli_fail(&err);
    }
    if (c->out.junit_path && kvv_report_write_junit(rep, c->out.junit_path, &err))
        code = kvv_cli_fail(&err);
    if (rep->interrupted) {
        int done = 0;
        for (int i = 0; i < rep->n_checks; i++)
            done += !rep->checks[i].interrupted;
        fprintf(stderr, "kvverify %s: interrupted: %d of %d checks finished before the "
                        "signal; the report says interrupted (exit 130)\n", c->cmd, done,
                rep->n_checks);
    }
    kvv_check_cli_close(c, run);
    return code;
}

int kvv_check_cli_run(kvv_check_cli *c, const char *const *names, int n_names)
{
    kvv_check_run run;
    int code = prepare(c, &run);
    if (code) {
        run_free(&run);
        kvv_check_cli_free(c);
        return code;
    }
    kvv_error err = {0};
    trim_workload(&run.report.workload, names, n_names);
    kvv_interrupt_catch(); /* until finish: the report is written, marked interrupted */
    if (kvv_audit_run(&run.opts, names, n_names, &run.report, &err)) {
        code = kvv_cli_fail(&err);
        kvv_check_cli_close(c, &run);
        return code;
    }
    threads_ran(&run.report);
    return kvv_check_cli_finish(c, &run);
}
