/*
 * cpu_engine.c — open/close of the cpu engine, weight preparation and the
 * engine vtable. See cpu_engine.h for the overview.
 */
#include "engine/cpu/cpu_engine.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_impl.h"
#include "model/tensor_types.h"

kvv_cpu_opts kvv_cpu_opts_default(void)
{
    kvv_cpu_opts o = {.isa = NULL, .dequant_all = 0, .f32_act = 0};
    return o;
}

/* Register m (may be NULL) to be freed at close. @return m, or NULL (and m
 * freed) on OOM. */
static void *adopt(kvv_cpu *c, void *m)
{
    if (!m)
        return NULL;
    if (c->n_owned == c->cap_owned) {
        int cap = c->cap_owned ? 2 * c->cap_owned : 64;
        void **p = realloc(c->owned, (size_t)cap * sizeof *p);
        if (!p) {
            free(m);
            return NULL;
        }
        c->owned = p;
        c->cap_owned = cap;
    }
    c->owned[c->n_owned++] = m;
    return m;
}

static void *own(kvv_cpu *c, size_t bytes)
{
    return adopt(c, malloc(bytes ? bytes : 1));
}

/* A 1-D tensor (norm weights, biases) as an owned float array. */
static kvv_status load_vec(kvv_cpu *c, const kvv_gguf_tensor *t, const float **out,
                           kvv_error *err)
{
    *out = NULL;
    if (!t)
        return KVV_OK;
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    float *v = own(c, (size_t)n * sizeof(float));
    if (!v)
        return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory");
    if (t->type == KVV_TYPE_F32)
        memcpy(v, t->data, (size_t)n * sizeof(float));
    else if (!kvv_dequantize_row(t->type, t->data, v, n))
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                             "cpu engine: tensor %s: type %s cannot be dequantized", t->name,
                             kvv_type_name(t->type));
    *out = v;
    return KVV_OK;
}

/* Re-lay the Q8_0 matrix w out in the KVV_CPU_X4 layout (cpu_impl.h) in
 * owned memory. @return false on OOM. */
static bool relayout_x4(kvv_cpu *c, kvv_cpu_weight *w)
{
    uint8_t *d = own(c, (size_t)w->rows * w->row_bytes);
    if (!d)
        return false;
    const int nb = w->cols / 32;
    for (int r = 0; r < w->rows; r++)
        for (int b = 0; b < nb; b++)
            memcpy(d + (size_t)(r / 4) * 4 * w->row_bytes + ((size_t)b * 4 + (size_t)(r % 4)) * 34,
                   w->data + (size_t)r * w->row_bytes + (size_t)b * 34, 34);
    w->data = d;
    w->x4 = true;
    return true;
}

/* Invariant mode, a Q8_0 matrix of whole groups of 4 rows, a kernel table
 * with the X4 GEMV: worth the copy (docs/cpu-engine.md). */
static bool want_x4(const kvv_cpu *c, const kvv_cpu_weight *w)
{
    return c->mode == KVV_MODE_INVARIANT && w->type == KVV_TYPE_Q8_0 && c->k->gemv_q8_0_x4 &&
           w->rows % 4 == 0;
}

/* Q5_0 always, and Q4_0 in invariant mode, are re-encoded as Q8_0 at open
 * (kvv_widen_to_q8_0: the same dequantized values), so they run on the Q8_0
 * kernels: 1.06 bytes per weight read in decode instead of the 4 of a
 * widened F32 copy. Fast mode keeps Q4_0 as it is: its integer kernel
 * reads 0.56 bytes per weight. */
static bool want_q8_0(const kvv_cpu *c, const kvv_gguf_tensor *t)
{
    return !c->copts.dequant_all &&
           (t->type == KVV_TYPE_Q5_0 || (t->type == KVV_TYPE_Q4_0 && c->mode == KVV_MODE_INVARIANT));
}

/* The widened copy is kept, or (X4 wanted) re-laid out and dropped. */
static bool widen_q8_0(kvv_cpu *c, const kvv_gguf_tensor *t, kvv_cpu_weight *w, bool split4)
{
    w->type = KVV_TYPE_Q8_0;
    w->row_bytes = kvv_type_row_size(KVV_TYPE_Q8_0, w->cols);
    uint8_t *d = malloc((size_t)w->rows * w->row_bytes + 1);
    if (!d)
        return false;
    size_t src_row = kvv_type_row_size(t->type, w->cols);
    for (int r = 0; r < w->rows; r++)
        kvv_widen_to_q8_0(t->type, t->data + (size_t)r * src_row, d + (size_t)r * w->row_bytes,
                          w->cols);
    w->data = d;
    if (split4 && want_x4(c, w)) {
        bool ok = relayout_x4(c, w);
        free(d);
        return ok;
    }
    return adopt(c, d) != NULL;
}

