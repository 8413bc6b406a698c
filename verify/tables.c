/* tables.c — the invariance check with each kernel table of the cpu engine,
 * and the figures between tables (see tables.h). */
#include "verify/tables.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_isa.h"
#include "verify/capture.h"
#include "verify/invariance.h"

/* One table: its invariance run and its whole-prompt forward. */
typedef struct {
    kvv_cpu_isa isa;
    kvv_check_result inv;   /* the invariance check with this table (owned) */
    kvv_capture cap;        /* K and V of the whole-prompt forward */
    float *logits;          /* [T][V] of that forward (owned) */
} table_run;

typedef struct {
    const kvv_check_opts *o;
    kvv_check_result *r;
    table_run t[KVV_CPU_ISA_COUNT];
    int n;                  /* tables this CPU runs, narrowest first */
    int T, V;
    int32_t *pos;           /* [T] 0..T-1 */
} tables_ctx;

static void progress(const tables_ctx *c, long done)
{
    if (c->o->progress)
        c->o->progress(c->o->progress_user, "tables", done, 2L * c->n);
}

/* o's engine options with kernel table isa, invariant mode. */
static kvv_engine_opts table_opts(const kvv_check_opts *o, kvv_cpu_isa isa, int n_positions)
{
    kvv_engine_opts eo = kvv_check_engine_opts(o, n_positions);
    eo.isa = kvv_cpu_isa_name(isa);
    eo.mode = KVV_MODE_INVARIANT;
    return eo;
}

/* The invariance check with table t->isa into t->inv; its rows merged into
 * one row of r, its controls and first mismatch carried over, named by the
 * table. @return KVV_ERR_NOMEM only (the run's own errors stay in t->inv). */
static kvv_status run_invariance(tables_ctx *c, table_run *t)
{
    const char *name = kvv_cpu_isa_name(t->isa);
    kvv_check_opts so = *c->o;
    so.engine = table_opts(c->o, t->isa, 0);
    so.progress = NULL;
    kvv_error e = {0};
    kvv_check_invariance(&so, &t->inv, &e); /* t->inv records any error */
    kvv_cmp_stats all;
    kvv_cmp_init(&all);
    for (int i = 0; i < t->inv.n_rows; i++)
        kvv_cmp_merge(&all, &t->inv.rows[i].st);
    char what[48], text[256];
    snprintf(what, sizeof what, "invariance %s", name);
    if (kvv_check_add_row(c->r, -1, what, &all))
        return KVV_ERR_NOMEM;
    if (t->inv.has_mismatch) {
        const kvv_mismatch *m = &t->inv.mismatch;
        kvv_check_row_where(c->r, "%s l=%d t=%d", m->tensor, m->layer, m->token);
        kvv_mismatch mm = *m;
        snprintf(text, sizeof text, "%s %s", name, m->variant);
        kvv_text_fit(mm.variant, sizeof mm.variant, text);
        kvv_check_note_mismatch(c->r, &mm);
    }
    for (int i = 0; i < t->inv.n_controls; i++) {
        const kvv_control_result *k = &t->inv.controls[i];
        snprintf(text, sizeof text, "%s: %s", name, k->name);
        char cname[sizeof k->name];
        kvv_text_fit(cname, sizeof cname, text);
        if (kvv_check_add_control(c->r, cname, k->detected, "%s", k->detail))
            return KVV_ERR_NOMEM;
    }
    char mm[256] = "";
    if (t->inv.has_mismatch)
        kvv_mismatch_format(&t->inv.mismatch, mm, sizeof mm);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "table", name, "verdict",
                          kvv_verdict_name(t->inv.verdict), "key_figure",
                          kvv_check_key_figure(&t->inv), "message", kvv_check_message(&t->inv),
                          "compared", (json_int_t)all.n, "differing", (json_int_t)all.n_diff,
                          "first_mismatch", mm);
    json_array_append_new(json_object_get(c->r->details, "tables"), j);
    return KVV_OK;
}

/* The whole prompt in one forward with table t->isa: K, V and the logits. */
static kvv_status run_forward(tables_ctx *c, table_run *t, kvv_error *err)
{
    const kvv_check_opts *o = c->o;
    kvv_status s = kvv_capture_init(&t->cap, &o->model->hp, c->T, KVV_CAPTURE_KV, err);
    if (s)
        return s;
    if (!(t->logits = malloc(sizeof(float) * (size_t)c->T * (size_t)c->V)))
        return kvv_error_set(err, KVV_ERR_NOMEM, "tables: out of memory");
    kvv_engine_opts eo = table_opts(o, t->isa, c->T);
    kvv_engine *e = NULL;
    s = kvv_check_open_engine(o->model, &eo, KVV_ENGINE_CAP_LOGITS_ALL | KVV_ENGINE_CAP_KV_HOOK,
                              "tables", &e, err);
    if (s)
        return s;
    kvv_capture_poison(&t->cap);
    kvv_hooks h = kvv_capture_hooks(&t->cap);
    s = kvv_engine_forward(e, c->T, o->tokens, c->pos, &h, KVV_LOGITS_ALL, t->logits, err);
    kvv_engine_close(e);
    return s;
}

