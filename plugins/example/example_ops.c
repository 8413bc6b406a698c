/*
 * example_ops.c — the example plugin's op taps and its planted op fault
 * (example_ops.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/example/example_ops.h"
#include "runtime/op_taps.h"

int ex_ops_parse_fault(const char *v, const kvv_hparams *hp, ex_ops *o, char *msg, size_t size)
{
    if (strncmp(v, "op:", 3) != 0)
        return 0;
    char name[32];
    const char *colon = strchr(v + 3, ':');
    size_t len = colon ? (size_t)(colon - (v + 3)) : 0;
    kvv_tap t;
    if (!colon || len >= sizeof name || colon[1] != 'L') {
        snprintf(msg, size, "option fault=%s: not op:NAME:LN (e.g. op:ffn_up:L1)", v);
        return -1;
    }
    memcpy(name, v + 3, len);
    name[len] = 0;
    char *end;
    long layer = strtol(colon + 2, &end, 10);
    if (!kvv_tap_from_name(name, &t) || !(ex_ops_mask(hp) & (1ull << t))) {
        snprintf(msg, size, "option fault=%s: '%s' is not an op this model has (names as in "
                 "docs/ops.md, e.g. ffn_up)", v, name);
        return -1;
    }
    const long max = kvv_tap_is_final(t) ? hp->n_layer : hp->n_layer - 1;
    const long min = kvv_tap_is_final(t) ? hp->n_layer : 0;
    if (!colon[2] || *end || layer < min || layer > max) {
        snprintf(msg, size, "option fault=%s: layer '%s' is not L%ld..L%ld", v, colon + 1, min,
                 max);
        return -1;
    }
    o->op = (int)t;
    o->layer = (int)layer;
    return 1;
}

uint64_t ex_ops_mask(const kvv_hparams *hp)
{
    uint64_t m = 0;
    for (int op = 0; op < KVV_TAP_COUNT; op++)
        if (op != KVV_TAP_KQ && op != KVV_TAP_SOFTMAX && kvv_tap_width(hp, op, 0) > 0)
            m |= 1ull << op;
    return m;
}

/* ------------------------------------------------------------ relays */

static void r_residual(void *u, int layer, int n, const int32_t *pos, float *h)
{
    const ex_ops *o = u;
    o->inner.residual(o->inner.user, layer, n, pos, h);
}

static void r_kv(void *u, int layer, int n, const int32_t *pos, const float *k, const float *v)
{
    const ex_ops *o = u;
    o->inner.kv(o->inner.user, layer, n, pos, k, v);
}

static void r_attn(void *u, int layer, int n, const int32_t *pos, int n_keys,
                   const int32_t *key_pos, const float *p)
{
    const ex_ops *o = u;
    o->inner.attn(o->inner.user, layer, n, pos, n_keys, key_pos, p);
}

static void r_attn_out(void *u, int layer, int n, const int32_t *pos, const float *x)
{
    const ex_ops *o = u;
    o->inner.attn_out(o->inner.user, layer, n, pos, x);
}

static void r_select(void *u, int layer, int qpos, int head, const float *q, int n_keys,
                     const int32_t *key_pos, uint8_t *keep)
{
    const ex_ops *o = u;
    o->inner.select(o->inner.user, layer, qpos, head, q, n_keys, key_pos, keep);
}

/* The planted fault changes the engine's own buffer (the reference hands
 * its working rows to the tap), so the pass continues from it. */
static void r_op(void *u, int layer, int op, int n, const int32_t *pos, int width,
                 const float *x)
{
    const ex_ops *o = u;
    if (op == o->op && layer == o->layer) {
        float *w = (float *)(uintptr_t)x;
        for (int t = 0; t < n; t++) {
            float *row = w + (size_t)t * width;
            int im = 0;
            for (int i = 1; i < width; i++)
                if (fabsf(row[i]) > fabsf(row[im]))
                    im = i;
            row[im] = row[im] + 0.01f * fabsf(row[im]);
        }
    }
    if (o->op_fn)
        o->op_fn(o->op_user, layer, op, n, pos, width, x);
}

void ex_ops_hooks(ex_ops *o, const kvv_plugin_hooks *ph, kvv_hooks *h)
{
    const bool covers = ph && ph->struct_size >= offsetof(kvv_plugin_hooks, op) + sizeof ph->op;
    o->op_fn = covers ? ph->op : NULL;
    o->op_user = ph ? ph->user : NULL;
    if (!o->op_fn && o->op < 0)
        return;
    o->inner = *h;
    h->user = o;
    h->residual = o->inner.residual ? r_residual : NULL;
    h->kv = o->inner.kv ? r_kv : NULL;
    h->attn = o->inner.attn ? r_attn : NULL;
    h->attn_out = o->inner.attn_out ? r_attn_out : NULL;
    h->select = o->inner.select ? r_select : NULL;
    h->op = r_op;
}
