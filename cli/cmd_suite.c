/*
 * cmd_suite.c — `kvverify suite MANIFEST [--shard I/N] [--junit [FILE|-]]
 * [--json [FILE|-]] [--html [FILE|-]] [--list] [--quick] [--quiet]`: run a
 * nightly manifest (verify/suite/suite.h, docs/nightly.md), or a deterministic 1/N
 * share of it.
 *
 * Exit codes: 0 every testcase of the shard passed; 1 one failed; 2 bad
 * manifest or usage, or a case could not run; 77 nothing ran (empty shard,
 * everything skipped).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/interrupt.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "verify/isolate.h"
#include "verify/suite/suite.h"

static void suite_output(kvv_output_cli *out)
{
    kvv_output_cli_init(out, "suite",
                        KVV_OUT_JSON | KVV_OUT_JUNIT | KVV_OUT_HTML | KVV_OUT_QUIET | KVV_OUT_PROGRESS);
    out->json_help = "the results (every check's full report object)";
    out->quiet_help = "no per-testcase lines, only the summary";
}

static void usage(FILE *f)
{
    kvv_output_cli out;
    suite_output(&out);
    fprintf(f, "usage: kvverify suite MANIFEST [--shard I/N] [--junit [FILE|-]] [--json [FILE|-]]\n"
            "                      [--html [FILE|-]] [--list] [--quick] [-q]\n\n"
            "Run every case of MANIFEST (model, engine, mode, cache type, checks or a golden\n"
            "vector; syntax in docs/nightly.md). A case without tokens= / n= runs the audit's\n"
            "floor for its engine (at least 16 prompt tokens and twice its largest kernel\n"
            "switch, 32 greedy steps); every case's workload is stated in every report.\n\n"
            "  --shard I/N         run only cases whose 0-based index i has i %% N == I-1, so\n"
            "                      N machines (a CI matrix, a Slurm array) together run each\n"
            "                      case once\n"
            "  --list              print the shard's cases and exit\n"
            "  --quick             cases without tokens= / n= run 16 tokens and 16 steps,\n"
            "                      below the floor (every workload says QUICK)\n");
    kvv_output_cli_help(f, &out);
    fprintf(f, "(JUnit: one testcase per check; shards merge by concatenating their <testsuite>\n"
            "elements. The reports are rewritten after every case, atomically.)\n\n"
            "isolation and interruption (docs/isolation.md):\n"
            "  --isolate           run every check in a child process (default for plugin\n"
            "                      engines): a crash or hang fails that check, the suite goes on\n"
            "  --no-isolate        run every check in this process\n"
            "  --timeout SECONDS   an isolated check's time limit (implies --isolate; default\n"
            "                      120 s + 1 s per 1e7 multiply-adds of the case's workload)\n"
            "  --resume            with --json FILE: keep the results FILE already holds and run\n"
            "                      only the cases it lacks (after an interrupted run)\n"
            "SIGINT or SIGTERM: the finished cases' reports are written and the exit code is 130.\n\n"
            "exit codes: 0 all passed, 1 a check failed (or an engine crashed, hung or broke its\n"
            "contract), 2 bad manifest/usage or a case could not run, 77 nothing ran, 130\n"
            "interrupted.\n");
}

/* suite's own options. */
typedef struct {
    const char *manifest;
    int si, sn;
    bool list, quick;
    int isolate;       /* 0 default (plugins), 1 --isolate, 2 --no-isolate */
    double timeout;
    bool resume;
} suite_args;

static bool own_option(void *state, kvv_opts *o)
{
    suite_args *a = state;
    if (kvv_opts_value(o, "--shard")) {
        if (o->value && !kvv_suite_parse_shard(o->value, &a->si, &a->sn))
            kvv_opts_error(o, "option --shard: '%s' is not I/N with 1 <= I <= N", o->value);
    } else if (kvv_opts_flag(o, "--list")) {
        a->list = true;
    } else if (kvv_opts_flag(o, "--quick")) {
        a->quick = true;
    } else if (kvv_opts_flag(o, "--isolate")) {
        a->isolate = 1;
    } else if (kvv_opts_flag(o, "--no-isolate")) {
        a->isolate = 2;
    } else if (kvv_opts_flag(o, "--resume")) {
        a->resume = true;
    } else if (kvv_opts_value(o, "--timeout")) {
        if (o->value && kvv_opts_double(o, "--timeout", o->value, &a->timeout) &&
            (!(a->timeout > 0) || a->timeout > 1e7))
            kvv_opts_error(o, "option --timeout: %s is not a number of seconds in (0, 1e7]",
                           o->value);
    } else if (kvv_opts_positional(o) && !a->manifest) {
        a->manifest = o->arg;
    } else {
        return false;
    }
    return true;
}

static void own_finish(void *state, kvv_opts *o)
{
    const suite_args *a = state;
    if (!a->manifest)
        kvv_opts_error(o, "needs a MANIFEST");
    else if (a->isolate == 2 && a->timeout > 0)
        kvv_opts_error(o, "option --timeout: needs isolation, and --no-isolate was given");
}

/* --junit, --json and --html of the results so far. @return 0 or the exit
 * code of a failed write (message printed). */
