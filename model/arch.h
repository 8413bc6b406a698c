/*
 * arch.h — architecture description: hyperparameters from GGUF metadata and
 * the binding of every tensor an architecture needs, with its shape checked.
 *
 * Supported: llama, qwen2, qwen3, gemma2, gemma3, phi3 (semantics: DESIGN.md
 * §7 and ../shared/peer/README.md "Architecture semantics"). Any other
 * general.architecture gives KVV_ERR_UNSUPPORTED (exit 77).
 *
 *   kvv_model *m; kvv_error err = {0};
 *   if (kvv_model_open("m.gguf", &m, &err)) { ...; return kvv_exit_code(err.status); }
 *   const kvv_hparams *hp = &m->hp;
 *   const kvv_gguf_tensor *wq = m->layers[0].wq;   // [n_embd -> n_head*head_dim]
 *   kvv_model_close(m);
 *
 * Tensor shape convention (GGUF): ne[0] is the row length = input dimension
 * of a projection; ne[1] = number of rows = output dimension. So attn_q has
 * ne = {n_embd, n_head*head_dim}.
 */
#ifndef KVV_ARCH_H
#define KVV_ARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "model/gguf.h"

typedef enum {
    KVV_ARCH_LLAMA,
    KVV_ARCH_QWEN2,
    KVV_ARCH_QWEN3,
    KVV_ARCH_GEMMA2,
    KVV_ARCH_GEMMA3,
    KVV_ARCH_PHI3,
    KVV_ARCH_COUNT
} kvv_arch_id;

typedef enum {
    KVV_ROPE_NORM = 0,  /* interleaved pairs (x[2i], x[2i+1]): llama */
    KVV_ROPE_NEOX = 2   /* halves (x[i], x[i+n_rot/2]): qwen2/3, gemma2/3, phi3 */
} kvv_rope_type;

typedef enum {
    KVV_ACT_SILU,       /* down(silu(gate x) * up x) */
    KVV_ACT_GELU_TANH   /* down(gelu_tanh(gate x) * up x): Gemma */
} kvv_ffn_act;

#define KVV_MAX_LAYERS 512

typedef struct {
    kvv_arch_id arch;
    const char *arch_name;   /* "llama", ... (static) */
    int n_layer;
    int n_embd;
    int n_head;
    int n_head_kv;
    int head_dim;            /* key_length when present, else n_embd/n_head */
    int head_dim_v;          /* value_length when present, else head_dim */
    int n_ff;
    int n_vocab;
    int n_ctx_train;
    /* RoPE */
    kvv_rope_type rope_type;
    int n_rot;               /* rope.dimension_count, default head_dim */
    float rope_base;         /* rope.freq_base (default 10000) */
    float rope_base_swa;     /* rope.freq_base_swa; gemma3 default 10000; else = rope_base */
    const float *rope_freqs; /* n_rot/2 factors from rope_freqs.weight, or NULL */
    /* norms and attention */
    float norm_eps;          /* attention.layer_norm_rms_epsilon */
    float attn_softcap;      /* 0 = off; gemma2 default 50 */
    float final_softcap;     /* 0 = off; gemma2 default 30 */
    float query_scale;       /* multiplier on q·k: 1/sqrt(head_dim) (gemma 27B rule included) */
    float embd_scale;        /* 1, or sqrtf(n_embd) for gemma */
    int n_swa;               /* sliding window, 0 = none (phi3: ignored like llama.cpp) */
    int swa_period;          /* sliding_window_pattern or arch default (gemma2 2, gemma3 6) */
    bool swa_layer[KVV_MAX_LAYERS]; /* layer il is local iff il % period < period - 1 */
    /* structure */
    kvv_ffn_act act;
    bool tied_output;        /* no output.weight (gemma2: always) */
    bool has_qkv_bias;       /* qwen2 */
    bool has_qk_norm;        /* qwen3, gemma3: per-head RMSNorm before RoPE */
    bool has_post_norms;     /* gemma2/3 sandwich norms */
    bool fused_qkv;          /* phi3 attn_qkv */
    bool fused_gate_up;      /* phi3 ffn_up holds gate|up */
} kvv_hparams;

