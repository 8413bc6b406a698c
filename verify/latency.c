/* latency.c — see latency.h. */
#include "verify/latency.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "model/tensor_types.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void kvv_roofline_probe(kvv_roofline *out)
{
    memset(out, 0, sizeof *out);
    /* Stream copy: 64 MiB, well past any cache on these machines. */
    size_t n = (size_t)64 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (a && b) {
        memset(a, 1, n);
        memset(b, 2, n);
        double t[5];
        for (int r = 0; r < 5; r++) {
            double t0 = kvv_now_seconds();
            memcpy(r % 2 ? a : b, r % 2 ? b : a, n);
            t[r] = kvv_now_seconds() - t0;
        }
        out->stream_gbs = 2.0 * (double)n / median(t, 5) / 1e9;
    }
    free(a);
    free(b);
    int m = 1024;
    float *x = malloc((size_t)m * m * sizeof *x), *y = malloc((size_t)m * m * sizeof *y),
          *z = malloc((size_t)m * m * sizeof *z);
    if (x && y && z) {
        for (size_t i = 0; i < (size_t)m * m; i++) {
            x[i] = (float)(i % 7) * 0.25f;
            y[i] = (float)(i % 5) * 0.5f;
        }
        double t[3];
        for (int r = 0; r < 3; r++) {
            double t0 = kvv_now_seconds();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f, x, m, y, m,
                        0.0f, z, m);
            t[r] = kvv_now_seconds() - t0;
        }
        out->sgemm_gflops = 2.0 * m * (double)m * m / median(t, 3) / 1e9;
    }
    free(x);
    free(y);
    free(z);
}

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

/* Compare n recomputed rows (k, v) with the rows read from the cache (kr,
 * vr): bit for bit after rounding to the cache's type, which is what
 * storing them would give. Counts go to row; the first difference to r. */
static void compare_rows(const kvv_kv_cache *cache, int layer, int n, size_t dk, size_t dv,
                         const float *k, const float *v, const float *kr, const float *vr,
                         kvv_latency_row *row, kvv_check_result *r)
{
    for (int t = 0; t < 2; t++) {
        size_t d = t ? dv : dk;
        const float *got = t ? v : k, *want = t ? vr : kr;
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

/* The cache holds what kv_from_residual gives for the seeded residuals in
 * one batch of every position: reading it and recomputing it must then be
 * the same work, bit for bit (else the timing compares different things). */
static kvv_status fill_cache(kvv_engine *e, kvv_kv_cache *cache, const int *layers, int nl,
                             int max_b, const float *h, const int32_t *pos, float *k, float *v,
                             size_t dk, size_t dv, kvv_error *err)
{
    for (int li = 0; li < nl; li++) {
        kvv_status s = kvv_engine_kv_from_residual(e, layers[li], max_b, h, pos, k, v, err);
        if (s != KVV_OK)
            return s;
        for (int i = 0; i < max_b; i++)
            kvv_kv_cache_store(cache, layers[li], i, k + (size_t)i * dk, v + (size_t)i * dv);
    }
    return KVV_OK;
}

/* Control: a changed residual must show up as recomputed K/V that differ
 * from the cache. h[0] is restored. */
static kvv_status control_run(kvv_engine *e, kvv_kv_cache *cache, int layer, float *h,
                              const int32_t *pos, float *k, float *v, float *kr, float *vr,
                              size_t dk, size_t dv, kvv_check_result *r, kvv_error *err)
{
    float keep = h[0];
    h[0] += 1.0f;
    kvv_status s = kvv_engine_kv_from_residual(e, layer, 1, h, pos, k, v, err);
    h[0] = keep;
    if (s != KVV_OK)
        return s;
    kvv_kv_cache_load_k(cache, layer, 0, kr);
    kvv_kv_cache_load_v(cache, layer, 0, vr);
    kvv_latency_row c = {.layer = layer, .batch = 1};
    compare_rows(cache, layer, 1, dk, dv, k, v, kr, vr, &c, NULL);
    kvv_check_add_control(r, "residual of position 0 changed by +1 before recomputing", c.differing > 0,
                          "%llu of %llu K/V elements of layer %d differ",
                          (unsigned long long)c.differing, (unsigned long long)c.compared, layer);
    return KVV_OK;
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
        json_array_append_new(arr, j);
    }
    json_object_set_new(d, "rows", arr);
    json_object_set_new(d, "stream_gbs", json_real(res->roof.stream_gbs));
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
    char speed[96];
    if (res->crossover)
        snprintf(speed, sizeof speed, "recompute beats reading from batch %d", res->crossover);
    else
        snprintf(speed, sizeof speed, "reading beats recompute at every batch size");
    int missed = kvv_check_controls_missed(r);
    if (res->differing) {
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL,
                              "recomputed K/V differ from the cached K/V in %llu of %llu elements",
                              (unsigned long long)res->differing,
                              (unsigned long long)res->compared);
        kvv_check_set_message(r, "the recomputed K/V are not the cached K/V: the timing compares "
                                 "different work");
    } else if (missed) {
        kvv_check_fail_controls_missed(r, "recomputed K/V bit-equal to the cache", missed);
    } else {
        kvv_check_set_verdict(r, KVV_VERDICT_PASS, "%s; recomputed K/V bit-equal to the cache "
                              "(%llu elements)",
                              speed, (unsigned long long)res->compared);
    }
}

