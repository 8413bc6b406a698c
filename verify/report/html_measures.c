/* html_measures.c — the figures of the measuring commands: evict, memory,
 * latency, and the numerics page (see html_impl.h). Each reads the JSON
 * the command wrote and nothing else. */
#include "verify/report/html_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIDE 1080
#define HALF 530
#define THIRD 352

/* ------------------------------------------------------------------ evict */

#define MAX_POLICIES 24

/* The policies of summary rows in order of first appearance. */
static int policy_list(const json_t *rows, const char **names, int max)
{
    int n = 0;
    size_t i;
    const json_t *w;
    json_array_foreach(rows, i, w) {
        const char *p = kvv_jget_str(w, "policy");
        int k = 0;
        while (k < n && strcmp(names[k], p) != 0)
            k++;
        if (k == n && n < max)
            names[n++] = p;
    }
    return n;
}

static bool is_kvdirect(const char *policy)
{
    return strncmp(policy, "kvdirect", 8) == 0;
}

/* Series style of policy k of n: KV-Direct dark and diamond-shaped, the
 * baselines from the palette. */
static kvv_fig_key policy_key(const char *name, int k)
{
    if (is_kvdirect(name))
        return (kvv_fig_key){name, strstr(name, "token") ? "#6f42c1" : "#1f2328",
                             KVV_SHAPE_DIAMOND, NULL};
    return (kvv_fig_key){name, kvv_svg_color(k), (kvv_svg_shape)(k % 3), NULL};
}

/* A summary row's x: live tokens, or the byte budget at equal bytes. NaN
 * when the row has no run (n_prompts 0: e.g. KV-Direct's checkpoints alone
 * exceed the bytes). */
static double evict_x(const json_t *w, const char *xkey)
{
    if (kvv_jget_int(w, "n_prompts", 0) <= 0)
        return NAN;
    return kvv_jget_num(w, xkey);
}

/* One panel: metric (mean with min..max whiskers) against x, per policy. */
static void evict_panel(kvv_fig *f, const json_t *rows, const char *xkey, const char *xlabel,
                        kvv_svg_fmt xfmt, const char *metric, const char **pol, int np)
{
    bool match = strcmp(metric, "greedy_match") == 0;
    kvv_range rx, ry;
    kvv_range_init(&rx);
    kvv_range_init(&ry);
    size_t i;
    const json_t *w;
    json_array_foreach(rows, i, w) {
        double x = evict_x(w, xkey);
        if (!isfinite(x))
            continue;
        kvv_range_add(&rx, x);
        const json_t *m = json_object_get(w, metric);
        kvv_range_add(&ry, kvv_jget_num(m, "min"));
        kvv_range_add(&ry, kvv_jget_num(m, "max"));
    }
    double pad = rx.any ? (rx.hi - rx.lo) * 0.06 + (rx.hi == rx.lo) : 1;
    kvv_svg_axis x = {.label = xlabel, .lo = rx.any ? rx.lo - pad : 0,
                      .hi = rx.any ? rx.hi + pad : 1, .fmt = xfmt};
    kvv_svg_axis y = {.label = match ? "greedy token match" : "mean KL per step (nats)",
                      .lo = 0, .hi = 1.02, .fmt = KVV_FMT_PERCENT};
    if (!match) {
        y.fmt = KVV_FMT_NUM;
        kvv_range_log_axis(&ry, &y);
    }
    kvv_svg s;
    kvv_fig_plot(f, &s, HALF, 330, &x, &y);
    double dodge = rx.any ? (rx.hi - rx.lo + 1) * 0.0045 : 0; /* keep equal points apart */
    size_t nr = json_array_size(rows);
    double *xs = calloc(nr + 1, sizeof *xs), *ys = calloc(nr + 1, sizeof *ys);
    for (int k = 0; k < np && xs && ys; k++) {
        kvv_fig_key key = policy_key(pol[k], k);
        int n = 0;
        json_array_foreach(rows, i, w) {
            if (strcmp(kvv_jget_str(w, "policy"), pol[k]) != 0)
                continue;
            double x0 = evict_x(w, xkey);
            if (!isfinite(x0))
                continue;
            const json_t *m = json_object_get(w, metric);
            xs[n] = x0 + dodge * (k - (np - 1) / 2.0);
            ys[n] = kvv_jget_num(m, "mean");
            kvv_svg_whisker(&s, xs[n], kvv_jget_num(m, "min"), kvv_jget_num(m, "max"),
                            key.color);
            n++;
        }
        kvv_svg_line(&s, xs, ys, n, key.color, NULL);
        n = 0;
        json_array_foreach(rows, i, w) {
            if (strcmp(kvv_jget_str(w, "policy"), pol[k]) != 0 ||
                !isfinite(evict_x(w, xkey)))
                continue;
            const json_t *m = json_object_get(w, metric);
            char xb[32];
            kvv_svg_format(kvv_jget_num(w, xkey), xfmt, xb, sizeof xb);
            kvv_svg_point(&s, xs[n], ys[n], key.color, key.shape,
                          "%s at %s (%lld live tokens, %.0f B): %s mean %.6g, sd %.3g, min %.6g, "
                          "max %.6g over %lld prompt(s); %lld bit-equal",
                          pol[k], xb, kvv_jget_int(w, "budget", -1),
                          kvv_jget_num(w, "budget_bytes"), match ? "token match" : "mean KL",
                          ys[n], kvv_jget_num(m, "sd"), kvv_jget_num(m, "min"),
                          kvv_jget_num(m, "max"), kvv_jget_int(w, "n_prompts", 0),
                          kvv_jget_int(w, "n_bit_equal", 0));
            n++;
        }
    }
    free(xs);
    free(ys);
    kvv_fig_plot_end(f, &s);
}

