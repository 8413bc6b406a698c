/* html_ops.c — the figure of the ops check (verify/ops_check.h): a layer ×
 * op heat map of each op's local error against its budget (see
 * html_impl.h). Reads the check's details.ops and nothing else. */
#include "verify/report/html_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define WITHIN_CELL "#d9f2df"  /* within budget */
#define NONE_CELL "#eeeeee"    /* not tapped / not checked */
#define FIRST_MARK "#6f42c1"

/* The ops of the vocabulary in data-flow order (docs/ops.md). */
static const char *const ops[] = {
    "attn_norm", "q", "k", "v", "q_norm", "k_norm", "q_rope", "k_rope", "attn_out", "wo",
    "post_attn_norm", "attn_resid", "ffn_norm", "ffn_gate", "ffn_up", "ffn_act", "ffn_down",
    "post_ffw_norm", "ffn_resid", "out_norm", "head"};
#define N_OPS ((int)(sizeof ops / sizeof ops[0]))

static int op_index(const char *name)
{
    for (int i = 0; i < N_OPS; i++)
        if (strcmp(name, ops[i]) == 0)
            return i;
    return -1;
}

void kvv_html_fig_ops(kvv_sbuf *b, const json_t *check, const char *p)
{
    const json_t *d = json_object_get(json_object_get(check, "details"), "ops");
    const json_t *table = json_object_get(d, "table");
    if (!json_array_size(table))
        return;
    int n_layer = 0;
    double worst = 1.0;
    size_t i;
    const json_t *row;
    json_array_foreach(table, i, row) {
        int l = (int)kvv_jget_int(row, "layer", 0);
        n_layer = l + 1 > n_layer ? l + 1 : n_layer;
        const json_t *r = json_object_get(row, "ratio");
        if (r && kvv_jnum(r) > worst)
            worst = kvv_jnum(r);
    }
    const json_t *first = json_object_get(d, "first");
    const char *f_op = kvv_jget_str(first, "op");
    long long f_layer = kvv_jget_int(first, "layer", -1);

    kvv_fig f;
    kvv_fig_begin(&f, p, "ops-heat", "Local error of each op against its budget, per layer",
                  "Each cell is one op of one layer of engine B, recomputed exactly on B's own "
                  "inputs: green within its fp32 budget, coloured by error / budget beyond it; "
                  "grey not tapped (or its input not). The first op beyond budget is framed.");
    char c_lo[8], c_hi[8], hi_name[64];
    kvv_svg_ramp(0.15, c_lo);
    kvv_svg_ramp(1.0, c_hi);
    snprintf(hi_name, sizeof hi_name, "%.3g × budget (largest here)", worst);
    kvv_fig_key keys[4] = {{"within budget", WITHIN_CELL, KVV_SHAPE_SQUARE, ""},
                           {"just beyond", c_lo, KVV_SHAPE_SQUARE, ""},
                           {hi_name, c_hi, KVV_SHAPE_SQUARE, ""},
                           {"not tapped / not checked", NONE_CELL, KVV_SHAPE_SQUARE, ""}};
    kvv_fig_legend(&f, keys, 4);
    kvv_svg_axis x = {.label = "op (data-flow order)", .lo = -0.5, .hi = N_OPS - 0.5,
                      .cats = ops, .n_cats = N_OPS};
    kvv_svg_axis y = {.label = "layer (last: out_norm, head)", .lo = -0.5, .hi = n_layer - 0.5,
                      .integer = true};
    kvv_svg s;
    int h = n_layer * 16 + 110;
    kvv_fig_plot(&f, &s, 1080, h < 180 ? 180 : h > 520 ? 520 : h, &x, &y);
    int beyond = 0;
    json_array_foreach(table, i, row) {
        const int c = op_index(kvv_jget_str(row, "op"));
        const int l = (int)kvv_jget_int(row, "layer", 0);
        if (c < 0)
            continue;
        const char *state = kvv_jget_str(row, "state");
        const json_t *r = json_object_get(row, "ratio");
        char col[8];
        if (!r) {
            snprintf(col, sizeof col, "%s", NONE_CELL);
            kvv_svg_rect(&s, c - 0.5, l - 0.5, c + 0.5, l + 0.5, col, "%s layer %d: %s",
                         ops[c], l, state);
            continue;
        }
        const double ratio = kvv_jnum(r);
        if (ratio <= 1.0) {
            snprintf(col, sizeof col, "%s", WITHIN_CELL);
        } else {
            beyond++;
            const double t = worst > 1.0 ? log(ratio) / log(worst) : 1.0;
            kvv_svg_ramp(0.15 + 0.85 * (isnan(t) ? 1.0 : t), col);
        }
        kvv_svg_rect(&s, c - 0.5, l - 0.5, c + 0.5, l + 0.5, col,
                     "%s layer %d: error %.3g u, budget %.3g u (%.3g × budget), max ULP %lld, "
                     "rel %.3g", ops[c], l, kvv_jnum(json_object_get(row, "err_u")),
                     kvv_jnum(json_object_get(row, "budget_u")), ratio,
                     kvv_jget_int(row, "max_ulp", 0), kvv_jnum(json_object_get(row, "rel")));
    }
    const int fc = f_op[0] ? op_index(f_op) : -1;
    if (fc >= 0 && f_layer >= 0) {
        char lab[64];
        snprintf(lab, sizeof lab, "first beyond: %s L%lld", f_op, f_layer);
        kvv_svg_frame(&s, fc - 0.5, f_layer - 0.5, fc + 0.5, f_layer + 0.5, FIRST_MARK);
        kvv_svg_vline(&s, (double)fc, FIRST_MARK, lab);
    }
    if (!beyond)
        kvv_svg_banner(&s, "every op tapped is within its budget");
    kvv_fig_plot_end(&f, &s);
    if (beyond)
        kvv_fig_note(&f, "%d ops beyond budget; the first is %s of layer %lld.", beyond, f_op,
                     f_layer);
    else
        kvv_fig_note(&f, "No op beyond its budget.");
    kvv_fig_end(b, &f);
}
