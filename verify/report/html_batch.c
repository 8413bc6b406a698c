/* html_batch.c — the batch check's figure: A among other requests against
 * A alone, largest ULP per layer of K and V and of the logits, per mode,
 * and the modes' table (see html_impl.h). Reads details "ulp_by_layer" and
 * "modes" (verify/batch.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "verify/report/html_impl.h"

#define THIRD 352 /* three side by side */

static double ulp_at(const json_t *a, size_t i)
{
    const json_t *v = a ? json_array_get(a, i) : NULL;
    return !v || json_is_null(v) ? NAN : kvv_jnum(v);
}

/* The modes: verdict, what was compared, the first difference, figures. */
static void modes_table(kvv_sbuf *b, const json_t *modes)
{
    static const char *const heads[] = {"mode", "verdict", "compared", "first difference",
                                        "max ULP", "rows differing"};
    kvv_html_table_begin(b, "each mode", heads, 6);
    size_t i;
    const json_t *m;
    json_array_foreach(modes, i, m) {
        char first[96] = "none", ulp[32] = "", rows[48] = "";
        const json_t *f = json_object_get(m, "first");
        if (json_is_object(f)) {
            long long st = kvv_jget_int(f, "step", -1);
            int n = snprintf(first, sizeof first, "%s layer %lld position %lld",
                             kvv_jget_str(f, "tensor"), kvv_jget_int(f, "layer", -1),
                             kvv_jget_int(f, "position", -1));
            if (st >= 0 && n > 0 && n < (int)sizeof first)
                snprintf(first + n, sizeof first - (size_t)n, " (decode step %lld)", st);
        }
        if (json_object_get(m, "max_ulp"))
            kvv_jtext(json_object_get(m, "max_ulp"), ulp, sizeof ulp);
        if (json_object_get(m, "rows"))
            snprintf(rows, sizeof rows, "%lld of %lld", kvv_jget_int(m, "rows_differ", 0),
                     kvv_jget_int(m, "rows", 0));
        const char *compared = json_object_get(m, "compared") ? kvv_jget_str(m, "compared")
                                                              : kvv_jget_str(m, "message");
        const char *cells[] = {kvv_jget_str(m, "mode"), kvv_jget_str(m, "verdict"), compared,
                               json_object_get(m, "rows") ? first : "", ulp, rows};
        kvv_html_table_row(b, cells, 6);
    }
    kvv_html_table_end(b, true);
}

void kvv_html_fig_batch(kvv_sbuf *b, const json_t *check, const char *p)
{
    const json_t *d = json_object_get(check, "details");
    const json_t *vars = json_object_get(d, "ulp_by_layer");
    size_t nv = json_array_size(vars);
    if (!nv) {
        if (json_array_size(json_object_get(d, "modes")))
            modes_table(b, json_object_get(d, "modes"));
        return;
    }
    static const char *const tensors[2] = {"K", "V"};
    kvv_range r;
    kvv_range_init(&r);
    bool any_nan = false;
    size_t i;
    const json_t *v;
    json_array_foreach(vars, i, v) {
        for (int k = 0; k < 2; k++) {
            const json_t *a = json_object_get(v, tensors[k]);
            for (size_t l = 0; l < json_array_size(a); l++) {
                any_nan |= isnan(ulp_at(a, l));
                kvv_range_add(&r, ulp_at(a, l));
            }
        }
        kvv_range_add(&r, kvv_jget_num(v, "logits"));
    }
    kvv_fig f;
    kvv_fig_begin(&f, p, "batch-ulp",
                  "Batch invariance across requests: largest ULP of request A among other "
                  "requests against A alone, per layer (K, V) and on the logits, per mode",
                  "Passes when every mode is 0 ULP everywhere (all points in the 0 band): A's "
                  "bits do not depend on the other requests sharing the calls. Isolation "
                  "compares A beside B with A beside B' (same shapes): a point above 0 there "
                  "is a leak between requests.");
    kvv_fig_key keys[12];
    const char *cats[12];
    int nk = nv < 12 ? (int)nv : 12;
    for (int k = 0; k < nk; k++) {
        cats[k] = kvv_jget_str(json_array_get(vars, (size_t)k), "variant");
        keys[k] = (kvv_fig_key){cats[k], kvv_svg_color(k), (kvv_svg_shape)(k % 4), NULL};
    }
    kvv_fig_legend(&f, keys, nk);
    kvv_sbuf_str(&f.body, "<div class=\"plots\">\n");
    for (int k = 0; k < 2; k++) {
        int nl = (int)json_array_size(json_object_get(json_array_get(vars, 0), tensors[k]));
        char xl[32];
        snprintf(xl, sizeof xl, "layer — %s", tensors[k]);
        kvv_svg_axis x = {.label = xl, .lo = -0.5, .hi = nl - 0.5, .integer = true};
        kvv_svg_axis y = {.label = "max ULP vs A alone"};
        kvv_range_log_axis(&r, &y);
        kvv_svg s;
        kvv_fig_plot(&f, &s, THIRD, 280, &x, &y);
        long long nonzero = 0;
        for (int m = 0; m < nk; m++) {
            const json_t *a = json_object_get(json_array_get(vars, (size_t)m), tensors[k]);
            int n = (int)json_array_size(a);
            double *xs = calloc((size_t)n + 1, sizeof *xs), *ys = calloc((size_t)n + 1, sizeof *ys);
            if (!xs || !ys)
                n = 0;
            for (int l = 0; l < n; l++) {
                xs[l] = l;
                ys[l] = ulp_at(a, (size_t)l);
                nonzero += !(ys[l] == 0);
            }
            kvv_svg_line(&s, xs, ys, n, kvv_svg_color(m), NULL);
            for (int l = 0; l < n; l++)
                kvv_svg_point(&s, l, ys[l], kvv_svg_color(m), (kvv_svg_shape)(m % 4),
                              "%s, %s layer %d: max %.0f ULP", cats[m], tensors[k], l, ys[l]);
            free(xs);
            free(ys);
        }
        if (!nonzero)
            kvv_svg_banner(&s, "0 ULP at every layer");
        kvv_fig_plot_end(&f, &s);
    }
    /* the logits: one point per mode */
    kvv_svg_axis x = {.label = "mode — logits", .lo = -0.5, .hi = nk - 0.5, .cats = cats,
                      .n_cats = nk};
    kvv_svg_axis y = {.label = "max ULP vs A alone"};
    kvv_range_log_axis(&r, &y);
    kvv_svg s;
    kvv_fig_plot(&f, &s, THIRD, 280, &x, &y);
    long long nonzero = 0;
    for (int m = 0; m < nk; m++) {
        double u = kvv_jget_num(json_array_get(vars, (size_t)m), "logits");
        nonzero += !(u == 0);
        kvv_svg_point(&s, m, u, kvv_svg_color(m), (kvv_svg_shape)(m % 4),
                      "%s, logits: max %.0f ULP", cats[m], u);
    }
    if (!nonzero)
        kvv_svg_banner(&s, "0 ULP in every mode");
    kvv_fig_plot_end(&f, &s);
    kvv_sbuf_str(&f.body, "</div>\n");
    if (any_nan)
        kvv_fig_note(&f, "A NaN was involved where a point is missing (a row the engine did "
                         "not give).");
    kvv_fig_end(b, &f);
    modes_table(b, json_object_get(d, "modes"));
}