/* Compare a [layers][T][dim] (or [T][dim]) buffer of table a with b's into
 * a row "KIND B vs A" (layers = 0: no layer in the place). @return the stats. */
static kvv_cmp_stats cross_row(tables_ctx *c, const char *kind, const char *na, const char *nb,
                               const float *a, const float *b, int layers, int dim,
                               kvv_status *s)
{
    kvv_cmp_stats st;
    kvv_cmp_init(&st);
    size_t n = (size_t)(layers ? layers : 1) * (size_t)c->T * (size_t)dim;
    kvv_cmp_update(&st, a, b, n);
    char what[48];
    snprintf(what, sizeof what, "%s %s vs %s", kind, nb, na);
    if (kvv_check_add_row(c->r, -1, what, &st)) {
        *s = KVV_ERR_NOMEM;
        return st;
    }
    if (st.first >= 0) {
        long long f = st.first, per = (long long)c->T * dim;
        if (layers)
            kvv_check_row_where(c->r, "l=%lld,t=%lld,i=%lld", f / per, f % per / dim, f % dim);
        else
            kvv_check_row_where(c->r, "t=%lld,i=%lld", f / dim, f % dim);
    }
    return st;
}

/* Each pair of tables: K, V and logits rows, and details.cross_table;
 * the pairs' largest logits ULP and NMSE (for the key figure). */
static kvv_status cross_tables(tables_ctx *c, uint64_t *max_ulp, double *max_nmse)
{
    kvv_status s = KVV_OK;
    json_t *arr = json_object_get(c->r->details, "cross_table");
    *max_ulp = 0;
    *max_nmse = 0;
    for (int i = 0; i < c->n && !s; i++)
        for (int k = i + 1; k < c->n && !s; k++) {
            const table_run *a = &c->t[i], *b = &c->t[k];
            const char *na = kvv_cpu_isa_name(a->isa), *nb = kvv_cpu_isa_name(b->isa);
            const kvv_capture *ca = &a->cap;
            kvv_cmp_stats sk = cross_row(c, "K", na, nb, ca->k, b->cap.k, ca->n_layer, ca->kdim, &s);
            kvv_cmp_stats sv = cross_row(c, "V", na, nb, ca->v, b->cap.v, ca->n_layer, ca->vdim, &s);
            kvv_cmp_stats sl = cross_row(c, "logits", na, nb, a->logits, b->logits, 0, c->V, &s);
            json_array_append_new(arr, json_pack("{s:s, s:s, s:o, s:o, s:o}", "a", na, "b", nb,
                                                 "K", kvv_cmp_stats_to_json(&sk), "V",
                                                 kvv_cmp_stats_to_json(&sv), "logits",
                                                 kvv_cmp_stats_to_json(&sl)));
            double nm = kvv_cmp_nmse(&sl);
            *max_ulp = sl.max_ulp > *max_ulp ? sl.max_ulp : *max_ulp;
            *max_nmse = nm > *max_nmse || isnan(nm) ? nm : *max_nmse;
        }
    return s;
}

/* The verdict from the per-table runs and the cross-table figures. */
static void conclude(tables_ctx *c, uint64_t lg_ulp, double lg_nmse)
{
    char names[64] = "", bad[64] = "", ulp[24], nmse[24], fig[128];
    int n_bad = 0, n_err = 0, n_skip = 0, off = 0, boff = 0;
    const table_run *first_bad = NULL, *first_err = NULL, *first_skip = NULL;
    for (int i = 0; i < c->n; i++) {
        const table_run *t = &c->t[i];
        const char *nm = kvv_cpu_isa_name(t->isa);
        if (t->inv.verdict == KVV_VERDICT_PASS) {
            off += snprintf(names + off, sizeof names - (size_t)off, "%s%s", off ? ", " : "", nm);
        } else if (t->inv.verdict == KVV_VERDICT_FAIL) {
            boff += snprintf(bad + boff, sizeof bad - (size_t)boff, "%s%s", n_bad ? ", " : "", nm);
            first_bad = first_bad ? first_bad : t;
            n_bad++;
        } else if (t->inv.verdict == KVV_VERDICT_SKIPPED) {
            first_skip = first_skip ? first_skip : t;
            n_skip++;
        } else {
            first_err = first_err ? first_err : t;
            n_err++;
        }
    }
    snprintf(fig, sizeof fig, "across tables logits max ULP %s, NMSE %s (tables differ by design)",
             kvv_ulp_text(lg_ulp, ulp, sizeof ulp), kvv_figure_text(lg_nmse, nmse, sizeof nmse));
    if (n_bad) {
        kvv_check_set_verdict(c->r, KVV_VERDICT_FAIL, "invariance fails with table%s %s; %s",
                              n_bad > 1 ? "s" : "", bad, fig);
        kvv_check_set_message(c->r, "table %s: %s%s%s", kvv_cpu_isa_name(first_bad->isa),
                              kvv_check_key_figure(&first_bad->inv),
                              kvv_check_message(&first_bad->inv)[0] ? "; " : "",
                              kvv_check_message(&first_bad->inv));
    } else if (n_err) {
        kvv_check_set_verdict(c->r, KVV_VERDICT_ERROR, "the invariance run with table %s did "
                              "not complete", kvv_cpu_isa_name(first_err->isa));
        kvv_check_set_message(c->r, "table %s: %s", kvv_cpu_isa_name(first_err->isa),
                              kvv_check_message(&first_err->inv));
    } else if (n_skip == c->n) { /* nothing compared with any table: never a pass */
        kvv_check_set_verdict(c->r, KVV_VERDICT_SKIPPED, "invariance had nothing to compare "
                              "with any table");
        kvv_check_set_message(c->r, "table %s: %s", kvv_cpu_isa_name(first_skip->isa),
                              kvv_check_message(&first_skip->inv));
    } else {
        kvv_check_set_verdict(c->r, KVV_VERDICT_PASS, "%d tables each bit-exact under invariance "
                              "(%s)%s%s; %s", c->n - n_skip, names, n_skip ? ", skipped: " : "",
                              n_skip ? kvv_cpu_isa_name(first_skip->isa) : "", fig);
    }
}

