/*
 * ref_engine.c — the reference engine's lifetime: options, opening (weight
 * matrices bound as the file stores them, in the model's mapping; norm and
 * bias vectors dequantized to fp32), the KV cache, closing.
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

/* Checks that tensor t is rows x cols elements the reference can
 * dequantize and that they fit its data bytes; *row_bytes: bytes of a row. */
static kvv_status check_tensor(const kvv_model *m, const kvv_gguf_tensor *t, int64_t *rows,
                               int64_t *cols, size_t *row_bytes, kvv_error *err)
{
    const kvv_type_traits *tt = kvv_type_traits_of(t->type);
    if (!tt || !tt->can_dequantize)
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                             "%s: tensor %s (info at byte %llu): type %s cannot be dequantized "
                             "by the reference engine",
                             m->gguf->path, t->name, (unsigned long long)t->info_offset,
                             kvv_type_name(t->type));
    *cols = t->ne[0];
    *rows = t->ne[1] * t->ne[2] * t->ne[3];
    *row_bytes = kvv_type_row_size(t->type, *cols);
    if (*row_bytes == 0 || *rows > INT32_MAX || *cols > INT32_MAX ||
        (uint64_t)*row_bytes * (uint64_t)*rows > t->nbytes)
        return kvv_error_set(err, KVV_ERR_FORMAT,
                             "%s: tensor %s (info at byte %llu): %lld x %lld %s elements do not "
                             "fit its %llu data bytes",
                             m->gguf->path, t->name, (unsigned long long)t->info_offset,
                             (long long)*rows, (long long)*cols, kvv_type_name(t->type),
                             (unsigned long long)t->nbytes);
    return KVV_OK;
}

/* Matrix t as the file stores it: a view of the model's mapping, nothing
 * copied (ref_mat_row dequantizes rows as they are used). t NULL: an
 * empty view. */
static kvv_status bind_mat(const kvv_model *m, ref_weights *w, const kvv_gguf_tensor *t,
                           ref_mat *out, kvv_error *err)
{
    memset(out, 0, sizeof *out);
    if (!t)
        return KVV_OK;
    int64_t rows, cols;
    size_t row_bytes;
    kvv_status st = check_tensor(m, t, &rows, &cols, &row_bytes, err);
    if (st)
        return st;
    out->data = t->data;
    out->row_bytes = row_bytes;
    out->type = t->type;
    out->rows = (int)rows;
    out->cols = (int)cols;
    if (out->cols > w->max_cols)
        w->max_cols = out->cols;
    return KVV_OK;
}

/* Rows [row0, row0 + rows) of W (phi3's fused tensors), or an empty view
 * when W has fewer rows. */
static ref_mat mat_rows(const ref_mat *W, int row0, int rows)
{
    ref_mat v = *W;
    if (!W->data || row0 + rows > W->rows) {
        memset(&v, 0, sizeof v);
        return v;
    }
    v.data = W->data + (size_t)row0 * W->row_bytes;
    v.rows = rows;
    return v;
}

/* Vector t (a norm weight or a bias) dequantized into a new fp32 buffer
 * owned by w: small, and read by every token. t NULL: *out NULL. */
