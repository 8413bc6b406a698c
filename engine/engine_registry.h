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

/* The mode an engine runs in when none is asked for: exact for "ref",
 * invariant for the others (the one place this default is decided). */
kvv_mode kvv_engine_default_mode(const char *name);

/* May engines named `name` run on several threads at once, before opening?
 * True for the built-in engines (and NULL, the default engine), false for
 * every other name (a plugin may be one instance per process). */
bool kvv_engine_name_concurrent(const char *name);

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
