/*
 * llama_state.c — reading llama.cpp's KV cache back, as it holds it, through
 * its own serialization (llama_state_seq_get_data of sequence 0, or of the
 * sequence kv_read_seq names), not
 * through the graph: what kv_read returns is an independent path to the
 * same bytes the kv hook saw being written.
 *
 * Layout of the blob (src/llama-context.cpp state_seq_get_data,
 * src/llama-kv-cache.cpp state_write*, little-endian):
 *
 *   u32 magic 0xaf143cd8; i32 seq_id
 *   u32 n_stream                       (1 with a unified cache; else one per
 *                                      sequence, each but the sequence's own
 *                                      with cell_count 0 and nothing more)
 *   u32 cell_count
 *   cell_count x { i32 pos; u32 n_seq_id; i32 seq_id[n_seq_id] }
 *   u32 v_trans; u32 n_layer
 *   n_layer x { i32 k_type; u64 k_size_row; cell_count x k_size_row bytes }
 *   v_trans == 0: n_layer x { i32 v_type; u64 v_size_row; cell_count rows }
 *   v_trans == 1: n_layer x { i32 v_type; u32 v_size_el; u32 n_embd_v_gqa;
 *                             n_embd_v_gqa x cell_count elements }
 *
 * Models whose cache is split in two (sliding-window ones: gemma2, gemma3)
 * serialize two such blobs, without saying which layers each holds, and
 * leave the window-masked cells out: their cache is read from the cache
 * tensors instead (lp_cells_read, llama_cells.c).
 */
#include <stdlib.h>
#include <string.h>

#include "plugins/llama.cpp/llama_impl.h"

typedef struct {
    const uint8_t *p, *end;
    int bad;
} reader;

static const uint8_t *take(reader *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *q = r->p;
    r->p += n;
    return q;
}

static uint32_t u32(reader *r)
{
    const uint8_t *q = take(r, 4);
    uint32_t v = 0;
    if (q)
        memcpy(&v, q, 4);
    return v;
}

static uint64_t u64(reader *r)
{
    const uint8_t *q = take(r, 8);
    uint64_t v = 0;
    if (q)
        memcpy(&v, q, 8);
    return v;
}

void lp_state_free(lp_state *s)
{
    free(s->blob);
    free(s->cell_pos);
    free(s->k_data);
    free(s->v_data);
    memset(s, 0, sizeof *s);
}

static int parse(kvv_plugin_engine *e, lp_state *s, kvv_plugin_error *err)
{
    static const int32_t types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    const int32_t want = types[e->cache_type];
    const size_t es = lp_dtype_size(e->cache_type);
    reader r = {s->blob, s->blob + s->size, 0};
    s->n_cells = 0;
    if (s->size == 0)
        return KVV_PLUGIN_OK; /* nothing cached */
    uint32_t magic = u32(&r), seq = u32(&r);
    if (r.bad || magic != 0xaf143cd8u || seq != (uint32_t)s->seq)
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL,
                       "kv_read: llama.cpp's state starts with %08x %u, not af143cd8 %d", magic,
                       seq, s->seq);
    uint32_t n_stream = u32(&r);
    if (n_stream < 1 || n_stream > 256)
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "kv_read: %u cache streams", n_stream);
    uint32_t cells = 0;
    for (uint32_t st = 0; st < n_stream && cells == 0; st++) /* the sequence's own stream */
        cells = u32(&r);
    if (cells == 0)
        return r.bad ? lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "kv_read: truncated state") : KVV_PLUGIN_OK;
    if (cells > (uint32_t)e->n_ctx * 2u)
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "kv_read: %u cells in a %d-position cache",
                       cells, e->n_ctx);
    int32_t *cp = realloc(s->cell_pos, cells * sizeof *cp);
    if (!cp)
        return lp_fail(err, KVV_PLUGIN_ERR_NOMEM, "kv_read: out of memory");
    s->cell_pos = cp;
    for (uint32_t c = 0; c < cells && !r.bad; c++) {
        cp[c] = (int32_t)u32(&r);
        uint32_t n_seq = u32(&r);
        if (n_seq > 64) /* one sequence here; anything larger is a misparse */
            r.bad = 1;
        take(&r, (size_t)n_seq * 4);
    }
    s->v_trans = (int)u32(&r);
    uint32_t n_layer = u32(&r);
    if (r.bad || n_layer != (uint32_t)e->n_layer)
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL,
                       "kv_read: the state holds %u layers, the model %d (split cache?)", n_layer,
                       e->n_layer);
    for (int l = 0; l < e->n_layer && !r.bad; l++) {
        int32_t type = (int32_t)u32(&r);
        uint64_t row = u64(&r);
        if (type != want || row != (uint64_t)e->kd * es)
            return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL,
                           "kv_read: layer %d K type %d row %llu bytes (expected %d, %zu)", l,
                           type, (unsigned long long)row, want, (size_t)e->kd * es);
        s->k_data[l] = take(&r, (size_t)cells * row);
    }
    for (int l = 0; l < e->n_layer && !r.bad; l++) {
        int32_t type = (int32_t)u32(&r);
        uint64_t bytes;
        if (!s->v_trans) {
            bytes = u64(&r);
            if (bytes != (uint64_t)e->vd * es)
                r.bad = 1;
            s->v_data[l] = take(&r, (size_t)cells * bytes);
        } else {
            uint32_t el = u32(&r), width = u32(&r);
            if (el != es || width != (uint32_t)e->vd)
                r.bad = 1;
            s->v_data[l] = take(&r, (size_t)cells * width * el);
        }
        if (type != want)
            r.bad = 1;
    }
    if (r.bad)
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "kv_read: llama.cpp's state does not "
                       "parse as expected (%zu bytes)", s->size);
    s->n_cells = (int)cells;
    return KVV_PLUGIN_OK;
}

