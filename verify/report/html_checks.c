/* html_checks.c — the figures of the comparison checks: kv, patch, greedy,
 * invariance, compare, kvdirect (see html_impl.h). Each reads the check's
 * JSON object (docs/report-schema.md) and nothing else. */
#include "verify/report/html_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/compare_stats.h"

#define ZERO_CELL "#d9f2df"   /* an exact zero in a heatmap: bit-exact */
#define NAN_CELL "#000000"
#define FIRST_MARK "#6f42c1"  /* the first divergence */
#define WIDE 1080             /* a plot across the page */
#define HALF 530              /* two plots side by side */
#define THIRD 352             /* three side by side */

static const json_t *details_of(const json_t *check)
{
    return json_object_get(check, "details");
}

/* Heatmap cell colour of value v in a log range [lo, hi] of positive
 * values: 0 -> ZERO_CELL, NaN/null -> NAN_CELL, else the ramp (never the
 * palest end, so 1 ULP is visible). */
static void cell_color(double v, double lo, double hi, char out[8])
{
    if (isnan(v)) {
        snprintf(out, 8, "%s", NAN_CELL);
        return;
    }
    if (v <= 0) {
        snprintf(out, 8, "%s", ZERO_CELL);
        return;
    }
    double t = hi > lo ? (log(v) - log(lo)) / (log(hi) - log(lo)) : 1.0;
    kvv_svg_ramp(0.15 + 0.85 * t, out);
}

/* The ramp's legend: zero, low, high (NULL: low alone), NaN. */
static void heat_legend(kvv_fig *f, const char *zero_name, const char *lo_name,
                        const char *hi_name, bool with_nan)
{
    char c_lo[8], c_hi[8];
    kvv_svg_ramp(0.15, c_lo);
    kvv_svg_ramp(1.0, c_hi);
    kvv_fig_key keys[4] = {{zero_name, ZERO_CELL, KVV_SHAPE_SQUARE, ""},
                           {lo_name, hi_name ? c_lo : c_hi, KVV_SHAPE_SQUARE, ""},
                           {hi_name, c_hi, KVV_SHAPE_SQUARE, ""},
                           {"NaN involved", NAN_CELL, KVV_SHAPE_SQUARE, ""}};
    int n = 2;
    if (hi_name)
        n = 3;
    if (with_nan)
        keys[n++] = keys[3];
    kvv_fig_legend(f, keys, n);
}

static int heat_height(int rows)
{
    int h = rows * 16 + 70;
    return h < 160 ? 160 : h > 480 ? 480 : h;
}

/* ------------------------------------------------------------------ kv */

