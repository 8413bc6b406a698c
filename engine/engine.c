/*
 * engine.c — the engine registry and the thin wrappers over the vtable
 * (engine/engine.h). Engines are opened by name from one const table; each
 * engine's open function is declared in engine/engine_impl.h.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/breadcrumb.h"
#include "engine/engine.h"
#include "engine/engine_impl.h"
#include "engine/host_control.h"
#include "engine/plugin/plugin.h"

/* ------------------------------------------------------------ registry */

typedef struct {
    const char *name;
    kvv_engine_open_fn open;
    bool ggml;               /* honours kvv_engine_opts.ggml (llama.cpp emulation) */
    bool isa;                /* honours kvv_engine_opts.isa (kernel tables) */
} engine_entry;

/* One line per engine, in the order `--engine` help lists them. Plugins
 * ("llama.cpp", "plugin:PATH") take engine options and devices; the
 * built-ins take neither. */
static const engine_entry engines[] = {
    {"ref", kvv_engine_open_ref, true, false},
    {"cpu", kvv_engine_open_cpu, false, true},
    {"llama.cpp", kvv_engine_open_llama_cpp, false, false},
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
    o.device = NULL;
    o.n_ubatch = 0;
    o.engine_opts = NULL;
    o.n_engine_opts = 0;
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

static kvv_status unknown_engine(const char *name, kvv_error *err)
{
    char list[128];
    kvv_engine_list(list, sizeof list);
    return kvv_error_set(err, KVV_ERR_USAGE,
                         "unknown engine '%s' (available: %s, " KVV_PLUGIN_PREFIX
                         "PATH.so, or NAME for a plugin NAME.so in $KVV_PLUGIN_DIR or "
                         "plugins/ beside kvverify)",
                         name, list);
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
    if (o->n_ubatch < 0 || o->n_engine_opts < 0 || (o->n_engine_opts > 0 && !o->engine_opts))
        return kvv_error_set(err, KVV_ERR_USAGE, "engine %s: n_ubatch %d or engine options "
                             "(%d) invalid", name, o->n_ubatch, o->n_engine_opts);
    if (strncmp(name, KVV_PLUGIN_PREFIX, strlen(KVV_PLUGIN_PREFIX)) == 0) {
        if (o->ggml)
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "engine %s has no llama.cpp emulation (ggml flags 0x%x)",
                                 name, o->ggml);
        return kvv_engine_open_plugin(m, o, name + strlen(KVV_PLUGIN_PREFIX), NULL, out, err);
    }
    for (size_t i = 0; i < N_ENGINES; i++)
        if (strcmp(engines[i].name, name) == 0) {
            bool plugin = engines[i].open == kvv_engine_open_llama_cpp;
            if (o->ggml && !engines[i].ggml)
                return kvv_error_set(err, KVV_ERR_USAGE,
                                     "engine %s has no llama.cpp emulation (ggml flags 0x%x)",
                                     name, o->ggml);
            if (o->isa && o->isa[0] && !engines[i].isa)
                return kvv_error_set(err, KVV_ERR_USAGE,
                                     "engine %s has no kernel tables (--isa %s applies to "
                                     "--engine cpu)", name, o->isa);
            if (!plugin && o->n_engine_opts > 0)
                return kvv_error_set(err, KVV_ERR_USAGE,
                                     "engine %s takes no engine options (got '%s')", name,
                                     o->engine_opts[0]);
            if (!plugin && o->device && strcmp(o->device, "cpu") != 0)
                return kvv_error_set(err, KVV_ERR_USAGE,
                                     "engine %s runs on the cpu only (asked for device '%s')",
                                     name, o->device);
            kvv_engine_opts copy = *o;
            copy.name = engines[i].name; /* static: outlives the caller's string */
            return engines[i].open(m, &copy, out, err);
        }
    kvv_status s;
    if (!o->ggml && kvv_engine_open_plugin_by_name(m, o, name, out, &s, err))
        return s;
    return unknown_engine(name, err);
}

kvv_status kvv_engine_exists(const char *name, kvv_error *err)
{
    char path[1024];
    if (!name)
        return kvv_error_set(err, KVV_ERR_USAGE, "no engine named");
    if (strncmp(name, KVV_PLUGIN_PREFIX, strlen(KVV_PLUGIN_PREFIX)) == 0) {
        const char *file = name + strlen(KVV_PLUGIN_PREFIX);
        FILE *f = file[0] ? fopen(file, "rb") : NULL;
        if (!f)
            return kvv_error_set(err, KVV_ERR_USAGE, "engine %s: cannot load plugin file '%s': %s",
                                 name, file, file[0] ? strerror(errno) : "empty path");
        fclose(f);
        return KVV_OK;
    }
    for (size_t i = 0; i < N_ENGINES; i++)
        if (strcmp(engines[i].name, name) == 0)
            return engines[i].open == kvv_engine_open_llama_cpp
                       ? kvv_plugin_find(KVV_LLAMA_CPP_PLUGIN, path, sizeof path, err)
                       : KVV_OK;
    if (kvv_plugin_find_by_name(name, path, sizeof path))
        return KVV_OK;
    return unknown_engine(name, err);
}

