/*
 * llama_eval.c — kvverify's forward and kv_from_residual over llama_decode,
 * observed and steered through ggml's graph callback (cb_eval).
 *
 * ggml's scheduler asks the callback, node by node, whether it wants to see
 * a node ("ask"); it computes everything up to the first wanted node, then
 * calls back with the node's data computed. Later nodes read that data from
 * memory, so writing into it patches the rest of the pass. The nodes used
 * (names from llama.cpp's graph builders, src/models/ARCH.cpp):
 *
 *   embd / inp_scaled   the residual entering layer 0 (token embeddings,
 *                       scaled for gemma) [n_embd, ub]; also marks the start
 *                       of a micro-batch (ub = its rows)
 *   l_out-L             the residual after layer L = entering layer L+1;
 *                       L = n_layer-1 is the final residual (all its rows are
 *                       there only when every position's logits are asked
 *                       for, so a residual hook asks for all)
 *   SET_ROWS into cache_k_lL / cache_v_lL
 *                       the cache writes: src[1] holds the cache cells, the
 *                       node's data the cache itself, so the stored bits are
 *                       read where they were stored (V is element-major when
 *                       flash attention is off)
 *   kqv_out-L           attention output before the output projection
 *   kq_soft_max-L       attention probabilities over the cache's cells
 *                       [n_kv, ub, n_head] (flash attention off only): the
 *                       cells are turned into positions with the cell maps
 *
 * Every forward of the engine's own context watches the layer-0 input (the
 * micro-batch boundaries) and the K cache writes of every layer, whose
 * index tensor says which cell each position went to (llama_cells.c). A node
 * not asked for is computed in the same graph run as its neighbours; asking
 * only moves where the scheduler synchronizes, so a pass keeps llama.cpp's
 * own bits (tests/engine/test_plugin_llama.c checks it).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/llama.cpp/llama_impl.h"

static bool pass_fail(kvv_plugin_engine *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool pass_fail(kvv_plugin_engine *e, const char *fmt, ...)
{
    if (!e->pass.status) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->pass.msg, sizeof e->pass.msg, fmt, ap);
        va_end(ap);
        e->pass.status = KVV_PLUGIN_ERR_INTERNAL;
    }
    return false; /* stop this graph split */
}

/* ------------------------------------------------------------ nodes */

typedef enum { N_NONE, N_IN0, N_LOUT, N_KSTORE, N_VSTORE, N_ATTN_OUT, N_ATTN } node_kind;

/* "PREFIX<int>" exactly; @return the int or -1. */
static int suffix_int(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0)
        return -1;
    char *end;
    long v = strtol(name + n, &end, 10);
    return end != name + n && v >= 0 && v < 100000 ? (int)v : -1;
}

static node_kind classify(const kvv_plugin_engine *e, const struct ggml_tensor *t, int *layer)
{
    const char *name = t->name;
    if (t->op == GGML_OP_SET_ROWS) {
        /* "cache_k_l3 (view)": the layer number ends at the space */
        if ((*layer = suffix_int(name, "cache_k_l")) >= 0)
            return N_KSTORE;
        if ((*layer = suffix_int(name, "cache_v_l")) >= 0)
            return N_VSTORE;
        return N_NONE;
    }
    *layer = 0;
    if (strcmp(name, e->layer0_name) == 0)
        return N_IN0;
    char *end;
    if (strncmp(name, "l_out-", 6) == 0) {
        long v = strtol(name + 6, &end, 10);
        *layer = (int)v;
        return *end == '\0' && end != name + 6 ? N_LOUT : N_NONE;
    }
    if (strncmp(name, "kqv_out-", 8) == 0) {
        long v = strtol(name + 8, &end, 10);
        *layer = (int)v;
        return *end == '\0' && end != name + 8 ? N_ATTN_OUT : N_NONE;
    }
    if (t->op == GGML_OP_SOFT_MAX && strncmp(name, "kq_soft_max-", 12) == 0) {
        long v = strtol(name + 12, &end, 10);
        *layer = (int)v;
        return *end == '\0' && end != name + 12 ? N_ATTN : N_NONE;
    }
    return N_NONE;
}