static void evict_table(kvv_fig *f, const json_t *rows, const char *summary)
{
    static const char *const heads[] = {"policy",    "live budget", "bytes", "prompts",
                                        "bit-equal", "token match", "prefix", "teacher top-1",
                                        "mean KL"};
    kvv_html_table_begin(&f->body, summary, heads, 9);
    size_t i;
    const json_t *w;
    json_array_foreach(rows, i, w) {
        char c[9][96];
        const json_t *gm = json_object_get(w, "greedy_match");
        const json_t *kl = json_object_get(w, "kl_mean");
        snprintf(c[0], 96, "%s", kvv_jget_str(w, "policy"));
        snprintf(c[1], 96, "#%lld", kvv_jget_int(w, "budget", -1));
        snprintf(c[2], 96, "#%.0f", json_object_get(w, "byte_budget")
                                        ? kvv_jget_num(w, "byte_budget")
                                        : kvv_jget_num(w, "budget_bytes"));
        snprintf(c[3], 96, "#%lld", kvv_jget_int(w, "n_prompts", 0));
        snprintf(c[4], 96, "#%lld", kvv_jget_int(w, "n_bit_equal", 0));
        snprintf(c[5], 96, "#%.1f%% ± %.1f [%.1f, %.1f]", 100 * kvv_jget_num(gm, "mean"),
                 100 * kvv_jget_num(gm, "sd"), 100 * kvv_jget_num(gm, "min"),
                 100 * kvv_jget_num(gm, "max"));
        snprintf(c[6], 96, "#%.1f", kvv_jget_num(json_object_get(w, "prefix_match"), "mean"));
        snprintf(c[7], 96, "#%.1f%%",
                 100 * kvv_jget_num(json_object_get(w, "teacher_top1"), "mean"));
        snprintf(c[8], 96, "#%.3g [%.3g, %.3g]", kvv_jget_num(kl, "mean"),
                 kvv_jget_num(kl, "min"), kvv_jget_num(kl, "max"));
        const char *cells[9] = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]};
        kvv_html_table_row(&f->body, cells, 9);
    }
    kvv_html_table_end(&f->body, true);
}

