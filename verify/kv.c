/* kv.c — the kv check: cached K/V against K/V recomputed from residuals
 * (see kv.h). */
#include "verify/kv.h"

#include <stdlib.h>
#include <string.h>

#include "verify/capture.h"

int kvv_kv_default_chunk(int n)
{
    static const int cand[] = {5, 3, 7, 9, 11};
    if (n <= 2)
        return 1;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        if (cand[i] < n && n % cand[i] != 0)
            return cand[i];
    return 1;
}

typedef struct {
    const kvv_check_opts *o;
    kvv_check_result *r;
    int L, T, kd, vd, hd, hdv;
    int32_t *pos;        /* [T] 0..T-1 */
    kvv_capture cap;     /* residuals + hook K/V of the prefill */
    float *ck, *cv;      /* [L][T][kd|vd] K/V read back from the cache */
    float *rk, *rv;      /* [T][kd|vd] one layer's recompute */
    uint64_t *uk, *uv;   /* [L][T] max ULP per layer and position over the recomputes */
} kv_ctx;

static float *ck_at(const kv_ctx *c, int l) { return c->ck + (size_t)l * c->T * c->kd; }
static float *cv_at(const kv_ctx *c, int l) { return c->cv + (size_t)l * c->T * c->vd; }

/* Read the whole cache back for positions 0..T-1. */
static void load_cache(kv_ctx *c, kvv_kv_cache *cache)
{
    for (int l = 0; l < c->L; l++)
        for (int t = 0; t < c->T; t++) {
            kvv_kv_cache_load_k(cache, l, t, ck_at(c, l) + (size_t)t * c->kd);
            kvv_kv_cache_load_v(cache, l, t, cv_at(c, l) + (size_t)t * c->vd);
        }
}

/* Recompute layer l's K/V for all T tokens in pieces of `step` tokens. */
static kvv_status recompute(kv_ctx *c, kvv_engine *e, int l, int step, float *k, float *v,
                            kvv_error *err)
{
    for (int t0 = 0; t0 < c->T; t0 += step) {
        int n = c->T - t0 < step ? c->T - t0 : step;
        kvv_status s = kvv_engine_kv_from_residual(e, l, n, kvv_capture_resid(&c->cap, l, t0),
                                                   c->pos + t0, k + (size_t)t0 * c->kd,
                                                   v + (size_t)t0 * c->vd, err);
        if (s)
            return s;
    }
    return KVV_OK;
}

/* Mismatch location of global element index `first` of a [T][dim] array. */
static kvv_mismatch locate(const char *tensor, const char *variant, int l, int64_t first,
                           int dim, int head_dim, float expected, float actual)
{
    kvv_mismatch m;
    memset(&m, 0, sizeof m);
    snprintf(m.tensor, sizeof m.tensor, "%s", tensor);
    snprintf(m.variant, sizeof m.variant, "%s", variant);
    int j = (int)(first % dim);
    m.layer = l;
    m.token = (int)(first / dim);
    m.head = j / head_dim;
    m.index = j % head_dim;
    m.expected = expected;
    m.actual = actual;
    return m;
}

/* Fold the largest ULP of each of T rows of dim elements into grid[T]
 * (the report's layer x position map; KVV_ULP_NAN, the maximum, for NaN). */
static void max_ulp_rows(uint64_t *grid, const float *expected, const float *actual, int T,
                         int dim)
{
    for (int t = 0; t < T; t++) {
        kvv_cmp_stats s;
        kvv_cmp_init(&s);
        kvv_cmp_update(&s, expected + (size_t)t * dim, actual + (size_t)t * dim, (size_t)dim);
        if (s.max_ulp > grid[t])
            grid[t] = s.max_ulp;
    }
}

/* The layer x position map as JSON: {"K": [[ulp per position] per layer],
 * "V": ...}, null for a NaN. */
static json_t *ulp_map_json(const kv_ctx *c)
{
    json_t *o = json_object();
    const uint64_t *grids[2] = {c->uk, c->uv};
    for (int g = 0; g < 2; g++) {
        json_t *layers = json_array();
        for (int l = 0; l < c->L; l++) {
            json_t *row = json_array();
            for (int t = 0; t < c->T; t++)
                json_array_append_new(row, kvv_json_ulp(grids[g][(size_t)l * c->T + t]));
            json_array_append_new(layers, row);
        }
        json_object_set_new(o, g ? "V" : "K", layers);
    }
    return o;
}

