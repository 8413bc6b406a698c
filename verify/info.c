/* info.c — `kvverify info`'s file reading and its JSON documents (see
 * info.h; the text is info_text.c's). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_num.h"
#include "verify/info_impl.h"

#define ARRAY_SHOW_JSON 8 /* elements of a long array shown */

kvv_status kvv_info_file_open(const char *path, kvv_info_file *f, kvv_error *err)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    kvv_status st = kvv_gguf_open(path, &f->gguf, err);
    if (st)
        return st;
    f->arch_status = kvv_hparams_read(f->gguf, &f->hp, &f->arch_err);
    if (f->arch_status == KVV_OK && f->gguf->n_tensors > 0) {
        /* on success the model owns the gguf */
        f->bind_status = kvv_model_from_gguf(f->gguf, &f->model, &f->bind_err);
        if (f->bind_status == KVV_OK)
            f->hp = f->model->hp;
    }
    return KVV_OK;
}

void kvv_info_file_close(kvv_info_file *f)
{
    if (f->model)
        kvv_model_close(f->model);
    else
        kvv_gguf_close(f->gguf);
    memset(f, 0, sizeof *f);
}

/* A malloc'ed NUL-terminated copy of s[0..len) that is valid UTF-8: bytes
 * of invalid sequences (and NULs) become '?'. NULL on OOM. */
static char *utf8_clean(const char *s, uint64_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    char *c = malloc((size_t)len + 1);
    if (!c)
        return NULL;
    for (uint64_t i = 0; i < len;) {
        int k = u[i] >= 0x80 ? kvv_info_utf8_len(u + i, len - i) : 1;
        if (k == 0 || u[i] == 0) {
            c[i++] = '?';
            continue;
        }
        memcpy(c + i, u + i, (size_t)k);
        i += (uint64_t)k;
    }
    c[len] = '\0';
    return c;
}

static json_t *jstr(const char *s, uint64_t len)
{
    char *c = utf8_clean(s, len);
    json_t *j = c ? json_stringn(c, (size_t)len) : NULL;
    free(c);
    return j ? j : json_null();
}

/* o[key] = v, with the key made valid UTF-8 */
static void jset(json_t *o, const char *key, json_t *v)
{
    char *c = utf8_clean(key, strlen(key));
    if (c)
        json_object_set_new(o, c, v);
    else
        json_decref(v);
    free(c);
}

static json_t *jscalar(const kvv_gguf_kv *kv)
{
    switch (kv->type) {
    case KVV_GGUF_UINT8: case KVV_GGUF_UINT16: case KVV_GGUF_UINT32: case KVV_GGUF_UINT64:
        if (kv->v.u64 > (uint64_t)INT64_MAX) {
            char b[32];
            snprintf(b, sizeof b, "%llu", (unsigned long long)kv->v.u64);
            return json_string(b);
        }
        return json_integer((json_int_t)kv->v.u64);
    case KVV_GGUF_INT8: case KVV_GGUF_INT16: case KVV_GGUF_INT32: case KVV_GGUF_INT64:
        return json_integer((json_int_t)kv->v.i64);
    case KVV_GGUF_FLOAT32: case KVV_GGUF_FLOAT64:
        return kvv_json_number(kv->v.f64);
    case KVV_GGUF_BOOL:
        return json_boolean(kv->v.u64 != 0);
    case KVV_GGUF_STRING:
        return jstr(kv->v.str.ptr, kv->v.str.len);
    default:
        return json_null();
    }
}

static json_t *jarray_elem(const kvv_gguf_kv *kv, uint64_t i)
{
    if (kv->arr_type == KVV_GGUF_STRING)
        return jstr(kv->arr_str[i].ptr, kv->arr_str[i].len);
    if (kv->arr_type == KVV_GGUF_BOOL)
        return json_boolean(kvv_gguf_arr_i64(kv, i) != 0);
    if (kvv_info_is_int_type(kv->arr_type))
        return json_integer((json_int_t)kvv_gguf_arr_i64(kv, i));
    return kvv_json_number(kvv_gguf_arr_f64(kv, i));
}

