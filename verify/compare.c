/*
 * compare.c — engine A vs engine B, per layer and on logits (see compare.h).
 */
#include "verify/compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/capture.h"
#include "verify/policy_run.h"

kvv_compare_opts kvv_compare_opts_default(void)
{
    kvv_compare_opts o;
    memset(&o, 0, sizeof o);
    o.a = kvv_engine_opts_default();
    o.b = kvv_engine_opts_default();
    o.b.name = "cpu";
    o.b.mode = KVV_MODE_INVARIANT;
    o.rel_tol = KVV_COMPARE_REL_TOL;
    o.controls = true;
    return o;
}

/* ------------------------------------------------------------ one engine's run */

typedef struct recorder recorder;
struct recorder {
    kvv_capture cap;
    kvv_hooks inner;    /* the capture's own hooks */
    float *attn_out;    /* [n_layer][n_pos][ow] */
    int n_pos, ow;
    unsigned caps;      /* the engine's KVV_ENGINE_CAP_*: which hooks it recorded */
    const recorder *feed; /* layer by layer: after recording its own residual
                           * entering a layer, the engine continues from feed's */
};

static void rec_residual(void *u, int layer, int n, const int32_t *pos, float *h)
{
    recorder *r = u;
    r->inner.residual(r->inner.user, layer, n, pos, h);
    if (!r->feed)
        return;
    const size_t E = (size_t)r->cap.n_embd;
    for (int i = 0; i < n; i++)
        if (pos[i] >= 0 && pos[i] < r->n_pos)
            memcpy(h + (size_t)i * E, kvv_capture_resid(&r->feed->cap, layer, pos[i]),
                   E * sizeof(float));
}

static void rec_kv(void *u, int layer, int n, const int32_t *pos, const float *k, const float *v)
{
    recorder *r = u;
    r->inner.kv(r->inner.user, layer, n, pos, k, v);
}

static void rec_attn_out(void *u, int layer, int n, const int32_t *pos, const float *o)
{
    recorder *r = u;
    for (int i = 0; i < n; i++)
        if (pos[i] >= 0 && pos[i] < r->n_pos)
            memcpy(r->attn_out + ((size_t)layer * r->n_pos + (size_t)pos[i]) * r->ow,
                   o + (size_t)i * r->ow, (size_t)r->ow * sizeof(float));
}

static void rec_free(recorder *r)
{
    kvv_capture_free(&r->cap);
    free(r->attn_out);
    r->attn_out = NULL;
}

static kvv_status rec_init(recorder *r, const kvv_hparams *hp, int n, kvv_error *err)
{
    memset(r, 0, sizeof *r);
    kvv_status st = kvv_capture_init(&r->cap, hp, n, KVV_CAPTURE_RESID | KVV_CAPTURE_KV, err);
    if (st)
        return st;
    kvv_capture_poison(&r->cap);
    r->inner = kvv_capture_hooks(&r->cap);
    r->n_pos = n;
    r->ow = hp->n_head * hp->head_dim_v;
    size_t cnt = (size_t)hp->n_layer * (size_t)n * (size_t)r->ow;
    r->attn_out = malloc(cnt * sizeof(float));
    if (!r->attn_out) {
        rec_free(r);
        return kvv_error_set(err, KVV_ERR_NOMEM, "compare: out of memory");
    }
    for (size_t i = 0; i < cnt; i++)
        r->attn_out[i] = NAN;
    return KVV_OK;
}