static bool wanted(const kvv_plugin_engine *e, node_kind k, int layer)
{
    const lp_pass *p = &e->pass;
    if (p->kind == LP_PASS_PROBE || p->kind == LP_PASS_DECODE)
        return false;
    if (p->kind == LP_PASS_SCRATCH)
        return k == N_IN0 || (k == N_LOUT && layer == p->layer - 1) ||
               ((k == N_KSTORE || (k == N_VSTORE && e->on_cpu)) && layer == p->layer);
    const kvv_plugin_hooks *h = p->hooks;
    switch (k) {
    case N_IN0: return true;   /* a micro-batch starts */
    case N_KSTORE: return true; /* which cells its positions went to */
    case N_LOUT: return h && h->residual != NULL;
    case N_VSTORE: return h && h->kv != NULL && e->on_cpu;
    case N_ATTN_OUT: return h && h->attn_out != NULL;
    case N_ATTN: return h && h->attn != NULL;
    default: return false;
    }
}

/* ------------------------------------------------------------ data */

/* rows x width floats of t (f32, rows along ne[1]) into out. */
static bool get_rows_f32(kvv_plugin_engine *e, const struct ggml_tensor *t, int width, int rows,
                         float *out)
{
    if (t->type != GGML_TYPE_F32 || t->ne[0] != width || t->ne[1] != rows || t->nb[0] != 4)
        return pass_fail(e, "node %s: expected f32 [%d, %d], found type %d [%lld, %lld]", t->name,
                         width, rows, (int)t->type, (long long)t->ne[0], (long long)t->ne[1]);
    if ((size_t)t->nb[1] == (size_t)width * 4)
        e->lib->ggml_backend_tensor_get(t, out, 0, (size_t)rows * width * 4);
    else
        for (int r = 0; r < rows; r++)
            e->lib->ggml_backend_tensor_get(t, out + (size_t)r * width, (size_t)r * t->nb[1],
                                            (size_t)width * 4);
    return true;
}

static void widen(const kvv_plugin_engine *e, const uint8_t *src, float *dst, int n)
{
    if (e->cache_type == KVV_PLUGIN_DTYPE_F16)
        e->lib->ggml_fp16_to_fp32_row((const ggml_fp16_t *)src, dst, n);
    else if (e->cache_type == KVV_PLUGIN_DTYPE_BF16)
        e->lib->ggml_bf16_to_fp32_row((const ggml_bf16_t *)src, dst, n);
    else
        memcpy(dst, src, (size_t)n * 4);
}

/* The bits a cache write (SET_ROWS node t) stored for the micro-batch's
 * rows, widened: out [ub][width]. */
