/* invariance.c — same tokens, any batching / chunking / threads, same bits
 * (see invariance.h). */
#include "verify/invariance.h"

#include <stdlib.h>
#include <string.h>

#include "verify/capture.h"

/* Chunkings one run takes at most (kvv_check_opts.chunks). */
#define KVV_INV_MAX_CHUNKS 16

typedef struct {
    char name[40];
    int step;       /* tokens per forward call (T = all at once) */
    int prefill;    /* > 0: prefill+decode with KVV_LOGITS_LAST, first `prefill` tokens */
    int threads;    /* engine thread count (0 = as configured) */
    bool flip;      /* plant one flipped residual bit */
} variant;

typedef struct {
    const kvv_check_opts *o;
    kvv_check_result *r;
    int L, T, V, kd, vd, n_embd;
    int32_t *pos;
    kvv_capture base, cap;  /* baseline and variant captures */
    kvv_capture alt;        /* the control's unplanted run */
    float *lbase, *lvar, *lalt; /* [T][V] */
    uint8_t *have;          /* [T] rows of lvar the variant produced */
    kvv_cmp_stats total;
} inv_ctx;

static kvv_status run_variant(inv_ctx *c, kvv_engine *e, const variant *v, kvv_capture *cap,
                              float *logits, kvv_error *err)
{
    kvv_engine_reset(e);
    memset(c->have, 0, (size_t)c->T);
    kvv_capture_poison(cap);
    cap->flip_layer = v->flip ? c->L / 2 : -1;
    cap->flip_pos = c->T / 2;
    cap->flip_index = 0;
    kvv_hooks h = kvv_capture_hooks(cap);
    const int32_t *tok = c->o->tokens;
    kvv_status s = KVV_OK;
    if (v->prefill > 0) {
        int p = v->prefill;
        s = kvv_engine_forward(e, p, tok, c->pos, &h, KVV_LOGITS_LAST,
                               logits + (size_t)(p - 1) * c->V, err);
        c->have[p - 1] = 1;
        for (int t = p; t < c->T && !s; t++) {
            s = kvv_engine_forward(e, 1, tok + t, c->pos + t, &h, KVV_LOGITS_LAST,
                                   logits + (size_t)t * c->V, err);
            c->have[t] = 1;
        }
        return s;
    }
    for (int t0 = 0; t0 < c->T && !s; t0 += v->step) {
        int n = c->T - t0 < v->step ? c->T - t0 : v->step;
        s = kvv_engine_forward(e, n, tok + t0, c->pos + t0, &h, KVV_LOGITS_ALL,
                               logits + (size_t)t0 * c->V, err);
        memset(c->have + t0, 1, (size_t)n);
    }
    return s;
}

/* Compare [layers][T][dim] buffers; note the first mismatch (and where it
 * is into where[48]). */
static void cmp_tensor(inv_ctx *c, const char *tensor, const char *variant_name,
                       const float *base, const float *var, int layers, int dim,
                       kvv_cmp_stats *st, char *where, json_t *ulp_per_layer)
{
    kvv_cmp_init(st);
    where[0] = 0;
    for (int l = 0; l < layers; l++) {
        kvv_cmp_stats s;
        kvv_cmp_init(&s);
        size_t off = (size_t)l * c->T * dim;
        kvv_cmp_update(&s, base + off, var + off, (size_t)c->T * dim);
        if (s.first >= 0) {
            kvv_mismatch m = {.layer = l, .token = (int)(s.first / dim), .head = -1,
                              .index = (int)(s.first % dim), .expected = s.first_ref,
                              .actual = s.first_test};
            snprintf(m.tensor, sizeof m.tensor, "%s", tensor);
            snprintf(m.variant, sizeof m.variant, "%s", variant_name);
            kvv_check_note_mismatch(c->r, &m);
            if (!where[0])
                snprintf(where, 48, "l=%d,t=%d,i=%d", l, m.token, m.index);
        }
        kvv_cmp_merge(st, &s);
        if (ulp_per_layer)
            json_array_append_new(ulp_per_layer, kvv_json_ulp(s.max_ulp));
    }
}

/* Compare the variant (c->cap, c->lvar) against a reference run (the
 * baseline for the variants; @return differing elements. */
