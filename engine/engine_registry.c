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
#include "engine/engine_ops.h"
#include "engine/plugin/plugin.h"

/* ------------------------------------------------------------ registry */

#define MODE(m) (1u << KVV_MODE_##m)
#define ALL_MODES (MODE(EXACT) | MODE(FAST) | MODE(INVARIANT))

/* One engine and its facts: everything kvverify decides per engine before
 * opening it is a column here, asked through the functions of
 * engine_registry.h, never by comparing names elsewhere. */
typedef struct {
    const char *name;        /* as --engine takes it */
    kvv_engine_open_fn open;
    const char *plugin;      /* a plugin's shared object (kvv_plugin_find), NULL: built in */
    unsigned modes;          /* MODE() bits of the modes it has; a plugin: every mode,
                                passed on as a hint (it runs as it is: "native") */
    kvv_mode default_mode;   /* when none is asked for */
    bool concurrent;         /* instances may run on several threads at once */
    const char *devices;     /* where a built-in runs; NULL: the plugin's table says */
    kvv_ops_open_fn ops;     /* its op set for `kvverify numerics` (engine_ops.h), or NULL */
    bool ggml;               /* honours kvv_engine_opts.ggml (llama.cpp emulation) */
    bool isa;                /* honours kvv_engine_opts.isa (kernel tables) */
} engine_row;

/* One row per engine, in the order `--engine` help lists them. Plugins
 * ("llama.cpp", "plugin:PATH") take engine options and devices; the
 * built-ins take neither. */
static const engine_row engines[] = {
    /* name        open                       plugin                modes                     default             conc.  devices ops               ggml   isa */
    {"ref",        kvv_engine_open_ref,       NULL,                 MODE(EXACT),              KVV_MODE_EXACT,     true,  "cpu",  kvv_ops_open_ref, true,  false},
    {"cpu",        kvv_engine_open_cpu,       NULL,                 MODE(FAST)|MODE(INVARIANT), KVV_MODE_INVARIANT, true, "cpu", kvv_ops_open_cpu, false, true},
    {"llama.cpp",  kvv_engine_open_llama_cpp, KVV_LLAMA_CPP_PLUGIN, ALL_MODES,                KVV_MODE_INVARIANT, false, NULL,   NULL,             false, false},
};
#define N_ENGINES (sizeof engines / sizeof engines[0])

/* Every other name: "plugin:PATH.so", or a plugin NAME.so in the plugin
 * folders (and a name that is neither, which kvv_engine_open refuses). */
static const engine_row any_plugin = {
    NULL, NULL, "", ALL_MODES, KVV_MODE_INVARIANT, false, NULL, NULL, false, false,
};

/* The row of `name` (NULL: the default engine, the first row). */
static const engine_row *row_of(const char *name)
{
    if (!name)
        return &engines[0];
    for (size_t i = 0; i < N_ENGINES; i++)
        if (strcmp(engines[i].name, name) == 0)
            return &engines[i];
    return &any_plugin;
}

const char *kvv_engine_registered(int i)
{
    return i >= 0 && (size_t)i < N_ENGINES ? engines[i].name : NULL;
}

bool kvv_engine_is_plugin(const char *name)
{
    return row_of(name)->plugin != NULL;
}

kvv_mode kvv_engine_default_mode(const char *name)
{
    return row_of(name)->default_mode;
}

bool kvv_engine_has_mode(const char *name, kvv_mode m)
{
    return (unsigned)m < KVV_MODE_COUNT && (row_of(name)->modes & (1u << m));
}

const char *kvv_engine_modes(const char *name, char *buf, size_t size)
{
    const engine_row *r = row_of(name);
    size_t off = 0;
    if (size)
        buf[0] = '\0';
    if (r->plugin) {
        snprintf(buf, size, "native");
        return buf;
    }
    for (int m = 0; m < KVV_MODE_COUNT && off < size; m++)
        if (r->modes & (1u << m))
            off += (size_t)snprintf(buf + off, size - off, "%s%s", off ? ", " : "",
                                    kvv_mode_name((kvv_mode)m));
    return buf;
}