/* Open engine eo, run tokens at positions 0..n-1 in one batch, all logits. */
static kvv_status run_engine(const kvv_model *m, const kvv_engine_opts *eo, unsigned control,
                             const int32_t *tokens, int n, recorder *rec, float *logits,
                             kvv_engine_desc *desc, kvv_error *err)
{
    kvv_engine_opts o = *eo;
    o.control |= control;
    kvv_engine *e;
    kvv_status st = kvv_check_open_engine(m, &o, KVV_CHECK_COMPARE_NEEDS, "compare", &e, err);
    if (st)
        return st;
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    if (!pos) {
        kvv_engine_close(e);
        return kvv_error_set(err, KVV_ERR_NOMEM, "compare: out of memory");
    }
    for (int i = 0; i < n; i++)
        pos[i] = i;
    kvv_hooks h = {0};
    if (rec) { /* the per-layer tables: what this engine can show */
        rec->caps = kvv_engine_caps(e);
        h.user = rec;
        h.residual = rec->caps & KVV_ENGINE_CAP_RESIDUAL_READ ? rec_residual : NULL;
        h.kv = rec->caps & KVV_ENGINE_CAP_KV_HOOK ? rec_kv : NULL;
        h.attn_out = rec->caps & KVV_ENGINE_CAP_ATTN_OUT ? rec_attn_out : NULL;
    }
    st = kvv_engine_forward(e, n, tokens, pos, rec ? &h : NULL, KVV_LOGITS_ALL, logits, err);
    if (desc)
        kvv_engine_describe(e, desc);
    free(pos);
    kvv_engine_close(e);
    return st;
}

/* ------------------------------------------------------------ comparison */

static void fmt_g_hex(char *buf, size_t size, double x)
{
    snprintf(buf, size, "%.9g (%a)", x, x);
}

/* NMSE of the residual entering each layer (and the final one) at each
 * position, A = reference: [[nmse per position] per layer], for the
 * report's layer x position figure. */
static json_t *residual_nmse_map(const kvv_hparams *hp, int n, const recorder *a,
                                 const recorder *b)
{
    json_t *layers = json_array();
    for (int l = 0; l <= hp->n_layer; l++) {
        json_t *row = json_array();
        for (int t = 0; t < n; t++) {
            kvv_cmp_stats s;
            kvv_cmp_init(&s);
            kvv_cmp_update(&s, kvv_capture_resid(&a->cap, l, t), kvv_capture_resid(&b->cap, l, t),
                           (size_t)hp->n_embd);
            json_array_append_new(row, kvv_json_number(kvv_cmp_nmse(&s)));
        }
        json_array_append_new(layers, row);
    }
    return layers;
}

static kvv_status compare_tables(const kvv_hparams *hp, int n, const recorder *a,
                                 const recorder *b, kvv_check_result *r)
{
    json_object_set_new(r->details, "residual_nmse_by_position", residual_nmse_map(hp, n, a, b));
    size_t E = (size_t)hp->n_embd, KD = (size_t)hp->n_head_kv * hp->head_dim;
    size_t VD = (size_t)hp->n_head_kv * hp->head_dim_v, OD = (size_t)a->ow;
    unsigned both = a->caps & b->caps; /* a row needs both engines' hook */
    kvv_status st = KVV_OK;
    for (int l = 0; l <= hp->n_layer && !st; l++) {
        kvv_cmp_stats s;
        if (both & KVV_ENGINE_CAP_RESIDUAL_READ) {
            kvv_cmp_init(&s);
            kvv_cmp_update(&s, kvv_capture_resid(&a->cap, l, 0),
                           kvv_capture_resid(&b->cap, l, 0), (size_t)n * E);
            st = kvv_check_add_row(r, l, "residual", &s);
        }
        if (l == hp->n_layer || st)
            break;
        if (both & KVV_ENGINE_CAP_KV_HOOK) {
            kvv_cmp_init(&s);
            kvv_cmp_update(&s, kvv_capture_k(&a->cap, l, 0), kvv_capture_k(&b->cap, l, 0),
                           (size_t)n * KD);
            if ((st = kvv_check_add_row(r, l, "K", &s)))
                break;
            kvv_cmp_init(&s);
            kvv_cmp_update(&s, kvv_capture_v(&a->cap, l, 0), kvv_capture_v(&b->cap, l, 0),
                           (size_t)n * VD);
            if ((st = kvv_check_add_row(r, l, "V", &s)))
                break;
        }
        if (both & KVV_ENGINE_CAP_ATTN_OUT) {
            kvv_cmp_init(&s);
            size_t off = (size_t)l * n * OD;
            kvv_cmp_update(&s, a->attn_out + off, b->attn_out + off, (size_t)n * OD);
            st = kvv_check_add_row(r, l, "attn_out", &s);
        }
    }
    return st;
}

