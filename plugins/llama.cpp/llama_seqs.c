/*
 * llama_seqs.c — several sequences (requests) in one llama_decode, as
 * llama.cpp's server batches its slots: the ABI 1.1 slots decode, seq_rm
 * and seq_cp (kv_read_seq is llama_state.c's read of one sequence).
 *
 * The context is opened with params.n_seq_max sequences (llama_plugin.c),
 * each able to hold n_ctx positions, with llama.cpp's kv_unified as the
 * engine option says: one cell pool shared by every sequence (1), or a
 * stream per sequence (0, llama.cpp's default; its batches are then split
 * "equal", a micro-batch holding the same number of tokens of each
 * sequence). A decode watches no graph node: its bits are llama.cpp's own.
 */
#include <string.h>

#include "plugins/llama.cpp/llama_impl.h"

/* Sequence 0's positions p0..p1-1 (p1 < 0: to the end) lose their cell. */
static void forget0(kvv_plugin_engine *e, int p0, int p1)
{
    int end = p1 < 0 || p1 > e->n_ctx ? e->n_ctx : p1;
    for (int p = p0 < 0 ? 0 : p0; p < end; p++)
        lp_cells_forget(e, p);
}

int lp_decode(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
              const int32_t *seq, const uint8_t *want, float *logits, kvv_plugin_error *err)
{
    const lp_lib *L = e->lib;
    if (n < 1 || n > e->n_ctx || !tokens || !pos || !seq || !want)
        return lp_fail(err, KVV_PLUGIN_ERR_USAGE, "decode: %d tokens (1..%d) or a NULL array", n,
                       e->n_ctx);
    llama_memory_t mem = L->llama_get_memory(e->ctx);
    /* llama.cpp's own rule, said here with the token that breaks it:
     * each sequence continues at its last position + 1, no gaps */
    int32_t next[KVV_LP_MAX_SEQS];
    for (int s = 0; s < e->n_seq_max; s++)
        next[s] = -1;
    for (int i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= e->n_vocab || seq[i] < 0 || seq[i] >= e->n_seq_max)
            return lp_fail(err, KVV_PLUGIN_ERR_USAGE,
                           "decode: token %d: id %d or sequence %d outside the vocabulary (%d) "
                           "or 0..%d", i, tokens[i], seq[i], e->n_vocab, e->n_seq_max - 1);
        int32_t *nx = &next[seq[i]];
        if (*nx < 0)
            *nx = L->llama_memory_seq_pos_max(mem, seq[i]) + 1;
        if (pos[i] != *nx || pos[i] >= e->n_ctx)
            return lp_fail(err, KVV_PLUGIN_ERR_USAGE,
                           "decode: token %d of sequence %d at position %d, expected %d "
                           "(llama.cpp continues a sequence at its last position + 1, below %d)",
                           i, seq[i], pos[i], *nx, e->n_ctx);
        (*nx)++;
    }
    lp_cells_flush(e);
    struct llama_batch *b = &e->batch;
    b->n_tokens = n;
    for (int i = 0; i < n; i++) {
        b->token[i] = tokens[i];
        b->pos[i] = pos[i];
        b->n_seq_id[i] = 1;
        b->seq_id[i][0] = seq[i];
        b->logits[i] = (int8_t)(want[i] != 0);
        if (seq[i] == 0) /* its cell is not watched: see llama_impl.h */
            lp_cells_forget(e, pos[i]);
    }
    memset(&e->pass, 0, sizeof e->pass);
    e->pass.kind = LP_PASS_DECODE;
    lp_copies_done(e); /* llama_decode applies pending stream copies first */
    e->lib->last_error[0] = '\0';
    e->gen++;
    int rc = L->llama_decode(e->ctx, *b);
    L->llama_synchronize(e->ctx);
    if (rc != 0)
        return lp_fail(err, rc == 1 ? KVV_PLUGIN_ERR_NOMEM : KVV_PLUGIN_ERR_INTERNAL,
                       "decode: llama_decode returned %d%s%s%s", rc,
                       rc == 1 ? " (no room in the cache)" : "", L->last_error[0] ? ": " : "",
                       L->last_error);
    for (int i = 0, out = 0; i < n; i++) {
        if (!want[i])
            continue;
        const float *row = L->llama_get_logits_ith(e->ctx, i);
        if (!row)
            return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "decode: no logits for token %d", i);
        memcpy(logits + (size_t)out++ * e->n_vocab, row, (size_t)e->n_vocab * sizeof *logits);
    }
    return KVV_PLUGIN_OK;
}