/* Compare one layer's K and V (cache = expected) and add rows; totals in
 * *tot; a recompute (map true) also folds into the layer x position map. */
static kvv_status compare_layer(kv_ctx *c, int l, const char *variant, const float *k,
                                const float *v, kvv_cmp_stats *tot, bool map)
{
    if (map) {
        max_ulp_rows(c->uk + (size_t)l * c->T, ck_at(c, l), k, c->T, c->kd);
        max_ulp_rows(c->uv + (size_t)l * c->T, cv_at(c, l), v, c->T, c->vd);
    }
    kvv_cmp_stats sk, sv;
    kvv_cmp_init(&sk);
    kvv_cmp_init(&sv);
    kvv_cmp_update(&sk, ck_at(c, l), k, (size_t)c->T * c->kd);
    kvv_cmp_update(&sv, cv_at(c, l), v, (size_t)c->T * c->vd);
    char what[48];
    snprintf(what, sizeof what, "K %s", variant);
    if (kvv_check_add_row(c->r, l, what, &sk))
        return KVV_ERR_NOMEM;
    if (sk.first >= 0)
        kvv_check_row_where(c->r, "t=%d,h=%d,i=%d", (int)(sk.first / c->kd),
                            (int)(sk.first % c->kd) / c->hd, (int)(sk.first % c->kd) % c->hd);
    snprintf(what, sizeof what, "V %s", variant);
    if (kvv_check_add_row(c->r, l, what, &sv))
        return KVV_ERR_NOMEM;
    if (sv.first >= 0)
        kvv_check_row_where(c->r, "t=%d,h=%d,i=%d", (int)(sv.first / c->vd),
                            (int)(sv.first % c->vd) / c->hdv, (int)(sv.first % c->vd) % c->hdv);
    if (sk.first >= 0) {
        kvv_mismatch m = locate("K", variant, l, sk.first, c->kd, c->hd, sk.first_ref,
                                sk.first_test);
        kvv_check_note_mismatch(c->r, &m);
    }
    if (sv.first >= 0) {
        kvv_mismatch m = locate("V", variant, l, sv.first, c->vd, c->hdv, sv.first_ref,
                                sv.first_test);
        kvv_check_note_mismatch(c->r, &m);
    }
    kvv_cmp_merge(tot, &sk);
    kvv_cmp_merge(tot, &sv);
    return KVV_OK;
}

static void flip_low_bit(void *p)
{
    ((uint8_t *)p)[0] ^= 1u; /* little-endian: the lowest mantissa bit of f32/f16/bf16 */
}

/* Control 1: one flipped bit in the cache must be found exactly there. */
static kvv_status control_bitflip(kv_ctx *c, kvv_engine *e, kvv_error *err)
{
    int lf = c->L > 2 ? 2 : c->L - 1, tf = c->T > 5 ? 5 : c->T - 1;
    kvv_kv_cache *cache = kvv_engine_cache(e);
    void *p = kvv_kv_cache_k_ptr(cache, lf, tf);
    kvv_status s = recompute(c, e, lf, c->T, c->rk, c->rv, err);
    if (s)
        return s;
    float *row = ck_at(c, lf) + (size_t)tf * c->kd;
    flip_low_bit(p);
    kvv_kv_cache_load_k(cache, lf, tf, row);
    kvv_cmp_stats st;
    kvv_cmp_init(&st);
    kvv_cmp_update(&st, ck_at(c, lf), c->rk, (size_t)c->T * c->kd);
    /* detected iff the comparison reports the planted element (row tf, index 0) */
    kvv_cmp_stats spot;
    kvv_cmp_init(&spot);
    kvv_cmp_update(&spot, row, c->rk + (size_t)tf * c->kd, 1);
    bool detected = spot.n_diff == 1;
    flip_low_bit(p); /* restore */
    kvv_kv_cache_load_k(cache, lf, tf, row);
    char name[96];
    snprintf(name, sizeof name, "flipped bit in K[l=%d,t=%d]", lf, tf);
    return kvv_check_add_control(c->r, name, detected,
                                 "%llu of %llu elements of layer %d differ, first at t=%lld "
                                 "i=%lld",
                                 (unsigned long long)st.n_diff, (unsigned long long)st.n, lf,
                                 st.first < 0 ? -1LL : (long long)(st.first / c->kd),
                                 st.first < 0 ? -1LL : (long long)(st.first % c->kd))
               ? KVV_ERR_NOMEM
               : KVV_OK;
}

