/*
 * compare.c — engine A vs engine B, per layer and on logits (see compare.h).
 */
#include "verify/compare.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/logits.h"
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
};

static void rec_residual(void *u, int layer, int n, const int32_t *pos, float *h)
{
    recorder *r = u; /* cap.feed set: layer by layer (capture.h) */
    r->inner.residual(r->inner.user, layer, n, pos, h);
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

/* Open engine eo, run tokens at positions 0..n-1 in one batch, all logits.
 * feed (A's run; NULL for B's): the run B made; when both engines round
 * activations to 8 bits (desc.ggml) and this one can overwrite its
 * residual, it continues each layer from feed's residual (layer by layer,
 * compare.h). */
static kvv_status run_engine(const kvv_model *m, const kvv_engine_opts *eo,
                             const int32_t *tokens, int n, recorder *rec, const recorder *feed,
                             unsigned feed_ggml, float *logits, kvv_engine_desc *desc,
                             kvv_error *err)
{
    kvv_engine *e;
    kvv_status st = kvv_check_open_engine(m, eo, KVV_CHECK_COMPARE_NEEDS, "compare", &e, err);
    if (st)
        return st;
    kvv_engine_describe(e, desc);
    if (rec && feed && feed_ggml && desc->ggml &&
        (kvv_engine_caps(e) & KVV_ENGINE_CAP_RESIDUAL_WRITE))
        rec->cap.feed = &feed->cap;
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
        const double rel = kvv_rel_rms(kvv_capture_resid(&a->cap, l, 0),
                                       kvv_capture_resid(&b->cap, l, 0), (size_t)n * E);
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
        kvv_logits_top2(pa, V, &a1, &av1, &a2, &av2);
        kvv_logits_top2(pb, V, &b1, &bv1, &b2, &bv2);
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
    float *la, *lb, *lc;          /* [n][V] logits of A, B, B with the control's plant */
    kvv_engine_desc da, db;
    int planted;                  /* --force-fail: B's logit changed (-1: none) */
    float planted_val;
} cmp_run;

/* Append "; " and a printf text to buf (size bytes) at *off. */
static void add_reason(char *buf, size_t size, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_reason(char *buf, size_t size, size_t *off, const char *fmt, ...)
{
    if (*off >= size)
        return;
    if (*off) {
        int w = snprintf(buf + *off, size - *off, "; ");
        *off += w > 0 ? (size_t)w : 0;
        if (*off >= size)
            return;
    }
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *off, size - *off, fmt, ap);
    va_end(ap);
    *off += w > 0 ? (size_t)w : 0;
}

/* The verdict rule on figures f — the real comparison's, or a control's
 * with its planted difference: the reasons it fails, the most telling
 * first, each figure beside its tolerance (printed so that a value past it
 * never reads equal to it), into why ("" when it passes). Non-finite values
 * and controls are judged by the caller. @return true when f passes. */
static bool judge(const logit_figures *f, double tol, char *why, size_t size)
{
    size_t off = 0;
    char v[32], t[32];
    why[0] = '\0';
    if (!(f->rel_max <= tol)) {
        kvv_figure_vs_bound(f->rel_max, tol, v, t, sizeof v);
        add_reason(why, size, &off, "logits rel %s > tol %s at position %d", v, t,
                   f->worst_pos);
    }
    if (f->required_miss)
        add_reason(why, size, &off, "%d top-1 flip%s outside the error margin",
                   f->required_miss, f->required_miss > 1 ? "s" : "");
    if (f->layerwise && !(f->resid_rel_max <= KVV_COMPARE_LAYER_TOL)) {
        kvv_figure_vs_bound(f->resid_rel_max, KVV_COMPARE_LAYER_TOL, v, t, sizeof v);
        add_reason(why, size, &off, "layer %d residual rms rel %s > tol %s",
                   f->resid_worst_layer, v, t);
    }
    return why[0] == '\0';
}

/* Where the control plants: the first position from f's worst on whose
 * logits of A have a finite largest magnitude, its index and value.
 * @return false when no position has one. */
static bool plant_site(const float *la, int n, int V, int from, int *pos, int *idx)
{
    for (int k = 0; k < n; k++) {
        const int t = (from + k) % n;
        const float *a = la + (size_t)t * V;
        int best = -1;
        for (int i = 0; i < V; i++)
            if (isfinite(a[i]) && (best < 0 || fabsf(a[i]) > fabsf(a[best])))
                best = i;
        if (best >= 0) {
            *pos = t;
            *idx = best;
            return true;
        }
    }
    return false;
}

/* Controls: the verdict itself must flip. A difference sized from the
 * tolerance in force is planted into B's true logits (one logit moved by
 * twice the tolerance times the position's max|logit_A|, at the worst
 * position), and, layer by layer, into B's residual of the worst layer
 * (3 x KVV_COMPARE_LAYER_TOL of its RMS); the same rule (judge) must
 * then FAIL. A tolerance no finite plant can exceed is KVV_ERR_USAGE. */
static kvv_status controls(const kvv_compare_opts *o, cmp_run *c, const logit_figures *f,
                           kvv_check_result *r, kvv_error *err)
{
    const kvv_hparams *hp = &o->model->hp;
    const int n = o->n_tokens, V = hp->n_vocab;
    const double tol = o->rel_tol;
    if (!(c->lc = malloc((size_t)n * V * sizeof(float))))
        return kvv_error_set(err, KVV_ERR_NOMEM, "compare: out of memory");
    memcpy(c->lc, c->lb, (size_t)n * V * sizeof(float));
    if (c->planted >= 0) /* against B's true logits, not --force-fail's */
        c->lc[c->planted] = c->planted_val;
    int t, i;
    char why[256], v[32], tt[32];
    if (!plant_site(c->la, n, V, f->worst_pos, &t, &i)) {
        kvv_check_add_control(r, "a logit moved past the tolerance", false,
                              "not run: engine A gave no finite logit to plant against");
        return KVV_OK;
    }
    const float a = c->la[(size_t)t * V + i];
    const double m = fabs((double)a) > 0 ? fabs((double)a) : 1.0; /* compare_logits' scale */
    const double d = 2.0 * tol * m;
    float planted = (float)((double)a - copysign(d, (double)a));
    if (planted == a) /* tol 0 (or below one ulp): the nearest other value */
        planted = nextafterf(a, a > 0 ? -INFINITY : INFINITY);
    c->lc[(size_t)t * V + i] = planted;
    json_t *scratch = json_object();
    logit_figures fc;
    compare_logits(c->la, c->lc, n, V, &fc, scratch);
    json_decref(scratch);
    fc.layerwise = f->layerwise;
    fc.resid_rel_max = f->resid_rel_max;
    fc.resid_worst_layer = f->resid_worst_layer;
    const double moved = fabs((double)planted - (double)a) / m;
    if (!isfinite(planted) || !(moved > tol)) {
        kvv_figure_vs_bound(isfinite(planted) ? moved : (double)FLT_MAX / m, tol, v, tt,
                            sizeof v);
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "compare: tolerance %s: no planted logit difference can exceed it "
                             "(the largest finite one is %s of max|logit| at position %d), so "
                             "the control cannot show the verdict fail; give a smaller --tol, "
                             "or --no-controls (the run is then unproven)", tt, v, t);
    }
    bool fails = !judge(&fc, tol, why, sizeof why);
    kvv_figure_vs_bound(moved, tol, v, tt, sizeof v);
    kvv_check_add_control(r, "one logit of B moved by 2 x tol of max|logit|", fails, "logits[t=%d,i=%d] moved by %s of max|logit| "
                          "(tol %s): verdict %s%s%s", t, i, v, tt, fails ? "FAIL (" : "PASS",
                          fails ? why : " — the verdict did not see it", fails ? ")" : "");
    if (!f->layerwise)
        return KVV_OK;
    /* B's residual entering the worst layer l, planted 3 x the layer tolerance
     * of A's RMS away from A's; restored after */
    const int l = f->resid_worst_layer > 0 ? f->resid_worst_layer : hp->n_layer;
    const size_t E = (size_t)hp->n_embd, cnt = (size_t)n * E;
    float *rb = kvv_capture_resid(&c->rb.cap, l, 0);
    const float *ra = kvv_capture_resid(&c->ra.cap, l, 0);
    float *saved = malloc(cnt * sizeof(float));
    if (!saved)
        return kvv_error_set(err, KVV_ERR_NOMEM, "compare: out of memory");
    memcpy(saved, rb, cnt * sizeof(float));
    double aa = 0;
    for (size_t k = 0; k < cnt; k++)
        aa += (double)ra[k] * (double)ra[k];
    const double shift = 3.0 * KVV_COMPARE_LAYER_TOL * (aa > 0 ? sqrt(aa / (double)cnt) : 1.0);
    for (size_t k = 0; k < cnt; k++)
        rb[k] = (float)((double)ra[k] + shift);
    logit_figures fl = *f;
    fl.resid_rel_max = 0;
    compare_layers(hp, n, &c->ra, &c->rb, &fl);
    memcpy(rb, saved, cnt * sizeof(float));
    free(saved);
    fails = !judge(&fl, tol, why, sizeof why);
    kvv_check_add_control(r, "B's residual moved by 3 x the layer tolerance", fails,
                          "layer %d residual shifted by %.3g (3 x %.3g of its RMS): verdict %s%s%s",
                          l, shift, KVV_COMPARE_LAYER_TOL, fails ? "FAIL (" : "PASS",
                          fails ? why : " — the verdict did not see it", fails ? ")" : "");
    return KVV_OK;
}

