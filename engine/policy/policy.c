/*
 * policy.c — the stateful side of the cache policies (engine/policy/policy.h):
 * hooks that collect scores and checkpoints, restoration before a step,
 * eviction after it, and exact byte accounting. The selection rules
 * themselves are pure functions in select.c.
 */
#include "engine/policy/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/policy/select.h"
#include "model/tensor_types.h"
#include "reference/kmath.h"
#include "runtime/mem_limit.h"

struct kvv_policy {
    kvv_engine *e;                /* borrowed */
    kvv_policy_cfg cfg;
    const kvv_hparams *hp;
    kvv_kv_cache *cache;          /* the engine's, borrowed */
    int n_ctx;
    int n_layer, n_head, n_kv, n_embd;
    int n_pos;                    /* next position expected */
    int n_slot;                   /* streaming reindex: next cache slot (= live count) */
    int32_t *slot_pos;            /* [n_ctx] streaming reindex: slots fed this step */
    int n_prompt;                 /* positions in the first (prefill) step */
    double *score;                /* [n_layer][n_kv][n_ctx]: h2o accumulators, tova last
                                     query (head 0 slot), snapkv window scores */
    double *tmp;                  /* [n_ctx] scratch */
    int32_t *cand;                /* [n_ctx] candidate positions scratch */
    uint8_t *keep;                /* [n_ctx] scratch */
    float *krow;                  /* [n_kv*head_dim] scratch */
    float *qmin, *qmax;           /* [head_dim] quest page bounds scratch */
    /* KV-Direct */
    uint8_t *ckpt;                /* layer: [n_layer][n_ctx][n_embd]; token: [n_ctx][n_embd] */
    size_t ckpt_elem;             /* bytes per element */
    uint8_t *evicted;             /* [n_layer][n_ctx]: K/V held only as a checkpoint */
    int32_t *tokens;              /* [n_ctx] token id by position (kvdirect-token restore) */
    float *hbuf;                  /* [n_ctx][n_embd] restore scratch */
    float *kbuf, *vbuf;           /* [n_ctx][kv dims] restore scratch */
    /* hook state for the current step */
    const kvv_hooks *user;
    bool restoring;
    bool prefill;
    int64_t select_calls;         /* quest: select hook calls in this step */
    kvv_policy_stats st;
};

/* ------------------------------------------------------------ helpers */

static size_t ckpt_elem_size(kvv_ckpt_type t)
{
    return t == KVV_CKPT_F32 ? 4 : 2;
}

static void ckpt_store(const kvv_policy *p, uint8_t *dst, const float *h)
{
    for (int i = 0; i < p->n_embd; i++) {
        if (p->cfg.ckpt == KVV_CKPT_F32) {
            memcpy(dst + 4 * (size_t)i, &h[i], 4);
        } else {
            uint16_t v = p->cfg.ckpt == KVV_CKPT_F16 ? kvv_fp32_to_fp16(h[i]) : kvv_fp32_to_bf16(h[i]);
            memcpy(dst + 2 * (size_t)i, &v, 2);
        }
    }
}

static void ckpt_load(const kvv_policy *p, const uint8_t *src, float *h)
{
    for (int i = 0; i < p->n_embd; i++) {
        if (p->cfg.ckpt == KVV_CKPT_F32) {
            memcpy(&h[i], src + 4 * (size_t)i, 4);
        } else {
            uint16_t v;
            memcpy(&v, src + 2 * (size_t)i, 2);
            h[i] = p->cfg.ckpt == KVV_CKPT_F16 ? kvv_fp16_to_fp32(v) : kvv_bf16_to_fp32(v);
        }
    }
}

static uint8_t *ckpt_row(const kvv_policy *p, int layer, int pos)
{
    size_t row = (size_t)p->n_embd * p->ckpt_elem;
    if (p->cfg.kind == KVV_POLICY_KVDIRECT_TOKEN)
        return p->ckpt + (size_t)pos * row;
    return p->ckpt + ((size_t)layer * (size_t)p->n_ctx + (size_t)pos) * row;
}

static double *score_row(const kvv_policy *p, int layer, int kvh)
{
    return p->score + ((size_t)layer * (size_t)p->n_kv + (size_t)kvh) * (size_t)p->n_ctx;
}

