/*
 * example_seqs.c — the example plugin's sequences (ABI 1.1 slots decode,
 * seq_rm, seq_cp, kv_read_seq; see example_impl.h).
 *
 * Each sequence is a reference engine with its own cache, opened on the
 * sequence's first use (sequence 0 is the plugin's engine of forward and
 * kv_read). A decode call runs each sequence's tokens, in call order,
 * through that sequence's engine: the reference's bits for a token depend
 * only on its own sequence (reductions whose order depends only on their
 * length), so a request gives the same bits alone or among others — what a
 * batch-invariant engine must do, and the baseline fault=seq-leak breaks.
 */
#include <stdlib.h>
#include <string.h>

#include "plugins/example/example_impl.h"
#include "runtime/kv_seqs.h"

void kvv_example_seqs_close(kvv_plugin_engine *e)
{
    for (int s = 1; s < KVV_EXAMPLE_MAX_SEQS; s++) {
        kvv_ref_close(e->seq[s]);
        e->seq[s] = NULL;
    }
}

static int check_seq(const char *call, int seq, kvv_plugin_error *err)
{
    if (seq < 0 || seq >= KVV_EXAMPLE_MAX_SEQS)
        return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE, "%s: sequence %d outside 0..%d", call,
                                seq, KVV_EXAMPLE_MAX_SEQS - 1);
    return KVV_PLUGIN_OK;
}

/* Sequence seq's engine, opened now if it has none (its cache empty). */
static int seq_ref(kvv_plugin_engine *e, const char *call, int seq, kvv_ref **out,
                   kvv_plugin_error *err)
{
    int code = check_seq(call, seq, err);
    if (code)
        return code;
    if (!e->seq[seq]) {
        kvv_error kerr = {0};
        kvv_status s = kvv_ref_open(e->model, &e->ref_opts, &e->seq[seq], &kerr);
        if (s)
            return kvv_example_from_status(s, &kerr, err);
    }
    *out = e->seq[seq];
    return KVV_PLUGIN_OK;
}

/* ------------------------------------------------------------ decode */

/* FAULT_SEQ_LEAK: the planted leak of runtime/kv_seqs.h over the call's
 * sequences in order of appearance (ids[0..n_ids)). */
static void seq_leak(kvv_plugin_engine *e, const int *ids, const int *last, int n_ids)
{
    kvv_kv_cache *caches[KVV_EXAMPLE_MAX_SEQS];
    for (int i = 0; i < n_ids; i++)
        caches[i] = kvv_ref_cache(e->seq[ids[i]]);
    kvv_kv_caches_leak(caches, last, n_ids); /* no memory: no leak, the control shows it */
}

/* The call's tokens of sequence ids[j], in call order, checked: positions
 * strictly increasing from the sequence's end. */
static int gather(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                  const int32_t *seq, int id, int32_t *tok_out, int32_t *pos_out, int *m_out,
                  kvv_plugin_error *err)
{
    const kvv_kv_cache *c = kvv_ref_cache(e->seq[id]);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (seq[i] != id)
            continue;
        int want = m ? pos_out[m - 1] + 1 : c->n_pos;
        if (pos[i] != want)
            return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE,
                                    "decode: token %d of sequence %d at position %d, expected %d "
                                    "(each sequence's positions continue its cache, no gaps)",
                                    i, id, pos[i], want);
        tok_out[m] = tokens[i];
        pos_out[m++] = pos[i];
    }
    *m_out = m;
    return KVV_PLUGIN_OK;
}

int kvv_example_decode(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                       const int32_t *seq, const uint8_t *want, float *logits,
                       kvv_plugin_error *err)
{
    kvv_example_leak_write(e);
    if (n < 1 || !tokens || !pos || !seq || !want)
        return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE, "decode: %d tokens or a NULL array", n);
    const int V = e->model->hp.n_vocab;
    int ids[KVV_EXAMPLE_MAX_SEQS], last[KVV_EXAMPLE_MAX_SEQS], n_ids = 0;
    kvv_ref *r;
    for (int i = 0; i < n; i++) {
        int code = seq_ref(e, "decode", seq[i], &r, err);
        if (code)
            return code;
        int j = 0;
        while (j < n_ids && ids[j] != seq[i])
            j++;
        if (j == n_ids)
            ids[n_ids++] = seq[i];
        last[j] = pos[i];
    }
    int32_t *tok = malloc((size_t)n * sizeof *tok), *ps = malloc((size_t)n * sizeof *ps);
    float *rows = malloc((size_t)n * (size_t)V * sizeof *rows);
    int code = !tok || !ps || !rows
                   ? kvv_example_fail(err, KVV_PLUGIN_ERR_NOMEM, "decode: out of memory")
                   : KVV_PLUGIN_OK;
    /* every sequence's positions first: a refused call changes no cache */
    for (int j = 0; !code && j < n_ids; j++) {
        int m;
        code = gather(e, n, tokens, pos, seq, ids[j], tok, ps, &m, err);
    }
    for (int j = 0; !code && j < n_ids; j++) {
        int m, asked = 0;
        gather(e, n, tokens, pos, seq, ids[j], tok, ps, &m, err);
        for (int i = 0; i < n; i++)
            asked |= seq[i] == ids[j] && want[i];
        kvv_error kerr = {0};
        kvv_status s = kvv_ref_forward(e->seq[ids[j]], m, tok, ps, NULL,
                                       asked ? KVV_LOGITS_ALL : KVV_LOGITS_NONE,
                                       asked ? rows : NULL, &kerr);
        if (s) {
            code = kvv_example_from_status(s, &kerr, err);
            break;
        }
        /* the asked rows of this sequence to their places in call order */
        for (int i = 0, k = 0, out = 0; asked && i < n; i++) {
            if (seq[i] == ids[j] && want[i])
                memcpy(logits + (size_t)out * V, rows + (size_t)k * V, (size_t)V * sizeof *rows);
            k += seq[i] == ids[j];
            out += want[i] != 0;
        }
    }
    if (!code && e->fault == FAULT_SEQ_LEAK)
        seq_leak(e, ids, last, n_ids);
    free(tok);
    free(ps);
    free(rows);
    return code;
}

