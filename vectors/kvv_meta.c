/* kvv_meta.c — see kvv_meta.h. */
#include "vectors/kvv_meta.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kvv_meta_init(kvv_meta *m)
{
    memset(m, 0, sizeof *m);
    m->logits_full = true;
    m->patch = true;
}

void kvv_meta_free(kvv_meta *m)
{
    if (!m)
        return;
    free(m->prompt_text);
    m->prompt_text = NULL;
}

/* ============================================================ writer */

kvv_status kvv_meta_to_json(const kvv_meta *m, char **out, kvv_error *err)
{
    *out = NULL;
    json_t *model = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i}",
                              "file", m->model_file, "sha256", m->model_sha256, "arch", m->arch,
                              "n_layer", m->n_layer, "n_embd", m->n_embd, "n_vocab", m->n_vocab,
                              "kv_dim_k", m->kv_dim_k, "kv_dim_v", m->kv_dim_v,
                              "head_dim_k", m->head_dim_k, "head_dim_v", m->head_dim_v);
    json_t *engine = json_pack("{s:s, s:s, s:s}", "name", m->engine, "mode", m->mode,
                               "cache_type", m->cache_type);
    if (engine && m->engine_version[0]) { /* a plugin: what it reported */
        json_object_set_new(engine, "version", json_string(m->engine_version));
        json_object_set_new(engine, "device", json_string(m->device));
        json_object_set_new(engine, "variant", json_string(m->variant));
        json_object_set_new(engine, "flash_attn", json_string(m->flash_attn));
        json_object_set_new(engine, "n_ubatch", json_integer(m->n_ubatch));
    }
    if (engine && m->isa[0]) /* the cpu engine's kernel table */
        json_object_set_new(engine, "isa", json_string(m->isa));
    json_t *options = json_pack("{s:i, s:b, s:s, s:b}", "n_gen", m->n_gen, "full", m->full,
                                "logits", m->logits_full ? "full" : "hash", "patch", m->patch);
    json_t *prompt = json_pack("{s:s, s:i}", "source", m->prompt_source, "n_tokens", m->n_prompt);
    if (prompt && m->prompt_text)
        json_object_set_new(prompt, "text", json_string(m->prompt_text));
    json_t *root = NULL;
    if (model && engine && options && prompt)
        root = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:I}", "format", KVV_META_FORMAT,
                         "kvverify_version", m->kvverify_version, "model", model, "engine", engine,
                         "options", options, "prompt", prompt, "seed", (json_int_t)m->seed);
    else {
        json_decref(model);
        json_decref(engine);
        json_decref(options);
        json_decref(prompt);
    }
    char *s = root ? json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(root);
    if (!s)
        return kvv_error_set(err, KVV_ERR_NOMEM, "meta: cannot build JSON (out of memory or bad text)");
    *out = s;
    return KVV_OK;
}

/* ============================================================ reader */

typedef struct {
    const kvv_file *f;
    const kvv_record *r;
    kvv_error *err;
    bool failed;
} ctx;

static void bad(ctx *c, const char *field, const char *why)
{
    if (c->failed)
        return;
    c->failed = true;
    kvv_error_set(c->err, KVV_ERR_FORMAT, "%s: record meta at byte %llu: field %s: %s", c->f->path,
                  (unsigned long long)c->r->offset, field, why);
}

static json_t *get(ctx *c, json_t *obj, const char *path, const char *key, int type)
{
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v) {
        bad(c, path, "missing");
        return NULL;
    }
    if ((int)json_typeof(v) != type && !(type == JSON_TRUE && json_is_boolean(v))) {
        bad(c, path, "wrong JSON type");
        return NULL;
    }
    return v;
}

static void str(ctx *c, json_t *obj, const char *path, const char *key, char *dst, size_t cap)
{
    json_t *v = get(c, obj, path, key, JSON_STRING);
    if (!v)
        return;
    size_t n = json_string_length(v);
    if (n >= cap || strlen(json_string_value(v)) != n) {
        bad(c, path, "too long or contains NUL");
        return;
    }
    memcpy(dst, json_string_value(v), n + 1);
}

static int num(ctx *c, json_t *obj, const char *path, const char *key, long lo, long hi)
{
    json_t *v = get(c, obj, path, key, JSON_INTEGER);
    if (!v)
        return 0;
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        bad(c, path, "out of range");
        return 0;
    }
    return (int)x;
}

static bool flag(ctx *c, json_t *obj, const char *path, const char *key)
{
    json_t *v = get(c, obj, path, key, JSON_TRUE);
    return v && json_is_true(v);
}

static bool one_of(const char *s, const char *const *set)
{
    for (; *set; set++)
        if (strcmp(s, *set) == 0)
            return true;
    return false;
}

