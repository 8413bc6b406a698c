/*
 * plugin_ops.c — op taps through the plugin ABI (1.1): which plugins offer
 * them, handing the caller's op hook to the plugin, and checking each tap
 * against the vocabulary before it is relayed (plugin_impl.h).
 */
#include <stdio.h>

#include "engine/breadcrumb.h"
#include "engine/plugin/plugin_impl.h"
#include "runtime/op_taps.h"

_Static_assert((unsigned)KVV_ENGINE_CAP_OP_TAPS == (unsigned)KVV_PLUGIN_CAP_OP_TAPS,
               "the op-taps capability bit must equal the plugin ABI's");
_Static_assert((int)KVV_TAP_ATTN_NORM == (int)KVV_PLUGIN_OP_ATTN_NORM && (int)KVV_TAP_Q == (int)KVV_PLUGIN_OP_Q &&
                   (int)KVV_TAP_K == (int)KVV_PLUGIN_OP_K && (int)KVV_TAP_V == (int)KVV_PLUGIN_OP_V &&
                   (int)KVV_TAP_Q_NORM == (int)KVV_PLUGIN_OP_Q_NORM && (int)KVV_TAP_K_NORM == (int)KVV_PLUGIN_OP_K_NORM &&
                   (int)KVV_TAP_Q_ROPE == (int)KVV_PLUGIN_OP_Q_ROPE && (int)KVV_TAP_K_ROPE == (int)KVV_PLUGIN_OP_K_ROPE &&
                   (int)KVV_TAP_KQ == (int)KVV_PLUGIN_OP_KQ && (int)KVV_TAP_SOFTMAX == (int)KVV_PLUGIN_OP_SOFTMAX &&
                   (int)KVV_TAP_ATTN_OUT == (int)KVV_PLUGIN_OP_ATTN_OUT && (int)KVV_TAP_WO == (int)KVV_PLUGIN_OP_WO &&
                   (int)KVV_TAP_POST_ATTN_NORM == (int)KVV_PLUGIN_OP_POST_ATTN_NORM &&
                   (int)KVV_TAP_ATTN_RESID == (int)KVV_PLUGIN_OP_ATTN_RESID &&
                   (int)KVV_TAP_FFN_NORM == (int)KVV_PLUGIN_OP_FFN_NORM && (int)KVV_TAP_GATE == (int)KVV_PLUGIN_OP_GATE &&
                   (int)KVV_TAP_UP == (int)KVV_PLUGIN_OP_UP && (int)KVV_TAP_ACT == (int)KVV_PLUGIN_OP_ACT &&
                   (int)KVV_TAP_DOWN == (int)KVV_PLUGIN_OP_DOWN &&
                   (int)KVV_TAP_POST_FFW_NORM == (int)KVV_PLUGIN_OP_POST_FFW_NORM &&
                   (int)KVV_TAP_FFN_RESID == (int)KVV_PLUGIN_OP_FFN_RESID &&
                   (int)KVV_TAP_OUT_NORM == (int)KVV_PLUGIN_OP_OUT_NORM && (int)KVV_TAP_HEAD == (int)KVV_PLUGIN_OP_HEAD &&
                   (int)KVV_TAP_COUNT == (int)KVV_PLUGIN_OP_COUNT,
               "the op-tap vocabulary must equal the plugin ABI's");

unsigned kvv_plugin_ops_caps(const kvv_plugin_state *ps)
{
    /* a 1.0 plugin's info ends before `ops` and its caps know no bit 16 */
    if (ps->lib.t.abi_minor < 1 || !(ps->info.caps & KVV_PLUGIN_CAP_OP_TAPS) || !ps->info.ops)
        return 0;
    return KVV_ENGINE_CAP_OP_TAPS;
}

void kvv_plugin_ops_hooks(const kvv_plugin_state *ps, const kvv_hooks *hooks,
                          kvv_plugin_hooks *ph)
{
    ph->op = hooks && hooks->op && kvv_plugin_ops_caps(ps) ? hooks->op : NULL;
}

static void c_op(void *u, int layer, int op, int n, const int32_t *pos, int width, const float *x)
{
    kvv_plugin_crumb *c = u;
    char msg[200];
    const int n_layer = c->hp->n_layer;
    if (op < 0 || op >= KVV_TAP_COUNT || !(c->ops & (1ull << op))) {
        snprintf(msg, sizeof msg, "forward: op hook called with op %d, not one the engine "
                 "declared in info.ops", op);
        kvv_plugin_crumb_refuse(c, msg);
        return;
    }
    const bool final = kvv_tap_is_final(op);
    if (final && layer != n_layer) {
        snprintf(msg, sizeof msg, "forward: op hook: %s called for layer %d (only %d)",
                 kvv_tap_name(op), layer, n_layer);
        kvv_plugin_crumb_refuse(c, msg);
        return;
    }
    if (!kvv_plugin_crumb_rows_ok(c, "op", layer, final ? n_layer : n_layer - 1, n, pos))
        return;
    const bool keys = op == KVV_TAP_KQ || op == KVV_TAP_SOFTMAX;
    const int want = kvv_tap_width(c->hp, op, keys ? width / c->hp->n_head : 0);
    if (!x || width != want || width <= 0 ||
        (keys && (width % c->hp->n_head || width / c->hp->n_head > c->n_ctx))) {
        snprintf(msg, sizeof msg, "forward: op hook: %s of layer %d with %s width %d (the "
                 "model's: %d)", kvv_tap_name(op), layer, x ? "" : "no buffer,", width, want);
        kvv_plugin_crumb_refuse(c, msg);
        return;
    }
    kvv_breadcrumb_layer(layer, pos[0], pos[n - 1]);
    c->inner.op(c->inner.user, layer, op, n, pos, width, x);
}

void kvv_plugin_ops_relay(kvv_plugin_crumb *c, const kvv_plugin_hooks *inner,
                          const kvv_plugin_state *ps, const kvv_hparams *hp)
{
    c->hp = hp;
    c->ops = ps->info.ops;
    if (inner && inner->op) {
        c->inner.op = inner->op;
        c->out.op = c_op;
    }
}
