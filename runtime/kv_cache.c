/*
 * kv_cache.c — the host KV cache (runtime/kv_cache.h).
 *
 * Layout per layer: K rows [n_ctx][n_kv_head*head_dim_k] and V rows
 * [n_ctx][n_kv_head*head_dim_v], elements of the cache dtype (4 bytes for
 * f32, 2 for f16/bf16), and presence flags [n_ctx][n_kv_head]. Rounding to
 * f16/bf16 is round-to-nearest-even (model/tensor_types.h conversions).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/tensor_types.h"
#include "runtime/kv_cache.h"
#include "runtime/mem_limit.h"

static size_t elem_size(kvv_cache_type t)
{
    return t == KVV_CACHE_F32 ? 4 : 2;
}

static size_t row_k(const kvv_kv_cache *c)
{
    return (size_t)c->n_kv_head * (size_t)c->head_dim_k;
}

static size_t row_v(const kvv_kv_cache *c)
{
    return (size_t)c->n_kv_head * (size_t)c->head_dim_v;
}

uint64_t kvv_kv_cache_bytes(kvv_cache_type type, int n_layer, int n_ctx, int n_kv_head,
                            int head_dim_k, int head_dim_v)
{
    if (n_layer <= 0 || n_ctx <= 0 || n_kv_head <= 0 || head_dim_k <= 0 || head_dim_v <= 0)
        return 0;
    /* per position and layer: K and V rows, one presence byte per KV head */
    uint64_t row = kvv_mem_add(kvv_mem_mul(kvv_mem_mul((uint64_t)n_kv_head,
                                                       (uint64_t)head_dim_k + (uint64_t)head_dim_v),
                                           elem_size(type)),
                               (uint64_t)n_kv_head);
    return kvv_mem_mul(kvv_mem_mul(row, (uint64_t)n_ctx), (uint64_t)n_layer);
}

kvv_kv_cache *kvv_kv_cache_new(kvv_cache_type type, int n_layer, int n_ctx, int n_kv_head,
                               int head_dim_k, int head_dim_v)
{
    if ((unsigned)type > KVV_CACHE_BF16 || n_layer <= 0 || n_ctx <= 0 || n_kv_head <= 0 ||
        head_dim_k <= 0 || head_dim_v <= 0)
        return NULL;
    /* Sizes must fit a size_t comfortably: cap each dimension product. */
    if ((uint64_t)n_ctx * (uint64_t)n_kv_head * (uint64_t)(head_dim_k + head_dim_v) >
        ((uint64_t)1 << 40))
        return NULL;
    kvv_kv_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->type = type;
    c->n_layer = n_layer;
    c->n_ctx = n_ctx;
    c->n_kv_head = n_kv_head;
    c->head_dim_k = head_dim_k;
    c->head_dim_v = head_dim_v;
    c->k = calloc((size_t)n_layer, sizeof *c->k);
    c->v = calloc((size_t)n_layer, sizeof *c->v);
    c->present = calloc((size_t)n_layer, sizeof *c->present);
    if (!c->k || !c->v || !c->present) {
        kvv_kv_cache_free(c);
        return NULL;
    }
    size_t es = elem_size(type);
    for (int l = 0; l < n_layer; l++) {
        c->k[l] = calloc((size_t)n_ctx * row_k(c), es);
        c->v[l] = calloc((size_t)n_ctx * row_v(c), es);
        c->present[l] = calloc((size_t)n_ctx, (size_t)n_kv_head);
        if (!c->k[l] || !c->v[l] || !c->present[l]) {
            kvv_kv_cache_free(c);
            return NULL;
        }
    }
    return c;
}

void kvv_kv_cache_free(kvv_kv_cache *c)
{
    if (!c)
        return;
    for (int l = 0; l < c->n_layer; l++) {
        if (c->k)
            free(c->k[l]);
        if (c->v)
            free(c->v[l]);
        if (c->present)
            free(c->present[l]);
    }
    free(c->k);
    free(c->v);
    free(c->present);
    free(c);
}

void kvv_kv_cache_clear(kvv_kv_cache *c)
{
    kvv_kv_cache_truncate(c, 0);
}

void kvv_kv_cache_truncate(kvv_kv_cache *c, int n_pos)
{
    if (!c)
        return;
    if (n_pos < 0)
        n_pos = 0;
    if (n_pos >= c->n_pos)
        return;
    for (int l = 0; l < c->n_layer; l++)
        memset(c->present[l] + (size_t)n_pos * (size_t)c->n_kv_head, 0,
               (size_t)(c->n_pos - n_pos) * (size_t)c->n_kv_head);
    c->n_pos = n_pos;
}

