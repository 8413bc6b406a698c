/*
 * llama_impl.h — private to plugins/llama.cpp/: the engine state shared by
 * the plugin table (llama_plugin.c), the graph callback and passes
 * (llama_eval.c) and the cache read-back (llama_state.c).
 */
#ifndef KVV_LP_IMPL_H
#define KVV_LP_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "kvverify/engine_plugin.h"
#include "plugins/llama.cpp/llama_lib.h"

/* What the graph callback does during one llama_decode. */
typedef enum {
    LP_PASS_FORWARD,   /* hooks of kvverify's forward */
    LP_PASS_SCRATCH    /* kv_from_residual: inject h, capture K/V, stop */
} lp_pass_kind;

typedef struct {
    lp_pass_kind kind;
    const kvv_plugin_hooks *hooks;   /* FORWARD (may be NULL) */
    const int32_t *pos;              /* the call's positions */
    int n;                           /* the call's tokens */
    int done;                        /* tokens of the finished micro-batches */
    int ub;                          /* tokens of the current micro-batch */
    int layer;                       /* SCRATCH: the layer to recompute */
    const float *h;                  /* SCRATCH: [n][n_embd] residuals entering it */
    float *k, *v;                    /* SCRATCH: [n][kd], [n][vd] out */
    int captured;                    /* SCRATCH: rows of K/V captured */
    int k_layer, v_layer;            /* layer whose K / V of this micro-batch are held, or -1 */
    int status;                      /* first error inside the callback (KVV_PLUGIN_ERR_*) */
    char msg[256];
} lp_pass;

/* The cache as llama_state_seq_get_data serializes it, indexed. */
typedef struct {
    uint8_t *blob;
    size_t size, cap;
    uint64_t gen;                    /* == engine gen when current */
    int n_cells;
    const uint8_t *cells;            /* n_cells x {i32 pos; u32 n_seq; i32 seq[n_seq]} */
    int32_t *cell_pos;               /* [n_cells] */
    int v_trans;
    size_t k_row, v_el;              /* bytes per K row, per V element */
    const uint8_t **k_data;          /* [n_layer] -> n_cells rows */
    const uint8_t **v_data;          /* [n_layer] -> rows, or [vd][n_cells] elements */
} lp_state;

struct kvv_plugin_engine {
    lp_lib *lib;
    const kvv_plugin_host *host;
    struct llama_model *model;
    struct llama_context *ctx;       /* the engine */
    struct llama_context *scratch;   /* kv_from_residual's throwaway cache */
    struct llama_batch batch;        /* n_ctx tokens */
    char arch[32];
    char device[96];                 /* the device as ggml names it */
    char fa[16];                     /* requested flash attention: auto, on, off */
    int fa_seen;                     /* -1 unknown, 0 off, 1 on (seen in the graph) */
    bool extra_bufts;
    int n_layer, n_embd, n_head, n_head_kv, head_dim, head_dim_v, n_vocab, n_ctx;
    int kd, vd;                      /* n_head_kv * head_dim(_v) */
    int cache_type;                  /* KVV_PLUGIN_DTYPE_* */
    int n_threads, n_ubatch;
    uint64_t caps;
    const char *layer0_name;         /* the node holding the residual entering layer 0 */
    uint64_t gen;                    /* bumps whenever the cache may have changed */
    lp_pass pass;                    /* the callback's state during a decode */
    float *rows;                     /* [n_ubatch][max(n_embd, kd, vd, n_head*hd_v)] scratch */
    float *krows, *vrows;            /* [n_ubatch][kd|vd] one layer's K and V, held until
                                        both were written (backends order them differently) */
    uint8_t *cache_bytes;            /* one layer's cache tensor, read in the callback */
    size_t cache_bytes_cap;
    lp_state state;
};

/* The graph callback (ggml_backend_sched_eval_callback); user = the engine. */
bool lp_eval_cb(struct ggml_tensor *t, bool ask, void *user);

/* kvverify's forward / kv_from_residual over llama_decode (llama_eval.c). */
int lp_forward(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
               const kvv_plugin_hooks *hooks, int lm, float *logits, kvv_plugin_error *err);
int lp_kv_from_residual(kvv_plugin_engine *e, int layer, int n, const float *h,
                        const int32_t *pos, float *k, float *v, kvv_plugin_error *err);

/* The cache read back through llama_state_seq_get_data (llama_state.c). */
int lp_kv_read(kvv_plugin_engine *e, int layer, int pos0, int n, void *k, void *v,
               uint8_t *present, kvv_plugin_error *err);
void lp_state_free(lp_state *s);

/* printf into err->msg; @return code. */
int lp_fail(kvv_plugin_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Bytes per element of a cache dtype. */
static inline size_t lp_dtype_size(int dtype)
{
    return dtype == KVV_PLUGIN_DTYPE_F32 ? 4 : 2;
}

#endif
