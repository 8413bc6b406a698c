/*
 * synth.h — random-weight GGUF models of every supported architecture.
 *
 * A synthetic model has exactly the tensor names, shapes and metadata keys
 * llama.cpp's converter writes for its architecture (so llama.cpp loads it),
 * a complete SentencePiece ("llama") tokenizer of the requested size, and
 * weights drawn from a seeded generator implemented here (PCG32 + Marsaglia's
 * polar method with kvverify's own log/exp, no libm transcendental), so the
 * same options give byte-identical files on every machine.
 *
 *   kvv_synth_opts o = {.shape = kvv_shape_find("qwen3-tiny"),
 *                       .type = KVV_TYPE_Q8_0, .seed = 1};
 *   kvv_error err = {0};
 *   if (kvv_synth_write(&o, "qwen3.gguf", &err)) { puts(err.msg); ... }
 *
 * Weight scheme (../shared/peer/README.md, "How the synthetic weights were
 * chosen"; the gains are per shape, see shapes.h):
 *   token_embd      N(0,1) rows (Gemma: N(0,1/n_embd), rows times
 *                   exp(emb_tau*N(0,1) - emb_tau^2) when emb_tau > 0:
 *                   log-normal row scales of mean square 1)
 *   linear weights  N(0, 1/fan_in); attn_q/attn_k (and the q/k rows of phi3's
 *                   attn_qkv) times qk_gain; attn_output/ffn_down times
 *                   res_gain except for Gemma
 *   norms           1 + 0.1 N(0,1); output_norm times out_gain; Gemma's post
 *                   norms times res_gain; q/k norms times qk_norm_gain
 *   biases (qwen2)  N(0, bias_scale^2)
 *   rope_freqs      the Llama-3 factors (as the converter computes them)
 * Each tensor has its own stream, seeded from (seed, tensor name).
 *
 * Types (synth_mix.c): F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1 and
 * Q2_K..Q6_K for token_embd, output and every projection, and the mixes
 * Q4_K_M and Q5_K_M (llama-quantize's per-tensor choices); a row length
 * the type's block does not divide takes llama-quantize's fallback (F16
 * for the 32-element types; Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
 * Q2_K/Q3_K -> IQ4_NL); norms, biases and rope_freqs are always F32.
 */
#ifndef KVV_SYNTH_H
#define KVV_SYNTH_H

#include <stdint.h>

#include "common/error.h"
#include "model/gguf.h"
#include "model/shapes.h"
#include "model/tensor_types.h"

/* Smallest vocabulary: <unk>, <s>, </s>, 256 byte tokens and "▁". */
#define KVV_SYNTH_MIN_VOCAB 260
#define KVV_SYNTH_MAX_VOCAB (1 << 22)

/* llama-quantize's mixes: per-tensor types around a default type. */
typedef enum {
    KVV_SYNTH_PLAIN = 0,  /* every quantized tensor in `type` (fallbacks aside) */
    KVV_SYNTH_Q4_K_M,     /* type Q4_K; attn_v and ffn_down of some layers and
                           * the output Q6_K, attn_qkv Q5_K */
    KVV_SYNTH_Q5_K_M,     /* type Q5_K; the same layers Q6_K, attn_qkv Q6_K */
} kvv_synth_mix;

typedef struct {
    const kvv_shape *shape;  /* required */
    kvv_type type;           /* kvv_synth_type_ok; Q4_K / Q5_K with the mixes */
    kvv_synth_mix mix;       /* default KVV_SYNTH_PLAIN */
    uint64_t seed;
    int n_vocab;             /* 0: the shape's default */
    /* (optional) called after each tensor: done of total tensors */
    void (*progress)(void *ctx, int done, int total);
    void *progress_ctx;
} kvv_synth_opts;

/* Is t a type synth can write? */
bool kvv_synth_type_ok(kvv_type t);

/* --type names: "f32" ... "q6_k" (case-insensitive) and "q4_k_m",
 * "q5_k_m". @return true and *t, *mix on success. */
bool kvv_synth_type_parse(const char *name, kvv_type *t, kvv_synth_mix *mix);
/* "Q8_0", "Q4_K_M", ...: the name of a (type, mix); static storage. */
const char *kvv_synth_type_label(kvv_type t, kvv_synth_mix mix);
/* The names --type accepts, for messages: "f32, f16, ..., q5_k_m". */
#define KVV_SYNTH_TYPE_NAMES                                                                     \
    "f32, f16, bf16, q8_0, q4_0, q5_0, q4_1, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, q4_k_m, q5_k_m"

/* llama_ftype (general.file_type) of a file of (t, mix). */
uint32_t kvv_synth_file_type(kvv_type t, kvv_synth_mix mix);

/* The type llama-quantize would give the quantized tensor `name` (rows of
 * ne0 elements) in a file of (t, mix) over n_layer layers, has_output:
 * whether the model has an output.weight of its own (otherwise the
 * embedding is the output, and takes the output's type). Plain types:
 * t with the fallbacks above. The mixes: llama-quantize's
 * llama_tensor_get_type for Q4_K_M / Q5_K_M (use_more_bits layers:
 * i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2). */
kvv_type kvv_synth_tensor_type(kvv_type t, kvv_synth_mix mix, const char *name, int64_t ne0,
                               int n_layer, bool has_output);

/* Build the model into a new writer (caller frees with
 * kvv_gguf_writer_free). Errors: KVV_ERR_USAGE (bad type or vocabulary),
 * KVV_ERR_NOMEM. */
kvv_status kvv_synth_build(const kvv_synth_opts *o, kvv_gguf_writer **out, kvv_error *err);

/* Build and write to path atomically (nothing is left behind on failure). */
kvv_status kvv_synth_write(const kvv_synth_opts *o, const char *path, kvv_error *err);

/* Bytes of tensor data (each tensor padded to the alignment) of the file
 * kvv_synth_write would produce; the metadata comes on top. 0 on bad opts. */
uint64_t kvv_synth_size(const kvv_synth_opts *o);

/* ---------------------------------------------------------------- vocab
 * The synthetic SentencePiece vocabulary of n tokens: 0 <unk> (type 2
 * unknown), 1 <s> and 2 </s> (type 3 control), 3..258 <0x00>..<0xFF> (type
 * 6 byte), then normal pieces (type 1): "▁", printable ASCII characters,
 * "▁" + each, then lowercase words of 2, 3, ... letters, each as "▁word"
 * and "word". All unique. Scores: 0 for special and byte tokens, -k for the
 * k-th normal piece. */
typedef struct {
    int n;
    char **tokens;     /* n NUL-terminated strings */
    float *scores;     /* n */
    int32_t *types;    /* n */
} kvv_synth_vocab;

/* @return KVV_OK, KVV_ERR_USAGE for n out of range, KVV_ERR_NOMEM. Free
 * with kvv_synth_vocab_free. */
kvv_status kvv_synth_vocab_build(int n, kvv_synth_vocab *v, kvv_error *err);
void kvv_synth_vocab_free(kvv_synth_vocab *v); /* accepts NULL and a zeroed struct */

#endif