/* Per-layer tensors (NULL where the architecture has none). Comments give
 * GGUF ne = {row length, rows}. */
typedef struct {
    const kvv_gguf_tensor *attn_norm;      /* {n_embd} */
    const kvv_gguf_tensor *wq;             /* {n_embd, n_head*head_dim} */
    const kvv_gguf_tensor *wk;             /* {n_embd, n_head_kv*head_dim} */
    const kvv_gguf_tensor *wv;             /* {n_embd, n_head_kv*head_dim_v} */
    const kvv_gguf_tensor *wqkv;           /* phi3: {n_embd, (n_head+2*n_head_kv)*head_dim} */
    const kvv_gguf_tensor *bq, *bk, *bv;   /* qwen2 biases: {rows} */
    const kvv_gguf_tensor *q_norm;         /* {head_dim} */
    const kvv_gguf_tensor *k_norm;         /* {head_dim} */
    const kvv_gguf_tensor *wo;             /* {n_head*head_dim_v, n_embd} */
    const kvv_gguf_tensor *post_attn_norm; /* gemma: {n_embd} */
    const kvv_gguf_tensor *ffn_norm;       /* {n_embd} */
    const kvv_gguf_tensor *w_gate;         /* {n_embd, n_ff} (NULL for phi3) */
    const kvv_gguf_tensor *w_up;           /* {n_embd, n_ff}; phi3 {n_embd, 2*n_ff} = gate|up */
    const kvv_gguf_tensor *w_down;         /* {n_ff, n_embd} */
    const kvv_gguf_tensor *post_ffw_norm;  /* gemma: {n_embd} */
} kvv_layer_tensors;

typedef struct {
    kvv_gguf *gguf;                  /* owned */
    kvv_hparams hp;
    const kvv_gguf_tensor *tok_embd;    /* {n_embd, n_vocab} */
    const kvv_gguf_tensor *output_norm; /* {n_embd} */
    const kvv_gguf_tensor *output;      /* {n_embd, n_vocab}; = tok_embd when tied */
    kvv_layer_tensors *layers;          /* n_layer entries (owned) */
    float *rope_freqs_buf;              /* private: backing store of hp.rope_freqs */
} kvv_model;

/* Open, validate and bind a model. Errors: KVV_ERR_IO / KVV_ERR_FORMAT
 * (file problems, missing or misshaped tensor: "FILE: tensor NAME: expected
 * shape {a,b}, found {c,d}"), KVV_ERR_UNSUPPORTED (architecture). The
 * header's pages leave the resident set once it is read (kvv_gguf_drop_pages):
 * a later reader of its strings (the tokenizer) faults them back in. */
kvv_status kvv_model_open(const char *path, kvv_model **out, kvv_error *err);
/* Bind an already opened file; on success the model owns g. */
kvv_status kvv_model_from_gguf(kvv_gguf *g, kvv_model **out, kvv_error *err);
void kvv_model_close(kvv_model *m); /* accepts NULL */

/* Read only the hyperparameters (no tensor binding), e.g. for `info`. */
kvv_status kvv_hparams_read(const kvv_gguf *g, kvv_hparams *hp, kvv_error *err);

/* "llama" -> KVV_ARCH_LLAMA. @return false if unsupported. */
bool kvv_arch_from_name(const char *name, kvv_arch_id *out);
const char *kvv_arch_name(kvv_arch_id a);

/* RoPE base for layer il (freq_base_swa on local layers). */
float kvv_hparams_rope_base(const kvv_hparams *hp, int il);

/* Per-token memory of the paper's claim, in bytes (DESIGN.md §4 memory). */
typedef struct {
    uint64_t kv_f32, kv_f16, kv_bf16;    /* K+V per token over all layers */
    uint64_t resid_f32, resid_bf16;      /* one residual vector (n_embd) per token */
    uint64_t resid_layers_f32, resid_layers_bf16; /* a residual per layer per token */
} kvv_token_memory;
void kvv_token_memory_of(const kvv_hparams *hp, kvv_token_memory *out);

#endif