/* ------------------------------------------------------------ hooks */

static void hook_residual(void *user, int layer, int n, const int32_t *pos, float *h)
{
    kvv_policy *p = user;
    if (p->restoring) {
        /* kvdirect-token restore: the evicted span re-enters at layer 0
         * from its checkpoints. */
        if (layer == 0)
            for (int i = 0; i < n; i++)
                ckpt_load(p, ckpt_row(p, 0, pos[i]), h + (size_t)i * (size_t)p->n_embd);
        return;
    }
    if (p->user && p->user->residual)
        p->user->residual(p->user->user, layer, n, pos, h);
    if (!kvv_policy_is_kvdirect(p->cfg.kind) || layer >= p->n_layer)
        return;
    if (p->cfg.kind == KVV_POLICY_KVDIRECT_TOKEN && layer != 0)
        return;
    /* A residual exists only while its token is processed: KV-Direct must
     * keep it from now on if it may ever evict this token. */
    for (int i = 0; i < n; i++)
        ckpt_store(p, ckpt_row(p, layer, pos[i]), h + (size_t)i * (size_t)p->n_embd);
}

static void hook_kv(void *user, int layer, int n, const int32_t *pos, const float *k,
                    const float *v)
{
    kvv_policy *p = user;
    if (!p->restoring && p->user && p->user->kv)
        p->user->kv(p->user->user, layer, n, pos, k, v);
}

static void hook_attn_out(void *user, int layer, int n, const int32_t *pos, const float *o)
{
    kvv_policy *p = user;
    if (!p->restoring && p->user && p->user->attn_out)
        p->user->attn_out(p->user->user, layer, n, pos, o);
}

static void hook_attn(void *user, int layer, int n, const int32_t *pos, int n_keys,
                      const int32_t *key_pos, const float *prob)
{
    kvv_policy *p = user;
    if (p->restoring)
        return;
    if (p->user && p->user->attn)
        p->user->attn(p->user->user, layer, n, pos, n_keys, key_pos, prob);
    int group = p->n_head / p->n_kv;
    switch (p->cfg.kind) {
    case KVV_POLICY_H2O:
        /* Accumulated attention of every query; GQA: mean over the group. */
        for (int i = 0; i < n; i++)
            for (int h = 0; h < p->n_head; h++) {
                double *acc = score_row(p, layer, h / group);
                const float *row = prob + ((size_t)i * (size_t)p->n_head + (size_t)h) * (size_t)n_keys;
                for (int j = 0; j < n_keys; j++)
                    acc[key_pos[j]] += (double)row[j] / group;
            }
        break;
    case KVV_POLICY_TOVA: {
        /* Attention of the current (last) query averaged over all heads. */
        double *last = score_row(p, layer, 0);
        for (int j = 0; j < n_keys; j++)
            last[key_pos[j]] = 0.0;
        int i = n - 1;
        for (int h = 0; h < p->n_head; h++) {
            const float *row = prob + ((size_t)i * (size_t)p->n_head + (size_t)h) * (size_t)n_keys;
            for (int j = 0; j < n_keys; j++)
                last[key_pos[j]] += (double)row[j] / p->n_head;
        }
        break;
    }
    case KVV_POLICY_SNAPKV:
    case KVV_POLICY_PYRAMIDKV: {
        if (!p->prefill)
            break;
        /* Queries of the observation window: the last obs_window prompt positions. */
        int first_obs = p->n_prompt - p->cfg.obs_window;
        for (int i = 0; i < n; i++) {
            if (pos[i] < first_obs)
                continue;
            for (int h = 0; h < p->n_head; h++) {
                double *acc = score_row(p, layer, h / group);
                const float *row = prob + ((size_t)i * (size_t)p->n_head + (size_t)h) * (size_t)n_keys;
                for (int j = 0; j < n_keys; j++)
                    acc[key_pos[j]] += (double)row[j] / ((double)group * p->cfg.obs_window);
            }
        }
        break;
    }
    default:
        break;
    }
}

/* Quest: keep the keys of the top budget/page_size pages by the upper bound
 * of q·k over each page (per-dimension min/max of the page's keys), plus
 * the query's own page. Prefill attends to everything. */