static bool stored_rows(kvv_plugin_engine *e, const struct ggml_tensor *t, int width, float *out)
{
    const lp_lib *L = e->lib;
    const struct ggml_tensor *idx = t->src[1];
    const int ub = e->pass.ub;
    static const enum ggml_type types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    if (!idx || idx->type != GGML_TYPE_I64 || t->type != types[e->cache_type])
        return pass_fail(e, "node %s: unexpected cache write (type %d)", t->name, (int)t->type);
    int64_t n_idx = L->ggml_nelements(idx);
    size_t total = L->ggml_nbytes(t);
    size_t need = total + (size_t)n_idx * sizeof(int64_t);
    if (need > e->cache_bytes_cap) {
        uint8_t *b = realloc(e->cache_bytes, need);
        if (!b)
            return pass_fail(e, "out of memory reading %s (%zu bytes)", t->name, need);
        e->cache_bytes = b;
        e->cache_bytes_cap = need;
    }
    int64_t *ix = (int64_t *)(void *)e->cache_bytes;
    uint8_t *cache = e->cache_bytes + (size_t)n_idx * sizeof(int64_t);
    L->ggml_backend_tensor_get(idx, ix, 0, (size_t)n_idx * sizeof(int64_t));
    L->ggml_backend_tensor_get(t, cache, 0, total);
    const size_t es = lp_dtype_size(e->cache_type);
    const int64_t n_rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (t->ne[0] == width && n_idx == ub) { /* one cache row per token */
        for (int r = 0; r < ub; r++) {
            if (ix[r] < 0 || ix[r] >= n_rows)
                return pass_fail(e, "node %s: cell %lld outside the cache", t->name, (long long)ix[r]);
            widen(e, cache + (size_t)ix[r] * t->nb[1], out + (size_t)r * width, width);
        }
        return true;
    }
    if (t->ne[0] == 1 && ub > 0 && n_idx % ub == 0 && n_idx / ub >= width) {
        const int64_t w = n_idx / ub; /* V element-major: one row per element */
        for (int r = 0; r < ub; r++)
            for (int j = 0; j < width; j++) {
                int64_t c = ix[(int64_t)r * w + j];
                if (c < 0 || c >= n_rows)
                    return pass_fail(e, "node %s: element %lld outside the cache", t->name,
                                     (long long)c);
                widen(e, cache + (size_t)c * t->nb[1], out + (size_t)r * width + j, 1);
            }
        (void)es;
        return true;
    }
    return pass_fail(e, "node %s: cache write of %lld rows of %lld for %d tokens of width %d",
                     t->name, (long long)n_idx, (long long)t->ne[0], ub, width);
}

/* The cells a K cache write (SET_ROWS node t) of the engine's own context
 * sent the micro-batch's positions to, into the cell maps. */
static bool note_cells(kvv_plugin_engine *e, const struct ggml_tensor *t, int layer)
{
    const struct ggml_tensor *idx = t->src[1];
    const int ub = e->pass.ub;
    if (!idx || idx->type != GGML_TYPE_I64 || e->lib->ggml_nelements(idx) != ub)
        return pass_fail(e, "node %s: %lld cells for %d tokens", t->name,
                         idx ? (long long)e->lib->ggml_nelements(idx) : -1LL, ub);
    int64_t *cell = (int64_t *)(void *)e->cache_bytes; /* the first bytes suffice */
    size_t need = (size_t)ub * sizeof *cell;
    if (need > e->cache_bytes_cap) {
        uint8_t *b = realloc(e->cache_bytes, need);
        if (!b)
            return pass_fail(e, "out of memory reading %s", t->name);
        e->cache_bytes = b;
        e->cache_bytes_cap = need;
        cell = (int64_t *)(void *)b;
    }
    e->lib->ggml_backend_tensor_get(idx, cell, 0, need);
    lp_cells_store(e, layer, ub, e->pass.pos + e->pass.done, cell);
    return true;
}

/* Attention probabilities of layer `layer` (node t = kq_soft_max-L, f32
 * [n_kv cells, ub, n_head]) as the hook takes them: per query and head over
 * the positions the micro-batch could see (held at or before its last
 * position, ascending); a masked cell is exactly 0 there as in llama.cpp. */