/* The reversed-summation control as the engine plants it (or kvverify). */
#define KV_CONTROL_NATIVE "kv_from_residual with reversed summation order"

/* Recompute every layer (all at once) with engine opts eo into k/v
 * [L][T][..]; or, when k is NULL, compare against the cache into *st.
 * ctl (optional, 160 bytes): the control the engine really planted. */
static kvv_status recompute_with(kv_ctx *c, const kvv_engine_opts *eo, float *k, float *v,
                                 kvv_cmp_stats *st, char *ctl, kvv_error *err)
{
    kvv_engine *e;
    kvv_status s = kvv_engine_open(c->o->model, eo, &e, err);
    if (s)
        return s;
    if (ctl)
        kvv_engine_control_name(kvv_engine_options(e)->control, KV_CONTROL_NATIVE, ctl, 160);
    for (int l = 0; l < c->L && !s; l++) {
        float *ok = k ? k + (size_t)l * c->T * c->kd : c->rk;
        float *ov = v ? v + (size_t)l * c->T * c->vd : c->rv;
        s = recompute(c, e, l, c->T, ok, ov, err);
        if (!s && st) {
            kvv_cmp_update(st, ck_at(c, l), ok, (size_t)c->T * c->kd);
            kvv_cmp_update(st, cv_at(c, l), ov, (size_t)c->T * c->vd);
        }
    }
    kvv_engine_close(e);
    return s;
}

/* Control 2: a different summation order must be detected. */
static kvv_status control_reversed(kv_ctx *c, kvv_error *err)
{
    kvv_engine_opts eo = kvv_check_engine_opts(c->o, c->T);
    eo.control |= KVV_CTL_KV_REVERSED_SUM;
    kvv_cmp_stats at_dtype;
    kvv_cmp_init(&at_dtype);
    char ctl[160];
    kvv_status s = recompute_with(c, &eo, NULL, NULL, &at_dtype, ctl, err);
    if (s)
        return s;
    const char *dt = kvv_cache_type_name(eo.cache_type);
    char ulp[24];
    if (eo.cache_type == KVV_CACHE_F32)
        return kvv_check_add_control(c->r, ctl, at_dtype.n_diff > 0,
                                     "%llu of %llu elements differ from the cache, max ULP %s",
                                     (unsigned long long)at_dtype.n_diff,
                                     (unsigned long long)at_dtype.n,
                                     kvv_ulp_text(at_dtype.max_ulp, ulp, sizeof ulp))
                   ? KVV_ERR_NOMEM
                   : KVV_OK;
    /* f16/bf16: compare reversed against normal, both stored as f32. */
    size_t nk = (size_t)c->L * c->T * c->kd, nv = (size_t)c->L * c->T * c->vd;
    float *k1 = malloc(nk * sizeof *k1), *v1 = malloc(nv * sizeof *v1);
    float *k2 = malloc(nk * sizeof *k2), *v2 = malloc(nv * sizeof *v2);
    if (!k1 || !v1 || !k2 || !v2) {
        s = kvv_error_set(err, KVV_ERR_NOMEM, "kv: out of memory");
        goto out;
    }
    eo.cache_type = KVV_CACHE_F32;
    if ((s = recompute_with(c, &eo, k1, v1, NULL, NULL, err)))
        goto out;
    eo.control &= ~(unsigned)KVV_CTL_KV_REVERSED_SUM;
    if ((s = recompute_with(c, &eo, k2, v2, NULL, NULL, err)))
        goto out;
    kvv_cmp_stats st;
    kvv_cmp_init(&st);
    kvv_cmp_update(&st, k2, k1, nk);
    kvv_cmp_update(&st, v2, v1, nv);
    char name[176];
    snprintf(name, sizeof name, "%.160s (at f32)", ctl);
    if (kvv_check_add_control(c->r, name, st.n_diff > 0,
                              "%llu of %llu elements differ at f32, max ULP %s; at %s "
                              "storage %llu differ (rounding masks last-bit changes)",
                              (unsigned long long)st.n_diff, (unsigned long long)st.n,
                              kvv_ulp_text(st.max_ulp, ulp, sizeof ulp), dt,
                              (unsigned long long)at_dtype.n_diff))
        s = kvv_error_set(err, KVV_ERR_NOMEM, "kv: out of memory");
out:
    free(k1);
    free(v1);
    free(k2);
    free(v2);
    return s;
}