/* The CPU's tables, the runs, the figures. */
static kvv_status body(void *ctx, kvv_error *err)
{
    tables_ctx *c = ctx;
    const kvv_check_opts *o = c->o;
    const char *engine = o->engine.name ? o->engine.name : "ref";
    if (!kvv_engine_takes(engine, KVV_ENGINE_OPT_ISA))
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED, "engine %s has no kernel tables (the "
                             "tables check runs the cpu engine with each of its tables)", engine);
    kvv_cpu_isa_info ci;
    kvv_status s = kvv_cpu_isa_probe(&ci, err);
    if (s)
        return s;
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++)
        if (ci.can_run[i])
            c->t[c->n++].isa = (kvv_cpu_isa)i;
    json_object_set_new(c->r->details, "mode", json_string("invariant"));
    json_object_set_new(c->r->details, "tables", json_array());
    json_object_set_new(c->r->details, "cross_table", json_array());
    json_object_set_new(c->r->details, "note",
                        json_string("invariant mode is bit-exact per table; the tables differ "
                                    "from each other by design (each has its own reduction "
                                    "order), so the cross-table figures are no verdict"));
    if (c->n < 2) {
        char why[96] = "";
        if (ci.max_isa[0])
            snprintf(why, sizeof why, " (KVV_CPU_MAX_ISA=%s)", ci.max_isa);
        kvv_check_set_verdict(c->r, KVV_VERDICT_SKIPPED, "one kernel table runs here (%s): "
                              "nothing to compare", kvv_cpu_isa_name(ci.best));
        kvv_check_set_message(c->r, "this CPU runs only the %s kernel table%s; the tables "
                              "check needs two or more (kvverify info --cpu)",
                              kvv_cpu_isa_name(ci.best), why);
        return KVV_OK;
    }
    c->T = o->n_tokens;
    c->V = o->model->hp.n_vocab;
    if (!(c->pos = malloc(sizeof(int32_t) * (size_t)c->T)))
        return kvv_error_set(err, KVV_ERR_NOMEM, "tables: out of memory");
    for (int t = 0; t < c->T; t++)
        c->pos[t] = t;
    /* the engine the options select (--isa, else the widest) describes the check */
    kvv_cpu_isa chosen = ci.best;
    kvv_error cerr = {0};
    if (kvv_cpu_isa_choose(o->engine.isa, &chosen, &cerr))
        chosen = ci.best;
    for (int i = 0; i < c->n; i++) {
        table_run *t = &c->t[i];
        if ((s = run_invariance(c, t)))
            return kvv_error_set(err, s, "tables: out of memory");
        progress(c, 2L * i + 1);
        if ((s = run_forward(c, t, err)))
            return s;
        progress(c, 2L * i + 2);
        if (t->isa == chosen && t->inv.has_engine)
            kvv_check_set_engine(c->r, &t->inv.engine);
    }
    uint64_t lg_ulp;
    double lg_nmse;
    if ((s = cross_tables(c, &lg_ulp, &lg_nmse)))
        return kvv_error_set(err, s, "tables: out of memory");
    conclude(c, lg_ulp, lg_nmse);
    return KVV_OK;
}

kvv_status kvv_check_tables(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err)
{
    tables_ctx c = {.o = o, .r = r};
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++)
        kvv_check_result_init(&c.t[i].inv, "invariance");
    kvv_status s = kvv_check_frame(o, r, o->n_tokens, body, &c, err);
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++) {
        kvv_check_result_free(&c.t[i].inv);
        kvv_capture_free(&c.t[i].cap);
        free(c.t[i].logits);
    }
    free(c.pos);
    return s;
}
