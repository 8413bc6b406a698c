/*
 * ops_check.c — the "ops" check: local error per operation as a report
 * result (verify/ops_check.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/json_num.h"
#include "verify/op_explain.h"
#include "verify/oplocal.h"
#include "verify/ops_check.h"

static json_t *row_json(const kvv_opl_row *w)
{
    json_t *o = json_object();
    json_object_set_new(o, "layer", json_integer(w->layer));
    json_object_set_new(o, "op", json_string(kvv_tap_name(w->op)));
    json_object_set_new(o, "state", json_string(kvv_opl_state_name(w->state)));
    if (w->state == KVV_OPL_NO_INPUT)
        json_object_set_new(o, "missing_input",
                            json_string(w->input == -1 ? "residual" : kvv_tap_name(w->input)));
    if (w->state == KVV_OPL_OK || w->state == KVV_OPL_BEYOND) {
        json_object_set_new(o, "n", json_integer(w->n));
        json_object_set_new(o, "n_diff", json_integer((json_int_t)w->n_diff));
        json_object_set_new(o, "err_u", kvv_json_number(w->max_err));
        json_object_set_new(o, "budget_u", kvv_json_number(w->budget));
        json_object_set_new(o, "ratio", kvv_json_number(w->max_ratio));
        json_object_set_new(o, "max_ulp", json_integer((json_int_t)w->max_ulp));
        json_object_set_new(o, "rel", kvv_json_number(w->max_rel));
        json_object_set_new(o, "pos", json_integer(w->where_pos));
        json_object_set_new(o, "i", json_integer(w->where_i));
        json_object_set_new(o, "got", kvv_json_number(w->got));
        json_object_set_new(o, "want", kvv_json_number(w->want));
    }
    return o;
}

static json_t *explanation_json(const kvv_opl_explanation *x)
{
    json_t *o = json_object(), *hs = json_array(), *names = json_array();
    for (int k = 0; k < KVV_OPL_N_HYP; k++) {
        const kvv_opl_hyp_result *h = &x->h[k];
        if (!h->applies)
            continue;
        json_t *j = json_object();
        json_object_set_new(j, "name", json_string(h->name));
        json_object_set_new(j, "bits_equal", kvv_json_number(h->bits_equal));
        json_object_set_new(j, "resid_u", kvv_json_number(h->resid));
        json_object_set_new(j, "hyp_err_u", kvv_json_number(h->hyp_err));
        json_object_set_new(j, "reproduces", json_boolean(h->reproduces));
        json_object_set_new(j, "explains", json_boolean(h->explains));
        json_array_append_new(hs, j);
        if (h->explains)
            json_array_append_new(names, json_string(h->name));
    }
    json_object_set_new(o, "hypotheses", hs);
    json_object_set_new(o, "explained", names);
    json_object_set_new(o, "none_known", json_boolean(x->n_explained == 0));
    return o;
}

/* "inputs rounded to f16 (bits 100%)" for each that explains, or "none of the known". */
static void explained_text(const kvv_opl_explanation *x, char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = 0;
    for (int k = 0; k < KVV_OPL_N_HYP && off < size; k++) {
        const kvv_opl_hyp_result *h = &x->h[k];
        if (h->explains)
            off += (size_t)snprintf(buf + off, size - off, "%s%s (%.1f%% bits equal, within "
                                    "%.3g u)", off ? "; " : "", h->name, 100.0 * h->bits_equal,
                                    h->resid);
    }
    if (!off)
        snprintf(buf, size, "none of the known hypotheses");
}

/* The op the control plants into: the middle layer's ffn_up, else the
 * last checked op. @return its row index, -1 if none. */
static int control_slot(const kvv_opl_report *rep)
{
    const kvv_opl_row *w = kvv_opl_row_at(rep, rep->n_layer / 2, KVV_TAP_UP);
    if (w && (w->state == KVV_OPL_OK || w->state == KVV_OPL_BEYOND))
        return (int)(w - rep->rows);
    for (int s = (rep->n_layer + 1) * KVV_TAP_COUNT - 1; s >= 0; s--)
        if (rep->rows[s].state == KVV_OPL_OK || rep->rows[s].state == KVV_OPL_BEYOND)
            return s;
    return -1;
}

static void run_control(kvv_opl_report *rep, kvv_check_result *r)
{
    const int s = control_slot(rep);
    if (s < 0)
        return;
    const int layer = rep->rows[s].layer, op = rep->rows[s].op;
    const int earlier = rep->first >= 0 && rep->first < s;
    int t = rep->n_pos / 2;
    kvv_opl_plant(rep, layer, op, t, 0, 1e-2);
    kvv_opl_check_all(rep);
    const kvv_opl_row *w = kvv_opl_row_at(rep, layer, op);
    const bool found = earlier ? w->state == KVV_OPL_BEYOND : rep->first == s;
    const kvv_opl_row *f = rep->first >= 0 ? &rep->rows[rep->first] : NULL;
    kvv_check_add_control(r, "1% error planted in one element of one op", found,
                          "planted in %s L%d pos %d i 0; first beyond budget: %s L%d%s",
                          kvv_tap_name(op), layer, t, f ? kvv_tap_name(f->op) : "none",
                          f ? f->layer : -1,
                          !found   ? " (NOT found)"
                          : earlier ? " (an earlier op was beyond already; the planted op is "
                                      "found beyond budget)"
                                    : " (named exactly)");
}