static bool on_attn(kvv_plugin_engine *e, const struct ggml_tensor *t, int layer)
{
    lp_pass *p = &e->pass;
    const int ub = p->ub, nh = e->n_head;
    const int64_t n_kv = t->ne[0];
    if (t->type != GGML_TYPE_F32 || t->ne[1] != ub || t->ne[2] != nh || t->nb[0] != 4 ||
        t->nb[1] != (size_t)n_kv * 4 || t->nb[2] != (size_t)n_kv * ub * 4)
        return pass_fail(e, "node %s: expected f32 [n_kv, %d, %d], found type %d [%lld, %lld, %lld]",
                         t->name, ub, nh, (int)t->type, (long long)t->ne[0], (long long)t->ne[1],
                         (long long)t->ne[2]);
    const int32_t *pos = p->pos + p->done, *map = e->cells.cell + (size_t)layer * e->n_ctx;
    int n_keys = 0;
    for (int q = 0; q <= pos[ub - 1]; q++)
        if (map[q] >= 0 && map[q] < n_kv)
            e->key_pos[n_keys++] = q;
    size_t sm = (size_t)n_kv * ub * nh, need = sm + (size_t)ub * nh * (n_keys ? n_keys : 1);
    if (need > e->attn_cap) {
        float *b = realloc(e->attn, need * sizeof *b);
        if (!b)
            return pass_fail(e, "out of memory for %s", t->name);
        e->attn = b;
        e->attn_cap = need;
    }
    float *probs = e->attn, *out = e->attn + sm;
    e->lib->ggml_backend_tensor_get(t, probs, 0, sm * sizeof *probs);
    for (int i = 0; i < ub; i++)
        for (int h = 0; h < nh; h++) {
            const float *row = probs + ((size_t)h * ub + (size_t)i) * (size_t)n_kv;
            float *dst = out + ((size_t)i * nh + (size_t)h) * (size_t)n_keys;
            for (int j = 0; j < n_keys; j++)
                dst[j] = row[map[e->key_pos[j]]];
        }
    p->hooks->attn(p->hooks->user, layer, ub, pos, n_keys, e->key_pos, out);
    return true;
}

/* ------------------------------------------------------------ the callback */

/* The residual entering `layer` is node t. The final one (layer n_layer)
 * has only the rows whose logits the call asked for: llama.cpp drops the
 * others before the last layer's feed-forward (inp_out_ids), and asking
 * for every row's logits just to see them would change the bits of the
 * rows that are asked for (a one-row matmul becomes a many-row one). */
static bool on_residual(kvv_plugin_engine *e, struct ggml_tensor *t, int layer)
{
    lp_pass *p = &e->pass;
    int rows = p->ub;
    const int32_t *pos = p->pos + p->done;
    if (p->kind == LP_PASS_FORWARD && layer == e->n_layer) {
        rows = 0; /* the output rows of this micro-batch, in order */
        for (int i = 0; i < p->ub; i++)
            if (e->batch.logits[p->done + i])
                e->key_pos[rows++] = pos[i];
        pos = e->key_pos;
    }
    const size_t bytes = (size_t)rows * e->n_embd * sizeof(float);
    float *h = e->rows, *before = e->rows + (size_t)rows * e->n_embd;
    if (p->kind == LP_PASS_SCRATCH) { /* inject the caller's residuals */
        if (layer == p->layer)
            e->lib->ggml_backend_tensor_set(t, p->h + (size_t)p->done * e->n_embd, 0, bytes);
        return true;
    }
    if (rows == 0)
        return true;
    if (!get_rows_f32(e, t, e->n_embd, rows, h))
        return false;
    memcpy(before, h, bytes);
    p->hooks->residual(p->hooks->user, layer, rows, pos, h);
    if (memcmp(before, h, bytes) != 0) /* patching: the pass continues from h */
        e->lib->ggml_backend_tensor_set(t, h, 0, bytes);
    return true;
}

