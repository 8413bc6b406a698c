/* html_trend.c — pages of several results: a suite's results (one section
 * per testcase) and a trend over nights (kvv_html_write_trend). See
 * html_impl.h. */
#include "verify/report/html_impl.h"
#include "verify/report/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *verdict_color(const char *v)
{
    return strcmp(v, "pass") == 0 ? "#2da44e" : strcmp(v, "fail") == 0 ? "#cf222e"
                                            : strcmp(v, "error") == 0 ? "#bc4c00"
                                                                      : "#8c959f";
}

static const char *suite_verdict(const json_t *doc)
{
    switch (kvv_jget_int(doc, "exit_code", 2)) {
    case 0: return "pass";
    case 1: return "fail";
    case 77: return "skipped";
    default: return "error";
    }
}

/* ------------------------------------------------------------------ suite */

static void case_context(const json_t *res, char *buf, size_t size)
{
    int n = snprintf(buf, size, "case %s: model %s, engine %s (%s), cache %s, %lld thread(s)%s%s",
                     kvv_jget_str(res, "case"), kvv_jget_str(res, "model"),
                     kvv_jget_str(res, "engine"), kvv_jget_str(res, "mode"),
                     kvv_jget_str(res, "cache_type"), kvv_jget_int(res, "threads", 1),
                     *kvv_jget_str(res, "vector") ? ", vector " : "", kvv_jget_str(res, "vector"));
    const json_t *wj = json_object_get(res, "workload");
    if (json_is_object(wj) && n > 0 && (size_t)n < size) { /* the case's sizes */
        kvv_workload w;
        char line[512];
        kvv_workload_from_json(wj, &w);
        snprintf(buf + n, size - (size_t)n, "; workload %s",
                 kvv_workload_format(&w, line, sizeof line));
    }
}

void kvv_html_suite_body(kvv_sbuf *b, const json_t *doc, const char *id_prefix)
{
    const json_t *results = json_object_get(doc, "results");
    static const char *const heads[] = {"case", "check", "verdict", "key figure", "time"};
    kvv_sbuf_str(b, "<section class=\"block\"><h2>Testcases</h2>\n");
    kvv_html_table_begin(b, NULL, heads, 5);
    size_t i;
    const json_t *res;
    json_array_foreach(results, i, res) {
        char prefix[48];
        snprintf(prefix, sizeof prefix, "%sr%zu-", id_prefix, i);
        kvv_html_summary_row(b, kvv_jget_str(res, "case"), prefix,
                             json_object_get(res, "result"));
    }
    kvv_html_table_end(b, false);
    kvv_sbuf_str(b, "</section>\n");
    json_array_foreach(results, i, res) {
        char prefix[48], ctx[2400], heading[160];
        const json_t *r = json_object_get(res, "result");
        snprintf(prefix, sizeof prefix, "%sr%zu-", id_prefix, i);
        snprintf(heading, sizeof heading, "%s / %s", kvv_jget_str(res, "case"),
                 kvv_jget_str(r, "name"));
        case_context(res, ctx, sizeof ctx);
        kvv_html_check_section(b, r, prefix, heading, ctx);
    }
}

static void suite_header(kvv_sbuf *b, const json_t *doc, const char *heading)
{
    const json_t *sum = json_object_get(doc, "summary");
    char buf[1200];
    kvv_sbuf_str(b, "<header class=\"run\">\n<h1>");
    kvv_sbuf_xml(b, heading);
    kvv_sbuf_str(b, " ");
    kvv_html_badge(b, suite_verdict(doc));
    kvv_sbuf_str(b, "</h1>\n<dl class=\"meta\">\n");
    kvv_html_meta(b, "manifest", kvv_jget_str(doc, "manifest"));
    snprintf(buf, sizeof buf, "%s, %lld case(s) run, %.3g s, started %s",
             kvv_jget_str(doc, "shard"), kvv_jget_int(doc, "cases_run", 0),
             kvv_jget_num(doc, "seconds"), *kvv_jget_str(doc, "started")
                                               ? kvv_jget_str(doc, "started")
                                               : "(not recorded)");
    kvv_html_meta(b, "shard", buf);
    snprintf(buf, sizeof buf,
             "%lld passed, %lld failed, %lld errors, %lld skipped; exit code %lld%s",
             kvv_jget_int(sum, "pass", 0), kvv_jget_int(sum, "fail", 0),
             kvv_jget_int(sum, "error", 0), kvv_jget_int(sum, "skipped", 0),
             kvv_jget_int(doc, "exit_code", -1),
             json_is_true(json_object_get(doc, "interrupted"))
                 ? " (interrupted by a signal: the unfinished case is left out)"
                 : "");
    kvv_html_meta(b, "testcases", buf);
    kvv_sbuf_str(b, "</dl>\n</header>\n");
}