static uint64_t compare_to(inv_ctx *c, const kvv_capture *ref, const float *lref,
                           const char *name, bool add_rows, kvv_status *s)
{
    kvv_cmp_stats k, v, res, lg;
    char wk[48], wv[48], wr[48], wl[48] = "";
    /* the variant's largest ULP per layer, for the report's figure */
    json_t *per = add_rows ? json_pack("{s:s, s:[], s:[], s:[]}", "variant", name, "K", "V",
                                       "residual")
                           : NULL;
    cmp_tensor(c, "K", name, ref->k, c->cap.k, c->L, c->kd, &k, wk,
               json_object_get(per, "K"));
    cmp_tensor(c, "V", name, ref->v, c->cap.v, c->L, c->vd, &v, wv,
               json_object_get(per, "V"));
    cmp_tensor(c, "residual", name, ref->resid, c->cap.resid, c->L, c->n_embd, &res, wr,
               json_object_get(per, "residual"));
    /* the final residual where the variant asked for logits: an engine may
     * compute it for those rows only (the plugin ABI's residual hook) */
    const size_t fin = (size_t)c->L * c->T * c->n_embd;
    kvv_cmp_stats fin_st;
    kvv_cmp_init(&fin_st);
    for (int t = 0; t < c->T; t++) {
        if (!c->have[t])
            continue;
        kvv_cmp_stats s1;
        kvv_cmp_init(&s1);
        kvv_cmp_update(&s1, ref->resid + fin + (size_t)t * c->n_embd,
                       c->cap.resid + fin + (size_t)t * c->n_embd, (size_t)c->n_embd);
        if (s1.first >= 0) {
            kvv_mismatch m = {.layer = c->L, .token = t, .head = -1, .index = (int)s1.first,
                              .expected = s1.first_ref, .actual = s1.first_test};
            snprintf(m.tensor, sizeof m.tensor, "residual");
            snprintf(m.variant, sizeof m.variant, "%s", name);
            kvv_check_note_mismatch(c->r, &m);
            if (!wr[0])
                snprintf(wr, sizeof wr, "l=%d,t=%d,i=%d", c->L, t, (int)s1.first);
        }
        kvv_cmp_merge(&fin_st, &s1);
    }
    kvv_cmp_merge(&res, &fin_st);
    if (per) {
        json_array_append_new(json_object_get(per, "residual"), kvv_json_ulp(fin_st.max_ulp));
        json_array_append_new(json_object_get(c->r->details, "ulp_by_layer"), per);
    }
    kvv_cmp_init(&lg);
    for (int t = 0; t < c->T; t++) {
        if (!c->have[t])
            continue;
        kvv_cmp_stats s1;
        kvv_cmp_init(&s1);
        kvv_cmp_update(&s1, lref + (size_t)t * c->V, c->lvar + (size_t)t * c->V,
                       (size_t)c->V);
        if (s1.first >= 0) {
            kvv_mismatch m = {.layer = -1, .token = t, .head = -1, .index = (int)s1.first,
                              .expected = s1.first_ref, .actual = s1.first_test};
            snprintf(m.tensor, sizeof m.tensor, "logits");
            snprintf(m.variant, sizeof m.variant, "%s", name);
            kvv_check_note_mismatch(c->r, &m);
            if (!wl[0])
                snprintf(wl, sizeof wl, "t=%d,i=%d", t, (int)s1.first);
        }
        kvv_cmp_merge(&lg, &s1);
    }
    if (add_rows) {
        const struct { const char *kind; kvv_cmp_stats *st; const char *where; } rows[] = {
            {"K", &k, wk}, {"V", &v, wv}, {"residual", &res, wr}, {"logits", &lg, wl}};
        for (size_t i = 0; i < 4; i++) {
            char what[48];
            snprintf(what, sizeof what, "%s %s", rows[i].kind, name);
            if (kvv_check_add_row(c->r, -1, what, rows[i].st))
                *s = KVV_ERR_NOMEM;
            else if (rows[i].where[0])
                kvv_check_row_where(c->r, "%s", rows[i].where);
            kvv_cmp_merge(&c->total, rows[i].st);
        }
    }
    return k.n_diff + v.n_diff + res.n_diff + lg.n_diff;
}

static uint64_t compare_variant(inv_ctx *c, const char *name, bool add_rows, kvv_status *s)
{
    return compare_to(c, &c->base, c->lbase, name, add_rows, s);
}

/* Open an engine with `threads` threads (ubatch 0: as configured) or
 * micro-batches of `ubatch` tokens; *honoured = it reports them. */