static void evict_figure(kvv_sbuf *b, const json_t *d, const char *p, bool bytes)
{
    const json_t *rows = json_object_get(d, bytes ? "equal_bytes_summary" : "by_budget_summary");
    if (!json_array_size(rows))
        return;
    const char *pol[MAX_POLICIES];
    int np = policy_list(rows, pol, MAX_POLICIES);
    kvv_fig f;
    char xlabel[160];
    if (bytes) {
        kvv_fig_begin(&f, p, "evict-bytes",
                      "Cache policies at equal total bytes: token match and KL against the "
                      "byte budget",
                      "KV-Direct gets the bytes of each baseline budget for live K/V plus its "
                      "residual checkpoints. It passes when it matches the full cache (100%, KL "
                      "0) wherever it fits; the baselines are measured, not judged.");
        snprintf(xlabel, sizeof xlabel, "total bytes (live K/V + checkpoints)");
    } else {
        kvv_fig_begin(&f, p, "evict-tokens",
                      "Cache policies: greedy token match and KL against the live K/V budget",
                      "The shape of the KV-Direct paper's figure: each baseline evicts K/V "
                      "beyond its budget; KV-Direct keeps residual checkpoints and recomputes. "
                      "KV-Direct passes at 100% with KL 0 (bit-equal). Points: the mean over "
                      "the prompts; whiskers: min to max.");
        snprintf(xlabel, sizeof xlabel, "live K/V budget (tokens; %.0f B per token)",
                 kvv_jget_num(d, "kv_bytes_per_token"));
    }
    kvv_fig_key keys[MAX_POLICIES];
    for (int k = 0; k < np; k++)
        keys[k] = policy_key(pol[k], k);
    kvv_fig_legend(&f, keys, np);
    kvv_sbuf_str(&f.body, "<div class=\"plots\">\n");
    const char *xkey = bytes ? "byte_budget" : "budget";
    kvv_svg_fmt xfmt = bytes ? KVV_FMT_BYTES : KVV_FMT_NUM;
    evict_panel(&f, rows, xkey, xlabel, xfmt, "greedy_match", pol, np);
    evict_panel(&f, rows, xkey, xlabel, xfmt, "kl_mean", pol, np);
    kvv_sbuf_str(&f.body, "</div>\n");
    kvv_fig_note(&f, "Baselines over %lld prompt(s) (%s prompt set), %lld tokens generated each; "
                     "points are dodged sideways so equal values stay visible; hover for "
                     "mean, sd, min and max.",
                 kvv_jget_int(d, "n_prompts", 0), kvv_jget_str(d, "prompt_set"),
                 kvv_jget_int(d, "n_gen", 0));
    /* rows that did not run: say so rather than leave a silent gap */
    size_t i;
    const json_t *w;
    json_array_foreach(rows, i, w) {
        if (kvv_jget_int(w, "n_prompts", 0) > 0)
            continue;
        char xb[32];
        kvv_svg_format(kvv_jget_num(w, xkey), xfmt, xb, sizeof xb);
        kvv_fig_note(&f, "Not drawn: %s at %s — %s.", kvv_jget_str(w, "policy"), xb,
                     bytes ? "its checkpoints alone exceed the byte budget"
                           : "no prompt ran at this budget");
    }
    evict_table(&f, rows, bytes ? "the numbers at equal bytes" : "the numbers per budget");
    kvv_fig_end(b, &f);
}

void kvv_html_fig_evict(kvv_sbuf *b, const json_t *check, const char *p)
{
    const json_t *d = json_object_get(check, "details");
    evict_figure(b, d, p, false);
    evict_figure(b, d, p, true);
}

/* ------------------------------------------------------------------ memory */

