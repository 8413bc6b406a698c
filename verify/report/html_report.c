/* html_report.c — a check report's body (html_impl.h): each check's
 * section (verdict, key figure, controls, per-layer table) with its figure
 * from html_checks.c / html_measures.c / html_tables.c, the summary table,
 * and which kind of document a JSON file is. */
#include "verify/report/html_impl.h"
#include "verify/report/report.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ a check */

typedef void (*fig_fn)(kvv_sbuf *b, const json_t *check, const char *id_prefix);

static const struct {
    const char *check;
    fig_fn fn;
} figures[] = {
    {"kv", kvv_html_fig_kv},           {"patch", kvv_html_fig_patch},
    {"greedy", kvv_html_fig_greedy},   {"invariance", kvv_html_fig_invariance},
    {"batch", kvv_html_fig_batch},
    {"compare", kvv_html_fig_compare}, {"kvdirect", kvv_html_fig_kvdirect},
    {"ops", kvv_html_fig_ops},
    {"evict", kvv_html_fig_evict},     {"memory", kvv_html_fig_memory},
    {"latency", kvv_html_fig_latency}, {"tables", kvv_html_fig_tables},
};

static void controls_table(kvv_sbuf *b, const json_t *check)
{
    const json_t *controls = json_object_get(check, "controls");
    if (json_is_true(json_object_get(check, "unproven")))
        kvv_sbuf_str(b, "<p class=\"msg skipped\">controls off: unproven — the run planted no "
                        "negative control (--no-controls), so nothing shows this check could "
                        "have failed.</p>\n");
    if (!json_array_size(controls))
        return;
    static const char *const heads[] = {"control", "result", "detail"};
    kvv_sbuf_str(b, "<h3>Negative controls (a planted difference the check must detect)</h3>\n");
    kvv_html_table_begin(b, NULL, heads, 3);
    size_t i;
    const json_t *c;
    json_array_foreach(controls, i, c) {
        bool det = json_is_true(json_object_get(c, "detected"));
        kvv_sbuf_str(b, "<tr><td>");
        kvv_sbuf_xml(b, kvv_jget_str(c, "name"));
        kvv_sbuf_fmt(b, "</td><td class=\"%s\">%s</td><td>", det ? "ok" : "bad",
                     det ? "detected" : "NOT DETECTED");
        kvv_sbuf_xml(b, kvv_jget_str(c, "detail"));
        kvv_sbuf_str(b, "</td></tr>\n");
    }
    kvv_html_table_end(b, false);
}

static void layers_table(kvv_sbuf *b, const json_t *layers)
{
    size_t n = json_array_size(layers);
    if (!n)
        return;
    static const char *const heads[] = {"layer", "compared", "elements", "differing",
                                        "max ULP", "NMSE", "max |Δ|", "first mismatch"};
    char summary[96];
    snprintf(summary, sizeof summary, "comparisons, row by row (%zu rows)", n);
    kvv_html_table_begin(b, summary, heads, 8);
    size_t i;
    const json_t *w;
    json_array_foreach(layers, i, w) {
        char c[8][64];
        long long l = kvv_jget_int(w, "layer", -1);
        snprintf(c[0], 64, l >= 0 ? "#%lld" : "#-", l);
        snprintf(c[1], 64, "%s", kvv_jget_str(w, "what"));
        snprintf(c[2], 64, "#%lld", kvv_jget_int(w, "compared", 0));
        snprintf(c[3], 64, "#%lld", kvv_jget_int(w, "differing", 0));
        const json_t *u = json_object_get(w, "max_ulp");
        snprintf(c[4], 64, json_is_integer(u) ? "#%lld" : "#NaN",
                 (long long)json_integer_value(u));
        snprintf(c[5], 64, "#%.4g", kvv_jget_num(w, "nmse"));
        snprintf(c[6], 64, "#%.4g", kvv_jget_num(w, "max_abs"));
        snprintf(c[7], 64, "%s", kvv_jget_str(w, "first_where"));
        const char *cells[8] = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]};
        kvv_html_table_row(b, cells, 8);
    }
    kvv_html_table_end(b, true);
}

