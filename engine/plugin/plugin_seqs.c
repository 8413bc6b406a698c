/*
 * plugin_seqs.c — ABI 1.1 sequences through the plugin host (see
 * plugin_impl.h): the capability check at open, and decode / seq_rm /
 * seq_cp / seq_kv mapped to the plugin's slots, with the same guards as
 * every other call (outputs through stages, messages naming the call).
 *
 * Sequence 0 is also the sequence of forward and of the host's cache mirror
 * (plugin_mirror.c): a call that touches it first pushes the host's pending
 * edits of the mirror, and afterwards reads back what it changed, so the
 * single-sequence checks and the batch check see one cache.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/breadcrumb.h"
#include "engine/engine_impl.h"
#include "engine/plugin/plugin_impl.h"
#include "model/tensor_types.h"

static kvv_plugin_state *ps_of(kvv_engine *e)
{
    return (kvv_plugin_state *)e->impl;
}

/* Does the plugin's table reach slot kv_read_seq (a 1.1 table)? */
static bool has_11_table(const kvv_plugin_state *ps)
{
    return ps->lib.t.struct_size >=
           offsetof(kvv_plugin_table, kv_read_seq) + sizeof ps->lib.t.kv_read_seq;
}

kvv_status kvv_plugin_seqs_open(kvv_plugin_state *ps, kvv_error *err)
{
    const kvv_plugin_table *t = &ps->lib.t;
    ps->seqs = false;
    if (!has_11_table(ps)) { /* a 1.0 plugin: the 1.1 info fields are not its own */
        ps->kv_unified = -1;
        ps->info.n_seq_max = 1;
        return KVV_OK;
    }
    ps->kv_unified = ps->info.kv_unified < 0 ? -1 : ps->info.kv_unified != 0;
    if (!(ps->info.caps & KVV_PLUGIN_CAP_SEQS))
        return KVV_OK;
    const struct { const void *slot; const char *name; } s[] = {
        {(const void *)t->decode, "decode"},
        {(const void *)t->seq_rm, "seq_rm"},
        {(const void *)t->seq_cp, "seq_cp"},
        {(const void *)t->kv_read_seq, "kv_read_seq"},
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        if (!s[i].slot)
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "plugin %s declares seqs but its %s slot is NULL", ps->lib.path,
                                 s[i].name);
    /* One sequence served is no sequences; more than the host tracks are
     * not used. */
    if (ps->info.n_seq_max > KVV_ENGINE_MAX_SEQS)
        ps->info.n_seq_max = KVV_ENGINE_MAX_SEQS;
    ps->seqs = ps->info.n_seq_max >= 2;
    return KVV_OK;
}

/* Sequence 0 about to be read or changed by the plugin: the host's edits of
 * the mirror (and a pending reset) go first. */
static kvv_status sync_seq0(kvv_plugin_state *ps, kvv_error *err)
{
    kvv_status s = kvv_plugin_clear_pending(ps, err);
    return s ? s : kvv_plugin_mirror_push(ps, err);
}

/* One past the last position of sequence seq, as the host counts it. */
static int seq_end(const kvv_plugin_state *ps, int seq)
{
    if (seq == 0 && ps->mirror)
        return ps->mirror->n_pos;
    return ps->seq_end[seq];
}

/* Read positions p0..p1-1 of sequence 0 back into the mirror. */
static kvv_status pull_range(kvv_plugin_state *ps, int p0, int p1, kvv_error *err)
{
    if (!ps->mirror || p1 <= p0)
        return KVV_OK;
    int32_t *pos = malloc((size_t)(p1 - p0) * sizeof *pos);
    if (!pos)
        return kvv_error_set(err, KVV_ERR_NOMEM, "engine %s: out of memory", ps->engine_name);
    for (int p = p0; p < p1; p++)
        pos[p - p0] = p;
    kvv_status s = kvv_plugin_mirror_pull(ps, p1 - p0, pos, err);
    free(pos);
    return s;
}

/* ------------------------------------------------------------ decode */

