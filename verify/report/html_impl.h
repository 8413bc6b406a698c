/*
 * html_impl.h — what the HTML report's files share (private to
 * verify/report/): JSON accessors that tolerate absent fields, the page's
 * pieces, and the figure frame. The public entry points are in report.h
 * (kvv_html_write, kvv_html_write_trend).
 *
 * Files: html_parts.c (JSON access, page pieces, tables, ranges, the
 * figure frame), html_report.c (check sections, summaries, document kind),
 * html.c (the pages and their dispatch), html_checks.c
 * (figures of kv, patch, greedy, invariance, compare, kvdirect),
 * html_measures.c (evict, memory, latency, numerics), html_tables.c (the
 * tables check), html_trend.c (several
 * reports on one page; suite results).
 *
 * Every figure is drawn from the JSON document the run wrote (or would
 * write with --json): nothing is computed for the page that the JSON does
 * not hold. A figure is
 *
 *   <figure class="fig" id="ID" data-figure="KIND" data-points="N">
 *     <figcaption><b>title</b> <span class="rule">what passes</span></figcaption>
 *     legend, <svg> (N elements of class "pt", each with a <title>), notes,
 *     <details class="data"> the numbers </details>
 *   </figure>
 *
 * so the browser test can find each KIND and count its points.
 */
#ifndef KVV_HTML_IMPL_H
#define KVV_HTML_IMPL_H

#include <stdbool.h>

#include <jansson.h>

#include "common/error.h"
#include "verify/report/sbuf.h"
#include "verify/report/svg.h"

/* ------------------------------------------------------------ JSON access */

/* A number field: JSON numbers, and the schema's "inf", "-inf", "nan"
 * strings (and numeric strings such as "%.9g" texts); NaN when absent or
 * anything else. */
double kvv_jnum(const json_t *v);
double kvv_jget_num(const json_t *o, const char *key);
/* An integer field, or dflt when absent / not an integer. */
long long kvv_jget_int(const json_t *o, const char *key, long long dflt);
/* A string field, or "" when absent / not a string. Borrowed. */
const char *kvv_jget_str(const json_t *o, const char *key);
/* A JSON scalar as text (strings as they are, numbers %.9g, true/false,
 * null as "—"). @return buf. */
char *kvv_jtext(const json_t *v, char *buf, size_t size);

/* ------------------------------------------------------------ page pieces */

/* <!DOCTYPE html>, <head> with the inline style, <body><main>. */
void kvv_html_begin(kvv_sbuf *b, const char *title);
/* The footer and </main></body></html>. */
void kvv_html_end(kvv_sbuf *b);
/* A verdict badge: <span class="badge VERDICT">VERDICT</span>. */
void kvv_html_badge(kvv_sbuf *b, const char *verdict);
/* A check's verdict as the page shows it: its "verdict", or "unproven"
 * for a pass without its controls (its "unproven" true). Borrowed. */
const char *kvv_html_check_verdict(const json_t *check);
/* A <dl class="meta"> row: term and (escaped) value. */
void kvv_html_meta(kvv_sbuf *b, const char *term, const char *value);
/* Every scalar field of an object as meta rows (the engine description is
 * shown whatever fields an engine or plugin adds). */
void kvv_html_meta_object(kvv_sbuf *b, const json_t *o);
/* An engine object as one line: "NAME (MODE), cache T, N threads[, kernel
 * table ISA]", or "—" when absent. */
void kvv_html_engine_line(char *buf, size_t size, const json_t *e);
/* The header of a kvverify report document (model, engine, prompt, run). */
void kvv_html_report_header(kvv_sbuf *b, const json_t *doc, const char *heading);
/* One check object as a <section>: verdict, key figure, message, its
 * figures, controls, first mismatch, engine, per-layer rows, details.
 * id_prefix makes ids unique when a page holds several ("" for none);
 * heading (NULL: the check's name) and context (NULL: none) say where it
 * ran, e.g. a suite case. */
void kvv_html_check_section(kvv_sbuf *b, const json_t *check, const char *id_prefix,
                            const char *heading, const char *context);
/* A report document's summary table and check sections (no header). */
void kvv_html_report_body(kvv_sbuf *b, const json_t *doc, const char *id_prefix);
/* A suite document's summary table and result sections (no header). */
void kvv_html_suite_body(kvv_sbuf *b, const json_t *doc, const char *id_prefix);
/* One row of a summary table: lead (a first cell, NULL: none), the check
 * linked to its section (id_prefix + "check-" + name), verdict, key figure,
 * time. */
