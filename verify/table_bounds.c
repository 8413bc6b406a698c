/* table_bounds.c — the cross-table bound per tensor type (see table_bounds.h). */
#include "verify/table_bounds.h"

#include <stdio.h>

#include "model/tensor_types.h"
#include "verify/compare.h"

/* The products with 8-bit activations in invariant mode (table_bounds.h). */
static bool quantum_layer(kvv_type t)
{
    switch (t) {
    case KVV_TYPE_Q8_0: case KVV_TYPE_Q4_0: case KVV_TYPE_Q5_0: case KVV_TYPE_Q4_1:
    case KVV_TYPE_Q5_1: case KVV_TYPE_Q2_K: case KVV_TYPE_Q3_K: case KVV_TYPE_Q4_K:
    case KVV_TYPE_Q5_K: case KVV_TYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

static bool quantum_head(kvv_type t)
{
    return quantum_layer(t) && t != KVV_TYPE_Q8_0 && t != KVV_TYPE_Q4_0 && t != KVV_TYPE_Q5_0;
}

/* 2·n·γ_K, γ_K = K·u / (1 − K·u), u = 2^-24. */
static double order_bound(int n, int K)
{
    const double u = 0x1p-24, ku = (double)K * u;
    return 2.0 * n * ku / (1.0 - ku);
}

static int max_i(int a, int b)
{
    return a > b ? a : b;
}

void kvv_table_bounds(const kvv_model *m, int n_pos, kvv_cache_type ct, kvv_table_bound *layers,
                      kvv_table_bound *head)
{
    const kvv_hparams *hp = &m->hp;
    *layers = (kvv_table_bound){.kind = KVV_BOUND_ORDER, .type = KVV_TYPE_F32};
    *head = *layers;
    bool found_q = false, found_o = false;
    for (int l = 0; l < hp->n_layer && !found_q; l++) {
        const kvv_layer_tensors *L = &m->layers[l];
        const kvv_gguf_tensor *w[] = {L->wq, L->wk, L->wv, L->wqkv, L->wo, L->w_gate, L->w_up,
                                      L->w_down};
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
            if (!w[i])
                continue;
            if (quantum_layer(w[i]->type) && !found_q) {
                found_q = true;
                layers->kind = KVV_BOUND_QUANTUM;
                layers->type = w[i]->type;
            } else if (!found_o && !found_q) {
                found_o = true;
                layers->type = w[i]->type;
            }
        }
    }
    if (!found_q && ct != KVV_CACHE_F32) { /* the cache's rounding at store may flip */
        layers->kind = KVV_BOUND_QUANTUM;
        layers->type = ct == KVV_CACHE_F16 ? KVV_TYPE_F16 : KVV_TYPE_BF16;
        layers->cache = true;
    }
    layers->K = max_i(max_i(hp->n_embd, hp->n_ff), max_i(hp->n_head * hp->head_dim_v, n_pos));
    layers->n = 9 + (hp->has_qk_norm ? 1 : 0) + (hp->has_post_norms ? 2 : 0);
    layers->bound = layers->kind == KVV_BOUND_QUANTUM ? KVV_COMPARE_LAYER_TOL
                                                      : order_bound(layers->n, layers->K);
    const kvv_gguf_tensor *out = m->output ? m->output : m->tok_embd;
    head->type = out ? out->type : KVV_TYPE_F32;
    head->kind = quantum_head(head->type) ? KVV_BOUND_QUANTUM : KVV_BOUND_ORDER;
    head->K = hp->n_embd;
    head->n = 2;
    head->bound = head->kind == KVV_BOUND_QUANTUM ? KVV_COMPARE_REL_TOL
                                                  : order_bound(head->n, head->K);
}

const char *kvv_table_bound_text(const kvv_table_bound *b, char *buf, size_t size)
{
    if (b->cache)
        snprintf(buf, size, "%s cache: a rounding at store may flip", kvv_type_name(b->type));
    else if (b->kind == KVV_BOUND_QUANTUM)
        snprintf(buf, size, "%s: 8-bit activations, a rounding may flip", kvv_type_name(b->type));
    else
        snprintf(buf, size, "%s: summation order only, 2·%d·γ_K with K %d",
                 kvv_type_name(b->type), b->n, b->K);
    return buf;
}
