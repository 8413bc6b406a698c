/*
 * ref_plan.c — what the reference engine allocates at open, added up before
 * it allocates (runtime/mem_limit.h): norm and bias vectors dequantized to
 * fp32 (matrices stay in the file's mapping, dequantized a row at a time),
 * one row of scratch and the KV cache (the n_rot floats of RoPE angles are
 * not counted). Keep in step with ref_engine.c's load_weights and
 * kvv_ref_open (tests/engine/test_mem_plan.c measures both).
 */
#include <string.h>

#include "reference/ref_internal.h"

int kvv_ref_resolve_ctx(const kvv_model *m, int n_ctx)
{
    if (n_ctx == 0)
        n_ctx = m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    return n_ctx <= 0 ? 4096 : n_ctx;
}

void kvv_ref_plan(const kvv_model *m, const kvv_ref_opts *o, kvv_mem_plan *p)
{
    const kvv_hparams *hp = &m->hp;
    const int n_ctx = kvv_ref_resolve_ctx(m, o ? o->n_ctx : 0);
    const kvv_cache_type ct = o ? o->cache_type : KVV_CACHE_F32;
    /* Vectors (norms, biases) are dequantized once; matrices are borrowed
     * from the mapping and read through one row of scratch as wide as the
     * widest matrix (rope_freqs is the model's own fp32 copy). */
    uint64_t vectors = 0, max_cols = 1;
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const kvv_gguf_tensor *t = &m->gguf->tensors[i];
        if (strcmp(t->name, "rope_freqs.weight") == 0)
            continue;
        uint64_t rows = kvv_mem_mul(kvv_mem_mul((uint64_t)t->ne[1], (uint64_t)t->ne[2]),
                                    (uint64_t)t->ne[3]);
        if (rows <= 1)
            vectors = kvv_mem_add(vectors, kvv_mem_mul((uint64_t)t->ne[0], sizeof(float)));
        else if ((uint64_t)t->ne[0] > max_cols)
            max_cols = (uint64_t)t->ne[0];
    }
    *p = kvv_mem_plan_new("reference engine");
    kvv_mem_plan_add(p, vectors, "norm and bias vectors as fp32");
    kvv_mem_plan_add(p, kvv_mem_mul(max_cols, sizeof(float)), "one dequantized weight row");
    kvv_mem_plan_add(p, kvv_kv_cache_bytes(ct, hp->n_layer, n_ctx, hp->n_head_kv, hp->head_dim,
                                           hp->head_dim_v),
                     "KV cache of %d positions (%s)", n_ctx, kvv_cache_type_name(ct));
}