void kvv_html_fig_kv(kvv_sbuf *b, const json_t *check, const char *p)
{
    const json_t *map = json_object_get(details_of(check), "ulp_by_position");
    const json_t *grid[2] = {json_object_get(map, "K"), json_object_get(map, "V")};
    int L = (int)json_array_size(grid[0]);
    int T = (int)json_array_size(json_array_get(grid[0], 0));
    if (!L || !T || (int)json_array_size(grid[1]) != L)
        return;
    kvv_range r;
    kvv_range_init(&r);
    bool any_nan = false;
    long long nonzero = 0;
    for (int g = 0; g < 2; g++)
        for (int l = 0; l < L; l++)
            for (int t = 0; t < T; t++) {
                const json_t *v = json_array_get(json_array_get(grid[g], l), t);
                double u = json_is_null(v) ? NAN : kvv_jnum(v);
                any_nan |= isnan(u);
                nonzero += !(u == 0);
                kvv_range_add(&r, u);
            }
    const json_t *fm = json_object_get(check, "first_mismatch");
    const char *fm_tensor = kvv_jget_str(fm, "tensor");
    long long fl = kvv_jget_int(fm, "layer", -1), ft = kvv_jget_int(fm, "token", -1);

    kvv_fig f;
    char lo_name[48], hi_name[48];
    kvv_fig_begin(&f, p, "kv-ulp",
                  "Cached vs recomputed K and V: largest ULP per layer and position",
                  "Passes when every cell is 0 ULP (bit-exact, green). A cell is the largest "
                  "distance over the token-by-token, all-at-once and chunked recomputes from "
                  "the residual; the first divergence is framed.");
    snprintf(lo_name, sizeof lo_name, "%.0f ULP", r.any_pos ? r.pos_lo : 1.0);
    snprintf(hi_name, sizeof hi_name, "%.0f ULP (largest here)", r.any_pos ? r.pos_hi : 1.0);
    if (r.any_pos && r.pos_hi > r.pos_lo)
        heat_legend(&f, "0 ULP (bit-exact)", lo_name, hi_name, any_nan);
    else if (r.any_pos)
        heat_legend(&f, "0 ULP (bit-exact)", hi_name, NULL, any_nan);
    else
        heat_legend(&f, "0 ULP (bit-exact)", "> 0 ULP (none here)", NULL, any_nan);
    kvv_sbuf_str(&f.body, "<div class=\"plots\">\n");
    static const char *const names[2] = {"K", "V"};
    for (int g = 0; g < 2; g++) {
        char xl[64], yl[64];
        snprintf(xl, sizeof xl, "position (token) — %s", names[g]);
        snprintf(yl, sizeof yl, "layer (%s)", names[g]);
        kvv_svg_axis x = {.label = xl, .lo = -0.5, .hi = T - 0.5, .integer = true};
        kvv_svg_axis y = {.label = yl, .lo = -0.5, .hi = L - 0.5, .integer = true};
        kvv_svg s;
        kvv_fig_plot(&f, &s, HALF, heat_height(L), &x, &y);
        for (int l = 0; l < L; l++)
            for (int t = 0; t < T; t++) {
                const json_t *v = json_array_get(json_array_get(grid[g], l), t);
                double u = json_is_null(v) ? NAN : kvv_jnum(v);
                char col[8];
                cell_color(u, r.any_pos ? r.pos_lo : 1, r.any_pos ? r.pos_hi : 1, col);
                if (isnan(u))
                    kvv_svg_rect(&s, t - 0.5, l - 0.5, t + 0.5, l + 0.5, col,
                                 "%s layer %d, position %d: NaN involved", names[g], l, t);
                else
                    kvv_svg_rect(&s, t - 0.5, l - 0.5, t + 0.5, l + 0.5, col,
                                 "%s layer %d, position %d: max %.0f ULP%s", names[g], l, t, u,
                                 u == 0 ? " (bit-exact)" : "");
            }
        if (strcmp(fm_tensor, names[g]) == 0 && fl >= 0 && fl < L && ft >= 0 && ft < T) {
            char lab[64];
            snprintf(lab, sizeof lab, "first divergence l=%lld t=%lld", fl, ft);
            kvv_svg_frame(&s, ft - 0.5, fl - 0.5, ft + 0.5, fl + 0.5, FIRST_MARK);
            kvv_svg_vline(&s, (double)ft, FIRST_MARK, lab);
        }
        if (nonzero == 0) {
            char msg[96];
            snprintf(msg, sizeof msg, "bit-exact: all %d × %d cells 0 ULP", L, T);
            kvv_svg_banner(&s, msg);
        }
        kvv_fig_plot_end(&f, &s);
    }
    kvv_sbuf_str(&f.body, "</div>\n");
    if (nonzero)
        kvv_fig_note(&f, "%lld of %d cells differ; largest %.0f ULP%s.", nonzero, 2 * L * T,
                     r.any_pos ? r.pos_hi : 0.0, any_nan ? "; black cells involve a NaN" : "");
    else
        kvv_fig_note(&f, "Every recomputed K and V element is bit-identical to the cache.");
    kvv_fig_end(b, &f);
}

/* ------------------------------------------------------------------ patch */

static double arr_num(const json_t *a, size_t i)
{
    const json_t *v = json_array_get(a, i);
    return json_is_null(v) ? NAN : kvv_jnum(v);
}