/* A weight matrix. split4: the rows are later split (fused QKV, gate|up)
 * at boundaries that are all multiples of 4, so the X4 layout may be used. */
static kvv_status load_mat(kvv_cpu *c, const kvv_gguf_tensor *t, kvv_cpu_weight *w, bool split4,
                           kvv_error *err)
{
    memset(w, 0, sizeof *w);
    if (!t)
        return KVV_OK;
    w->rows = (int)(t->ne[1] * t->ne[2] * t->ne[3]);
    w->cols = (int)t->ne[0];
    bool keep = t->type == KVV_TYPE_F32 ||
                (!c->copts.dequant_all && (t->type == KVV_TYPE_Q8_0 || t->type == KVV_TYPE_Q4_0));
    if (want_q8_0(c, t)) {
        if (!widen_q8_0(c, t, w, split4))
            return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory for tensor %s",
                                 t->name);
        return KVV_OK;
    }
    if (keep && !(t->type == KVV_TYPE_F32 && ((uintptr_t)t->data % sizeof(float)) != 0)) {
        w->type = t->type;
        w->data = t->data;
        w->row_bytes = kvv_type_row_size(t->type, w->cols);
        if (split4 && want_x4(c, w) && !relayout_x4(c, w))
            return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory for tensor %s",
                                 t->name);
        return KVV_OK;
    }
    size_t src_row = kvv_type_row_size(t->type, w->cols);
    float *d = own(c, (size_t)w->rows * (size_t)w->cols * sizeof(float));
    if (!d)
        return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory for tensor %s",
                             t->name);
    for (int r = 0; r < w->rows; r++)
        if (src_row == 0 ||
            !kvv_dequantize_row(t->type, t->data + (size_t)r * src_row, d + (size_t)r * w->cols,
                                w->cols))
            return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                                 "cpu engine: tensor %s: type %s cannot be dequantized", t->name,
                                 kvv_type_name(t->type));
    w->type = KVV_TYPE_F32;
    w->data = (const uint8_t *)d;
    w->row_bytes = (size_t)w->cols * sizeof(float);
    return KVV_OK;
}

static kvv_status load_weights(kvv_cpu *c, kvv_error *err)
{
    const kvv_model *m = c->m;
    const kvv_hparams *hp = c->hp;
    kvv_status st;
    c->layers = own(c, (size_t)hp->n_layer * sizeof *c->layers);
    if (!c->layers)
        return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory");
    memset(c->layers, 0, (size_t)hp->n_layer * sizeof *c->layers);
    int qr = hp->n_head * hp->head_dim, kr = hp->n_head_kv * hp->head_dim;
    int vr = hp->n_head_kv * hp->head_dim_v;
    for (int l = 0; l < hp->n_layer; l++) {
        const kvv_layer_tensors *T = &m->layers[l];
        kvv_cpu_layer *L = &c->layers[l];
        if ((st = load_vec(c, T->attn_norm, &L->attn_norm, err)) ||
            (st = load_vec(c, T->post_attn_norm, &L->post_attn_norm, err)) ||
            (st = load_vec(c, T->ffn_norm, &L->ffn_norm, err)) ||
            (st = load_vec(c, T->post_ffw_norm, &L->post_ffw_norm, err)) ||
            (st = load_vec(c, T->q_norm, &L->q_norm, err)) ||
            (st = load_vec(c, T->k_norm, &L->k_norm, err)) ||
            (st = load_vec(c, T->bq, &L->bq, err)) || (st = load_vec(c, T->bk, &L->bk, err)) ||
            (st = load_vec(c, T->bv, &L->bv, err)))
            return st;
        if (T->wqkv) {
            kvv_cpu_weight all;
            if ((st = load_mat(c, T->wqkv, &all, qr % 4 == 0 && kr % 4 == 0, err)))
                return st;
            L->wq = kvv_cpu_weight_rows(&all, 0, qr);
            L->wk = kvv_cpu_weight_rows(&all, qr, kr);
            L->wv = kvv_cpu_weight_rows(&all, qr + kr, vr);
        } else if ((st = load_mat(c, T->wq, &L->wq, true, err)) ||
                   (st = load_mat(c, T->wk, &L->wk, true, err)) ||
                   (st = load_mat(c, T->wv, &L->wv, true, err))) {
            return st;
        }
        if ((st = load_mat(c, T->wo, &L->wo, true, err)) ||
            (st = load_mat(c, T->w_down, &L->wd, true, err)))
            return st;
        if (hp->fused_gate_up || !T->w_gate) {
            kvv_cpu_weight all;
            if ((st = load_mat(c, T->w_up, &all, hp->n_ff % 4 == 0, err)))
                return st;
            L->wg = kvv_cpu_weight_rows(&all, 0, hp->n_ff);
            L->wu = kvv_cpu_weight_rows(&all, hp->n_ff, hp->n_ff);
        } else if ((st = load_mat(c, T->w_gate, &L->wg, true, err)) ||
                   (st = load_mat(c, T->w_up, &L->wu, true, err))) {
            return st;
        }
    }
    if ((st = load_vec(c, m->output_norm, &c->output_norm, err)) ||
        (st = load_mat(c, m->tok_embd, &c->tok_embd, false, err)))
        return st;
    if (m->output && m->output != m->tok_embd) {
        if ((st = load_mat(c, m->output, &c->output, true, err)))
            return st;
    } else {
        /* tied: the embedding keeps the file's layout (rows are looked up
         * one by one); the output gets its own X4 copy when that pays */
        c->output = c->tok_embd;
        if (want_x4(c, &c->output) && !relayout_x4(c, &c->output))
            return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory");
    }
    if (c->control & KVV_CTL_PERTURB_WEIGHT) {
        /* The lowest mantissa bit, as the reference. When the output product
         * rounds its activations to Q8_0 (fast mode), a 1-ulp change of one
         * input is below that resolution and would vanish, so the control
         * flips the lowest exponent bit (x2 or /2) instead. */
        float *w0 = (float *)c->output_norm;
        uint32_t b;
        memcpy(&b, w0, 4);
        b ^= c->q8_act && c->output.type != KVV_TYPE_F32 ? 1u << 23 : 1u;
        memcpy(w0, &b, 4);
    }
    return KVV_OK;
}