/* ------------------------------------------------------------ cache control */

int kvv_example_seq_rm(kvv_plugin_engine *e, int seq, int p0, int p1, kvv_plugin_error *err)
{
    kvv_example_leak_write(e);
    int code = check_seq("seq_rm", seq, err);
    if (code || !e->seq[seq]) /* never used: already empty */
        return code;
    kvv_kv_cache *c = kvv_ref_cache(e->seq[seq]);
    if (p0 < 0)
        return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE, "seq_rm: p0 %d is negative", p0);
    if (p1 < 0 || p1 >= c->n_pos) {
        if (p0 < c->n_pos)
            kvv_kv_cache_truncate(c, p0);
        return KVV_PLUGIN_OK;
    }
    for (int l = 0; l < c->n_layer; l++)
        for (int p = p0; p < p1; p++)
            kvv_kv_cache_evict(c, l, p, -1);
    return KVV_PLUGIN_OK;
}

int kvv_example_seq_cp(kvv_plugin_engine *e, int src, int dst, int p0, int p1,
                       kvv_plugin_error *err)
{
    kvv_example_leak_write(e);
    kvv_ref *rs, *rd;
    int code = seq_ref(e, "seq_cp", src, &rs, err);
    if (!code)
        code = seq_ref(e, "seq_cp", dst, &rd, err);
    if (code || src == dst)
        return code;
    kvv_kv_cache *cs = kvv_ref_cache(rs), *cd = kvv_ref_cache(rd);
    int end = p1 < 0 || p1 > cs->n_pos ? cs->n_pos : p1;
    if (p0 < 0)
        return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE, "seq_cp: p0 %d is negative", p0);
    if (cd->n_pos > p0)
        return kvv_example_fail(err, KVV_PLUGIN_ERR_USAGE,
                                "seq_cp: sequence %d holds positions up to %d, at or past p0 %d "
                                "(remove them with seq_rm first)",
                                dst, cd->n_pos - 1, p0);
    if (end <= p0)
        return KVV_PLUGIN_OK;
    size_t es = cs->type == KVV_CACHE_F32 ? 4 : 2;
    size_t kb = (size_t)cs->n_kv_head * cs->head_dim_k * es;
    size_t vb = (size_t)cs->n_kv_head * cs->head_dim_v * es;
    size_t rows = (size_t)(end - p0);
    for (int l = 0; l < cs->n_layer; l++) {
        memcpy(kvv_kv_cache_k_ptr(cd, l, p0), kvv_kv_cache_k_ptr(cs, l, p0), rows * kb);
        memcpy(kvv_kv_cache_v_ptr(cd, l, p0), kvv_kv_cache_v_ptr(cs, l, p0), rows * vb);
        memcpy(cd->present[l] + (size_t)p0 * cs->n_kv_head,
               cs->present[l] + (size_t)p0 * cs->n_kv_head, rows * (size_t)cs->n_kv_head);
    }
    cd->n_pos = end;
    return KVV_PLUGIN_OK;
}

/* ------------------------------------------------------------ reading back */

int kvv_example_kv_read_seq(kvv_plugin_engine *e, int seq, int layer, int pos0, int n, void *k,
                            void *v, uint8_t *present, kvv_plugin_error *err)
{
    kvv_example_leak_write(e);
    kvv_ref *r;
    int code = seq_ref(e, "kv_read_seq", seq, &r, err);
    return code ? code
                : kvv_example_kv_read(e, kvv_ref_cache(r), layer, pos0, n, k, v, present, err);
}
