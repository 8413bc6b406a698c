/*
 * llama_cells.c — llama.cpp's KV cache as tensors: which cell holds which
 * position, writing rows in place (kv_write), and reading a split
 * sliding-window cache back (kv_read for gemma2 / gemma3).
 *
 * llama.cpp's public API has no per-layer cache accessor, but every forward
 * writes the cache through SET_ROWS nodes (llama-kv-cache.cpp cpy_k/cpy_v):
 * src[1] holds the cells the micro-batch's rows go to, and the node is a
 * view of the cache tensor itself (its view_src: `cache_k_lL`, shape
 * [n_embd_k_gqa, n_cells]; `cache_v_lL` likewise, or element-major when
 * flash attention is off: element j of cell c at flat index j*n_cells + c).
 * The graph callback reports both (lp_cells_seen, lp_cells_store), so the
 * plugin knows for every layer where each position lives. With that:
 *
 *   kv_write  overwrites a held position's rows in place
 *             (ggml_backend_tensor_set on the cache tensor, any device; row
 *             by row: whole-tensor writes made ggml-vulkan over lavapipe
 *             crash a later decode).
 *             Cells, their positions and their order stay as llama.cpp
 *             made them. llama_state_seq_set_data would rebuild the whole
 *             sequence instead: it removes it (seq_rm) and lets find_slot
 *             place the cells again, which can move them — and a moved
 *             cell sums in another lane of the attention kernels, so bits
 *             change that no write asked for; and it gives no way to learn
 *             where the cells went. So a position llama.cpp does not hold
 *             (evicted) is not re-inserted: UNSUPPORTED, said why.
 *   kv_read   of a split cache (gemma2, gemma3: a full cache and a
 *             sliding-window one, with cells of their own): llama.cpp's
 *             serialization writes the two blobs without saying which
 *             layers each holds, and leaves out the window-masked cells,
 *             which still hold the bits stored for them. Reading the cache
 *             tensors at each layer's cells gives every stored row.
 *
 * The maps are kept only for the engine's own context (not the scratch
 * context of kv_from_residual), cleared with the cache, and a cell written
 * again for another position drops the old one.
 */
#include <stdlib.h>
#include <string.h>

#include "plugins/llama.cpp/llama_impl.h"

int lp_cells_init(kvv_plugin_engine *e)
{
    lp_cells *c = &e->cells;
    size_t L = (size_t)e->n_layer;
    c->n_layer = e->n_layer;
    c->k = calloc(L, sizeof *c->k);
    c->v = calloc(L, sizeof *c->v);
    c->v_trans = calloc(L, 1);
    c->pos_of = calloc(L, sizeof *c->pos_of);
    c->n_cells = calloc(L, sizeof *c->n_cells);
    c->cell = malloc(L * (size_t)e->n_ctx * sizeof *c->cell);
    c->kw = calloc(L, sizeof *c->kw);
    c->vw = calloc(L, sizeof *c->vw);
    c->dirty = calloc(L, sizeof *c->dirty);
    if (!c->k || !c->v || !c->v_trans || !c->pos_of || !c->n_cells || !c->cell || !c->kw ||
        !c->vw || !c->dirty)
        return -1;
    memset(c->cell, 0xff, L * (size_t)e->n_ctx * sizeof *c->cell); /* -1 */
    return 0;
}

void lp_cells_free(lp_cells *c)
{
    for (int l = 0; l < c->n_layer; l++) {
        if (c->pos_of)
            free(c->pos_of[l]);
        if (c->kw)
            free(c->kw[l]);
        if (c->vw)
            free(c->vw[l]);
        if (c->dirty)
            free(c->dirty[l]);
    }
    free(c->kw);
    free(c->vw);
    free(c->dirty);
    free(c->k);
    free(c->v);
    free(c->v_trans);
    free(c->pos_of);
    free(c->n_cells);
    free(c->cell);
    free(c->buf);
    memset(c, 0, sizeof *c);
}

static int32_t *cell_row(kvv_plugin_engine *e, int layer)
{
    return e->cells.cell + (size_t)layer * (size_t)e->n_ctx;
}

