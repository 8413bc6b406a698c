/*
 * policy_kinds.c — the cache policies by name (engine/policy/policy.h): their
 * names, default configuration and the engine capabilities each one needs.
 * No policy state here; running a policy is policy.c's job.
 */
#include "engine/policy/policy.h"

#include <stdbool.h>
#include <string.h>

static const char *const policy_names[KVV_POLICY_COUNT] = {
    "full", "window", "streaming", "streaming-reindex", "h2o", "tova", "snapkv", "pyramidkv", "knorm",
    "quest", "kvdirect-layer", "kvdirect-token",
};

const char *kvv_policy_name(kvv_policy_kind k)
{
    return (unsigned)k < KVV_POLICY_COUNT ? policy_names[k] : "unknown";
}

bool kvv_policy_from_name(const char *s, kvv_policy_kind *out)
{
    for (int i = 0; s && i < KVV_POLICY_COUNT; i++)
        if (strcmp(s, policy_names[i]) == 0) {
            *out = (kvv_policy_kind)i;
            return true;
        }
    return false;
}

bool kvv_policy_is_kvdirect(kvv_policy_kind k)
{
    return k == KVV_POLICY_KVDIRECT_LAYER || k == KVV_POLICY_KVDIRECT_TOKEN;
}

kvv_policy_cfg kvv_policy_cfg_default(kvv_policy_kind kind, int budget)
{
    kvv_policy_cfg c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.budget = budget;
    c.sinks = 4;
    c.window = budget / 2;
    c.obs_window = budget / 2 < 32 ? budget / 2 : 32;
    c.kernel = 5;
    c.decode_evict = false;
    c.page_size = 16;
    c.ckpt = KVV_CKPT_F32;
    return c;
}

unsigned kvv_policy_needs(kvv_policy_kind kind)
{
    unsigned n = KVV_ENGINE_CAP_KV_READ;
    switch (kind) {
    case KVV_POLICY_FULL: break;
    case KVV_POLICY_WINDOW:
    case KVV_POLICY_STREAMING: n |= KVV_ENGINE_CAP_KV_EVICT; break;
    case KVV_POLICY_STREAMING_REINDEX: n |= KVV_ENGINE_CAP_KV_EVICT | KVV_ENGINE_CAP_KV_WRITE; break;
    case KVV_POLICY_H2O:
    case KVV_POLICY_TOVA:
    case KVV_POLICY_SNAPKV:
    case KVV_POLICY_PYRAMIDKV: n |= KVV_ENGINE_CAP_ATTN | KVV_ENGINE_CAP_KV_EVICT_HEAD; break;
    case KVV_POLICY_KNORM: n |= KVV_ENGINE_CAP_KV_EVICT_HEAD; break;
    case KVV_POLICY_QUEST: n |= KVV_ENGINE_CAP_SELECT; break;
    case KVV_POLICY_KVDIRECT_LAYER:
        n |= KVV_ENGINE_CAP_RESIDUAL_READ | KVV_ENGINE_CAP_KV_FROM_RESIDUAL |
             KVV_ENGINE_CAP_KV_WRITE;
        break;
    case KVV_POLICY_KVDIRECT_TOKEN:
        n |= KVV_ENGINE_CAP_RESIDUAL_READ | KVV_ENGINE_CAP_RESIDUAL_WRITE |
             KVV_ENGINE_CAP_KV_EVICT;
        break;
    case KVV_POLICY_COUNT: break;
    }
    return n;
}
