/* latency.c — see latency.h. */
#include "verify/latency.h"

#include <stdlib.h>
#include <string.h>

#include "common/median.h"
#include "model/tensor_types.h"

void kvv_latency_result_free(kvv_latency_result *res)
{
    if (!res)
        return;
    free(res->rows);
    memset(res, 0, sizeof *res);
}

static const int default_batches[] = {1, 4, 16, 64, 256, 1024, 4096};

/* Bytes of the tensors kv_from_residual reads for one layer. */
static double layer_weight_bytes(const kvv_model *m, int l)
{
    const kvv_layer_tensors *t = &m->layers[l];
    const kvv_gguf_tensor *ts[] = {t->attn_norm, t->wk, t->wv, t->bk, t->bv, t->k_norm};
    double b = 0;
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        if (ts[i])
            b += (double)ts[i]->nbytes;
    if (t->wqkv) /* phi3: only the K and V rows of the fused tensor are read */
        b += (double)t->wqkv->nbytes * 2.0 * m->hp.n_head_kv /
             (m->hp.n_head + 2.0 * m->hp.n_head_kv);
    return b;
}

/* The run's shape: batch sizes, layers measured, buffers (one batch of the
 * largest size). */
typedef struct {
    const int *batches;
    int nb, max_b, reps;
    int layers[KVV_MAX_LAYERS], nl;
    size_t dk, dv, ne;           /* K, V and residual widths */
    float *h, *k, *v;            /* [max_b][ne | dk | dv]; k, v: recomputed */
    float *kr, *vr;              /* [max_b][dk | dv]: read from the cache */
    int32_t *pos;                /* [max_b] 0.. */
    double *tr, *tc;             /* [reps] read and recompute times */
} lat_run;

/* Batch sizes (checked), repeats and the layers to measure. */
static kvv_status plan(const kvv_latency_opts *o, lat_run *p, kvv_error *err)
{
    const kvv_hparams *hp = &o->check.model->hp;
    p->batches = o->batches ? o->batches : default_batches;
    p->nb = o->batches ? o->n_batches : (int)(sizeof default_batches / sizeof default_batches[0]);
    p->max_b = 1;
    for (int i = 0; i < p->nb; i++) {
        if (p->batches[i] < 1 || p->batches[i] > 65536)
            return kvv_error_set(err, KVV_ERR_USAGE, "latency: batch size %d outside 1..65536",
                                 p->batches[i]);
        if (p->batches[i] > p->max_b)
            p->max_b = p->batches[i];
    }
    p->reps = o->repeats > 0 ? o->repeats : 5;
    if (o->all_layers || hp->n_layer <= 3)
        for (int l = 0; l < hp->n_layer; l++)
            p->layers[p->nl++] = l;
    else {
        p->layers[p->nl++] = 0;
        p->layers[p->nl++] = hp->n_layer / 2;
        p->layers[p->nl++] = hp->n_layer - 1;
    }
    p->dk = (size_t)hp->n_head_kv * hp->head_dim;
    p->dv = (size_t)hp->n_head_kv * hp->head_dim_v;
    p->ne = (size_t)hp->n_embd;
    return KVV_OK;
}

/* The buffers of p; false on OOM. */
static bool lat_alloc(lat_run *p)
{
    const size_t b = (size_t)p->max_b;
    p->h = malloc(b * p->ne * sizeof *p->h);
    p->k = malloc(b * p->dk * sizeof *p->k);
    p->v = malloc(b * p->dv * sizeof *p->v);
    p->kr = malloc(b * p->dk * sizeof *p->kr);
    p->vr = malloc(b * p->dv * sizeof *p->vr);
    p->pos = malloc(b * sizeof *p->pos);
    p->tr = malloc((size_t)p->reps * sizeof *p->tr);
    p->tc = malloc((size_t)p->reps * sizeof *p->tc);
    return p->h && p->k && p->v && p->kr && p->vr && p->pos && p->tr && p->tc;
}

static void lat_free(lat_run *p)
{
    free(p->h);
    free(p->k);
    free(p->v);
    free(p->kr);
    free(p->vr);
    free(p->pos);
    free(p->tr);
    free(p->tc);
}

/* Compare n recomputed rows (p->k, p->v) with the rows read from the cache
 * (p->kr, p->vr): bit for bit after rounding to the cache's type, which is
 * what storing them would give. Counts go to row; the first difference to r
 * (NULL: counts only). */