static kvv_status open_variant(inv_ctx *c, int threads, int ubatch, kvv_engine **e,
                               bool *honoured, kvv_error *err)
{
    kvv_engine_opts eo = kvv_check_engine_opts(c->o, c->T);
    if (threads > 0)
        eo.n_threads = threads;
    if (ubatch > 0)
        eo.n_ubatch = ubatch;
    kvv_status s = kvv_engine_open(c->o->model, &eo, e, err);
    if (s)
        return s;
    kvv_engine_desc d;
    kvv_engine_describe(*e, &d);
    *honoured = threads > 0 ? d.n_threads == threads : d.n_ubatch == ubatch;
    return KVV_OK;
}

/* Micro-batches of 1, 2, 7 and all T tokens, each as one call of all T
 * (an engine with micro-batches splits it), those the baseline does not
 * already use. Nothing on an engine without micro-batches. */
static kvv_status ubatch_variants(inv_ctx *c, kvv_engine *e, int base_ubatch, kvv_error *err)
{
    json_t *ju = json_array();
    json_object_set_new(c->r->details, "ubatch_sizes", ju);
    if (!(kvv_engine_caps(e) & KVV_ENGINE_CAP_UBATCH))
        return KVV_OK;
    const int sizes[] = {1, 2, 7, c->T};
    int base = base_ubatch > 0 && base_ubatch < c->T ? base_ubatch : c->T;
    kvv_status s = KVV_OK;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && !s; i++) {
        int ub = sizes[i];
        if (ub > c->T || ub == base || (i + 1 < sizeof sizes / sizeof sizes[0] && ub == c->T))
            continue;
        kvv_engine *eu = NULL;
        bool honoured = false;
        if ((s = open_variant(c, 0, ub, &eu, &honoured, err)))
            break;
        if (!honoured) {
            kvv_engine_close(eu);
            return kvv_error_set(err, KVV_ERR_INTERNAL, "invariance: engine declares ubatch but "
                                 "did not take micro-batches of %d", ub);
        }
        json_array_append_new(ju, json_integer(ub));
        variant v = {.step = c->T};
        snprintf(v.name, sizeof v.name, ub == c->T ? "ubatch=all" : "ubatch=%d", ub);
        if (!(s = run_variant(c, eu, &v, &c->cap, c->lvar, err)))
            compare_variant(c, v.name, true, &s);
        if (s == KVV_ERR_NOMEM)
            s = kvv_error_set(err, KVV_ERR_NOMEM, "invariance: out of memory");
        kvv_engine_close(eu);
    }
    return s;
}

/* Each thread count of the options (default 1, 2) other than the
 * baseline's, whole and one token at a time; stops at the first count the
 * engine does not honour (an engine without threads). */
static kvv_status thread_variants(inv_ctx *c, int base_threads, kvv_error *err)
{
    const kvv_check_opts *o = c->o;
    static const int default_threads[] = {1, 2};
    const int *tcs = o->thread_counts ? o->thread_counts : default_threads;
    int ntc = o->thread_counts ? o->n_thread_counts : 2;
    json_t *jt = json_array();
    json_object_set_new(c->r->details, "thread_counts", jt);
    bool threaded = true;
    kvv_status s = KVV_OK;
    for (int i = 0; i < ntc && threaded && !s; i++) {
        if (tcs[i] == base_threads || tcs[i] < 1)
            continue;
        bool honoured = false;
        kvv_engine *et = NULL;
        if ((s = open_variant(c, tcs[i], 0, &et, &honoured, err)))
            return s;
        threaded = honoured;
        if (honoured)
            json_array_append_new(jt, json_integer(tcs[i]));
        const int tsteps[] = {c->T, 1};
        for (size_t k = 0; k < 2 && honoured && !s; k++) {
            variant tv = {.step = tsteps[k], .threads = tcs[i]};
            snprintf(tv.name, sizeof tv.name, "threads=%d %s", tcs[i], k ? "chunk=1" : "all");
            if (!(s = run_variant(c, et, &tv, &c->cap, c->lvar, err))) {
                compare_variant(c, tv.name, true, &s);
                if (s == KVV_ERR_NOMEM)
                    s = kvv_error_set(err, KVV_ERR_NOMEM, "invariance: out of memory");
            }
        }
        kvv_engine_close(et);
    }
    if (!s)
        json_object_set_new(c->r->details, "engine_threads",
                            json_string(threaded ? "thread counts compared"
                                                 : "engine has no threads (it reports 1 "
                                                   "thread whatever is asked)"));
    return s;
}

