/*
 * kv_seqs.c — per-sequence KV caches of one engine (runtime/kv_seqs.h).
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/kv_seqs.h"

void kvv_kv_seqs_init(kvv_kv_seqs *s, kvv_kv_cache *seq0, int n_seq)
{
    memset(s, 0, sizeof *s);
    s->n_seq = n_seq < 1 ? 1 : n_seq > KVV_KV_MAX_SEQS ? KVV_KV_MAX_SEQS : n_seq;
    s->c[0] = seq0;
}

void kvv_kv_seqs_free(kvv_kv_seqs *s)
{
    if (!s)
        return;
    for (int i = 1; i < KVV_KV_MAX_SEQS; i++) {
        kvv_kv_cache_free(s->c[i]);
        s->c[i] = NULL;
    }
}

kvv_kv_cache *kvv_kv_seqs_get(kvv_kv_seqs *s, int seq, bool create)
{
    if (seq < 0 || seq >= s->n_seq)
        return NULL;
    if (!s->c[seq] && create) {
        const kvv_kv_cache *c0 = s->c[0];
        s->c[seq] = kvv_kv_cache_new(c0->type, c0->n_layer, c0->n_ctx, c0->n_kv_head,
                                     c0->head_dim_k, c0->head_dim_v);
    }
    return s->c[seq];
}

/* Is position p present for any head of any layer of c? */
static bool held(const kvv_kv_cache *c, int p)
{
    const size_t H = (size_t)c->n_kv_head;
    for (int l = 0; l < c->n_layer; l++)
        for (size_t h = 0; h < H; h++)
            if (c->present[l][(size_t)p * H + h])
                return true;
    return false;
}

int kvv_kv_seqs_next(const kvv_kv_seqs *s, int seq)
{
    const kvv_kv_cache *c = seq >= 0 && seq < s->n_seq ? s->c[seq] : NULL;
    if (!c)
        return 0;
    int p = c->n_pos;
    while (p > 0 && !held(c, p - 1))
        p--;
    return p;
}

kvv_status kvv_kv_seqs_check(kvv_kv_seqs *s, int n, const int32_t *pos, const int32_t *seq,
                             const char *who, kvv_error *err)
{
    int next[KVV_KV_MAX_SEQS];
    bool seen[KVV_KV_MAX_SEQS] = {false};
    for (int i = 0; i < n; i++) {
        const int q = seq[i];
        if (q < 0 || q >= s->n_seq)
            return kvv_error_set(err, KVV_ERR_USAGE, "%s: token %d: sequence %d outside 0..%d",
                                 who, i, q, s->n_seq - 1);
        if (!seen[q]) {
            seen[q] = true;
            next[q] = kvv_kv_seqs_next(s, q);
        }
        if (pos[i] != next[q])
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "%s: token %d of sequence %d at position %d, expected %d (a "
                                 "sequence's tokens continue it in order, without gaps)",
                                 who, i, q, (int)pos[i], next[q]);
        next[q]++;
    }
    for (int q = 0; q < s->n_seq; q++)
        if (seen[q] && !kvv_kv_seqs_get(s, q, true))
            return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory for the KV cache of "
                                 "sequence %d", who, q);
    return KVV_OK;
}

void kvv_kv_seqs_rm(kvv_kv_seqs *s, int seq, int p0, int p1)
{
    kvv_kv_cache *c = kvv_kv_seqs_get(s, seq, false);
    if (!c || p0 >= c->n_pos)
        return;
    if (p1 < 0 || p1 >= c->n_pos) {
        kvv_kv_cache_truncate(c, p0);
        return;
    }
    for (int l = 0; l < c->n_layer; l++)
        for (int p = p0; p < p1; p++)
            kvv_kv_cache_evict(c, l, p, -1);
}