void kvv_html_suite_page(kvv_sbuf *b, const json_t *doc)
{
    char title[1200];
    snprintf(title, sizeof title, "kvverify suite — %s — %s", kvv_jget_str(doc, "manifest"),
             suite_verdict(doc));
    kvv_html_begin(b, title);
    suite_header(b, doc, "kvverify suite");
    kvv_html_suite_body(b, doc, "");
    kvv_html_end(b);
}

/* ------------------------------------------------------------------ trend */

#define MAX_KEYS 256

/* One check across the nights: its key and its object in each night. */
typedef struct {
    char key[160];
    const json_t **at;        /* [n nights], NULL where the night lacks it */
} series;

typedef struct {
    const json_t *const *docs;
    const char *const *labels;
    int n;
    int *order;               /* nights in time order: indices into docs */
    bool suite;
    series *s;
    int ns;
} trend;

static const json_t *check_of(const trend *t, const json_t *item)
{
    return t->suite ? json_object_get(item, "result") : item;
}

static void key_of(const trend *t, const json_t *item, char *key, size_t size)
{
    if (t->suite)
        snprintf(key, size, "%s / %s", kvv_jget_str(item, "case"),
                 kvv_jget_str(check_of(t, item), "name"));
    else
        snprintf(key, size, "%s", kvv_jget_str(item, "name"));
}

/* Collect the keys in first-seen order (latest night's order first). */
static kvv_status collect(trend *t, kvv_error *err)
{
    t->s = calloc(MAX_KEYS, sizeof *t->s);
    if (!t->s)
        return kvv_error_set(err, KVV_ERR_NOMEM, "report: out of memory");
    for (int oi = t->n - 1; oi >= 0; oi--) {
        int night = t->order[oi];
        const json_t *items = json_object_get(t->docs[night], t->suite ? "results" : "checks");
        size_t i;
        const json_t *item;
        json_array_foreach(items, i, item) {
            char key[160];
            key_of(t, item, key, sizeof key);
            int k = 0;
            while (k < t->ns && strcmp(t->s[k].key, key) != 0)
                k++;
            if (k == t->ns) {
                if (t->ns == MAX_KEYS)
                    continue;
                snprintf(t->s[k].key, sizeof t->s[k].key, "%s", key);
                t->s[k].at = calloc((size_t)t->n, sizeof *t->s[k].at);
                if (!t->s[k].at)
                    return kvv_error_set(err, KVV_ERR_NOMEM, "report: out of memory");
                t->ns++;
            }
            if (!t->s[k].at[oi])
                t->s[k].at[oi] = check_of(t, item);
        }
    }
    return KVV_OK;
}

static const char *started_of(const json_t *doc)
{
    return kvv_jget_str(doc, "started");
}

/* Time order when every night says when it started; else as given. */
static void order_nights(trend *t)
{
    bool all = true;
    for (int i = 0; i < t->n; i++) {
        t->order[i] = i;
        all &= *started_of(t->docs[i]) != 0;
    }
    if (!all)
        return;
    for (int i = 1; i < t->n; i++) /* insertion sort: stable, n is small */
        for (int j = i; j > 0 && strcmp(started_of(t->docs[t->order[j - 1]]),
                                        started_of(t->docs[t->order[j]])) > 0; j--) {
            int x = t->order[j];
            t->order[j] = t->order[j - 1];
            t->order[j - 1] = x;
        }
}

static const char *doc_verdict(const trend *t, const json_t *doc)
{
    return t->suite ? suite_verdict(doc) : kvv_jget_str(doc, "verdict");
}

static void nights_table(kvv_sbuf *b, const trend *t)
{
    kvv_sbuf_str(b, "<table><thead><tr><th>night</th><th>report</th><th>started</th>"
                    "<th>verdict</th><th>what ran</th><th>time</th></tr></thead><tbody>\n");
    for (int oi = 0; oi < t->n; oi++) {
        const json_t *doc = t->docs[t->order[oi]];
        char what[1200];
        if (t->suite) {
            snprintf(what, sizeof what, "%s, shard %s", kvv_jget_str(doc, "manifest"),
                     kvv_jget_str(doc, "shard"));
        } else {
            const json_t *m = json_object_get(doc, "model"), *e = json_object_get(doc, "engine");
            snprintf(what, sizeof what, "%s (sha256 %.12s…), engine %s %s, cache %s",
                     kvv_jget_str(m, "path"), kvv_jget_str(m, "sha256"), kvv_jget_str(e, "name"),
                     kvv_jget_str(e, "mode"), kvv_jget_str(e, "cache_type"));
        }
        kvv_sbuf_fmt(b, "<tr><td class=\"n\">%d</td><td>", oi + 1);
        kvv_sbuf_xml(b, t->labels[t->order[oi]]);
        kvv_sbuf_str(b, "</td><td>");
        kvv_sbuf_xml(b, started_of(doc));
        kvv_sbuf_str(b, "</td><td>");
        kvv_html_badge(b, doc_verdict(t, doc));
        kvv_sbuf_str(b, "</td><td>");
        kvv_sbuf_xml(b, what);
        kvv_sbuf_fmt(b, "</td><td class=\"n\">%.3g s</td></tr>\n", kvv_jget_num(doc, "seconds"));
    }
    kvv_sbuf_str(b, "</tbody></table>\n");
}