static kvv_status run(kv_ctx *c, kvv_error *err)
{
    const kvv_check_opts *o = c->o;
    kvv_check_result *r = c->r;
    kvv_engine_opts eo = kvv_check_engine_opts(o, c->T);
    kvv_engine *e = NULL;
    kvv_status s = kvv_check_open_engine(o->model, &eo, KVV_CHECK_KV_NEEDS, "kv", &e, err);
    if (s)
        return s;
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    kvv_check_set_engine(r, &d);
    int chunk = o->chunk > 0 ? o->chunk : kvv_kv_default_chunk(c->T);
    /* the batch sizes compared: the prefill against recomputes of 1, T and
     * chunk tokens (and the chunked run's remainder) */
    const int sizes[] = {c->T, 1, chunk < c->T ? chunk : c->T, c->T % chunk ? c->T % chunk : 1};
    if (kvv_check_skip_one_path(r, e, sizes, 4))
        goto out;

    /* 1. prefill, recording h_l(t) and the hook's K/V */
    kvv_hooks h = kvv_capture_hooks(&c->cap);
    if ((s = kvv_engine_forward(e, c->T, o->tokens, c->pos, &h, KVV_LOGITS_NONE, NULL, err)))
        goto out;
    kvv_kv_cache *cache = kvv_engine_cache(e);
    if (!cache) { /* it declared kv-read */
        s = kvv_error_set(err, KVV_ERR_INTERNAL, "kv: engine %s offers kv-read but no cache",
                          d.name);
        goto out;
    }
    if (o->force_fail) /* planted: one flipped bit in the cached V of the last layer/token */
        flip_low_bit(kvv_kv_cache_v_ptr(cache, c->L - 1, c->T - 1));
    load_cache(c, cache);

    /* 2. the hook's K/V against the cache */
    kvv_cmp_stats tot, hook;
    kvv_cmp_init(&tot);
    kvv_cmp_init(&hook);
    for (int l = 0; l < c->L && !s; l++)
        s = compare_layer(c, l, "hook", kvv_capture_k(&c->cap, l, 0),
                          kvv_capture_v(&c->cap, l, 0), &hook, false);
    if (s)
        goto nomem;

    /* 3. recompute (a) token by token, (b) all at once, (c) in odd chunks */
    char chunk_name[24];
    snprintf(chunk_name, sizeof chunk_name, "chunk=%d", chunk);
    const struct { const char *name; int step; } modes[] = {
        {"token-by-token", 1}, {"all", c->T}, {chunk_name, chunk}};
    for (size_t mi = 0; mi < 3; mi++) {
        for (int l = 0; l < c->L; l++) {
            if ((s = recompute(c, e, l, modes[mi].step, c->rk, c->rv, err)))
                goto out;
            if ((s = compare_layer(c, l, modes[mi].name, c->rk, c->rv, &tot, true)))
                goto nomem;
        }
        if (o->progress)
            o->progress(o->progress_user, "kv", (long)mi + 1, o->controls ? 5 : 3);
    }
    if (o->force_fail) /* undo the planted bit before the controls run */
        flip_low_bit(kvv_kv_cache_v_ptr(cache, c->L - 1, c->T - 1));
    load_cache(c, cache);

    /* 4. controls */
    if (o->controls) {
        if ((s = control_bitflip(c, e, err)))
            goto out;
        if (o->progress)
            o->progress(o->progress_user, "kv", 4, 5);
        kvv_engine_close(e);
        e = NULL;
        if ((s = control_reversed(c, err)))
            goto out;
        if (o->progress)
            o->progress(o->progress_user, "kv", 5, 5);
    }

    json_object_set_new(r->details, "n_tokens", json_integer(c->T));
    json_object_set_new(r->details, "n_layer", json_integer(c->L));
    json_object_set_new(r->details, "chunk", json_integer(chunk));
    json_object_set_new(r->details, "recompute", kvv_cmp_stats_to_json(&tot));
    json_object_set_new(r->details, "hook_vs_cache", kvv_cmp_stats_to_json(&hook));
    json_object_set_new(r->details, "ulp_by_position", ulp_map_json(c));
    json_object_set_new(r->details, "force_fail", json_boolean(o->force_fail));

    char pass[160], fail[160], hook_note[64] = "";
    snprintf(pass, sizeof pass, "0 of %llu K/V elements differ (3 recomputes x %d layers)",
             (unsigned long long)tot.n, c->L);
    if (hook.n_diff)
        snprintf(hook_note, sizeof hook_note, "; kv hook != cache in %llu",
                 (unsigned long long)hook.n_diff);
    char ulp[24], nonfinite[64];
    kvv_cmp_stats all = tot;
    kvv_cmp_merge(&all, &hook);
    snprintf(fail, sizeof fail, "%llu of %llu recomputed K/V elements differ%s, max ULP %s%s",
             (unsigned long long)tot.n_diff, (unsigned long long)tot.n,
             kvv_cmp_nonfinite(&all, nonfinite, sizeof nonfinite),
             kvv_ulp_text(tot.max_ulp, ulp, sizeof ulp), hook_note);
    kvv_check_conclude(r, tot.n_diff + hook.n_diff > 0, pass, fail, "0 K/V differ");
    if (hook.n_diff)
        kvv_check_set_message(r, "the kv hook's K/V differ from the cache in %llu elements",
                              (unsigned long long)hook.n_diff);
    goto out;
nomem:
    s = kvv_error_set(err, KVV_ERR_NOMEM, "kv: out of memory");
out:
    kvv_engine_close(e);
    return s;
}

