/*
 * cpu_attn.c — causal (and sliding-window) attention of the cpu engine
 * against the shared host KV cache.
 *
 * One task per (query token i, KV head kh) covering the n_head/n_head_kv
 * query heads that share kh; each task is computed whole by one thread, so
 * the thread count never changes a bit. The keys are the cache entries at
 * positions p <= pos[i] present for kh (and pos[i] - p < n_swa on local
 * layers), in ascending p. Per query head:
 *   s_p = dot(q, k_p) * query_scale       (one kernel dot each: runs of
 *                                          consecutive keys go through one
 *                                          gemm_f32 call, same bits)
 *   s_p = cap * tanh(s_p / cap)            (gemma2 soft-cap)
 *   m = max s_p;  e_p = exp(s_p - m);  Z = sum e_p (the kernel sum: the
 *                                          lane order of dot, a function of
 *                                          the number of keys)
 *   prob_p = e_p * (1/Z);   o = sum prob_p * v_p (wsum: fused steps in
 *                                          ascending p, zero weights skipped;
 *                                          the group's heads in one pass)
 * Every sum's order depends only on the set of visible keys, which is the
 * same however the tokens were batched.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_impl.h"

typedef struct {
    kvv_cpu *c;
    const kvv_kv_cache *kc; /* the cache the queries' sequence holds */
    int layer, n;
    const int32_t *pos;
    const float *q;
    float *o;
    float *probs;   /* [n][n_head][n_keys] or NULL */
    int n_keys;     /* keys reported to the attn hook */
    bool prescale;  /* gemma2/3, phi3: q * query_scale before the dot (as llama.cpp) */
    int per;        /* tasks per chunk */
    const kvv_hooks *hooks; /* for the per-query select hook (Quest), or NULL */
} attn_job;

/* Row of K or V of (layer, pos, kv head) as fp32: a pointer into the cache
 * for f32, else widened into buf by the table's exact conversion (K12). */
static const float *cache_row(const kvv_cpu_kernels *k, const kvv_kv_cache *kc, int is_v,
                              int layer, int pos, int kh, float *buf)
{
    int hd = is_v ? kc->head_dim_v : kc->head_dim_k;
    size_t width = (size_t)kc->n_kv_head * (size_t)hd;
    size_t off = (size_t)pos * width + (size_t)kh * hd;
    const void *base = is_v ? kc->v[layer] : kc->k[layer];
    if (kc->type == KVV_CACHE_F32)
        return (const float *)base + off;
    const uint16_t *s = (const uint16_t *)base + off;
    (kc->type == KVV_CACHE_F16 ? k->widen_f16 : k->widen_bf16)(hd, s, buf);
    return buf;
}

/* Scores of the grp query heads q [grp][D] against the present keys
 * [a, b] of KV head kh: sc[t*nk + (p - p0)] = dot(q_t, k_p). Consecutive
 * keys go through one gemm_f32 call (each score is one kernel dot product,
 * so the bits equal a key-by-key loop). */
static void score_run(const attn_job *j, int ith, int kh, const float *q, int grp, int a, int b,
                      int p0, int nk, float *sc)
{
    kvv_cpu *c = j->c;
    const kvv_kv_cache *kc = j->kc;
    int D = kc->head_dim_k;
    size_t width = (size_t)kc->n_kv_head * (size_t)D;
    const float *K;
    size_t ldk;
    if (kc->type == KVV_CACHE_F32) {
        K = (const float *)kc->k[j->layer] + (size_t)a * width + (size_t)kh * D;
        ldk = width;
    } else {
        float *kb = c->ts[ith].krows;
        for (int p = a; p <= b; p++)
            cache_row(c->k, kc, 0, j->layer, p, kh, kb + (size_t)(p - a) * D);
        K = kb;
        ldk = (size_t)D;
    }
    c->k->gemm_f32(D, K, ldk, b - a + 1, q, (size_t)D, grp, sc + (a - p0), (size_t)nk);
}

/* The per-query select hook (runtime/runtime.h): for each query head of
 * the group, offer the visible present keys (finite scores, ascending) and
 * exclude the ones it drops, exactly as if they were absent. The attention
 * runs single-threaded when the hook is set (kvv_cpu_attention), so the
 * hook never runs concurrently. */