void lp_cells_seen(kvv_plugin_engine *e, const struct ggml_tensor *t, int layer, bool is_k)
{
    lp_cells *c = &e->cells;
    if (layer < 0 || layer >= e->n_layer)
        return;
    /* the node is a view of the cache tensor (or of a reshape of it) */
    struct ggml_tensor *root = t->view_src ? t->view_src : t->src[2];
    if (!root)
        return;
    if (!is_k) {
        c->v[layer] = root;
        c->v_trans[layer] = t->ne[0] == 1; /* one element per row: element-major */
        return;
    }
    c->k[layer] = root;
    if (!c->pos_of[layer] && root->ne[1] > 0) {
        c->pos_of[layer] = malloc((size_t)root->ne[1] * sizeof **c->pos_of);
        if (c->pos_of[layer]) {
            memset(c->pos_of[layer], 0xff, (size_t)root->ne[1] * sizeof **c->pos_of);
            c->n_cells[layer] = (int)root->ne[1];
        }
    }
}

void lp_cells_store(kvv_plugin_engine *e, int layer, int ub, const int32_t *pos,
                    const int64_t *cell)
{
    lp_cells *c = &e->cells;
    if (layer < 0 || layer >= e->n_layer || !c->pos_of[layer])
        return;
    int32_t *map = cell_row(e, layer), *back = c->pos_of[layer];
    for (int r = 0; r < ub; r++) {
        int64_t x = cell[r];
        int p = pos[r];
        if (x < 0 || x >= c->n_cells[layer] || p < 0 || p >= e->n_ctx)
            continue;
        if (back[x] >= 0 && back[x] != p) /* the cell held another position */
            map[back[x]] = -1;
        if (map[p] >= 0 && map[p] != x)   /* the position moved */
            back[map[p]] = -1;
        map[p] = (int32_t)x;
        back[x] = p;
    }
}

void lp_cells_forget(kvv_plugin_engine *e, int pos)
{
    lp_cells *c = &e->cells;
    for (int l = 0; l < e->n_layer; l++) {
        int32_t *map = cell_row(e, l);
        int p0 = pos < 0 ? 0 : pos, p1 = pos < 0 ? e->n_ctx : pos + 1;
        for (int p = p0; p < p1 && p < e->n_ctx; p++) {
            if (map[p] >= 0 && c->pos_of[l])
                c->pos_of[l][map[p]] = -1;
            map[p] = -1;
        }
    }
}

/* A host copy of the whole tensor t (NULL when out of memory). */
static uint8_t *copy_of(kvv_plugin_engine *e, const struct ggml_tensor *t)
{
    size_t bytes = e->lib->ggml_nbytes(t);
    uint8_t *b = malloc(bytes);
    if (b)
        e->lib->ggml_backend_tensor_get(t, b, 0, bytes);
    return b;
}

/* The written rows of t (row-major, rows along ne[1]) from its copy b. */
static void send_rows(kvv_plugin_engine *e, struct ggml_tensor *t, const uint8_t *b,
                      const uint8_t *dirty, int n_cells)
{
    for (int x = 0; x < n_cells; x++)
        if (dirty[x])
            e->lib->ggml_backend_tensor_set(t, b + (size_t)x * t->nb[1], (size_t)x * t->nb[1],
                                            t->nb[1]);
}

void lp_cells_flush(kvv_plugin_engine *e)
{
    lp_cells *c = &e->cells;
    for (int l = 0; l < c->n_layer; l++) {
        if (!c->kw[l])
            continue;
        send_rows(e, c->k[l], c->kw[l], c->dirty[l], c->n_cells[l]);
        if (c->v_trans[l]) /* element-major: a row is scattered, send the tensor */
            e->lib->ggml_backend_tensor_set(c->v[l], c->vw[l], 0, e->lib->ggml_nbytes(c->v[l]));
        else
            send_rows(e, c->v[l], c->vw[l], c->dirty[l], c->n_cells[l]);
        free(c->kw[l]);
        free(c->vw[l]);
        free(c->dirty[l]);
        c->kw[l] = c->vw[l] = NULL;
        c->dirty[l] = NULL;
    }
}