/* What the logits of A and B say, position by position. */
typedef struct {
    double kl_sum, kl_max, rel_max;   /* KL(p_A || p_B) sum and max; max|dlogit|/max|logit| */
    int agree, required_miss;         /* top-1 equal; top-1 differs beyond the error margin */
    int worst_pos, nonfinite;         /* where rel_max is; non-finite logits skipped */
    bool layerwise;                   /* A ran each layer from B's residual */
    double resid_rel_max;             /* layerwise: the largest relative RMS error of a */
    int resid_worst_layer;            /* layer's residual (layers 1..n_layer), and where */
} logit_figures;

/* Layer by layer (A continued from B's residual entering each layer): the
 * residual each layer of A computed against B's, as the relative RMS error
 * sqrt(sum d^2 / sum a^2) over the layer's positions (KVV_COMPARE_LAYER_TOL). */
static void compare_layers(const kvv_hparams *hp, int n, const recorder *a, const recorder *b,
                           logit_figures *f)
{
    const size_t E = (size_t)hp->n_embd;
    for (int l = 1; l <= hp->n_layer; l++) {
        const float *ra = kvv_capture_resid(&a->cap, l, 0), *rb = kvv_capture_resid(&b->cap, l, 0);
        double dd = 0, aa = 0;
        for (size_t i = 0; i < (size_t)n * E; i++) {
            const double d = (double)ra[i] - (double)rb[i];
            dd += d * d;
            aa += (double)ra[i] * (double)ra[i];
        }
        const double rel = aa > 0 ? sqrt(dd / aa) : sqrt(dd);
        if (!(rel <= f->resid_rel_max)) { /* NaN counts as the worst */
            f->resid_rel_max = rel;
            f->resid_worst_layer = l;
        }
    }
}

/* ... and position by position into the report: KL and the logits' NMSE
 * at each position (details kl_by_position, logits_nmse_by_position). */
static void compare_logits(const float *la, const float *lb, int n, int V, logit_figures *f,
                           json_t *details)
{
    memset(f, 0, sizeof *f);
    json_t *kl_pos = json_array(), *nmse_pos = json_array();
    json_object_set_new(details, "kl_by_position", kl_pos);
    json_object_set_new(details, "logits_nmse_by_position", nmse_pos);
    for (int t = 0; t < n; t++) {
        const float *pa = la + (size_t)t * V, *pb = lb + (size_t)t * V;
        double mabs = 0, mref = 0;
        for (int i = 0; i < V; i++) {
            if (!isfinite(pa[i]) || !isfinite(pb[i])) {
                f->nonfinite++;
                continue;
            }
            double d = fabs((double)pa[i] - (double)pb[i]);
            mabs = d > mabs ? d : mabs;
            mref = fabs(pa[i]) > mref ? fabs(pa[i]) : mref;
        }
        double rel = mref > 0 ? mabs / mref : mabs;
        if (rel > f->rel_max) {
            f->rel_max = rel;
            f->worst_pos = t;
        }
        double kl = kvv_kl_logits(pa, pb, V);
        kvv_cmp_stats s;
        kvv_cmp_init(&s);
        kvv_cmp_update(&s, pa, pb, (size_t)V);
        json_array_append_new(kl_pos, kvv_json_number(kl));
        json_array_append_new(nmse_pos, kvv_json_number(kvv_cmp_nmse(&s)));
        f->kl_sum += kl;
        f->kl_max = isnan(kl) || kl > f->kl_max ? kl : f->kl_max; /* a NaN stays */
        int a1, a2, b1, b2;
        float av1, av2, bv1, bv2;
        kvv_top2_f32(pa, V, &a1, &av1, &a2, &av2);
        kvv_top2_f32(pb, V, &b1, &bv1, &b2, &bv2);
        if (a1 == b1)
            f->agree++;
        else if (a2 < 0 || (double)av1 - (double)av2 > 2.0 * mabs)
            f->required_miss++;
    }
}