/* The grid: checks down, nights across, a cell per verdict. */
static void verdict_grid(kvv_sbuf *b, const trend *t, const char **nights)
{
    const char **keys = calloc((size_t)t->ns, sizeof *keys);
    if (!keys)
        return;
    for (int k = 0; k < t->ns; k++)
        keys[k] = t->s[t->ns - 1 - k].key; /* first key on top */
    kvv_fig f;
    kvv_fig_begin(&f, "", "trend-verdicts", "Verdict of every check, night by night",
                  "A night passes when every cell in its column is green. Hover a cell for "
                  "the check's key figure that night; an empty cell: the check did not run.");
    kvv_fig_key legend[4] = {{"pass", verdict_color("pass"), KVV_SHAPE_SQUARE, ""},
                             {"fail", verdict_color("fail"), KVV_SHAPE_SQUARE, ""},
                             {"error", verdict_color("error"), KVV_SHAPE_SQUARE, ""},
                             {"skipped", verdict_color("skipped"), KVV_SHAPE_SQUARE, ""}};
    kvv_fig_legend(&f, legend, 4);
    kvv_svg_axis x = {.label = "night (oldest to latest)", .cats = nights, .n_cats = t->n};
    kvv_svg_axis y = {.cats = keys, .n_cats = t->ns};
    kvv_svg s;
    int h = t->ns * 22 + 80;
    kvv_fig_plot(&f, &s, t->n > 8 ? 1080 : 560 + 40 * t->n, h > 600 ? 600 : h, &x, &y);
    for (int k = 0; k < t->ns; k++) {
        const series *se = &t->s[k];
        double row = t->ns - 1 - k;
        for (int oi = 0; oi < t->n; oi++) {
            const json_t *c = se->at[oi];
            if (!c)
                continue;
            const char *v = kvv_jget_str(c, "verdict");
            kvv_svg_rect(&s, oi - 0.42, row - 0.4, oi + 0.42, row + 0.4, verdict_color(v),
                         "%s, night %d (%s): %s — %s", se->key, oi + 1,
                         t->labels[t->order[oi]], v, kvv_jget_str(c, "key_figure"));
        }
    }
    kvv_fig_plot_end(&f, &s);
    kvv_fig_end(b, &f);
    free(keys);
}

/* One check's trend: elements differing (all its comparisons) and time. */
static void check_trend(kvv_sbuf *b, const trend *t, int k, const char **nights)
{
    const series *se = &t->s[k];
    char id[32], title[256];
    snprintf(id, sizeof id, "t%d-", k);
    snprintf(title, sizeof title, "%s: over the nights", se->key);
    kvv_fig f;
    kvv_fig_begin(&f, id, "trend-check", title,
                  "Left: elements that differ over all of the check's comparisons (its "
                  "report's totals; 0, the band, is bit-exact). Right: the check's wall time. "
                  "Point colour: that night's verdict.");
    kvv_sbuf_str(&f.body, "<div class=\"plots\">\n");
    for (int panel = 0; panel < 2; panel++) {
        kvv_range r;
        kvv_range_init(&r);
        double *ys = calloc((size_t)t->n, sizeof *ys), *xs = calloc((size_t)t->n, sizeof *xs);
        if (!ys || !xs) {
            free(ys);
            free(xs);
            break;
        }
        for (int oi = 0; oi < t->n; oi++) {
            const json_t *c = se->at[oi];
            const json_t *tot = json_object_get(c, "totals");
            xs[oi] = oi;
            ys[oi] = NAN;
            if (c && panel == 0 && tot && kvv_jget_int(tot, "compared", 0) > 0)
                ys[oi] = kvv_jget_num(tot, "differing");
            else if (c && panel == 1)
                ys[oi] = kvv_jget_num(c, "seconds");
            kvv_range_add(&r, ys[oi]);
        }
        kvv_svg_axis x = {.label = "night", .cats = nights, .n_cats = t->n};
        kvv_svg_axis y = {.label = panel ? "wall time" : "elements differing", .lo = 0,
                          .hi = r.any ? r.hi * 1.15 + (r.hi == 0) : 1,
                          .fmt = panel ? KVV_FMT_SECONDS : KVV_FMT_NUM};
        if (panel == 0)
            kvv_range_log_axis(&r, &y);
        kvv_svg s;
        kvv_fig_plot(&f, &s, 530, 220, &x, &y);
        kvv_svg_line(&s, xs, ys, t->n, "#8c959f", NULL);
        for (int oi = 0; oi < t->n; oi++) {
            const json_t *c = se->at[oi];
            if (!c || !isfinite(ys[oi]))
                continue;
            const char *v = kvv_jget_str(c, "verdict");
            kvv_svg_point(&s, oi, ys[oi], verdict_color(v), KVV_SHAPE_CIRCLE,
                          "night %d (%s): %s %.6g — %s", oi + 1, t->labels[t->order[oi]],
                          panel ? "seconds" : "elements differing", ys[oi],
                          kvv_jget_str(c, "key_figure"));
        }
        kvv_fig_plot_end(&f, &s);
        free(xs);
        free(ys);
    }
    kvv_sbuf_str(&f.body, "</div>\n");
    kvv_fig_end(b, &f);
}