static void hook_select(void *user, int layer, int qpos, int head, const float *q, int n_keys,
                        const int32_t *key_pos, uint8_t *keep)
{
    kvv_policy *p = user;
    if (p->restoring)
        return;
    p->select_calls++;
    if (p->user && p->user->select)
        p->user->select(p->user->user, layer, qpos, head, q, n_keys, key_pos, keep);
    if (p->cfg.kind != KVV_POLICY_QUEST || p->prefill || n_keys == 0)
        return;
    int ps = p->cfg.page_size, hd = p->cache->head_dim_k;
    int kvh = head / (p->n_head / p->n_kv);
    int n_pages = key_pos[n_keys - 1] / ps + 1;
    double *bound = p->tmp;              /* [n_pages] */
    float *kmin = p->qmin, *kmax = p->qmax;
    for (int pg = 0; pg < n_pages; pg++)
        bound[pg] = -1e300;
    int j = 0;
    while (j < n_keys) {
        int pg = key_pos[j] / ps;
        for (int d = 0; d < hd; d++) {
            kmin[d] = 3.4e38f;
            kmax[d] = -3.4e38f;
        }
        for (; j < n_keys && key_pos[j] / ps == pg; j++) {
            kvv_kv_cache_load_k(p->cache, layer, key_pos[j], p->krow);
            const float *k = p->krow + (size_t)kvh * (size_t)hd;
            for (int d = 0; d < hd; d++) {
                if (k[d] < kmin[d]) kmin[d] = k[d];
                if (k[d] > kmax[d]) kmax[d] = k[d];
            }
        }
        double b = 0;
        for (int d = 0; d < hd; d++) {
            double lo = (double)q[d] * kmin[d], hi = (double)q[d] * kmax[d];
            b += lo > hi ? lo : hi;
        }
        bound[pg] = b;
    }
    int top = (p->cfg.budget + ps - 1) / ps; /* a budget covering the context keeps every page */
    uint8_t *forced = p->keep + p->n_ctx + 1; /* second half of the scratch */
    uint8_t *sel = p->keep;
    memset(forced, 0, (size_t)n_pages);
    forced[qpos / ps < n_pages ? qpos / ps : n_pages - 1] = 1;
    kvv_select_topk(bound, forced, n_pages, top, sel);
    for (j = 0; j < n_keys; j++)
        if (!sel[key_pos[j] / ps])
            keep[j] = 0;
}

/* ------------------------------------------------------------ open/close */

/* What the policy allocates for p's cache, checked before it does: the
 * score table, and for KV-Direct the residual checkpoints and the restore
 * scratch. */
static kvv_status plan_check(const kvv_policy *p, const kvv_kv_cache *c, kvv_error *err)
{
    const uint64_t nc = (uint64_t)p->n_ctx, L = (uint64_t)p->n_layer, E = (uint64_t)p->n_embd;
    const uint64_t kv = kvv_mem_mul((uint64_t)p->n_kv,
                                    (uint64_t)c->head_dim_k + (uint64_t)c->head_dim_v);
    kvv_mem_plan plan = kvv_mem_plan_new("cache policy");
    kvv_mem_plan_add(&plan, kvv_mem_mul(kvv_mem_mul(L, (uint64_t)p->n_kv), nc * sizeof(double)),
                     "scores of %d layers x %d positions", p->n_layer, p->n_ctx);
    if (kvv_policy_is_kvdirect(p->cfg.kind)) {
        uint64_t rows = p->cfg.kind == KVV_POLICY_KVDIRECT_TOKEN ? nc : kvv_mem_mul(L, nc);
        kvv_mem_plan_add(&plan, kvv_mem_mul(kvv_mem_mul(rows, E), ckpt_elem_size(p->cfg.ckpt)),
                         "residual checkpoints of %d positions", p->n_ctx);
        kvv_mem_plan_add(&plan, kvv_mem_mul(nc, kvv_mem_add(E, kv) * sizeof(float)),
                         "restore scratch");
    }
    return kvv_mem_plan_check(&plan, err);
}

