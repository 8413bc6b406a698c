/*
 * plugin_load.c — finding, loading and checking a plugin library (see
 * plugin.h and include/kvverify/engine_plugin.h), the host table a plugin
 * receives, and the mapping of plugin statuses to kvverify's.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/plugin/plugin_impl.h"
#include "model/tensor_types.h"

/* ------------------------------------------------------------ finding */

int kvv_plugin_dirs(char dirs[][1024], int max)
{
    int n = 0;
    const char *env = getenv("KVV_PLUGIN_DIR");
    if (env && *env && n < max)
        snprintf(dirs[n++], 1024, "%s", env);
    char exe[1024];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        for (int up = 0; up < 3 && n < max; up++) {
            char *slash = strrchr(exe, '/');
            if (!slash || slash == exe)
                break;
            *slash = '\0';
            snprintf(dirs[n++], 1024, "%.1015s/plugins", exe);
        }
    }
    return n;
}

kvv_status kvv_plugin_find(const char *file, char *out, size_t size, kvv_error *err)
{
    char dirs[4][1024], looked[1024] = "";
    int nd = kvv_plugin_dirs(dirs, 4);
    const char *env = getenv("KVV_PLUGIN_DIR");
    for (int i = 0; i < nd; i++) {
        snprintf(out, size, "%s/%s", dirs[i], file);
        if (access(out, R_OK) == 0)
            return KVV_OK;
        size_t len = strlen(looked);
        if (snprintf(looked + len, sizeof looked - len, "%s%s%s", len ? ", " : "",
                     i == 0 && env && *env ? "$KVV_PLUGIN_DIR=" : "",
                     dirs[i]) >= (int)(sizeof looked - len))
            break; /* the message is long enough */
    }
    out[0] = '\0';
    return kvv_error_set(err, KVV_ERR_IO,
                         "plugin %s not found (looked in %s); build it with `make` after "
                         "scripts/install-deps.sh",
                         file, looked[0] ? looked : "nowhere");
}

kvv_status kvv_plugin_probe(const char *path, kvv_engine_info *out, kvv_error *err)
{
    kvv_plugin_lib lib;
    kvv_status s = kvv_plugin_lib_open(path, &lib, err);
    if (s)
        return s;
    snprintf(out->name, sizeof out->name, "%s", lib.t.name);
    snprintf(out->version, sizeof out->version, "%s", lib.t.version ? lib.t.version : "");
    snprintf(out->devices, sizeof out->devices, "%s", lib.t.devices);
    kvv_plugin_lib_close(&lib);
    return KVV_OK;
}

/* ------------------------------------------------------------ loading */

static bool valid_name(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n > 15)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

kvv_status kvv_plugin_lib_open(const char *path, kvv_plugin_lib *lib, kvv_error *err)
{
    memset(lib, 0, sizeof *lib);
    snprintf(lib->path, sizeof lib->path, "%s", path);
    /* A bare file name would make dlopen search the library path, not the
     * current folder; a plugin is always named by a path. */
    char full[1040];
    snprintf(full, sizeof full, "%s%s", strchr(path, '/') ? "" : "./", path);
    lib->dl = dlopen(full, RTLD_NOW | RTLD_LOCAL);
    if (!lib->dl) {
        const char *why = dlerror();
        return kvv_error_set(err, KVV_ERR_IO, "plugin %s: cannot load: %s", path,
                             why ? why : "dlopen failed");
    }
    kvv_plugin_entry_fn entry;
    void *sym = dlsym(lib->dl, KVV_PLUGIN_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry); /* object pointer -> function pointer (POSIX) */
    kvv_status s = KVV_OK;
    const kvv_plugin_table *t = entry ? entry() : NULL;
    if (!entry)
        s = kvv_error_set(err, KVV_ERR_IO, "plugin %s: no symbol %s (not a kvverify plugin)",
                          path, KVV_PLUGIN_ENTRY_SYMBOL);
    else if (!t)
        s = kvv_error_set(err, KVV_ERR_USAGE, "plugin %s: %s returned NULL", path,
                          KVV_PLUGIN_ENTRY_SYMBOL);
    else if (t->abi_major != KVV_PLUGIN_ABI_MAJOR)
        s = kvv_error_set(err, KVV_ERR_USAGE,
                          "plugin %s speaks plugin ABI %u.%u, this kvverify speaks %u.%u: the "
                          "major versions must match (rebuild the plugin against "
                          "include/kvverify/engine_plugin.h)",
                          path, t->abi_major, t->abi_minor, KVV_PLUGIN_ABI_MAJOR,
                          KVV_PLUGIN_ABI_MINOR);
    else if (t->struct_size < offsetof(kvv_plugin_table, describe))
        s = kvv_error_set(err, KVV_ERR_USAGE,
                          "plugin %s: table struct_size %u is smaller than ABI %u.0's required "
                          "part (%zu bytes)",
                          path, t->struct_size, KVV_PLUGIN_ABI_MAJOR,
                          offsetof(kvv_plugin_table, describe));
    if (s) {
        dlclose(lib->dl);
        lib->dl = NULL;
        return s;
    }
    /* Read only the prefix both sides know; slots beyond it stay NULL
     * (= their documented default). A struct_size ending inside a slot
     * counts only the whole slots before it: copying part of a function
     * pointer made the host call a half pointer (found by
     * tests/fuzz/fuzz_plugin.c). Every field past the required part is a
     * pointer, so whole slots end at multiples of a pointer's size. */
    _Static_assert(offsetof(kvv_plugin_table, describe) % sizeof(void *) == 0 &&
                       sizeof(kvv_plugin_table) % sizeof(void *) == 0,
                   "the table's slots are pointer-aligned");
    size_t n = t->struct_size < sizeof lib->t ? t->struct_size : sizeof lib->t;
    n -= n % sizeof(void *);
    memcpy(&lib->t, t, n);
    const char *missing = !lib->t.open ? "open" : !lib->t.close ? "close"
                          : !lib->t.forward ? "forward" : !lib->t.kv_clear ? "kv_clear" : NULL;
    if (missing)
        s = kvv_error_set(err, KVV_ERR_USAGE, "plugin %s: required slot %s is NULL", path,
                          missing);
    else if (!valid_name(lib->t.name))
        s = kvv_error_set(err, KVV_ERR_USAGE,
                          "plugin %s: name '%s' is not 1-15 characters of [A-Za-z0-9._-]", path,
                          lib->t.name ? lib->t.name : "(null)");
    else if (!lib->t.devices || !lib->t.devices[0])
        s = kvv_error_set(err, KVV_ERR_USAGE, "plugin %s: no devices listed", path);
    if (s)
        kvv_plugin_lib_close(lib);
    return s;
}