static json_t *json_metadata(const kvv_gguf *g)
{
    json_t *o = json_object();
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const kvv_gguf_kv *kv = &g->kv[i];
        if (kv->type == KVV_GGUF_ARRAY) {
            json_t *first = json_array();
            uint64_t n = kv->arr_n < ARRAY_SHOW_JSON ? kv->arr_n : ARRAY_SHOW_JSON;
            for (uint64_t j = 0; j < n; j++)
                json_array_append_new(first, jarray_elem(kv, j));
            jset(o, kv->key,
                                json_pack("{s:s, s:s, s:I, s:o}", "type", "array", "elem_type",
                                          kvv_gguf_type_name(kv->arr_type), "count",
                                          (json_int_t)kv->arr_n, "first", first));
        } else {
            jset(o, kv->key, jscalar(kv));
        }
    }
    return o;
}

static json_t *json_tensors(const kvv_gguf *g, json_t **by_type, uint64_t *total)
{
    json_t *a = json_array();
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kvv_gguf_tensor *t = &g->tensors[i];
        json_t *shape = json_array();
        for (uint32_t d = 0; d < t->n_dims; d++)
            json_array_append_new(shape, json_integer((json_int_t)t->ne[d]));
        json_array_append_new(a, json_pack("{s:o, s:s, s:o, s:I, s:I}", "name",
                                           jstr(t->name, strlen(t->name)), "type",
                                           kvv_type_name(t->type), "shape", shape, "bytes",
                                           (json_int_t)t->nbytes, "offset", (json_int_t)t->offset));
    }
    kvv_info_type_totals tt;
    kvv_info_count_types(g, &tt);
    *by_type = json_object();
    for (int ty = 0; ty < KVV_TYPE_COUNT; ty++)
        if (tt.count[ty])
            json_object_set_new(*by_type, kvv_type_name((uint32_t)ty),
                                json_pack("{s:I, s:I}", "count", (json_int_t)tt.count[ty], "bytes",
                                          (json_int_t)tt.bytes[ty]));
    *total = tt.total;
    return a;
}

static json_t *json_hparams(const kvv_hparams *hp, const float *freqs)
{
    json_t *local = json_array();
    for (int il = 0; il < hp->n_layer && il < KVV_MAX_LAYERS; il++)
        if (hp->swa_layer[il])
            json_array_append_new(local, json_integer(il));
    json_t *f = json_null();
    if (freqs) {
        f = json_array();
        for (int i = 0; i < hp->n_rot / 2; i++)
            json_array_append_new(f, kvv_json_number(freqs[i]));
    }
    json_t *o = json_pack("{s:s, s:b, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "name",
                          hp->arch_name, "supported", 1, "n_layer", hp->n_layer, "n_embd",
                          hp->n_embd, "n_head", hp->n_head, "n_head_kv", hp->n_head_kv, "head_dim",
                          hp->head_dim, "head_dim_v", hp->head_dim_v, "n_ff", hp->n_ff, "n_vocab",
                          hp->n_vocab, "n_ctx_train", hp->n_ctx_train);
    json_object_set_new(o, "rope_type", json_string(hp->rope_type == KVV_ROPE_NORM ? "norm" : "neox"));
    json_object_set_new(o, "n_rot", json_integer(hp->n_rot));
    json_object_set_new(o, "rope_base", kvv_json_number(hp->rope_base));
    json_object_set_new(o, "rope_base_swa", kvv_json_number(hp->rope_base_swa));
    json_object_set_new(o, "rope_freqs", f);
    json_object_set_new(o, "norm_eps", kvv_json_number(hp->norm_eps));
    json_object_set_new(o, "attn_softcap", kvv_json_number(hp->attn_softcap));
    json_object_set_new(o, "final_softcap", kvv_json_number(hp->final_softcap));
    json_object_set_new(o, "query_scale", kvv_json_number(hp->query_scale));
    json_object_set_new(o, "embd_scale", kvv_json_number(hp->embd_scale));
    json_object_set_new(o, "n_swa", json_integer(hp->n_swa));
    json_object_set_new(o, "swa_period", json_integer(hp->swa_period));
    json_object_set_new(o, "swa_layers", local);
    json_object_set_new(o, "activation", json_string(hp->act == KVV_ACT_SILU ? "silu" : "gelu_tanh"));
    json_object_set_new(o, "tied_output", json_boolean(hp->tied_output));
    json_object_set_new(o, "qkv_bias", json_boolean(hp->has_qkv_bias));
    json_object_set_new(o, "qk_norm", json_boolean(hp->has_qk_norm));
    json_object_set_new(o, "post_norms", json_boolean(hp->has_post_norms));
    json_object_set_new(o, "fused_qkv", json_boolean(hp->fused_qkv));
    json_object_set_new(o, "fused_gate_up", json_boolean(hp->fused_gate_up));
    return o;
}

