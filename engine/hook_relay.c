/* hook_relay.c — a hooks relay with an engine-layer residual step (see hook_relay.h). */
#include "engine/hook_relay.h"

#include <string.h>

static void r_residual(void *u, int layer, int n, const int32_t *pos, float *h)
{
    kvv_hook_relay *r = u;
    r->residual(r, layer, n, pos, h);
}

static void r_kv(void *u, int layer, int n, const int32_t *pos, const float *k, const float *v)
{
    const kvv_hooks *h = ((kvv_hook_relay *)u)->inner;
    h->kv(h->user, layer, n, pos, k, v);
}

static void r_attn(void *u, int layer, int n, const int32_t *pos, int n_keys,
                   const int32_t *key_pos, const float *p)
{
    const kvv_hooks *h = ((kvv_hook_relay *)u)->inner;
    h->attn(h->user, layer, n, pos, n_keys, key_pos, p);
}

static void r_attn_out(void *u, int layer, int n, const int32_t *pos, const float *o)
{
    const kvv_hooks *h = ((kvv_hook_relay *)u)->inner;
    h->attn_out(h->user, layer, n, pos, o);
}

static void r_select(void *u, int layer, int qpos, int head, const float *q, int n_keys,
                     const int32_t *key_pos, uint8_t *keep)
{
    const kvv_hooks *h = ((kvv_hook_relay *)u)->inner;
    h->select(h->user, layer, qpos, head, q, n_keys, key_pos, keep);
}

static void r_op(void *u, int layer, int op, int n, const int32_t *pos, int width, const float *x)
{
    const kvv_hooks *h = ((kvv_hook_relay *)u)->inner;
    h->op(h->user, layer, op, n, pos, width, x);
}

kvv_hooks kvv_hook_relay_hooks(kvv_hook_relay *r)
{
    kvv_hooks h;
    memset(&h, 0, sizeof h);
    h.user = r;
    h.residual = r_residual;
    if (r->inner) {
        h.kv = r->inner->kv ? r_kv : NULL;
        h.attn = r->inner->attn ? r_attn : NULL;
        h.attn_out = r->inner->attn_out ? r_attn_out : NULL;
        h.select = r->inner->select ? r_select : NULL;
        h.op = r->inner->op ? r_op : NULL;
    }
    return h;
}

void kvv_hook_relay_inner_residual(kvv_hook_relay *r, int layer, int n, const int32_t *pos,
                                   float *h)
{
    if (r->inner && r->inner->residual)
        r->inner->residual(r->inner->user, layer, n, pos, h);
}
