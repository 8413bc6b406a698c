/*
 * op_taps.h — the vocabulary of op taps (kvv_hooks.op, runtime/runtime.h):
 * the operations of a layer in data-flow order, their names (as a user
 * writes them: `fault=op:ffn_up:L1`, `compare --ops` tables) and the width
 * of each op's rows. The values are the plugin ABI's KVV_PLUGIN_OP_*
 * (include/kvverify/engine_plugin.h; the plugin host asserts it).
 *
 * The prefix is KVV_TAP_ because KVV_OP_* already names the measured
 * kernels of `kvverify numerics` (engine/engine_ops.h).
 *
 *   int w = kvv_tap_width(hp, KVV_TAP_UP, 0);     // n_ff
 *   kvv_tap t;
 *   if (kvv_tap_from_name("ffn_up", &t)) ...      // KVV_TAP_UP
 */
#ifndef KVV_OP_TAPS_H
#define KVV_OP_TAPS_H

#include <stdbool.h>

#include "model/arch.h"

typedef enum {
    KVV_TAP_ATTN_NORM = 0,      /* rmsnorm(x) * attn_norm                 [n][n_embd] */
    KVV_TAP_Q = 1,              /* xn Wq^T (+ bq), before q norm and RoPE  [n][n_head*head_dim] */
    KVV_TAP_K = 2,              /* xn Wk^T (+ bk)                         [n][n_head_kv*head_dim] */
    KVV_TAP_V = 3,              /* xn Wv^T (+ bv)                         [n][n_head_kv*head_dim_v] */
    KVV_TAP_Q_NORM = 4,         /* per-head rmsnorm(q) * q_norm (qwen3, gemma3) */
    KVV_TAP_K_NORM = 5,         /* per-head rmsnorm(k) * k_norm */
    KVV_TAP_Q_ROPE = 6,         /* q after RoPE */
    KVV_TAP_K_ROPE = 7,         /* k after RoPE, before rounding to the cache dtype */
    KVV_TAP_KQ = 8,             /* scores [n][n_head*n_keys] (engine_plugin.h) */
    KVV_TAP_SOFTMAX = 9,        /* probabilities, layout of KQ */
    KVV_TAP_ATTN_OUT = 10,      /* attention output                       [n][n_head*head_dim_v] */
    KVV_TAP_WO = 11,            /* attn_out Wo^T                          [n][n_embd] */
    KVV_TAP_POST_ATTN_NORM = 12,/* rmsnorm(wo) * post_attention_norm (gemma) */
    KVV_TAP_ATTN_RESID = 13,    /* x + attention branch                   [n][n_embd] */
    KVV_TAP_FFN_NORM = 14,      /* rmsnorm(.) * ffn_norm                  [n][n_embd] */
    KVV_TAP_GATE = 15,          /* xn Wgate^T                             [n][n_ff] */
    KVV_TAP_UP = 16,            /* xn Wup^T                               [n][n_ff] */
    KVV_TAP_ACT = 17,           /* act(gate) * up                         [n][n_ff] */
    KVV_TAP_DOWN = 18,          /* act Wdown^T                            [n][n_embd] */
    KVV_TAP_POST_FFW_NORM = 19, /* rmsnorm(down) * post_ffw_norm (gemma) */
    KVV_TAP_FFN_RESID = 20,     /* the layer's output residual            [n][n_embd] */
    KVV_TAP_OUT_NORM = 21,      /* layer == n_layer: rmsnorm(x) * output_norm [n][n_embd] */
    KVV_TAP_HEAD = 22,          /* layer == n_layer: logits before the soft-cap [n][n_vocab] */
    KVV_TAP_COUNT = 23
} kvv_tap;

/* "attn_norm", "q", ..., "ffn_up", ..., "head"; "?" out of range. */
const char *kvv_tap_name(int op);

/* The op named s (kvv_tap_name's names). @return true and *out, or false. */
bool kvv_tap_from_name(const char *s, kvv_tap *out);

/* The row width of op in model hp: n_embd, n_ff, n_head*head_dim, ...;
 * KQ and SOFTMAX: n_head * n_keys. @return 0 for an op the model does not
 * have (Q_NORM/K_NORM without qk norm, POST_* without gemma's post norms). */
int kvv_tap_width(const kvv_hparams *hp, int op, int n_keys);

/* True for the ops after the last layer (reported with layer == n_layer). */
bool kvv_tap_is_final(int op);

#endif
