/*
 * llama_lib.c — loading a llama.cpp library set (see llama_lib.h).
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/llama.cpp/llama_lib.h"

/* Loaded sets, one per folder (cpu, vulkan, cuda): process-wide because
 * ggml's backend registry is. */
#define LP_MAX_LIBS 4
static lp_lib *loaded[LP_MAX_LIBS];
static pthread_mutex_t loaded_lock = PTHREAD_MUTEX_INITIALIZER;

/* llama.cpp's log: kept (the last error, to explain a failed call), shown
 * only when verbose. */
static void on_log(enum ggml_log_level level, const char *text, void *user)
{
    lp_lib *lib = user;
    if (level == GGML_LOG_LEVEL_ERROR && text) {
        snprintf(lib->last_error, sizeof lib->last_error, "%s", text);
        size_t n = strlen(lib->last_error);
        while (n > 0 && (lib->last_error[n - 1] == '\n' || lib->last_error[n - 1] == ' '))
            lib->last_error[--n] = '\0';
    }
    if (lib->verbose && text)
        fputs(text, stderr);
}

/* The libllama*.so in dir (its name carries the build flavour). */
static int find_libllama(const char *dir, char *out, size_t size)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *de;
    int found = -1;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, "libllama", 8) == 0 && strncmp(de->d_name, "libllama-", 9) != 0 &&
            strstr(de->d_name, ".so")) {
            found = snprintf(out, size, "%s/%s", dir, de->d_name) < (int)size ? 0 : -1;
            break;
        }
    closedir(d);
    return found;
}

/* Which ggml-cpu variant of lib->dir the process mapped. */
static int find_variant(struct dl_phdr_info *info, size_t size, void *user)
{
    (void)size;
    lp_lib *lib = user;
    const char *name = info->dlpi_name, *slash = name ? strrchr(name, '/') : NULL;
    size_t dl = strlen(lib->dir);
    if (slash && (size_t)(slash - name) == dl && strncmp(name, lib->dir, dl) == 0 &&
        strncmp(slash + 1, "libggml-cpu-", 12) == 0) {
        snprintf(lib->variant, sizeof lib->variant, "%.*s", (int)strcspn(slash + 4, "."),
                 slash + 4);
        return 1;
    }
    return 0;
}

static int load(lp_lib *lib, char *msg, size_t size)
{
    char path[1100];
    if (find_libllama(lib->dir, path, sizeof path)) {
        snprintf(msg, size, "no libllama*.so in %s (run scripts/install-deps.sh)", lib->dir);
        return -1;
    }
    lib->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib->dl) {
        const char *why = dlerror();
        snprintf(msg, size, "cannot load %s: %s", path, why ? why : "dlopen failed");
        return -1;
    }
    /* every member, resolved by its own name */
