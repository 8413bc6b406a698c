/*
 * ref_engine.c — the reference engine's lifetime: options, opening (exact
 * dequantization of every weight to fp32), the KV cache, closing.
 * The forward pass is in ref_forward.c, its kernels in ref_ops.c.
 */
#include <stdlib.h>
#include <string.h>

#include "model/tensor_types.h"
#include "reference/kmath.h"
#include "reference/ref_internal.h"

/* Largest cache the reference accepts: RoPE angles stay inside
 * kvv_sincosf's domain (|pos * theta| <= 2^20). */
#define REF_MAX_CTX (1 << 20)

kvv_ref_opts kvv_ref_opts_default(void)
{
    kvv_ref_opts o;
    memset(&o, 0, sizeof o);
    o.cache_type = KVV_CACHE_F32;
    o.n_ctx = 0;
    o.control = 0;
    o.ggml = 0;
    return o;
}

/* ------------------------------------------------------------ weights */

/* Dequantize tensor t (all of its rows) into a new fp32 buffer owned by w. */
static kvv_status dequant(const kvv_model *m, ref_weights *w, const kvv_gguf_tensor *t,
                          float **out, kvv_error *err)
{
    *out = NULL;
    const kvv_type_traits *tt = kvv_type_traits_of(t->type);
    if (!tt || !tt->can_dequantize)
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                             "%s: tensor %s (info at byte %llu): type %s cannot be dequantized "
                             "by the reference engine",
                             m->gguf->path, t->name, (unsigned long long)t->info_offset,
                             kvv_type_name(t->type));
    const int64_t cols = t->ne[0];
    const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    const size_t row_bytes = kvv_type_row_size(t->type, cols);
    if (row_bytes == 0 || (uint64_t)row_bytes * (uint64_t)rows > t->nbytes)
        return kvv_error_set(err, KVV_ERR_FORMAT,
                             "%s: tensor %s (info at byte %llu): %lld x %lld %s elements do not "
                             "fit its %llu data bytes",
                             m->gguf->path, t->name, (unsigned long long)t->info_offset,
                             (long long)rows, (long long)cols, kvv_type_name(t->type),
                             (unsigned long long)t->nbytes);
    float *buf = malloc((size_t)rows * (size_t)cols * sizeof(float));
    if (!buf)
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory dequantizing tensor %s",
                             m->gguf->path, t->name);
    for (int64_t r = 0; r < rows; r++)
        if (!kvv_dequantize_row(t->type, t->data + (size_t)r * row_bytes,
                                buf + (size_t)r * (size_t)cols, cols)) {
            free(buf);
            return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                                 "%s: tensor %s: type %s cannot be dequantized",
                                 m->gguf->path, t->name, kvv_type_name(t->type));
        }
    w->owned[w->n_owned++] = buf;
    *out = buf;
    return KVV_OK;
}

/* Optional tensor: NULL stays NULL. */
static kvv_status dequant_opt(const kvv_model *m, ref_weights *w, const kvv_gguf_tensor *t,
                              const float **out, kvv_error *err)
{
    *out = NULL;
    if (!t)
        return KVV_OK;
    float *p;
    kvv_status st = dequant(m, w, t, &p, err);
    *out = p;
    return st;
}

static kvv_status load_layer(const kvv_model *m, ref_weights *w, int il, kvv_error *err)
{
    const kvv_hparams *hp = &m->hp;
    const kvv_layer_tensors *T = &m->layers[il];
    ref_layer *L = &w->layers[il];
    const size_t E = (size_t)hp->n_embd, F = (size_t)hp->n_ff;
    const size_t Q = (size_t)hp->n_head * (size_t)hp->head_dim;
    const size_t K = (size_t)hp->n_head_kv * (size_t)hp->head_dim;
    kvv_status st;
    if ((st = dequant_opt(m, w, T->attn_norm, &L->attn_norm, err)))
        return st;
    if (T->wqkv) {
        /* phi3: rows [0,Q) = q, [Q,Q+K) = k, [Q+K, Q+K+V) = v */
        const float *qkv;
        if ((st = dequant_opt(m, w, T->wqkv, &qkv, err)))
            return st;
        L->wq = qkv;
        L->wk = qkv + Q * E;
        L->wv = qkv + (Q + K) * E;
    } else if ((st = dequant_opt(m, w, T->wq, &L->wq, err)) ||
               (st = dequant_opt(m, w, T->wk, &L->wk, err)) ||
               (st = dequant_opt(m, w, T->wv, &L->wv, err))) {
        return st;
    }
    if ((st = dequant_opt(m, w, T->bq, &L->bq, err)) ||
        (st = dequant_opt(m, w, T->bk, &L->bk, err)) ||
        (st = dequant_opt(m, w, T->bv, &L->bv, err)) ||
        (st = dequant_opt(m, w, T->q_norm, &L->q_norm, err)) ||
        (st = dequant_opt(m, w, T->k_norm, &L->k_norm, err)) ||
        (st = dequant_opt(m, w, T->wo, &L->wo, err)) ||
        (st = dequant_opt(m, w, T->post_attn_norm, &L->post_attn_norm, err)) ||
        (st = dequant_opt(m, w, T->ffn_norm, &L->ffn_norm, err)) ||
        (st = dequant_opt(m, w, T->w_down, &L->w_down, err)) ||
        (st = dequant_opt(m, w, T->post_ffw_norm, &L->post_ffw_norm, err)))
        return st;
    if (hp->fused_gate_up) {
        /* phi3: ffn_up rows [0,F) = gate, [F,2F) = up */
        const float *gu;
        if ((st = dequant_opt(m, w, T->w_up, &gu, err)))
            return st;
        L->w_gate = gu;
        L->w_up = gu ? gu + F * E : NULL;
    } else if ((st = dequant_opt(m, w, T->w_gate, &L->w_gate, err)) ||
               (st = dequant_opt(m, w, T->w_up, &L->w_up, err))) {
        return st;
    }
    if (!L->attn_norm || !L->wq || !L->wk || !L->wv || !L->wo || !L->ffn_norm || !L->w_gate ||
        !L->w_up || !L->w_down)
        return kvv_error_set(err, KVV_ERR_INTERNAL, "%s: layer %d: a required tensor is unbound",
                             m->gguf->path, il);
    return KVV_OK;
}