kvv_status kvv_kv_seqs_cp(kvv_kv_seqs *s, int src, int dst, int p0, int p1, kvv_error *err)
{
    if (src == dst)
        return KVV_OK;
    const kvv_kv_cache *a = kvv_kv_seqs_get(s, src, false);
    kvv_kv_cache *b = kvv_kv_seqs_get(s, dst, a != NULL);
    if (a && !b)
        return kvv_error_set(err, KVV_ERR_NOMEM, "seq_cp: out of memory for the KV cache of "
                             "sequence %d", dst);
    kvv_kv_cache_truncate(b, p0); /* accepts NULL */
    if (!a)
        return KVV_OK;
    const int end = p1 < 0 || p1 > a->n_pos ? a->n_pos : p1;
    if (end <= p0)
        return KVV_OK;
    const size_t es = a->type == KVV_CACHE_F32 ? 4 : 2, H = (size_t)a->n_kv_head;
    const size_t rk = H * (size_t)a->head_dim_k * es, rv = H * (size_t)a->head_dim_v * es;
    const size_t rows = (size_t)(end - p0);
    for (int l = 0; l < a->n_layer; l++) {
        memcpy((char *)b->k[l] + (size_t)p0 * rk, (const char *)a->k[l] + (size_t)p0 * rk,
               rows * rk);
        memcpy((char *)b->v[l] + (size_t)p0 * rv, (const char *)a->v[l] + (size_t)p0 * rv,
               rows * rv);
        memcpy(b->present[l] + (size_t)p0 * H, a->present[l] + (size_t)p0 * H, rows * H);
    }
    if (end > b->n_pos)
        b->n_pos = end;
    return KVV_OK;
}

void kvv_kv_seqs_read(const kvv_kv_seqs *s, int seq, int layer, int pos0, int n, float *k,
                      float *v, uint8_t *present)
{
    const kvv_kv_cache *c0 = s->c[0];
    const kvv_kv_cache *c = seq >= 0 && seq < s->n_seq ? s->c[seq] : NULL;
    const size_t K = (size_t)c0->n_kv_head * (size_t)c0->head_dim_k;
    const size_t V = (size_t)c0->n_kv_head * (size_t)c0->head_dim_v;
    const size_t H = (size_t)c0->n_kv_head;
    for (int i = 0; i < n; i++) {
        if (!c) {
            memset(k + (size_t)i * K, 0, K * sizeof(float));
            memset(v + (size_t)i * V, 0, V * sizeof(float));
        } else {
            kvv_kv_cache_load_k(c, layer, pos0 + i, k + (size_t)i * K);
            kvv_kv_cache_load_v(c, layer, pos0 + i, v + (size_t)i * V);
        }
        if (present)
            for (size_t h = 0; h < H; h++)
                present[(size_t)i * H + h] = c && kvv_kv_cache_present(c, layer, pos0 + i, (int)h);
    }
}

bool kvv_kv_caches_leak(kvv_kv_cache *const *caches, const int *last, int n)
{
    if (n < 2)
        return true;
    const kvv_kv_cache *c0 = caches[0];
    size_t es = c0->type == KVV_CACHE_F32 ? 4 : 2;
    size_t kb = (size_t)c0->n_kv_head * c0->head_dim_k * es;
    size_t vb = (size_t)c0->n_kv_head * c0->head_dim_v * es;
    unsigned char *rows = malloc((size_t)n * (kb + vb));
    int *at = malloc((size_t)n * sizeof *at);
    if (!rows || !at) {
        free(rows);
        free(at);
        return false;
    }
    for (int i = 0; i < n; i++) {
        const int o = (i + 1) % n;
        at[i] = last[o] < caches[i]->n_pos - 1 ? last[o] : caches[i]->n_pos - 1;
        memcpy(rows + (size_t)i * (kb + vb), kvv_kv_cache_k_ptr(caches[o], 0, at[i]), kb);
        memcpy(rows + (size_t)i * (kb + vb) + kb, kvv_kv_cache_v_ptr(caches[o], 0, at[i]), vb);
    }
    for (int i = 0; i < n; i++) {
        memcpy(kvv_kv_cache_k_ptr(caches[i], 0, at[i]), rows + (size_t)i * (kb + vb), kb);
        memcpy(kvv_kv_cache_v_ptr(caches[i], 0, at[i]), rows + (size_t)i * (kb + vb) + kb, vb);
    }
    free(rows);
    free(at);
    return true;
}