/* Serialize and index sequence seq's cache when it changed since the last
 * read (or another sequence was read). */
static int refresh(kvv_plugin_engine *e, int seq, kvv_plugin_error *err)
{
    lp_state *s = &e->state;
    if (s->gen == e->gen && s->seq == seq && s->k_data)
        return KVV_PLUGIN_OK;
    s->seq = seq;
    s->gen = e->gen - 1; /* not current until parsed */
    const lp_lib *L = e->lib;
    if (!s->k_data) {
        s->k_data = calloc((size_t)e->n_layer, sizeof *s->k_data);
        s->v_data = calloc((size_t)e->n_layer, sizeof *s->v_data);
        if (!s->k_data || !s->v_data)
            return lp_fail(err, KVV_PLUGIN_ERR_NOMEM, "kv_read: out of memory");
    }
    size_t size = L->llama_state_seq_get_size(e->ctx, seq);
    if (size > s->cap) {
        uint8_t *b = realloc(s->blob, size);
        if (!b)
            return lp_fail(err, KVV_PLUGIN_ERR_NOMEM, "kv_read: out of memory (%zu bytes)", size);
        s->blob = b;
        s->cap = size;
    }
    s->size = size ? L->llama_state_seq_get_data(e->ctx, s->blob, size, seq) : 0;
    if (s->size != size)
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "kv_read: state of %zu bytes, got %zu",
                       size, s->size);
    int code = parse(e, s, err);
    if (code)
        return code;
    s->gen = e->gen;
    return KVV_PLUGIN_OK;
}

int lp_kv_read(kvv_plugin_engine *e, int layer, int pos0, int n, void *k, void *v,
               uint8_t *present, kvv_plugin_error *err)
{
    return lp_kv_read_seq(e, 0, layer, pos0, n, k, v, present, err);
}

int lp_kv_read_seq(kvv_plugin_engine *e, int seq, int layer, int pos0, int n, void *k, void *v,
                   uint8_t *present, kvv_plugin_error *err)
{
    if (layer < 0 || layer >= e->n_layer || pos0 < 0 || n < 1 || pos0 + n > e->n_ctx ||
        seq < 0 || seq >= e->n_seq_max)
        return lp_fail(err, KVV_PLUGIN_ERR_USAGE, "kv_read: sequence %d layer %d positions "
                       "%d..%d", seq, layer, pos0, pos0 + n - 1);
    lp_cells_flush(e);
    if (e->copy_src[seq] == -2)
        return lp_fail(err, KVV_PLUGIN_ERR_UNSUPPORTED,
                       "kv_read: sequence %d was copied (seq_cp) and changed since; with "
                       "kv_unified=0 llama.cpp copies the rows at its next decode: read after one",
                       seq);
    /* a pending copy's rows are the source's, bit for bit (llama.cpp copies
     * the buffer) */
    const int end = e->copy_src[seq] >= 0 ? e->copy_end[seq] : e->n_ctx;
    if (e->copy_src[seq] >= 0)
        seq = e->copy_src[seq];
    if (e->split_cache && seq != 0)
        return lp_fail(err, KVV_PLUGIN_ERR_UNSUPPORTED, "kv_read_seq: a split sliding-window "
                       "cache is read through its tensors, for sequence 0 only");
    if (e->split_cache)
        return lp_cells_read(e, layer, pos0, n, k, v, present, err);
    int code = refresh(e, seq, err);
    if (code)
        return code;
    const lp_state *s = &e->state;
    const size_t es = lp_dtype_size(e->cache_type), krow = (size_t)e->kd * es;
    const size_t vrow = (size_t)e->vd * es;
    memset(present, 0, (size_t)n * e->n_head_kv);
    for (int c = 0; c < s->n_cells; c++) {
        int p = s->cell_pos[c] - pos0;
        if (p < 0 || p >= n || s->cell_pos[c] >= end)
            continue;
        memset(present + (size_t)p * e->n_head_kv, 1, (size_t)e->n_head_kv);
        memcpy((uint8_t *)k + (size_t)p * krow, s->k_data[layer] + (size_t)c * krow, krow);
        if (!s->v_trans) {
            memcpy((uint8_t *)v + (size_t)p * vrow, s->v_data[layer] + (size_t)c * vrow, vrow);
            continue;
        }
        for (int j = 0; j < e->vd; j++) /* element-major: element j of every cell together */
            memcpy((uint8_t *)v + (size_t)p * vrow + (size_t)j * es,
                   s->v_data[layer] + ((size_t)j * s->n_cells + c) * es, es);
    }
    return KVV_PLUGIN_OK;
}
