/*
 * llama_ops.c — op taps of the llama.cpp plugin (ABI 1.1): ggml's graph
 * nodes mapped to the op vocabulary (include/kvverify/engine_plugin.h).
 *
 * A node is recognised by what it computes, not only by its name, since
 * names move between llama.cpp versions and some nodes have none:
 *
 *   MUL_MAT of weight blk.L.attn_q/attn_k/attn_v/attn_output/ffn_gate/
 *     ffn_up/ffn_down.weight            q, k, v, wo, ffn_gate, ffn_up, ffn_down
 *   MUL_MAT of output.weight (or the tied token_embd.weight)      head
 *   ADD of blk.L.attn_q/k/v.bias        q, k, v (then the bias-less product
 *                                       is not the op)
 *   MUL by blk.L.attn_norm/ffn_norm/post_attention_norm/post_ffw_norm/
 *     attn_q_norm/attn_k_norm.weight, output_norm.weight
 *                                       attn_norm, ffn_norm, post_attn_norm,
 *                                       post_ffw_norm, q_norm, k_norm, out_norm
 *   ROPE named Qcur-L / Kcur-L          q_rope, k_rope
 *   kqv_out-L                           attn_out
 *   ffn_inp-L / sa_out-L (gemma)        attn_resid
 *   GLU (ffn_swiglu-L, ffn_geglu-L), or ffn_gate_par-L   ffn_act
 *   l_out-L                             ffn_resid
 *
 * The probe at open (one token, every node asked) finds which of them this
 * model's graph has; info.ops declares those, and describe names the ones it
 * could not find ("op taps: ... not found: ..."). The scores and the
 * softmax are not tapped (kq_soft_max is the attention hook's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/llama.cpp/llama_impl.h"

static const struct { const char *suffix; int op; } weights[] = {
    {"attn_q.weight", KVV_PLUGIN_OP_Q},         {"attn_k.weight", KVV_PLUGIN_OP_K},
    {"attn_v.weight", KVV_PLUGIN_OP_V},         {"attn_output.weight", KVV_PLUGIN_OP_WO},
    {"ffn_gate.weight", KVV_PLUGIN_OP_GATE},    {"ffn_up.weight", KVV_PLUGIN_OP_UP},
    {"ffn_down.weight", KVV_PLUGIN_OP_DOWN},
};
static const struct { const char *suffix; int op; } biases[] = {
    {"attn_q.bias", KVV_PLUGIN_OP_Q}, {"attn_k.bias", KVV_PLUGIN_OP_K},
    {"attn_v.bias", KVV_PLUGIN_OP_V},
};
static const struct { const char *suffix; int op; } norms[] = {
    {"attn_norm.weight", KVV_PLUGIN_OP_ATTN_NORM},
    {"ffn_norm.weight", KVV_PLUGIN_OP_FFN_NORM},
    {"post_attention_norm.weight", KVV_PLUGIN_OP_POST_ATTN_NORM},
    {"post_ffw_norm.weight", KVV_PLUGIN_OP_POST_FFW_NORM},
    {"attn_q_norm.weight", KVV_PLUGIN_OP_Q_NORM},
    {"attn_k_norm.weight", KVV_PLUGIN_OP_K_NORM},
};
static const char *const op_names[KVV_PLUGIN_OP_COUNT] = {
    "attn_norm", "q", "k", "v", "q_norm", "k_norm", "q_rope", "k_rope", "kq", "softmax",
    "attn_out", "wo", "post_attn_norm", "attn_resid", "ffn_norm", "ffn_gate", "ffn_up",
    "ffn_act", "ffn_down", "post_ffw_norm", "ffn_resid", "out_norm", "head"};

/* "blk.L.SUFFIX": 1 and *layer = L, else 0. */
static int match_blk_one(const char *name, const char *suffix, int *layer)
{
    if (strncmp(name, "blk.", 4) != 0)
        return 0;
    char *end;
    long l = strtol(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || strcmp(end + 1, suffix) != 0)
        return 0;
    *layer = (int)l;
    return 1;
}

/* "PREFIX-L" exactly: @return L, or -1. */
static int dash_layer(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || name[n] != '-')
        return -1;
    char *end;
    long v = strtol(name + n + 1, &end, 10);
    return end != name + n + 1 && *end == '\0' && v >= 0 && v < 100000 ? (int)v : -1;
}

static const char *src_name(const struct ggml_tensor *t, int i)
{
    return t->src[i] ? t->src[i]->name : "";
}

