/* html_parts.c — the HTML report's building blocks (html_impl.h): JSON
 * accessors, page pieces and the report header, tables, value ranges and
 * the figure frame. Everything else in the report is made of these; this
 * file uses none of it. */
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
    ".badge.error{background:#bc4c00}.badge.skipped{background:#6e7781}"
    ".badge.unproven{background:#9a6700}\n"
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

const char *kvv_html_check_verdict(const json_t *check)
{
    /* a pass without its controls is unproven, never shown as passed */
    return json_is_true(json_object_get(check, "unproven")) ? "unproven"
                                                            : kvv_jget_str(check, "verdict");
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

void kvv_html_engine_line(char *buf, size_t size, const json_t *e)
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
    kvv_html_engine_line(buf, sizeof buf, e);
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
    if (strcmp(kvv_jget_str(doc, "controls"), "off") == 0) /* --no-controls */
        kvv_html_meta(b, "controls", "off: unproven (no negative control ran, so no check is "
                                     "shown able to fail)");
    snprintf(buf, sizeof buf, "%s, %.3g s, exit code %lld%s", kvv_jget_str(doc, "started"),
             kvv_jget_num(doc, "seconds"), kvv_jget_int(doc, "exit_code", -1),
             json_is_true(json_object_get(doc, "interrupted"))
                 ? " (interrupted by a signal: checks marked interrupted did not finish)"
                 : "");
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