bool lp_eval_cb(struct ggml_tensor *t, bool ask, void *user)
{
    kvv_plugin_engine *e = user;
    lp_pass *p = &e->pass;
    int layer;
    node_kind k = classify(e, t, &layer);
    if (e->bench && p->kind == LP_PASS_FORWARD) /* bench's context has no callback */
        return pass_fail(e, "bench=1: the graph callback ran on the engine's context");
    if (ask) {
        if (t->op == GGML_OP_FLASH_ATTN_EXT)
            e->fa_seen = 1;
        else if (t->op == GGML_OP_SOFT_MAX && strncmp(t->name, "kq_soft_max", 11) == 0)
            e->fa_seen = 0;
        if (p->kind == LP_PASS_FORWARD && (k == N_KSTORE || k == N_VSTORE))
            lp_cells_seen(e, t, layer, k == N_KSTORE);
        if (p->kind == LP_PASS_SCRATCH && (k == N_KSTORE || k == N_VSTORE) && layer == p->layer) {
            struct ggml_tensor *root = t->view_src ? t->view_src : t->src[2];
            *(k == N_KSTORE ? &p->sk : &p->sv) = root;
            if (k == N_VSTORE)
                p->sv_trans = t->ne[0] == 1;
        }
        if (p->kind == LP_PASS_PROBE)
            lp_ops_probe(e, t);
        return !p->status && (wanted(e, k, layer) || lp_ops_want(e, t));
    }
    if (p->status || !lp_ops_emit(e, t))
        return false;
    if (!wanted(e, k, layer))
        return true; /* asked for as an op tap only */
    switch (k) {
    case N_IN0:
        p->done += p->ub;
        p->ub = (int)t->ne[1];
        p->k_layer = p->v_layer = -1;
        if (p->done + p->ub > p->n)
            return pass_fail(e, "micro-batches cover %d tokens of %d", p->done + p->ub, p->n);
        e->ub_start[p->n_ubs++] = p->done;
        if (p->kind == LP_PASS_SCRATCH || (p->hooks && p->hooks->residual))
            return on_residual(e, t, 0);
        return true;
    case N_LOUT:
        return on_residual(e, t, layer + 1);
    case N_KSTORE:
    case N_VSTORE:
        if (p->kind == LP_PASS_FORWARD && k == N_KSTORE && !note_cells(e, t, layer))
            return false;
        if (p->kind == LP_PASS_FORWARD && !(p->hooks && p->hooks->kv && e->on_cpu))
            return true; /* the cells; off the CPU the rows are read after the decode */
        if (p->kind == LP_PASS_SCRATCH && !e->on_cpu) {
            const struct ggml_tensor *idx = t->src[1];
            if (!idx || idx->type != GGML_TYPE_I64 || e->lib->ggml_nelements(idx) != p->ub)
                return pass_fail(e, "node %s: unexpected cache-write index", t->name);
            e->lib->ggml_backend_tensor_get(idx, e->scratch_cells + p->done, 0,
                                            (size_t)p->ub * sizeof *e->scratch_cells);
            p->captured += p->ub;
            return true;
        }
        if (!stored_rows(e, t, k == N_KSTORE ? e->kd : e->vd, k == N_KSTORE ? e->krows : e->vrows))
            return false;
        *(k == N_KSTORE ? &p->k_layer : &p->v_layer) = layer;
        if (p->k_layer != layer || p->v_layer != layer)
            return true; /* the other half comes next */
        p->k_layer = p->v_layer = -1;
        if (p->kind == LP_PASS_SCRATCH) {
            memcpy(p->k + (size_t)p->done * e->kd, e->krows, (size_t)p->ub * e->kd * sizeof(float));
            memcpy(p->v + (size_t)p->done * e->vd, e->vrows, (size_t)p->ub * e->vd * sizeof(float));
            p->captured += p->ub;
            return false; /* the layer's K/V are all we wanted: skip the rest */
        }
        p->hooks->kv(p->hooks->user, layer, p->ub, p->pos + p->done, e->krows, e->vrows);
        return true;
    case N_ATTN_OUT:
        if (!get_rows_f32(e, t, e->n_head * e->head_dim_v, p->ub, e->rows))
            return false;
        p->hooks->attn_out(p->hooks->user, layer, p->ub, p->pos + p->done, e->rows);
        return true;
    case N_ATTN:
        return on_attn(e, t, layer);
    default:
        return true;
    }
}

/* ------------------------------------------------------------ after a decode */

/* Rows of cells cell[0..n) of a cache (tensors kt, vt; V element-major when
 * v_trans) widened into k [n][kd] and v [n][vd]; both tensors are read
 * whole into e->cache_bytes. Off the CPU the kv hook and kv_from_residual
 * read the stored bits this way, after the decode, instead of at the write
 * node (see lp_pass, on_cpu). */