kvv_status kvv_latency_run(const kvv_latency_opts *o, kvv_latency_result *res,
                           kvv_check_result *r, kvv_error *err)
{
    memset(res, 0, sizeof *res);
    const kvv_check_opts *c = &o->check;
    const kvv_hparams *hp = &c->model->hp;
    double t0 = kvv_now_seconds();
    const int *batches = o->batches ? o->batches : default_batches;
    int nb = o->batches ? o->n_batches : (int)(sizeof default_batches / sizeof default_batches[0]);
    int max_b = 1;
    for (int i = 0; i < nb; i++) {
        if (batches[i] < 1 || batches[i] > 65536) {
            kvv_error_set(err, KVV_ERR_USAGE, "latency: batch size %d outside 1..65536", batches[i]);
            kvv_check_set_error(r, err);
            return KVV_ERR_USAGE;
        }
        if (batches[i] > max_b)
            max_b = batches[i];
    }
    int reps = o->repeats > 0 ? o->repeats : 5;
    int layers[KVV_MAX_LAYERS], nl = 0;
    if (o->all_layers || hp->n_layer <= 3)
        for (int l = 0; l < hp->n_layer; l++)
            layers[nl++] = l;
    else {
        layers[nl++] = 0;
        layers[nl++] = hp->n_layer / 2;
        layers[nl++] = hp->n_layer - 1;
    }
    kvv_engine_opts eo = c->engine;
    eo.n_ctx = max_b;
    kvv_engine *e = NULL;
    kvv_status s = kvv_engine_open(c->model, &eo, &e, err);
    if (s != KVV_OK) {
        kvv_check_set_error(r, err);
        return s;
    }
    kvv_engine_desc desc;
    kvv_engine_describe(e, &desc);
    kvv_check_set_engine(r, &desc);
    kvv_kv_cache *cache = kvv_engine_cache(e);
    size_t dk = (size_t)hp->n_head_kv * hp->head_dim, dv = (size_t)hp->n_head_kv * hp->head_dim_v;
    size_t ne = (size_t)hp->n_embd;
    float *h = malloc((size_t)max_b * ne * sizeof *h);
    float *k = malloc((size_t)max_b * dk * sizeof *k), *v = malloc((size_t)max_b * dv * sizeof *v);
    float *kr = malloc((size_t)max_b * dk * sizeof *kr), *vr = malloc((size_t)max_b * dv * sizeof *vr);
    int32_t *pos = malloc((size_t)max_b * sizeof *pos);
    res->rows = calloc((size_t)nb * (size_t)(nl + 1), sizeof *res->rows);
    double *tr = malloc((size_t)reps * sizeof *tr), *tc = malloc((size_t)reps * sizeof *tc);
    if (!cache || !h || !k || !v || !kr || !vr || !pos || !res->rows || !tr || !tc) {
        s = kvv_error_set(err, cache ? KVV_ERR_NOMEM : KVV_ERR_UNSUPPORTED,
                          cache ? "latency: out of memory" : "latency: engine has no host KV cache");
        goto done;
    }
    /* Seeded residuals of unit scale; the cache from them (fill_cache). */
    {
        int32_t *ids = malloc(ne * (size_t)max_b * sizeof *ids);
        if (!ids) {
            s = kvv_error_set(err, KVV_ERR_NOMEM, "latency: out of memory");
            goto done;
        }
        kvv_prompt_random(c->seed, 2001, -1, ids, (int)(ne * (size_t)max_b));
        for (size_t i = 0; i < ne * (size_t)max_b; i++)
            h[i] = (float)(ids[i] - 1000) / 1000.0f;
        free(ids);
        for (int i = 0; i < max_b; i++)
            pos[i] = i;
        s = fill_cache(e, cache, layers, nl, max_b, h, pos, k, v, dk, dv, err);
        if (s != KVV_OK)
            goto done;
        if (c->force_fail)
            h[0] += 1.0f; /* plant the control in the real comparison */
    }
    double elem = cache->type == KVV_CACHE_F32 ? 4 : 2;
    long total = (long)nb * nl, done_n = 0;
    for (int bi = 0; bi < nb && s == KVV_OK; bi++) {
        int n = batches[bi];
        kvv_latency_row *mean = &res->rows[res->n_rows + nl];
        memset(mean, 0, sizeof *mean);
        mean->layer = -1;
        mean->batch = n;
        for (int li = 0; li < nl && s == KVV_OK; li++) {
            int l = layers[li];
            for (int rep = 0; rep < reps && s == KVV_OK; rep++) {
                double a = kvv_now_seconds();
                for (int i = 0; i < n; i++) {
                    kvv_kv_cache_load_k(cache, l, i, kr + (size_t)i * dk);
                    kvv_kv_cache_load_v(cache, l, i, vr + (size_t)i * dv);
                }
                tr[rep] = kvv_now_seconds() - a;
                a = kvv_now_seconds();
                s = kvv_engine_kv_from_residual(e, l, n, h, pos, k, v, err);
                tc[rep] = kvv_now_seconds() - a;
            }
            kvv_latency_row *row = &res->rows[res->n_rows + li];
            if (s == KVV_OK)
                compare_rows(cache, l, n, dk, dv, k, v, kr, vr, row, r);
            res->differing += row->differing;
            res->compared += row->compared;
            row->layer = l;
            row->batch = n;
            row->read_s = median(tr, reps);
            row->recompute_s = median(tc, reps);
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
                c->progress(c->progress_user, "latency", ++done_n, total);
        }
        res->n_rows += nl + 1;
        if (!res->crossover && mean->recompute_s < mean->read_s)
            res->crossover = n;
    }
    if (s == KVV_OK && o->check.controls)
        s = control_run(e, cache, layers[0], h, pos, k, v, kr, vr, dk, dv, r, err);
    if (s == KVV_OK)
        kvv_roofline_probe(&res->roof);
done:
    free(h);
    free(k);
    free(v);
    free(kr);
    free(vr);
    free(pos);
    free(tr);
    free(tc);
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
    fprintf(f, "roofline: stream copy %.1f GB/s, sgemm %.1f GFLOP/s\n", res->roof.stream_gbs,
            res->roof.sgemm_gflops);
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
