/*
 * shapes.h — named model shapes: the layer geometry and hyperparameters of
 * small test models and of real models, for `kvverify synth` (random-weight
 * files of that shape) and `kvverify info --shape` (the per-token memory
 * table without a file).
 *
 *   const kvv_shape *s = kvv_shape_find("gemma3-4b");
 *   kvv_hparams hp;
 *   kvv_shape_hparams(s, 0, &hp);        // 0 = the shape's default vocabulary
 *   kvv_token_memory mem;
 *   kvv_token_memory_of(&hp, &mem);      // 136 KiB bf16 K/V per token
 *
 * Two kinds of shape:
 *   - "ARCH-tiny" for each architecture: 2-4 layers, n_embd 64-128, GQA,
 *     vocabulary 512, like the llama.cpp peer models in ../shared/peer
 *     (same widths, rope bases, windows and synthetic-weight gains), and
 *     llama-k256, a tiny llama whose rows are all multiples of 256 so the
 *     K-quant types apply to every projection;
 *   - real layer shapes (smollm2-135m, qwen2.5-0.5b, qwen3-0.6b,
 *     llama-3.2-1b, gemma3-1b, gemma3-4b) taken from the models' public
 *     config.json. Their vocabulary defaults to at most 32000 tokens
 *     (KVV_SHAPE_VOCAB_CAP), because a 262144-token F32 embedding alone is a
 *     gigabyte; smollm2-135m keeps its real 49152 so that benchmarks compare
 *     like with like. The real vocabulary size is in `real_vocab`.
 *
 * Everything here is a const table: pointers are static and never freed.
 */
#ifndef KVV_SHAPES_H
#define KVV_SHAPES_H

#include <stdbool.h>

#include "model/arch.h"

/* Vocabulary cap for the default vocabulary of real shapes. */
#define KVV_SHAPE_VOCAB_CAP 32000

typedef struct {
    const char *name;        /* "smollm2-135m", "qwen3-tiny", ... */
    kvv_arch_id arch;
    const char *about;       /* one line: what the shape is */
    /* geometry */
    int n_layer;
    int n_embd;
    int n_head;
    int n_head_kv;
    int head_dim;            /* written as key_length/value_length when write_head_dim */
    bool write_head_dim;     /* converter writes attention.key_length/value_length */
    int n_ff;
    int n_vocab;             /* default vocabulary of `synth` (see above) */
    int real_vocab;          /* the real model's vocabulary */
    int n_ctx_train;
    /* RoPE and norms */
    float rope_base;
    float rope_base_swa;     /* 0: key not written */
    float norm_eps;
    /* Llama-3 rope scaling, written as rope_freqs.weight (factor 0: none) */
    float rope_factor;
    float rope_low_freq;
    float rope_high_freq;
    int rope_orig_ctx;
    /* attention */
    int n_swa;               /* attention.sliding_window; 0: key not written */
    int swa_pattern;         /* attention.sliding_window_pattern; 0: not written */
    float attn_softcap;      /* 0: key not written */
    float final_softcap;     /* 0: key not written */
    bool tied;               /* no output.weight */
    /* synthetic-weight gains (../shared/peer/README.md "How the synthetic
     * weights were chosen"): linear N(0, 1/fan_in); q/k times qk_gain;
     * attn_output/ffn_down (Gemma: the post norms) times res_gain;
     * output_norm times out_gain; qk norms times qk_norm_gain; biases
     * N(0, bias_scale^2); embedding rows times exp(emb_tau * N(0,1) - emb_tau^2). */
    float res_gain;
    float out_gain;
    float qk_gain;
    float qk_norm_gain;
    float bias_scale;
    float emb_tau;
} kvv_shape;

/* Shape by name (case-sensitive). @return NULL if unknown. Static. */
const kvv_shape *kvv_shape_find(const char *name);

/* Number of shapes and the i-th (0 <= i < count), in table order. */
int kvv_shape_count(void);
const kvv_shape *kvv_shape_at(int i);

/* The default ("ARCH-tiny") shape of an architecture. Never NULL for a
 * valid id. */
const kvv_shape *kvv_shape_default(kvv_arch_id arch);

/* Comma-separated list of every shape name into buf (for messages). */
void kvv_shape_list(char *buf, unsigned size);

/* Fill hp as kvv_hparams_read would for a file of this shape, with
 * n_vocab = vocab (0: the shape's default). rope_freqs stays NULL (the
 * factors are in the file only). */
void kvv_shape_hparams(const kvv_shape *s, int vocab, kvv_hparams *hp);

#endif