static int read_rows(kvv_plugin_engine *e, const struct ggml_tensor *kt,
                     const struct ggml_tensor *vt, bool v_trans, const int64_t *cell, int n,
                     float *k, float *v, kvv_plugin_error *err)
{
    const lp_lib *L = e->lib;
    if (!kt || !vt)
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "the cache tensors were not seen in the graph");
    size_t kb = L->ggml_nbytes(kt), vb = L->ggml_nbytes(vt), es = lp_dtype_size(e->cache_type);
    if (kb + vb + es * (size_t)e->vd > e->cache_bytes_cap) {
        uint8_t *b = realloc(e->cache_bytes, kb + vb + es * (size_t)e->vd);
        if (!b)
            return lp_fail(err, KVV_PLUGIN_ERR_NOMEM, "out of memory reading the cache");
        e->cache_bytes = b;
        e->cache_bytes_cap = kb + vb + es * (size_t)e->vd;
    }
    uint8_t *K = e->cache_bytes, *V = K + kb, *row = V + vb;
    L->ggml_backend_tensor_get(kt, K, 0, kb);
    L->ggml_backend_tensor_get(vt, V, 0, vb);
    const int64_t n_cells = kt->ne[1];
    for (int i = 0; i < n; i++) {
        if (cell[i] < 0 || cell[i] >= n_cells)
            return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "cell %lld outside the cache",
                           (long long)cell[i]);
        widen(e, K + (size_t)cell[i] * kt->nb[1], k + (size_t)i * e->kd, e->kd);
        if (!v_trans) {
            widen(e, V + (size_t)cell[i] * vt->nb[1], v + (size_t)i * e->vd, e->vd);
            continue;
        }
        for (int j = 0; j < e->vd; j++)
            memcpy(row + (size_t)j * es, V + ((size_t)j * (size_t)n_cells + (size_t)cell[i]) * es, es);
        widen(e, row, v + (size_t)i * e->vd, e->vd);
    }
    return KVV_PLUGIN_OK;
}

/* The kv hook off the CPU: every layer's rows of every micro-batch, read
 * from the cache tensors at the cells the call's writes went to. */
static int deliver_kv(kvv_plugin_engine *e, int n, const int32_t *pos,
                      const kvv_plugin_hooks *hooks, kvv_plugin_error *err)
{
    const lp_pass *p = &e->pass;
    for (int l = 0; l < e->n_layer; l++)
        for (int u = 0; u < p->n_ubs; u++) {
            int s = e->ub_start[u], m = (u + 1 < p->n_ubs ? e->ub_start[u + 1] : n) - s;
            for (int i = 0; i < m; i++)
                e->scratch_cells[i] = e->cells.cell[(size_t)l * e->n_ctx + (size_t)pos[s + i]];
            int code = read_rows(e, e->cells.k[l], e->cells.v[l], e->cells.v_trans[l],
                                 e->scratch_cells, m, e->krows, e->vrows, err);
            if (code)
                return code;
            hooks->kv(hooks->user, l, m, pos + s, e->krows, e->vrows);
        }
    return KVV_PLUGIN_OK;
}

/* ------------------------------------------------------------ passes */

static int decode_error(kvv_plugin_engine *e, int rc, kvv_plugin_error *err)
{
    if (e->pass.status)
        return lp_fail(err, e->pass.status, "%s", e->pass.msg);
    return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "llama_decode returned %d%s%s", rc,
                   e->lib->last_error[0] ? ": " : "", e->lib->last_error);
}

static void fill_batch(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                       bool all_logits)
{
    struct llama_batch *b = &e->batch;
    b->n_tokens = n;
    for (int i = 0; i < n; i++) {
        b->token[i] = tokens ? tokens[i] : 0;
        b->pos[i] = pos[i];
        b->n_seq_id[i] = 1;
        b->seq_id[i][0] = 0;
        b->logits[i] = (int8_t)(all_logits || i == n - 1);
    }
}

/* Copies the logits rows the call asked for (rows of one llama_decode:
 * batch row i is the call's row first + i). */
