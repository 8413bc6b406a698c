/*
 * runtime.h — what every engine shares, whichever engine it is: KV cache
 * storage types, forward-pass hooks, which logits to return, and the flags
 * an engine's options carry (negative controls, llama.cpp emulation). The
 * engine interface (engine/engine.h), the reference engine (reference/ref.h)
 * and the cpu engine (engine/cpu/) all build on this layer and on the host
 * KV cache beside it (runtime/kv_cache.h); it sits between model/ and
 * reference/, so no engine needs the reference folder for its types.
 */
#ifndef KVV_RUNTIME_H
#define KVV_RUNTIME_H

#include <stdint.h>

/* Storage dtype of the KV cache (llama.cpp's -ctk/-ctv): values are rounded
 * (nearest even) when stored and read back as the rounded fp32 value. */
typedef enum {
    KVV_CACHE_F32 = 0,
    KVV_CACHE_F16 = 1,
    KVV_CACHE_BF16 = 2
} kvv_cache_type;

const char *kvv_cache_type_name(kvv_cache_type t);          /* "f32" ... */
int kvv_cache_type_from_name(const char *s, kvv_cache_type *out); /* 1 on success */

/* Negative-control switches (bit flags) a check may turn on to prove it can
 * fail. Never set in normal runs; recorded in the engine description. */
enum {
    KVV_CTL_KV_REVERSED_SUM = 1u << 0, /* kv_from_residual sums its dot products in reverse order */
    KVV_CTL_PERTURB_WEIGHT  = 1u << 1, /* flip the lowest mantissa bit of one weight (output_norm[0]) */
};

/* Optional emulation of llama.cpp's CPU shortcuts (bit flags, kvv_engine_opts.ggml;
 * 0 by default = plain fp32 on exactly dequantized weights). Still
 * deterministic and batch-invariant; see reference/ref_ggml.c. Only an engine
 * that emulates llama.cpp honours them (the reference); the registry's
 * options table (engine/engine_registry.c) refuses them for the others. */
enum {
    KVV_GGML_GELU_FP16 = 1u << 0, /* GELU through ggml's fp16 lookup table */
    KVV_GGML_ACT_QUANT = 1u << 1, /* activations rounded to fp16 before F16 matmuls and
                                     quantized to Q8_0 before Q8_0 matmuls (vec_dot_type) */
    KVV_GGML_KQ_ACT = 1u << 2,    /* activations rounded to Q8_K before Q2_K..Q6_K matmuls
                                     and to Q8_1 before Q4_1/Q5_1 (vec_dot_type) */
    KVV_GGML_Q40_ACT = 1u << 3,   /* activations quantized to Q8_0 before the layers'
                                     Q4_0/Q5_0 matmuls (vec_dot_type); the output head
                                     keeps fp32 ones (the cpu engine's X16 products;
                                     llama.cpp rounds there too, so --emulate-ggml
                                     leaves this off) */
    KVV_GGML_Q80_ACT = 1u << 4,   /* the same for the layers' Q8_0 matmuls (the cpu
                                     engine's X16 Q8_0, both modes; ACT_QUANT, which
                                     llama.cpp's emulation sets, covers the head and
                                     F16 too) */
};

/* Which rows of logits forward() writes. */
typedef enum {
    KVV_LOGITS_NONE = 0, /* no logits (logits may be NULL) */
    KVV_LOGITS_LAST = 1, /* one row: the last token of the batch */
    KVV_LOGITS_ALL = 2   /* n rows, one per token of the batch */
} kvv_logits_mode;

/*
 * Hooks, all optional (NULL = not called), called during forward() in layer
 * order. Arrays are row-major, one row per token of the current batch, and
 * valid only during the call. `pos` are the batch's positions.
 */
typedef struct {
    void *user;
    /* Residual stream h_l ENTERING layer `layer` (layer 0 = scaled token
     * embeddings), [n][n_embd]. Writable: an overwrite is patching and the
     * pass continues from the new values. Also called once with layer ==
     * n_layer for the final residual before the output norm. */
    void (*residual)(void *user, int layer, int n, const int32_t *pos, float *h);
    /* K and V of the batch exactly as stored in the cache (after q/k norm,
     * RoPE and rounding to the cache dtype, widened back to fp32),
     * k: [n][n_head_kv*head_dim], v: [n][n_head_kv*head_dim_v]. */
    void (*kv)(void *user, int layer, int n, const int32_t *pos, const float *k, const float *v);
    /* Attention probabilities after softmax: p[(i*n_head + h)*n_keys + j] for
     * query i, head h, over the n_keys cache entries key_pos[0..n_keys) (all
     * positions the batch could see, ascending); masked or evicted entries
     * are exactly 0. */
    void (*attn)(void *user, int layer, int n, const int32_t *pos, int n_keys,
                 const int32_t *key_pos, const float *p);
    /* Attention output before the output projection, [n][n_head*head_dim_v]. */
    void (*attn_out)(void *user, int layer, int n, const int32_t *pos, const float *o);
    /* Per-query key selection (non-evicting policies such as Quest): called
     * for query position qpos and query head `head` after its q is final
     * (q/k norm and RoPE applied; q: [head_dim]) and before the scores, with
     * the n_keys candidate positions key_pos[] (present, causal, inside the
     * window; ascending). Clearing keep[j] (all 1 on entry) excludes key j
     * from this query's softmax, exactly as if it were absent. */
    void (*select)(void *user, int layer, int qpos, int head, const float *q, int n_keys,
                   const int32_t *key_pos, uint8_t *keep);
    /* Op taps (KVV_ENGINE_CAP_OP_TAPS): the output of operation `op`
     * (KVV_TAP_*, runtime/op_taps.h: the plugin ABI's KVV_PLUGIN_OP_* values)
     * of layer `layer` (n_layer for the final norm and the head), x
     * [n][width], once per op per layer in data-flow order. Read-only:
     * observing must not change a bit of the pass. */
    void (*op)(void *user, int layer, int op, int n, const int32_t *pos, int width,
               const float *x);
} kvv_hooks;

#endif