kvv_status kvv_policy_open(kvv_engine *e, const kvv_policy_cfg *cfg, kvv_policy **out,
                           kvv_error *err)
{
    *out = NULL;
    if ((unsigned)cfg->kind >= KVV_POLICY_COUNT)
        return kvv_error_set(err, KVV_ERR_USAGE, "policy: unknown kind %d", (int)cfg->kind);
    char what[48];
    snprintf(what, sizeof what, "policy %s", kvv_policy_name(cfg->kind));
    kvv_status need = kvv_engine_require(e, kvv_policy_needs(cfg->kind), what, err);
    if (need)
        return need;
    if (cfg->budget < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "policy %s: budget %d must be at least 1",
                             kvv_policy_name(cfg->kind), cfg->budget);
    if (cfg->kind == KVV_POLICY_QUEST && cfg->page_size < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "policy quest: page size %d < 1", cfg->page_size);
    if ((cfg->kind == KVV_POLICY_SNAPKV || cfg->kind == KVV_POLICY_PYRAMIDKV) &&
        (cfg->kernel < 1 || cfg->kernel % 2 == 0 || cfg->obs_window < 1))
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "policy %s: kernel %d must be odd and obs_window %d positive",
                             kvv_policy_name(cfg->kind), cfg->kernel, cfg->obs_window);
    if ((cfg->kind == KVV_POLICY_STREAMING || cfg->kind == KVV_POLICY_STREAMING_REINDEX) &&
        cfg->sinks < 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "policy streaming: sinks %d < 0", cfg->sinks);
    kvv_kv_cache *c = kvv_engine_cache(e);
    if (!c)
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED, "policy: engine has no host KV cache");
    kvv_policy *p = calloc(1, sizeof *p);
    if (!p)
        return kvv_error_set(err, KVV_ERR_NOMEM, "policy: out of memory");
    p->e = e;
    p->cfg = *cfg;
    p->hp = &kvv_engine_model(e)->hp;
    p->cache = c;
    p->n_ctx = c->n_ctx;
    p->n_layer = p->hp->n_layer;
    p->n_head = p->hp->n_head;
    p->n_kv = p->hp->n_head_kv;
    p->n_embd = p->hp->n_embd;
    size_t nc = (size_t)p->n_ctx;
    kvv_status st = plan_check(p, c, err);
    if (st) {
        kvv_policy_close(p);
        return st;
    }
    p->score = calloc((size_t)p->n_layer * (size_t)p->n_kv * nc, sizeof *p->score);
    p->tmp = calloc(nc, sizeof *p->tmp);
    p->cand = calloc(nc, sizeof *p->cand);
    p->slot_pos = calloc(nc, sizeof *p->slot_pos);
    p->keep = calloc(2 * nc + 2, 1); /* selection mask + quest forced pages */
    p->krow = calloc((size_t)p->n_kv * (size_t)c->head_dim_k, sizeof *p->krow);
    p->qmin = calloc((size_t)c->head_dim_k, sizeof *p->qmin);
    p->qmax = calloc((size_t)c->head_dim_k, sizeof *p->qmax);
    bool ok = p->score && p->tmp && p->cand && p->keep && p->krow && p->qmin && p->qmax &&
              p->slot_pos;
    if (ok && kvv_policy_is_kvdirect(cfg->kind)) {
        p->ckpt_elem = ckpt_elem_size(cfg->ckpt);
        size_t rows = cfg->kind == KVV_POLICY_KVDIRECT_TOKEN ? nc : (size_t)p->n_layer * nc;
        p->ckpt = calloc(rows * (size_t)p->n_embd, p->ckpt_elem);
        p->evicted = calloc((size_t)p->n_layer * nc, 1);
        p->tokens = calloc(nc, sizeof *p->tokens);
        p->hbuf = calloc(nc * (size_t)p->n_embd, sizeof *p->hbuf);
        p->kbuf = calloc(nc * (size_t)p->n_kv * (size_t)c->head_dim_k, sizeof *p->kbuf);
        p->vbuf = calloc(nc * (size_t)p->n_kv * (size_t)c->head_dim_v, sizeof *p->vbuf);
        ok = p->ckpt && p->evicted && p->tokens && p->hbuf && p->kbuf && p->vbuf;
    }
    if (!ok) {
        kvv_policy_close(p);
        return kvv_error_set(err, KVV_ERR_NOMEM, "policy %s: out of memory for %d positions",
                             kvv_policy_name(cfg->kind), p->n_ctx);
    }
    *out = p;
    return KVV_OK;
}

