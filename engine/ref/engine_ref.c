/*
 * engine_ref.c — the reference engine (reference/ref.h) behind the engine
 * vtable (engine/engine.h). Mode: exact only. Sequences: a cache per
 * sequence (runtime/kv_seqs.h), sequence 0's the one forward uses.
 */
#include <stdio.h>
#include <stdlib.h>

#include "engine/engine_impl.h"
#include "reference/ref.h"

_Static_assert(KVV_ENGINE_MAX_SEQS == KVV_KV_MAX_SEQS, "one bound on sequences");

static kvv_ref *ref_of(kvv_engine *e)
{
    return (kvv_ref *)e->impl;
}

static void ref_close(kvv_engine *e)
{
    kvv_ref_close(ref_of(e));
    free(e);
}

static kvv_status ref_forward(kvv_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                              const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                              kvv_error *err)
{
    return kvv_ref_forward(ref_of(e), n, tokens, pos, hooks, lm, logits, err);
}

static kvv_status ref_kv_from_residual(kvv_engine *e, int layer, int n, const float *h,
                                       const int32_t *pos, float *k, float *v, kvv_error *err)
{
    return kvv_ref_kv_from_residual(ref_of(e), layer, n, h, pos, k, v, err);
}

static kvv_kv_cache *ref_cache(kvv_engine *e)
{
    return kvv_ref_cache(ref_of(e));
}

static void ref_describe(kvv_engine *e, kvv_engine_desc *d)
{
    snprintf(d->mode, sizeof d->mode, "%s", kvv_mode_name(KVV_MODE_EXACT));
    d->n_threads = 1;
    const unsigned g = e->opts.ggml;
    snprintf(d->kernels, sizeof d->kernels,
             "scalar fp32 dot=8-lane-fixed norm=f64-sum softmax=f64-sum math=kvv-kmath%s%s%s%s%s",
             g & KVV_GGML_GELU_FP16 ? " ggml-gelu-fp16" : "",
             g & KVV_GGML_ACT_QUANT ? " ggml-act-quant" : "",
             g & KVV_GGML_KQ_ACT ? " ggml-kq-act(q8_k/q8_1)" : "",
             g & KVV_GGML_Q40_ACT ? " ggml-q40-act(q8_0)" : "",
             g & KVV_GGML_Q80_ACT ? " ggml-q80-act(q8_0)" : "");
    d->ggml = g;
    d->kv_unified = 0; /* a cache per sequence */
}

static unsigned ref_caps(kvv_engine *e)
{
    (void)e;
    return KVV_ENGINE_CAP_BUILTIN | KVV_ENGINE_CAP_SEQS;
}

/* ---- sequences (the wrappers of engine.c checked ids and ranges) */

static kvv_status ref_decode(kvv_engine *e, const kvv_batch *b, float *logits, kvv_error *err)
{
    return kvv_ref_decode(ref_of(e), b->n, b->token, b->pos, b->seq, b->logits, logits, err);
}

static kvv_status ref_seq_rm(kvv_engine *e, int seq, int p0, int p1, kvv_error *err)
{
    (void)err;
    kvv_kv_seqs_rm(kvv_ref_seqs(ref_of(e)), seq, p0, p1);
    return KVV_OK;
}

static kvv_status ref_seq_cp(kvv_engine *e, int src, int dst, int p0, int p1, kvv_error *err)
{
    return kvv_kv_seqs_cp(kvv_ref_seqs(ref_of(e)), src, dst, p0, p1, err);
}

static kvv_status ref_seq_kv(kvv_engine *e, int seq, int layer, int pos0, int n, float *k,
                             float *v, uint8_t *present, kvv_error *err)
{
    (void)err;
    kvv_kv_seqs_read(kvv_ref_seqs(ref_of(e)), seq, layer, pos0, n, k, v, present);
    return KVV_OK;
}

static const kvv_engine_vtable ref_vtable = {
    .close = ref_close,
    .forward = ref_forward,
    .kv_from_residual = ref_kv_from_residual,
    .cache = ref_cache,
    .describe = ref_describe,
    .caps = ref_caps,
    .decode = ref_decode,
    .seq_rm = ref_seq_rm,
    .seq_cp = ref_seq_cp,
    .seq_kv = ref_seq_kv,
};

kvv_status kvv_engine_open_ref(const kvv_model *m, const kvv_engine_opts *o, kvv_engine **out,
                               kvv_error *err)
{
    *out = NULL; /* the registry has checked the mode (exact, its only one) */
    kvv_ref_opts ro = kvv_ref_opts_default();
    ro.cache_type = o->cache_type;
    ro.n_ctx = o->n_ctx;
    ro.control = o->control;
    ro.ggml = o->ggml;
    ro.n_seq = o->n_seq_max; /* the registry refused more than KVV_ENGINE_MAX_SEQS */
    kvv_engine *e = calloc(1, sizeof *e);
    if (!e)
        return kvv_error_set(err, KVV_ERR_NOMEM, "engine ref: out of memory");
    kvv_ref *r;
    kvv_status st = kvv_ref_open(m, &ro, &r, err);
    if (st) {
        free(e);
        return st;
    }
    e->vt = &ref_vtable;
    e->model = m;
    e->opts = *o;
    e->opts.n_threads = 1;
    e->opts.n_ctx = kvv_ref_cache(r)->n_ctx; /* the resolved size (0 = model default) */
    e->impl = r;
    *out = e;
    return KVV_OK;
}