kvv_status kvv_engine_check_mode(const char *name, kvv_mode m, kvv_error *err)
{
    if (kvv_engine_has_mode(name, m))
        return KVV_OK;
    char modes[48];
    return kvv_error_set(err, KVV_ERR_USAGE, "engine %s has no mode '%s' (its modes: %s)",
                         name ? name : engines[0].name, kvv_mode_name(m),
                         kvv_engine_modes(name, modes, sizeof modes));
}

bool kvv_engine_name_concurrent(const char *name)
{
    return row_of(name)->concurrent;
}

bool kvv_ops_available(const char *name)
{
    return row_of(name)->ops != NULL;
}

kvv_status kvv_ops_open(const kvv_model *m, const kvv_engine_opts *eo, kvv_ops **out,
                        kvv_error *err)
{
    *out = NULL;
    const engine_row *r = row_of(eo ? eo->name : NULL);
    if (!r->ops) {
        char with[128];
        size_t off = 0;
        with[0] = '\0';
        for (size_t i = 0; i < N_ENGINES && off < sizeof with; i++)
            if (engines[i].ops)
                off += (size_t)snprintf(with + off, sizeof with - off, "%s%s", off ? ", " : "",
                                        engines[i].name);
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED, "engine %s has no op set (engines with "
                             "one: %s)", eo && eo->name ? eo->name : "?", with);
    }
    kvv_status s = kvv_engine_check_mode(r->name, eo->mode, err);
    return s ? s : r->ops(m, eo, out, err);
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
    const char *name = o->name ? o->name : engines[0].name;
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
    const engine_row *r = row_of(name);
    kvv_status s = kvv_engine_check_mode(name, o->mode, err);
    if (s)
        return s;
    if (o->ggml && !r->ggml)
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "engine %s has no llama.cpp emulation (ggml flags 0x%x)", name,
                             o->ggml);
    if (o->isa && o->isa[0] && !r->isa)
        return kvv_error_set(err, KVV_ERR_USAGE, "engine %s has no kernel tables (--isa %s "
                             "applies to --engine cpu)", name, o->isa);
    if (!r->plugin && o->n_engine_opts > 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "engine %s takes no engine options (got '%s')",
                             name, o->engine_opts[0]);
    if (r->devices && o->device && strcmp(o->device, r->devices) != 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "engine %s runs on the %s only (asked for "
                             "device '%s')", name, r->devices, o->device);
    if (strncmp(name, KVV_PLUGIN_PREFIX, strlen(KVV_PLUGIN_PREFIX)) == 0)
        return kvv_engine_open_plugin(m, o, name + strlen(KVV_PLUGIN_PREFIX), NULL, out, err);
    if (r != &any_plugin) {
        kvv_engine_opts copy = *o;
        copy.name = r->name; /* static: outlives the caller's string */
        return r->open(m, &copy, out, err);
    }
    if (kvv_engine_open_plugin_by_name(m, o, name, out, &s, err))
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
    const engine_row *r = row_of(name);
    if (r != &any_plugin)
        return r->plugin ? kvv_plugin_find(r->plugin, path, sizeof path, err) : KVV_OK;
    if (kvv_plugin_find_by_name(name, path, sizeof path))
        return KVV_OK;
    return unknown_engine(name, err);
}

/* Is file a row's plugin (listed under the row's name)? */
static bool row_file(const char *file)
{
    for (size_t i = 0; i < N_ENGINES; i++)
        if (engines[i].plugin && strcmp(engines[i].plugin, file) == 0)
            return true;
    return false;
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
        const engine_row *r = &engines[i];
        kvv_engine_info *e = &out[n++];
        if (r->plugin) {
            if (kvv_plugin_find(r->plugin, path, sizeof path, &err) == KVV_OK) {
                probe(r->name, path, e);
            } else {
                memset(e, 0, sizeof *e);
                snprintf(e->name, sizeof e->name, "%s", r->name);
                e->plugin = true;
                snprintf(e->status, sizeof e->status, "%s", err.msg);
            }
            continue;
        }
        memset(e, 0, sizeof *e);
        snprintf(e->name, sizeof e->name, "%s", r->name);
        kvv_engine_modes(r->name, e->modes, sizeof e->modes);
        snprintf(e->devices, sizeof e->devices, "%s", r->devices);
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
                row_file(de->d_name))
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
