/*
 * op_taps.c — names and widths of the op taps (runtime/op_taps.h).
 */
#include <string.h>

#include "runtime/op_taps.h"

static const char *const tap_names[KVV_TAP_COUNT] = {
    "attn_norm", "q",        "k",        "v",        "q_norm",        "k_norm",
    "q_rope",    "k_rope",   "kq",       "softmax",  "attn_out",      "wo",
    "post_attn_norm",        "attn_resid",           "ffn_norm",      "ffn_gate",
    "ffn_up",    "ffn_act",  "ffn_down", "post_ffw_norm", "ffn_resid", "out_norm",
    "head",
};

const char *kvv_tap_name(int op)
{
    return op >= 0 && op < KVV_TAP_COUNT ? tap_names[op] : "?";
}

bool kvv_tap_from_name(const char *s, kvv_tap *out)
{
    for (int i = 0; s && i < KVV_TAP_COUNT; i++)
        if (strcmp(s, tap_names[i]) == 0) {
            *out = (kvv_tap)i;
            return true;
        }
    return false;
}

bool kvv_tap_is_final(int op)
{
    return op == KVV_TAP_OUT_NORM || op == KVV_TAP_HEAD;
}

int kvv_tap_width(const kvv_hparams *hp, int op, int n_keys)
{
    const int q = hp->n_head * hp->head_dim, k = hp->n_head_kv * hp->head_dim;
    switch (op) {
    case KVV_TAP_Q:
    case KVV_TAP_Q_ROPE:
        return q;
    case KVV_TAP_K:
    case KVV_TAP_K_ROPE:
        return k;
    case KVV_TAP_Q_NORM:
        return hp->has_qk_norm ? q : 0;
    case KVV_TAP_K_NORM:
        return hp->has_qk_norm ? k : 0;
    case KVV_TAP_V:
        return hp->n_head_kv * hp->head_dim_v;
    case KVV_TAP_KQ:
    case KVV_TAP_SOFTMAX:
        return hp->n_head * n_keys;
    case KVV_TAP_ATTN_OUT:
        return hp->n_head * hp->head_dim_v;
    case KVV_TAP_POST_ATTN_NORM:
    case KVV_TAP_POST_FFW_NORM:
        return hp->has_post_norms ? hp->n_embd : 0;
    case KVV_TAP_GATE:
    case KVV_TAP_UP:
    case KVV_TAP_ACT:
        return hp->n_ff;
    case KVV_TAP_HEAD:
        return hp->n_vocab;
    case KVV_TAP_ATTN_NORM:
    case KVV_TAP_WO:
    case KVV_TAP_ATTN_RESID:
    case KVV_TAP_FFN_NORM:
    case KVV_TAP_DOWN:
    case KVV_TAP_FFN_RESID:
    case KVV_TAP_OUT_NORM:
        return hp->n_embd;
    default:
        return 0;
    }
}
