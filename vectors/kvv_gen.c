/* kvv_gen.c — kvverify vectors gen: model identity, meta, records, write.
 * See kvv_vectors.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "vectors/kvv_meta.h"
#include "vectors/kvv_vectors_impl.h"

kvv_vectors_opts kvv_vectors_opts_default(void)
{
    kvv_vectors_opts o;
    memset(&o, 0, sizeof o);
    o.engine = kvv_engine_opts_default();
    o.prompt_source = "tokens";
    o.n_gen = 8;
    o.logits_full = true;
    o.patch = true;
    o.perturb_layer = -1;
    o.perturb_pos = -1;
    return o;
}

/* Meta fields that describe the model. */
static void meta_model(kvv_meta *mt, const kvv_model *m, const char *path, const char *sha)
{
    const kvv_hparams *hp = &m->hp;
    const char *base = strrchr(path, '/');
    snprintf(mt->model_file, sizeof mt->model_file, "%s", base ? base + 1 : path);
    snprintf(mt->model_sha256, sizeof mt->model_sha256, "%s", sha);
    snprintf(mt->arch, sizeof mt->arch, "%s", hp->arch_name ? hp->arch_name : kvv_arch_name(hp->arch));
    mt->n_layer = hp->n_layer;
    mt->n_embd = hp->n_embd;
    mt->n_vocab = hp->n_vocab;
    mt->kv_dim_k = hp->n_head_kv * hp->head_dim;
    mt->kv_dim_v = hp->n_head_kv * hp->head_dim_v;
    mt->head_dim_k = hp->head_dim;
    mt->head_dim_v = hp->head_dim_v;
}

kvv_status kvv_vectors_gen(const char *model_path, const kvv_vectors_opts *o,
                           const char *out_path, kvv_error *err)
{
    if (o->seed > KVV_META_MAX_SEED)
        return kvv_error_set(err, KVV_ERR_USAGE, "seed %llu is above 2^53-1",
                             (unsigned long long)o->seed);
    if (o->engine.control != 0 || o->perturb_layer >= 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "a golden vector cannot be made with a negative "
                             "control switched on");
    char sha[65];
    kvv_status st = kvv_sha256_file(model_path, sha, err);
    if (st)
        return st;
    kvv_model *m = NULL;
    if ((st = kvv_model_open(model_path, &m, err)))
        return st;
    kvv_vset set;
    kvv_engine_desc d;
    memset(&d, 0, sizeof d);
    st = kvv_vectors_compute(m, o, &set, &d, err);
    if (st) {
        kvv_model_close(m);
        return st;
    }
    kvv_meta mt;
    kvv_meta_init(&mt);
    snprintf(mt.kvverify_version, sizeof mt.kvverify_version, "%s",
             o->kvverify_version ? o->kvverify_version : "unknown");
    meta_model(&mt, m, model_path, sha);
    snprintf(mt.engine, sizeof mt.engine, "%s", d.name);
    snprintf(mt.mode, sizeof mt.mode, "%s", d.mode);
    snprintf(mt.cache_type, sizeof mt.cache_type, "%s", d.cache_type);
    snprintf(mt.engine_version, sizeof mt.engine_version, "%s", d.version);
    snprintf(mt.device, sizeof mt.device, "%s", d.device);
    snprintf(mt.variant, sizeof mt.variant, "%s", d.variant);
    snprintf(mt.flash_attn, sizeof mt.flash_attn, "%s", d.flash_attn);
    mt.n_ubatch = d.n_ubatch;
    snprintf(mt.isa, sizeof mt.isa, "%s", d.isa); /* "" but for the cpu engine */
    mt.n_gen = o->n_gen;
    mt.full = o->full;
    mt.logits_full = o->logits_full;
    mt.patch = o->patch;
    mt.seed = o->seed;
    snprintf(mt.prompt_source, sizeof mt.prompt_source, "%s", o->prompt_source ? o->prompt_source : "tokens");
    mt.prompt_text = o->prompt_text ? strdup(o->prompt_text) : NULL;
    mt.n_prompt = o->n_tokens;
    kvv_model_close(m);

    char *json = NULL;
    kvv_file_writer *w = kvv_file_writer_new();
    if (!w)
        st = kvv_error_set(err, KVV_ERR_NOMEM, "out of memory");
    if (!st)
        st = kvv_meta_to_json(&mt, &json, err);
    if (!st)
        st = kvv_file_writer_add(w, "meta", KVV_REC_JSON, 0, NULL, json, strlen(json), err);
    for (int i = 0; !st && i < set.n; i++) {
        const kvv_vrec *r = &set.recs[i];
        st = kvv_file_writer_add(w, r->name, r->type, r->n_dims, r->dims, r->data, r->size, err);
    }
    if (!st)
        st = kvv_file_writer_write(w, out_path, err);
    free(json);
    kvv_file_writer_free(w);
    kvv_meta_free(&mt);
    kvv_vset_free(&set);
    return st;
}