static void compare_rows(const kvv_kv_cache *cache, const lat_run *p, int layer, int n,
                         kvv_latency_row *row, kvv_check_result *r)
{
    for (int t = 0; t < 2; t++) {
        size_t d = t ? p->dv : p->dk;
        const float *got = t ? p->v : p->k, *want = t ? p->vr : p->kr;
        for (size_t i = 0; i < (size_t)n * d; i++) {
            float x = kvv_cache_round(cache->type, got[i]);
            row->compared++;
            if (kvv_f32_bit_equal(x, want[i]))
                continue;
            if (row->differing++ == 0 && r) {
                kvv_mismatch m = {.layer = layer, .token = (int)(i / d), .head = -1,
                                  .index = (int)(i % d), .expected = want[i], .actual = x};
                snprintf(m.tensor, sizeof m.tensor, "%s", t ? "V" : "K");
                snprintf(m.variant, sizeof m.variant, "recompute batch=%d", n);
                kvv_check_note_mismatch(r, &m);
            }
        }
    }
}

/* Seeded residuals of unit scale (timing does not depend on them), and the
 * cache holding what kv_from_residual gives for them in one batch of every
 * position: reading it and recomputing it must then be the same work, bit
 * for bit (else the timing compares different things). force_fail then
 * plants the control's change into the residuals the timed recomputes use. */
static kvv_status fill(const kvv_check_opts *c, kvv_engine *e, kvv_kv_cache *cache, lat_run *p,
                       kvv_error *err)
{
    const size_t nh = p->ne * (size_t)p->max_b;
    int32_t *ids = malloc(nh * sizeof *ids);
    if (!ids)
        return kvv_error_set(err, KVV_ERR_NOMEM, "latency: out of memory");
    kvv_prompt_random(c->seed, 2001, -1, ids, (int)nh);
    for (size_t i = 0; i < nh; i++)
        p->h[i] = (float)(ids[i] - 1000) / 1000.0f;
    free(ids);
    for (int i = 0; i < p->max_b; i++)
        p->pos[i] = i;
    for (int li = 0; li < p->nl; li++) {
        int l = p->layers[li];
        kvv_status s = kvv_engine_kv_from_residual(e, l, p->max_b, p->h, p->pos, p->k, p->v, err);
        if (s != KVV_OK)
            return s;
        for (int i = 0; i < p->max_b; i++)
            kvv_kv_cache_store(cache, l, i, p->k + (size_t)i * p->dk, p->v + (size_t)i * p->dv);
    }
    if (c->force_fail)
        p->h[0] += 1.0f; /* plant the control in the real comparison */
    return KVV_OK;
}

/* Batch size n over the layers: one row per layer and their mean (rows
 * appended to res); each layer's recomputed K/V compared with the cache's. */
static kvv_status measure_batch(const kvv_check_opts *c, kvv_engine *e, kvv_kv_cache *cache,
                                lat_run *p, int n, kvv_latency_result *res, long *done_n,
                                kvv_check_result *r, kvv_error *err)
{
    const double elem = cache->type == KVV_CACHE_F32 ? 4 : 2;
    const size_t dk = p->dk, dv = p->dv, ne = p->ne;
    const int nl = p->nl;
    kvv_latency_row *mean = &res->rows[res->n_rows + nl];
    memset(mean, 0, sizeof *mean);
    mean->layer = -1;
    mean->batch = n;
    kvv_status s = KVV_OK;
    for (int li = 0; li < nl && s == KVV_OK; li++) {
        int l = p->layers[li];
        for (int rep = 0; rep < p->reps && s == KVV_OK; rep++) {
            double a = kvv_now_seconds();
            for (int i = 0; i < n; i++) {
                kvv_kv_cache_load_k(cache, l, i, p->kr + (size_t)i * dk);
                kvv_kv_cache_load_v(cache, l, i, p->vr + (size_t)i * dv);
            }
            p->tr[rep] = kvv_now_seconds() - a;
            a = kvv_now_seconds();
            s = kvv_engine_kv_from_residual(e, l, n, p->h, p->pos, p->k, p->v, err);
            p->tc[rep] = kvv_now_seconds() - a;
        }
        kvv_latency_row *row = &res->rows[res->n_rows + li];
        if (s == KVV_OK)
            compare_rows(cache, p, l, n, row, r);
        res->differing += row->differing;
        res->compared += row->compared;
        row->layer = l;
        row->batch = n;
        row->read_s = kvv_median(p->tr, p->reps);
        row->recompute_s = kvv_median(p->tc, p->reps);
        row->read_bytes = (double)n * (double)(dk + dv) * (elem + 4.0);
        row->recompute_bytes = (double)n * (double)(ne * 4 + (dk + dv) * 4) +
                               layer_weight_bytes(c->model, l);
        row->recompute_flops = (double)n * (4.0 * ne + 2.0 * ne * (double)(dk + dv) + 3.0 * dk);
        mean->read_s += row->read_s / nl;
        mean->recompute_s += row->recompute_s / nl;
        mean->read_bytes += row->read_bytes / nl;
        mean->recompute_bytes += row->recompute_bytes / nl;
        mean->recompute_flops += row->recompute_flops / nl;
        if (c->progress)
            c->progress(c->progress_user, "latency", ++*done_n, (long)p->nb * nl);
    }
    res->n_rows += nl + 1;
    if (!res->crossover && mean->recompute_s < mean->read_s)
        res->crossover = n;
    return s;
}