/* A and B the same engine with the same options (the descriptions equal but
 * for the controls, and B without options of its own): comparing an engine
 * with itself proves nothing about a second one. */
static bool same_engine(const kvv_compare_opts *o, const kvv_engine_desc *a,
                        const kvv_engine_desc *b)
{
    return o->b.n_engine_opts == 0 && strcmp(a->name, b->name) == 0 &&
           strcmp(a->mode, b->mode) == 0 && strcmp(a->cache_type, b->cache_type) == 0 &&
           a->n_threads == b->n_threads && strcmp(a->kernels, b->kernels) == 0 &&
           strcmp(a->isa, b->isa) == 0 && strcmp(a->version, b->version) == 0 &&
           strcmp(a->device, b->device) == 0 && strcmp(a->variant, b->variant) == 0 &&
           strcmp(a->flash_attn, b->flash_attn) == 0 && a->n_ubatch == b->n_ubatch &&
           a->ggml == b->ggml;
}

/* Both engines over the tokens, the tables, the logits, the controls. */
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
    if ((st = rec_init(&c->ra, hp, n, err)) || (st = rec_init(&c->rb, hp, n, err)) ||
        (st = run_engine(o->model, &o->b, o->tokens, n, &c->rb, NULL, 0, c->lb, &c->db, err)))
        return st;
    if (o->progress)
        o->progress(o->progress_user, "compare", 1, 2);
    if (kvv_engine_takes(a.name, KVV_ENGINE_OPT_GGML) && a.ggml == 0 && c->db.ggml)
        a.ggml = c->db.ggml;
    /* 8-bit activations on both sides (the reference emulating B's, or an
     * engine of its own, e.g. two cpu kernel tables): one that rounds the
     * other way (the two engines' fp32 values differ in their last bits)
     * moves a dot product by a quantum, which every later layer of a deep
     * model amplifies; so A continues each layer from B's residual and each
     * row measures that layer's own error */
    if ((st = run_engine(o->model, &a, o->tokens, n, &c->ra, &c->rb, c->db.ggml, c->la, &c->da,
                         err)))
        return st;
    if (o->progress)
        o->progress(o->progress_user, "compare", 2, 2);
    kvv_check_set_engine(r, &c->db);
    if (same_engine(o, &c->da, &c->db))
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "compare: engine A and engine B are the same engine with the same "
                             "options (%s, %s, cache %s, %d thread%s%s%s): comparing an engine "
                             "with itself proves nothing about a second one; name another "
                             "--against, or give A other options (--mode-a, --isa-a)",
                             c->db.name, c->db.mode, c->db.cache_type, c->db.n_threads,
                             c->db.n_threads == 1 ? "" : "s", c->db.isa[0] ? ", table " : "",
                             c->db.isa);
    if (o->force_fail) {
        c->planted = kvv_logits_argmax(c->lb, V);
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
    if (c->ra.cap.feed) {
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
    return o->controls ? controls(o, c, f, r, err) : KVV_OK;
}

/* The verdict and its key figure: the reasons of a FAIL first (non-finite
 * values, undetected controls, then judge's), the figures after. */
static void conclude(const kvv_compare_opts *o, const cmp_run *c, const logit_figures *f,
                     kvv_check_result *r)
{
    const int n = o->n_tokens;
    char why[512] = "", judged[256], mean[24], max[24], v[32], t[32], lw[160] = "", rel[96] = "";
    size_t off = 0;
    uint64_t nan, inf, bad = kvv_check_nonfinite(r, &nan, &inf);
    if (bad)
        add_reason(why, sizeof why, &off, "%llu compared values not finite (%llu NaN, %llu inf)",
                   (unsigned long long)bad, (unsigned long long)nan, (unsigned long long)inf);
    for (int k = 0; k < r->n_controls; k++)
        if (!r->controls[k].detected)
            add_reason(why, sizeof why, &off, "control NOT detected (%s)", r->controls[k].detail);
    const bool fig_ok = judge(f, o->rel_tol, judged, sizeof judged);
    if (!fig_ok)
        add_reason(why, sizeof why, &off, "%s", judged);
    /* the figures a failing reason already states are not repeated */
    if (f->rel_max <= o->rel_tol) {
        kvv_figure_vs_bound(f->rel_max, o->rel_tol, v, t, sizeof v);
        snprintf(rel, sizeof rel, "logits rel %s (tol %s), ", v, t);
    }
    if (f->layerwise && f->resid_rel_max <= KVV_COMPARE_LAYER_TOL) {
        kvv_figure_vs_bound(f->resid_rel_max, KVV_COMPARE_LAYER_TOL, v, t, sizeof v);
        snprintf(lw, sizeof lw, "layer by layer: residual rms rel %s (layer %d, tol %s), ", v,
                 f->resid_worst_layer, t);
    }
    kvv_figure_text(f->kl_sum / n, mean, sizeof mean);
    kvv_figure_text(f->kl_max, max, sizeof max);
    if (!why[0]) {
        kvv_check_set_verdict(r, KVV_VERDICT_PASS, "%s vs %s: %s%sKL mean %s max %s, top-1 %d/%d",
                              c->da.name, c->db.name, rel, lw, mean, max, f->agree, n);
        return;
    }
    kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "%s vs %s: %s; %s%sKL mean %s max %s, top-1 %d/%d",
                          c->da.name, c->db.name, why, rel, lw, mean, max, f->agree, n);
    kvv_figure_vs_bound(f->rel_max, o->rel_tol, v, t, sizeof v);
    kvv_check_set_message(r, "%s (in all: max|dlogit|/max|logit| %s at position %d, tol %s; %d "
                          "top-1 flips outside the error margin; %d non-finite logits)", why, v,
                          f->worst_pos, t, f->required_miss, f->nonfinite);
}

kvv_status kvv_check_compare_engines(const kvv_compare_opts *o, kvv_check_result *r,
                                     kvv_error *err)
{
    double t0 = kvv_now_seconds();
    kvv_status st = KVV_OK;
    if (!o->model || !o->tokens || o->n_tokens < 1)
        st = kvv_error_set(err, KVV_ERR_USAGE, "compare: a model and at least one token are "
                                               "required");
    else if (isnan(o->rel_tol) || o->rel_tol < 0)
        st = kvv_error_set(err, KVV_ERR_USAGE, "compare: tolerance %g is not a non-negative "
                                               "number", o->rel_tol);
    else if (o->controls && isinf(o->rel_tol))
        st = kvv_error_set(err, KVV_ERR_USAGE,
                           "compare: tolerance inf: no planted difference can exceed it, so the "
                           "control cannot show the verdict fail; give a finite --tol, or "
                           "--no-controls (the run is then unproven)");
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
    memset(&f, 0, sizeof f);
    st = compare(o, &c, r, &f, err);
    if (st)
        kvv_check_set_error(r, err);
    else
        conclude(o, &c, &f, r);
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
    return kvv_check_compare_engines(&co, r, err);
}