static int max_cols(const kvv_cpu *c)
{
    int mc = c->hp->n_embd;
    for (int l = 0; l < c->hp->n_layer; l++) {
        const kvv_cpu_layer *L = &c->layers[l];
        if (L->wo.cols > mc)
            mc = L->wo.cols;
        if (L->wd.cols > mc)
            mc = L->wd.cols;
    }
    return mc;
}

static void cpu_close(kvv_engine *e)
{
    if (!e)
        return;
    kvv_cpu *c = e->impl;
    if (c) {
        kvv_cpu_pool_free(c->pool);
        kvv_kv_cache_free(c->cache);
        for (int i = 0; i < c->n_owned; i++)
            free(c->owned[i]);
        free(c->owned);
        if (c->rope_cos[1] != c->rope_cos[0]) {
            free(c->rope_cos[1]);
            free(c->rope_sin[1]);
        }
        free(c->rope_cos[0]);
        free(c->rope_sin[0]);
        free(c->x); free(c->xn); free(c->q); free(c->kk); free(c->vv);
        free(c->o); free(c->g); free(c->u); free(c->y); free(c->qx); free(c->dx); free(c->probs);
        free(c->key_pos); free(c->key_idx);
        if (c->ts)
            for (int i = 0; i < c->n_threads; i++) {
                free(c->ts[i].scores);
                free(c->ts[i].row);
                free(c->ts[i].tile);
                free(c->ts[i].qs);
                free(c->ts[i].krows);
            }
        free(c->ts);
        free(c);
    }
    free(e);
}

static kvv_kv_cache *cpu_cache(kvv_engine *e)
{
    return ((kvv_cpu *)e->impl)->cache;
}

static void cpu_describe(kvv_engine *e, kvv_engine_desc *d)
{
    const kvv_cpu *c = e->impl;
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "cpu");
    snprintf(d->mode, sizeof d->mode, "%s", kvv_mode_name(c->mode));
    snprintf(d->cache_type, sizeof d->cache_type, "%s", kvv_cache_type_name(c->cache_type));
    d->n_threads = c->n_threads;
    d->control = c->control;
    snprintf(d->kernels, sizeof d->kernels, "%s", c->kernels);
}

static const kvv_engine_vtable cpu_vtable = {
    .close = cpu_close,
    .forward = kvv_cpu_forward,
    .kv_from_residual = kvv_cpu_kv_from_residual,
    .cache = cpu_cache,
    .describe = cpu_describe,
};

kvv_status kvv_cpu_engine_open(const kvv_model *m, const kvv_engine_opts *o, kvv_engine **out,
                               kvv_error *err)
{
    kvv_cpu_opts co = kvv_cpu_opts_default();
    return kvv_cpu_engine_open_ex(m, o, &co, out, err);
}