/* The op node t computes (KVV_PLUGIN_OP_*), its layer in *layer; -1. */
static int node_op(const kvv_plugin_engine *e, const struct ggml_tensor *t, int *layer)
{
    const char *name = t->name;
    int l = -1;
    switch (t->op) {
    case GGML_OP_MUL_MAT:
        for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++)
            if (match_blk_one(src_name(t, 0), weights[i].suffix, &l)) {
                *layer = l;
                return (e->ops.bias & (1u << weights[i].op)) ? -1 : weights[i].op;
            }
        if (strcmp(src_name(t, 0), "output.weight") == 0 ||
            strcmp(src_name(t, 0), "token_embd.weight") == 0) {
            *layer = e->n_layer;
            return KVV_PLUGIN_OP_HEAD;
        }
        return -1;
    case GGML_OP_ADD:
        for (int s = 0; s < 2; s++)
            for (size_t i = 0; i < sizeof biases / sizeof biases[0]; i++)
                if (match_blk_one(src_name(t, s), biases[i].suffix, &l)) {
                    *layer = l;
                    return biases[i].op;
                }
        break;
    case GGML_OP_MUL:
        for (int s = 0; s < 2; s++) {
            for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++)
                if (match_blk_one(src_name(t, s), norms[i].suffix, &l)) {
                    *layer = l;
                    return norms[i].op;
                }
            if (strcmp(src_name(t, s), "output_norm.weight") == 0) {
                *layer = e->n_layer;
                return KVV_PLUGIN_OP_OUT_NORM;
            }
        }
        break;
    case GGML_OP_ROPE:
        if ((l = dash_layer(name, "Qcur")) >= 0 || (l = dash_layer(name, "Kcur")) >= 0) {
            *layer = l;
            return name[0] == 'Q' ? KVV_PLUGIN_OP_Q_ROPE : KVV_PLUGIN_OP_K_ROPE;
        }
        return -1;
    case GGML_OP_GLU:
        *layer = e->ops.layer;
        return KVV_PLUGIN_OP_ACT;
    default:
        break;
    }
    if ((l = dash_layer(name, "kqv_out")) >= 0) {
        *layer = l;
        return KVV_PLUGIN_OP_ATTN_OUT;
    }
    if ((l = dash_layer(name, "ffn_inp")) >= 0 || (l = dash_layer(name, "sa_out")) >= 0) {
        *layer = l;
        return KVV_PLUGIN_OP_ATTN_RESID;
    }
    if ((l = dash_layer(name, "ffn_gate_par")) >= 0) {
        *layer = l;
        return KVV_PLUGIN_OP_ACT;
    }
    if ((l = dash_layer(name, "l_out")) >= 0) {
        *layer = l;
        return KVV_PLUGIN_OP_FFN_RESID;
    }
    return -1;
}

/* Remember the layer of the last node named "X-L" (a GLU may have none). */
static void track_layer(kvv_plugin_engine *e, const struct ggml_tensor *t)
{
    const char *dash = strrchr(t->name, '-');
    if (dash && dash[1] >= '0' && dash[1] <= '9')
        e->ops.layer = atoi(dash + 1);
}

/* The row width of node t as op `op`: per-head ops are [head_dim, heads,
 * rows], the others [width, rows]. */
static int64_t node_width(int op, const struct ggml_tensor *t)
{
    const bool per_head = op == KVV_PLUGIN_OP_Q_NORM || op == KVV_PLUGIN_OP_K_NORM ||
                          op == KVV_PLUGIN_OP_Q_ROPE || op == KVV_PLUGIN_OP_K_ROPE;
    return per_head ? t->ne[0] * t->ne[1] : t->ne[0];
}

/* The vocabulary's width of op in this model (0: not known here). A node
 * of another width (phi3's fused gate and up) is not that op. */
static int64_t op_width(const kvv_plugin_engine *e, int op)
{
    switch (op) {
    case KVV_PLUGIN_OP_Q: case KVV_PLUGIN_OP_Q_NORM: case KVV_PLUGIN_OP_Q_ROPE:
        return (int64_t)e->n_head * e->head_dim;
    case KVV_PLUGIN_OP_K: case KVV_PLUGIN_OP_K_NORM: case KVV_PLUGIN_OP_K_ROPE:
        return e->kd;
    case KVV_PLUGIN_OP_V: return e->vd;
    case KVV_PLUGIN_OP_ATTN_OUT: return (int64_t)e->n_head * e->head_dim_v;
    case KVV_PLUGIN_OP_GATE: case KVV_PLUGIN_OP_UP: case KVV_PLUGIN_OP_ACT: return e->ops.n_ff;
    case KVV_PLUGIN_OP_HEAD: return e->n_vocab;
    default: return e->n_embd;
    }
}

void lp_ops_probe(kvv_plugin_engine *e, const struct ggml_tensor *t)
{
    if (!e->ops.n_ff) {
        char key[96], buf[32];
        snprintf(key, sizeof key, "%s.feed_forward_length", e->arch);
        e->ops.n_ff = e->lib->llama_model_meta_val_str(e->model, key, buf, sizeof buf) > 0
                          ? atoi(buf) : -1;
    }
    int layer;
    track_layer(e, t);
    if (t->op == GGML_OP_ADD)
        for (int s = 0; s < 2; s++)
            for (size_t i = 0; i < sizeof biases / sizeof biases[0]; i++)
                if (match_blk_one(src_name(t, s), biases[i].suffix, &layer))
                    e->ops.bias |= 1u << biases[i].op;
    const int op = node_op(e, t, &layer);
    if (op >= 0 && (layer == 0 || layer == e->n_layer) && node_width(op, t) == op_width(e, op))
        e->ops.seen |= 1ull << op;
}