void kvv_html_fig_memory(kvv_sbuf *b, const json_t *check, const char *p)
{
    const json_t *d = json_object_get(check, "details");
    const json_t *turns = json_object_get(d, "turns");
    int n = (int)json_array_size(turns);
    if (!n)
        return;
    static const char *const keys_json[3] = {"full_bytes", "kvdirect_layer_bytes",
                                             "kvdirect_token_bytes"};
    static const char *const eq_json[3] = {NULL, "kvdirect_layer_bit_equal",
                                           "kvdirect_token_bit_equal"};
    kvv_fig_key keys[3] = {{"full cache (wide grey line)", "#8c959f", KVV_SHAPE_SQUARE, NULL},
                           {"KV-Direct, residuals of every layer", "#1f2328", KVV_SHAPE_CIRCLE,
                            NULL},
                           {"KV-Direct, one residual per token", "#6f42c1", KVV_SHAPE_DIAMOND,
                            NULL}};
    kvv_range ry;
    kvv_range_init(&ry);
    for (int t = 0; t < n; t++)
        for (int k = 0; k < 3; k++)
            kvv_range_add(&ry, kvv_jget_num(json_array_get(turns, (size_t)t), keys_json[k]));
    kvv_fig f;
    kvv_fig_begin(&f, p, "memory-turns",
                  "Memory over a multi-turn conversation: bytes held after each turn",
                  "KV-Direct passes when every logit of the conversation is bit-equal to the "
                  "full cache's; its bytes stay bounded by the budget while the full cache "
                  "grows with the conversation.");
    kvv_fig_legend(&f, keys, 3);
    kvv_svg_axis x = {.label = "turn", .lo = 0.5, .hi = n + 0.5, .integer = true};
    kvv_svg_axis y = {.label = "bytes held (K/V + checkpoints)", .lo = 0,
                      .hi = ry.any ? ry.hi * 1.08 : 1, .fmt = KVV_FMT_BYTES};
    kvv_svg s;
    kvv_fig_plot(&f, &s, WIDE, 320, &x, &y);
    double *xs = calloc((size_t)n, sizeof *xs), *ys = calloc((size_t)n, sizeof *ys);
    for (int k = 0; k < 3 && xs && ys; k++) {
        for (int t = 0; t < n; t++) {
            const json_t *w = json_array_get(turns, (size_t)t);
            xs[t] = (double)kvv_jget_int(w, "turn", t + 1);
            ys[t] = kvv_jget_num(w, keys_json[k]);
        }
        /* the full cache wide and pale beneath: a KV-Direct mode may hold
         * exactly as many bytes (per-layer residuals as wide as K+V) */
        s.line_width = k ? 1.6 : 6.0;
        s.line_opacity = k ? 1.0 : 0.45;
        kvv_svg_line(&s, xs, ys, n, keys[k].color, NULL);
        for (int t = 0; t < n; t++)
            kvv_svg_point(&s, xs[t], ys[t], keys[k].color, keys[k].shape,
                          "turn %.0f (%lld positions): %s %.0f B", xs[t],
                          kvv_jget_int(json_array_get(turns, (size_t)t), "positions", -1),
                          keys[k].name, ys[t]);
    }
    free(xs);
    free(ys);
    kvv_fig_plot_end(&f, &s);
    for (int k = 1; k < 3; k++)
        kvv_fig_note(&f, "%s: peak %.0f B, logits %s, %lld rows recomputed.", keys[k].name,
                     kvv_jget_num(d, k == 1 ? "peak_kvdirect_layer" : "peak_kvdirect_token"),
                     json_is_true(json_object_get(d, eq_json[k])) ? "bit-equal to the full cache"
                                                                   : "DIFFER from the full cache",
                     kvv_jget_int(d, k == 1 ? "recomputed_rows_layer" : "recomputed_rows_token",
                                  -1));
    kvv_fig_note(&f, "Full cache: peak %.0f B. KV-Direct live budget: %lld tokens.",
                 kvv_jget_num(d, "peak_full"), kvv_jget_int(d, "budget", -1));
    kvv_fig_end(b, &f);
}

/* ------------------------------------------------------------------ latency */