void kvv_html_check_section(kvv_sbuf *b, const json_t *check, const char *id_prefix,
                            const char *heading, const char *context)
{
    const char *name = kvv_jget_str(check, "name");
    const char *verdict = kvv_html_check_verdict(check);
    const char *p = id_prefix ? id_prefix : "";
    kvv_sbuf_str(b, "<section class=\"check\" id=\"");
    kvv_sbuf_xml(b, p);
    kvv_sbuf_str(b, "check-");
    kvv_sbuf_xml(b, name);
    kvv_sbuf_str(b, "\" data-check=\"");
    kvv_sbuf_xml(b, name);
    kvv_sbuf_str(b, "\" data-verdict=\"");
    kvv_sbuf_xml(b, verdict);
    kvv_sbuf_str(b, "\">\n<h2>");
    kvv_sbuf_xml(b, heading ? heading : name);
    kvv_sbuf_str(b, " ");
    kvv_html_badge(b, verdict);
    kvv_sbuf_fmt(b, " <small>%.3g s</small></h2>\n", kvv_jget_num(check, "seconds"));
    if (context && *context) {
        kvv_sbuf_str(b, "<p class=\"note\">");
        kvv_sbuf_xml(b, context);
        kvv_sbuf_str(b, "</p>\n");
    }
    kvv_sbuf_str(b, "<p class=\"key\">");
    kvv_sbuf_xml(b, kvv_jget_str(check, "key_figure"));
    kvv_sbuf_str(b, "</p>\n");
    if (*kvv_jget_str(check, "message")) {
        kvv_sbuf_str(b, "<p class=\"msg ");
        kvv_sbuf_xml(b, verdict);
        kvv_sbuf_str(b, "\">");
        kvv_sbuf_xml(b, kvv_jget_str(check, "message"));
        kvv_sbuf_str(b, "</p>\n");
    }
    size_t before = b->n;
    for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++)
        if (strcmp(figures[i].check, name) == 0)
            figures[i].fn(b, check, p);
    if (b->n == before && strcmp(kvv_jget_str(check, "verdict"), "pass") != 0 &&
        strcmp(verdict, "fail") != 0)
        kvv_sbuf_str(b, "<p class=\"note\">No figure: the check did not run to the end.</p>\n");
    const json_t *fm = json_object_get(check, "first_mismatch");
    if (json_is_object(fm)) {
        kvv_sbuf_str(b, "<h3>First mismatch</h3>\n<p class=\"mono\">");
        kvv_sbuf_xml(b, kvv_jget_str(fm, "text"));
        kvv_sbuf_str(b, "</p>\n");
    }
    controls_table(b, check);
    const json_t *e = json_object_get(check, "engine");
    if (json_is_object(e)) {
        char line[256];
        kvv_html_engine_line(line, sizeof line, e);
        kvv_sbuf_str(b, "<details><summary>engine measured: ");
        kvv_sbuf_xml(b, line);
        kvv_sbuf_str(b, "</summary><dl class=\"meta\">\n");
        kvv_html_meta_object(b, e);
        kvv_sbuf_str(b, "</dl></details>\n");
    }
    layers_table(b, json_object_get(check, "layers"));
    const json_t *d = json_object_get(check, "details");
    if (json_object_size(d)) {
        kvv_sbuf_str(b, "<details><summary>details (scalar fields; arrays are in the figures "
                        "and the JSON)</summary><dl class=\"meta\">\n");
        kvv_html_meta_object(b, d);
        kvv_sbuf_str(b, "</dl></details>\n");
    }
    kvv_sbuf_str(b, "</section>\n");
}

void kvv_html_summary_row(kvv_sbuf *b, const char *lead, const char *id_prefix,
                          const json_t *check)
{
    const char *name = kvv_jget_str(check, "name");
    kvv_sbuf_str(b, "<tr>");
    if (lead) {
        kvv_sbuf_str(b, "<td>");
        kvv_sbuf_xml(b, lead);
        kvv_sbuf_str(b, "</td>");
    }
    kvv_sbuf_str(b, "<td><a href=\"#");
    kvv_sbuf_xml(b, id_prefix ? id_prefix : "");
    kvv_sbuf_str(b, "check-");
    kvv_sbuf_xml(b, name);
    kvv_sbuf_str(b, "\">");
    kvv_sbuf_xml(b, name);
    kvv_sbuf_str(b, "</a></td><td>");
    kvv_html_badge(b, kvv_html_check_verdict(check));
    kvv_sbuf_str(b, "</td><td>");
    kvv_sbuf_xml(b, kvv_jget_str(check, "key_figure"));
    kvv_sbuf_fmt(b, "</td><td class=\"n\">%.3g s</td></tr>\n", kvv_jget_num(check, "seconds"));
}

void kvv_html_check_summary(kvv_sbuf *b, const json_t *checks, const char *id_prefix)
{
    static const char *const heads[] = {"check", "verdict", "key figure", "time"};
    kvv_html_table_begin(b, NULL, heads, 4);
    size_t i;
    const json_t *c;
    json_array_foreach(checks, i, c)
        kvv_html_summary_row(b, NULL, id_prefix, c);
    kvv_html_table_end(b, false);
}

/* ------------------------------------------------------------ documents */

const char *kvv_html_doc_kind(const json_t *doc)
{
    if (!json_is_object(doc))
        return NULL;
    if (json_is_array(json_object_get(doc, "checks")) && json_object_get(doc, "schema_version"))
        return "report";
    if (json_is_array(json_object_get(doc, "results")) && json_object_get(doc, "manifest"))
        return "suite";
    if (strcmp(kvv_jget_str(doc, "command"), "numerics") == 0 &&
        json_is_array(json_object_get(doc, "engines")))
        return "numerics";
    return NULL;
}

void kvv_html_report_body(kvv_sbuf *b, const json_t *doc, const char *id_prefix)
{
    const json_t *checks = json_object_get(doc, "checks");
    kvv_sbuf_str(b, "<section class=\"block\"><h2>Checks</h2>\n");
    kvv_html_check_summary(b, checks, id_prefix);
    kvv_sbuf_str(b, "</section>\n");
    size_t i;
    const json_t *c;
    json_array_foreach(checks, i, c)
        kvv_html_check_section(b, c, id_prefix, NULL, NULL);
}