kvv_status kvv_plugin_decode(kvv_engine *e, const kvv_batch *b, float *logits, kvv_error *err)
{
    kvv_plugin_state *ps = ps_of(e);
    const int n = b->n;
    if (n > e->opts.n_ctx)
        return kvv_error_set(err, KVV_ERR_USAGE, "decode: %d tokens (1..%d)", n, e->opts.n_ctx);
    bool touches0 = false;
    int n_want = 0;
    for (int i = 0; i < n; i++) {
        touches0 |= b->seq[i] == 0;
        n_want += b->logits && b->logits[i];
    }
    kvv_status s = touches0 ? sync_seq0(ps, err) : KVV_OK;
    uint8_t *want = s ? NULL : calloc((size_t)n, 1);
    int32_t *pos0 = s ? NULL : malloc((size_t)n * sizeof *pos0);
    if (!s && (!want || !pos0))
        s = kvv_error_set(err, KVV_ERR_NOMEM, "engine %s: out of memory", ps->engine_name);
    void *stage = NULL;
    const size_t V = (size_t)ps->info.n_vocab;
    if (!s && n_want)
        s = kvv_plugin_stage_begin(ps, &ps->st_logits, (size_t)n_want * V * sizeof(float),
                                   "decode", "logits", &stage, err);
    if (s) {
        free(want);
        free(pos0);
        return s;
    }
    int n0 = 0;
    for (int i = 0; i < n; i++) {
        want[i] = b->logits && b->logits[i];
        if (b->seq[i] == 0)
            pos0[n0++] = b->pos[i];
    }
    kvv_breadcrumb_enter(KVV_CRUMB_FORWARD); /* after the mirror's edits */
    kvv_breadcrumb_positions(b->pos[0], b->pos[n - 1]);
    kvv_plugin_error perr;
    memset(&perr, 0, sizeof perr);
    int code = ps->lib.t.decode(ps->pe, n, b->token, b->pos, b->seq, want,
                                n_want ? stage : NULL, &perr);
    s = n_want ? kvv_plugin_stage_end(ps, &ps->st_logits, KVV_STAGE_FLOATS, code == 0, V, logits,
                                      err)
               : KVV_OK;
    if (!s && code)
        s = kvv_plugin_fail(ps, code, "decode", &perr, err);
    if (!s)
        for (int i = 0; i < n; i++)
            if (b->seq[i] > 0 && b->pos[i] + 1 > ps->seq_end[b->seq[i]])
                ps->seq_end[b->seq[i]] = b->pos[i] + 1;
    /* Read back what the call stored in sequence 0 even after a failure,
     * so the mirror stays the plugin's cache (as forward does). */
    kvv_status s2 = n0 ? kvv_plugin_mirror_pull(ps, n0, pos0, s ? NULL : err) : KVV_OK;
    free(want);
    free(pos0);
    return s ? s : s2;
}

/* ------------------------------------------------------------ cache control */

kvv_status kvv_plugin_seq_rm(kvv_engine *e, int seq, int p0, int p1, kvv_error *err)
{
    kvv_plugin_state *ps = ps_of(e);
    kvv_status s = seq == 0 ? sync_seq0(ps, err) : KVV_OK;
    if (s)
        return s;
    kvv_breadcrumb_enter(KVV_CRUMB_KV_EDIT);
    kvv_plugin_error perr;
    memset(&perr, 0, sizeof perr);
    int code = ps->lib.t.seq_rm(ps->pe, seq, p0, p1, &perr);
    if (code)
        return kvv_plugin_fail(ps, code, "seq_rm", &perr, err);
    const bool to_end = p1 < 0 || p1 >= seq_end(ps, seq);
    if (seq > 0 && to_end && p0 < ps->seq_end[seq])
        ps->seq_end[seq] = p0;
    if (seq == 0 && ps->mirror) { /* the same edit on the host's copies */
        kvv_kv_cache *c[2] = {ps->mirror, ps->shadow};
        for (int i = 0; i < 2; i++) {
            if (to_end) {
                kvv_kv_cache_truncate(c[i], p0);
                continue;
            }
            for (int l = 0; l < c[i]->n_layer; l++)
                for (int p = p0; p < p1; p++)
                    kvv_kv_cache_evict(c[i], l, p, -1);
        }
    }
    return KVV_OK;
}

kvv_status kvv_plugin_seq_cp(kvv_engine *e, int src, int dst, int p0, int p1, kvv_error *err)
{
    kvv_plugin_state *ps = ps_of(e);
    kvv_status s = src == 0 || dst == 0 ? sync_seq0(ps, err) : KVV_OK;
    if (s)
        return s;
    const int end = p1 < 0 || p1 > seq_end(ps, src) ? seq_end(ps, src) : p1;
    kvv_breadcrumb_enter(KVV_CRUMB_KV_EDIT);
    kvv_plugin_error perr;
    memset(&perr, 0, sizeof perr);
    int code = ps->lib.t.seq_cp(ps->pe, src, dst, p0, p1, &perr);
    if (code)
        return kvv_plugin_fail(ps, code, "seq_cp", &perr, err);
    if (dst == 0)
        return pull_range(ps, p0, end, err);
    if (end > ps->seq_end[dst])
        ps->seq_end[dst] = end;
    return KVV_OK;
}

