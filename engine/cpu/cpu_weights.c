/*
 * cpu_weights.c — how the cpu engine holds each weight matrix (chosen at
 * open, docs/cpu-engine.md "Weights"):
 *   F32                  the mapped file, in place;
 *   Q8_0                 the mapped file (the X16 products in invariant
 *                        mode pack 16 rows per call: x16_fly); a Q8_0
 *                        matrix outside X16 in invariant mode (split off a
 *                        multiple of 4, not 16): a copy in the X4 layout;
 *   Q4_0, Q5_0; in fast mode also Q8_0, Q4_1, Q5_1 and (AVX-512) Q4_K:
 *                        a copy in the 16-row X16 layout (cpu_x16.h, the
 *                        file's size) for its integer products; not the
 *                        embedding (its rows are looked up), nor a fused
 *                        matrix split off a multiple of 16, nor a
 *                        Q4_0/Q5_0/Q8_0 output head (want_x16);
 *   otherwise Q4_0       fast: the mapped file; invariant: as Q5_0;
 *   otherwise Q5_0       re-encoded as Q8_0 (kvv_widen_to_q8_0, same values);
 *   Q2_K..Q6_K (and otherwise Q4_1, Q5_1)  the mapped file, in its own
 *                        blocks: the integer products of cpu_kquant.h read
 *                        them as they are;
 *   anything else        dequantized to F32.
 * Every form dequantizes to exactly the values of kvv_dequantize_row, so the
 * choice changes speed and memory, never a result in invariant mode. A
 * copy's source pages are dropped from the resident set once copied
 * (kvv_gguf_drop_pages): the process then holds the copy, not both. After
 * the load every page between the weights read in place goes too
 * (drop_unread), and a tied head's copy also serves the embedding's
 * lookups, so the file's rows are not faulted back beside it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_impl.h"
#include "model/tensor_types.h"
#include "runtime/mem_limit.h"

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
 * owned memory. The map's pages are dropped every 1024 rows as they are
 * copied, so a large head (an embedding-sized matrix) is not held twice
 * while it is copied. @return false on OOM. */
static bool relayout_x4(kvv_cpu *c, kvv_cpu_weight *w)
{
    uint8_t *d = own(c, (size_t)w->rows * w->row_bytes);
    if (!d)
        return false;
    const int nb = w->cols / 32;
    for (int r = 0; r < w->rows; r++) {
        for (int b = 0; b < nb; b++)
            memcpy(d + (size_t)(r / 4) * 4 * w->row_bytes + ((size_t)b * 4 + (size_t)(r % 4)) * 34,
                   w->data + (size_t)r * w->row_bytes + (size_t)b * 34, 34);
        if ((r + 1) % 1024 == 0)
            kvv_gguf_drop_pages(c->m->gguf, w->data, (uint64_t)(r + 1) * w->row_bytes);
    }
    kvv_gguf_drop_pages(c->m->gguf, w->data, (uint64_t)w->rows * w->row_bytes);
    w->data = d;
    w->x4 = true;
    return true;
}

enum {
    LOAD_SPLIT4 = 1, /* the rows are later split (fused QKV, gate|up) at
                      * multiples of 4, so the X4 layout may be used */
    LOAD_LOOKUP = 2, /* rows are looked up one by one (the embedding): the
                      * file's row layout or F32, no X4 */
    LOAD_SPLIT16 = 4, /* ... and at multiples of 16 (X16) */
    LOAD_WHOLE = LOAD_SPLIT4 | LOAD_SPLIT16, /* one matrix, never split */
    LOAD_HEAD = 8, /* the output head: Q4_0/Q5_0 keep fp32 activations here
                    * (their 8-bit rounding moves logits by whole quanta, which
                    * compare's logit tolerance does not allow; cpu_x16.h) */
};

/* Invariant mode, a Q8_0 matrix of whole groups of 4 rows, a kernel table
 * with the X4 GEMV: worth the copy (docs/cpu-engine.md). Heads take it
 * when widened from Q4_0/Q5_0 (it replaces the widened copy) or with
 * c->repack (a copy beside the file). */