static void set_details(json_t *d, const kvv_compare_opts *o, const kvv_engine_desc *da,
                        const kvv_engine_desc *db, const logit_figures *f)
{
    if (!d)
        return;
    const int n = o->n_tokens;
    char klm[64], klx[64];
    fmt_g_hex(klm, sizeof klm, f->kl_sum / n);
    fmt_g_hex(klx, sizeof klx, f->kl_max);
    json_object_set_new(d, "engine_a", kvv_engine_desc_to_json(da));
    json_object_set_new(d, "engine_b", kvv_engine_desc_to_json(db));
    json_object_set_new(d, "n_tokens", json_integer(n));
    json_object_set_new(d, "rel_tol", json_real(o->rel_tol));
    json_object_set_new(d, "logits_max_rel", json_real(f->rel_max));
    json_object_set_new(d, "logits_worst_position", json_integer(f->worst_pos));
    json_object_set_new(d, "kl_mean", json_string(klm));
    json_object_set_new(d, "kl_max", json_string(klx));
    json_object_set_new(d, "kl_mean_value", json_real(f->kl_sum / n));
    json_object_set_new(d, "kl_max_value", json_real(f->kl_max));
    json_object_set_new(d, "top1_agree", json_integer(f->agree));
    json_object_set_new(d, "top1_required_misses", json_integer(f->required_miss));
    json_object_set_new(d, "nonfinite", json_integer(f->nonfinite));
    json_object_set_new(d, "layerwise", json_boolean(f->layerwise));
    if (f->layerwise) {
        json_object_set_new(d, "residual_max_rel", json_real(f->resid_rel_max));
        json_object_set_new(d, "residual_worst_layer", json_integer(f->resid_worst_layer));
    }
}

/* One compare run's buffers and the two engines' records. */
typedef struct {
    recorder ra, rb;
    float *la, *lb, *lc;          /* [n][V] logits of A, B, B with the control */
    kvv_engine_desc da, db;
    int planted;                  /* --force-fail: B's logit changed (-1: none) */
    float planted_val;
} cmp_run;

/* Control: one flipped weight bit in B must show in the logits (against
 * B's true logits, not the planted one). */
static kvv_status control(const kvv_compare_opts *o, cmp_run *c, kvv_check_result *r,
                          kvv_error *err)
{
    const int n = o->n_tokens, V = o->model->hp.n_vocab;
    c->lc = malloc((size_t)n * V * sizeof(float));
    if (!c->lc)
        return kvv_error_set(err, KVV_ERR_NOMEM, "compare: out of memory");
    kvv_engine_desc dc;
    kvv_status st = run_engine(o->model, &o->b, KVV_CTL_PERTURB_WEIGHT, o->tokens, n, NULL,
                               c->lc, &dc, err);
    if (st)
        return st;
    char what[128], name[160];
    snprintf(name, sizeof name, "engine B with %s",
             kvv_engine_control_name(dc.control, "one flipped bit in output_norm[0]", what,
                                     sizeof what));
    if (c->planted >= 0)
        c->lb[c->planted] = c->planted_val;
    kvv_cmp_stats cs;
    kvv_cmp_init(&cs);
    kvv_cmp_update(&cs, c->lb, c->lc, (size_t)n * V);
    char ulp[24];
    kvv_check_add_control(r, name, cs.n_diff > 0,
                          "%llu of %llu logits differ, max ULP %s",
                          (unsigned long long)cs.n_diff, (unsigned long long)cs.n,
                          kvv_ulp_text(cs.max_ulp, ulp, sizeof ulp));
    return KVV_OK;
}