kvv_status kvv_ops_check_run(const kvv_model *m, const kvv_engine_opts *b,
                             const int32_t *tokens, int n, bool controls, kvv_check_result *r,
                             kvv_error *err)
{
    kvv_opl_report rep;
    kvv_status st = kvv_opl_run(m, b, tokens, n, &rep, err);
    if (st) {
        kvv_check_set_error(r, err);
        return st;
    }
    json_t *d = json_object(), *table = json_array(), *nt = json_array();
    json_object_set_new(d, "engine", json_string(rep.engine));
    for (int s = 0; s < (rep.n_layer + 1) * KVV_TAP_COUNT; s++) {
        const kvv_opl_row *w = &rep.rows[s];
        if (w->state == KVV_OPL_ABSENT)
            continue;
        json_array_append_new(table, row_json(w));
        if (w->state == KVV_OPL_NOT_TAPPED && w->layer == 0)
            json_array_append_new(nt, json_string(kvv_tap_name(w->op)));
        if (w->state == KVV_OPL_NOT_TAPPED && kvv_tap_is_final(w->op))
            json_array_append_new(nt, json_string(kvv_tap_name(w->op)));
        if (w->state != KVV_OPL_OK && w->state != KVV_OPL_BEYOND)
            continue;
        kvv_cmp_stats cs;
        kvv_cmp_init(&cs);
        cs.n = (uint64_t)w->n;
        cs.n_diff = w->n_diff;
        cs.max_ulp = w->max_ulp;
        cs.max_abs = fabs((double)w->got - w->want);
        kvv_check_add_row(r, w->layer, kvv_tap_name(w->op), &cs);
        kvv_check_row_where(r, "err %.3g u / budget %.3g u%s, rel %.2g, pos %d i %d",
                            w->max_err, w->budget, w->state == KVV_OPL_BEYOND ? " BEYOND" : "",
                            w->max_rel, w->where_pos, w->where_i);
    }
    json_object_set_new(d, "n_checked", json_integer(rep.n_checked));
    json_object_set_new(d, "n_beyond", json_integer(rep.n_beyond));
    json_object_set_new(d, "not_tapped", nt);
    char why[1024] = "";
    if (rep.first >= 0) {
        const kvv_opl_row *f = &rep.rows[rep.first];
        json_object_set_new(d, "first", row_json(f));
        kvv_opl_explanation x;
        if (kvv_opl_explain(&rep, f->layer, f->op, &x)) {
            json_object_set_new(d, "explanation", explanation_json(&x));
            explained_text(&x, why, sizeof why);
        }
    } else {
        json_object_set_new(d, "first", json_null());
    }
    json_object_set_new(d, "table", table);
    json_object_set_new(r->details, "ops", d);

    if (rep.n_checked == 0) {
        kvv_check_set_verdict(r, KVV_VERDICT_SKIPPED, "no op checked (%d tapped)", rep.n_tapped);
        kvv_check_set_message(r, "engine %s emits no op whose inputs it also emits",
                              rep.engine);
    } else if (rep.first >= 0) {
        const kvv_opl_row *f = &rep.rows[rep.first];
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL,
                              "first op beyond budget: %s L%d: err %.3g u > budget %.3g u, max "
                              "ULP %llu, rel %.3g at pos %d i %d (got %.9g, exact %.9g); %d of %d "
                              "ops beyond; explained by: %s",
                              kvv_tap_name(f->op), f->layer, f->max_err, f->budget,
                              (unsigned long long)f->max_ulp, f->max_rel, f->where_pos,
                              f->where_i, (double)f->got, f->want, rep.n_beyond, rep.n_checked,
                              why);
    } else {
        kvv_check_set_verdict(r, KVV_VERDICT_PASS, "%d ops within budget (%d tapped)",
                              rep.n_checked, rep.n_tapped);
    }
    if (controls && rep.n_checked > 0)
        run_control(&rep, r);
    if (r->verdict == KVV_VERDICT_PASS && kvv_check_controls_missed(r))
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "control not detected: a planted op error "
                              "was not named");
    kvv_opl_free(&rep);
    return KVV_OK;
}

kvv_status kvv_check_ops(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err)
{
    return kvv_ops_check_run(o->model, &o->engine, o->tokens, o->n_tokens, o->controls, r, err);
}