void kvv_html_fig_latency(kvv_sbuf *b, const json_t *check, const char *p)
{
    const json_t *d = json_object_get(check, "details");
    const json_t *rows = json_object_get(d, "rows");
    size_t nr = json_array_size(rows);
    if (!nr)
        return;
    kvv_range rx, ry;
    kvv_range_init(&rx);
    kvv_range_init(&ry);
    static const char *const meas[2] = {"read_s", "recompute_s"};
    static const char *const roof[2] = {"roofline_read_s", "roofline_recompute_s"};
    size_t i;
    const json_t *w;
    int n = 0;
    json_array_foreach(rows, i, w) {
        if (kvv_jget_int(w, "layer", 0) != -1)
            continue;
        n++;
        kvv_range_add(&rx, kvv_jget_num(w, "batch"));
        for (int k = 0; k < 2; k++) {
            kvv_range_add(&ry, kvv_jget_num(w, meas[k]));
            kvv_range_add(&ry, kvv_jget_num(w, roof[k]));
        }
    }
    if (!n)
        return;
    kvv_fig f;
    char rule[320];
    snprintf(rule, sizeof rule,
             "No verdict on speed: the check passes when the recomputed K/V are bit-equal to "
             "the cache. Dashed: this machine's roofline floor, max(bytes / %.1f GB/s stream "
             "read, FLOPs / %.1f GFLOP/s sgemm).",
             kvv_jget_num(d, "stream_gbs"), kvv_jget_num(d, "sgemm_gflops"));
    kvv_fig_begin(&f, p, "latency-batch",
                  "Reading cached K/V vs recomputing them from the residual, per layer (mean "
                  "over the layers measured), against batch size", rule);
    kvv_fig_key keys[4] = {{"read cached K/V (measured)", kvv_svg_color(0), KVV_SHAPE_CIRCLE, NULL},
                           {"recompute from residual (measured)", kvv_svg_color(1),
                            KVV_SHAPE_SQUARE, NULL},
                           {"read: roofline floor", kvv_svg_color(0), KVV_SHAPE_NONE, "6 4"},
                           {"recompute: roofline floor", kvv_svg_color(1), KVV_SHAPE_NONE,
                            "6 4"}};
    kvv_fig_legend(&f, keys, 4);
    kvv_svg_axis x = {.label = "batch size (tokens)", .lo = rx.lo / 1.5, .hi = rx.hi * 1.5,
                      .log = true};
    kvv_svg_axis y = {.label = "time per layer (median)",
                      .fmt = KVV_FMT_SECONDS};
    kvv_range_log_axis(&ry, &y);
    y.zero_band = false;
    kvv_svg s;
    kvv_fig_plot(&f, &s, WIDE, 340, &x, &y);
    double *xs = calloc((size_t)n, sizeof *xs), *ys = calloc((size_t)n, sizeof *ys);
    for (int k = 0; k < 2 && xs && ys; k++) {
        int m = 0;
        json_array_foreach(rows, i, w) {
            if (kvv_jget_int(w, "layer", 0) != -1 || m >= n)
                continue;
            xs[m] = kvv_jget_num(w, "batch");
            ys[m++] = kvv_jget_num(w, roof[k]);
        }
        kvv_svg_line(&s, xs, ys, m, keys[k].color, "6 4");
        m = 0;
        json_array_foreach(rows, i, w) {
            if (kvv_jget_int(w, "layer", 0) != -1 || m >= n)
                continue;
            xs[m] = kvv_jget_num(w, "batch");
            ys[m++] = kvv_jget_num(w, meas[k]);
        }
        kvv_svg_line(&s, xs, ys, m, keys[k].color, NULL);
        json_array_foreach(rows, i, w) {
            if (kvv_jget_int(w, "layer", 0) != -1)
                continue;
            double t = kvv_jget_num(w, meas[k]), floor_s = kvv_jget_num(w, roof[k]);
            kvv_svg_point(&s, kvv_jget_num(w, "batch"), t, keys[k].color, keys[k].shape,
                          "%s, batch %lld: %.4g s (roofline floor %.4g s), %.0f bytes%s",
                          k ? "recompute" : "read", kvv_jget_int(w, "batch", 0), t, floor_s,
                          kvv_jget_num(w, k ? "recompute_bytes" : "read_bytes"),
                          k ? "" : " read");
        }
    }
    free(xs);
    free(ys);
    long long cross = kvv_jget_int(d, "crossover_batch", 0);
    if (cross > 0)
        kvv_svg_vline(&s, (double)cross, "#1a7f37", "recompute faster from here");
    kvv_fig_plot_end(&f, &s);
    if (cross <= 0)
        kvv_fig_note(&f, "Reading the cache was faster at every batch size measured.");
    kvv_fig_note(&f, "%lld of %lld recomputed K/V elements differ from the cache.",
                 kvv_jget_int(d, "differing", -1), kvv_jget_int(d, "compared", -1));
    kvv_fig_end(b, &f);
}

/* ------------------------------------------------------------------ numerics */

/* Lower bound of a histogram bin label ("0", "3-4", ">1024"). */
static double bin_key(const char *label)
{
    return label[0] == '>' ? strtod(label + 1, NULL) + 1 : strtod(label, NULL);
}

static int cmp_bins(const void *a, const void *b)
{
    double x = bin_key(*(const char *const *)a), y = bin_key(*(const char *const *)b);
    return (x > y) - (x < y);
}

#define MAX_BINS 80