int lp_kv_write(kvv_plugin_engine *e, int layer, int pos, const void *k, const void *v,
                kvv_plugin_error *err)
{
    lp_cells *c = &e->cells;
    if (layer < 0 || layer >= e->n_layer || pos < 0 || pos >= e->n_ctx)
        return lp_fail(err, KVV_PLUGIN_ERR_USAGE, "kv_write: layer %d position %d", layer, pos);
    int32_t cell = cell_row(e, layer)[pos];
    if (cell < 0 || !c->k[layer] || !c->v[layer])
        return lp_fail(err, KVV_PLUGIN_ERR_UNSUPPORTED,
                       "kv_write: llama.cpp holds no cell for position %d (layer %d): it makes "
                       "cells only by decoding, and rebuilding the sequence through "
                       "llama_state_seq_set_data may move every cell",
                       pos, layer);
    const size_t es = lp_dtype_size(e->cache_type);
    const struct ggml_tensor *kt = c->k[layer], *vt = c->v[layer];
    if (!c->kw[layer])
        c->kw[layer] = copy_of(e, kt);
    if (!c->vw[layer])
        c->vw[layer] = copy_of(e, vt);
    if (!c->dirty[layer])
        c->dirty[layer] = calloc((size_t)c->n_cells[layer], 1);
    if (!c->kw[layer] || !c->vw[layer] || !c->dirty[layer])
        return lp_fail(err, KVV_PLUGIN_ERR_NOMEM, "kv_write: out of memory (layer %d)", layer);
    c->dirty[layer][cell] = 1;
    memcpy(c->kw[layer] + (size_t)cell * kt->nb[1], k, (size_t)e->kd * es);
    if (!c->v_trans[layer]) {
        memcpy(c->vw[layer] + (size_t)cell * vt->nb[1], v, (size_t)e->vd * es);
    } else {
        const size_t n_cells = (size_t)c->n_cells[layer];
        for (int j = 0; j < e->vd; j++)
            memcpy(c->vw[layer] + ((size_t)j * n_cells + (size_t)cell) * es,
                   (const uint8_t *)v + (size_t)j * es, es);
    }
    e->gen++; /* the serialized state is stale */
    return KVV_PLUGIN_OK;
}

/* Layer's K or V cache tensor, whole, into c->buf. */
static const uint8_t *read_tensor(kvv_plugin_engine *e, const struct ggml_tensor *t,
                                  kvv_plugin_error *err)
{
    lp_cells *c = &e->cells;
    size_t bytes = e->lib->ggml_nbytes(t);
    if (bytes > c->buf_cap) {
        uint8_t *b = realloc(c->buf, bytes);
        if (!b) {
            lp_fail(err, KVV_PLUGIN_ERR_NOMEM, "kv_read: out of memory (%zu bytes)", bytes);
            return NULL;
        }
        c->buf = b;
        c->buf_cap = bytes;
    }
    e->lib->ggml_backend_tensor_get(t, c->buf, 0, bytes);
    return c->buf;
}

int lp_cells_read(kvv_plugin_engine *e, int layer, int pos0, int n, void *k, void *v,
                  uint8_t *present, kvv_plugin_error *err)
{
    const lp_cells *c = &e->cells;
    const int32_t *map = cell_row(e, layer);
    const size_t es = lp_dtype_size(e->cache_type);
    const size_t krow = (size_t)e->kd * es, vrow = (size_t)e->vd * es;
    memset(present, 0, (size_t)n * e->n_head_kv);
    int any = 0;
    for (int i = 0; i < n; i++)
        any |= map[pos0 + i] >= 0;
    if (!any)
        return KVV_PLUGIN_OK;
    if (!c->k[layer] || !c->v[layer])
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "kv_read: layer %d's cache tensors were "
                       "never seen in the graph", layer);
    const struct ggml_tensor *kt = c->k[layer], *vt = c->v[layer];
    const uint8_t *kb = read_tensor(e, kt, err);
    if (!kb)
        return KVV_PLUGIN_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        int32_t cell = map[pos0 + i];
        if (cell < 0)
            continue;
        memcpy((uint8_t *)k + (size_t)i * krow, kb + (size_t)cell * kt->nb[1], krow);
        memset(present + (size_t)i * e->n_head_kv, 1, (size_t)e->n_head_kv);
    }
    const uint8_t *vb = read_tensor(e, vt, err);
    if (!vb)
        return KVV_PLUGIN_ERR_NOMEM;
    const size_t n_cells = (size_t)c->n_cells[layer];
    for (int i = 0; i < n; i++) {
        int32_t cell = map[pos0 + i];
        if (cell < 0)
            continue;
        uint8_t *dst = (uint8_t *)v + (size_t)i * vrow;
        if (!c->v_trans[layer])
            memcpy(dst, vb + (size_t)cell * vt->nb[1], vrow);
        else
            for (int j = 0; j < e->vd; j++)
                memcpy(dst + (size_t)j * es, vb + ((size_t)j * n_cells + (size_t)cell) * es, es);
    }
    return KVV_PLUGIN_OK;
}