/* The control: the same drive (the largest chunk, big) with and without the
 * planted flip, so the detection is the plant's even on an engine that is
 * not invariant. */
static kvv_status planted_control(inv_ctx *c, kvv_engine *e, int big, kvv_error *err)
{
    variant plain = {.step = big}, cv = {.step = big, .flip = true};
    snprintf(plain.name, sizeof plain.name, "chunk=%d", big);
    snprintf(cv.name, sizeof cv.name, "chunk=%d + planted flip", big);
    kvv_status s;
    if ((s = run_variant(c, e, &plain, &c->alt, c->lalt, err)))
        return s;
    if ((s = run_variant(c, e, &cv, &c->cap, c->lvar, err)))
        return s;
    kvv_check_result probe; /* count without touching r's first mismatch */
    kvv_check_result *keep = c->r;
    kvv_check_result_init(&probe, "probe");
    c->r = &probe;
    uint64_t n = compare_to(c, &c->alt, c->lalt, cv.name, false, &s);
    c->r = keep;
    char where[256] = "";
    if (probe.has_mismatch)
        kvv_mismatch_format(&probe.mismatch, where, sizeof where);
    kvv_check_result_free(&probe);
    char name[96];
    snprintf(name, sizeof name, "flipped bit in residual[l=%d,t=%d] during chunk=%d",
             c->L / 2, c->T / 2, big);
    if (s || kvv_check_add_control(c->r, name, n > 0,
                                   "%llu elements differ from the same run without the "
                                   "flip; first %s",
                                   (unsigned long long)n, where))
        return kvv_error_set(err, KVV_ERR_NOMEM, "invariance: out of memory");
    return KVV_OK;
}

static kvv_status run(inv_ctx *c, kvv_error *err)
{
    const kvv_check_opts *o = c->o;
    kvv_check_result *r = c->r;
    kvv_engine *e = NULL;
    kvv_engine_opts eo = kvv_check_engine_opts(o, c->T);
    kvv_status s = kvv_check_open_engine(o->model, &eo, KVV_CHECK_INVARIANCE_NEEDS(o), "invariance",
                                         &e, err);
    if (s)
        return s;
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    kvv_check_set_engine(r, &d);

    json_object_set_new(r->details, "ulp_by_layer", json_array());
    variant base = {.step = c->T};
    snprintf(base.name, sizeof base.name, "all");
    if ((s = run_variant(c, e, &base, &c->base, c->lbase, err)))
        goto out;

    /* the chunkings (the audit's straddle the engine's kernel switches); the
     * largest carries the planted flip of --force-fail and the control */
    static const int default_steps[] = {1, 2, 7};
    const int *steps = o->chunks ? o->chunks : default_steps;
    int n_steps = o->chunks ? o->n_chunks : 3;
    if (n_steps > KVV_INV_MAX_CHUNKS)
        n_steps = KVV_INV_MAX_CHUNKS;
    int big = 1;
    for (int i = 0; i < n_steps; i++)
        big = steps[i] > big ? steps[i] : big;
    /* the batch sizes compared: all T at once against the chunkings' pieces
     * and prefill T/2 + 1-token decode */
    int sizes[2 * KVV_INV_MAX_CHUNKS + 3], ns = 0;
    sizes[ns++] = c->T;
    for (int i = 0; i < n_steps; i++) {
        sizes[ns++] = steps[i] < c->T ? steps[i] : c->T;
        if (steps[i] < c->T && c->T % steps[i])
            sizes[ns++] = c->T % steps[i];
    }
    if (c->T >= 2) {
        sizes[ns++] = c->T / 2;
        sizes[ns++] = 1;
    }
    if (kvv_check_skip_one_path(r, e, sizes, ns))
        goto out;
    variant vs[KVV_INV_MAX_CHUNKS + 1];
    int nv = 0;
    json_t *jc = json_array();
    json_object_set_new(r->details, "chunks", jc);
    for (int i = 0; i < n_steps; i++) {
        vs[nv] = (variant){.step = steps[i], .flip = o->force_fail && steps[i] == big};
        snprintf(vs[nv].name, sizeof vs[nv].name, "chunk=%d%s", steps[i],
                 vs[nv].flip ? " (planted flip)" : "");
        json_array_append_new(jc, json_integer(steps[i]));
        nv++;
    }
    if (c->T >= 2) {
        vs[nv] = (variant){.step = 1, .prefill = c->T / 2};
        snprintf(vs[nv].name, sizeof vs[nv].name, "prefill %d + decode", c->T / 2);
        nv++;
    }
    int total_runs = nv + (o->controls ? 1 : 0);
    for (int i = 0; i < nv; i++) {
        if ((s = run_variant(c, e, &vs[i], &c->cap, c->lvar, err)))
            goto out;
        compare_variant(c, vs[i].name, true, &s);
        if (s)
            goto nomem;
        if (o->progress)
            o->progress(o->progress_user, "invariance", i + 1, total_runs);
    }

    if ((s = thread_variants(c, d.n_threads, err)))
        goto out;
    if ((s = ubatch_variants(c, e, d.n_ubatch, err)))
        goto out;

    if (o->controls && (s = planted_control(c, e, big, err)))
        goto out;

    json_object_set_new(r->details, "n_tokens", json_integer(c->T));
    json_object_set_new(r->details, "variants", json_integer(nv));
    json_object_set_new(r->details, "force_fail", json_boolean(o->force_fail));
    char pass[160], fail[160];
    snprintf(pass, sizeof pass, "0 of %llu K/V/residual/logit values differ over %d variants",
             (unsigned long long)c->total.n, r->n_rows / 4);
    char ulp[24], nonfinite[64];
    snprintf(fail, sizeof fail, "%llu of %llu values differ%s, max ULP %s",
             (unsigned long long)c->total.n_diff, (unsigned long long)c->total.n,
             kvv_cmp_nonfinite(&c->total, nonfinite, sizeof nonfinite),
             kvv_ulp_text(c->total.max_ulp, ulp, sizeof ulp));
    kvv_check_conclude(r, c->total.n_diff > 0, pass, fail, "0 differ");
    goto out;
nomem:
    s = kvv_error_set(err, KVV_ERR_NOMEM, "invariance: out of memory");
out:
    kvv_engine_close(e);
    return s;
}