/* The ops a model of this architecture has (the rest are not expected). */
static uint64_t expected(const kvv_plugin_engine *e)
{
    uint64_t m = 0;
    for (int op = 0; op < KVV_PLUGIN_OP_COUNT; op++)
        if (op != KVV_PLUGIN_OP_KQ && op != KVV_PLUGIN_OP_SOFTMAX)
            m |= 1ull << op;
    const bool gemma = strncmp(e->arch, "gemma2", 6) == 0 || strncmp(e->arch, "gemma3", 6) == 0;
    const bool qk_norm = strcmp(e->arch, "qwen3") == 0 || strncmp(e->arch, "gemma3", 6) == 0;
    if (!gemma)
        m &= ~((1ull << KVV_PLUGIN_OP_POST_ATTN_NORM) | (1ull << KVV_PLUGIN_OP_POST_FFW_NORM));
    if (!qk_norm)
        m &= ~((1ull << KVV_PLUGIN_OP_Q_NORM) | (1ull << KVV_PLUGIN_OP_K_NORM));
    return m;
}

void lp_ops_describe(const kvv_plugin_engine *e, char *buf, size_t size)
{
    size_t off = (size_t)snprintf(buf, size, "op taps: %d ops", __builtin_popcountll(e->ops.seen));
    const uint64_t missing = expected(e) & ~e->ops.seen;
    for (int op = 0, first = 1; missing && op < KVV_PLUGIN_OP_COUNT && off < size; op++)
        if (missing & (1ull << op)) {
            off += (size_t)snprintf(buf + off, size - off, "%s%s", first ? "; not found: " : ",",
                                    op_names[op]);
            first = 0;
        }
}

bool lp_ops_want(kvv_plugin_engine *e, const struct ggml_tensor *t)
{
    int layer;
    track_layer(e, t);
    const kvv_plugin_hooks *h = e->pass.hooks;
    if (e->pass.kind != LP_PASS_FORWARD || !h || !e->ops.on ||
        h->struct_size < offsetof(kvv_plugin_hooks, op) + sizeof h->op || !h->op)
        return false;
    const int op = node_op(e, t, &layer);
    return op >= 0 && (e->ops.seen & (1ull << op));
}

/* The node's positions: the micro-batch's, or (last layer, after llama.cpp
 * dropped the rows without logits) the output rows'. */
static const int32_t *rows_pos(kvv_plugin_engine *e, int rows)
{
    lp_pass *p = &e->pass;
    if (rows == p->ub)
        return p->pos + p->done;
    int k = 0;
    for (int i = 0; i < p->ub; i++)
        if (e->batch.logits[p->done + i])
            e->key_pos[k++] = p->pos[p->done + i];
    return k == rows ? e->key_pos : NULL;
}

bool lp_ops_emit(kvv_plugin_engine *e, const struct ggml_tensor *t)
{
    int layer;
    const int op = node_op(e, t, &layer);
    if (op < 0 || !lp_ops_want(e, t) || node_width(op, t) != op_width(e, op))
        return true; /* another node of that name (phi3's fused gate_up) */
    const int64_t width = node_width(op, t);
    const int64_t n_el = e->lib->ggml_nelements(t);
    const bool contiguous = t->nb[0] == 4 && t->nb[1] == (size_t)t->ne[0] * 4 &&
                            t->nb[2] == t->nb[1] * (size_t)t->ne[1] &&
                            t->nb[3] == t->nb[2] * (size_t)t->ne[2];
    if (t->type != GGML_TYPE_F32 || !contiguous || width <= 0 || n_el % width) {
        snprintf(e->pass.msg, sizeof e->pass.msg, "op %s: node %s is not f32 rows of %lld",
                 op_names[op], t->name, (long long)width);
        e->pass.status = KVV_PLUGIN_ERR_INTERNAL;
        return false;
    }
    const int rows = (int)(n_el / width);
    const int32_t *pos = rows_pos(e, rows);
    if (!pos) {
        snprintf(e->pass.msg, sizeof e->pass.msg, "op %s: node %s has %d rows, the micro-batch %d",
                 op_names[op], t->name, rows, e->pass.ub);
        e->pass.status = KVV_PLUGIN_ERR_INTERNAL;
        return false;
    }
    if ((size_t)n_el > e->ops.cap) {
        float *b = realloc(e->ops.rows, (size_t)n_el * sizeof *b);
        if (!b) {
            snprintf(e->pass.msg, sizeof e->pass.msg, "out of memory for op %s", op_names[op]);
            e->pass.status = KVV_PLUGIN_ERR_NOMEM;
            return false;
        }
        e->ops.rows = b;
        e->ops.cap = (size_t)n_el;
    }
    e->lib->ggml_backend_tensor_get(t, e->ops.rows, 0, (size_t)n_el * 4);
    const kvv_plugin_hooks *h = e->pass.hooks;
    h->op(h->user, layer, op, rows, pos, (int)width, e->ops.rows);
    return true;
}