/* One op's histogram over the engines that measured it. */
static void numerics_op(kvv_fig *f, const json_t *engines, const char *op)
{
    const char *bins[MAX_BINS];
    int nb = 0;
    double ymax = 1;
    size_t e;
    const json_t *en;
    json_array_foreach(engines, e, en) {
        const json_t *o = json_object_get(json_object_get(en, "ops"), op);
        const json_t *h = json_object_get(json_object_get(o, "total"), "histogram");
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)h, k, v) {
            int j = 0;
            while (j < nb && strcmp(bins[j], k) != 0)
                j++;
            if (j == nb && nb < MAX_BINS)
                bins[nb++] = k;
            if (kvv_jnum(v) > ymax)
                ymax = kvv_jnum(v);
        }
    }
    if (!nb)
        return;
    qsort(bins, (size_t)nb, sizeof bins[0], cmp_bins);
    char xl[96];
    snprintf(xl, sizeof xl, "%s — ULP error vs MPFR", op);
    kvv_svg_axis x = {.label = xl, .cats = bins, .n_cats = nb};
    kvv_svg_axis y = {.label = "values in the bin", .lo = 0.5, .hi = pow(10, ceil(log10(ymax))),
                      .log = true};
    kvv_svg s;
    kvv_fig_plot(f, &s, THIRD, 260, &x, &y);
    int ne = (int)json_array_size(engines);
    double bw = 0.8 / (ne > 0 ? ne : 1);
    json_array_foreach(engines, e, en) {
        const json_t *o = json_object_get(json_object_get(en, "ops"), op);
        const json_t *tot = json_object_get(o, "total");
        const json_t *h = json_object_get(tot, "histogram");
        for (int j = 0; j < nb; j++) {
            double c = kvv_jnum(json_object_get(h, bins[j]));
            if (!(c > 0))
                continue;
            double x0 = j - 0.4 + bw * (double)e;
            kvv_svg_rect(&s, x0, 0.5, x0 + bw, c, kvv_svg_color((int)e),
                         "%s %s: %.0f of %lld values at %s ULP", kvv_jget_str(en, "name"), op, c,
                         kvv_jget_int(tot, "values", 0), bins[j]);
        }
    }
    kvv_fig_plot_end(f, &s);
}

static void numerics_tables(kvv_sbuf *b, const json_t *doc)
{
    static const char *const heads[] = {"engine", "op", "values", "max ULP", "mean ULP",
                                         "worst at", "where"};
    kvv_html_table_begin(b, "per op and engine: values, largest and mean ULP, worst place",
                         heads, 7);
    size_t e;
    const json_t *en;
    json_array_foreach(json_object_get(doc, "engines"), e, en) {
        const char *op;
        json_t *o;
        json_object_foreach(json_object_get(en, "ops"), op, o) {
            const json_t *tot = json_object_get(o, "total");
            const json_t *worst = json_object_get(tot, "worst");
            char c[7][160], mx[32];
            snprintf(c[0], 160, "%s", kvv_jget_str(en, "name"));
            snprintf(c[1], 160, "%s", op);
            snprintf(c[2], 160, tot ? "#%lld" : "not measured",
                     kvv_jget_int(tot, "values", 0));
            snprintf(c[3], 160, "#%s", tot ? kvv_jtext(json_object_get(tot, "max"), mx, 32) : "");
            snprintf(c[4], 160, tot ? "#%.4g" : "#", kvv_jget_num(tot, "mean"));
            snprintf(c[5], 160, "%s", worst ? kvv_jget_str(worst, "what") : "");
            snprintf(c[6], 160, "%s", kvv_jget_str(o, "where"));
            const char *cells[7] = {c[0], c[1], c[2], c[3], c[4], c[5], c[6]};
            kvv_html_table_row(b, cells, 7);
        }
    }
    kvv_html_table_end(b, true);
    static const char *const mh[] = {"engine", "fn", "range", "samples", "max error (ulp)",
                                     "not correctly rounded", "where"};
    kvv_html_table_begin(b, "portable math against MPFR (error in ulp of the exact value)", mh,
                         7);
    const json_t *m;
    json_array_foreach(json_object_get(doc, "math"), e, m) {
        char c[7][160];
        snprintf(c[0], 160, "%s", kvv_jget_str(m, "engine"));
        snprintf(c[1], 160, "%s", kvv_jget_str(m, "fn"));
        snprintf(c[2], 160, "%s", kvv_jget_str(m, "range"));
        snprintf(c[3], 160, "#%lld", kvv_jget_int(m, "samples", 0));
        snprintf(c[4], 160, "#%.6g", kvv_jget_num(m, "max_err"));
        snprintf(c[5], 160, "#%lld", kvv_jget_int(m, "not_rounded", 0));
        snprintf(c[6], 160, "%s", kvv_jget_str(m, "where"));
        const char *cells[7] = {c[0], c[1], c[2], c[3], c[4], c[5], c[6]};
        kvv_html_table_row(b, cells, 7);
    }
    kvv_html_table_end(b, true);
}