static void select_keys(const attn_job *j, int i, int kh, int p0, int nk, float *sc)
{
    const kvv_hparams *hp = j->c->hp;
    int grp = hp->n_head / hp->n_head_kv, D = hp->head_dim;
    int32_t *cand = malloc((size_t)nk * sizeof *cand);
    int32_t *slot = malloc((size_t)nk * sizeof *slot);
    uint8_t *keep = malloc((size_t)nk);
    if (cand && slot && keep) {
        for (int t = 0; t < grp; t++) {
            int h = kh * grp + t, m = 0;
            float *st = sc + (size_t)t * nk;
            for (int p = 0; p < nk; p++)
                if (st[p] != -INFINITY) {
                    cand[m] = p0 + p;
                    slot[m] = p;
                    keep[m] = 1;
                    m++;
                }
            if (m == 0)
                continue;
            const float *q = j->q + (size_t)i * hp->n_head * D + (size_t)h * D;
            j->hooks->select(j->hooks->user, j->layer, j->pos[i], h, q, m, cand, keep);
            for (int k = 0; k < m; k++)
                if (!keep[k])
                    st[slot[k]] = -INFINITY;
        }
    }
    free(cand);
    free(slot);
    free(keep);
}

/* Task (token i, KV head kh): the query heads h = kh*grp .. kh*grp+grp-1. */
static void attn_group(const attn_job *j, int ith, int i, int kh)
{
    kvv_cpu *c = j->c;
    const kvv_hparams *hp = c->hp;
    const kvv_kv_cache *kc = j->kc;
    int D = hp->head_dim, Dv = hp->head_dim_v;
    int grp = hp->n_head / hp->n_head_kv, h0 = kh * grp;
    int p1 = j->pos[i];
    int p0 = 0;
    if (hp->n_swa > 0 && hp->swa_layer[j->layer] && p1 - hp->n_swa + 1 > 0)
        p0 = p1 - hp->n_swa + 1;
    int nk = p1 - p0 + 1;
    const float *q = j->q + (size_t)i * hp->n_head * D + (size_t)h0 * D;
    if (j->prescale) {
        float *qs = c->ts[ith].qs;
        for (int d = 0; d < grp * D; d++)
            qs[d] = q[d] * hp->query_scale;
        q = qs;
    }
    float *sc = c->ts[ith].scores; /* [grp][nk] */
    const uint8_t *present = kc->present[j->layer];
    float cap = hp->attn_softcap;

    /* scores over runs of present keys; absent keys -inf */
    for (int p = p0; p <= p1;) {
        if (!present[(size_t)p * kc->n_kv_head + kh]) {
            for (int t = 0; t < grp; t++)
                sc[(size_t)t * nk + (p - p0)] = -INFINITY;
            p++;
            continue;
        }
        int b = p;
        while (b + 1 <= p1 && present[(size_t)(b + 1) * kc->n_kv_head + kh])
            b++;
        score_run(j, ith, kh, q, grp, p, b, p0, nk, sc);
        for (int t = 0; t < grp; t++) {
            float *run = sc + (size_t)t * nk + (p - p0);
            if (!j->prescale)
                c->k->scale(b - p + 1, run, hp->query_scale);
            if (cap > 0.0f)
                for (int pp = 0; pp <= b - p; pp++)
                    run[pp] = cap * kvv_cpu_tanhf(run[pp] / cap);
        }
        p = b + 1;
    }
    if (j->hooks && j->hooks->select)
        select_keys(j, i, kh, p0, nk, sc);
    /* value rows p0..p1 of kh: in place for an f32 cache, else widened once
     * for the whole group (absent rows get probability 0 and are skipped) */
    const float *V;
    size_t ldv;
    if (kc->type == KVV_CACHE_F32) {
        V = (const float *)kc->v[j->layer] + (size_t)p0 * kc->n_kv_head * Dv + (size_t)kh * Dv;
        ldv = (size_t)kc->n_kv_head * Dv;
    } else {
        float *vb = c->ts[ith].krows;
        for (int p = p0; p <= p1; p++)
            cache_row(c->k, kc, 1, j->layer, p, kh, vb + (size_t)(p - p0) * Dv);
        V = vb;
        ldv = (size_t)Dv;
    }
    for (int t = 0; t < grp; t++) {
        float *st = sc + (size_t)t * nk;
        float m = -INFINITY;
        for (int p = 0; p < nk; p++)
            if (st[p] > m)
                m = st[p];
        c->k->exp_shift(nk, st, m, st);
        float z = c->k->sum(nk, st);
        c->k->scale(nk, st, z > 0.0f ? 1.0f / z : 0.0f);
    }
    c->k->wsum(nk, Dv, grp, sc, (size_t)nk, V, ldv, j->o + (size_t)i * hp->n_head * Dv +
               (size_t)h0 * Dv, (size_t)Dv);
    if (j->probs)
        for (int t = 0; t < grp; t++) {
            const float *st = sc + (size_t)t * nk;
            float *pr = j->probs + ((size_t)i * hp->n_head + h0 + t) * j->n_keys;
            memset(pr, 0, (size_t)j->n_keys * sizeof(float));
            for (int p = 0; p < nk; p++)
                if (c->key_idx[p0 + p] >= 0)
                    pr[c->key_idx[p0 + p]] = st[p];
        }
}