static void trend_page(kvv_sbuf *b, trend *t)
{
    const json_t *latest = t->docs[t->order[t->n - 1]];
    char title[1200];
    const char *what = t->suite ? kvv_jget_str(latest, "manifest")
                                : kvv_jget_str(json_object_get(latest, "model"), "path");
    snprintf(title, sizeof title, "kvverify trend — %d nights — %s", t->n, what);
    kvv_html_begin(b, title);
    kvv_sbuf_str(b, "<header class=\"run\">\n<h1>kvverify trend: ");
    kvv_sbuf_fmt(b, "%d nights of ", t->n);
    kvv_sbuf_xml(b, what);
    kvv_sbuf_str(b, " ");
    kvv_html_badge(b, doc_verdict(t, latest));
    kvv_sbuf_str(b, "</h1>\n");
    nights_table(b, t);
    kvv_sbuf_str(b, "</header>\n<section class=\"block\"><h2>Trend per check</h2>\n");
    const char **nights = calloc((size_t)t->n, sizeof *nights);
    char (*nl)[32] = calloc((size_t)t->n, sizeof *nl);
    if (nights && nl) {
        for (int oi = 0; oi < t->n; oi++) {
            /* "#3 12-04 01:26" from "2026-12-04T01:26:10Z" */
            const char *st = started_of(t->docs[t->order[oi]]);
            if (strlen(st) >= 16)
                snprintf(nl[oi], sizeof nl[oi], "#%d %.5s %.5s", oi + 1, st + 5, st + 11);
            else
                snprintf(nl[oi], sizeof nl[oi], "#%d", oi + 1);
            nights[oi] = nl[oi];
        }
        verdict_grid(b, t, nights);
        for (int k = 0; k < t->ns; k++)
            check_trend(b, t, k, nights);
    }
    free(nights);
    free(nl);
    kvv_sbuf_str(b, "</section>\n<h1>The latest night in full: ");
    kvv_sbuf_xml(b, t->labels[t->order[t->n - 1]]);
    kvv_sbuf_str(b, "</h1>\n");
    if (t->suite) {
        suite_header(b, latest, "latest suite run");
        kvv_html_suite_body(b, latest, "latest-");
    } else {
        kvv_html_report_header(b, latest, "latest report");
        kvv_html_report_body(b, latest, "latest-");
    }
    kvv_html_end(b);
}

kvv_status kvv_html_write_trend(const json_t *const *docs, const char *const *labels, int n,
                                const char *path, kvv_error *err)
{
    if (n < 2)
        return kvv_error_set(err, KVV_ERR_USAGE, "report: a trend needs at least 2 reports");
    const char *kind0 = kvv_html_doc_kind(docs[0]);
    for (int i = 0; i < n; i++) {
        const char *k = kvv_html_doc_kind(docs[i]);
        if (!k || strcmp(k, "numerics") == 0)
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "%s: a trend is of check reports or suite results, not %s",
                                 labels[i], k ? "a numerics report" : "this document");
        if (strcmp(k, kind0) != 0)
            return kvv_error_set(err, KVV_ERR_USAGE, "%s: a %s, but %s is a %s", labels[i], k,
                                 labels[0], kind0);
    }
    trend t = {.docs = docs, .labels = labels, .n = n, .suite = strcmp(kind0, "suite") == 0};
    t.order = calloc((size_t)n, sizeof *t.order);
    kvv_status st = t.order ? KVV_OK : kvv_error_set(err, KVV_ERR_NOMEM, "report: out of memory");
    kvv_sbuf b = {0};
    if (!st) {
        order_nights(&t);
        st = collect(&t, err);
    }
    if (!st) {
        trend_page(&b, &t);
        st = kvv_sbuf_write_file(&b, path, err); /* "-": stdout */
    }
    kvv_sbuf_free(&b);
    for (int k = 0; k < t.ns; k++)
        free(t.s[k].at);
    free(t.s);
    free(t.order);
    return st;
}
