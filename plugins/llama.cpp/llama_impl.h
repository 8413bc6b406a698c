/*
 * llama_impl.h — private to plugins/llama.cpp/: the engine state shared by
 * the plugin table (llama_plugin.c), the graph callback and passes
 * (llama_eval.c), the cache read-back through llama.cpp's serialization
 * (llama_state.c) and the cache as tensors: cells, in-place writes, the
 * split sliding-window cache (llama_cells.c).
 */
#ifndef KVV_LP_IMPL_H
#define KVV_LP_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "kvverify/engine_plugin.h"
#include "plugins/llama.cpp/llama_lib.h"

/* Sequences one engine serves at most (params.n_seq_max). */
#define KVV_LP_MAX_SEQS 64

/* What the graph callback does during one llama_decode. */
typedef enum {
    LP_PASS_FORWARD,   /* hooks of kvverify's forward */
    LP_PASS_SCRATCH,   /* kv_from_residual: inject h, capture K/V, stop */
    LP_PASS_PROBE,     /* open: one token through the scratch context, to see the graph */
    LP_PASS_DECODE     /* several sequences (llama_seqs.c): nothing watched */
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
    int n_ubs;                       /* micro-batches seen; ub_start[] holds where each began */
    struct ggml_tensor *sk, *sv;     /* SCRATCH off the CPU: the layer's cache tensors */
    bool sv_trans;
    int status;                      /* first error inside the callback (KVV_PLUGIN_ERR_*) */
    char msg[256];
} lp_pass;

/* Where llama.cpp keeps each position: the cache tensors of every layer, as
 * the graph's cache writes name them, and the cell each position was
 * written to (read from the index tensor of every forward's cache writes).
 * A cell holds one position of every layer of its cache; a model with a
 * split sliding-window cache (gemma2, gemma3) has two caches with cells of
 * their own, so the maps are per layer. */
typedef struct {
    struct ggml_tensor **k, **v;     /* [n_layer] the cache tensors (NULL until seen) */
    uint8_t *v_trans;                /* [n_layer] V stored element-major (flash attention off) */
    int32_t *cell;                   /* [n_layer][n_ctx] position -> cell, -1 = none */
    int32_t **pos_of;                /* [n_layer] -> [n_cells] cell -> position, -1 = free */
    int *n_cells;                    /* [n_layer] cells of the layer's cache */
    uint8_t *buf;                    /* one layer's K or V tensor, read for kv_read */
    size_t buf_cap;
    uint8_t **kw, **vw;              /* [n_layer] a layer's K / V tensor being written
                                        (kv_write), NULL = none pending */
    uint8_t **dirty;                 /* [n_layer] -> [n_cells] cells written since */
    int n_layer;                     /* of the arrays above */
} lp_cells;

/* The cache as llama_state_seq_get_data serializes it, indexed. */
typedef struct {
    uint8_t *blob;
    size_t size, cap;
    uint64_t gen;                    /* == engine gen when current */
    int seq;                         /* the sequence serialized */
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
    bool bench;                      /* bench=1: the engine's context as llama-bench makes it:
                                        no graph callback (nothing observed), n_batch 2048,
                                        swa_full off, a ggml thread pool attached; no hooks */
    struct ggml_threadpool *threadpool; /* bench on the CPU: the pool the context computes on */
    int n_batch;                     /* tokens per llama_decode (bench: 2048, capped by n_ctx) */
    int n_seq_max;                   /* sequences the context serves (params.n_seq_max) */
    int kv_unified;                  /* llama_context_params.kv_unified as opened (0/1) */
    /* kv_unified 0: llama.cpp copies a seq_cp's rows between streams at its
     * next decode; until then the destination's state reads its old rows, so
     * kv_read_seq reads them from the source: copy_src[dst] (-1: no copy
     * pending, -2: pending but changed since, not readable), positions below
     * copy_end[dst] */
    int copy_src[KVV_LP_MAX_SEQS];
    int copy_end[KVV_LP_MAX_SEQS];
    uint64_t caps;
    const char *layer0_name;         /* the node holding the residual entering layer 0 */
    uint64_t gen;                    /* bumps whenever the cache may have changed */
    lp_pass pass;                    /* the callback's state during a decode */
    lp_cells cells;                  /* the cache tensors and the cell of every position */
    bool split_cache;                /* a sliding-window cache beside the full one */
    bool on_cpu;                     /* the CPU backend: cache-write nodes are observed where
                                        they write, and kv_from_residual stops the graph once
                                        it has its layer. Elsewhere (ggml-vulkan over
                                        lavapipe) the graph is never split after a V write
                                        nor cut short — both corrupted or crashed it — and
                                        K/V are read from the cache tensors after the decode */
    int *ub_start;                   /* [n_ctx] first token of each micro-batch of a call */
    int64_t *scratch_cells;          /* [n_ctx] cells kv_from_residual's rows went to */
    float *rows;                     /* [n_ubatch][max(n_embd, kd, vd, n_head*hd_v)] scratch */
    float *krows, *vrows;            /* [n_ubatch][kd|vd] one layer's K and V, held until
                                        both were written (backends order them differently) */
    uint8_t *cache_bytes;            /* one layer's cache tensor, read in the callback */
    size_t cache_bytes_cap;
    float *attn;                     /* kq_soft_max read back, then the hook's rows */
    size_t attn_cap;                 /* floats */
    int32_t *key_pos;                /* [n_ctx] the attention hook's keys */
    lp_state state;
    struct {
        uint64_t seen;               /* KVV_PLUGIN_OP_* bits the probe found (info.ops) */
        unsigned bias;               /* ops whose product gets a bias added (the ADD is it) */
        int layer;                   /* layer of the last node named "X-L" */
        int n_ff;                    /* feed_forward_length (-1: not in the file) */
        bool on;                     /* the host speaks ABI 1.1: op taps offered */
        float *rows;                 /* one op node read back */
        size_t cap;                  /* floats */
    } ops;                           /* op taps (llama_ops.c) */
};