void kvv_plugin_lib_close(kvv_plugin_lib *lib)
{
    if (lib && lib->dl)
        dlclose(lib->dl);
    if (lib)
        lib->dl = NULL;
}

/* ------------------------------------------------------------ statuses */

kvv_status kvv_plugin_fail(const kvv_plugin_state *ps, int code, const char *call,
                           const kvv_plugin_error *perr, kvv_error *err)
{
    kvv_status s;
    switch (code) {
    case KVV_PLUGIN_ERR_USAGE: s = KVV_ERR_USAGE; break;
    case KVV_PLUGIN_ERR_IO: s = KVV_ERR_IO; break;
    case KVV_PLUGIN_ERR_FORMAT: s = KVV_ERR_FORMAT; break;
    case KVV_PLUGIN_ERR_UNSUPPORTED: s = KVV_ERR_UNSUPPORTED; break;
    case KVV_PLUGIN_ERR_NOMEM: s = KVV_ERR_NOMEM; break;
    case KVV_PLUGIN_ERR_NO_DEVICE: s = KVV_ERR_UNSUPPORTED; break;
    default: s = KVV_ERR_INTERNAL; break;
    }
    char msg[KVV_PLUGIN_MSG_MAX];
    memcpy(msg, perr->msg, sizeof msg);
    msg[sizeof msg - 1] = '\0'; /* a plugin that forgot the NUL cannot overrun us */
    if (msg[0])
        return kvv_error_set(err, s, "engine %s: %s", ps->engine_name, msg);
    return kvv_error_set(err, s, "engine %s: %s failed with status %d and no message", ps->engine_name,
                         call, code);
}

/* ------------------------------------------------------------ host table */

static float host_round(int dtype, float x)
{
    if ((unsigned)dtype > KVV_CACHE_BF16)
        return x;
    return kvv_cache_round((kvv_cache_type)dtype, x);
}

static float host_widen(int dtype, const void *p)
{
    uint16_t h;
    float f;
    switch (dtype) {
    case KVV_PLUGIN_DTYPE_F16:
        memcpy(&h, p, sizeof h);
        return kvv_fp16_to_fp32(h);
    case KVV_PLUGIN_DTYPE_BF16:
        memcpy(&h, p, sizeof h);
        return kvv_bf16_to_fp32(h);
    default:
        memcpy(&f, p, sizeof f);
        return f;
    }
}

static void host_log(void *user, int level, const char *msg)
{
    const kvv_plugin_state *ps = user;
    if (level <= 1 || getenv("KVV_PLUGIN_VERBOSE"))
        fprintf(stderr, "kvverify: engine %s: %s%s\n", ps->engine_name, level == 0 ? "error: " : "",
                msg ? msg : "");
}

kvv_plugin_host kvv_plugin_host_table(kvv_plugin_state *ps)
{
    kvv_plugin_host h;
    memset(&h, 0, sizeof h);
    h.struct_size = sizeof h;
    h.abi_major = KVV_PLUGIN_ABI_MAJOR;
    h.abi_minor = KVV_PLUGIN_ABI_MINOR;
    h.host_version = "kvverify (plugin ABI 1.1)";
    h.round_to_dtype = host_round;
    h.dtype_to_float = host_widen;
    h.log = host_log;
    h.log_user = ps;
    return h;
}