void kvv_html_fig_patch(kvv_sbuf *b, const json_t *check, const char *p)
{
    const json_t *d = details_of(check);
    const json_t *layers = json_object_get(d, "layers");
    const json_t *unp = json_object_get(d, "kl_unpatched_by_position");
    const json_t *ctl = json_object_get(d, "control_kl_by_position");
    int T = (int)kvv_jget_int(d, "n_tokens", 0);
    size_t nl = json_array_size(layers);
    if (T <= 0 || !nl || !json_object_get(json_array_get(layers, 0), "kl_by_position"))
        return;
    kvv_range r;
    kvv_range_init(&r);
    long long zero = 0, cells = 0;
    size_t i;
    const json_t *lj;
    json_array_foreach(layers, i, lj) {
        const json_t *a = json_object_get(lj, "kl_by_position");
        for (int t = 0; t < T; t++) {
            double v = arr_num(a, (size_t)t);
            kvv_range_add(&r, v);
            zero += v == 0.0;
            cells++;
        }
    }
    for (int t = 0; t < T; t++) {
        kvv_range_add(&r, arr_num(unp, (size_t)t));
        kvv_range_add(&r, arr_num(ctl, (size_t)t));
    }
    long long lc = kvv_jget_int(d, "control_layer", -1);
    char ctl_name[96];
    snprintf(ctl_name, sizeof ctl_name, "control: only the last position patched (layer %lld)",
             lc);
    kvv_fig f;
    kvv_fig_begin(&f, p, "patch-kl",
                  "Residual patching: KL(p_A ‖ p_patched B) per position",
                  "Passes when patching B's whole residual sequence with A's, at any layer, "
                  "gives KL exactly 0 at every position (blue, in the 0 band); the control, "
                  "which patches only the last position, must leave KL > 0 there (red).");
    kvv_fig_key keys[3] = {{"whole-sequence patch, every layer", kvv_svg_color(0),
                            KVV_SHAPE_CIRCLE, ""},
                           {ctl_name, kvv_svg_color(2), KVV_SHAPE_TRIANGLE, NULL},
                           {"A vs B unpatched (for scale)", "#8c959f", KVV_SHAPE_SQUARE, NULL}};
    if (!json_array_size(ctl)) /* --no-controls: no control series */
        keys[1] = keys[2];
    kvv_fig_legend(&f, keys, json_array_size(ctl) ? 3 : 2);
    kvv_svg_axis x = {.label = "position (token)", .lo = -0.5, .hi = T - 0.5, .integer = true};
    kvv_svg_axis y = {.label = "KL (nats)"};
    kvv_range_log_axis(&r, &y);
    kvv_svg s;
    kvv_fig_plot(&f, &s, WIDE, 320, &x, &y);
    double *xs = calloc((size_t)T, sizeof *xs), *ys = calloc((size_t)T, sizeof *ys);
    const json_t *series[2] = {unp, ctl};
    for (int k = 0; k < 2 && xs && ys; k++) {
        if (!json_array_size(series[k]))
            continue;
        const char *col = k ? kvv_svg_color(2) : "#8c959f";
        for (int t = 0; t < T; t++) {
            xs[t] = t;
            ys[t] = arr_num(series[k], (size_t)t);
        }
        /* the control equals A vs B before the last position: draw A vs B
         * wide and pale beneath it so both stay visible */
        s.line_width = k ? 1.6 : 6.0;
        s.line_opacity = k ? 1.0 : 0.45;
        kvv_svg_line(&s, xs, ys, T, col, NULL);
        for (int t = 0; t < T; t++)
            kvv_svg_point(&s, t, ys[t], col, k ? KVV_SHAPE_TRIANGLE : KVV_SHAPE_SQUARE,
                          "%s, position %d: KL = %.9g (%a)",
                          k ? ctl_name : "A vs B unpatched", t, ys[t], ys[t]);
    }
    json_array_foreach(layers, i, lj) {
        const json_t *a = json_object_get(lj, "kl_by_position");
        long long l = kvv_jget_int(lj, "layer", (long long)i);
        for (int t = 0; t < T; t++) {
            double v = arr_num(a, (size_t)t);
            kvv_svg_point(&s, t, v, kvv_svg_color(0), KVV_SHAPE_CIRCLE,
                          "whole-sequence patch at layer %lld, position %d: KL = %.9g (%a)", l,
                          t, v, v);
        }
    }
    kvv_fig_plot_end(&f, &s);
    free(xs);
    free(ys);
    if (zero == cells)
        kvv_fig_note(&f, "Whole-sequence patch: KL is exactly 0 at all %zu layers × %d positions "
                         "(%lld values). Before the last position the control is B unpatched, "
                         "so its KL is A vs B's there.", nl, T, cells);
    else
        kvv_fig_note(&f, "Whole-sequence patch: KL > 0 at %lld of %lld layer-positions.",
                     cells - zero, cells);
    kvv_fig_end(b, &f);
}