#define LP_SYM(f)                                                                     \
    do {                                                                              \
        void *s = dlsym(lib->dl, #f);                                                 \
        if (!s) {                                                                     \
            snprintf(msg, size, "%s: no symbol %s (not llama.cpp v0.5.0's ABI?)", path, #f); \
            return -1;                                                                \
        }                                                                             \
        memcpy(&lib->f, &s, sizeof s);                                                \
    } while (0)
    LP_SYM(llama_backend_init); LP_SYM(llama_log_set);
    LP_SYM(llama_model_default_params); LP_SYM(llama_context_default_params);
    LP_SYM(llama_model_load_from_file); LP_SYM(llama_model_free);
    LP_SYM(llama_init_from_model); LP_SYM(llama_free); LP_SYM(llama_n_ctx);
    LP_SYM(llama_model_n_layer); LP_SYM(llama_model_n_embd); LP_SYM(llama_model_n_head);
    LP_SYM(llama_model_n_head_kv); LP_SYM(llama_model_n_swa); LP_SYM(llama_model_meta_val_str);
    LP_SYM(llama_model_get_vocab); LP_SYM(llama_vocab_n_tokens); LP_SYM(llama_get_memory);
    LP_SYM(llama_memory_clear); LP_SYM(llama_memory_seq_rm); LP_SYM(llama_memory_seq_pos_max);
    LP_SYM(llama_memory_seq_cp);
    LP_SYM(llama_state_seq_get_size); LP_SYM(llama_state_seq_get_data);
    LP_SYM(llama_batch_init); LP_SYM(llama_batch_free); LP_SYM(llama_decode);
    LP_SYM(llama_synchronize);
    LP_SYM(llama_get_logits_ith); LP_SYM(llama_n_threads); LP_SYM(llama_print_system_info);
    LP_SYM(llama_attach_threadpool); LP_SYM(llama_detach_threadpool);
    LP_SYM(ggml_version); LP_SYM(ggml_commit); LP_SYM(ggml_nbytes); LP_SYM(ggml_nelements);
    LP_SYM(ggml_fp16_to_fp32_row); LP_SYM(ggml_bf16_to_fp32_row);
    LP_SYM(ggml_backend_tensor_get); LP_SYM(ggml_backend_tensor_set);
    LP_SYM(ggml_backend_load_all_from_path); LP_SYM(ggml_backend_dev_count);
    LP_SYM(ggml_backend_dev_get); LP_SYM(ggml_backend_dev_name);
    LP_SYM(ggml_backend_dev_description); LP_SYM(ggml_backend_dev_type);
    LP_SYM(ggml_backend_dev_backend_reg); LP_SYM(ggml_backend_reg_get_proc_address);
    LP_SYM(ggml_threadpool_params_default);
#undef LP_SYM
    lib->llama_log_set(on_log, lib); /* before loading backends: they log too */
    lib->ggml_backend_load_all_from_path(lib->dir);
    lib->llama_backend_init();
    /* the CPU backend's thread pool, as llama-bench reaches it */
    for (size_t i = 0; i < lib->ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t d = lib->ggml_backend_dev_get(i);
        if (lib->ggml_backend_dev_type(d) != GGML_BACKEND_DEVICE_TYPE_CPU)
            continue;
        ggml_backend_reg_t reg = lib->ggml_backend_dev_backend_reg(d);
        void *fn = lib->ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
        void *fr = lib->ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free");
        if (fn && fr) {
            memcpy(&lib->ggml_threadpool_new, &fn, sizeof fn);
            memcpy(&lib->ggml_threadpool_free, &fr, sizeof fr);
        }
        break;
    }
    dl_iterate_phdr(find_variant, lib);
    return 0;
}

int lp_lib_get(const char *dir, lp_lib **out, char *msg, size_t size)
{
    *out = NULL;
    pthread_mutex_lock(&loaded_lock);
    int rc = 0, i = 0;
    for (; i < LP_MAX_LIBS && loaded[i]; i++)
        if (strcmp(loaded[i]->dir, dir) == 0)
            break;
    if (i < LP_MAX_LIBS && loaded[i]) {
        *out = loaded[i];
    } else if (i == LP_MAX_LIBS) {
        snprintf(msg, size, "more than %d llama.cpp library folders in one process", LP_MAX_LIBS);
        rc = -1;
    } else {
        lp_lib *lib = calloc(1, sizeof *lib);
        if (!lib) {
            snprintf(msg, size, "out of memory");
            rc = -1;
        } else {
            snprintf(lib->dir, sizeof lib->dir, "%s", dir);
            lib->verbose = getenv("KVV_PLUGIN_VERBOSE") != NULL;
            if (load(lib, msg, size)) {
                /* a half-loaded set stays mapped (dlclose would not unmap ggml
                 * cleanly); it is just not offered again */
                free(lib);
                rc = -1;
            } else {
                loaded[i] = lib;
                *out = lib;
            }
        }
    }
    pthread_mutex_unlock(&loaded_lock);
    return rc;
}
