/*
 * engine_ops.c — what every op set shares (engine/engine_ops.h): the names
 * of the ops, math functions and tensors, and kvv_ops_close. The op sets:
 * engine/ref/ops_ref.c, engine/cpu/ops_cpu.c, engine/ops_oracle.c.
 */
#include <stdbool.h>

#include "engine/engine_ops.h"

const char *kvv_op_name(kvv_op op)
{
    static const char *const names[KVV_OP_COUNT] = {
        "matmul", "dot", "rmsnorm", "softmax", "rope", "silu", "gelu", "softcap",
    };
    return (unsigned)op < KVV_OP_COUNT ? names[op] : "?";
}

const char *kvv_math_fn_name(kvv_math_fn f)
{
    static const char *const names[KVV_MATH_COUNT] = {"exp", "tanh", "sin", "cos", "pow"};
    return (unsigned)f < KVV_MATH_COUNT ? names[f] : "?";
}

const char *kvv_ops_tensor_name(kvv_ops_tensor t)
{
    static const char *const names[KVV_T_COUNT] = {
        "attn_q",     "attn_k",         "attn_v",      "attn_output",   "ffn_gate",
        "ffn_up",     "ffn_down",       "output",      "attn_norm",     "attn_q_norm",
        "attn_k_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm", "output_norm",
        "attn_q.bias", "attn_k.bias",   "attn_v.bias",
    };
    return (unsigned)t < KVV_T_COUNT ? names[t] : "?";
}

bool kvv_ops_tensor_is_matrix(kvv_ops_tensor t)
{
    return t >= KVV_T_WQ && t <= KVV_T_OUTPUT;
}

void kvv_ops_close(kvv_ops *o)
{
    if (o)
        o->vt->close(o);
}

