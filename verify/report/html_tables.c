/* html_tables.c — the figure of the `tables` check (verify/tables.h): the
 * max ULP between each pair of the cpu engine's kernel tables on K, V and
 * logits, and the per-table invariance verdicts (see html_impl.h). Reads
 * the check's JSON object only. */
#include "verify/report/html_impl.h"

#include <math.h>
#include <stdio.h>

#include "verify/compare_stats.h"

#define HALF 530 /* the plot's width: three categories */

/* The data tables: each kernel table's invariance run, each pair's figures
 * layer by layer against the bounds (the verdict), and end to end. */
static void tables_data(kvv_fig *f, const json_t *per, const json_t *cross, const json_t *bounds)
{
    static const char *const h1[] = {"table", "invariance", "values compared", "differing",
                                     "first mismatch"};
    kvv_html_table_begin(&f->body, "each table's invariance run", h1, 5);
    size_t i;
    const json_t *t;
    char n1[32], n2[32];
    json_array_foreach(per, i, t) {
        snprintf(n1, sizeof n1, "#%lld", kvv_jget_int(t, "compared", 0));
        snprintf(n2, sizeof n2, "#%lld", kvv_jget_int(t, "differing", 0));
        const char *cells[] = {kvv_jget_str(t, "table"), kvv_jget_str(t, "verdict"), n1, n2,
                               kvv_jget_str(t, "first_mismatch")};
        kvv_html_table_row(&f->body, cells, 5);
    }
    kvv_html_table_end(&f->body, true);
    /* the cross-table verdict: layer by layer against the contract's bound */
    static const char *const h3[] = {"pair", "figure (layer by layer)", "value", "bound",
                                     "within"};
    kvv_html_table_begin(&f->body, "between tables, layer by layer: the verdict", h3, 5);
    const json_t *q;
    json_array_foreach(cross, i, q) {
        const json_t *lw = json_object_get(q, "layer_by_layer");
        if (!json_is_object(lw))
            continue;
        char pair[48], v[2][40], b[2][40], fig[2][64];
        snprintf(pair, sizeof pair, "%s vs %s", kvv_jget_str(q, "b"), kvv_jget_str(q, "a"));
        const double val[2] = {kvv_jget_num(lw, "residual_rel_rms"), kvv_jget_num(lw, "logits_rel")};
        const char *which[2] = {"layers", "head"};
        snprintf(fig[0], sizeof fig[0], "residual rel RMS, worst layer %lld",
                 kvv_jget_int(lw, "worst_layer", -1));
        snprintf(fig[1], sizeof fig[1], "logits rel, worst position %lld",
                 kvv_jget_int(lw, "worst_position", -1));
        for (int k = 0; k < 2; k++) {
            const json_t *bk = json_object_get(bounds, which[k]);
            char vb[32], bb[32];
            kvv_figure_vs_bound(val[k], kvv_jget_num(bk, "bound"), vb, bb, sizeof vb);
            snprintf(v[k], sizeof v[k], "#%s", vb);
            snprintf(b[k], sizeof b[k], "#%s", bb);
            const char *cells[] = {pair, fig[k], v[k], b[k], val[k] <= kvv_jget_num(bk, "bound")
                                                                 ? "yes" : "NO"};
            kvv_html_table_row(&f->body, cells, 5);
        }
    }
    kvv_html_table_end(&f->body, true);
    static const char *const h2[] = {"pair", "tensor", "max ULP", "NMSE", "differing", "of"};
    kvv_html_table_begin(&f->body, "between tables end to end (figures, no bound)", h2, 6);
    static const char *const kinds[] = {"K", "V", "logits"};
    const json_t *p;
    json_array_foreach(cross, i, p) {
        char pair[48], ulp[32], nmse[32], nd[32], nn[32];
        snprintf(pair, sizeof pair, "%s vs %s", kvv_jget_str(p, "b"), kvv_jget_str(p, "a"));
        for (int k = 0; k < 3; k++) {
            const json_t *s = json_object_get(p, kinds[k]);
            char u[32];
            snprintf(ulp, sizeof ulp, "#%s", kvv_jtext(json_object_get(s, "max_ulp"), u, sizeof u));
            snprintf(nmse, sizeof nmse, "#%.4g", kvv_jget_num(s, "nmse"));
            snprintf(nd, sizeof nd, "#%lld", kvv_jget_int(s, "differing", 0));
            snprintf(nn, sizeof nn, "#%lld", kvv_jget_int(s, "compared", 0));
            const char *cells[] = {pair, kinds[k], ulp, nmse, nd, nn};
            kvv_html_table_row(&f->body, cells, 6);
        }
    }
    kvv_html_table_end(&f->body, true);
}

void kvv_html_fig_tables(kvv_sbuf *b, const json_t *check, const char *p)
{
    const json_t *d = json_object_get(check, "details");
    const json_t *cross = json_object_get(d, "cross_table");
    size_t np = json_array_size(cross);
    if (!np)
        return;
    static const char *const kinds[] = {"K", "V", "logits"};
    kvv_range r;
    kvv_range_init(&r);
    size_t i;
    const json_t *c;
    json_array_foreach(cross, i, c)
        for (int k = 0; k < 3; k++)
            kvv_range_add(&r, kvv_jget_num(json_object_get(c, kinds[k]), "max_ulp"));
    kvv_fig f;
    kvv_fig_begin(&f, p, "tables-ulp",
                  "Kernel tables: largest ULP between each pair of tables (K, V, logits)",
                  "No verdict from these end-to-end points: the tables differ by design (each "
                  "sums in its own order). The verdict: each table's invariance run must be "
                  "bit-exact, and each pair, layer by layer, within the bound the kernels' "
                  "contract allows for the model's tensor types (data tables).");
    kvv_fig_key keys[6];
    int nk = np < 6 ? (int)np : 6;
    char names[6][48];
    for (int k = 0; k < nk; k++) {
        const json_t *q = json_array_get(cross, (size_t)k);
        snprintf(names[k], sizeof names[k], "%s vs %s", kvv_jget_str(q, "b"),
                 kvv_jget_str(q, "a"));
        keys[k] = (kvv_fig_key){names[k], kvv_svg_color(k), (kvv_svg_shape)(k % 4), ""};
    }
    kvv_fig_legend(&f, keys, nk);
    kvv_svg_axis x = {.label = "tensor (whole prompt, every layer)", .cats = kinds, .n_cats = 3};
    kvv_svg_axis y = {.label = "max ULP between the tables"};
    kvv_range_log_axis(&r, &y);
    kvv_svg s;
    kvv_fig_plot(&f, &s, HALF, 280, &x, &y);
    json_array_foreach(cross, i, c)
        for (int k = 0; k < 3; k++) {
            const json_t *st = json_object_get(c, kinds[k]);
            double u = kvv_jget_num(st, "max_ulp");
            if (!isfinite(u))
                continue; /* a NaN: no point (the data table says so) */
            kvv_svg_point(&s, k, u, kvv_svg_color((int)i), (kvv_svg_shape)(i % 4),
                          "%s vs %s, %s: max %.0f ULP, NMSE %.4g", kvv_jget_str(c, "b"),
                          kvv_jget_str(c, "a"), kinds[k], u, kvv_jget_num(st, "nmse"));
        }
    kvv_fig_plot_end(&f, &s);
    kvv_fig_note(&f, "%s", kvv_jget_str(d, "note"));
    tables_data(&f, json_object_get(d, "tables"), cross, json_object_get(d, "bounds"));
    kvv_fig_end(b, &f);
}