static int copy_logits(kvv_plugin_engine *e, int first, int m, int n, int lm, float *logits,
                       kvv_plugin_error *err)
{
    for (int i = lm == KVV_PLUGIN_LOGITS_ALL ? 0 : m - 1;
         lm != KVV_PLUGIN_LOGITS_NONE && i < m && (lm == KVV_PLUGIN_LOGITS_ALL || first + i == n - 1);
         i++) {
        const float *row = e->lib->llama_get_logits_ith(e->ctx, i);
        if (!row)
            return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "forward: no logits for row %d", first + i);
        float *dst = logits + (lm == KVV_PLUGIN_LOGITS_ALL ? (size_t)(first + i) * e->n_vocab : 0);
        memcpy(dst, row, (size_t)e->n_vocab * sizeof *dst);
    }
    return KVV_PLUGIN_OK;
}

/* bench=1: the call as llama-bench makes it, llama_decode on n_batch tokens
 * at a time without a graph callback; logits of the rows asked only. */
static int forward_bench(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                         int lm, float *logits, kvv_plugin_error *err)
{
    const lp_lib *L = e->lib;
    for (int s = 0; s < n; s += e->n_batch) {
        int m = n - s < e->n_batch ? n - s : e->n_batch;
        fill_batch(e, m, tokens + s, pos + s, lm == KVV_PLUGIN_LOGITS_ALL);
        if (lm == KVV_PLUGIN_LOGITS_NONE || (lm == KVV_PLUGIN_LOGITS_LAST && s + m < n))
            e->batch.logits[m - 1] = 0;
        memset(&e->pass, 0, sizeof e->pass);
        e->pass.kind = LP_PASS_FORWARD;
        e->lib->last_error[0] = '\0';
        e->gen++;
        int rc = L->llama_decode(e->ctx, e->batch);
        L->llama_synchronize(e->ctx);
        if (rc != 0 || e->pass.status)
            return decode_error(e, rc, err);
        int code = copy_logits(e, s, m, n, lm, logits, err);
        if (code)
            return code;
    }
    return KVV_PLUGIN_OK;
}

int lp_forward(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
               const kvv_plugin_hooks *hooks, int lm, float *logits, kvv_plugin_error *err)
{
    const lp_lib *L = e->lib;
    if (n < 1 || n > e->n_ctx)
        return lp_fail(err, KVV_PLUGIN_ERR_USAGE, "forward: %d tokens (1..%d)", n, e->n_ctx);
    for (int i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= e->n_vocab)
            return lp_fail(err, KVV_PLUGIN_ERR_USAGE,
                           "forward: token id %d (row %d) outside the vocabulary 0..%d", tokens[i],
                           i, e->n_vocab - 1);
        if (i > 0 && pos[i] != pos[i - 1] + 1)
            return lp_fail(err, KVV_PLUGIN_ERR_UNSUPPORTED,
                           "forward: llama.cpp takes consecutive positions in one call (%d after %d)",
                           pos[i], pos[i - 1]);
    }
    lp_cells_flush(e); /* rows written since the last call go in first */
    llama_memory_t mem = L->llama_get_memory(e->ctx);
    llama_pos last = L->llama_memory_seq_pos_max(mem, 0);
    if (last >= 0 && pos[0] != last + 1)
        return lp_fail(err, KVV_PLUGIN_ERR_UNSUPPORTED,
                       "forward: llama.cpp continues its sequence at position %d (asked: %d)",
                       last + 1, pos[0]);
    if (e->bench) {
        if (hooks && (hooks->residual || hooks->kv || hooks->attn || hooks->attn_out || hooks->select))
            return lp_fail(err, KVV_PLUGIN_ERR_UNSUPPORTED,
                           "forward: bench=1 observes nothing (no graph callback): no hooks");
        return forward_bench(e, n, tokens, pos, lm, logits, err);
    }
    fill_batch(e, n, tokens, pos, lm == KVV_PLUGIN_LOGITS_ALL);
    memset(&e->pass, 0, sizeof e->pass);
    e->pass.kind = LP_PASS_FORWARD;
    e->pass.k_layer = e->pass.v_layer = -1;
    e->pass.hooks = hooks;
    e->pass.pos = pos;
    e->pass.n = n;
    e->lib->last_error[0] = '\0';
    e->gen++;
    lp_copies_done(e); /* llama_decode applies pending stream copies first */
    int rc = L->llama_decode(e->ctx, e->batch);
    L->llama_synchronize(e->ctx); /* a device may still be computing: the cache is read next */
    if (rc != 0 || e->pass.status)
        return decode_error(e, rc, err);
    if (e->pass.done + e->pass.ub != n)
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "forward: the graph callback saw %d of %d "
                       "tokens", e->pass.done + e->pass.ub, n);
    if (hooks && hooks->kv && !e->on_cpu) {
        int code = deliver_kv(e, n, pos, hooks, err);
        if (code)
            return code;
    }
    return copy_logits(e, 0, n, n, lm, logits, err);
}

