/*
 * kv_cache.h — the host KV cache all CPU engines share.
 *
 * Storage is indexed by absolute position: layer l holds K and V rows for
 * positions 0..n_ctx-1 in the cache dtype, and a per-(position, KV head)
 * presence flag. Eviction clears flags; attention visits present entries in
 * ascending position order, so the order of every attention sum is defined
 * no matter which entries a policy removed.
 *
 *   kvv_kv_cache *c = kvv_kv_cache_new(KVV_CACHE_F16, n_layer, n_ctx, n_kv, hd, hd);
 *   kvv_kv_cache_store(c, layer, pos, k_row, v_row);   // rounds to f16
 *   kvv_kv_cache_load_k(c, layer, pos, k_row);         // rounded values as fp32
 *   kvv_kv_cache_free(c);
 */
#ifndef KVV_KV_CACHE_H
#define KVV_KV_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/runtime.h"

typedef struct {
    kvv_cache_type type;
    int n_layer;
    int n_ctx;          /* positions 0..n_ctx-1 */
    int n_kv_head;
    int head_dim_k;
    int head_dim_v;
    int n_pos;          /* one past the largest position ever stored (0 = empty) */
    void **k;           /* [n_layer] -> [n_ctx][n_kv_head*head_dim_k] elements of `type` */
    void **v;           /* [n_layer] -> [n_ctx][n_kv_head*head_dim_v] */
    uint8_t **present;  /* [n_layer] -> [n_ctx][n_kv_head], 1 = live */
} kvv_kv_cache;

/* Bytes kvv_kv_cache_new allocates for these sizes (K, V and presence
 * flags; saturates at UINT64_MAX), for the pre-check of runtime/mem_limit.h. */
uint64_t kvv_kv_cache_bytes(kvv_cache_type type, int n_layer, int n_ctx, int n_kv_head,
                            int head_dim_k, int head_dim_v);

/* NULL on OOM or bad sizes. */
kvv_kv_cache *kvv_kv_cache_new(kvv_cache_type type, int n_layer, int n_ctx,
                               int n_kv_head, int head_dim_k, int head_dim_v);
void kvv_kv_cache_free(kvv_kv_cache *c); /* accepts NULL */
void kvv_kv_cache_clear(kvv_kv_cache *c);
/* Drop every entry at position >= n_pos in every layer. */
void kvv_kv_cache_truncate(kvv_kv_cache *c, int n_pos);

/* Round one fp32 value to the cache dtype and back (identity for f32). */
float kvv_cache_round(kvv_cache_type t, float x);

/* Store K and V rows (all KV heads) of one position, rounding to the dtype;
 * marks every head present. pos must be < n_ctx. */
void kvv_kv_cache_store(kvv_kv_cache *c, int layer, int pos, const float *k, const float *v);
/* Read rows back as fp32 (the rounded values). */
void kvv_kv_cache_load_k(const kvv_kv_cache *c, int layer, int pos, float *k);
void kvv_kv_cache_load_v(const kvv_kv_cache *c, int layer, int pos, float *v);
/* Pointer to one K/V element as stored (for bit-flip controls and export). */
void *kvv_kv_cache_k_ptr(kvv_kv_cache *c, int layer, int pos);
void *kvv_kv_cache_v_ptr(kvv_kv_cache *c, int layer, int pos);

bool kvv_kv_cache_present(const kvv_kv_cache *c, int layer, int pos, int kv_head);
/* Evict position pos of layer (kv_head = -1: all heads). */
void kvv_kv_cache_evict(kvv_kv_cache *c, int layer, int pos, int kv_head);
/* Count of live (position, head) entries in a layer. */
int64_t kvv_kv_cache_live(const kvv_kv_cache *c, int layer);
/* Bytes of K+V held live over all layers (exact, per head entry). */
uint64_t kvv_kv_cache_bytes_live(const kvv_kv_cache *c);

#endif