/* Control: a changed residual must show up as recomputed K/V that differ
 * from the cache. p->h[0] is restored. */
static kvv_status control_run(kvv_engine *e, kvv_kv_cache *cache, lat_run *p,
                              kvv_check_result *r, kvv_error *err)
{
    const int layer = p->layers[0];
    float keep = p->h[0];
    p->h[0] += 1.0f;
    kvv_status s = kvv_engine_kv_from_residual(e, layer, 1, p->h, p->pos, p->k, p->v, err);
    p->h[0] = keep;
    if (s != KVV_OK)
        return s;
    kvv_kv_cache_load_k(cache, layer, 0, p->kr);
    kvv_kv_cache_load_v(cache, layer, 0, p->vr);
    kvv_latency_row c = {.layer = layer, .batch = 1};
    compare_rows(cache, p, layer, 1, &c, NULL);
    kvv_check_add_control(r, "residual of position 0 changed by +1 before recomputing",
                          c.differing > 0, "%llu of %llu K/V elements of layer %d differ",
                          (unsigned long long)c.differing, (unsigned long long)c.compared, layer);
    return KVV_OK;
}

/* The roofline's floor for moving `bytes` and doing `flops` on this
 * machine: max(bytes / stream bandwidth, flops / sgemm peak) in seconds;
 * null when the probe measured nothing. */
static json_t *roofline_s(const kvv_roofline *roof, double bytes, double flops)
{
    if (!(roof->read_gbs > 0) || (flops > 0 && !(roof->sgemm_gflops > 0)))
        return json_null();
    double t = bytes / (roof->read_gbs * 1e9);
    if (flops > 0 && flops / (roof->sgemm_gflops * 1e9) > t)
        t = flops / (roof->sgemm_gflops * 1e9);
    return json_real(t);
}

/* Every row and figure as the check's details (docs/report-schema.md). */
static void details_json(const kvv_latency_result *res, bool force_fail, json_t *d)
{
    json_t *arr = json_array();
    for (int i = 0; i < res->n_rows; i++) {
        const kvv_latency_row *w = &res->rows[i];
        json_t *j = json_object();
        json_object_set_new(j, "layer", json_integer(w->layer));
        json_object_set_new(j, "batch", json_integer(w->batch));
        json_object_set_new(j, "read_s", json_real(w->read_s));
        json_object_set_new(j, "recompute_s", json_real(w->recompute_s));
        json_object_set_new(j, "read_bytes", json_real(w->read_bytes));
        json_object_set_new(j, "recompute_bytes", json_real(w->recompute_bytes));
        json_object_set_new(j, "recompute_flops", json_real(w->recompute_flops));
        json_object_set_new(j, "compared", json_integer((json_int_t)w->compared));
        json_object_set_new(j, "differing", json_integer((json_int_t)w->differing));
        json_object_set_new(j, "roofline_read_s", roofline_s(&res->roof, w->read_bytes, 0));
        json_object_set_new(j, "roofline_recompute_s",
                            roofline_s(&res->roof, w->recompute_bytes, w->recompute_flops));
        json_array_append_new(arr, j);
    }
    json_object_set_new(d, "rows", arr);
    json_object_set_new(d, "stream_gbs", json_real(res->roof.read_gbs));
    json_object_set_new(d, "sgemm_gflops", json_real(res->roof.sgemm_gflops));
    json_object_set_new(d, "crossover_batch", json_integer(res->crossover));
    json_object_set_new(d, "compared", json_integer((json_int_t)res->compared));
    json_object_set_new(d, "differing", json_integer((json_int_t)res->differing));
    json_object_set_new(d, "force_fail", json_boolean(force_fail));
}

/* The verdict is about the work timed: recomputing must give the cached
 * bits. Which one is faster is a finding (the key figure). */
