/*
 * policy.h — KV cache policies behind one interface, usable with any engine
 * (DESIGN.md §2, §4 kvdirect/evict). A policy wraps an open engine: every
 * forward goes through kvv_policy_forward, which
 *   1. (KV-Direct) restores the K/V of evicted positions from checkpoints,
 *   2. runs the engine's forward with the policy's hooks chained in front of
 *      the caller's (attention probabilities for the scoring policies,
 *      residuals for KV-Direct checkpoints),
 *   3. evicts down to the budget through the engine's KV cache presence
 *      flags (engine/engine.h kvv_engine_cache).
 * Survivors stay in ascending position order in the cache, so attention over
 * them sums in a defined order.
 *
 * Policies (defaults in docs/policies.md):
 *   full        no eviction
 *   window      the last `budget` positions
 *   streaming   `sinks` first positions + the last budget - sinks; with
 *               `reindex` (the StreamingLLM paper's variant) the survivors
 *               are moved to contiguous cache slots 0..budget-1 after every
 *               step, their keys rotated to the new slot (RoPE by the
 *               position difference), and each new token is fed at the next
 *               slot instead of its true position
 *   h2o         recent window (budget/2) + heavy hitters by attention
 *               accumulated over every query, per KV head (GQA: averaged
 *               over the query heads of the group)
 *   tova        after each step keep the `budget` positions with the highest
 *               attention from the current (last) query, averaged over all
 *               heads; one set per layer
 *   snapkv      at the end of prefill: observation window of the last
 *               `obs_window` prompt positions (kept), the rest scored by their
 *               pooled (kernel `kernel`) attention from the window's queries,
 *               per KV head top-k; no eviction during decode unless
 *               `decode_evict` (then the window rule)
 *   pyramidkv   SnapKV scores with per-layer budgets decreasing with depth
 *   knorm       keep the lowest-L2-norm keys, per KV head
 *   quest       keeps everything; each decode query attends only to the
 *               top ceil(budget/page_size) pages of page_size positions ranked by
 *               the per-page upper bound sum_d max(q_d*kmin_d, q_d*kmax_d)
 *               (per query head), plus the query's own page. Needs the
 *               engine's `select` hook (runtime/runtime.h)
 *   kvdirect-layer  live K/V for the last `budget` positions; every evicted
 *               position keeps its residual h_l(t) for every layer; before
 *               each forward the evicted K/V are recomputed with
 *               kv_from_residual (one projection per layer)
 *   kvdirect-token  live K/V as above; every evicted position keeps one
 *               vector (the layer-0 input); before each forward the evicted
 *               span is re-run through all layers to rebuild its K/V
 *
 *   kvv_policy_cfg cfg = kvv_policy_cfg_default(KVV_POLICY_H2O, 64);
 *   kvv_policy *p;
 *   kvv_policy_open(engine, &cfg, &p, &err);
 *   kvv_policy_forward(p, n, tokens, pos, NULL, KVV_LOGITS_LAST, logits, &err);
 *   kvv_policy_stats st; kvv_policy_get_stats(p, &st);
 *   kvv_policy_close(p);
 */
#ifndef KVV_POLICY_H
#define KVV_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"

typedef enum {
    KVV_POLICY_FULL,
    KVV_POLICY_WINDOW,
    KVV_POLICY_STREAMING,
    KVV_POLICY_STREAMING_REINDEX, /* streaming with reindex = true */
    KVV_POLICY_H2O,
    KVV_POLICY_TOVA,
    KVV_POLICY_SNAPKV,
    KVV_POLICY_PYRAMIDKV,
    KVV_POLICY_KNORM,
    KVV_POLICY_QUEST,
    KVV_POLICY_KVDIRECT_LAYER,
    KVV_POLICY_KVDIRECT_TOKEN,
    KVV_POLICY_COUNT
} kvv_policy_kind;

const char *kvv_policy_name(kvv_policy_kind k); /* "h2o", ... */
bool kvv_policy_from_name(const char *s, kvv_policy_kind *out);
bool kvv_policy_is_kvdirect(kvv_policy_kind k);

