/*
 * plugin.h — private to engine/: engines loaded from shared objects through
 * the plugin ABI (include/kvverify/engine_plugin.h), opened by the registry
 * in engine/engine_registry.c for "plugin:PATH.so", "llama.cpp" and NAME.
 *
 * The loader dlopens the file, calls its entry symbol, refuses an ABI major
 * other than the host's (KVV_ERR_USAGE naming both versions), reads only the
 * table prefix both sides know (struct_size), checks the required slots and
 * that each declared capability has its slot, checks the plugin's reading of
 * the model against kvverify's, and wraps the plugin in a kvv_engine_vtable:
 *
 *   - hooks and calls a capability the plugin did not declare are refused
 *     with KVV_ERR_UNSUPPORTED (kvv_engine_caps reports what it declared);
 *   - kvv_engine_cache returns a host mirror of the plugin's cache, read back
 *     with kv_read after every forward; edits made to the mirror (a policy's
 *     eviction, an inserted row, a clear) are pushed to the plugin before the
 *     next forward, or refused when the plugin lacks the slot;
 *   - negative controls the plugin does not plant itself are planted on the
 *     host's side (KVV_CTL_HOST_*, engine/host_control.h).
 */
#ifndef KVV_PLUGIN_H
#define KVV_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/engine.h"
#include "engine/engine_registry.h"

#define KVV_PLUGIN_PREFIX "plugin:"

/* The file name of the llama.cpp plugin, looked up by kvv_plugin_find. */
#define KVV_LLAMA_CPP_PLUGIN "llama.cpp.so"

/* Open the plugin at path for model m (see kvv_engine_open). name is the
 * engine's name in reports and messages; NULL = "plugin:PATH". */
kvv_status kvv_engine_open_plugin(const kvv_model *m, const kvv_engine_opts *o, const char *path,
                                  const char *name, kvv_engine **out, kvv_error *err);

/* Engine `name` as a plugin NAME.so in the plugin folders (kvv_plugin_find),
 * for names of 1-15 characters of [A-Za-z0-9._-]: an installed plugin is an
 * engine name like the built-in ones (suite manifests, --engine).
 * @return false (nothing opened, err untouched) when there is no such file. */
bool kvv_engine_open_plugin_by_name(const kvv_model *m, const kvv_engine_opts *o,
                                    const char *name, kvv_engine **out, kvv_status *status,
                                    kvv_error *err);

/* The file of plugin engine `name` (NAME.so in the plugin folders, names
 * as for kvv_engine_open_plugin_by_name) into path. @return false when
 * there is none. */
bool kvv_plugin_find_by_name(const char *name, char *path, size_t size);

/* The folders plugins are looked up in, in kvv_plugin_find's order:
 * $KVV_PLUGIN_DIR, then plugins/ beside the executable and up to two
 * folders above it. @return how many were written (<= max). */
int kvv_plugin_dirs(char dirs[][1024], int max);

/* Load the plugin library at path only to read its table: out->name,
 * version and devices (the rest of out untouched); unloaded again.
 * @return KVV_OK, or the load error (kvv_plugin_lib_open's). */
kvv_status kvv_plugin_probe(const char *path, kvv_engine_info *out, kvv_error *err);

/* Open the llama.cpp plugin (engine name "llama.cpp"). */
kvv_status kvv_engine_open_llama_cpp(const kvv_model *m, const kvv_engine_opts *o,
                                     kvv_engine **out, kvv_error *err);

/* Find plugin file `file` in $KVV_PLUGIN_DIR, else in plugins/ beside the
 * running executable or up to two folders above it (build/kvverify and
 * build/tests/LAYER/test_x both find build/plugins/). KVV_ERR_IO naming the
 * places looked in when absent. */
kvv_status kvv_plugin_find(const char *file, char *out, size_t size, kvv_error *err);

#endif