static int write_reports(const kvv_output_cli *out, const kvv_suite_results *res)
{
    kvv_error err = {0};
    int rc = 0;
    if (out->junit_path && kvv_suite_write_junit(res, out->junit_path, &err))
        rc = kvv_cli_fail(&err);
    if (out->json_path && kvv_suite_write_json(res, out->json_path, &err))
        rc = kvv_cli_fail(&err);
    if (out->html_path) { /* drawn from the same JSON document */
        json_t *doc = kvv_suite_results_to_json(res);
        kvv_status st = doc ? kvv_html_write(doc, out->html_path, &err)
                            : kvv_error_set(&err, KVV_ERR_NOMEM, "suite: out of memory");
        json_decref(doc);
        if (st)
            rc = kvv_cli_fail(&err);
    }
    return rc;
}

/* After each case: the reports so far (files only; "-" is written once, at the end). */
static void case_done(void *user, const struct kvv_suite_results *res)
{
    kvv_output_cli out = *(const kvv_output_cli *)user;
    if (out.junit_path && strcmp(out.junit_path, "-") == 0)
        out.junit_path = NULL;
    if (out.json_path && strcmp(out.json_path, "-") == 0)
        out.json_path = NULL;
    if (out.html_path && strcmp(out.html_path, "-") == 0)
        out.html_path = NULL;
    write_reports(&out, res);
}

int kvv_cmd_suite(int argc, char **argv)
{
    kvv_opts o;
    kvv_opts_init(&o, "suite", argc, argv);
    kvv_output_cli out;
    suite_output(&out);
    suite_args a = {.si = 1, .sn = 1};
    const kvv_opt_group g[] = {kvv_output_cli_group(&out), {own_option, own_finish, &a}};
    int code = kvv_opts_parse(&o, usage, g, 2);
    if (code != KVV_OPTS_RUN)
        return code;
    if (a.resume && (!out.json_path || strcmp(out.json_path, "-") == 0)) {
        fprintf(stderr, "kvverify suite: option --resume: needs --json FILE (the report of the "
                        "run to resume)\n");
        return KVV_EXIT_BAD_INPUT;
    }
    const char *manifest = a.manifest;
    const int si = a.si, sn = a.sn;
    const bool quiet = out.quiet, list = a.list;
    kvv_error err = {0};
    kvv_suite *s = NULL;
    if (kvv_suite_load(manifest, &s, &err))
        return kvv_cli_fail(&err);
    if (list) {
        for (int i = 0; i < s->n_cases; i++)
            if (kvv_suite_in_shard(i, si, sn))
                printf("%d %s\n", i, s->cases[i].name);
        kvv_suite_free(s);
        return 0;
    }
    kvv_suite_results res;
    kvv_suite_run_opts ro = {
        .log = quiet || out.stdout_taken ? NULL : stdout,
        .progress = kvv_output_progress,
        .progress_user = &out,
        .quick = a.quick,
        .isolate = a.isolate == 2 ? KVV_ISOLATE_OFF
                   : a.isolate == 1 || a.timeout > 0 ? KVV_ISOLATE_ON : KVV_ISOLATE_AUTO,
        .timeout = a.timeout,
        .stop = kvv_interrupt_flag(), /* SIGINT, SIGTERM: cli/interrupt.h */
        .case_done = case_done,
        .case_done_user = &out,
        .resume = a.resume ? out.json_path : NULL,
    };
    kvv_interrupt_catch();
    kvv_status st = kvv_suite_run(s, si, sn, &ro, &res, &err);
    kvv_interrupt_release();
    if (st) {
        kvv_suite_results_free(&res);
        kvv_suite_free(s);
        return kvv_cli_fail(&err);
    }
    int rc = kvv_suite_exit_code(&res);
    int n[4] = {0, 0, 0, 0};
    for (int i = 0; i < res.n_out; i++)
        n[res.out[i].r.verdict]++;
    if (!out.stdout_taken)
        printf("suite %s shard %d/%d: %d cases, %d testcases: %d passed, %d failed, %d errors, "
               "%d skipped (%.2f s)\n", manifest, si, sn, res.n_cases_run, res.n_out, n[0], n[1],
               n[2], n[3], res.seconds);
    int nf[3] = {0, 0, 0};
    for (int i = 0; i < res.n_out; i++) {
        nf[0] += strcmp(res.out[i].r.fault, "crash") == 0;
        nf[1] += strcmp(res.out[i].r.fault, "timeout") == 0;
        nf[2] += strcmp(res.out[i].r.fault, "contract") == 0;
    }
    if (!out.stdout_taken && nf[0] + nf[1] + nf[2])
        printf("engine faults among the failures: %d crashed, %d timed out, %d broke the "
               "contract\n", nf[0], nf[1], nf[2]);
    int wrc = write_reports(&out, &res);
    if (wrc)
        rc = wrc;
    if (res.interrupted) {
        fprintf(stderr, "kvverify suite: interrupted: the reports hold the %d finished "
                        "testcases; run again with --resume --json FILE to complete them\n",
                res.n_out);
        rc = KVV_EXIT_INTERRUPTED;
    }
    kvv_suite_results_free(&res);
    kvv_suite_free(s);
    return rc;
}