/* Storage of KV-Direct checkpoints: f32 is exact; f16/bf16 are approximate
 * options (the recomputed K/V then differ from the cached ones). */
typedef enum {
    KVV_CKPT_F32 = 0,
    KVV_CKPT_F16 = 1,
    KVV_CKPT_BF16 = 2
} kvv_ckpt_type;

typedef struct {
    kvv_policy_kind kind;
    int budget;          /* live K/V positions per layer and KV head */
    int sinks;           /* streaming: default 4 */
    int window;          /* h2o recent window; default budget/2 */
    int obs_window;      /* snapkv/pyramidkv observation window; default min(32, budget/2) */
    int kernel;          /* snapkv/pyramidkv pooling kernel (odd); default 5 */
    bool decode_evict;   /* snapkv/pyramidkv: also evict during decode (window rule) */
    int page_size;       /* quest: positions per page; default 16 */
    bool reindex;        /* streaming: re-indexed positions (see above); default false */
    kvv_ckpt_type ckpt;  /* kvdirect checkpoint dtype; default f32 */
} kvv_policy_cfg;

kvv_policy_cfg kvv_policy_cfg_default(kvv_policy_kind kind, int budget);

/* Exact accounting, updated after every kvv_policy_forward. */
typedef struct {
    int64_t steps;              /* forwards run */
    uint64_t bytes_kv;          /* live K+V bytes now (cache dtype, per head entry) */
    uint64_t bytes_ckpt;        /* checkpoint bytes now (KV-Direct) */
    uint64_t peak_bytes;        /* max over steps of bytes_kv + bytes_ckpt */
    int64_t recomputed_last;    /* (token, layer) K/V rows recomputed in the last step */
    int64_t recomputed_total;   /* ... over all steps */
    double flops_last;          /* FLOPs spent recomputing in the last step */
    double flops_total;
} kvv_policy_stats;

typedef struct kvv_policy kvv_policy;

/* What a policy of this kind needs from the engine (KVV_ENGINE_CAP_*): the
 * cache read back (every policy keeps its accounting on the host cache),
 * evicting whole positions (window, streaming, kvdirect-token), per-entry
 * eviction (per-head and per-layer policies: h2o, tova, snapkv, pyramidkv,
 * knorm), attention probabilities (the scored ones), key selection (quest),
 * residuals read — and written, for kvdirect-token's restore — and K/V
 * recomputed and written back (kvdirect-layer, streaming-reindex). */
unsigned kvv_policy_needs(kvv_policy_kind kind);

/* e is borrowed and must outlive the policy; its cache must be empty.
 * KVV_ERR_USAGE for a bad configuration (budget < 1, even kernel, ...);
 * KVV_ERR_UNSUPPORTED when the engine lacks what kvv_policy_needs names
 * (the message names the capabilities and the policy). */
kvv_status kvv_policy_open(kvv_engine *e, const kvv_policy_cfg *cfg, kvv_policy **out,
                           kvv_error *err);
void kvv_policy_close(kvv_policy *p); /* accepts NULL */

/* One step through the policy: see the overview. `user` hooks (may be NULL)
 * see exactly what the engine computes for the caller's tokens (restoration
 * forwards of kvdirect-token are not shown to them). Positions must be new
 * and ascending, following the previous step's. */
kvv_status kvv_policy_forward(kvv_policy *p, int n, const int32_t *tokens, const int32_t *pos,
                              const kvv_hooks *user, kvv_logits_mode lm, float *logits,
                              kvv_error *err);

void kvv_policy_get_stats(const kvv_policy *p, kvv_policy_stats *out);

/* Rotate a RoPE'd key row k (n_kv heads of head_dim) of layer `layer` by
 * `delta` positions: RoPE at p followed by this equals RoPE at p + delta in
 * exact arithmetic (fp32 rounding aside), so a key moved from slot p to slot
 * p + delta reads as if it had been computed there (streaming-reindex). */
void kvv_rope_shift(const kvv_hparams *hp, int layer, int n_kv, int head_dim, float *k,
                    int delta);

#endif