void kvv_html_numerics_page(kvv_sbuf *b, const json_t *doc)
{
    const char *model = kvv_jget_str(doc, "model");
    const char *base = strrchr(model, '/');
    char title[512], buf[256];
    snprintf(title, sizeof title, "kvverify numerics — %s", base ? base + 1 : model);
    kvv_html_begin(b, title);
    kvv_sbuf_str(b, "<header class=\"run\">\n<h1>kvverify numerics</h1>\n<dl class=\"meta\">\n");
    kvv_html_meta(b, "model", model);
    kvv_html_meta(b, "sha256", kvv_jget_str(doc, "model_sha256"));
    kvv_html_meta(b, "architecture", kvv_jget_str(doc, "architecture"));
    const json_t *pr = json_object_get(doc, "prompt");
    snprintf(buf, sizeof buf, "%s, %lld tokens, seed %lld", kvv_jget_str(pr, "source"),
             kvv_jget_int(pr, "n_tokens", 0), kvv_jget_int(pr, "seed", 0));
    kvv_html_meta(b, "prompt", buf);
    const json_t *cap = json_object_get(doc, "capture");
    snprintf(buf, sizeof buf, "%lld values checked against the engine's own output, %lld "
                              "mismatches %s", kvv_jget_int(cap, "checked", 0),
             kvv_jget_int(cap, "mismatch", 0), kvv_jget_str(cap, "note"));
    kvv_html_meta(b, "capture", buf);
    const json_t *orc = json_object_get(doc, "oracle");
    snprintf(buf, sizeof buf, "%lld MPFR results, %lld escalations, %lld unresolved",
             kvv_jget_int(orc, "results", 0), kvv_jget_int(orc, "escalations", 0),
             kvv_jget_int(orc, "unresolved", 0));
    kvv_html_meta(b, "oracle", buf);
    snprintf(buf, sizeof buf, "%.3g s, kvverify %s", kvv_jget_num(doc, "seconds"),
             kvv_jget_str(doc, "version"));
    kvv_html_meta(b, "run", buf);
    size_t e;
    const json_t *en;
    json_array_foreach(json_object_get(doc, "engines"), e, en) {
        const json_t *d = json_object_get(en, "engine");
        const char *isa = kvv_jget_str(d, "isa");
        snprintf(buf, sizeof buf, "%s (%s), cache %s, %lld thread(s)%s%s; %s",
                 kvv_jget_str(d, "name"), kvv_jget_str(d, "mode"), kvv_jget_str(d, "cache_type"),
                 kvv_jget_int(d, "n_threads", 1), *isa ? ", kernel table " : "", isa,
                 kvv_jget_str(d, "kernels"));
        kvv_html_meta(b, kvv_jget_str(en, "name"), buf);
    }
    kvv_sbuf_str(b, "</dl>\n</header>\n<section class=\"block\">\n");
    const json_t *engines = json_object_get(doc, "engines");
    kvv_fig f;
    kvv_fig_begin(&f, "", "numerics-hist",
                  "ULP error of each op against MPFR (correctly rounded), per engine",
                  "No verdict: the distance of each output from the exact result, rounded "
                  "once; the reference engine's documented orders keep it within a few ULP, a "
                  "fast engine may spread wider. Bars: how many values fell in each ULP bin.");
    int ne = (int)json_array_size(engines);
    kvv_fig_key keys[12];
    for (int k = 0; k < ne && k < 12; k++)
        keys[k] = (kvv_fig_key){kvv_jget_str(json_array_get(engines, (size_t)k), "name"),
                                kvv_svg_color(k), KVV_SHAPE_SQUARE, ""};
    kvv_fig_legend(&f, keys, ne < 12 ? ne : 12);
    kvv_sbuf_str(&f.body, "<div class=\"plots\">\n");
    const char *op;
    json_t *o;
    json_object_foreach(json_object_get(json_array_get(engines, 0), "ops"), op, o)
        numerics_op(&f, engines, op);
    kvv_sbuf_str(&f.body, "</div>\n");
    numerics_tables(&f.body, doc);
    kvv_fig_end(b, &f);
    kvv_sbuf_str(b, "</section>\n");
    kvv_html_end(b);
}
