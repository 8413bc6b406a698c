/*
 * cmd_report.c — `kvverify report FILE.json... --html OUT`: render saved
 * JSON reports (verify/report/report.h: kvv_html_write, and
 * kvv_html_write_trend for several). One file gives the page its command
 * would have written with --html; several reports of the same audit or
 * suite (nights) give one page with a trend per check, then the latest in
 * full. It prints each file's verdict and checks (unless the page takes
 * stdout: --html -).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "verify/report/report.h"

static void report_output(kvv_output_cli *out)
{
    kvv_output_cli_init(out, "report", KVV_OUT_HTML);
    out->html_help = "the page (several reports: the trend page)";
}

static void help(FILE *f)
{
    kvv_output_cli out;
    report_output(&out);
    fprintf(f, "usage: kvverify report FILE.json... [--html [OUT|-]]\n\n"
            "Render JSON reports written with --json: a check report (audit, kv, patch,\n"
            "greedy, invariance, compare, evict, memory, latency), suite results, or a\n"
            "numerics report. One FILE: the same page the command writes with --html.\n"
            "Several reports of the same audit or suite (e.g. one per night): one page\n"
            "with a trend per check (verdicts, elements differing, time; nights ordered\n"
            "by their start time), then the latest report in full. The page is\n"
            "self-contained (inline SVG and style, no script, nothing fetched). Prints\n"
            "each file's verdict and checks (not when the page goes to stdout).\n\n");
    kvv_output_cli_help(f, &out);
    fprintf(f, "\nexit codes: 0 rendered (whatever the reports' verdicts), 2 a file cannot be\n"
            "read or is not a kvverify report, or the reports are of different kinds.\n");
}

typedef struct {
    const char **files;
    int n;
} report_args;

static bool own_option(void *state, kvv_opts *o)
{
    report_args *a = state;
    if (!kvv_opts_positional(o))
        return false;
    const char **f = realloc(a->files, (size_t)(a->n + 1) * sizeof *f);
    if (!f) {
        kvv_opts_error(o, "out of memory");
        return true;
    }
    a->files = f;
    a->files[a->n++] = o->arg;
    return true;
}

static void own_finish(void *state, kvv_opts *o)
{
    if (!((report_args *)state)->n)
        kvv_opts_error(o, "needs at least one FILE.json");
}

/* Load and identify one file. @return the document, or NULL after the
 * message. */
static json_t *load(const char *path)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc) {
        if (je.line > 0)
            fprintf(stderr, "kvverify report: %s: line %d, column %d (byte %d): %s\n", path,
                    je.line, je.column, je.position, je.text);
        else
            fprintf(stderr, "kvverify report: %s\n", je.text);
        return NULL;
    }
    if (!kvv_html_doc_kind(doc)) {
        fprintf(stderr,
                "kvverify report: %s: not a kvverify report (no \"checks\" with "
                "\"schema_version\", no suite \"results\", not a numerics report)\n",
                path);
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* One line per file, then its checks. */
static void print_summary(const char *path, const json_t *doc)
{
    const char *kind = kvv_html_doc_kind(doc);
    const json_t *items = json_object_get(doc, strcmp(kind, "suite") == 0 ? "results" : "checks");
    const char *v = json_string_value(json_object_get(doc, "verdict"));
    printf("%s: %s%s%s, %zu %s\n", path, kind, v ? " " : "", v ? v : "",
           json_array_size(items), strcmp(kind, "numerics") == 0 ? "" : "checks");
    char line[512];
    kvv_workload w;
    kvv_workload_from_json(json_object_get(doc, "workload"), &w); /* a check report's */
    if (w.set)
        printf("  workload %s\n", kvv_workload_format(&w, line, sizeof line));
    size_t i;
    const json_t *it;
    const char *last_case = NULL;
    json_array_foreach(items, i, it) {
        const json_t *r = json_object_get(it, "result");
        const char *cs = json_string_value(json_object_get(it, "case"));
        kvv_workload_from_json(json_object_get(it, "workload"), &w); /* a suite case's */
        if (w.set && cs && (!last_case || strcmp(cs, last_case) != 0))
            printf("  workload %s: %s\n", cs, kvv_workload_format(&w, line, sizeof line));
        last_case = cs;
        if (!r)
            r = it;
        printf("  %-12s %-8s %s\n", json_string_value(json_object_get(r, "name")),
               json_string_value(json_object_get(r, "verdict")),
               json_string_value(json_object_get(r, "key_figure")));
    }
}

int kvv_cmd_report(int argc, char **argv)
{
    kvv_opts o;
    kvv_opts_init(&o, "report", argc, argv);
    kvv_output_cli out;
    report_output(&out);
    report_args a = {0};
    const kvv_opt_group g[] = {kvv_output_cli_group(&out), {own_option, own_finish, &a}};
    int code = kvv_opts_parse(&o, help, g, 2);
    if (code != KVV_OPTS_RUN) {
        free(a.files);
        return code;
    }
    json_t **docs = calloc((size_t)a.n, sizeof *docs);
    code = docs ? 0 : KVV_EXIT_BAD_INPUT;
    for (int i = 0; i < a.n && !code; i++)
        if (!(docs[i] = load(a.files[i])))
            code = KVV_EXIT_BAD_INPUT;
    if (!code && !out.stdout_taken)
        for (int i = 0; i < a.n; i++)
            print_summary(a.files[i], docs[i]);
    if (!code && out.html_path) {
        kvv_error err = {0};
        kvv_status st = a.n == 1 ? kvv_html_write(docs[0], out.html_path, &err)
                                 : kvv_html_write_trend((const json_t *const *)docs, a.files,
                                                        a.n, out.html_path, &err);
        if (st)
            code = kvv_cli_fail(&err);
        else if (!kvv_output_is_stdout(out.html_path))
            printf("wrote %s (%d report%s)\n", out.html_path, a.n, a.n == 1 ? "" : "s");
    }
    for (int i = 0; docs && i < a.n; i++)
        json_decref(docs[i]);
    free(docs);
    free(a.files);
    return code;
}