/* A plugin at path into info (name given, the rest probed). */
static void probe(const char *name, const char *path, kvv_engine_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", name);
    snprintf(info->path, sizeof info->path, "%s", path);
    snprintf(info->modes, sizeof info->modes, "native");
    info->plugin = true;
    kvv_engine_info read;
    memset(&read, 0, sizeof read);
    kvv_error err = {0};
    if (kvv_plugin_probe(path, &read, &err)) {
        snprintf(info->status, sizeof info->status, "%s", err.msg);
        return;
    }
    snprintf(info->version, sizeof info->version, "%s", read.version);
    snprintf(info->devices, sizeof info->devices, "%s", read.devices);
    if (strcmp(read.name, name) != 0) /* reports name it by its table */
        snprintf(info->status, sizeof info->status, "reports name itself '%s'", read.name);
}

int kvv_engine_catalog(kvv_engine_info *out, int max)
{
    int n = 0;
    char path[1024];
    kvv_error err = {0};
    for (size_t i = 0; i < N_ENGINES && n < max; i++) {
        kvv_engine_info *e = &out[n++];
        if (engines[i].open == kvv_engine_open_llama_cpp) {
            if (kvv_plugin_find(KVV_LLAMA_CPP_PLUGIN, path, sizeof path, &err) == KVV_OK) {
                probe(engines[i].name, path, e);
            } else {
                memset(e, 0, sizeof *e);
                snprintf(e->name, sizeof e->name, "%s", engines[i].name);
                e->plugin = true;
                snprintf(e->status, sizeof e->status, "%s", err.msg);
            }
            continue;
        }
        memset(e, 0, sizeof *e);
        snprintf(e->name, sizeof e->name, "%s", engines[i].name);
        snprintf(e->modes, sizeof e->modes, "%s",
                 kvv_engine_default_mode(e->name) == KVV_MODE_EXACT ? "exact"
                                                                     : "fast, invariant");
        snprintf(e->devices, sizeof e->devices, "cpu");
    }
    /* plugins NAME.so in the folders, first folder first, each name once */
    char dirs[4][1024];
    int nd = kvv_plugin_dirs(dirs, 4);
    for (int d = 0; d < nd; d++) {
        DIR *dir = opendir(dirs[d]);
        struct dirent *de;
        while (dir && (de = readdir(dir)) && n < max) {
            size_t len = strlen(de->d_name);
            if (len < 4 || len - 3 > 15 || strcmp(de->d_name + len - 3, ".so") != 0 ||
                strcmp(de->d_name, KVV_LLAMA_CPP_PLUGIN) == 0)
                continue;
            char name[16];
            snprintf(name, sizeof name, "%.*s", (int)(len - 3), de->d_name);
            bool seen = false;
            for (int k = 0; k < n; k++)
                seen |= strcmp(out[k].name, name) == 0;
            if (seen)
                continue;
            snprintf(path, sizeof path, "%.1000s/%s", dirs[d], de->d_name);
            probe(name, path, &out[n++]);
        }
        if (dir)
            closedir(dir);
    }
    return n;
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
    kvv_breadcrumb_enter(KVV_CRUMB_FORWARD); /* what a crash report names (isolation) */
    if (n > 0 && pos)
        kvv_breadcrumb_positions(pos[0], pos[n - 1]);
    if (e->opts.control & (KVV_CTL_HOST_RESIDUAL | KVV_CTL_HOST_REORDER))
        return kvv_host_control_forward(e, n, tokens, pos, hooks, lm, logits, err);
    return e->vt->forward(e, n, tokens, pos, hooks, lm, logits, err);
}

kvv_status kvv_engine_kv_from_residual(kvv_engine *e, int layer, int n, const float *h,
                                       const int32_t *pos, float *k, float *v, kvv_error *err)
{
    if (!e)
        return kvv_error_set(err, KVV_ERR_USAGE, "kv_from_residual: no engine");
    kvv_breadcrumb_enter(KVV_CRUMB_KV_FROM_RESIDUAL);
    kvv_breadcrumb_layer(layer, n > 0 && pos ? pos[0] : -1, n > 0 && pos ? pos[n - 1] : -1);
    kvv_status s = e->vt->kv_from_residual(e, layer, n, h, pos, k, v, err);
    if (s == KVV_OK && (e->opts.control & KVV_CTL_HOST_KV_ULP))
        kvv_host_control_kv(e->opts.cache_type, n, e->model->hp.n_head_kv * e->model->hp.head_dim,
                            k);
    return s;
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
    if (e->opts.control & KVV_CTL_HOST_ALL) { /* say which kvverify-side control is in force */
        char names[64];
        size_t len = strlen(d->kernels);
        snprintf(d->kernels + len, sizeof d->kernels - len, "%scontrol=%s", len ? " " : "",
                 kvv_host_control_names(e->opts.control, names, sizeof names));
    }
}

