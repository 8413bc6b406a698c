/*
 * engine_registry.c — the engines by name (engine/engine_registry.h) and
 * kvv_engine_open (engine/engine.h): one const table of the built-in
 * engines and llama.cpp whose columns are each engine's facts (modes,
 * concurrency, the options it takes, its device, its op set), the checks of
 * kvv_engine_opts against a row, "plugin:PATH" and plugins found by name in
 * the plugin folders, and the catalog `kvverify engines` prints. Each
 * engine's open function is declared in engine/engine_impl.h.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine_registry.h"
#include "engine/engine_impl.h"
#include "engine/cpu/cpu_engine.h"
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
    unsigned takes;          /* KVV_ENGINE_OPT_* it takes besides name, mode, cache type */
    const char *keys;        /* a built-in's --engine-opt keys, ", "-separated ("" none);
                                NULL: a plugin's, which checks its own */
    const char *devices;     /* where it runs without taking --device ("cpu"); NULL:
                                the plugin lists them */
    kvv_ops_open_fn ops;     /* its op set for `kvverify numerics` (engine_ops.h), or NULL */
} engine_row;

#define PLUGIN_TAKES (KVV_ENGINE_OPT_THREADS | KVV_ENGINE_OPT_DEVICE | KVV_ENGINE_OPT_UBATCH | \
                      KVV_ENGINE_OPT_EOPT)

/* One row per engine, in the order `--engine` help lists them; the first
 * is the default engine. */
static const engine_row engines[] = {
    {.name = "ref", .open = kvv_engine_open_ref, .modes = MODE(EXACT),
     .default_mode = KVV_MODE_EXACT, .concurrent = true,
     .takes = KVV_ENGINE_OPT_GGML, .keys = "", .devices = "cpu", .ops = kvv_ops_open_ref},
    {.name = "cpu", .open = kvv_engine_open_cpu, .modes = MODE(FAST) | MODE(INVARIANT),
     .default_mode = KVV_MODE_INVARIANT, .concurrent = true,
     .takes = KVV_ENGINE_OPT_THREADS | KVV_ENGINE_OPT_ISA | KVV_ENGINE_OPT_REPACK |
              KVV_ENGINE_OPT_EOPT,
     .keys = KVV_CPU_ENGINE_KEYS, .devices = "cpu", .ops = kvv_ops_open_cpu},
    {.name = "llama.cpp", .open = kvv_engine_open_llama_cpp, .plugin = KVV_LLAMA_CPP_PLUGIN,
     .modes = ALL_MODES, .default_mode = KVV_MODE_INVARIANT, .concurrent = false,
     .takes = PLUGIN_TAKES},
};
#define N_ENGINES (sizeof engines / sizeof engines[0])

/* Every other name: "plugin:PATH.so", or a plugin NAME.so in the plugin
 * folders (and a name that is neither, which kvv_engine_open refuses). */
