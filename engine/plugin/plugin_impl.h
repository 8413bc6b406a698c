/*
 * plugin_impl.h — private to engine/plugin/: the loaded library and the
 * state of one plugin engine, shared by the loader (plugin_load.c), the
 * vtable (plugin_engine.c) and the cache mirror (plugin_mirror.c).
 */
#ifndef KVV_PLUGIN_IMPL_H
#define KVV_PLUGIN_IMPL_H

#include "engine/plugin/plugin.h"
#include "include/kvverify/engine_plugin.h"

typedef struct {
    void *dl;                  /* dlopen handle */
    kvv_plugin_table t;        /* the plugin's table, zero-extended to the host's size */
    char path[1024];
} kvv_plugin_lib;

typedef struct {
    kvv_plugin_lib lib;
    kvv_plugin_engine *pe;     /* the plugin's engine */
    kvv_plugin_host host;      /* handed to the plugin; lives as long as pe */
    kvv_plugin_info info;
    char name[16];             /* the table's name: reports say "llama.cpp" */
    char engine_name[1040];    /* "plugin:PATH" or "llama.cpp" (e->opts.name points here) */
    char device[64];
    kvv_kv_cache *mirror;      /* what kvv_engine_cache returns (NULL without KV_READ) */
    kvv_kv_cache *shadow;      /* the plugin's cache as last agreed with the mirror */
    float *scratch;            /* [n_ctx][n_embd] residual copy (no RESIDUAL_WRITE) */
    int violated_layer;        /* >= 0: a hook wrote a residual the plugin cannot take */
    int clear_pending;         /* kvv_engine_reset without a mirror: kv_clear before the
                                  next forward */
} kvv_plugin_state;

/* dlopen path, check the entry and its table. Errors: KVV_ERR_IO (dlopen,
 * dlsym), KVV_ERR_USAGE (ABI major, struct size, required slot, name). */
kvv_status kvv_plugin_lib_open(const char *path, kvv_plugin_lib *lib, kvv_error *err);
void kvv_plugin_lib_close(kvv_plugin_lib *lib);

/* Map a plugin status and message into err ("NAME: message"). */
kvv_status kvv_plugin_fail(const kvv_plugin_state *ps, int code, const char *call,
                           const kvv_plugin_error *perr, kvv_error *err);

/* The host table handed to a plugin. */
kvv_plugin_host kvv_plugin_host_table(kvv_plugin_state *ps);

/* Push host-side edits of the mirror to the plugin (clear, eviction,
 * inserted or changed rows). KVV_ERR_UNSUPPORTED when an edit needs a slot
 * the plugin lacks. No-op without a mirror. */
kvv_status kvv_plugin_mirror_push(kvv_plugin_state *ps, kvv_error *err);
/* Read back positions pos[0..n) of every layer into the mirror. */
kvv_status kvv_plugin_mirror_pull(kvv_plugin_state *ps, int n, const int32_t *pos,
                                  kvv_error *err);
/* Remove position p from the plugin (kv_evict) and the mirror. */
kvv_status kvv_plugin_mirror_evict(kvv_plugin_state *ps, int p, kvv_error *err);

#endif
