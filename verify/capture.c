/* capture.c — recording, patching and perturbing hooks (see capture.h). */
#include "verify/capture.h"

#include "runtime/mem_limit.h"

#include <stdlib.h>
#include <string.h>

kvv_status kvv_capture_init(kvv_capture *c, const kvv_hparams *hp, int n_pos, unsigned what,
                            kvv_error *err)
{
    memset(c, 0, sizeof *c);
    c->n_layer = hp->n_layer;
    c->n_embd = hp->n_embd;
    c->kdim = hp->n_head_kv * hp->head_dim;
    c->vdim = hp->n_head_kv * hp->head_dim_v;
    c->n_pos = n_pos;
    c->patch_layer = -1;
    c->flip_layer = -1;
    size_t np = (size_t)n_pos;
    const uint64_t L = (uint64_t)c->n_layer, P = (uint64_t)(n_pos > 0 ? n_pos : 0);
    kvv_mem_plan plan = kvv_mem_plan_new("capture of the check's forward passes");
    if (what & KVV_CAPTURE_RESID)
        kvv_mem_plan_add(&plan, kvv_mem_mul(kvv_mem_mul(L + 1, P), (uint64_t)c->n_embd * sizeof(float)),
                         "residuals of %d layers x %d positions", c->n_layer + 1, n_pos);
    if (what & KVV_CAPTURE_KV)
        kvv_mem_plan_add(&plan, kvv_mem_mul(kvv_mem_mul(L, P),
                                            ((uint64_t)c->kdim + (uint64_t)c->vdim) * sizeof(float)),
                         "K and V of %d layers x %d positions", c->n_layer, n_pos);
    kvv_status st = kvv_mem_plan_check(&plan, err);
    if (st)
        return st;
    if (what & KVV_CAPTURE_RESID)
        c->resid = calloc((size_t)(c->n_layer + 1) * np * (size_t)c->n_embd, sizeof(float));
    if (what & KVV_CAPTURE_KV) {
        c->k = calloc((size_t)c->n_layer * np * (size_t)c->kdim, sizeof(float));
        c->v = calloc((size_t)c->n_layer * np * (size_t)c->vdim, sizeof(float));
    }
    if (((what & KVV_CAPTURE_RESID) && !c->resid) ||
        ((what & KVV_CAPTURE_KV) && (!c->k || !c->v))) {
        kvv_capture_free(c);
        return kvv_error_set(err, KVV_ERR_NOMEM,
                             "capture: out of memory for %d positions of %d layers", n_pos,
                             hp->n_layer);
    }
    return KVV_OK;
}

void kvv_capture_free(kvv_capture *c)
{
    if (!c)
        return;
    free(c->resid);
    free(c->k);
    free(c->v);
    c->resid = c->k = c->v = NULL;
}

static void fill_nan(float *p, size_t n)
{
    const uint32_t qnan = 0x7fc00000u;
    for (size_t i = 0; i < n; i++)
        memcpy(&p[i], &qnan, sizeof qnan);
}

void kvv_capture_poison(kvv_capture *c)
{
    size_t np = (size_t)c->n_pos;
    if (c->resid)
        fill_nan(c->resid, (size_t)(c->n_layer + 1) * np * (size_t)c->n_embd);
    if (c->k)
        fill_nan(c->k, (size_t)c->n_layer * np * (size_t)c->kdim);
    if (c->v)
        fill_nan(c->v, (size_t)c->n_layer * np * (size_t)c->vdim);
}

float *kvv_capture_resid(const kvv_capture *c, int layer, int pos)
{
    return c->resid + ((size_t)layer * (size_t)c->n_pos + (size_t)pos) * (size_t)c->n_embd;
}

float *kvv_capture_k(const kvv_capture *c, int layer, int pos)
{
    return c->k + ((size_t)layer * (size_t)c->n_pos + (size_t)pos) * (size_t)c->kdim;
}

float *kvv_capture_v(const kvv_capture *c, int layer, int pos)
{
    return c->v + ((size_t)layer * (size_t)c->n_pos + (size_t)pos) * (size_t)c->vdim;
}

static void on_residual(void *user, int layer, int n, const int32_t *pos, float *h)
{
    kvv_capture *c = user;
    if (layer < 0 || layer > c->n_layer)
        return;
    for (int i = 0; i < n; i++) {
        int p = pos[i];
        if (p < 0 || p >= c->n_pos)
            continue;
        float *row = h + (size_t)i * (size_t)c->n_embd;
        if (layer == c->patch_layer && c->patch_src && p >= c->patch_lo && p <= c->patch_hi)
            memcpy(row, c->patch_src + (size_t)p * (size_t)c->n_embd,
                   (size_t)c->n_embd * sizeof(float));
        if (layer == c->flip_layer && p == c->flip_pos && c->flip_index >= 0 &&
            c->flip_index < c->n_embd) {
            uint32_t b;
            memcpy(&b, &row[c->flip_index], sizeof b);
            b ^= 1u;
            memcpy(&row[c->flip_index], &b, sizeof b);
        }
        if (c->resid)
            memcpy(kvv_capture_resid(c, layer, p), row, (size_t)c->n_embd * sizeof(float));
        if (c->feed && p < c->feed->n_pos) /* continue from feed's residual */
            memcpy(row, kvv_capture_resid(c->feed, layer, p), (size_t)c->n_embd * sizeof(float));
    }
}

static void on_kv(void *user, int layer, int n, const int32_t *pos, const float *k,
                  const float *v)
{
    kvv_capture *c = user;
    if (layer < 0 || layer >= c->n_layer || !c->k)
        return;
    for (int i = 0; i < n; i++) {
        int p = pos[i];
        if (p < 0 || p >= c->n_pos)
            continue;
        memcpy(kvv_capture_k(c, layer, p), k + (size_t)i * (size_t)c->kdim,
               (size_t)c->kdim * sizeof(float));
        memcpy(kvv_capture_v(c, layer, p), v + (size_t)i * (size_t)c->vdim,
               (size_t)c->vdim * sizeof(float));
    }
}

kvv_hooks kvv_capture_hooks(kvv_capture *c)
{
    kvv_hooks h;
    memset(&h, 0, sizeof h);
    h.user = c;
    h.residual = on_residual; /* patch/flip settings are read at call time */
    if (c->k)
        h.kv = on_kv;
    return h;
}