static int check_seq(const kvv_plugin_engine *e, const char *call, int seq, int p0,
                     kvv_plugin_error *err)
{
    if (seq < 0 || seq >= e->n_seq_max || p0 < 0)
        return lp_fail(err, KVV_PLUGIN_ERR_USAGE, "%s: sequence %d (0..%d) or position %d", call,
                       seq, e->n_seq_max - 1, p0);
    return KVV_PLUGIN_OK;
}

int lp_seq_rm(kvv_plugin_engine *e, int seq, int p0, int p1, kvv_plugin_error *err)
{
    int code = check_seq(e, "seq_rm", seq, p0, err);
    if (code)
        return code;
    lp_cells_flush(e);
    e->gen++;
    if (!e->lib->llama_memory_seq_rm(e->lib->llama_get_memory(e->ctx), seq, p0, p1 < 0 ? -1 : p1))
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "seq_rm: llama_memory_seq_rm(%d, %d, %d) "
                       "failed", seq, p0, p1);
    if (seq == 0)
        forget0(e, p0, p1);
    for (int s = 0; s < e->n_seq_max; s++) /* pending copies from or into seq */
        if (e->copy_src[s] != -1 && (s == seq || e->copy_src[s] == seq)) {
            if (s == seq && (p1 < 0 || p1 >= e->copy_end[s]))
                e->copy_end[s] = p0 < e->copy_end[s] ? p0 : e->copy_end[s];
            else
                e->copy_src[s] = -2;
        }
    return KVV_PLUGIN_OK;
}

void lp_copies_done(kvv_plugin_engine *e)
{
    for (int s = 0; s < KVV_LP_MAX_SEQS; s++)
        e->copy_src[s] = -1;
}

int lp_seq_cp(kvv_plugin_engine *e, int src, int dst, int p0, int p1, kvv_plugin_error *err)
{
    int code = check_seq(e, "seq_cp", src, p0, err);
    if (!code)
        code = check_seq(e, "seq_cp", dst, p0, err);
    if (code || src == dst)
        return code;
    lp_cells_flush(e);
    e->gen++;
    /* kv_unified: the cells gain dst's id (shared, not copied); a stream
     * per sequence: the rows are copied into dst's stream */
    llama_memory_t mem = e->lib->llama_get_memory(e->ctx);
    if (e->kv_unified) {
        e->lib->llama_memory_seq_cp(mem, src, dst, p0, p1 < 0 ? -1 : p1);
    } else {
        /* across streams llama.cpp copies whole sequences only (any other
         * range is a GGML_ASSERT): the whole of src, then dst cut at p1 */
        if (p0 > 0)
            return lp_fail(err, KVV_PLUGIN_ERR_UNSUPPORTED,
                           "seq_cp: with kv_unified=0 llama.cpp copies a sequence from its "
                           "position 0 only (asked: from %d)", p0);
        e->lib->llama_memory_seq_cp(mem, src, dst, -1, -1);
        if (p1 >= 0)
            e->lib->llama_memory_seq_rm(mem, dst, p1, -1);
        int from = e->copy_src[src] == -1 ? src : e->copy_src[src]; /* a copy of a copy */
        int end = p1 < 0 ? e->n_ctx : p1;
        if (e->copy_src[src] >= 0 && e->copy_end[src] < end)
            end = e->copy_end[src];
        e->copy_src[dst] = from;
        e->copy_end[dst] = end;
    }
    if (dst == 0)
        forget0(e, p0, p1);
    return KVV_PLUGIN_OK;
}