static kvv_status load_weights(kvv_ref *r, kvv_error *err)
{
    const kvv_model *m = r->model;
    ref_weights *w = &r->w;
    /* At most 16 tensors per layer plus 3 globals. */
    w->owned = calloc((size_t)m->hp.n_layer * 16 + 3, sizeof *w->owned);
    w->layers = calloc((size_t)m->hp.n_layer, sizeof *w->layers);
    if (!w->owned || !w->layers)
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", m->gguf->path);
    kvv_status st;
    float *embd, *onorm;
    if ((st = dequant(m, w, m->tok_embd, &embd, err)) ||
        (st = dequant(m, w, m->output_norm, &onorm, err)))
        return st;
    w->tok_embd = embd;
    w->output_norm = onorm;
    if (m->output == m->tok_embd || !m->output) {
        w->output = embd; /* tied: the same fp32 matrix */
    } else {
        float *out;
        if ((st = dequant(m, w, m->output, &out, err)))
            return st;
        w->output = out;
    }
    if (r->opts.control & KVV_CTL_PERTURB_WEIGHT) {
        /* Negative control: flip the lowest mantissa bit of output_norm[0]. */
        uint32_t u;
        memcpy(&u, &onorm[0], sizeof u);
        u ^= 1u;
        memcpy(&onorm[0], &u, sizeof u);
    }
    for (int il = 0; il < m->hp.n_layer; il++)
        if ((st = load_layer(m, w, il, err)))
            return st;
    return KVV_OK;
}

/* ------------------------------------------------------------ open / close */

kvv_status kvv_ref_open(const kvv_model *m, const kvv_ref_opts *o, kvv_ref **out, kvv_error *err)
{
    *out = NULL;
    kvv_ref_opts opts = o ? *o : kvv_ref_opts_default();
    if (!m)
        return kvv_error_set(err, KVV_ERR_USAGE, "reference engine: no model");
    if ((unsigned)opts.cache_type > KVV_CACHE_BF16)
        return kvv_error_set(err, KVV_ERR_USAGE, "reference engine: unknown cache type %d",
                             (int)opts.cache_type);
    if (opts.ggml & ~(unsigned)(KVV_GGML_GELU_FP16 | KVV_GGML_ACT_QUANT))
        return kvv_error_set(err, KVV_ERR_USAGE, "reference engine: unknown ggml emulation flags 0x%x",
                             opts.ggml);
    if (opts.n_ctx < 0 || opts.n_ctx > REF_MAX_CTX)
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "reference engine: n_ctx %d is outside 0..%d", opts.n_ctx,
                             REF_MAX_CTX);
    opts.n_ctx = kvv_ref_resolve_ctx(m, opts.n_ctx);
    kvv_mem_plan plan;
    kvv_ref_plan(m, &opts, &plan);
    kvv_status st = kvv_mem_plan_check(&plan, err);
    if (st)
        return st;

    kvv_ref *r = calloc(1, sizeof *r);
    if (!r)
        return kvv_error_set(err, KVV_ERR_NOMEM, "reference engine: out of memory");
    r->model = m;
    r->hp = m->hp;
    r->opts = opts;
    st = load_weights(r, err);
    if (st) {
        kvv_ref_close(r);
        return st;
    }
    const kvv_hparams *hp = &r->hp;
    r->cache = kvv_kv_cache_new(opts.cache_type, hp->n_layer, opts.n_ctx, hp->n_head_kv,
                                hp->head_dim, hp->head_dim_v);
    if (!r->cache) {
        kvv_ref_close(r);
        return kvv_error_set(err, KVV_ERR_NOMEM,
                             "%s: out of memory for a %d-position KV cache", m->gguf->path,
                             opts.n_ctx);
    }
    r->rope_cs = malloc((size_t)hp->n_rot * sizeof(float));
    if (!r->rope_cs) {
        kvv_ref_close(r);
        return kvv_error_set(err, KVV_ERR_NOMEM, "reference engine: out of memory");
    }
    /* ggml: theta_scale = powf(freq_base, -2.0f / n_dims). */
    r->theta_scale[0] = kvv_powf(hp->rope_base, -2.0f / (float)hp->n_rot);
    r->theta_scale[1] = kvv_powf(hp->rope_base_swa, -2.0f / (float)hp->n_rot);
    *out = r;
    return KVV_OK;
}

void kvv_ref_close(kvv_ref *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->w.n_owned; i++)
        free(r->w.owned[i]);
    free(r->w.owned);
    free(r->w.layers);
    kvv_kv_cache_free(r->cache);
    free(r->rope_cs);
    free(r);
}

kvv_kv_cache *kvv_ref_cache(kvv_ref *r)
{
    return r ? r->cache : NULL;
}
