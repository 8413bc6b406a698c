/* breadcrumb.c — the last stage an engine reached (see breadcrumb.h). */
#include "engine/breadcrumb.h"

#include <stdio.h>

/* The one process-wide record (breadcrumb.h says why); NULL = not isolated. */
static kvv_breadcrumb *crumb;

void kvv_breadcrumb_attach(kvv_breadcrumb *b)
{
    crumb = b;
    if (b) {
        b->call = KVV_CRUMB_NONE;
        b->layer = b->pos_first = b->pos_last = -1;
        b->calls = 0;
    }
}

void kvv_breadcrumb_enter(kvv_crumb_call call)
{
    if (!crumb)
        return;
    crumb->layer = crumb->pos_first = crumb->pos_last = -1;
    crumb->call = call;
    crumb->calls++;
}

void kvv_breadcrumb_positions(int first, int last)
{
    if (!crumb)
        return;
    crumb->pos_first = first;
    crumb->pos_last = last;
}

void kvv_breadcrumb_layer(int layer, int pos_first, int pos_last)
{
    if (!crumb)
        return;
    crumb->layer = layer;
    crumb->pos_first = pos_first;
    crumb->pos_last = pos_last;
}

/* ------------------------------------------------------------ hook relay */

static void rows(int layer, int n, const int32_t *pos)
{
    kvv_breadcrumb_layer(layer, n > 0 && pos ? pos[0] : -1, n > 0 && pos ? pos[n - 1] : -1);
}

static void r_residual(void *u, int layer, int n, const int32_t *pos, float *h)
{
    const kvv_hooks *in = &((kvv_crumb_relay *)u)->inner;
    rows(layer, n, pos);
    in->residual(in->user, layer, n, pos, h);
}

static void r_kv(void *u, int layer, int n, const int32_t *pos, const float *k, const float *v)
{
    const kvv_hooks *in = &((kvv_crumb_relay *)u)->inner;
    rows(layer, n, pos);
    in->kv(in->user, layer, n, pos, k, v);
}

static void r_attn(void *u, int layer, int n, const int32_t *pos, int n_keys,
                   const int32_t *key_pos, const float *p)
{
    const kvv_hooks *in = &((kvv_crumb_relay *)u)->inner;
    rows(layer, n, pos);
    in->attn(in->user, layer, n, pos, n_keys, key_pos, p);
}

static void r_attn_out(void *u, int layer, int n, const int32_t *pos, const float *o)
{
    const kvv_hooks *in = &((kvv_crumb_relay *)u)->inner;
    rows(layer, n, pos);
    in->attn_out(in->user, layer, n, pos, o);
}

static void r_select(void *u, int layer, int qpos, int head, const float *q, int n_keys,
                     const int32_t *key_pos, uint8_t *keep)
{
    const kvv_hooks *in = &((kvv_crumb_relay *)u)->inner;
    kvv_breadcrumb_layer(layer, qpos, qpos);
    in->select(in->user, layer, qpos, head, q, n_keys, key_pos, keep);
}

static void r_op(void *u, int layer, int op, int n, const int32_t *pos, int width, const float *x)
{
    const kvv_hooks *in = &((kvv_crumb_relay *)u)->inner;
    kvv_breadcrumb_layer(layer, pos[0], pos[n - 1]);
    in->op(in->user, layer, op, n, pos, width, x);
}

const kvv_hooks *kvv_breadcrumb_hooks(kvv_crumb_relay *r, const kvv_hooks *inner)
{
    if (!crumb || !inner)
        return inner;
    r->inner = *inner;
    r->out = (kvv_hooks){.user = r,
                         .residual = inner->residual ? r_residual : NULL,
                         .kv = inner->kv ? r_kv : NULL,
                         .attn = inner->attn ? r_attn : NULL,
                         .attn_out = inner->attn_out ? r_attn_out : NULL,
                         .select = inner->select ? r_select : NULL,
                         .op = inner->op ? r_op : NULL};
    return &r->out;
}

const char *kvv_crumb_call_name(int call)
{
    static const char *const names[KVV_CRUMB_N] = {
        [KVV_CRUMB_NONE] = "",           [KVV_CRUMB_OPEN] = "open",
        [KVV_CRUMB_FORWARD] = "forward", [KVV_CRUMB_KV_FROM_RESIDUAL] = "kv_from_residual",
        [KVV_CRUMB_KV_READ] = "kv_read", [KVV_CRUMB_KV_EDIT] = "kv_clear/kv_evict/kv_write",
        [KVV_CRUMB_CLOSE] = "close",
    };
    return call >= 0 && call < KVV_CRUMB_N ? names[call] : "";
}

char *kvv_breadcrumb_format(const kvv_breadcrumb *b, char *buf, size_t size)
{
    int call = b ? b->call : KVV_CRUMB_NONE;
    if (call <= KVV_CRUMB_NONE || call >= KVV_CRUMB_N) {
        snprintf(buf, size, "before any engine call");
        return buf;
    }
    int l = b->layer, p0 = b->pos_first, p1 = b->pos_last;
    size_t off = (size_t)snprintf(buf, size, "%s", kvv_crumb_call_name(call));
    if (l >= 0 && off < size)
        off += (size_t)snprintf(buf + off, size - off, ", layer %d", l);
    if (p0 >= 0 && off < size) {
        if (p1 > p0)
            snprintf(buf + off, size - off, ", positions %d..%d", p0, p1);
        else
            snprintf(buf + off, size - off, ", position %d", p0);
    }
    return buf;
}