static bool want_x4(const kvv_cpu *c, const kvv_cpu_weight *w)
{
    return c->mode == KVV_MODE_INVARIANT && w->type == KVV_TYPE_Q8_0 && c->k->gemv_q8_0_x4 &&
           w->rows % 4 == 0;
}

/* Which matrices take the X16 layout (a copy of the file's size, rows
 * padded to 16): below. Not with --f32-act or --dequant-all. */
static bool want_x16(const kvv_cpu *c, const kvv_gguf_tensor *t, unsigned flags);

/* Q5_0 always, and Q4_0 in invariant mode, are re-encoded as Q8_0 at open
 * (kvv_widen_to_q8_0: the same dequantized values), so they run on the Q8_0
 * kernels: 1.06 bytes per weight read in decode instead of the 4 of a
 * widened F32 copy. Fast mode keeps Q4_0 as it is: its integer kernel
 * reads 0.56 bytes per weight. */
static bool want_q8_0(const kvv_cpu *c, const kvv_gguf_tensor *t, unsigned flags)
{
    /* a looked-up embedding keeps the file's rows (kvv_dequantize_row) */
    return !c->copts.dequant_all && !want_x16(c, t, flags) && !(flags & LOAD_LOOKUP) &&
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
    kvv_gguf_drop_pages(c->m->gguf, t->data, (uint64_t)w->rows * src_row);
    w->data = d;
    if (split4 && want_x4(c, w)) {
        bool ok = relayout_x4(c, w);
        free(d);
        return ok;
    }
    return adopt(c, d) != NULL;
}

/* Re-lay the Q4_0/Q5_0/Q4_1/Q5_1 matrix w out in the X16 layout in owned memory. @return
 * false on OOM. */
static bool relayout_x16(kvv_cpu *c, kvv_cpu_weight *w)
{
    const kvv_x16 x = (kvv_x16)kvv_cpu_x16_of((kvv_type)w->type);
    uint8_t *d = own(c, kvv_cpu_x16_bytes(x, w->rows, w->cols));
    if (!d)
        return false;
    kvv_cpu_x16_pack(x, w->cols, w->data, w->row_bytes, w->rows, d);
    kvv_gguf_drop_pages(c->m->gguf, w->data, (uint64_t)w->rows * w->row_bytes);
    w->data = d;
    w->x16 = true;
    return true;
}


static bool want_x16(const kvv_cpu *c, const kvv_gguf_tensor *t, unsigned flags)
{
    const int x = kvv_cpu_x16_of((kvv_type)t->type);
    if (x < 0 || !(flags & LOAD_SPLIT16) || !c->k->gemm_x16[x])
        return false;
    if (x == KVV_X16_Q8_0) /* the layers; the head keeps fp32 activations */
        return (c->mode == KVV_MODE_FAST ? c->q8_act : c->kq_act) && !(flags & LOAD_HEAD);
    /* Q4_1/Q5_1/Q4_K: the bits of the file-block kernels, so only fast mode
     * and invariant mode with c->repack pay for the copy; otherwise
     * invariant mode (the checks', which hold the reference's mapping
     * beside it) reads the mapped blocks */
    if (x == KVV_X16_Q4_K || kvv_cpu_x16_has_min((kvv_x16)x)) /* Q4_K: heads too */
        return c->kq_act && (c->mode == KVV_MODE_FAST || c->repack);
    /* Q4_0/Q5_0: X16 (Q8_0 activations) in both modes, the head excepted;
     * invariant mode otherwise widens them to Q8_0, a larger copy */
    return c->kq_act && !(flags & LOAD_HEAD);
}

/* Invariant mode's X16 Q8_0 without c->repack: no copy; batches pack 16
 * rows per call and one token reads the file's rows (rows_x16), the bits
 * of the copy. The checks keep the reference's mapping beside the engine
 * and the audit several engines, and a copy each would hold the file once
 * per engine. */
static bool want_x16_fly(const kvv_cpu *c, const kvv_gguf_tensor *t)
{
    const int x = kvv_cpu_x16_of((kvv_type)t->type);
    return c->mode == KVV_MODE_INVARIANT && !c->repack && x == KVV_X16_Q8_0 &&
           c->k->rows_x16[x];
}

