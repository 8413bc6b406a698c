/*
 * llama_lib.h — llama.cpp's prebuilt libraries, loaded at run time.
 *
 * The plugin is built against llama.cpp's headers only and links nothing
 * of it: each device's library set (deps/llama.cpp/linux-x64 for the CPU,
 * linux-x64-vulkan, linux-x64-cuda) is dlopened on first use and its
 * functions are reached through an lp_lib table. A set stays loaded for
 * the life of the process: ggml registers its backends globally and cannot
 * unregister them, so there is at most one lp_lib per folder.
 *
 *   lp_lib *lib;
 *   if (lp_lib_get("/path/deps/llama.cpp/linux-x64", &lib, msg, sizeof msg)) ...
 *   struct llama_model *m = lib->llama_model_load_from_file(path, mp);
 */
#ifndef KVV_LP_LIB_H
#define KVV_LP_LIB_H

#include <stdbool.h>
#include <stddef.h>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "llama.h"

/* One member per function, named and typed as llama.h / ggml.h declare it. */
#define LP_FN(f) __typeof__(f) *f
typedef struct {
    char dir[1024];          /* the folder the set was loaded from */
    void *dl;                /* libllama*.so, its dependencies resolved through it */
    char variant[64];        /* the ggml CPU variant that got loaded, e.g. "ggml-cpu-zen4" */
    char last_error[256];    /* llama.cpp's last error log line */
    bool verbose;            /* print llama.cpp's log on stderr */
    /* llama.h */
    LP_FN(llama_backend_init);
    LP_FN(llama_log_set);
    LP_FN(llama_model_default_params);
    LP_FN(llama_context_default_params);
    LP_FN(llama_model_load_from_file);
    LP_FN(llama_model_free);
    LP_FN(llama_init_from_model);
    LP_FN(llama_free);
    LP_FN(llama_n_ctx);
    LP_FN(llama_model_n_layer);
    LP_FN(llama_model_n_embd);
    LP_FN(llama_model_n_head);
    LP_FN(llama_model_n_head_kv);
    LP_FN(llama_model_n_swa);
    LP_FN(llama_model_meta_val_str);
    LP_FN(llama_model_get_vocab);
    LP_FN(llama_vocab_n_tokens);
    LP_FN(llama_get_memory);
    LP_FN(llama_memory_clear);
    LP_FN(llama_memory_seq_rm);
    LP_FN(llama_memory_seq_cp);
    LP_FN(llama_memory_seq_pos_max);
    LP_FN(llama_state_seq_get_size);
    LP_FN(llama_state_seq_get_data);
    LP_FN(llama_batch_init);
    LP_FN(llama_batch_free);
    LP_FN(llama_decode);
    LP_FN(llama_synchronize);
    LP_FN(llama_get_logits_ith);
    LP_FN(llama_n_threads);
    LP_FN(llama_print_system_info);
    LP_FN(llama_attach_threadpool);
    LP_FN(llama_detach_threadpool);
    /* ggml.h, ggml-backend.h */
    LP_FN(ggml_version);
    LP_FN(ggml_commit);
    LP_FN(ggml_nbytes);
    LP_FN(ggml_nelements);
    LP_FN(ggml_fp16_to_fp32_row);
    LP_FN(ggml_bf16_to_fp32_row);
    LP_FN(ggml_backend_tensor_get);
    LP_FN(ggml_backend_tensor_set);
    LP_FN(ggml_backend_load_all_from_path);
    LP_FN(ggml_backend_dev_count);
    LP_FN(ggml_backend_dev_get);
    LP_FN(ggml_backend_dev_name);
    LP_FN(ggml_backend_dev_description);
    LP_FN(ggml_backend_dev_type);
    LP_FN(ggml_backend_dev_backend_reg);
    LP_FN(ggml_backend_reg_get_proc_address);
    LP_FN(ggml_threadpool_params_default);
    /* ggml-cpu.h, from the CPU backend's registry (NULL where it offers none) */
    LP_FN(ggml_threadpool_new);
    LP_FN(ggml_threadpool_free);
} lp_lib;
#undef LP_FN

/* The library set in folder dir, loaded on first use (borrowed; lives as
 * long as the process). @return 0, or -1 with msg set: the folder or a
 * library in it missing, a symbol absent. */
int lp_lib_get(const char *dir, lp_lib **out, char *msg, size_t size);

#endif