void kvv_html_summary_row(kvv_sbuf *b, const char *lead, const char *id_prefix,
                          const json_t *check);
/* The summary table of checks (check, verdict, key figure, time). */
void kvv_html_check_summary(kvv_sbuf *b, const json_t *checks, const char *id_prefix);

/* ------------------------------------------------------------ figures */

typedef struct {
    kvv_sbuf body;            /* the figure's inside, until kvv_fig_end */
    char id[96];
    char kind[48];
    int n_points;
} kvv_fig;

/* One legend entry. */
typedef struct {
    const char *name;
    const char *color;
    kvv_svg_shape shape;
    const char *dash;         /* NULL: solid line; "": no line (points only) */
} kvv_fig_key;

/* Start a figure of KIND (id = id_prefix + kind), with a title and the rule
 * that says what passes (may be NULL). */
void kvv_fig_begin(kvv_fig *f, const char *id_prefix, const char *kind, const char *title,
                   const char *rule);
void kvv_fig_legend(kvv_fig *f, const kvv_fig_key *keys, int n);
/* Start / finish one plot inside the figure (counts its points). */
void kvv_fig_plot(kvv_fig *f, kvv_svg *s, int w, int h, const kvv_svg_axis *x,
                  const kvv_svg_axis *y);
void kvv_fig_plot_end(kvv_fig *f, kvv_svg *s);
/* A note line under the plots (escaped, printf-style). */
void kvv_fig_note(kvv_fig *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append the finished figure to the page and free f. */
void kvv_fig_end(kvv_sbuf *page, kvv_fig *f);

/* A <details class="data"> table: open with the headings, rows of cells,
 * close. Cells are escaped text; a cell starting with '#' is a number
 * (right-aligned, the '#' dropped). */
void kvv_html_table_begin(kvv_sbuf *b, const char *summary, const char *const *heads, int n);
void kvv_html_table_row(kvv_sbuf *b, const char *const *cells, int n);
void kvv_html_table_end(kvv_sbuf *b, bool details); /* details: it had a summary */

/* Range of the finite values (and of the positive ones, for a log axis)
 * seen by kvv_range_add. */
typedef struct {
    double lo, hi;            /* finite values */
    double pos_lo, pos_hi;    /* values > 0 */
    bool any, any_pos, any_zero;
} kvv_range;
void kvv_range_init(kvv_range *r);
void kvv_range_add(kvv_range *r, double v);
/* A log axis over r's positive values (padded), with a zero band when a
 * zero was seen or nothing was positive. */
void kvv_range_log_axis(const kvv_range *r, kvv_svg_axis *a);

/* ------------------------------------------------------------ the figures
 * (each returns silently when the check's JSON lacks its data, e.g. a
 * skipped check, or a report written before the field existed) */

void kvv_html_fig_kv(kvv_sbuf *b, const json_t *check, const char *id_prefix);
void kvv_html_fig_patch(kvv_sbuf *b, const json_t *check, const char *id_prefix);
void kvv_html_fig_greedy(kvv_sbuf *b, const json_t *check, const char *id_prefix);
void kvv_html_fig_invariance(kvv_sbuf *b, const json_t *check, const char *id_prefix);
void kvv_html_fig_batch(kvv_sbuf *b, const json_t *check, const char *id_prefix);
void kvv_html_fig_compare(kvv_sbuf *b, const json_t *check, const char *id_prefix);
void kvv_html_fig_kvdirect(kvv_sbuf *b, const json_t *check, const char *id_prefix);
/* html_ops.c: the ops check's layer × op heat map (error / budget). */
void kvv_html_fig_ops(kvv_sbuf *b, const json_t *check, const char *id_prefix);
void kvv_html_fig_evict(kvv_sbuf *b, const json_t *check, const char *id_prefix);
void kvv_html_fig_memory(kvv_sbuf *b, const json_t *check, const char *id_prefix);
void kvv_html_fig_latency(kvv_sbuf *b, const json_t *check, const char *id_prefix);
/* html_tables.c: the max ULP between kernel tables, per-table verdicts. */
void kvv_html_fig_tables(kvv_sbuf *b, const json_t *check, const char *id_prefix);

/* The page of any kvverify document into b (KVV_ERR_USAGE when doc is not
 * one). */
kvv_status kvv_html_render(const json_t *doc, kvv_sbuf *b, kvv_error *err);

/* Whole pages of the documents that are not a check report. */
void kvv_html_numerics_page(kvv_sbuf *b, const json_t *doc);
void kvv_html_suite_page(kvv_sbuf *b, const json_t *doc);

#endif