/* Both engines over the tokens, the tables, the logits, the control. */
static kvv_status compare(const kvv_compare_opts *o, cmp_run *c, kvv_check_result *r,
                          logit_figures *f, kvv_error *err)
{
    const kvv_hparams *hp = &o->model->hp;
    const int n = o->n_tokens, V = hp->n_vocab;
    kvv_status st;
    c->la = malloc((size_t)n * V * sizeof(float));
    c->lb = malloc((size_t)n * V * sizeof(float));
    if (!c->la || !c->lb)
        return kvv_error_set(err, KVV_ERR_NOMEM, "compare: out of memory for %d x %d logits", n,
                             V);
    /* B first: when A is the reference at its own numerics and B declares
     * llama.cpp's activation roundings (desc.ggml), A emulates them, so the
     * comparison measures B's kernels against the function B computes */
    kvv_engine_opts a = o->a;
    const long runs = o->controls ? 3 : 2;
    if ((st = rec_init(&c->ra, hp, n, err)) || (st = rec_init(&c->rb, hp, n, err)) ||
        (st = run_engine(o->model, &o->b, 0, o->tokens, n, &c->rb, c->lb, &c->db, err)))
        return st;
    if (o->progress)
        o->progress(o->progress_user, "compare", 1, runs);
    if (kvv_engine_takes(a.name, KVV_ENGINE_OPT_GGML) && a.ggml == 0 && c->db.ggml) {
        a.ggml = c->db.ggml;
        /* 8-bit activations: one that rounds the other way (the two engines'
         * fp32 values differ in their last bits) moves a dot product by a
         * quantum, which every later layer of a deep model amplifies; so A
         * continues each layer from B's residual and each row measures that
         * layer's own error */
        c->ra.feed = &c->rb;
    }
    if ((st = run_engine(o->model, &a, 0, o->tokens, n, &c->ra, c->la, &c->da, err)))
        return st;
    if (o->progress)
        o->progress(o->progress_user, "compare", 2, runs);
    kvv_check_set_engine(r, &c->db);
    if (o->force_fail) {
        c->planted = kvv_argmax_f32(c->lb, V);
        c->planted_val = c->lb[c->planted];
        c->lb[c->planted] = -c->planted_val - 1.0f;
    }
    if (compare_tables(hp, n, &c->ra, &c->rb, r))
        return kvv_error_set(err, KVV_ERR_NOMEM, "compare: out of memory");
    kvv_cmp_stats ls;
    kvv_cmp_init(&ls);
    kvv_cmp_update(&ls, c->la, c->lb, (size_t)n * V);
    if (kvv_check_add_row(r, -1, "logits", &ls))
        return kvv_error_set(err, KVV_ERR_NOMEM, "compare: out of memory");
    compare_logits(c->la, c->lb, n, V, f, r->details);
    if (c->ra.feed) {
        f->layerwise = true;
        compare_layers(hp, n, &c->ra, &c->rb, f);
    }
    if (ls.first >= 0) {
        kvv_mismatch mm = {.tensor = "logits", .variant = "", .layer = -1,
                           .token = (int)(ls.first / V), .head = -1, .index = (int)(ls.first % V),
                           .expected = ls.first_ref, .actual = ls.first_test};
        snprintf(mm.variant, sizeof mm.variant, "%s vs %s", c->da.name, c->db.name);
        kvv_check_note_mismatch(r, &mm);
    }
    set_details(r->details, o, &c->da, &c->db, f);
    if (!o->controls)
        return KVV_OK;
    st = control(o, c, r, err);
    if (!st && o->progress)
        o->progress(o->progress_user, "compare", 3, runs);
    return st;
}