void kvv_policy_close(kvv_policy *p)
{
    if (!p)
        return;
    free(p->score);
    free(p->tmp);
    free(p->cand);
    free(p->slot_pos);
    free(p->keep);
    free(p->krow);
    free(p->qmin);
    free(p->qmax);
    free(p->ckpt);
    free(p->evicted);
    free(p->tokens);
    free(p->hbuf);
    free(p->kbuf);
    free(p->vbuf);
    free(p);
}

/* ------------------------------------------------------------ KV-Direct */

/* FLOPs of recomputing one K/V row of one layer from its residual:
 * RMSNorm (square, sum, scale, weight: 4 per element), the K and V
 * projections (2 per weight), RoPE on K (6 per rotated pair). Biases and
 * k-norms are below 1% and not counted. */
static double flops_kv_row(const kvv_policy *p)
{
    double dk = (double)p->n_kv * p->cache->head_dim_k, dv = (double)p->n_kv * p->cache->head_dim_v;
    return 4.0 * p->n_embd + 2.0 * p->n_embd * (dk + dv) + 3.0 * dk;
}

/* FLOPs of one token through one whole layer at context length ctx:
 * projections (2 per weight of q, k, v, o, and the three FFN matrices),
 * attention (q·k and p·v: 4 per head dim per key). */
static double flops_layer_token(const kvv_policy *p, int ctx)
{
    const kvv_hparams *hp = p->hp;
    double q = (double)hp->n_head * hp->head_dim, kv = flops_kv_row(p);
    double o = (double)hp->n_head * hp->head_dim_v * hp->n_embd * 2.0;
    double ffn = 3.0 * 2.0 * (double)hp->n_embd * hp->n_ff;
    double att = 4.0 * (double)hp->n_head * hp->head_dim * ctx;
    return kv + 2.0 * hp->n_embd * q + o + ffn + att;
}

static kvv_status restore_layer_mode(kvv_policy *p, kvv_error *err)
{
    int64_t rows = 0;
    double flops = 0;
    size_t dk = (size_t)p->n_kv * (size_t)p->cache->head_dim_k;
    size_t dv = (size_t)p->n_kv * (size_t)p->cache->head_dim_v;
    for (int l = 0; l < p->n_layer; l++) {
        int m = 0;
        for (int t = 0; t < p->n_pos; t++)
            if (p->evicted[(size_t)l * (size_t)p->n_ctx + (size_t)t]) {
                p->cand[m] = t;
                ckpt_load(p, ckpt_row(p, l, t), p->hbuf + (size_t)m * (size_t)p->n_embd);
                m++;
            }
        if (m == 0)
            continue;
        kvv_status s = kvv_engine_kv_from_residual(p->e, l, m, p->hbuf, p->cand, p->kbuf,
                                                   p->vbuf, err);
        if (s != KVV_OK)
            return s;
        for (int i = 0; i < m; i++)
            kvv_kv_cache_store(p->cache, l, p->cand[i], p->kbuf + (size_t)i * dk,
                               p->vbuf + (size_t)i * dv);
        rows += m;
        flops += m * flops_kv_row(p);
    }
    p->st.recomputed_last = rows;
    p->st.flops_last = flops;
    return KVV_OK;
}

static kvv_status restore_token_mode(kvv_policy *p, kvv_error *err)
{
    /* Every layer shares the window rule, so layer 0's evicted set is the span. */
    int m = 0;
    for (int t = 0; t < p->n_pos; t++)
        if (p->evicted[t])
            p->cand[m++] = t;
    p->st.recomputed_last = 0;
    p->st.flops_last = 0;
    if (m == 0)
        return KVV_OK;
    int32_t *tok = malloc((size_t)m * sizeof *tok);
    if (!tok)
        return kvv_error_set(err, KVV_ERR_NOMEM, "kvdirect-token: out of memory");
    for (int i = 0; i < m; i++)
        tok[i] = p->tokens[p->cand[i]];
    kvv_hooks h = {.user = p, .residual = hook_residual};
    p->restoring = true;
    kvv_status s = kvv_engine_forward(p->e, m, tok, p->cand, &h, KVV_LOGITS_NONE, NULL, err);
    p->restoring = false;
    free(tok);
    if (s != KVV_OK)
        return s;
    double flops = 0;
    for (int i = 0; i < m; i++)
        flops += p->n_layer * flops_layer_token(p, p->cand[i] + 1);
    p->st.recomputed_last = (int64_t)m * p->n_layer;
    p->st.flops_last = flops;
    return KVV_OK;
}