/* Op taps (llama_ops.c): the probe's look at node t (ask phase); whether
 * a forward wants node t as an op tap; the tap of computed node t (false
 * after recording an error in the pass); which ops were found, as text. */
void lp_ops_probe(kvv_plugin_engine *e, const struct ggml_tensor *t);
bool lp_ops_want(kvv_plugin_engine *e, const struct ggml_tensor *t);
bool lp_ops_emit(kvv_plugin_engine *e, const struct ggml_tensor *t);
void lp_ops_describe(const kvv_plugin_engine *e, char *buf, size_t size);

/* The graph callback (ggml_backend_sched_eval_callback); user = the engine. */
bool lp_eval_cb(struct ggml_tensor *t, bool ask, void *user);

/* kvverify's forward / kv_from_residual over llama_decode (llama_eval.c). */
int lp_forward(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
               const kvv_plugin_hooks *hooks, int lm, float *logits, kvv_plugin_error *err);
int lp_kv_from_residual(kvv_plugin_engine *e, int layer, int n, const float *h,
                        const int32_t *pos, float *k, float *v, kvv_plugin_error *err);
/* One token through the scratch context (made as the engine's), watching
 * nothing: sets fa_seen (what flash_attn=auto chose). */
int lp_probe(kvv_plugin_engine *e, kvv_plugin_error *err);

/* The cache read back (llama_state.c): through llama_state_seq_get_data, or
 * for a split cache through the cache tensors (lp_cells_read). */
int lp_kv_read(kvv_plugin_engine *e, int layer, int pos0, int n, void *k, void *v,
               uint8_t *present, kvv_plugin_error *err);
void lp_state_free(lp_state *s);
/* kv_read of sequence seq (the same serialization; not for a split cache's
 * sequences other than 0). */
int lp_kv_read_seq(kvv_plugin_engine *e, int seq, int layer, int pos0, int n, void *k, void *v,
                   uint8_t *present, kvv_plugin_error *err);

/* Sequences (llama_seqs.c): one llama_batch with sequence ids per decode
 * call, llama_memory_seq_rm / llama_memory_seq_cp. Positions of sequence 0
 * a call stores or receives lose their cell in the maps (their cells are
 * not watched): kv_write refuses them rather than write a stale cell. */
int lp_decode(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
              const int32_t *seq, const uint8_t *want, float *logits, kvv_plugin_error *err);
int lp_seq_rm(kvv_plugin_engine *e, int seq, int p0, int p1, kvv_plugin_error *err);
int lp_seq_cp(kvv_plugin_engine *e, int src, int dst, int p0, int p1, kvv_plugin_error *err);
/* No stream copy pending (open, and every llama_decode: it applies them). */
void lp_copies_done(kvv_plugin_engine *e);

/* The cache as tensors (llama_cells.c). lp_cells_init sizes the maps (all
 * empty); lp_cells_seen records layer's cache tensors from a cache write
 * node (SET_ROWS) met in the graph; lp_cells_store records that the ub
 * rows at positions pos[] of layer went to cells cell[]; lp_cells_forget
 * drops position pos (-1: every position) from every layer. */
int lp_cells_init(kvv_plugin_engine *e);
void lp_cells_free(lp_cells *c);
void lp_cells_seen(kvv_plugin_engine *e, const struct ggml_tensor *t, int layer, bool is_k);
void lp_cells_store(kvv_plugin_engine *e, int layer, int ub, const int32_t *pos,
                    const int64_t *cell);
void lp_cells_forget(kvv_plugin_engine *e, int pos);
/* kv_write: one position's K and V rows (cache dtype) written in place into
 * the cell llama.cpp holds it in; UNSUPPORTED when it holds none. Writes
 * gather in a host copy of the layer's tensors, sent by lp_cells_flush (the
 * written rows; element-major V as a whole tensor: one transfer, not one
 * per element), which every call that reads or changes the cache runs
 * first. */
int lp_kv_write(kvv_plugin_engine *e, int layer, int pos, const void *k, const void *v,
                kvv_plugin_error *err);
void lp_cells_flush(kvv_plugin_engine *e);
/* kv_read from the cache tensors (what a split cache needs: its
 * serialization leaves sliding-window-masked cells out). */
int lp_cells_read(kvv_plugin_engine *e, int layer, int pos0, int n, void *k, void *v,
                  uint8_t *present, kvv_plugin_error *err);

/* printf into err->msg; @return code. */
int lp_fail(kvv_plugin_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Bytes per element of a cache dtype. */
static inline size_t lp_dtype_size(int dtype)
{
    return dtype == KVV_PLUGIN_DTYPE_F32 ? 4 : 2;
}

#endif
