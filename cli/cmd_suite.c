/*
 * cmd_suite.c — `kvverify suite MANIFEST [--shard I/N] [--junit [FILE|-]]
 * [--json [FILE|-]] [--html [FILE|-]] [--list] [--quick] [--quiet]`: run a
 * nightly manifest (verify/suite.h, docs/nightly.md), or a deterministic 1/N
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
#include "cli/opts.h"
#include "cli/output_opts.h"
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
            "elements)\n\n"
            "exit codes: 0 all passed, 1 a check failed, 2 bad manifest/usage or a case could\n"
            "not run, 77 nothing ran.\n");
}

/* suite's own options. */
typedef struct {
    const char *manifest;
    int si, sn;
    bool list, quick;
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
    } else if (kvv_opts_positional(o) && !a->manifest) {
        a->manifest = o->arg;
    } else {
        return false;
    }
    return true;
}

static void own_finish(void *state, kvv_opts *o)
{
    if (!((suite_args *)state)->manifest)
        kvv_opts_error(o, "needs a MANIFEST");
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
    const char *manifest = a.manifest, *junit = out.junit_path, *json = out.json_path;
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
    kvv_suite_run_opts ro = {quiet || out.stdout_taken ? NULL : stdout, kvv_output_progress,
                             &out, a.quick};
    if (kvv_suite_run(s, si, sn, &ro, &res, &err)) {
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
    if (junit && kvv_suite_write_junit(&res, junit, &err))
        rc = kvv_cli_fail(&err);
    if (json && kvv_suite_write_json(&res, json, &err))
        rc = kvv_cli_fail(&err);
    if (out.html_path) { /* drawn from the same JSON document */
        json_t *doc = kvv_suite_results_to_json(&res);
        kvv_status st = doc ? kvv_html_write(doc, out.html_path, &err)
                            : kvv_error_set(&err, KVV_ERR_NOMEM, "suite: out of memory");
        json_decref(doc);
        if (st)
            rc = kvv_cli_fail(&err);
    }
    kvv_suite_results_free(&res);
    kvv_suite_free(s);
    return rc;
}