kvv_status kvv_cpu_engine_open_ex(const kvv_model *m, const kvv_engine_opts *o,
                                  const kvv_cpu_opts *co, kvv_engine **out, kvv_error *err)
{
    *out = NULL;
    const kvv_hparams *hp = &m->hp;
    if (o->n_threads < 0 || o->n_threads > 256)
        return kvv_error_set(err, KVV_ERR_USAGE, "cpu engine: --threads %d outside 1..256",
                             o->n_threads);
    if (o->n_ctx < 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "cpu engine: n_ctx %d is negative", o->n_ctx);
    const kvv_cpu_kernels *k = kvv_cpu_kernels_select(co->isa);
    if (!k)
        return kvv_error_set(err, KVV_ERR_USAGE, "cpu engine: this CPU lacks the ISA '%s'",
                             co->isa);
    kvv_engine *e = calloc(1, sizeof *e);
    kvv_cpu *c = calloc(1, sizeof *c);
    if (!e || !c) {
        free(e);
        free(c);
        return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory");
    }
    e->vt = &cpu_vtable;
    e->model = m;
    e->opts = *o;
    e->impl = c;
    c->m = m;
    c->hp = hp;
    c->mode = o->mode == KVV_MODE_FAST ? KVV_MODE_FAST : KVV_MODE_INVARIANT;
    e->opts.mode = c->mode;
    c->control = o->control;
    c->cache_type = o->cache_type;
    c->k = k;
    c->copts = *co;
    c->q8_act = c->mode == KVV_MODE_FAST && !co->f32_act;
    c->n_threads = o->n_threads > 0 ? o->n_threads : 1;
    e->opts.n_threads = c->n_threads;
    c->n_ctx = o->n_ctx;
    if (c->n_ctx == 0)
        c->n_ctx = hp->n_ctx_train > 0 && hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    e->opts.n_ctx = c->n_ctx;

    kvv_status st = load_weights(c, err);
    if (st) {
        cpu_close(e);
        return st;
    }
    c->cache = kvv_kv_cache_new(c->cache_type, hp->n_layer, c->n_ctx, hp->n_head_kv,
                                hp->head_dim, hp->head_dim_v);
    c->pool = kvv_cpu_pool_new(c->n_threads);
    c->ts = calloc((size_t)c->n_threads, sizeof *c->ts);
    if (!c->cache || !c->pool || !c->ts || !kvv_cpu_rope_init(c)) {
        cpu_close(e);
        return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory (n_ctx %d)",
                             c->n_ctx);
    }
    c->key_pos = malloc((size_t)c->n_ctx * sizeof(int32_t));
    c->key_idx = malloc((size_t)c->n_ctx * sizeof(int32_t));
    if (!c->key_pos || !c->key_idx) {
        cpu_close(e);
        return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory");
    }
    int mc = max_cols(c);
    size_t tile = (size_t)mc * 4 > KVV_CPU_TILE_FLOATS ? (size_t)mc * 4 : KVV_CPU_TILE_FLOATS;
    int rowmax = hp->head_dim > hp->head_dim_v ? hp->head_dim : hp->head_dim_v;
    for (int i = 0; i < c->n_threads; i++) {
        size_t grp = (size_t)(hp->n_head / hp->n_head_kv);
        c->ts[i].scores = malloc(grp * (size_t)c->n_ctx * sizeof(float));
        c->ts[i].krows = malloc((size_t)c->n_ctx * (size_t)rowmax * sizeof(float));
        c->ts[i].row = malloc((size_t)rowmax * sizeof(float));
        c->ts[i].tile = malloc(tile * sizeof(float));
        c->ts[i].qs = malloc(grp * (size_t)hp->head_dim * sizeof(float));
        if (!c->ts[i].scores || !c->ts[i].row || !c->ts[i].tile || !c->ts[i].qs ||
            !c->ts[i].krows) {
            cpu_close(e);
            return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory");
        }
    }
    /* Our pool owns the parallelism: each thread's sgemm runs single-threaded. */
    if (c->mode == KVV_MODE_FAST)
        openblas_set_num_threads(1);
    if (c->mode == KVV_MODE_FAST)
        snprintf(c->kernels, sizeof c->kernels,
                 "gemm=openblas-sgemm(n>=%d) gemv=%s attn=%s q8_0=%s q4_0=%s",
                 KVV_CPU_SGEMM_MIN_TOKENS, k->name, k->name,
                 co->dequant_all ? "f32" : c->q8_act ? "int8(act q8_0)" : "fused",
                 co->dequant_all ? "f32" : c->q8_act ? "int8(act q8_0)" : "tile");
    else
        snprintf(c->kernels, sizeof c->kernels,
                 "gemm=%s-invariant(%d lanes) gemv=%s attn=%s q8_0=%s q4_0=%s", k->name,
                 k->lanes, k->name, k->name,
                 co->dequant_all ? "f32" : k->gemv_q8_0_x4 ? "fused-x4" : "fused",
                 co->dequant_all ? "f32" : "tile");
    *out = e;
    return KVV_OK;
}