/* The buffers and captures, run, free. */
static kvv_status body(void *ctx, kvv_error *err)
{
    inv_ctx *c = ctx;
    const kvv_check_opts *o = c->o;
    kvv_cmp_init(&c->total);
    const kvv_hparams *hp = &o->model->hp;
    c->L = hp->n_layer;
    c->T = o->n_tokens;
    c->V = hp->n_vocab;
    c->n_embd = hp->n_embd;
    c->kd = hp->n_head_kv * hp->head_dim;
    c->vd = hp->n_head_kv * hp->head_dim_v;
    size_t nl = (size_t)c->T * c->V;
    c->pos = malloc((size_t)c->T * sizeof *c->pos);
    c->lbase = malloc(nl * sizeof(float));
    c->lvar = malloc(nl * sizeof(float));
    c->lalt = malloc(nl * sizeof(float));
    c->have = malloc((size_t)c->T);
    kvv_status s = KVV_OK;
    if (!c->pos || !c->lbase || !c->lvar || !c->lalt || !c->have)
        s = kvv_error_set(err, KVV_ERR_NOMEM, "invariance: out of memory for %d tokens", c->T);
    unsigned what = KVV_CAPTURE_RESID | KVV_CAPTURE_KV;
    if (!s)
        s = kvv_capture_init(&c->base, hp, c->T, what, err);
    if (!s)
        s = kvv_capture_init(&c->cap, hp, c->T, what, err);
    if (!s && o->controls)
        s = kvv_capture_init(&c->alt, hp, c->T, what, err);
    if (!s) {
        for (int t = 0; t < c->T; t++)
            c->pos[t] = t;
        s = run(c, err);
    }
    kvv_capture_free(&c->base);
    kvv_capture_free(&c->cap);
    kvv_capture_free(&c->alt);
    free(c->lalt);
    free(c->pos);
    free(c->lbase);
    free(c->lvar);
    free(c->have);
    return s;
}

kvv_status kvv_check_invariance(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err)
{
    inv_ctx c = {.o = o, .r = r};
    return kvv_check_frame(o, r, o->n_tokens, body, &c, err);
}

int kvv_invariance_threads_ran(const kvv_check_result *r, int base, int *out, int max)
{
    if (max < 1)
        return 0;
    int n = 0;
    out[n++] = base;
    const json_t *tc = r && r->details ? json_object_get(r->details, "thread_counts") : NULL;
    size_t i;
    const json_t *v;
    json_array_foreach(tc, i, v)
        if (json_is_integer(v) && n < max)
            out[n++] = (int)json_integer_value(v);
    return n;
}