/* ------------------------------------------------------------------ greedy */

void kvv_html_fig_greedy(kvv_sbuf *b, const json_t *check, const char *p)
{
    const json_t *d = details_of(check);
    const json_t *mc = json_object_get(d, "margins_cached");
    const json_t *mn = json_object_get(d, "margins_nocache");
    const json_t *tc = json_object_get(d, "tokens_cached");
    const json_t *tn = json_object_get(d, "tokens_nocache");
    int N = (int)json_array_size(mc);
    if (!N || (int)json_array_size(mn) != N)
        return;
    kvv_range r;
    kvv_range_init(&r);
    for (int i = 0; i < N; i++) {
        kvv_range_add(&r, arr_num(mc, (size_t)i));
        kvv_range_add(&r, arr_num(mn, (size_t)i));
    }
    long long ftd = kvv_jget_int(d, "first_token_divergence", -1);
    long long fld = kvv_jget_int(d, "first_logits_difference", -1);
    kvv_fig f;
    kvv_fig_begin(&f, p, "greedy-margin",
                  "Greedy decoding: top-1 − top-2 logit margin per step, with and without the "
                  "cache",
                  "Passes when both runs choose the same token at every step with bit-equal "
                  "logits (the two series coincide); a small margin is where a last-bit "
                  "difference could flip the token. The first divergence is marked.");
    kvv_fig_key keys[2] = {{"with the K/V cache", kvv_svg_color(0), KVV_SHAPE_CIRCLE, NULL},
                           {"without cache (full recompute each step)", kvv_svg_color(1),
                            KVV_SHAPE_SQUARE, "5 3"}};
    kvv_fig_legend(&f, keys, 2);
    kvv_svg_axis x = {.label = "decode step", .lo = -0.5, .hi = N - 0.5, .integer = true};
    kvv_svg_axis y = {.label = "top-1 − top-2 logit (logit units)", .lo = 0,
                      .hi = r.any ? r.hi * 1.08 : 1};
    kvv_svg s;
    kvv_fig_plot(&f, &s, WIDE, 300, &x, &y);
    double *xs = calloc((size_t)N, sizeof *xs), *ys = calloc((size_t)N, sizeof *ys);
    const json_t *m[2] = {mn, mc}, *tok[2] = {tn, tc};
    for (int k = 0; k < 2 && xs && ys; k++) {
        const kvv_fig_key *key = &keys[1 - k];
        for (int i = 0; i < N; i++) {
            xs[i] = i;
            ys[i] = arr_num(m[k], (size_t)i);
        }
        kvv_svg_line(&s, xs, ys, N, key->color, key->dash);
        for (int i = 0; i < N; i++)
            kvv_svg_point(&s, i, ys[i], key->color, key->shape,
                          "%s, step %d: token %lld, margin %.9g", k ? "cached" : "no-cache", i,
                          (long long)json_integer_value(json_array_get(tok[k], (size_t)i)),
                          ys[i]);
    }
    char lab[80];
    if (ftd >= 0) {
        snprintf(lab, sizeof lab, "tokens diverge at step %lld", ftd);
        kvv_svg_vline(&s, (double)ftd, "#cf222e", lab);
    } else if (fld >= 0) {
        snprintf(lab, sizeof lab, "logits differ from step %lld", fld);
        kvv_svg_vline(&s, (double)fld, FIRST_MARK, lab);
    }
    kvv_fig_plot_end(&f, &s);
    free(xs);
    free(ys);
    if (ftd < 0 && fld < 0)
        kvv_fig_note(&f, "No divergence: the same %d tokens, logits bit-equal at every step.", N);
    else if (ftd < 0)
        kvv_fig_note(&f, "The same %d tokens, but the logits differ from step %lld on.", N, fld);
    else
        kvv_fig_note(&f, "Tokens diverge at step %lld; the logits differ from step %lld on.", ftd,
                     fld);
    kvv_fig_end(b, &f);
}