kvv_status kvv_meta_parse(const kvv_file *f, kvv_meta *m, kvv_error *err)
{
    kvv_meta_init(m);
    ctx c = {f, &f->records[0], err, false};
    if (strcmp(c.r->name, "meta") != 0 || c.r->type != KVV_REC_JSON) {
        bad(&c, "(record)", "the first record is not the json meta record");
        return KVV_ERR_FORMAT;
    }
    json_error_t je;
    json_t *root = json_loadb((const char *)c.r->data, c.r->raw_size, JSON_REJECT_DUPLICATES, &je);
    if (!root || !json_is_object(root)) {
        char why[256];
        snprintf(why, sizeof why, "not a JSON object (%s, at character %d)",
                 root ? "wrong type" : je.text, root ? 0 : je.position);
        bad(&c, "(json)", why);
        json_decref(root);
        return KVV_ERR_FORMAT;
    }
    char fmt[16] = "";
    str(&c, root, "format", "format", fmt, sizeof fmt);
    if (!c.failed && strcmp(fmt, KVV_META_FORMAT) != 0)
        bad(&c, "format", "unknown metadata format (this kvverify reads \"" KVV_META_FORMAT "\")");
    str(&c, root, "kvverify_version", "kvverify_version", m->kvverify_version,
        sizeof m->kvverify_version);

    json_t *mo = get(&c, root, "model", "model", JSON_OBJECT);
    str(&c, mo, "model.file", "file", m->model_file, sizeof m->model_file);
    str(&c, mo, "model.sha256", "sha256", m->model_sha256, sizeof m->model_sha256);
    if (!c.failed && (strlen(m->model_sha256) != 64 ||
                      strspn(m->model_sha256, "0123456789abcdef") != 64))
        bad(&c, "model.sha256", "not 64 lower-case hex digits");
    str(&c, mo, "model.arch", "arch", m->arch, sizeof m->arch);
    m->n_layer = num(&c, mo, "model.n_layer", "n_layer", 1, 4096);
    m->n_embd = num(&c, mo, "model.n_embd", "n_embd", 1, 1 << 20);
    m->n_vocab = num(&c, mo, "model.n_vocab", "n_vocab", 1, 1 << 24);
    m->kv_dim_k = num(&c, mo, "model.kv_dim_k", "kv_dim_k", 1, 1 << 20);
    m->kv_dim_v = num(&c, mo, "model.kv_dim_v", "kv_dim_v", 1, 1 << 20);
    m->head_dim_k = num(&c, mo, "model.head_dim_k", "head_dim_k", 1, 1 << 16);
    m->head_dim_v = num(&c, mo, "model.head_dim_v", "head_dim_v", 1, 1 << 16);

    json_t *en = get(&c, root, "engine", "engine", JSON_OBJECT);
    str(&c, en, "engine.name", "name", m->engine, sizeof m->engine);
    str(&c, en, "engine.mode", "mode", m->mode, sizeof m->mode);
    str(&c, en, "engine.cache_type", "cache_type", m->cache_type, sizeof m->cache_type);
    if (!c.failed && en && json_object_get(en, "version")) { /* a plugin's (optional) */
        str(&c, en, "engine.version", "version", m->engine_version, sizeof m->engine_version);
        str(&c, en, "engine.device", "device", m->device, sizeof m->device);
        str(&c, en, "engine.variant", "variant", m->variant, sizeof m->variant);
        str(&c, en, "engine.flash_attn", "flash_attn", m->flash_attn, sizeof m->flash_attn);
        m->n_ubatch = num(&c, en, "engine.n_ubatch", "n_ubatch", 0, 1 << 30);
    }
    if (!c.failed && en && json_object_get(en, "isa")) { /* the cpu engine's (optional) */
        static const char *const isas[] = {"generic", "avx2", "avx512", NULL};
        str(&c, en, "engine.isa", "isa", m->isa, sizeof m->isa);
        if (!c.failed && !one_of(m->isa, isas))
            bad(&c, "engine.isa", "not generic, avx2 or avx512");
    }
    static const char *const modes[] = {"exact", "fast", "invariant", "native", NULL};
    static const char *const caches[] = {"f32", "f16", "bf16", NULL};
    if (!c.failed && !one_of(m->mode, modes))
        bad(&c, "engine.mode", "not exact, fast, invariant or native");
    if (!c.failed && !one_of(m->cache_type, caches))
        bad(&c, "engine.cache_type", "not f32, f16 or bf16");

    json_t *op = get(&c, root, "options", "options", JSON_OBJECT);
    m->n_gen = num(&c, op, "options.n_gen", "n_gen", 1, 1 << 20);
    m->full = flag(&c, op, "options.full", "full");
    m->patch = flag(&c, op, "options.patch", "patch");
    char lg[8] = "";
    str(&c, op, "options.logits", "logits", lg, sizeof lg);
    if (!c.failed && strcmp(lg, "full") != 0 && strcmp(lg, "hash") != 0)
        bad(&c, "options.logits", "not \"full\" or \"hash\"");
    m->logits_full = strcmp(lg, "full") == 0;

    json_t *pr = get(&c, root, "prompt", "prompt", JSON_OBJECT);
    str(&c, pr, "prompt.source", "source", m->prompt_source, sizeof m->prompt_source);
    static const char *const sources[] = {"text", "tokens", "random", NULL};
    if (!c.failed && !one_of(m->prompt_source, sources))
        bad(&c, "prompt.source", "not text, tokens or random");
    m->n_prompt = num(&c, pr, "prompt.n_tokens", "n_tokens", 1, 1 << 20);
    json_t *tx = pr ? json_object_get(pr, "text") : NULL;
    if (!c.failed && tx) {
        if (!json_is_string(tx))
            bad(&c, "prompt.text", "wrong JSON type");
        else if (!(m->prompt_text = strdup(json_string_value(tx))))
            bad(&c, "prompt.text", "out of memory");
    }
    json_t *sd = get(&c, root, "seed", "seed", JSON_INTEGER);
    if (sd) {
        json_int_t s = json_integer_value(sd);
        if (s < 0 || (unsigned long long)s > KVV_META_MAX_SEED)
            bad(&c, "seed", "outside 0..2^53-1");
        else
            m->seed = (uint64_t)s;
    }
    json_decref(root);
    if (c.failed) {
        kvv_meta_free(m);
        return KVV_ERR_FORMAT;
    }
    return KVV_OK;
}
