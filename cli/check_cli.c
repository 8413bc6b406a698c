/* check_cli.c — shared options and run path of the check commands (see
 * check_cli.h). */
#include "cli/check_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/sha256.h"
#include "verify/audit.h"
#include "verify/report/report.h"

void kvv_check_cli_init(kvv_check_cli *c, const char *cmd)
{
    memset(c, 0, sizeof *c);
    c->cmd = cmd;
    c->accepts = KVV_CHECK_OPT_ALL;
    kvv_engine_cli_init(&c->engine, cmd, "ref", KVV_ENGINE_OPT_ALL);
    kvv_prompt_cli_init(&c->prompt, cmd);
    kvv_output_cli_init(&c->out, cmd, KVV_OUT_JSON_FILE | KVV_OUT_JUNIT | KVV_OUT_QUIET);
    c->out.json_help = "the JSON report (docs/report-schema.md)";
    c->out.quiet_help = "print only the summary table and failures";
    c->controls = true;
}

void kvv_check_cli_free(kvv_check_cli *c)
{
    if (!c)
        return;
    kvv_prompt_cli_free(&c->prompt);
    free(c->tokens_b);
    free(c->thread_counts);
    c->tokens_b = NULL;
    c->thread_counts = NULL;
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
    if (kvv_opts_flag(o, "--no-controls")) {
        c->controls = false;
        need = KVV_CHECK_OPT_CONTROLS;
    } else if (kvv_opts_flag(o, "--force-fail")) {
        c->force_fail = true;
        need = KVV_CHECK_OPT_CONTROLS;
    } else if (kvv_opts_flag(o, "--layers")) {
        c->layers = true;
        need = KVV_CHECK_OPT_LAYERS;
    } else {
        return false;
    }
    if (!(c->accepts & need))
        kvv_opts_error(o, "option %s: not used by %s", o->arg, c->cmd);
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
    kvv_prompt_cli_help(f, "random tokens sized to the model");
    fprintf(f, "%s:\n", c->accepts & KVV_CHECK_OPT_CONTROLS ? "controls and output" : "output");
    if (c->accepts & KVV_CHECK_OPT_CONTROLS)
        fprintf(f, "  --no-controls       skip the negative controls (on by default)\n"
                "  --force-fail        plant each check's control into the real comparison so\n"
                "                      the check must FAIL (exit 1); for testing pipelines\n");
    kvv_output_cli_help(f, &c->out);
    if (c->accepts & KVV_CHECK_OPT_LAYERS)
        fprintf(f, "  --layers            print the per-layer tables\n");
    if (c->accepts & KVV_CHECK_OPT_CONTROLS)
        fprintf(f, "exit codes: 0 every check that could run passed (a check the engine cannot\n"
                "run is listed as unsupported, never passed), 1 a check failed (or a control\n"
                "was not detected), 2 bad input or usage, 77 nothing could be checked.\n");
}

static void progress(void *user, const char *label, long done, long total)
{
    (void)user;
    kvv_progress(label, done, total);
}

static int prepare(kvv_check_cli *c, kvv_check_run *run)
{
    memset(run, 0, sizeof *run);
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
    kvv_audit_plan plan;
    kvv_audit_plan_for(&m->hp, 0, &plan);
    run->n_default_prompt = plan.n_prompt;
    run->n_default_gen = plan.n_gen;
    const char *source = "random";
    int code = kvv_prompt_cli_make(&c->prompt, m, plan.n_prompt, &run->prompt, &run->n_prompt,
                                   &source);
    if (code)
        return code;
    if (c->tokens_b && c->n_tokens_b != run->n_prompt) {
        fprintf(stderr, "kvverify %s: option --tokens-b: %d tokens, but the prompt has %d\n",
                c->cmd, c->n_tokens_b, run->n_prompt);
        return KVV_EXIT_BAD_INPUT;
    }

    kvv_check_opts *o = &run->opts;
    *o = kvv_check_opts_default();
    o->model = m;
    o->engine = eo;
    o->tokens = run->prompt;
    o->n_tokens = run->n_prompt;
    o->tokens_b = c->tokens_b;
    o->n_gen = c->n_gen > 0 ? (int)c->n_gen : plan.n_gen;
    o->chunk = (int)c->chunk;
    o->thread_counts = c->thread_counts;
    o->n_thread_counts = c->n_thread_counts;
    o->controls = c->controls;
    o->force_fail = c->force_fail;
    o->seed = c->prompt.seed;
    o->progress = progress;

    kvv_report *rep = &run->report;
    kvv_report_init(rep, c->model_path, c->prompt.seed);
    snprintf(rep->architecture, sizeof rep->architecture, "%s", m->hp.arch_name);
    snprintf(rep->prompt_source, sizeof rep->prompt_source, "%s", source);
    rep->n_prompt = run->n_prompt;
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

void kvv_check_cli_close(kvv_check_cli *c, kvv_check_run *run)
{
    run_free(run);
    kvv_check_cli_free(c);
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
        snprintf(d->name, sizeof d->name, "%s", e->name);
        snprintf(d->mode, sizeof d->mode, "%s", kvv_mode_name(e->mode));
        snprintf(d->cache_type, sizeof d->cache_type, "%s", kvv_cache_type_name(e->cache_type));
        d->n_threads = e->n_threads;
        rep->has_engine = true;
    }
    if (!c->out.quiet) {
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
    kvv_report_print_console(stdout, rep, flags);
    fflush(stdout);
    int code = kvv_report_exit_code(rep);
    if (c->out.json_path && kvv_report_write_json(rep, c->out.json_path, &err))
        code = kvv_cli_fail(&err);
    if (c->out.junit_path && kvv_report_write_junit(rep, c->out.junit_path, &err))
        code = kvv_cli_fail(&err);
    kvv_check_cli_close(c, run);
    return code;
}

int kvv_check_cli_run(kvv_check_cli *c, const char *const *names, int n_names)
{
    kvv_check_run run;
    int code = kvv_check_cli_prepare(c, &run);
    if (code)
        return code;
    kvv_error err = {0};
    if (kvv_audit_run(&run.opts, names, n_names, &run.report, &err)) {
        code = kvv_cli_fail(&err);
        kvv_check_cli_close(c, &run);
        return code;
    }
    return kvv_check_cli_finish(c, &run);
}