/* ------------------------------------------------------------------ invariance */

void kvv_html_fig_invariance(kvv_sbuf *b, const json_t *check, const char *p)
{
    const json_t *vars = json_object_get(details_of(check), "ulp_by_layer");
    size_t nv = json_array_size(vars);
    if (!nv)
        return;
    static const char *const tensors[3] = {"K", "V", "residual"};
    kvv_range r;
    kvv_range_init(&r);
    bool any_nan = false;
    size_t i;
    const json_t *v;
    json_array_foreach(vars, i, v)
        for (int k = 0; k < 3; k++) {
            const json_t *a = json_object_get(v, tensors[k]);
            for (size_t l = 0; l < json_array_size(a); l++) {
                double u = arr_num(a, l);
                any_nan |= isnan(u);
                kvv_range_add(&r, u);
            }
        }
    kvv_fig f;
    kvv_fig_begin(&f, p, "invariance-ulp",
                  "Batch invariance: largest ULP per layer against the all-at-once run, per "
                  "chunking and thread count",
                  "Passes when every variant is 0 ULP at every layer (all points in the 0 "
                  "band): the same tokens give the same K, V and residual bits however they are "
                  "batched, chunked or threaded.");
    kvv_fig_key keys[12];
    int nk = nv < 12 ? (int)nv : 12;
    for (int k = 0; k < nk; k++)
        keys[k] = (kvv_fig_key){kvv_jget_str(json_array_get(vars, (size_t)k), "variant"),
                                kvv_svg_color(k), (kvv_svg_shape)(k % 4), NULL};
    kvv_fig_legend(&f, keys, nk);
    kvv_sbuf_str(&f.body, "<div class=\"plots\">\n");
    for (int k = 0; k < 3; k++) {
        int nl = (int)json_array_size(json_object_get(json_array_get(vars, 0), tensors[k]));
        char xl[64];
        snprintf(xl, sizeof xl, "layer — %s%s", tensors[k], k == 2 ? " (last = output)" : "");
        kvv_svg_axis x = {.label = xl, .lo = -0.5, .hi = nl - 0.5, .integer = true};
        kvv_svg_axis y = {.label = "max ULP vs all-at-once"};
        kvv_range_log_axis(&r, &y);
        kvv_svg s;
        kvv_fig_plot(&f, &s, THIRD, 280, &x, &y);
        long long nonzero = 0;
        json_array_foreach(vars, i, v) {
            const json_t *a = json_object_get(v, tensors[k]);
            int n = (int)json_array_size(a);
            double *xs = calloc((size_t)n + 1, sizeof *xs), *ys = calloc((size_t)n + 1, sizeof *ys);
            if (!xs || !ys)
                n = 0;
            for (int l = 0; l < n; l++) {
                xs[l] = l;
                ys[l] = arr_num(a, (size_t)l);
                nonzero += !(ys[l] == 0);
            }
            kvv_svg_line(&s, xs, ys, n, kvv_svg_color((int)i), NULL);
            for (int l = 0; l < n; l++)
                kvv_svg_point(&s, l, ys[l], kvv_svg_color((int)i), (kvv_svg_shape)(i % 4),
                              "%s, %s layer %d: max %.0f ULP", kvv_jget_str(v, "variant"),
                              tensors[k], l, ys[l]);
            free(xs);
            free(ys);
        }
        if (!nonzero)
            kvv_svg_banner(&s, "0 ULP at every layer");
        kvv_fig_plot_end(&f, &s);
    }
    kvv_sbuf_str(&f.body, "</div>\n");
    if (any_nan)
        kvv_fig_note(&f, "A NaN was involved where a point is missing.");
    kvv_fig_end(b, &f);
}