/* Chunk k: tasks [k*per, (k+1)*per) of the n*n_head_kv (token, KV head) pairs. */
static void attn_task(void *ctx, int k, int ith)
{
    const attn_job *j = ctx;
    int G = j->c->hp->n_head_kv;
    long total = (long)j->n * G;
    long t0 = (long)k * j->per, t1 = t0 + j->per < total ? t0 + j->per : total;
    for (long t = t0; t < t1; t++)
        attn_group(j, ith, (int)(t / G), (int)(t % G));
}

void kvv_cpu_attention(kvv_cpu *c, int layer, int n, const int32_t *pos, const float *q,
                       float *o, const kvv_hooks *hooks)
{
    kvv_cpu_attention_in(c, c->cache, layer, n, pos, q, o, hooks);
}

void kvv_cpu_attention_in(kvv_cpu *c, const kvv_kv_cache *kc, int layer, int n,
                          const int32_t *pos, const float *q, float *o, const kvv_hooks *hooks)
{
    const kvv_hparams *hp = c->hp;
    attn_job j = {.c = c, .kc = kc, .layer = layer, .n = n, .pos = pos, .q = q, .o = o,
                  .hooks = hooks};
    j.prescale = hp->arch == KVV_ARCH_GEMMA2 || hp->arch == KVV_ARCH_GEMMA3 ||
                 hp->arch == KVV_ARCH_PHI3;
    if (hooks && hooks->attn) {
        /* The keys the batch can see: positions 0..max(pos) where any KV
         * head is present, ascending (the reference engine's definition). */
        int maxp = 0;
        for (int i = 0; i < n; i++)
            if (pos[i] > maxp)
                maxp = pos[i];
        const uint8_t *present = kc->present[layer];
        int nk = 0;
        for (int p = 0; p <= maxp; p++) {
            int any = 0;
            for (int g = 0; g < hp->n_head_kv && !any; g++)
                any = present[(size_t)p * hp->n_head_kv + g];
            c->key_idx[p] = any ? nk : -1;
            if (any)
                c->key_pos[nk++] = p;
        }
        j.n_keys = nk;
        j.probs = c->probs;
    }
    /* Chunking: about 4 chunks per thread, none for small work (the cost of
     * one task is ~ its visible keys x head_dim). One token takes one chunk
     * per thread from 16K multiply-adds: its cache rows are one per 4 KB
     * page (all KV heads of a position are adjacent) and come from memory,
     * so the time is the reads' latency, which two threads overlap
     * (qwen3-0.6b decode: attention 8.6% -> 5.4% of the wall time). */
    long tasks = (long)n * hp->n_head_kv;
    double work = (double)tasks * (pos[n - 1] + 1) * hp->head_dim;
    int nth = c->n_threads;
    int per_thread = n == 1 ? 1 : 4;
    bool serial = nth == 1 || work < (n == 1 ? 16384 : 131072) || (hooks && hooks->select);
    j.per = serial ? (int)tasks
                   : (int)((tasks + per_thread * nth - 1) / (per_thread * nth));
    kvv_cpu_pool_run(c->pool, attn_task, &j, (int)((tasks + j.per - 1) / j.per));
    if (j.probs)
        hooks->attn(hooks->user, layer, n, pos, j.n_keys, c->key_pos, c->probs);
}