/* One run of consecutive positions through the scratch context. */
static int recompute_run(kvv_plugin_engine *e, int layer, int n, const float *h,
                         const int32_t *pos, float *k, float *v, kvv_plugin_error *err)
{
    const lp_lib *L = e->lib;
    L->llama_memory_clear(L->llama_get_memory(e->scratch), true);
    fill_batch(e, n, NULL, pos, false);
    memset(&e->pass, 0, sizeof e->pass);
    e->pass.kind = LP_PASS_SCRATCH;
    e->pass.k_layer = e->pass.v_layer = -1;
    e->pass.pos = pos;
    e->pass.n = n;
    e->pass.layer = layer;
    e->pass.h = h;
    e->pass.k = k;
    e->pass.v = v;
    e->lib->last_error[0] = '\0';
    int rc = L->llama_decode(e->scratch, e->batch);
    L->llama_synchronize(e->scratch);
    if (rc != 0 || e->pass.status)
        return decode_error(e, rc, err);
    if (e->pass.captured != n)
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL,
                       "kv_from_residual: captured %d of %d rows of layer %d's cache write",
                       e->pass.captured, n, layer);
    if (!e->on_cpu) /* the rows as the scratch cache stored them */
        return read_rows(e, e->pass.sk, e->pass.sv, e->pass.sv_trans, e->scratch_cells, n, k, v,
                         err);
    return KVV_PLUGIN_OK;
}

int lp_probe(kvv_plugin_engine *e, kvv_plugin_error *err)
{
    const lp_lib *L = e->lib;
    const int32_t pos0 = 0;
    fill_batch(e, 1, NULL, &pos0, false);
    memset(&e->pass, 0, sizeof e->pass);
    e->pass.kind = LP_PASS_PROBE;
    e->lib->last_error[0] = '\0';
    int rc = L->llama_decode(e->scratch, e->batch);
    L->llama_synchronize(e->scratch);
    L->llama_memory_clear(L->llama_get_memory(e->scratch), true);
    return rc != 0 || e->pass.status ? decode_error(e, rc, err) : KVV_PLUGIN_OK;
}

int lp_kv_from_residual(kvv_plugin_engine *e, int layer, int n, const float *h,
                        const int32_t *pos, float *k, float *v, kvv_plugin_error *err)
{
    if (layer < 0 || layer >= e->n_layer || n < 1 || n > e->n_ctx)
        return lp_fail(err, KVV_PLUGIN_ERR_USAGE, "kv_from_residual: layer %d, %d rows", layer, n);
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && pos[j] == pos[j - 1] + 1)
            j++;
        int code = recompute_run(e, layer, j - i, h + (size_t)i * e->n_embd, pos + i,
                                 k + (size_t)i * e->kd, v + (size_t)i * e->vd, err);
        if (code)
            return code;
        i = j;
    }
    return KVV_PLUGIN_OK;
}