kvv_status kvv_compare_run(const kvv_compare_opts *o, kvv_check_result *r, kvv_error *err)
{
    double t0 = kvv_now_seconds();
    kvv_status st = KVV_OK;
    if (!o->model || !o->tokens || o->n_tokens < 1)
        st = kvv_error_set(err, KVV_ERR_USAGE, "compare: a model and at least one token are "
                                               "required");
    for (int i = 0; !st && i < o->n_tokens; i++)
        if (o->tokens[i] < 0 || o->tokens[i] >= o->model->hp.n_vocab)
            st = kvv_error_set(err, KVV_ERR_USAGE,
                               "compare: token %d at index %d outside the vocabulary of %d",
                               (int)o->tokens[i], i, o->model->hp.n_vocab);
    if (st) {
        kvv_check_set_error(r, err);
        return st;
    }
    cmp_run c;
    memset(&c, 0, sizeof c);
    c.planted = -1;
    logit_figures f;
    st = compare(o, &c, r, &f, err);
    if (st) {
        kvv_check_set_error(r, err);
    } else {
        const int n = o->n_tokens;
        bool pass = f.nonfinite == 0 && f.rel_max <= o->rel_tol && f.required_miss == 0 &&
                    (!f.layerwise || f.resid_rel_max <= KVV_COMPARE_LAYER_TOL) &&
                    kvv_check_controls_missed(r) == 0;
        char nonfinite[48] = "", mean[24], max[24], lw[96] = "";
        if (f.nonfinite)
            snprintf(nonfinite, sizeof nonfinite, "%d logits not finite (NaN/inf); ",
                     f.nonfinite);
        if (f.layerwise)
            snprintf(lw, sizeof lw, ", layer by layer: residual rms rel %.2g (layer %d, tol %.2g)",
                     f.resid_rel_max, f.resid_worst_layer, KVV_COMPARE_LAYER_TOL);
        kvv_check_set_verdict(r, pass ? KVV_VERDICT_PASS : KVV_VERDICT_FAIL,
                              "%s vs %s: %slogits rel %.2g (tol %.2g)%s, KL mean %s max %s, "
                              "top-1 %d/%d",
                              c.da.name, c.db.name, nonfinite, f.rel_max, o->rel_tol, lw,
                              kvv_figure_text(f.kl_sum / n, mean, sizeof mean),
                              kvv_figure_text(f.kl_max, max, sizeof max), f.agree, n);
        if (!pass)
            kvv_check_set_message(r,
                                  "max|dlogit|/max|logit| %.3g at position %d (tol %.3g), %d "
                                  "top-1 flips outside the error margin, %d non-finite logits%s",
                                  f.rel_max, f.worst_pos, o->rel_tol, f.required_miss,
                                  f.nonfinite, lw);
    }
    r->seconds = kvv_now_seconds() - t0;
    rec_free(&c.ra);
    rec_free(&c.rb);
    free(c.la);
    free(c.lb);
    free(c.lc);
    return st;
}

kvv_status kvv_check_compare(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err)
{
    kvv_compare_opts co = kvv_compare_opts_default();
    co.model = o->model;
    co.a.cache_type = o->engine.cache_type;
    co.a.n_ctx = o->engine.n_ctx;
    co.b = o->engine;
    if (!o->engine.name || strcmp(o->engine.name, co.a.name) == 0) {
        /* The reference is the engine under test: comparing it with itself
         * could not fail, so it is compared with the cpu engine (invariant). */
        kvv_engine_opts cpu = kvv_engine_opts_default();
        cpu.name = "cpu";
        cpu.mode = kvv_engine_default_mode(cpu.name);
        cpu.n_threads = o->engine.n_threads > 0 ? o->engine.n_threads : 1;
        cpu.cache_type = o->engine.cache_type;
        cpu.n_ctx = o->engine.n_ctx;
        co.b = cpu;
    }
    co.tokens = o->tokens;
    co.n_tokens = o->n_tokens;
    co.controls = o->controls;
    co.force_fail = o->force_fail;
    co.progress = o->progress;
    co.progress_user = o->progress_user;
    return kvv_compare_run(&co, r, err);
}