/* ------------------------------------------------------------ reading back */

static void widen(int dtype, const void *raw, float *out, size_t n)
{
    const unsigned char *p = raw;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        switch (dtype) {
        case KVV_PLUGIN_DTYPE_F16:
            memcpy(&h, p + 2 * i, 2);
            out[i] = kvv_fp16_to_fp32(h);
            break;
        case KVV_PLUGIN_DTYPE_BF16:
            memcpy(&h, p + 2 * i, 2);
            out[i] = kvv_bf16_to_fp32(h);
            break;
        default:
            memcpy(out + i, p + 4 * i, 4);
        }
    }
}

kvv_status kvv_plugin_seq_kv(kvv_engine *e, int seq, int layer, int pos0, int n, float *k,
                             float *v, uint8_t *present, kvv_error *err)
{
    kvv_plugin_state *ps = ps_of(e);
    if (n == 0)
        return KVV_OK;
    kvv_status s = seq == 0 ? sync_seq0(ps, err) : KVV_OK;
    if (s)
        return s;
    const int dt = ps->info.cache_type;
    const size_t es = dt == KVV_PLUGIN_DTYPE_F32 ? 4 : 2;
    const size_t kn = (size_t)n * (size_t)ps->info.n_head_kv * (size_t)ps->info.head_dim;
    const size_t vn = (size_t)n * (size_t)ps->info.n_head_kv * (size_t)ps->info.head_dim_v;
    const size_t pn = (size_t)n * (size_t)ps->info.n_head_kv;
    void *sk, *sv, *sp;
    if ((s = kvv_plugin_stage_begin(ps, &ps->st_k, kn * es, "kv_read_seq", "k", &sk, err)) ||
        (s = kvv_plugin_stage_begin(ps, &ps->st_v, vn * es, "kv_read_seq", "v", &sv, err)) ||
        (s = kvv_plugin_stage_begin(ps, &ps->st_present, pn, "kv_read_seq", "present", &sp, err)))
        return s;
    /* raw rows are widened after the guards pass, from a copy: the stages
     * are poisoned again as they end */
    unsigned char *raw = malloc(kn * es + vn * es + pn);
    if (!raw) {
        kvv_error ignored = {0};
        kvv_plugin_stage_end(ps, &ps->st_k, KVV_STAGE_RAW, false, 0, NULL, &ignored);
        kvv_plugin_stage_end(ps, &ps->st_v, KVV_STAGE_RAW, false, 0, NULL, &ignored);
        kvv_plugin_stage_end(ps, &ps->st_present, KVV_STAGE_FLAGS, false, 0, NULL, &ignored);
        return kvv_error_set(err, KVV_ERR_NOMEM, "engine %s: out of memory", ps->engine_name);
    }
    kvv_breadcrumb_enter(KVV_CRUMB_KV_READ);
    kvv_breadcrumb_layer(layer, pos0, pos0 + n - 1);
    kvv_plugin_error perr;
    memset(&perr, 0, sizeof perr);
    int code = ps->lib.t.kv_read_seq(ps->pe, seq, layer, pos0, n, sk, sv, sp, &perr);
    kvv_status s1 = kvv_plugin_stage_end(ps, &ps->st_k, KVV_STAGE_RAW, code == 0, 0, raw, err);
    kvv_status s2 = kvv_plugin_stage_end(ps, &ps->st_v, KVV_STAGE_RAW, code == 0, 0,
                                         raw + kn * es, s1 ? NULL : err);
    kvv_status s3 = kvv_plugin_stage_end(ps, &ps->st_present, KVV_STAGE_FLAGS, code == 0,
                                         (size_t)ps->info.n_head_kv, raw + (kn + vn) * es,
                                         s1 || s2 ? NULL : err);
    s = s1 ? s1 : s2 ? s2 : s3;
    if (!s && code)
        s = kvv_plugin_fail(ps, code, "kv_read_seq", &perr, err);
    if (!s) {
        widen(dt, raw, k, kn);
        widen(dt, raw + kn * es, v, vn);
        for (size_t i = 0; present && i < pn; i++)
            present[i] = raw[(kn + vn) * es + i] != 0;
    }
    free(raw);
    return s;
}
