/* tables.c — the invariance check with each kernel table of the cpu engine,
 * and the figures between tables (see tables.h). */
#include "verify/tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_isa.h"
#include "verify/capture.h"
#include "verify/invariance.h"
#include "verify/table_bounds.h"

/* One table: its invariance run and its whole-prompt forward. */
typedef struct {
    kvv_cpu_isa isa;
    kvv_check_result inv;   /* the invariance check with this table (owned) */
    kvv_capture cap;        /* residuals, K and V of the whole-prompt forward */
    float *logits;          /* [T][V] of that forward (owned) */
} table_run;

/* A pair's figures layer by layer (table A continued from B's residuals). */
typedef struct {
    double layer_rel;       /* the largest layer's residual relative RMS error */
    int layer;              /* ... at this layer (1..n_layer) */
    double logit_rel;       /* the largest max|Δlogit| / max|logit_B| */
    int pos;                /* ... at this position */
} pair_fig;

typedef struct {
    const kvv_check_opts *o;
    kvv_check_result *r;
    table_run t[KVV_CPU_ISA_COUNT];
    int n;                  /* tables this CPU runs, narrowest first */
    int T, V;
    int32_t *pos;           /* [T] 0..T-1 */
    kvv_table_bound lb, hb; /* the bounds of the layers and the head */
    kvv_capture lw;         /* scratch: A's residuals, layer by layer */
    float *lw_logits;       /* scratch: A's logits, layer by layer [T][V] */
    pair_fig worst;         /* over the pairs: the largest figures */
    char worst_pair[48];    /* ... of which pair ("avx2 vs generic") */
    int over;               /* pairs past a bound */
    char over_text[320];    /* the first pair past a bound, and how */
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
    kvv_status s = kvv_capture_init(&t->cap, &o->model->hp, c->T,
                                    KVV_CAPTURE_RESID | KVV_CAPTURE_KV, err);
    if (s)
        return s;
    if (!(t->logits = malloc(sizeof(float) * (size_t)c->T * (size_t)c->V)))
        return kvv_error_set(err, KVV_ERR_NOMEM, "tables: out of memory");
    kvv_engine_opts eo = table_opts(o, t->isa, c->T);
    kvv_engine *e = NULL;
    s = kvv_check_open_engine(o->model, &eo, KVV_ENGINE_CAP_LOGITS_ALL | KVV_ENGINE_CAP_KV_HOOK |
                                                 KVV_ENGINE_CAP_RESIDUAL_WRITE,
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

/* max|Δ| / max|ref| per position of [T][V] logits, the largest (NaN
 * counts as the worst); *at its position. */
static double logit_rel(const float *ref, const float *test, int T, int V, int *at)
{
    double worst = 0;
    *at = 0;
    for (int t = 0; t < T; t++) {
        double md = 0, mr = 0;
        for (int i = 0; i < V; i++) {
            const size_t k = (size_t)t * V + i;
            const double d = fabs((double)test[k] - (double)ref[k]);
            md = d > md || isnan(d) ? d : md;
            mr = fabs((double)ref[k]) > mr ? fabs((double)ref[k]) : mr;
        }
        const double rel = mr > 0 ? md / mr : md;
        if (!(rel <= worst)) {
            worst = rel;
            *at = t;
        }
    }
    return worst;
}

/* The largest layer's residual error of capture a (A, layer by layer)
 * against b's. */
static void layer_rel(const tables_ctx *c, const kvv_capture *a, const kvv_capture *b,
                      pair_fig *f)
{
    f->layer_rel = 0;
    f->layer = 1;
    const size_t n = (size_t)c->T * (size_t)a->n_embd;
    for (int l = 1; l <= a->n_layer; l++) {
        const double rel = kvv_rel_rms(kvv_capture_resid(b, l, 0), kvv_capture_resid(a, l, 0), n);
        if (!(rel <= f->layer_rel)) {
            f->layer_rel = rel;
            f->layer = l;
        }
    }
}

/* Table a's whole prompt continued from b's residual at every layer (b's
 * forward already ran): a's residuals into c->lw, logits c->lw_logits. */
static kvv_status layer_by_layer(tables_ctx *c, const table_run *a, const table_run *b,
                                 pair_fig *f, kvv_error *err)
{
    kvv_engine_opts eo = table_opts(c->o, a->isa, c->T);
    kvv_engine *e = NULL;
    kvv_status s = kvv_check_open_engine(c->o->model, &eo, KVV_ENGINE_CAP_LOGITS_ALL |
                                         KVV_ENGINE_CAP_RESIDUAL_WRITE, "tables", &e, err);
    if (s)
        return s;
    kvv_capture_poison(&c->lw);
    c->lw.feed = &b->cap;
    kvv_hooks h = kvv_capture_hooks(&c->lw);
    h.kv = NULL;
    s = kvv_engine_forward(e, c->T, c->o->tokens, c->pos, &h, KVV_LOGITS_ALL, c->lw_logits, err);
    kvv_engine_close(e);
    if (s)
        return s;
    layer_rel(c, &c->lw, &b->cap, f);
    f->logit_rel = logit_rel(b->logits, c->lw_logits, c->T, c->V, &f->pos);
    return KVV_OK;
}

/* Does f pass the bounds? The reasons it does not, into why (size bytes). */
static bool within(const tables_ctx *c, const pair_fig *f, char *why, size_t size)
{
    char v[32], b[32], kind[96];
    size_t off = 0;
    why[0] = '\0';
    if (!(f->layer_rel <= c->lb.bound)) {
        kvv_figure_vs_bound(f->layer_rel, c->lb.bound, v, b, sizeof v);
        int w = snprintf(why, size, "layer %d residual rel %s > bound %s (%s)", f->layer, v, b,
                         kvv_table_bound_text(&c->lb, kind, sizeof kind));
        off = w > 0 && (size_t)w < size ? (size_t)w : size - 1;
    }
    if (!(f->logit_rel <= c->hb.bound)) {
        kvv_figure_vs_bound(f->logit_rel, c->hb.bound, v, b, sizeof v);
        snprintf(why + off, size - off, "%slogits rel %s > bound %s at position %d (%s)",
                 off ? "; " : "", v, b, f->pos, kvv_table_bound_text(&c->hb, kind, sizeof kind));
    }
    return why[0] == '\0';
}

/* The control of the bound: a difference planted just past it (3 x the
 * layer bound of the worst layer's RMS into B's residual, 2 x the head
 * bound of max|logit| into one logit) must fail `within`. Restores b. */
static kvv_status bound_control(tables_ctx *c, table_run *b, const pair_fig *f, const char *pair)
{
    const size_t E = (size_t)b->cap.n_embd, n = (size_t)c->T * E;
    float *rb = kvv_capture_resid(&b->cap, f->layer, 0);
    float *saved = malloc(n * sizeof(float));
    if (!saved)
        return KVV_ERR_NOMEM;
    memcpy(saved, rb, n * sizeof(float));
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)rb[i] * (double)rb[i];
    const double shift = 3.0 * c->lb.bound * (ss > 0 ? sqrt(ss / (double)n) : 1.0);
    for (size_t i = 0; i < n; i++)
        rb[i] = (float)((double)kvv_capture_resid(&c->lw, f->layer, 0)[i] + shift);
    pair_fig pf = *f;
    layer_rel(c, &c->lw, &b->cap, &pf);
    memcpy(rb, saved, n * sizeof(float));
    free(saved);
    char why[256], name[160];
    bool failed = !within(c, &pf, why, sizeof why);
    snprintf(name, sizeof name, "%s: residual moved 3 x the layer bound", pair);
    if (kvv_check_add_control(c->r, name, failed, "layer %d shifted by %.3g: cross-table "
                              "verdict %s%s%s", f->layer, shift, failed ? "FAIL (" : "PASS",
                              failed ? why : " — the bound did not see it", failed ? ")" : ""))
        return KVV_ERR_NOMEM;
    /* one logit of A, 2 x the head bound of its position's max|logit_B| away */
    const size_t at = (size_t)f->pos * c->V;
    int k = 0;
    for (int i = 1; i < c->V; i++)
        if (fabsf(b->logits[at + i]) > fabsf(b->logits[at + k]))
            k = i;
    const float was = c->lw_logits[at + k], ref = b->logits[at + k];
    const double m = fabs((double)ref) > 0 ? fabs((double)ref) : 1.0;
    c->lw_logits[at + k] = (float)((double)ref - copysign(2.0 * c->hb.bound * m, (double)ref));
    pf = *f;
    pf.logit_rel = logit_rel(b->logits, c->lw_logits, c->T, c->V, &pf.pos);
    c->lw_logits[at + k] = was;
    failed = !within(c, &pf, why, sizeof why);
    snprintf(name, sizeof name, "%s: a logit moved 2 x the head bound", pair);
    if (kvv_check_add_control(c->r, name, failed, "logits[t=%d,i=%d]: cross-table verdict %s%s%s",
                              f->pos, k, failed ? "FAIL (" : "PASS",
                              failed ? why : " — the bound did not see it", failed ? ")" : ""))
        return KVV_ERR_NOMEM;
    return KVV_OK;
}

/* Each pair of tables: end to end, K, V and logits rows (figures, no
 * bound); layer by layer, the figures the bounds judge (details.cross_table,
 * c->worst, c->over), and for the first pair the bound's control. */
static kvv_status cross_tables(tables_ctx *c, kvv_error *err)
{
    kvv_status s = KVV_OK;
    json_t *arr = json_object_get(c->r->details, "cross_table");
    for (int i = 0; i < c->n && !s; i++)
        for (int k = i + 1; k < c->n && !s; k++) {
            table_run *a = &c->t[i], *b = &c->t[k];
            const char *na = kvv_cpu_isa_name(a->isa), *nb = kvv_cpu_isa_name(b->isa);
            const kvv_capture *ca = &a->cap;
            kvv_cmp_stats sk = cross_row(c, "K", na, nb, ca->k, b->cap.k, ca->n_layer, ca->kdim, &s);
            kvv_cmp_stats sv = cross_row(c, "V", na, nb, ca->v, b->cap.v, ca->n_layer, ca->vdim, &s);
            kvv_cmp_stats sl = cross_row(c, "logits", na, nb, a->logits, b->logits, 0, c->V, &s);
            if (s)
                return kvv_error_set(err, s, "tables: out of memory");
            pair_fig f;
            if ((s = layer_by_layer(c, a, b, &f, err)))
                return s;
            char pair[48], why[256];
            snprintf(pair, sizeof pair, "%s vs %s", nb, na);
            const bool ok = within(c, &f, why, sizeof why);
            if (!ok && c->over++ == 0)
                snprintf(c->over_text, sizeof c->over_text, "%s: %s", pair, why);
            if (!(f.layer_rel <= c->worst.layer_rel) || !c->worst_pair[0]) {
                c->worst.layer_rel = f.layer_rel;
                c->worst.layer = f.layer;
                snprintf(c->worst_pair, sizeof c->worst_pair, "%s", pair);
            }
            if (!(f.logit_rel <= c->worst.logit_rel)) {
                c->worst.logit_rel = f.logit_rel;
                c->worst.pos = f.pos;
            }
            json_array_append_new(
                arr, json_pack("{s:s, s:s, s:o, s:o, s:o, s:{s:o, s:i, s:o, s:i, s:b}}", "a", na,
                               "b", nb, "K", kvv_cmp_stats_to_json(&sk), "V",
                               kvv_cmp_stats_to_json(&sv), "logits", kvv_cmp_stats_to_json(&sl),
                               "layer_by_layer", "residual_rel_rms", kvv_json_number(f.layer_rel),
                               "worst_layer", f.layer, "logits_rel", kvv_json_number(f.logit_rel),
                               "worst_position", f.pos, "within_bounds", ok));
            if (c->o->controls && i == 0 && k == 1 && bound_control(c, b, &f, pair))
                return kvv_error_set(err, KVV_ERR_NOMEM, "tables: out of memory");
        }
    return KVV_OK;
}

/* The bounds as details.bounds objects. */
static json_t *bound_json(const kvv_table_bound *b)
{
    char text[160];
    return json_pack("{s:s, s:s, s:b, s:i, s:i, s:o, s:s}", "kind",
                     b->kind == KVV_BOUND_QUANTUM ? "quantum" : "order", "type",
                     kvv_type_name(b->type), "cache", b->cache, "K", b->K, "n", b->n, "bound",
                     kvv_json_number(b->bound), "text",
                     kvv_table_bound_text(b, text, sizeof text));
}

/* The verdict from the per-table runs and the cross-table figures, the
 * reasons of a FAIL first. */
static void conclude(tables_ctx *c)
{
    char names[64] = "", bad[64] = "", fig[256], v1[32], b1[32], v2[32], b2[32];
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
    kvv_figure_vs_bound(c->worst.layer_rel, c->lb.bound, v1, b1, sizeof v1);
    kvv_figure_vs_bound(c->worst.logit_rel, c->hb.bound, v2, b2, sizeof v2);
    snprintf(fig, sizeof fig, "across tables per layer: residual %s (bound %s), logits %s "
             "(bound %s)", v1, b1, v2, b2);
    const int missed = kvv_check_controls_missed(c->r);
    if (n_bad || c->over) {
        char why[400] = "";
        if (c->over)
            snprintf(why, sizeof why, "%s%s", c->over_text, n_bad ? "; " : "");
        if (n_bad)
            snprintf(why + strlen(why), sizeof why - strlen(why), "invariance fails with "
                     "table%s %s", n_bad > 1 ? "s" : "", bad);
        kvv_check_set_verdict(c->r, KVV_VERDICT_FAIL, "%s; %s", why, fig);
        if (n_bad)
            kvv_check_set_message(c->r, "table %s: %s%s%s", kvv_cpu_isa_name(first_bad->isa),
                                  kvv_check_key_figure(&first_bad->inv),
                                  kvv_check_message(&first_bad->inv)[0] ? "; " : "",
                                  kvv_check_message(&first_bad->inv));
        else
            kvv_check_set_message(c->r, "%d pair%s of tables differ by more than the kernels' "
                                  "contract allows (docs/checks.md, tables): %s", c->over,
                                  c->over > 1 ? "s" : "", c->over_text);
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
    } else if (missed) {
        kvv_check_set_verdict(c->r, KVV_VERDICT_FAIL, "%d control%s NOT detected; %s", missed,
                              missed > 1 ? "s" : "", fig);
        kvv_check_set_message(c->r, "a negative control was not detected: the check cannot be "
                                    "trusted to fail");
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
                                    "order), within the bound the kernels' contract allows per "
                                    "tensor type, judged layer by layer (bounds); the end-to-end "
                                    "K, V and logits figures have no bound"));
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
    kvv_table_bounds(o->model, c->T, o->engine.cache_type, &c->lb, &c->hb);
    json_object_set_new(c->r->details, "bounds", json_pack("{s:o, s:o}", "layers",
                                                           bound_json(&c->lb), "head",
                                                           bound_json(&c->hb)));
    if ((s = kvv_capture_init(&c->lw, &o->model->hp, c->T, KVV_CAPTURE_RESID, err)))
        return s;
    if (!(c->lw_logits = malloc(sizeof(float) * (size_t)c->T * (size_t)c->V)))
        return kvv_error_set(err, KVV_ERR_NOMEM, "tables: out of memory");
    if ((s = cross_tables(c, err)))
        return s;
    conclude(c);
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
    kvv_capture_free(&c.lw);
    free(c.lw_logits);
    return s;
}