/* ------------------------------------------------------------ eviction */

/* Present positions of (layer, kvh) in ascending order into p->cand. */
static int candidates(kvv_policy *p, int layer, int kvh)
{
    int n = 0;
    for (int t = 0; t < p->n_pos; t++)
        if (kvv_kv_cache_present(p->cache, layer, t, kvh))
            p->cand[n++] = t;
    return n;
}

static void apply(kvv_policy *p, int layer, int kvh, int n)
{
    for (int i = 0; i < n; i++)
        if (!p->keep[i]) {
            kvv_kv_cache_evict(p->cache, layer, p->cand[i], kvh);
            if (p->evicted)
                p->evicted[(size_t)layer * (size_t)p->n_ctx + (size_t)p->cand[i]] = 1;
        }
}

static void evict_layer(kvv_policy *p, int l)
{
    const kvv_policy_cfg *c = &p->cfg;
    int B = c->budget;
    switch (c->kind) {
    case KVV_POLICY_FULL:
    case KVV_POLICY_QUEST: /* non-evicting: selection happens per query */
        return;
    case KVV_POLICY_WINDOW:
    case KVV_POLICY_KVDIRECT_LAYER:
    case KVV_POLICY_KVDIRECT_TOKEN: {
        int n = candidates(p, l, 0);
        kvv_select_window(n, B, p->keep);
        apply(p, l, -1, n);
        return;
    }
    case KVV_POLICY_STREAMING:
    case KVV_POLICY_STREAMING_REINDEX: {
        int n = candidates(p, l, 0);
        kvv_select_streaming(n, c->sinks, B, p->keep);
        apply(p, l, -1, n);
        return;
    }
    case KVV_POLICY_TOVA: {
        int n = candidates(p, l, 0);
        const double *last = score_row(p, l, 0);
        for (int i = 0; i < n; i++)
            p->tmp[i] = last[p->cand[i]];
        kvv_select_topk(p->tmp, NULL, n, B, p->keep);
        apply(p, l, -1, n);
        return;
    }
    case KVV_POLICY_H2O:
        for (int kvh = 0; kvh < p->n_kv; kvh++) {
            int n = candidates(p, l, kvh);
            const double *acc = score_row(p, l, kvh);
            uint8_t *forced = calloc((size_t)n + 1, 1);
            for (int i = 0; i < n; i++) {
                p->tmp[i] = acc[p->cand[i]];
                if (forced)
                    forced[i] = i >= n - c->window;
            }
            kvv_select_topk(p->tmp, forced, n, B, p->keep);
            free(forced);
            apply(p, l, kvh, n);
        }
        return;
    case KVV_POLICY_SNAPKV:
    case KVV_POLICY_PYRAMIDKV: {
        /* PyramidKV's ramp redistributes a budget that is too small for the
         * context; a budget that holds every position compresses nothing. */
        int b = c->kind == KVV_POLICY_PYRAMIDKV && B < p->n_pos
                    ? kvv_select_pyramid_budget(B, p->n_layer, l)
                    : B;
        if (b < 1)
            b = 1;
        if (!p->prefill) {
            if (!c->decode_evict)
                return;
            int n = candidates(p, l, 0);
            kvv_select_window(n, b, p->keep);
            apply(p, l, -1, n);
            return;
        }
        for (int kvh = 0; kvh < p->n_kv; kvh++) {
            int n = candidates(p, l, kvh);
            const double *acc = score_row(p, l, kvh);
            double *raw = malloc(((size_t)n + 1) * sizeof *raw);
            uint8_t *forced = calloc((size_t)n + 1, 1);
            if (!raw || !forced) {
                free(raw);
                free(forced);
                kvv_select_window(n, b, p->keep);
                apply(p, l, kvh, n);
                continue;
            }
            for (int i = 0; i < n; i++) {
                raw[i] = acc[p->cand[i]];
                forced[i] = p->cand[i] >= p->n_prompt - c->obs_window;
            }
            kvv_select_pool(raw, n, c->kernel, p->tmp);
            kvv_select_topk(p->tmp, forced, n, b, p->keep);
            free(raw);
            free(forced);
            apply(p, l, kvh, n);
        }
        return;
    }
    case KVV_POLICY_KNORM: {
        int hd = p->cache->head_dim_k;
        for (int kvh = 0; kvh < p->n_kv; kvh++) {
            int n = candidates(p, l, kvh);
            for (int i = 0; i < n; i++) {
                kvv_kv_cache_load_k(p->cache, l, p->cand[i], p->krow);
                double s = 0;
                for (int d = 0; d < hd; d++) {
                    double x = p->krow[(size_t)kvh * (size_t)hd + (size_t)d];
                    s += x * x;
                }
                p->tmp[i] = -s; /* lowest norm = highest score */
            }
            kvv_select_topk(p->tmp, NULL, n, B, p->keep);
            apply(p, l, kvh, n);
        }
        return;
    }
    case KVV_POLICY_COUNT:
        return;
    }
}