/* Its own option check, the buffers, run, free. */
static kvv_status body(void *ctx, kvv_error *err)
{
    kv_ctx *c = ctx;
    const kvv_check_opts *o = c->o;
    if (o->chunk < 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "kv: chunk %d must be positive", o->chunk);
    const kvv_hparams *hp = &o->model->hp;
    c->L = hp->n_layer;
    c->T = o->n_tokens;
    c->hd = hp->head_dim;
    c->hdv = hp->head_dim_v;
    c->kd = hp->n_head_kv * hp->head_dim;
    c->vd = hp->n_head_kv * hp->head_dim_v;
    size_t nk = (size_t)c->L * c->T * c->kd, nv = (size_t)c->L * c->T * c->vd;
    c->pos = malloc((size_t)c->T * sizeof *c->pos);
    c->ck = malloc(nk * sizeof(float));
    c->cv = malloc(nv * sizeof(float));
    c->rk = malloc((size_t)c->T * c->kd * sizeof(float));
    c->rv = malloc((size_t)c->T * c->vd * sizeof(float));
    c->uk = calloc((size_t)c->L * c->T, sizeof *c->uk);
    c->uv = calloc((size_t)c->L * c->T, sizeof *c->uv);
    kvv_status s = KVV_OK;
    if (!c->pos || !c->ck || !c->cv || !c->rk || !c->rv || !c->uk || !c->uv)
        s = kvv_error_set(err, KVV_ERR_NOMEM, "kv: out of memory for %d tokens", c->T);
    if (!s)
        s = kvv_capture_init(&c->cap, hp, c->T, KVV_CAPTURE_RESID | KVV_CAPTURE_KV, err);
    if (!s) {
        for (int t = 0; t < c->T; t++)
            c->pos[t] = t;
        s = run(c, err);
    }
    kvv_capture_free(&c->cap);
    free(c->pos);
    free(c->ck);
    free(c->cv);
    free(c->rk);
    free(c->rv);
    free(c->uk);
    free(c->uv);
    return s;
}

kvv_status kvv_check_kv(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err)
{
    kv_ctx c = {.o = o, .r = r};
    return kvv_check_frame(o, r, o->n_tokens, body, &c, err);
}