static kvv_status load_vec(const kvv_model *m, ref_weights *w, const kvv_gguf_tensor *t,
                           float **out, kvv_error *err)
{
    *out = NULL;
    if (!t)
        return KVV_OK;
    int64_t rows, cols;
    size_t row_bytes;
    kvv_status st = check_tensor(m, t, &rows, &cols, &row_bytes, err);
    if (st)
        return st;
    float *buf = malloc((size_t)rows * (size_t)cols * sizeof(float) + 1);
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

static kvv_status load_vec_const(const kvv_model *m, ref_weights *w, const kvv_gguf_tensor *t,
                                 const float **out, kvv_error *err)
{
    float *p;
    kvv_status st = load_vec(m, w, t, &p, err);
    *out = p;
    return st;
}

static kvv_status load_layer(const kvv_model *m, ref_weights *w, int il, kvv_error *err)
{
    const kvv_hparams *hp = &m->hp;
    const kvv_layer_tensors *T = &m->layers[il];
    ref_layer *L = &w->layers[il];
    const int F = hp->n_ff;
    const int Q = hp->n_head * hp->head_dim, K = hp->n_head_kv * hp->head_dim;
    const int V = hp->n_head_kv * hp->head_dim_v;
    kvv_status st;
    if ((st = load_vec_const(m, w, T->attn_norm, &L->attn_norm, err)))
        return st;
    if (T->wqkv) {
        /* phi3: rows [0,Q) = q, [Q,Q+K) = k, [Q+K, Q+K+V) = v */
        ref_mat qkv;
        if ((st = bind_mat(m, w, T->wqkv, &qkv, err)))
            return st;
        L->wq = mat_rows(&qkv, 0, Q);
        L->wk = mat_rows(&qkv, Q, K);
        L->wv = mat_rows(&qkv, Q + K, V);
    } else if ((st = bind_mat(m, w, T->wq, &L->wq, err)) ||
               (st = bind_mat(m, w, T->wk, &L->wk, err)) ||
               (st = bind_mat(m, w, T->wv, &L->wv, err))) {
        return st;
    }
    if ((st = load_vec_const(m, w, T->bq, &L->bq, err)) ||
        (st = load_vec_const(m, w, T->bk, &L->bk, err)) ||
        (st = load_vec_const(m, w, T->bv, &L->bv, err)) ||
        (st = load_vec_const(m, w, T->q_norm, &L->q_norm, err)) ||
        (st = load_vec_const(m, w, T->k_norm, &L->k_norm, err)) ||
        (st = bind_mat(m, w, T->wo, &L->wo, err)) ||
        (st = load_vec_const(m, w, T->post_attn_norm, &L->post_attn_norm, err)) ||
        (st = load_vec_const(m, w, T->ffn_norm, &L->ffn_norm, err)) ||
        (st = bind_mat(m, w, T->w_down, &L->w_down, err)) ||
        (st = load_vec_const(m, w, T->post_ffw_norm, &L->post_ffw_norm, err)))
        return st;
    if (hp->fused_gate_up) {
        /* phi3: ffn_up rows [0,F) = gate, [F,2F) = up */
        ref_mat gu;
        if ((st = bind_mat(m, w, T->w_up, &gu, err)))
            return st;
        L->w_gate = mat_rows(&gu, 0, F);
        L->w_up = mat_rows(&gu, F, F);
    } else if ((st = bind_mat(m, w, T->w_gate, &L->w_gate, err)) ||
               (st = bind_mat(m, w, T->w_up, &L->w_up, err))) {
        return st;
    }
    if (!L->attn_norm || !L->wq.data || !L->wk.data || !L->wv.data || !L->wo.data ||
        !L->ffn_norm || !L->w_gate.data || !L->w_up.data || !L->w_down.data)
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
    float *onorm;
    if ((st = bind_mat(m, w, m->tok_embd, &w->tok_embd, err)) ||
        (st = load_vec(m, w, m->output_norm, &onorm, err)))
        return st;
    w->output_norm = onorm;
    if (m->output == m->tok_embd || !m->output)
        w->output = w->tok_embd; /* tied: the same stored matrix */
    else if ((st = bind_mat(m, w, m->output, &w->output, err)))
        return st;
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
    if (opts.ggml & ~(unsigned)(KVV_GGML_GELU_FP16 | KVV_GGML_ACT_QUANT | KVV_GGML_KQ_ACT |
                                 KVV_GGML_Q40_ACT | KVV_GGML_Q80_ACT))
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
    r->wrow = malloc((size_t)(r->w.max_cols > 0 ? r->w.max_cols : 1) * sizeof(float));
    if (!r->wrow) {
        kvv_ref_close(r);
        return kvv_error_set(err, KVV_ERR_NOMEM, "reference engine: out of memory");
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
    kvv_kv_seqs_init(&r->seqs, r->cache, opts.n_seq);
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
    free(r->wrow);
    kvv_kv_seqs_free(&r->seqs);
    kvv_kv_cache_free(r->cache);
    free(r->rope_cs);
    free(r);
}

kvv_kv_cache *kvv_ref_cache(kvv_ref *r)
{
    return r ? r->cache : NULL;
}

kvv_kv_seqs *kvv_ref_seqs(kvv_ref *r)
{
    return r ? &r->seqs : NULL;
}
