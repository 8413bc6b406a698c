/* html.c — the HTML report: page, header, check sections and the dispatch
 * to each check's figures (see report.h, html_impl.h). */
#include "verify/report/html_impl.h"
#include "verify/report/report.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ JSON access */

double kvv_jnum(const json_t *v)
{
    if (json_is_number(v))
        return json_number_value(v);
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "inf") == 0)
            return INFINITY;
        if (strcmp(s, "-inf") == 0)
            return -INFINITY;
        char *end;
        double x = strtod(s, &end);
        if (end != s)
            return x;
    }
    return NAN;
}

double kvv_jget_num(const json_t *o, const char *key)
{
    return kvv_jnum(json_object_get(o, key));
}

long long kvv_jget_int(const json_t *o, const char *key, long long dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

const char *kvv_jget_str(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

char *kvv_jtext(const json_t *v, char *buf, size_t size)
{
    if (json_is_string(v))
        snprintf(buf, size, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, size, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, size, "%.9g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, size, "%s", json_is_true(v) ? "true" : "false");
    else
        snprintf(buf, size, "—");
    return buf;
}

/* ------------------------------------------------------------ page pieces */

static const char style[] =
    "body{margin:0;background:#f6f8fa;color:#1f2328;"
    "font:14px/1.45 'DejaVu Sans','Liberation Sans',Arial,sans-serif}\n"
    "main{max-width:1140px;margin:0 auto;padding:8px 24px 32px}\n"
    "h1{font-size:21px;margin:14px 0 4px}h2{font-size:17px;margin:0 0 4px}"
    "h3{font-size:14px;margin:14px 0 4px}\n"
    ".badge{display:inline-block;padding:1px 9px;border-radius:10px;font-size:12px;"
    "font-weight:bold;color:#fff;vertical-align:2px;letter-spacing:.03em}\n"
    ".badge.pass{background:#1a7f37}.badge.fail{background:#cf222e}"
    ".badge.error{background:#bc4c00}.badge.skipped{background:#6e7781}\n"
    "header.run,section.check,section.block{background:#fff;border:1px solid #d0d7de;"
    "border-radius:6px;padding:12px 18px;margin:14px 0}\n"
    "dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:1px 14px;margin:6px 0;"
    "font-size:13px}dl.meta dt{color:#57606a}dl.meta dd{margin:0;overflow-wrap:anywhere}\n"
    "p.key{font-size:15px;margin:2px 0 6px}p.msg{margin:4px 0;padding:6px 10px;"
    "border-left:4px solid #cf222e;background:#fff5f5}p.msg.skipped{border-color:#6e7781;"
    "background:#f6f8fa}p.note{color:#57606a;margin:4px 0}\n"
    "figure.fig{margin:12px 0 18px;padding:0}figcaption{margin:0 0 4px}"
    "figcaption b{font-size:14px}figcaption .rule{display:block;color:#57606a;font-size:12.5px}\n"
    ".plots{display:flex;flex-wrap:wrap;gap:6px 18px}svg.plot{display:block;max-width:100%;"
    "height:auto}.legend{display:flex;flex-wrap:wrap;gap:2px 14px;font-size:12px;"
    "margin:2px 0 4px}.legend span{white-space:nowrap}svg.swatch{vertical-align:-1px;"
    "margin-right:3px}\n"
    "table{border-collapse:collapse;font-size:12.5px;margin:4px 0}"
    "th,td{border-bottom:1px solid #eaeef2;padding:2px 8px;text-align:left;vertical-align:top}"
    "th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums;"
    "white-space:nowrap}\n"
    "td.ok{color:#1a7f37;font-weight:bold}td.bad{color:#cf222e;font-weight:bold}"
    ".mono,code{font-family:'DejaVu Sans Mono','Liberation Mono',monospace;font-size:12px}\n"
    "details{margin:4px 0}details summary{cursor:pointer;color:#0969da;font-size:12.5px}\n"
    "a{color:#0969da;text-decoration:none}footer{color:#57606a;font-size:12px;"
    "margin:18px 0}\n";

void kvv_html_begin(kvv_sbuf *b, const char *title)
{
    kvv_sbuf_str(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                    "<meta name=\"generator\" content=\"kvverify " KVV_REPORT_VERSION "\">\n"
                    "<title>");
    kvv_sbuf_xml(b, title);
    kvv_sbuf_str(b, "</title>\n<style>\n");
    kvv_sbuf_str(b, style);
    kvv_sbuf_str(b, "</style>\n</head>\n<body>\n<main>\n");
}

void kvv_html_end(kvv_sbuf *b)
{
    kvv_sbuf_str(b, "<footer>Written by kvverify " KVV_REPORT_VERSION
                    " from the JSON report (docs/report-schema.md): every figure shows the "
                    "report's own numbers; hover a point for them. Self-contained: no script, "
                    "no font or file is fetched.</footer>\n</main>\n</body>\n</html>\n");
}

void kvv_html_badge(kvv_sbuf *b, const char *verdict)
{
    const char *v = verdict && *verdict ? verdict : "error";
    char up[16];
    size_t i = 0;
    for (; v[i] && i + 1 < sizeof up; i++)
        up[i] = (char)(v[i] >= 'a' && v[i] <= 'z' ? v[i] - 32 : v[i]);
    up[i] = 0;
    kvv_sbuf_str(b, "<span class=\"badge ");
    kvv_sbuf_xml(b, v);
    kvv_sbuf_str(b, "\">");
    kvv_sbuf_xml(b, up);
    kvv_sbuf_str(b, "</span>");
}

void kvv_html_meta(kvv_sbuf *b, const char *term, const char *value)
{
    kvv_sbuf_str(b, "<dt>");
    kvv_sbuf_xml(b, term);
    kvv_sbuf_str(b, "</dt><dd>");
    kvv_sbuf_xml(b, value);
    kvv_sbuf_str(b, "</dd>\n");
}

void kvv_html_meta_object(kvv_sbuf *b, const json_t *o)
{
    const char *k;
    json_t *v;
    char buf[256];
    json_object_foreach((json_t *)o, k, v) {
        if (json_is_object(v) || json_is_array(v))
            continue;
        kvv_html_meta(b, k, kvv_jtext(v, buf, sizeof buf));
    }
}

static void engine_line(char *buf, size_t size, const json_t *e)
{
    if (!json_is_object(e)) {
        snprintf(buf, size, "—");
        return;
    }
    long long th = kvv_jget_int(e, "n_threads", 1);
    const char *isa = kvv_jget_str(e, "isa"); /* "" for engines without kernel tables */
    snprintf(buf, size, "%s (%s), cache %s, %lld thread%s%s%s", kvv_jget_str(e, "name"),
             kvv_jget_str(e, "mode"), kvv_jget_str(e, "cache_type"), th, th == 1 ? "" : "s",
             *isa ? ", kernel table " : "", isa);
}

void kvv_html_report_header(kvv_sbuf *b, const json_t *doc, const char *heading)
{
    const json_t *model = json_object_get(doc, "model");
    const char *path = kvv_jget_str(model, "path");
    const char *base = strrchr(path, '/');
    char buf[512];
    kvv_sbuf_str(b, "<header class=\"run\">\n<h1>");
    kvv_sbuf_xml(b, heading);
    kvv_sbuf_str(b, " ");
    kvv_html_badge(b, kvv_jget_str(doc, "verdict"));
    kvv_sbuf_str(b, "</h1>\n<dl class=\"meta\">\n");
    snprintf(buf, sizeof buf, "%s%s%s%s", base ? base + 1 : path,
             *kvv_jget_str(model, "architecture") ? " (" : "", kvv_jget_str(model, "architecture"),
             *kvv_jget_str(model, "architecture") ? ")" : "");
    kvv_html_meta(b, "model", buf);
    kvv_html_meta(b, "path", path);
    kvv_html_meta(b, "sha256", kvv_jget_str(model, "sha256"));
    const json_t *e = json_object_get(doc, "engine");
    engine_line(buf, sizeof buf, e);
    kvv_html_meta(b, "engine", buf);
    if (json_is_object(e) && *kvv_jget_str(e, "kernels"))
        kvv_html_meta(b, "kernels", kvv_jget_str(e, "kernels"));
    if (kvv_jget_int(doc, "n_prompt", 0) > 0) {
        snprintf(buf, sizeof buf, "%s, %lld tokens, seed %s", kvv_jget_str(doc, "prompt_source"),
                 kvv_jget_int(doc, "n_prompt", 0), kvv_jget_str(doc, "seed_hex"));
        kvv_html_meta(b, "prompt", buf);
    }
    if (json_is_object(json_object_get(doc, "workload"))) { /* the certificate's sizes */
        kvv_workload w;
        kvv_workload_from_json(json_object_get(doc, "workload"), &w);
        kvv_html_meta(b, "workload", kvv_workload_format(&w, buf, sizeof buf));
    }
    snprintf(buf, sizeof buf, "%s, %.3g s, exit code %lld", kvv_jget_str(doc, "started"),
             kvv_jget_num(doc, "seconds"), kvv_jget_int(doc, "exit_code", -1));
    kvv_html_meta(b, "run", buf);
    snprintf(buf, sizeof buf, "kvverify %s, report schema %lld",
             kvv_jget_str(doc, "kvverify_version"), kvv_jget_int(doc, "schema_version", 0));
    kvv_html_meta(b, "written by", buf);
    kvv_sbuf_str(b, "</dl>\n");
    if (json_is_object(e)) {
        kvv_sbuf_str(b, "<details><summary>engine description (every field)</summary>"
                        "<dl class=\"meta\">\n");
        kvv_html_meta_object(b, e);
        kvv_sbuf_str(b, "</dl></details>\n");
    }
    kvv_sbuf_str(b, "</header>\n");
}

/* ------------------------------------------------------------ tables */

void kvv_html_table_begin(kvv_sbuf *b, const char *summary, const char *const *heads, int n)
{
    if (summary) {
        kvv_sbuf_str(b, "<details class=\"data\"><summary>");
        kvv_sbuf_xml(b, summary);
        kvv_sbuf_str(b, "</summary>\n");
    }
    kvv_sbuf_str(b, "<table><thead><tr>");
    for (int i = 0; i < n; i++) {
        kvv_sbuf_str(b, "<th>");
        kvv_sbuf_xml(b, heads[i]);
        kvv_sbuf_str(b, "</th>");
    }
    kvv_sbuf_str(b, "</tr></thead><tbody>\n");
}

void kvv_html_table_row(kvv_sbuf *b, const char *const *cells, int n)
{
    kvv_sbuf_str(b, "<tr>");
    for (int i = 0; i < n; i++) {
        const char *c = cells[i] ? cells[i] : "";
        bool num = c[0] == '#';
        kvv_sbuf_str(b, num ? "<td class=\"n\">" : "<td>");
        kvv_sbuf_xml(b, num ? c + 1 : c);
        kvv_sbuf_str(b, "</td>");
    }
    kvv_sbuf_str(b, "</tr>\n");
}

void kvv_html_table_end(kvv_sbuf *b, bool details)
{
    kvv_sbuf_str(b, details ? "</tbody></table></details>\n" : "</tbody></table>\n");
}

/* ------------------------------------------------------------ ranges */

void kvv_range_init(kvv_range *r)
{
    memset(r, 0, sizeof *r);
}

void kvv_range_add(kvv_range *r, double v)
{
    if (!isfinite(v))
        return;
    if (!r->any || v < r->lo)
        r->lo = v;
    if (!r->any || v > r->hi)
        r->hi = v;
    r->any = true;
    if (v <= 0) {
        r->any_zero = true;
        return;
    }
    if (!r->any_pos || v < r->pos_lo)
        r->pos_lo = v;
    if (!r->any_pos || v > r->pos_hi)
        r->pos_hi = v;
    r->any_pos = true;
}

void kvv_range_log_axis(const kvv_range *r, kvv_svg_axis *a)
{
    a->log = true;
    a->zero_band = r->any_zero || !r->any_pos;
    if (r->any_pos) {
        a->lo = pow(10.0, floor(log10(r->pos_lo)));
        a->hi = pow(10.0, ceil(log10(r->pos_hi)));
        if (a->hi <= a->lo)
            a->hi = a->lo * 10;
    } else {
        a->lo = 1;
        a->hi = 10;
    }
}

/* ------------------------------------------------------------ figures */

void kvv_fig_begin(kvv_fig *f, const char *id_prefix, const char *kind, const char *title,
                   const char *rule)
{
    memset(f, 0, sizeof *f);
    snprintf(f->id, sizeof f->id, "%s%s", id_prefix ? id_prefix : "", kind);
    snprintf(f->kind, sizeof f->kind, "%s", kind);
    kvv_sbuf_str(&f->body, "<figcaption><b>");
    kvv_sbuf_xml(&f->body, title);
    kvv_sbuf_str(&f->body, "</b>");
    if (rule) {
        kvv_sbuf_str(&f->body, "<span class=\"rule\">");
        kvv_sbuf_xml(&f->body, rule);
        kvv_sbuf_str(&f->body, "</span>");
    }
    kvv_sbuf_str(&f->body, "</figcaption>\n");
}

void kvv_fig_legend(kvv_fig *f, const kvv_fig_key *keys, int n)
{
    kvv_sbuf_str(&f->body, "<div class=\"legend\">");
    for (int i = 0; i < n; i++) {
        kvv_sbuf_str(&f->body, "<span>");
        kvv_svg_swatch(&f->body, keys[i].color, keys[i].shape,
                       keys[i].dash && !keys[i].dash[0] ? "0 26" : keys[i].dash);
        kvv_sbuf_xml(&f->body, keys[i].name);
        kvv_sbuf_str(&f->body, "</span>");
    }
    kvv_sbuf_str(&f->body, "</div>\n");
}

void kvv_fig_plot(kvv_fig *f, kvv_svg *s, int w, int h, const kvv_svg_axis *x,
                  const kvv_svg_axis *y)
{
    kvv_svg_begin(s, &f->body, w, h, x, y);
    kvv_svg_axes(s);
}

void kvv_fig_plot_end(kvv_fig *f, kvv_svg *s)
{
    kvv_svg_end(s);
    f->n_points += s->n_points;
}

void kvv_fig_note(kvv_fig *f, const char *fmt, ...)
{
    char t[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    kvv_sbuf_str(&f->body, "<p class=\"note\">");
    kvv_sbuf_xml(&f->body, t);
    kvv_sbuf_str(&f->body, "</p>\n");
}

void kvv_fig_end(kvv_sbuf *page, kvv_fig *f)
{
    kvv_sbuf_str(page, "<figure class=\"fig\" id=\"");
    kvv_sbuf_xml(page, f->id);
    kvv_sbuf_str(page, "\" data-figure=\"");
    kvv_sbuf_xml(page, f->kind);
    kvv_sbuf_fmt(page, "\" data-points=\"%d\">\n", f->n_points);
    if (f->body.oom)
        page->oom = true;
    else if (f->body.p)
        kvv_sbuf_put(page, f->body.p, f->body.n);
    kvv_sbuf_str(page, "</figure>\n");
    kvv_sbuf_free(&f->body);
}

/* ------------------------------------------------------------ a check */

typedef void (*fig_fn)(kvv_sbuf *b, const json_t *check, const char *id_prefix);

static const struct {
    const char *check;
    fig_fn fn;
} figures[] = {
    {"kv", kvv_html_fig_kv},           {"patch", kvv_html_fig_patch},
    {"greedy", kvv_html_fig_greedy},   {"invariance", kvv_html_fig_invariance},
    {"compare", kvv_html_fig_compare}, {"kvdirect", kvv_html_fig_kvdirect},
    {"evict", kvv_html_fig_evict},     {"memory", kvv_html_fig_memory},
    {"latency", kvv_html_fig_latency}, {"tables", kvv_html_fig_tables},
};

static void controls_table(kvv_sbuf *b, const json_t *controls)
{
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
    const char *verdict = kvv_jget_str(check, "verdict");
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
    if (b->n == before && strcmp(verdict, "pass") != 0 && strcmp(verdict, "fail") != 0)
        kvv_sbuf_str(b, "<p class=\"note\">No figure: the check did not run to the end.</p>\n");
    const json_t *fm = json_object_get(check, "first_mismatch");
    if (json_is_object(fm)) {
        kvv_sbuf_str(b, "<h3>First mismatch</h3>\n<p class=\"mono\">");
        kvv_sbuf_xml(b, kvv_jget_str(fm, "text"));
        kvv_sbuf_str(b, "</p>\n");
    }
    controls_table(b, json_object_get(check, "controls"));
    const json_t *e = json_object_get(check, "engine");
    if (json_is_object(e)) {
        char line[256];
        engine_line(line, sizeof line, e);
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
    kvv_html_badge(b, kvv_jget_str(check, "verdict"));
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

static void report_page(kvv_sbuf *b, const json_t *doc)
{
    const json_t *checks = json_object_get(doc, "checks");
    const json_t *model = json_object_get(doc, "model");
    const char *path = kvv_jget_str(model, "path");
    const char *base = strrchr(path, '/');
    char title[512];
    size_t n = json_array_size(checks);
    const char *what = n == 1 ? kvv_jget_str(json_array_get(checks, 0), "name") : "audit";
    snprintf(title, sizeof title, "kvverify %s — %s — %s", what, base ? base + 1 : path,
             kvv_jget_str(doc, "verdict"));
    kvv_html_begin(b, title);
    snprintf(title, sizeof title, "kvverify %s", what);
    kvv_html_report_header(b, doc, title);
    kvv_html_report_body(b, doc, "");
    kvv_html_end(b);
}

kvv_status kvv_html_render(const json_t *doc, kvv_sbuf *b, kvv_error *err)
{
    const char *kind = kvv_html_doc_kind(doc);
    if (!kind)
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "not a kvverify report: expected a check report (\"checks\"), "
                             "suite results (\"results\") or a numerics report");
    if (strcmp(kind, "report") == 0)
        report_page(b, doc);
    else if (strcmp(kind, "suite") == 0)
        kvv_html_suite_page(b, doc);
    else
        kvv_html_numerics_page(b, doc);
    return KVV_OK;
}

kvv_status kvv_html_write(const json_t *doc, const char *path, kvv_error *err)
{
    kvv_sbuf b = {0};
    kvv_status st = kvv_html_render(doc, &b, err);
    if (st) {
        kvv_sbuf_free(&b);
        return st;
    }
    return kvv_sbuf_write_file(&b, path, err); /* "-": stdout */
}