static json_t *json_memory(const kvv_hparams *hp)
{
    kvv_token_memory m;
    kvv_token_memory_of(hp, &m);
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "kv_f32", (json_int_t)m.kv_f32,
                          "kv_f16", (json_int_t)m.kv_f16, "kv_bf16", (json_int_t)m.kv_bf16,
                          "resid_f32", (json_int_t)m.resid_f32, "resid_bf16",
                          (json_int_t)m.resid_bf16, "resid_layers_f32",
                          (json_int_t)m.resid_layers_f32, "resid_layers_bf16",
                          (json_int_t)m.resid_layers_bf16);
    json_object_set_new(o, "kv_over_resid", json_real((double)m.kv_bf16 / (double)m.resid_bf16));
    json_object_set_new(o, "kv_over_resid_layers",
                        json_real((double)m.kv_bf16 / (double)m.resid_layers_bf16));
    return o;
}

json_t *kvv_info_file_json(const kvv_info_file *f)
{
    const kvv_gguf *g = f->gguf;
    json_t *by_type;
    uint64_t total;
    json_t *root = json_pack("{s:o, s:i, s:I, s:i, s:I, s:I, s:I}", "file",
                             jstr(f->path, strlen(f->path)), "version", (int)g->version, "size",
                             (json_int_t)g->size, "alignment", (int)g->alignment, "data_offset",
                             (json_int_t)g->data_offset, "n_kv", (json_int_t)g->n_kv,
                             "n_tensors", (json_int_t)g->n_tensors);
    json_object_set_new(root, "metadata", json_metadata(g));
    json_object_set_new(root, "tensors", json_tensors(g, &by_type, &total));
    json_object_set_new(root, "type_counts", by_type);
    json_object_set_new(root, "tensor_bytes", json_integer((json_int_t)total));
    if (f->arch_status == KVV_OK) {
        json_t *a = json_hparams(&f->hp, f->model ? f->model->hp.rope_freqs : NULL);
        if (f->bind_status != KVV_OK) {
            json_object_set_new(a, "supported", json_boolean(f->bind_status != KVV_ERR_UNSUPPORTED));
            json_object_set_new(a, "error", jstr(f->bind_err.msg, strlen(f->bind_err.msg)));
        }
        json_object_set_new(root, "architecture", a);
        json_object_set_new(root, "token_memory", json_memory(&f->hp));
    } else {
        json_object_set_new(root, "architecture",
                            json_pack("{s:b, s:o}", "supported",
                                      f->arch_status != KVV_ERR_UNSUPPORTED, "error",
                                      jstr(f->arch_err.msg, strlen(f->arch_err.msg))));
    }
    json_object_set_new(root, "vocab_only", json_boolean(g->n_tensors == 0));
    return root;
}

json_t *kvv_info_shape_json(const kvv_shape *s, const kvv_hparams *hp)
{
    json_t *root = json_pack("{s:s, s:s, s:i}", "shape", s->name, "about", s->about,
                             "real_vocab", s->real_vocab);
    json_object_set_new(root, "architecture", json_hparams(hp, NULL));
    json_object_set_new(root, "token_memory", json_memory(hp));
    return root;
}

json_t *kvv_info_cpu_json(const kvv_cpu_isa_info *ci)
{
    json_t *tables = json_array();
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++) {
        int lanes, fused;
        bool built = kvv_cpu_isa_order((kvv_cpu_isa)i, &lanes, &fused);
        json_array_append_new(
            tables, json_pack("{s:s, s:b, s:b, s:b, s:i, s:b, s:s, s:b}", "name",
                              kvv_cpu_isa_name((kvv_cpu_isa)i), "available", ci->can_run[i],
                              "native", ci->native[i], "built", built, "lanes", lanes,
                              "fused", fused, "needs", kvv_cpu_isa_needs((kvv_cpu_isa)i),
                              "chosen", i == (int)ci->best));
    }
    json_t *root = json_pack("{s:s, s:o, s:s, s:s}", "cpu_features", ci->features, "tables",
                             tables, "default", kvv_cpu_isa_name(ci->best), "chosen",
                             kvv_cpu_isa_name(ci->best));
    json_object_set_new(root, "max_isa", ci->max_isa[0] ? json_string(ci->max_isa) : json_null());
    return root;
}