static const engine_row any_plugin = {
    .plugin = "", .modes = ALL_MODES, .default_mode = KVV_MODE_INVARIANT, .concurrent = false,
    .takes = PLUGIN_TAKES,
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

/* ------------------------------------------------------------ options */

/* Options every engine takes. */
#define TAKEN_BY_ALL (KVV_ENGINE_OPT_ENGINE | KVV_ENGINE_OPT_MODE | KVV_ENGINE_OPT_CACHE)

bool kvv_engine_takes(const char *name, unsigned opt)
{
    return opt && ((row_of(name)->takes | TAKEN_BY_ALL) & opt) == opt;
}

/* Is `key` (up to '=' or the end) one of the ", "-separated keys? */
static bool key_in(const char *keys, const char *key)
{
    size_t n = strcspn(key, "=");
    for (const char *k = keys; n && *k;) {
        size_t len = strcspn(k, ",");
        if (len == n && strncmp(k, key, n) == 0)
            return true;
        k += len;
        k += strspn(k, ", ");
    }
    return false;
}

bool kvv_engine_takes_key(const char *name, const char *key)
{
    const engine_row *r = row_of(name);
    if (!key || !(r->takes & KVV_ENGINE_OPT_EOPT))
        return false;
    return !r->keys || key_in(r->keys, key);
}

/* "the cpu engine", "the cpu and llama.cpp engines and plugins": who
 * takes opt. @return buf. */
static const char *takers(unsigned opt, char *buf, size_t size)
{
    const char *names[N_ENGINES];
    int n = 0;
    for (size_t i = 0; i < N_ENGINES; i++)
        if (engines[i].takes & opt)
            names[n++] = engines[i].name;
    size_t off = (size_t)snprintf(buf, size, n ? "the" : "no engine");
    for (int i = 0; i < n && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s", i == 0 ? " " : i == n - 1 ?
                                " and " : ", ", names[i]);
    if (off < size)
        snprintf(buf + off, size - off, "%s%s", n > 1 ? " engines" : n ? " engine" : "",
                 any_plugin.takes & opt ? (n ? " and plugins" : " but plugins") : "");
    return buf;
}

kvv_status kvv_engine_check_opt(const char *name, unsigned opt, const char *value,
                                kvv_error *err)
{
    const engine_row *r = row_of(name);
    const char *shown = name ? name : r->name;
    char who[96];
    if (!kvv_engine_takes(name, opt))
        return kvv_error_set(err, KVV_ERR_USAGE, "engine %s does not take %s%s%s (it applies to "
                             "%s)", shown, kvv_engine_opt_name(opt), value ? " " : "",
                             value ? value : "", takers(opt, who, sizeof who));
    if (opt == KVV_ENGINE_OPT_EOPT && value && !kvv_engine_takes_key(name, value))
        return kvv_error_set(err, KVV_ERR_USAGE, "engine %s does not take --engine-opt %s (its "
                             "keys: %s)", shown, value, r->keys);
    return KVV_OK;
}

kvv_status kvv_engine_check_opts(const kvv_engine_opts *o, kvv_error *err)
{
    const char *name = o->name;
    const engine_row *r = row_of(name);
    char v[32];
    kvv_status s = kvv_engine_check_mode(name, o->mode, err);
    if (!s && o->ggml) {
        snprintf(v, sizeof v, "(flags 0x%x)", o->ggml);
        s = kvv_engine_check_opt(name, KVV_ENGINE_OPT_GGML, v, err);
    }
    if (!s && o->isa && o->isa[0])
        s = kvv_engine_check_opt(name, KVV_ENGINE_OPT_ISA, o->isa, err);
    if (!s && o->repack)
        s = kvv_engine_check_opt(name, KVV_ENGINE_OPT_REPACK, NULL, err);
    if (!s && o->n_ubatch > 0) {
        snprintf(v, sizeof v, "%d", o->n_ubatch);
        s = kvv_engine_check_opt(name, KVV_ENGINE_OPT_UBATCH, v, err);
    }
    for (int i = 0; !s && i < o->n_engine_opts; i++)
        s = kvv_engine_check_opt(name, KVV_ENGINE_OPT_EOPT, o->engine_opts[i], err);
    /* an engine without --device runs on its one device, which may be named */
    if (!s && o->device && !(r->devices && strcmp(o->device, r->devices) == 0))
        s = kvv_engine_check_opt(name, KVV_ENGINE_OPT_DEVICE, o->device, err);
    return s;
}

kvv_engine_opts kvv_engine_opts_for(const kvv_engine_opts *o, const char *name)
{
    const kvv_engine_opts d = kvv_engine_opts_default();
    kvv_engine_opts e = *o;
    e.name = name;
    e.mode = kvv_engine_default_mode(name);
    /* an engine's device and own options (--engine-opt) are its own */
    e.device = d.device;
    e.n_ubatch = d.n_ubatch;
    e.engine_opts = d.engine_opts;
    e.n_engine_opts = d.n_engine_opts;
    if (!kvv_engine_takes(name, KVV_ENGINE_OPT_THREADS))
        e.n_threads = d.n_threads;
    if (!kvv_engine_takes(name, KVV_ENGINE_OPT_GGML))
        e.ggml = d.ggml;
    if (!kvv_engine_takes(name, KVV_ENGINE_OPT_ISA))
        e.isa = d.isa;
    if (!kvv_engine_takes(name, KVV_ENGINE_OPT_REPACK))
        e.repack = d.repack;
    return e;
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

/* An engine asked for more sequences than it serves is refused at open, so a
 * check never runs requests the engine would mix up or turn away mid-run. */
static kvv_status check_sequences(const kvv_engine_opts *o, const char *name, kvv_engine **out,
                                  kvv_error *err)
{
    int served = kvv_engine_n_seq(*out);
    if (o->n_seq_max <= 1 || o->n_seq_max <= served)
        return KVV_OK;
    kvv_engine_close(*out);
    *out = NULL;
    return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                         served > 1 ? "engine %s serves %d sequences at once (asked for %d)"
                                    : "engine %s serves one sequence (asked for %d at once)",
                         name, served > 1 ? served : o->n_seq_max, o->n_seq_max);
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
    if (o->n_seq_max < 0 || o->n_seq_max > KVV_ENGINE_MAX_SEQS)
        return kvv_error_set(err, KVV_ERR_USAGE, "engine %s: n_seq_max %d outside 0..%d", name,
                             o->n_seq_max, KVV_ENGINE_MAX_SEQS);
    const engine_row *r = row_of(name);
    kvv_status s = kvv_engine_check_opts(o, err);
    if (s)
        return s;
    if (strncmp(name, KVV_PLUGIN_PREFIX, strlen(KVV_PLUGIN_PREFIX)) == 0) {
        s = kvv_engine_open_plugin(m, o, name + strlen(KVV_PLUGIN_PREFIX), NULL, out, err);
    } else if (r != &any_plugin) {
        kvv_engine_opts copy = *o;
        copy.name = r->name; /* static: outlives the caller's string */
        s = r->open(m, &copy, out, err);
    } else if (!kvv_engine_open_plugin_by_name(m, o, name, out, &s, err)) {
        return unknown_engine(name, err);
    }
    return s ? s : check_sequences(o, name, out, err);
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