/* Does a matrix take X4 (want_x4 also holding)? Heads only with c->repack. */
static bool x4_allowed(const kvv_cpu *c, unsigned flags)
{
    return (flags & LOAD_SPLIT4) && (!(flags & LOAD_HEAD) || c->repack);
}

/* want_x4 of tensor t (Q8_0 or widened to it) before it is loaded. */
static bool x4_planned(const kvv_cpu *c, const kvv_gguf_tensor *t, unsigned flags)
{
    return x4_allowed(c, flags) && c->mode == KVV_MODE_INVARIANT && c->k->gemv_q8_0_x4 &&
           (t->ne[1] * t->ne[2] * t->ne[3]) % 4 == 0;
}

/* Is t held as the file stores it (or as its X16 copy) rather than
 * dequantized to F32? Row lookups keep Q5_0 too (kvv_dequantize_row). */
static bool keeps(const kvv_cpu *c, const kvv_gguf_tensor *t, unsigned flags)
{
    const kvv_type y = (kvv_type)t->type;
    return y == KVV_TYPE_F32 || want_x16(c, t, flags) ||
           (!c->copts.dequant_all &&
            (y == KVV_TYPE_Q8_0 || y == KVV_TYPE_Q4_0 || kvv_cpu_kq_of(y) >= 0 ||
             ((flags & LOAD_LOOKUP) && y == KVV_TYPE_Q5_0)));
}

/* A tied output head gets its own form, not the looked-up embedding's:
 * X16, Q8_0 widened from Q4_0/Q5_0, or (c->repack) an X4 copy. */
static bool tied_head_own(const kvv_cpu *c, const kvv_gguf_tensor *t)
{
    const unsigned f = LOAD_WHOLE | LOAD_HEAD;
    return want_x16(c, t, f) || want_q8_0(c, t, f) ||
           (c->repack && keeps(c, t, f) && t->type == KVV_TYPE_Q8_0 && x4_planned(c, t, f));
}

/* A weight matrix in the form the header lists. */
static kvv_status load_mat(kvv_cpu *c, const kvv_gguf_tensor *t, kvv_cpu_weight *w,
                           unsigned flags, kvv_error *err)
{
    memset(w, 0, sizeof *w);
    w->kq = -1;
    if (!t)
        return KVV_OK;
    const bool split4 = (flags & LOAD_SPLIT4) != 0; /* widened: X4 replaces the copy */
    w->rows = (int)(t->ne[1] * t->ne[2] * t->ne[3]);
    w->cols = (int)t->ne[0];
    const int kq = kvv_cpu_kq_of((kvv_type)t->type);
    const bool keep = keeps(c, t, flags);
    if (!(flags & (LOAD_LOOKUP | LOAD_HEAD)) && want_x16(c, t, flags | LOAD_SPLIT16) &&
        !want_x16(c, t, flags)) /* split off a multiple of 16 */
        c->x16_outside |= 1u << kvv_cpu_x16_of((kvv_type)t->type);
    if (want_q8_0(c, t, flags)) {
        if (!widen_q8_0(c, t, w, split4))
            return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory for tensor %s",
                                 t->name);
        return KVV_OK;
    }
    if (keep && !(t->type == KVV_TYPE_F32 && ((uintptr_t)t->data % sizeof(float)) != 0)) {
        w->type = t->type;
        w->kq = kq;
        w->data = t->data;
        w->row_bytes = kvv_type_row_size(t->type, w->cols);
        const bool x16 = want_x16(c, t, flags);
        if (x16 && want_x16_fly(c, t))
            w->x16_fly = true;
        else if ((!x16 && x4_allowed(c, flags) && want_x4(c, w) && !relayout_x4(c, w)) ||
                 (x16 && !relayout_x16(c, w)))
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
    kvv_gguf_drop_pages(c->m->gguf, t->data, (uint64_t)w->rows * src_row);
    w->type = KVV_TYPE_F32;
    w->data = (const uint8_t *)d;
    w->row_bytes = (size_t)w->cols * sizeof(float);
    return KVV_OK;
}

/* The bytes load_mat allocates for t with these flags: the same choices in
 * the same order (widened Q8_0; kept in place — K-quants in the file's
 * blocks — X16, or X4; an F32 copy). */
