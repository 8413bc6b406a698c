/*
 * engine.c — the engine registry and the thin wrappers over the vtable
 * (engine/engine.h). Engines are opened by name from one const table; each
 * engine's open function is declared in engine/engine_impl.h.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/engine_impl.h"

/* ------------------------------------------------------------ registry */

typedef struct {
    const char *name;
    kvv_engine_open_fn open;
    bool ggml;               /* honours kvv_engine_opts.ggml (llama.cpp emulation) */
    bool isa;                /* honours kvv_engine_opts.isa (kernel tables) */
} engine_entry;

/* One line per engine, in the order `--engine` help lists them. */
static const engine_entry engines[] = {
    {"ref", kvv_engine_open_ref, true, false},
    {"cpu", kvv_engine_open_cpu, false, true},
};
#define N_ENGINES (sizeof engines / sizeof engines[0])

static const char *const mode_names[] = {"exact", "fast", "invariant"};

const char *kvv_mode_name(kvv_mode m)
{
    if ((unsigned)m < sizeof mode_names / sizeof mode_names[0])
        return mode_names[m];
    return "unknown";
}

int kvv_mode_from_name(const char *s, kvv_mode *out)
{
    for (unsigned i = 0; s && i < sizeof mode_names / sizeof mode_names[0]; i++)
        if (strcmp(s, mode_names[i]) == 0) {
            *out = (kvv_mode)i;
            return 1;
        }
    return 0;
}

kvv_mode kvv_engine_default_mode(const char *name)
{
    return name && strcmp(name, "ref") == 0 ? KVV_MODE_EXACT : KVV_MODE_INVARIANT;
}

kvv_engine_opts kvv_engine_opts_default(void)
{
    kvv_engine_opts o;
    memset(&o, 0, sizeof o);
    o.name = "ref";
    o.mode = KVV_MODE_EXACT;
    o.n_threads = 1;
    o.cache_type = KVV_CACHE_F32;
    o.n_ctx = 0;
    o.control = 0;
    o.ggml = 0;
    o.isa = NULL;
    return o;
}

void kvv_engine_list(char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_ENGINES && off < size; i++) {
        int w = snprintf(buf + off, size - off, "%s%s", i ? ", " : "", engines[i].name);
        if (w < 0)
            break;
        off += (size_t)w;
    }
}

kvv_status kvv_engine_open(const kvv_model *m, const kvv_engine_opts *o, kvv_engine **out,
                           kvv_error *err)
{
    *out = NULL;
    kvv_engine_opts def = kvv_engine_opts_default();
    if (!o)
        o = &def;
    const char *name = o->name ? o->name : "ref";
    if (!m)
        return kvv_error_set(err, KVV_ERR_USAGE, "engine %s: no model", name);
    if ((unsigned)o->cache_type > KVV_CACHE_BF16)
        return kvv_error_set(err, KVV_ERR_USAGE, "engine %s: unknown cache type %d", name,
                             (int)o->cache_type);
    if (o->n_ctx < 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "engine %s: n_ctx %d is negative", name,
                             o->n_ctx);
    if (o->n_threads < 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "engine %s: n_threads %d is negative", name,
                             o->n_threads);
    for (size_t i = 0; i < N_ENGINES; i++)
        if (strcmp(engines[i].name, name) == 0) {
            if (o->ggml && !engines[i].ggml)
                return kvv_error_set(err, KVV_ERR_USAGE,
                                     "engine %s has no llama.cpp emulation (ggml flags 0x%x)",
                                     name, o->ggml);
            if (o->isa && o->isa[0] && !engines[i].isa)
                return kvv_error_set(err, KVV_ERR_USAGE,
                                     "engine %s has no kernel tables (--isa %s applies to "
                                     "--engine cpu)", name, o->isa);
            kvv_engine_opts copy = *o;
            copy.name = engines[i].name; /* static: outlives the caller's string */
            return engines[i].open(m, &copy, out, err);
        }
    char list[128];
    kvv_engine_list(list, sizeof list);
    return kvv_error_set(err, KVV_ERR_USAGE, "unknown engine '%s' (available: %s)", name, list);
}

void kvv_engine_close(kvv_engine *e)
{
    if (e && e->vt && e->vt->close)
        e->vt->close(e);
}

/* ------------------------------------------------------------ wrappers */

kvv_status kvv_engine_forward(kvv_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                              const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                              kvv_error *err)
{
    if (!e)
        return kvv_error_set(err, KVV_ERR_USAGE, "forward: no engine");
    return e->vt->forward(e, n, tokens, pos, hooks, lm, logits, err);
}

kvv_status kvv_engine_kv_from_residual(kvv_engine *e, int layer, int n, const float *h,
                                       const int32_t *pos, float *k, float *v, kvv_error *err)
{
    if (!e)
        return kvv_error_set(err, KVV_ERR_USAGE, "kv_from_residual: no engine");
    return e->vt->kv_from_residual(e, layer, n, h, pos, k, v, err);
}

kvv_kv_cache *kvv_engine_cache(kvv_engine *e)
{
    return e ? e->vt->cache(e) : NULL;
}

void kvv_engine_describe(kvv_engine *e, kvv_engine_desc *d)
{
    memset(d, 0, sizeof *d);
    if (!e)
        return;
    /* Defaults every engine shares; the engine fills in the rest. */
    snprintf(d->name, sizeof d->name, "%s", e->opts.name ? e->opts.name : "?");
    snprintf(d->mode, sizeof d->mode, "%s", kvv_mode_name(e->opts.mode));
    snprintf(d->cache_type, sizeof d->cache_type, "%s", kvv_cache_type_name(e->opts.cache_type));
    d->n_threads = e->opts.n_threads > 0 ? e->opts.n_threads : 1;
    d->control = e->opts.control;
    e->vt->describe(e, d);
}

void kvv_engine_reset(kvv_engine *e)
{
    kvv_kv_cache *c = kvv_engine_cache(e);
    if (c)
        kvv_kv_cache_clear(c);
}