/* ------------------------------------------------------------------ compare */

static void compare_by_layer(kvv_sbuf *b, const json_t *check, const char *p, const char *ab)
{
    static const char *const kinds[4] = {"residual", "K", "V", "attn_out"};
    const json_t *rows = json_object_get(check, "layers");
    kvv_range r;
    kvv_range_init(&r);
    int max_layer = -1;
    size_t i;
    const json_t *w;
    json_array_foreach(rows, i, w) {
        long long l = kvv_jget_int(w, "layer", -1);
        if (l < 0)
            continue;
        kvv_range_add(&r, kvv_jget_num(w, "nmse"));
        if (l > max_layer)
            max_layer = (int)l;
    }
    if (max_layer < 0)
        return;
    kvv_fig f;
    char title[256];
    snprintf(title, sizeof title, "%s: NMSE per layer (residual entering the layer, K, V, "
                                  "attention output)", ab);
    kvv_fig_begin(&f, p, "compare-layer-nmse", title,
                  "NMSE = Σ(B − A)² / ΣA² with A the reference. 0 (the band) is bit-equal; the "
                  "verdict is on the logits (next figure): it passes within the relative "
                  "tolerance with top-1 agreement.");
    kvv_fig_key keys[4];
    for (int k = 0; k < 4; k++)
        keys[k] = (kvv_fig_key){kinds[k], kvv_svg_color(k), (kvv_svg_shape)k, NULL};
    kvv_fig_legend(&f, keys, 4);
    kvv_svg_axis x = {.label = "layer", .lo = -0.5, .hi = max_layer + 0.5, .integer = true};
    kvv_svg_axis y = {.label = "NMSE (B vs A)"};
    kvv_range_log_axis(&r, &y);
    kvv_svg s;
    kvv_fig_plot(&f, &s, WIDE, 300, &x, &y);
    double *xs = calloc((size_t)max_layer + 1, sizeof *xs);
    double *ys = calloc((size_t)max_layer + 1, sizeof *ys);
    for (int k = 0; k < 4 && xs && ys; k++) {
        int n = 0;
        json_array_foreach(rows, i, w) {
            long long l = kvv_jget_int(w, "layer", -1);
            if (l < 0 || strcmp(kvv_jget_str(w, "what"), kinds[k]) != 0 || n > max_layer)
                continue;
            xs[n] = (double)l;
            ys[n] = kvv_jget_num(w, "nmse");
            kvv_svg_point(&s, xs[n], ys[n], keys[k].color, keys[k].shape,
                          "%s layer %lld: NMSE %.6g, %lld of %lld elements differ", kinds[k], l,
                          ys[n], kvv_jget_int(w, "differing", 0), kvv_jget_int(w, "compared", 0));
            n++;
        }
        kvv_svg_line(&s, xs, ys, n, keys[k].color, NULL);
    }
    free(xs);
    free(ys);
    if (!r.any_pos)
        kvv_svg_banner(&s, "bit-equal at every layer: NMSE 0");
    kvv_fig_plot_end(&f, &s);
    kvv_fig_end(b, &f);
}