/* ------------------------------------------------------------ re-indexed streaming */

/* See policy.h. Angles in double from kvverify's own exp/log, the
 * rotation itself in fp32. */
void kvv_rope_shift(const kvv_hparams *hp, int layer, int n_kv, int head_dim, float *k,
                    int delta)
{
    int n_rot = hp->n_rot, half = n_rot / 2;
    double lb = kvv_log_d((double)kvv_hparams_rope_base(hp, layer));
    for (int i = 0; i < half; i++) {
        double theta = kvv_exp_d(-2.0 * i / n_rot * lb);
        if (hp->rope_freqs)
            theta /= hp->rope_freqs[i];
        float sn, cs;
        kvv_sincosf((float)(delta * theta), &sn, &cs);
        for (int g = 0; g < n_kv; g++) {
            float *x = k + (size_t)g * (size_t)head_dim;
            int a = hp->rope_type == KVV_ROPE_NEOX ? i : 2 * i;
            int b = hp->rope_type == KVV_ROPE_NEOX ? i + half : 2 * i + 1;
            float x0 = x[a], x1 = x[b];
            float r0 = x0 * cs, r1 = x1 * sn, r2 = x0 * sn, r3 = x1 * cs;
            x[a] = r0 - r1;
            x[b] = r2 + r3;
        }
    }
}

/* Move the live entries of every layer to contiguous slots 0..live-1 (in
 * order), rotating their keys, and drop everything above. */
static void reindex_compact(kvv_policy *p)
{
    kvv_kv_cache *c = p->cache;
    float *vrow = malloc((size_t)p->n_kv * (size_t)c->head_dim_v * sizeof *vrow);
    if (!vrow)
        return;
    int live = 0;
    for (int l = 0; l < p->n_layer; l++) {
        int to = 0;
        for (int from = 0; from < p->n_slot; from++) {
            if (!kvv_kv_cache_present(c, l, from, 0))
                continue;
            if (from != to) {
                kvv_kv_cache_load_k(c, l, from, p->krow);
                kvv_kv_cache_load_v(c, l, from, vrow);
                kvv_rope_shift(p->hp, l, p->n_kv, c->head_dim_k, p->krow, to - from);
                kvv_kv_cache_store(c, l, to, p->krow, vrow);
            }
            to++;
        }
        live = to;
    }
    kvv_kv_cache_truncate(c, live);
    p->n_slot = live;
    free(vrow);
}

/* ------------------------------------------------------------ step */