static void set_verdict(const kvv_latency_result *res, kvv_check_result *r)
{
    char speed[64], pass[160], fail[160];
    if (res->crossover)
        snprintf(speed, sizeof speed, "recompute beats reading from batch %d", res->crossover);
    else
        snprintf(speed, sizeof speed, "reading beats recompute at every batch size");
    snprintf(pass, sizeof pass, "%s; recomputed K/V bit-equal to the cache (%llu elements)",
             speed, (unsigned long long)res->compared);
    snprintf(fail, sizeof fail, "recomputed K/V differ from the cached K/V in %llu of %llu "
                                "elements",
             (unsigned long long)res->differing, (unsigned long long)res->compared);
    kvv_check_conclude(r, res->differing > 0, pass, fail, "recomputed K/V bit-equal to the cache");
    if (res->differing)
        kvv_check_set_message(r, "the recomputed K/V are not the cached K/V: the timing compares "
                                 "different work");
}

kvv_status kvv_latency_run(const kvv_latency_opts *o, kvv_latency_result *res,
                           kvv_check_result *r, kvv_error *err)
{
    memset(res, 0, sizeof *res);
    const kvv_check_opts *c = &o->check;
    double t0 = kvv_now_seconds();
    lat_run p = {0};
    kvv_engine *e = NULL;
    kvv_status s = plan(o, &p, err);
    if (s == KVV_OK) {
        kvv_engine_opts eo = c->engine;
        eo.n_ctx = p.max_b;
        s = kvv_check_open_engine(c->model, &eo,
                                  KVV_ENGINE_CAP_KV_READ | KVV_ENGINE_CAP_KV_FROM_RESIDUAL,
                                  "latency", &e, err);
    }
    if (s != KVV_OK) {
        kvv_check_set_error(r, err);
        return s;
    }
    kvv_engine_desc desc;
    kvv_engine_describe(e, &desc);
    kvv_check_set_engine(r, &desc);
    kvv_kv_cache *cache = kvv_engine_cache(e);
    bool ok = lat_alloc(&p);
    res->rows = calloc((size_t)p.nb * (size_t)(p.nl + 1), sizeof *res->rows);
    if (!cache || !ok || !res->rows)
        s = kvv_error_set(err, cache ? KVV_ERR_NOMEM : KVV_ERR_UNSUPPORTED,
                          cache ? "latency: out of memory" : "latency: engine has no host KV cache");
    if (s == KVV_OK)
        s = fill(c, e, cache, &p, err);
    long done_n = 0;
    for (int bi = 0; bi < p.nb && s == KVV_OK; bi++)
        s = measure_batch(c, e, cache, &p, p.batches[bi], res, &done_n, r, err);
    if (s == KVV_OK && c->controls)
        s = control_run(e, cache, &p, r, err);
    if (s == KVV_OK)
        kvv_roofline_probe(c->engine.n_threads, &res->roof);
    lat_free(&p);
    kvv_engine_close(e);
    if (s != KVV_OK) {
        kvv_latency_result_free(res);
        kvv_check_set_error(r, err);
        return s;
    }
    details_json(res, c->force_fail, r->details);
    r->seconds = kvv_now_seconds() - t0;
    set_verdict(res, r);
    return KVV_OK;
}

void kvv_latency_print(FILE *f, const kvv_latency_result *res, bool per_layer)
{
    fprintf(f, "roofline: stream read %.1f GB/s, sgemm %.1f GFLOP/s (%d threads)\n", res->roof.read_gbs,
            res->roof.sgemm_gflops, res->roof.threads);
    fprintf(f, "  %5s %6s %12s %10s %12s %12s %10s %10s %8s\n", "layer", "batch", "read (us)",
            "read GB/s", "recomp (us)", "recomp GB/s", "GFLOP/s", "% peak", "faster");
    for (int i = 0; i < res->n_rows; i++) {
        const kvv_latency_row *w = &res->rows[i];
        if (!per_layer && w->layer >= 0)
            continue;
        char lay[8];
        snprintf(lay, sizeof lay, w->layer < 0 ? "mean" : "%d", w->layer);
        double gf = w->recompute_flops / w->recompute_s / 1e9;
        fprintf(f, "  %5s %6d %12.2f %10.2f %12.2f %12.2f %10.2f %9.1f%% %8s\n", lay, w->batch,
                w->read_s * 1e6, w->read_bytes / w->read_s / 1e9, w->recompute_s * 1e6,
                w->recompute_bytes / w->recompute_s / 1e9, gf,
                res->roof.sgemm_gflops > 0 ? 100 * gf / res->roof.sgemm_gflops : 0,
                w->recompute_s < w->read_s ? "recomp" : "read");
    }
}