static void compare_by_position(kvv_sbuf *b, const json_t *check, const char *p, const char *ab)
{
    const json_t *d = details_of(check);
    const json_t *kl = json_object_get(d, "kl_by_position");
    const json_t *nm = json_object_get(d, "logits_nmse_by_position");
    int T = (int)json_array_size(kl);
    if (!T || (int)json_array_size(nm) != T)
        return;
    kvv_fig f;
    char title[160];
    snprintf(title, sizeof title, "%s: KL and logits NMSE per position", ab);
    kvv_fig_begin(&f, p, "compare-position", title,
                  "KL(p_A ‖ p_B) of the next-token distributions and the logits' NMSE at each "
                  "position; 0 (the band) is bit-equal logits.");
    kvv_sbuf_str(&f.body, "<div class=\"plots\">\n");
    const json_t *series[2] = {kl, nm};
    static const char *const ylab[2] = {"KL(p_A ‖ p_B) (nats)", "logits NMSE (B vs A)"};
    double *xs = calloc((size_t)T, sizeof *xs), *ys = calloc((size_t)T, sizeof *ys);
    for (int k = 0; k < 2 && xs && ys; k++) {
        kvv_range r;
        kvv_range_init(&r);
        for (int t = 0; t < T; t++) {
            xs[t] = t;
            ys[t] = arr_num(series[k], (size_t)t);
            kvv_range_add(&r, ys[t]);
        }
        kvv_svg_axis x = {.label = "position (token)", .lo = -0.5, .hi = T - 0.5,
                          .integer = true};
        kvv_svg_axis y = {.label = ylab[k]};
        kvv_range_log_axis(&r, &y);
        kvv_svg s;
        kvv_fig_plot(&f, &s, HALF, 280, &x, &y);
        kvv_svg_line(&s, xs, ys, T, kvv_svg_color(k), NULL);
        for (int t = 0; t < T; t++)
            kvv_svg_point(&s, t, ys[t], kvv_svg_color(k), (kvv_svg_shape)k,
                          "position %d: %s = %.9g (%a)", t, k ? "NMSE" : "KL", ys[t], ys[t]);
        if (!r.any_pos)
            kvv_svg_banner(&s, "0 at every position");
        kvv_fig_plot_end(&f, &s);
    }
    free(xs);
    free(ys);
    kvv_sbuf_str(&f.body, "</div>\n");
    char rel[32], tol[32]; /* a value past the tolerance never prints equal to it */
    kvv_figure_vs_bound(kvv_jget_num(d, "logits_max_rel"), kvv_jget_num(d, "rel_tol"), rel, tol,
                        sizeof rel);
    kvv_fig_note(&f, "KL mean %s, max %s; top-1 agrees at %lld of %d positions; worst relative "
                     "logit error %s at position %lld (tolerance %s).",
                 kvv_jget_str(d, "kl_mean"), kvv_jget_str(d, "kl_max"),
                 kvv_jget_int(d, "top1_agree", -1), T, rel,
                 kvv_jget_int(d, "logits_worst_position", -1), tol);
    kvv_fig_end(b, &f);
}

static void compare_residual_map(kvv_sbuf *b, const json_t *check, const char *p, const char *ab)
{
    const json_t *map = json_object_get(details_of(check), "residual_nmse_by_position");
    int L = (int)json_array_size(map);
    int T = (int)json_array_size(json_array_get(map, 0));
    if (!L || !T)
        return;
    kvv_range r;
    kvv_range_init(&r);
    bool any_nan = false;
    for (int l = 0; l < L; l++)
        for (int t = 0; t < T; t++) {
            double v = arr_num(json_array_get(map, (size_t)l), (size_t)t);
            any_nan |= isnan(v);
            kvv_range_add(&r, v);
        }
    kvv_fig f;
    char title[160], lo[48], hi[48];
    snprintf(title, sizeof title, "%s: NMSE of the residual stream per layer and position", ab);
    kvv_fig_begin(&f, p, "compare-residual-map", title,
                  "Where in depth and sequence the two engines part: green cells are "
                  "bit-equal residual rows; the colour grows with the NMSE (log scale).");
    snprintf(lo, sizeof lo, "NMSE %.2g", r.any_pos ? r.pos_lo : 0.0);
    snprintf(hi, sizeof hi, "NMSE %.2g", r.any_pos ? r.pos_hi : 0.0);
    if (r.any_pos)
        heat_legend(&f, "0 (bit-equal)", lo, r.pos_hi > r.pos_lo ? hi : NULL, any_nan);
    else
        heat_legend(&f, "0 (bit-equal)", "> 0 (none here)", NULL, any_nan);
    kvv_svg_axis x = {.label = "position (token)", .lo = -0.5, .hi = T - 0.5, .integer = true};
    kvv_svg_axis y = {.label = "layer (last = output)", .lo = -0.5, .hi = L - 0.5,
                      .integer = true};
    kvv_svg s;
    kvv_fig_plot(&f, &s, WIDE, heat_height(L), &x, &y);
    for (int l = 0; l < L; l++)
        for (int t = 0; t < T; t++) {
            double v = arr_num(json_array_get(map, (size_t)l), (size_t)t);
            char col[8];
            cell_color(v, r.pos_lo, r.pos_hi, col);
            kvv_svg_rect(&s, t - 0.5, l - 0.5, t + 0.5, l + 0.5, col,
                         "residual entering layer %d, position %d: NMSE %.6g", l, t, v);
        }
    if (!r.any_pos && !any_nan)
        kvv_svg_banner(&s, "bit-equal: every residual row identical");
    kvv_fig_plot_end(&f, &s);
    kvv_fig_end(b, &f);
}

