/*
 * engine_registry.c — opening engines by name (engine/engine_registry.h,
 * kvv_engine_open of engine/engine.h): one const
 * table of the built-in engines and llama.cpp, "plugin:PATH" and plugins
 * found by name in the plugin folders, and the catalog `kvverify engines`
 * prints. Each engine's open function is declared in engine/engine_impl.h.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine_registry.h"
#include "engine/engine_impl.h"
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
            snprintf(path, sizeof path, "%.760s/%s", dirs[d], de->d_name);
            probe(name, path, &out[n++]);
        }
        if (dir)
            closedir(dir);
    }
    return n;
}