static uint64_t mat_plan(const kvv_cpu *c, const kvv_gguf_tensor *t, unsigned flags)
{
    const uint64_t cols = (uint64_t)t->ne[0];
    const uint64_t rows = kvv_mem_mul(kvv_mem_mul((uint64_t)t->ne[1], (uint64_t)t->ne[2]),
                                      (uint64_t)t->ne[3]);
    const bool x4 = x4_planned(c, t, flags);
    if (want_q8_0(c, t, flags))
        return kvv_mem_mul(rows, kvv_type_row_size(KVV_TYPE_Q8_0, (int64_t)cols));
    const bool keep = keeps(c, t, flags);
    if (keep && !(t->type == KVV_TYPE_F32 && ((uintptr_t)t->data % sizeof(float)) != 0)) {
        if (want_x16(c, t, flags) && want_x16_fly(c, t))
            return 0;
        if (want_x16(c, t, flags))
            return kvv_cpu_x16_bytes((kvv_x16)kvv_cpu_x16_of((kvv_type)t->type), (int)rows,
                                     (int)cols);
        return x4 && t->type == KVV_TYPE_Q8_0 ? t->nbytes : 0;
    }
    return kvv_mem_mul(kvv_mem_mul(rows, cols), sizeof(float));
}

/* The flags of a fused matrix split at rows a and a + b. */
static unsigned split_flags(int a, int b)
{
    return (a % 4 == 0 && b % 4 == 0 ? LOAD_SPLIT4 : 0) |
           (a % 16 == 0 && b % 16 == 0 ? LOAD_SPLIT16 : 0);
}

uint64_t kvv_cpu_weights_plan(const kvv_cpu *c)
{
    const kvv_model *m = c->m;
    uint64_t b = kvv_mem_mul((uint64_t)c->hp->n_layer, sizeof *c->layers);
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const kvv_gguf_tensor *t = &m->gguf->tensors[i];
        uint64_t n = 0;
        if (t == m->tok_embd) {
            n = mat_plan(c, t, LOAD_LOOKUP);
            if ((m->output == m->tok_embd || !m->output) && tied_head_own(c, t))
                /* tied: the output's own form */
                n = kvv_mem_add(n, mat_plan(c, t, LOAD_WHOLE | LOAD_HEAD));
        } else if (t->n_dims >= 2 && t->ne[1] > 1) {
            n = mat_plan(c, t, LOAD_WHOLE);
        } else if (strcmp(t->name, "rope_freqs.weight") != 0) {
            n = kvv_mem_mul((uint64_t)t->ne[0], sizeof(float)); /* load_vec */
        }
        b = kvv_mem_add(b, n);
    }
    return b;
}

/* A byte range of the map that a weight reads in place. */
typedef struct {
    const uint8_t *lo, *hi;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Whether p points into the mapped file (not into a copy). */
static bool mapped(const kvv_cpu *c, const uint8_t *p)
{
    const kvv_gguf *g = c->m->gguf;
    return p >= g->base && p < g->base + g->size;
}

static void add_span(const kvv_cpu *c, const kvv_cpu_weight *w, span *s, int *n)
{
    if (w->data && mapped(c, w->data)) {
        s[*n].lo = w->data;
        s[*n].hi = w->data + (size_t)w->rows * w->row_bytes;
        (*n)++;
    }
}

/* After every weight is held: drop the data section's pages that no weight
 * reads in place, i.e. every whole page between two in-place weights. Each
 * copy dropped its own whole pages as it went (keeping the load's peak at
 * one tensor); this takes the pages it shared with a neighbour that was
 * copied too, the pages of the vectors load_vec copied, and the padding.
 * smollm2-135m "Q4_K_M": 800 KB (docs/cpu-engine.md, "Weights"). Anything
 * else that reads the map later only faults its pages back in. */
static void drop_unread(kvv_cpu *c)
{
    const kvv_gguf *g = c->m->gguf;
    const kvv_hparams *hp = c->hp;
    span *s = malloc(((size_t)hp->n_layer * 7 + 2) * sizeof *s);
    if (!s)
        return; /* advice only */
    int n = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        const kvv_cpu_layer *L = &c->layers[l];
        const kvv_cpu_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wg, &L->wu, &L->wd};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            add_span(c, ws[i], s, &n);
    }
    add_span(c, &c->tok_embd, s, &n);
    add_span(c, &c->output, s, &n);
    qsort(s, (size_t)n, sizeof *s, span_cmp);
    const uint8_t *from = g->base + g->data_offset; /* the header: kvv_gguf_open */
    for (int i = 0; i <= n; i++) {
        const uint8_t *to = i < n ? s[i].lo : g->base + g->size;
        if (to > from)
            kvv_gguf_drop_pages(g, from, (uint64_t)(to - from));
        if (i < n && s[i].hi > from)
            from = s[i].hi;
    }
    free(s);
}