void kvv_html_fig_compare(kvv_sbuf *b, const json_t *check, const char *p)
{
    const json_t *d = details_of(check);
    char ab[96];
    snprintf(ab, sizeof ab, "%s (A) vs %s (B)",
             kvv_jget_str(json_object_get(d, "engine_a"), "name"),
             kvv_jget_str(json_object_get(d, "engine_b"), "name"));
    compare_by_layer(b, check, p, ab);
    compare_by_position(b, check, p, ab);
    compare_residual_map(b, check, p, ab);
}

/* ------------------------------------------------------------------ kvdirect */

void kvv_html_fig_kvdirect(kvv_sbuf *b, const json_t *check, const char *p)
{
    const json_t *runs = json_object_get(details_of(check), "runs");
    int n = (int)json_array_size(runs);
    if (!n)
        return;
    const char **cats = calloc((size_t)n, sizeof *cats);
    char (*labels)[64] = calloc((size_t)n, sizeof *labels);
    if (!cats || !labels) {
        free(cats);
        free(labels);
        return;
    }
    kvv_range r;
    kvv_range_init(&r);
    for (int i = 0; i < n; i++) {
        const json_t *w = json_array_get(runs, (size_t)i);
        snprintf(labels[i], sizeof labels[i], "%s @%lld", kvv_jget_str(w, "policy"),
                 kvv_jget_int(w, "budget", -1));
        cats[i] = labels[i];
        kvv_range_add(&r, kvv_jget_num(w, "bytes_peak"));
    }
    kvv_fig f;
    kvv_fig_begin(&f, p, "kvdirect-runs",
                  "KV-Direct runs: peak bytes held (live K/V + residual checkpoints)",
                  "Passes when every run decodes bit-equal to the full cache (green bars); a "
                  "red bar is a run whose logits or tokens differ.");
    kvv_fig_key keys[2] = {{"bit-equal to the full cache", "#2da44e", KVV_SHAPE_SQUARE, ""},
                           {"differs", "#cf222e", KVV_SHAPE_SQUARE, ""}};
    kvv_fig_legend(&f, keys, 2);
    kvv_svg_axis x = {.label = "run (policy @ live budget in tokens)", .cats = cats,
                      .n_cats = n};
    kvv_svg_axis y = {.label = "peak bytes", .lo = 0, .hi = r.any ? r.hi * 1.1 : 1,
                      .fmt = KVV_FMT_BYTES};
    kvv_svg s;
    kvv_fig_plot(&f, &s, n > 6 ? WIDE : HALF, 280, &x, &y);
    for (int i = 0; i < n; i++) {
        const json_t *w = json_array_get(runs, (size_t)i);
        bool eq = json_is_true(json_object_get(w, "bit_equal"));
        double bytes = kvv_jget_num(w, "bytes_peak");
        kvv_svg_rect(&s, i - 0.3, 0, i + 0.3, bytes, eq ? "#2da44e" : "#cf222e",
                     "%s: peak %.0f B, token match %.1f%%, %s, %lld rows recomputed", labels[i],
                     bytes, 100 * kvv_jget_num(w, "greedy_match"),
                     eq ? "bit-equal" : "differs", kvv_jget_int(w, "recomputed_rows", -1));
    }
    kvv_fig_plot_end(&f, &s);
    kvv_fig_end(b, &f);
    free(cats);
    free(labels);
}