const char *kvv_engine_control_name(unsigned control, const char *native, char *buf,
                                    size_t size)
{
    static const struct { unsigned flag; const char *text; } host[] = {
        {KVV_CTL_HOST_KV_ULP, "host-kv-ulp (kvverify moves K[t][0] of every recomputed row by "
                              "one ULP of the cache dtype)"},
        {KVV_CTL_HOST_RESIDUAL, "host-residual (kvverify negates the largest element of the "
                                "final residual)"},
        {KVV_CTL_HOST_REORDER, "host-reorder (kvverify swaps the first two distinct tokens)"},
    };
    unsigned c = control;
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        if (c & host[i].flag) {
            snprintf(buf, size, "%s", host[i].text);
            return buf;
        }
    snprintf(buf, size, "%s", native);
    return buf;
}

void kvv_engine_reset(kvv_engine *e)
{
    if (e && e->vt->reset) {
        e->vt->reset(e);
        return;
    }
    kvv_kv_cache *c = kvv_engine_cache(e);
    if (c)
        kvv_kv_cache_clear(c);
}

/* ------------------------------------------------------------ capabilities */

void kvv_engine_batch_paths(kvv_engine *e, kvv_batch_paths *out)
{
    memset(out, 0, sizeof *out);
    if (e && e->vt->batch_paths)
        e->vt->batch_paths(e, out);
}

int kvv_batch_path_of(const kvv_batch_paths *p, int n)
{
    if (!p->known)
        return n;
    int k = 0;
    while (k < p->n && p->sw[k].at <= n)
        k++;
    return k;
}

void kvv_batch_paths_add(kvv_batch_paths *p, int at, const char *what)
{
    p->known = true;
    int k = 0;
    while (k < p->n && p->sw[k].at < at)
        k++;
    if (k < p->n && p->sw[k].at == at) {
        if (strstr(p->sw[k].what, what))
            return;
        size_t len = strlen(p->sw[k].what);
        snprintf(p->sw[k].what + len, sizeof p->sw[k].what - len, "; %s", what);
        return;
    }
    if (p->n >= KVV_BATCH_MAX_SWITCHES)
        return;
    memmove(&p->sw[k + 1], &p->sw[k], (size_t)(p->n - k) * sizeof p->sw[0]);
    p->sw[k].at = at;
    snprintf(p->sw[k].what, sizeof p->sw[k].what, "%s", what);
    p->n++;
}

const char *kvv_batch_paths_list(const kvv_batch_paths *p, char *buf, size_t size)
{
    if (!p->known || !p->n) {
        snprintf(buf, size, "%s", p->known ? "none" : "unknown");
        return buf;
    }
    size_t off = 0;
    buf[0] = '\0';
    for (int k = 0; k < p->n && off < size; k++)
        off += (size_t)snprintf(buf + off, size - off, "%s%d", k ? ", " : "", p->sw[k].at);
    return buf;
}

static double clock_seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double kvv_engine_cpu_seconds(kvv_engine *e)
{
    double workers = e && e->vt->worker_cpu_seconds ? e->vt->worker_cpu_seconds(e) : 0;
    if (workers < 0) /* threads kvverify cannot see (a plugin's) */
        return clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    return clock_seconds(CLOCK_THREAD_CPUTIME_ID) + workers;
}

bool kvv_engine_concurrent(const kvv_engine *e)
{
    return e && !e->vt->serial;
}

bool kvv_engine_name_concurrent(const char *name)
{
    return !name || strcmp(name, "ref") == 0 || strcmp(name, "cpu") == 0;
}

unsigned kvv_engine_caps(kvv_engine *e)
{
    if (!e)
        return 0;
    return e->vt->caps ? e->vt->caps(e) : KVV_ENGINE_CAP_BUILTIN;
}

static const char *const cap_names[] = {
    "logits-all", "residual-read", "residual-write", "kv-hook", "kv-read",
    "kv-from-residual", "attn", "attn-out", "select", "kv-evict",
    "kv-evict-head", "kv-write", "threads", "ubatch", "overwrite",
};

const char *kvv_engine_cap_names(unsigned caps, char *buf, size_t size)
{
    size_t off = 0;
    if (size)
        buf[0] = '\0';
    for (unsigned i = 0; i < sizeof cap_names / sizeof cap_names[0]; i++)
        if (caps & (1u << i)) {
            int w = snprintf(buf + off, size - off, "%s%s", off ? "," : "", cap_names[i]);
            if (w < 0 || (size_t)w >= size - off)
                break;
            off += (size_t)w;
        }
    return buf;
}

kvv_status kvv_engine_require(kvv_engine *e, unsigned need, const char *what, kvv_error *err)
{
    unsigned missing = need & ~kvv_engine_caps(e);
    if (!missing)
        return KVV_OK;
    char names[256];
    return kvv_error_set(err, KVV_ERR_UNSUPPORTED, "engine %s does not offer %s (needed by %s)",
                         e && e->opts.name ? e->opts.name : "?",
                         kvv_engine_cap_names(missing, names, sizeof names), what);
}
