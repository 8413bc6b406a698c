/*
 * cpu_seqs.c — several sequences (requests) in one call of the cpu engine
 * (engine/engine.h "sequences"): a cache per sequence (runtime/kv_seqs.h,
 * sequence 0's the one forward uses), allocated on first use.
 *
 * kvv_engine_decode runs the forward pass of cpu_forward.c ONCE over every
 * token of the call: the projections and the FFN are one batch of n rows
 * (what a server gains by batching), each row's K/V go to its sequence's
 * cache, and attention runs per run of consecutive rows of one sequence
 * against that sequence's cache. In invariant mode a row's bits are those
 * of the same token alone: every product element is one kernel dot in a
 * fixed order whatever the batch (cpu_matmul.c; the routes that change at
 * kvv_engine_batch_paths give the same bits), norms and activations are
 * per row or per element, and attention's sums depend on the visible keys
 * only (cpu_attn.c). Fast mode's sgemm and Q8_0 activation routes change
 * with the call's token count, so there a request's bits may depend on its
 * neighbours (tests/engine/test_engine_seqs.c records how much).
 */
#include "engine/cpu/cpu_impl.h"

kvv_kv_cache *kvv_cpu_row_cache(const kvv_cpu *c, int t)
{
    return c->seq ? c->seqs.c[c->seq[t]] : c->cache;
}

void kvv_cpu_attention_runs(kvv_cpu *c, int layer, int n, const int32_t *pos,
                            const kvv_hooks *hooks)
{
    if (!c->seq) {
        kvv_cpu_attention(c, layer, n, pos, c->q, c->o, hooks);
        return;
    }
    const kvv_hparams *hp = c->hp;
    const size_t qw = (size_t)hp->n_head * hp->head_dim, ow = (size_t)hp->n_head * hp->head_dim_v;
    for (int t0 = 0, t1; t0 < n; t0 = t1) {
        for (t1 = t0 + 1; t1 < n && c->seq[t1] == c->seq[t0]; t1++)
            ;
        kvv_cpu_attention_in(c, kvv_cpu_row_cache(c, t0), layer, t1 - t0, pos + t0,
                             c->q + (size_t)t0 * qw, c->o + (size_t)t0 * ow, hooks);
    }
}

/* seq_leak=1: the planted leak of runtime/kv_seqs.h over the call's
 * sequences in order of appearance. */
static void plant_leak(kvv_cpu *c, const kvv_batch *b)
{
    kvv_kv_cache *caches[KVV_KV_MAX_SEQS];
    int ids[KVV_KV_MAX_SEQS], last[KVV_KV_MAX_SEQS], n = 0;
    for (int i = 0; i < b->n; i++) {
        int j = 0;
        while (j < n && ids[j] != b->seq[i])
            j++;
        if (j == n)
            ids[n++] = b->seq[i];
        last[j] = b->pos[i];
    }
    for (int j = 0; j < n; j++)
        caches[j] = c->seqs.c[ids[j]];
    kvv_kv_caches_leak(caches, last, n); /* no memory: no leak, the control shows it */
}

kvv_status kvv_cpu_decode(kvv_engine *e, const kvv_batch *b, float *logits, kvv_error *err)
{
    kvv_cpu *c = e->impl;
    /* the wrapper checked ids, tokens and the positions' range */
    kvv_status st = kvv_kv_seqs_check(&c->seqs, b->n, b->pos, b->seq, "cpu engine: decode", err);
    if (st)
        return st;
    bool any = false;
    for (int i = 0; i < b->n && b->logits; i++)
        any |= b->logits[i] != 0;
    c->seq = b->seq;
    st = kvv_cpu_run(c, b->n, b->token, b->pos, NULL, KVV_LOGITS_NONE, any ? b->logits : NULL,
                     logits, err);
    c->seq = NULL;
    if (!st && c->copts.seq_leak)
        plant_leak(c, b);
    return st;
}

kvv_status kvv_cpu_seq_rm(kvv_engine *e, int seq, int p0, int p1, kvv_error *err)
{
    (void)err;
    kvv_kv_seqs_rm(&((kvv_cpu *)e->impl)->seqs, seq, p0, p1);
    return KVV_OK;
}

kvv_status kvv_cpu_seq_cp(kvv_engine *e, int src, int dst, int p0, int p1, kvv_error *err)
{
    return kvv_kv_seqs_cp(&((kvv_cpu *)e->impl)->seqs, src, dst, p0, p1, err);
}

kvv_status kvv_cpu_seq_kv(kvv_engine *e, int seq, int layer, int pos0, int n, float *k, float *v,
                          uint8_t *present, kvv_error *err)
{
    (void)err;
    kvv_kv_seqs_read(&((kvv_cpu *)e->impl)->seqs, seq, layer, pos0, n, k, v, present);
    return KVV_OK;
}
