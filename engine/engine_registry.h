/*
 * engine_registry.h — the engines kvverify knows, by name: the built-in
 * engines and llama.cpp in one table (engine_registry.c), "plugin:PATH.so",
 * and plugins NAME.so found in the plugin folders. kvv_engine_open
 * (engine/engine.h) opens them; this header answers what can be asked
 * without opening one: does a name exist, which engines are there (the
 * catalog `kvverify engines` prints), and each engine's facts.
 *
 *   kvv_error err;
 *   if (kvv_engine_exists(name, &err)) ... refuse before anything runs
 *   kvv_mode m = kvv_engine_default_mode(name);
 *   if (kvv_engine_check_mode(name, asked, &err)) ... "engine cpu has no mode 'exact'"
 */
#ifndef KVV_ENGINE_REGISTRY_H
#define KVV_ENGINE_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/engine.h"

/* Is there an engine named `name` (as kvv_engine_open resolves it: a
 * built-in, plugin:PATH with a readable file, an installed plugin NAME),
 * without opening it? For command lines, which refuse an unknown name
 * before anything runs. @return KVV_OK, else KVV_ERR_USAGE (or KVV_ERR_IO
 * for a missing llama.cpp plugin) with kvv_engine_open's message. */
kvv_status kvv_engine_exists(const char *name, kvv_error *err);
/* The registered engine names, "ref, cpu, llama.cpp", into buf (for
 * messages, help). */
void kvv_engine_list(char *buf, size_t size);

/* ---- Each engine's facts (a column of the registry's table). A name the
 * table does not hold is taken as a plugin's: "plugin:PATH.so" or NAME.so
 * in the plugin folders. NULL is the default engine (ref). */

/* The name of the i-th engine of the table (0 = the default engine, the
 * reference), NULL past the last: to go over every built-in engine and
 * llama.cpp without naming them. */
const char *kvv_engine_registered(int i);

/* Is `name` loaded from a shared object (llama.cpp, any other plugin)?
 * A plugin has no kvverify modes: it runs as it is ("native"). */
bool kvv_engine_is_plugin(const char *name);

/* The mode an engine runs in when none is asked for: exact for the
 * reference, invariant for the others (the one place this is decided). */
kvv_mode kvv_engine_default_mode(const char *name);
/* Does the engine have mode m? A plugin has every mode (the mode is passed
 * to it as a hint). */
bool kvv_engine_has_mode(const char *name, kvv_mode m);
/* Its modes, "exact" or "fast, invariant" ("native" for a plugin), into
 * buf. @return buf. */
const char *kvv_engine_modes(const char *name, char *buf, size_t size);
/* KVV_OK when the engine has mode m, else KVV_ERR_USAGE with "engine NAME
 * has no mode 'M' (its modes: ...)": kvv_engine_open's check, for command
 * lines to refuse it before anything runs. */
kvv_status kvv_engine_check_mode(const char *name, kvv_mode m, kvv_error *err);

/* May engines named `name` run on several threads at once, before opening?
 * True for the built-in engines (and NULL, the default engine), false for
 * the plugins (a plugin may be one instance per process). */
bool kvv_engine_name_concurrent(const char *name);

/* ---- The options each engine takes (KVV_ENGINE_OPT_*, engine/engine.h):
 * one column of the table, one check, one message. */

/* Does the engine take every option in opt? Every engine takes --engine,
 * --mode (its modes) and --cache-type; an engine that does not take
 * --threads runs one thread. */
bool kvv_engine_takes(const char *name, unsigned opt);
/* Does the engine take --engine-opt `key` ("KEY" or "KEY=VALUE")? A
 * built-in: one of its keys; a plugin: any (the plugin checks its own). */
bool kvv_engine_takes_key(const char *name, const char *key);
/* KVV_OK when the engine takes option opt (and, for KVV_ENGINE_OPT_EOPT,
 * the key in value), else KVV_ERR_USAGE with "engine NAME does not take
 * --OPTION VALUE (it applies to the cpu engine)" (value may be NULL). */
kvv_status kvv_engine_check_opt(const char *name, unsigned opt, const char *value,
                                kvv_error *err);
/* The check kvv_engine_open makes before opening o->name: its mode, then
 * each option given (ggml, isa, repack, n_ubatch > 0, every engine option,
 * a device other than the one it runs on) against what it takes;
 * n_threads is never refused. KVV_OK or kvv_engine_check_opt's error. */
kvv_status kvv_engine_check_opts(const kvv_engine_opts *o, kvv_error *err);
/* o for another engine `name` (a command's second engine: compare's A,
 * bench --against, evict's figures): its default mode; the options it does
 * not take back to their defaults; device, micro-batch and engine options
 * dropped (they are the first engine's own). */
kvv_engine_opts kvv_engine_opts_for(const kvv_engine_opts *o, const char *name);

/* One engine kvverify can run, as `kvverify engines` lists it. */
typedef struct {
    char name[16];          /* as --engine takes it: "ref", "cpu", "llama.cpp", a plugin's
                               file name without .so */
    bool plugin;            /* loaded from a shared object (the plugin ABI) */
    char modes[48];         /* "exact", "fast, invariant"; plugins: "native" unless they
                               describe their own when opened */
    char devices[96];       /* "cpu"; plugins: the devices their table lists */
    char version[96];       /* plugins: their version */
    char path[1024];        /* plugins: the file */
    char status[512];       /* "" when it loads; else why not (a kvv_error message) */
} kvv_engine_info;

/* The built-in engines, then every plugin found (NAME.so in the plugin
 * folders: $KVV_PLUGIN_DIR, plugins/ beside the executable), each probed
 * (loaded to read its table, then unloaded; no model needed). A plugin
 * that does not load is listed with its status. @return how many were
 * written to out[max]. */
int kvv_engine_catalog(kvv_engine_info *out, int max);

#endif