kvv_status kvv_cpu_load_weights(kvv_cpu *c, kvv_error *err)
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
            if ((st = load_mat(c, T->wqkv, &all, split_flags(qr, kr), err)))
                return st;
            L->wq = kvv_cpu_weight_rows(&all, 0, qr);
            L->wk = kvv_cpu_weight_rows(&all, qr, kr);
            L->wv = kvv_cpu_weight_rows(&all, qr + kr, vr);
        } else if ((st = load_mat(c, T->wq, &L->wq, LOAD_WHOLE, err)) ||
                   (st = load_mat(c, T->wk, &L->wk, LOAD_WHOLE, err)) ||
                   (st = load_mat(c, T->wv, &L->wv, LOAD_WHOLE, err))) {
            return st;
        }
        if ((st = load_mat(c, T->wo, &L->wo, LOAD_WHOLE, err)) ||
            (st = load_mat(c, T->w_down, &L->wd, LOAD_WHOLE, err)))
            return st;
        if (hp->fused_gate_up || !T->w_gate) {
            kvv_cpu_weight all;
            if ((st = load_mat(c, T->w_up, &all, split_flags(hp->n_ff, hp->n_ff), err)))
                return st;
            L->wg = kvv_cpu_weight_rows(&all, 0, hp->n_ff);
            L->wu = kvv_cpu_weight_rows(&all, hp->n_ff, hp->n_ff);
        } else if ((st = load_mat(c, T->w_gate, &L->wg, LOAD_WHOLE, err)) ||
                   (st = load_mat(c, T->w_up, &L->wu, LOAD_WHOLE, err))) {
            return st;
        }
    }
    if ((st = load_vec(c, m->output_norm, &c->output_norm, err)) ||
        (st = load_mat(c, m->tok_embd, &c->tok_embd, LOAD_LOOKUP, err)))
        return st;
    if (m->output && m->output != m->tok_embd) {
        if ((st = load_mat(c, m->output, &c->output, LOAD_WHOLE | LOAD_HEAD, err)))
            return st;
    } else if (tied_head_own(c, m->tok_embd)) {
        /* tied: the embedding keeps the file's layout or F32 (rows are
         * looked up one by one); the output shares it unless its product
         * wants its own form (without c->repack no Q8_0 head is copied:
         * in the checks a copy comes on top of the reference's mapping) */
        if ((st = load_mat(c, m->tok_embd, &c->output, LOAD_WHOLE | LOAD_HEAD, err)))
            return st;
        /* the copy has the same values row for row, so the lookups read it
         * too and the file's rows are not held beside it: each lookup
         * faulted in a 64 KB window of the map, 2.5 MB of smollm2-135m's
         * for a 40-token bench (drop_unread) */
        if (c->output.data && !mapped(c, c->output.data))
            c->tok_embd = c->output;
    } else {
        c->output = c->tok_embd;
    }
    drop_unread(c);
    if (c->control & KVV_CTL_PERTURB_WEIGHT) {
        /* The lowest mantissa bit, as the reference. When the output product
         * rounds its activations (Q8_0 in fast mode, Q8_K / Q8_1), a 1-ulp
         * change of one input is below that resolution and would vanish, so
         * the control flips the lowest exponent bit (x2 or /2) instead. */
        float *w0 = (float *)c->output_norm;
        uint32_t b;
        memcpy(&b, w0, 4);
        b ^= kvv_cpu_rounds_act(c, &c->output) ? 1u << 23 : 1u;
        memcpy(w0, &b, 4);
    }
    return KVV_OK;
}