float kvv_cache_round(kvv_cache_type t, float x)
{
    switch (t) {
    case KVV_CACHE_F16:
        return kvv_fp16_to_fp32(kvv_fp32_to_fp16(x));
    case KVV_CACHE_BF16:
        return kvv_bf16_to_fp32(kvv_fp32_to_bf16(x));
    case KVV_CACHE_F32:
    default:
        return x;
    }
}

static void store_row(kvv_cache_type t, void *dst, const float *src, size_t n)
{
    if (t == KVV_CACHE_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    uint16_t *d = dst;
    for (size_t i = 0; i < n; i++)
        d[i] = t == KVV_CACHE_F16 ? kvv_fp32_to_fp16(src[i]) : kvv_fp32_to_bf16(src[i]);
}

static void load_row(kvv_cache_type t, const void *src, float *dst, size_t n)
{
    if (t == KVV_CACHE_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++)
        dst[i] = t == KVV_CACHE_F16 ? kvv_fp16_to_fp32(s[i]) : kvv_bf16_to_fp32(s[i]);
}

void *kvv_kv_cache_k_ptr(kvv_kv_cache *c, int layer, int pos)
{
    return (char *)c->k[layer] + (size_t)pos * row_k(c) * elem_size(c->type);
}

void *kvv_kv_cache_v_ptr(kvv_kv_cache *c, int layer, int pos)
{
    return (char *)c->v[layer] + (size_t)pos * row_v(c) * elem_size(c->type);
}

void kvv_kv_cache_store(kvv_kv_cache *c, int layer, int pos, const float *k, const float *v)
{
    store_row(c->type, kvv_kv_cache_k_ptr(c, layer, pos), k, row_k(c));
    store_row(c->type, kvv_kv_cache_v_ptr(c, layer, pos), v, row_v(c));
    memset(c->present[layer] + (size_t)pos * (size_t)c->n_kv_head, 1, (size_t)c->n_kv_head);
    if (pos + 1 > c->n_pos)
        c->n_pos = pos + 1;
}

void kvv_kv_cache_load_k(const kvv_kv_cache *c, int layer, int pos, float *k)
{
    load_row(c->type, (const char *)c->k[layer] + (size_t)pos * row_k(c) * elem_size(c->type),
             k, row_k(c));
}

void kvv_kv_cache_load_v(const kvv_kv_cache *c, int layer, int pos, float *v)
{
    load_row(c->type, (const char *)c->v[layer] + (size_t)pos * row_v(c) * elem_size(c->type),
             v, row_v(c));
}

bool kvv_kv_cache_present(const kvv_kv_cache *c, int layer, int pos, int kv_head)
{
    if (!c || layer < 0 || layer >= c->n_layer || pos < 0 || pos >= c->n_ctx || kv_head < 0 ||
        kv_head >= c->n_kv_head)
        return false;
    return c->present[layer][(size_t)pos * (size_t)c->n_kv_head + (size_t)kv_head] != 0;
}

void kvv_kv_cache_evict(kvv_kv_cache *c, int layer, int pos, int kv_head)
{
    if (!c || layer < 0 || layer >= c->n_layer || pos < 0 || pos >= c->n_ctx ||
        kv_head >= c->n_kv_head)
        return;
    uint8_t *p = c->present[layer] + (size_t)pos * (size_t)c->n_kv_head;
    if (kv_head < 0)
        memset(p, 0, (size_t)c->n_kv_head);
    else
        p[kv_head] = 0;
}

int64_t kvv_kv_cache_live(const kvv_kv_cache *c, int layer)
{
    if (!c || layer < 0 || layer >= c->n_layer)
        return 0;
    int64_t n = 0;
    size_t total = (size_t)c->n_pos * (size_t)c->n_kv_head;
    for (size_t i = 0; i < total; i++)
        n += c->present[layer][i] != 0;
    return n;
}

uint64_t kvv_kv_cache_bytes_live(const kvv_kv_cache *c)
{
    if (!c)
        return 0;
    uint64_t per_head = (uint64_t)(c->head_dim_k + c->head_dim_v) * elem_size(c->type);
    uint64_t total = 0;
    for (int l = 0; l < c->n_layer; l++)
        total += (uint64_t)kvv_kv_cache_live(c, l) * per_head;
    return total;
}