static void account(kvv_policy *p)
{
    p->st.bytes_kv = kvv_kv_cache_bytes_live(p->cache);
    uint64_t ck = 0;
    if (p->cfg.kind == KVV_POLICY_KVDIRECT_LAYER) {
        for (size_t i = 0; i < (size_t)p->n_layer * (size_t)p->n_ctx; i++)
            ck += p->evicted[i];
    } else if (p->cfg.kind == KVV_POLICY_KVDIRECT_TOKEN) {
        for (int t = 0; t < p->n_pos; t++)
            ck += p->evicted[t];
    }
    p->st.bytes_ckpt = ck * (uint64_t)p->n_embd * p->ckpt_elem;
    uint64_t total = p->st.bytes_kv + p->st.bytes_ckpt;
    if (total > p->st.peak_bytes)
        p->st.peak_bytes = total;
    p->st.recomputed_total += p->st.recomputed_last;
    p->st.flops_total += p->st.flops_last;
    p->st.steps++;
}

kvv_status kvv_policy_forward(kvv_policy *p, int n, const int32_t *tokens, const int32_t *pos,
                              const kvv_hooks *user, kvv_logits_mode lm, float *logits,
                              kvv_error *err)
{
    if (n < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "policy: empty step");
    for (int i = 0; i < n; i++)
        if (pos[i] != p->n_pos + i || pos[i] >= p->n_ctx)
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "policy %s: position %d out of order (expected %d, context %d)",
                                 kvv_policy_name(p->cfg.kind), pos[i], p->n_pos + i, p->n_ctx);
    p->prefill = p->st.steps == 0;
    if (p->prefill)
        p->n_prompt = n;
    p->st.recomputed_last = 0;
    p->st.flops_last = 0;
    kvv_status s = KVV_OK;
    if (p->cfg.kind == KVV_POLICY_KVDIRECT_LAYER)
        s = restore_layer_mode(p, err);
    else if (p->cfg.kind == KVV_POLICY_KVDIRECT_TOKEN)
        s = restore_token_mode(p, err);
    if (s != KVV_OK)
        return s;
    if (p->tokens)
        for (int i = 0; i < n; i++)
            p->tokens[pos[i]] = tokens[i];
    kvv_policy_kind k0 = p->cfg.kind;
    /* Only the hooks someone reads: an engine may lack the others. */
    kvv_hooks h = {
        .user = p,
        .residual = kvv_policy_is_kvdirect(k0) || (user && user->residual) ? hook_residual : NULL,
        .kv = user && user->kv ? hook_kv : NULL,
        .attn = hook_attn,
        .attn_out = user && user->attn_out ? hook_attn_out : NULL,
        .select = (k0 == KVV_POLICY_QUEST || (user && user->select)) ? hook_select : NULL,
    };
    /* Attention probabilities cost a copy per query: ask only when scored. */
    kvv_policy_kind k = p->cfg.kind;
    if (k != KVV_POLICY_H2O && k != KVV_POLICY_TOVA && k != KVV_POLICY_SNAPKV &&
        k != KVV_POLICY_PYRAMIDKV && !(user && user->attn))
        h.attn = NULL;
    p->user = user;
    p->select_calls = 0;
    const int32_t *fpos = pos;
    bool reindex = k0 == KVV_POLICY_STREAMING_REINDEX || (k0 == KVV_POLICY_STREAMING && p->cfg.reindex);
    if (reindex) {
        /* Re-indexed positions: the new tokens take the next cache slots. */
        for (int i = 0; i < n; i++)
            p->slot_pos[i] = p->n_slot + i;
        fpos = p->slot_pos;
    }
    s = kvv_engine_forward(p->e, n, tokens, fpos, &h, lm, logits, err);
    p->user = NULL;
    if (s != KVV_OK)
        return s;
    if (k0 == KVV_POLICY_QUEST && !p->prefill && p->select_calls == 0) {
        kvv_engine_desc d;
        kvv_engine_describe(p->e, &d);
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                             "policy quest: engine %s (%s) does not call the per-query select "
                             "hook, so Quest cannot run on it",
                             d.name, d.mode);
    }
    p->n_pos += n;
    p->n_slot += n;
    for (int l = 0; l < p->n_layer; l++)
        evict_layer(p, l);
    if (reindex)
        reindex_compact(p);
    account(p);
    return KVV_OK;
}

void kvv_policy_get_stats(const kvv_policy *p, kvv_policy_stats *out)
{
    *out = p->st;
}
