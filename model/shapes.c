/*
 * shapes.c — the table of named shapes (see shapes.h).
 *
 * Tiny shapes copy the geometry, hyperparameters and weight gains of the
 * llama.cpp peer models (../shared/peer/README.md, "Models" and "How the
 * synthetic weights were chosen"). Real shapes copy the models' public
 * Hugging Face config.json (hidden_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
 * rope_theta, rope_local_base_freq, rms_norm_eps, sliding_window,
 * rope_scaling, max_position_embeddings, vocab_size, tie_word_embeddings).
 * Their gains were chosen by measurement (docs/synth.md): with the tiny
 * models' res_gain of 8, deep random models (16-34 layers) fall into
 * repeating one token, so real shapes use res_gain 32; out_gain is scaled
 * so the logit spread is close to the tiny models' (tied non-Gemma logits
 * grow like out_gain * sqrt(n_embd)); qwen2.5-0.5b also needs qk_gain 3.
 */
#include "model/shapes.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define E5 1e-5f
#define E6 1e-6f

static const kvv_shape shapes[] = {
    /* ---- tiny shapes: one per architecture (peer models' settings) ---- */
    {.name = "llama-tiny", .arch = KVV_ARCH_LLAMA,
     .about = "SmolLM2-like llama, GQA 6/2, tied (as the peer's synth-llama-gqa)",
     .n_layer = 3, .n_embd = 96, .n_head = 6, .n_head_kv = 2, .head_dim = 16, .n_ff = 256,
     .n_vocab = 512, .real_vocab = 512, .n_ctx_train = 2048, .rope_base = 100000.0f,
     .norm_eps = E5, .tied = true,
     .res_gain = 8, .out_gain = 3, .qk_gain = 1.5f, .qk_norm_gain = 1, .bias_scale = 0},
    {.name = "llama3-tiny", .arch = KVV_ARCH_LLAMA,
     .about = "llama with Llama-3 rope_freqs (factor 8, low 1, high 4, original context 256), untied",
     .n_layer = 2, .n_embd = 128, .n_head = 4, .n_head_kv = 2, .head_dim = 32, .n_ff = 384,
     .n_vocab = 512, .real_vocab = 512, .n_ctx_train = 2048, .rope_base = 10000.0f,
     .norm_eps = E5, .rope_factor = 8, .rope_low_freq = 1, .rope_high_freq = 4,
     .rope_orig_ctx = 256, .tied = false,
     .res_gain = 2, .out_gain = 24, .qk_gain = 1.5f, .qk_norm_gain = 1},
    {.name = "qwen2-tiny", .arch = KVV_ARCH_QWEN2,
     .about = "qwen2 with q/k/v biases, GQA 4/2, untied",
     .n_layer = 3, .n_embd = 64, .n_head = 4, .n_head_kv = 2, .head_dim = 16, .n_ff = 192,
     .n_vocab = 512, .real_vocab = 512, .n_ctx_train = 2048, .rope_base = 1000000.0f,
     .norm_eps = E6, .tied = false,
     .res_gain = 1, .out_gain = 24, .qk_gain = 1.5f, .qk_norm_gain = 1, .bias_scale = 0.5f},
    {.name = "qwen3-tiny", .arch = KVV_ARCH_QWEN3,
     .about = "qwen3 with q/k norms, head dim 32 (q width 128 > n_embd 64), tied",
     .n_layer = 3, .n_embd = 64, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
     .write_head_dim = true, .n_ff = 192, .n_vocab = 512, .real_vocab = 512,
     .n_ctx_train = 2048, .rope_base = 1000000.0f, .norm_eps = E6, .tied = true,
     .res_gain = 8, .out_gain = 3, .qk_gain = 1, .qk_norm_gain = 1.5f},
    {.name = "gemma2-tiny", .arch = KVV_ARCH_GEMMA2,
     .about = "gemma2: soft-caps 50/30, window 16 on alternate layers, post norms, tied",
     .n_layer = 4, .n_embd = 64, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
     .write_head_dim = true, .n_ff = 256, .n_vocab = 512, .real_vocab = 512,
     .n_ctx_train = 2048, .rope_base = 10000.0f, .norm_eps = E6, .n_swa = 16,
     .attn_softcap = 50, .final_softcap = 30, .tied = true,
     .res_gain = 16, .out_gain = 4, .qk_gain = 3, .qk_norm_gain = 1, .emb_tau = 0.9f},
    {.name = "gemma3-tiny", .arch = KVV_ARCH_GEMMA3,
     .about = "gemma3: q/k norms, MQA, window 16 with pattern 3, rope bases 1e6/1e4, tied",
     .n_layer = 3, .n_embd = 96, .n_head = 4, .n_head_kv = 1, .head_dim = 32,
     .write_head_dim = true, .n_ff = 256, .n_vocab = 512, .real_vocab = 512,
     .n_ctx_train = 2048, .rope_base = 1000000.0f, .rope_base_swa = 10000.0f, .norm_eps = E6,
     .n_swa = 16, .swa_pattern = 3, .tied = true,
     .res_gain = 8, .out_gain = 24, .qk_gain = 1, .qk_norm_gain = 1.5f},
    {.name = "phi3-tiny", .arch = KVV_ARCH_PHI3,
     .about = "phi3: fused attn_qkv and gate|up, window 2047 written (llama.cpp ignores it), untied",
     .n_layer = 3, .n_embd = 128, .n_head = 4, .n_head_kv = 4, .head_dim = 32, .n_ff = 256,
     .n_vocab = 512, .real_vocab = 512, .n_ctx_train = 4096, .rope_base = 10000.0f,
     .norm_eps = E5, .n_swa = 2047, .tied = false,
     .res_gain = 4, .out_gain = 32, .qk_gain = 1.5f, .qk_norm_gain = 1},
    /* after llama-tiny, so it is never llama's default */
    {.name = "llama-k256", .arch = KVV_ARCH_LLAMA,
     .about = "llama with 256-wide rows: every projection takes the K-quant types (tests)",
     .n_layer = 2, .n_embd = 256, .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_ff = 768,
     .n_vocab = 512, .real_vocab = 512, .n_ctx_train = 2048, .rope_base = 10000.0f,
     .norm_eps = E5, .tied = false,
     .res_gain = 2, .out_gain = 24, .qk_gain = 1.5f, .qk_norm_gain = 1},

    /* ---- real layer shapes (vocabulary capped, see shapes.h) ---- */
    {.name = "smollm2-135m", .arch = KVV_ARCH_LLAMA,
     .about = "HuggingFaceTB/SmolLM2-135M (real 49152-token vocabulary kept)",
     .n_layer = 30, .n_embd = 576, .n_head = 9, .n_head_kv = 3, .head_dim = 64, .n_ff = 1536,
     .n_vocab = 49152, .real_vocab = 49152, .n_ctx_train = 8192, .rope_base = 100000.0f,
     .norm_eps = E5, .tied = true,
     .res_gain = 32, .out_gain = 1.25f, .qk_gain = 1.5f, .qk_norm_gain = 1},
    {.name = "qwen2.5-0.5b", .arch = KVV_ARCH_QWEN2,
     .about = "Qwen/Qwen2.5-0.5B (vocabulary 151936 capped to 32000)",
     .n_layer = 24, .n_embd = 896, .n_head = 14, .n_head_kv = 2, .head_dim = 64, .n_ff = 4864,
     .n_vocab = KVV_SHAPE_VOCAB_CAP, .real_vocab = 151936, .n_ctx_train = 32768,
     .rope_base = 1000000.0f, .norm_eps = E6, .tied = true,
     .res_gain = 32, .out_gain = 2.0f, .qk_gain = 3.0f, .qk_norm_gain = 1, .bias_scale = 0.5f},
    {.name = "qwen3-0.6b", .arch = KVV_ARCH_QWEN3,
     .about = "Qwen/Qwen3-0.6B (vocabulary 151936 capped to 32000)",
     .n_layer = 28, .n_embd = 1024, .n_head = 16, .n_head_kv = 8, .head_dim = 128,
     .write_head_dim = true, .n_ff = 3072, .n_vocab = KVV_SHAPE_VOCAB_CAP, .real_vocab = 151936,
     .n_ctx_train = 40960, .rope_base = 1000000.0f, .norm_eps = E6, .tied = true,
     .res_gain = 32, .out_gain = 1.2f, .qk_gain = 1, .qk_norm_gain = 1.5f},
    {.name = "qwen3-1.7b", .arch = KVV_ARCH_QWEN3,
     .about = "Qwen/Qwen3-1.7B (vocabulary 151936 capped to 32000)",
     .n_layer = 28, .n_embd = 2048, .n_head = 16, .n_head_kv = 8, .head_dim = 128,
     .write_head_dim = true, .n_ff = 6144, .n_vocab = KVV_SHAPE_VOCAB_CAP, .real_vocab = 151936,
     .n_ctx_train = 40960, .rope_base = 1000000.0f, .norm_eps = E6, .tied = true,
     .res_gain = 32, .out_gain = 1.2f, .qk_gain = 1, .qk_norm_gain = 1.5f},
    {.name = "llama-3.2-1b", .arch = KVV_ARCH_LLAMA,
     .about = "meta-llama/Llama-3.2-1B with its rope scaling (vocabulary 128256 capped to 32000)",
     .n_layer = 16, .n_embd = 2048, .n_head = 32, .n_head_kv = 8, .head_dim = 64,
     .write_head_dim = true, .n_ff = 8192, .n_vocab = KVV_SHAPE_VOCAB_CAP, .real_vocab = 128256,
     .n_ctx_train = 131072, .rope_base = 500000.0f, .norm_eps = E5, .rope_factor = 32,
     .rope_low_freq = 1, .rope_high_freq = 4, .rope_orig_ctx = 8192, .tied = true,
     .res_gain = 32, .out_gain = 0.66f, .qk_gain = 1.5f, .qk_norm_gain = 1},
    {.name = "gemma3-1b", .arch = KVV_ARCH_GEMMA3,
     .about = "google/gemma-3-1b (vocabulary 262144 capped to 32000)",
     .n_layer = 26, .n_embd = 1152, .n_head = 4, .n_head_kv = 1, .head_dim = 256,
     .write_head_dim = true, .n_ff = 6912, .n_vocab = KVV_SHAPE_VOCAB_CAP, .real_vocab = 262144,
     .n_ctx_train = 32768, .rope_base = 1000000.0f, .rope_base_swa = 10000.0f, .norm_eps = E6,
     .n_swa = 512, .swa_pattern = 6, .tied = true,
     .res_gain = 32, .out_gain = 24, .qk_gain = 1, .qk_norm_gain = 1.5f},
    {.name = "gemma3-4b", .arch = KVV_ARCH_GEMMA3,
     .about = "google/gemma-3-4b text model (vocabulary 262208 capped to 32000; its linear rope "
              "scaling x8 is not modelled)",
     .n_layer = 34, .n_embd = 2560, .n_head = 8, .n_head_kv = 4, .head_dim = 256,
     .write_head_dim = true, .n_ff = 10240, .n_vocab = KVV_SHAPE_VOCAB_CAP, .real_vocab = 262208,
     .n_ctx_train = 131072, .rope_base = 1000000.0f, .rope_base_swa = 10000.0f, .norm_eps = E6,
     .n_swa = 1024, .swa_pattern = 6, .tied = true,
     .res_gain = 32, .out_gain = 24, .qk_gain = 1, .qk_norm_gain = 1.5f},
};

#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

int kvv_shape_count(void)
{
    return N_SHAPES;
}

const kvv_shape *kvv_shape_at(int i)
{
    return i >= 0 && i < N_SHAPES ? &shapes[i] : NULL;
}

const kvv_shape *kvv_shape_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < N_SHAPES; i++)
        if (strcmp(shapes[i].name, name) == 0)
            return &shapes[i];
    return NULL;
}

const kvv_shape *kvv_shape_default(kvv_arch_id arch)
{
    for (int i = 0; i < N_SHAPES; i++)
        if (shapes[i].arch == arch)
            return &shapes[i]; /* the tiny shape comes first for each arch */
    return NULL;
}

void kvv_shape_list(char *buf, unsigned size)
{
    size_t k = 0;
    if (size == 0)
        return;
    buf[0] = '\0';
    for (int i = 0; i < N_SHAPES && k < size; i++) {
        int n = snprintf(buf + k, size - k, "%s%s", i ? ", " : "", shapes[i].name);
        if (n < 0)
            break;
        k += (size_t)n;
    }
}

void kvv_shape_hparams(const kvv_shape *s, int vocab, kvv_hparams *hp)
{
    memset(hp, 0, sizeof *hp);
    const kvv_arch_id a = s->arch;
    const bool gemma = a == KVV_ARCH_GEMMA2 || a == KVV_ARCH_GEMMA3;
    hp->arch = a;
    hp->arch_name = kvv_arch_name(a);
    hp->n_layer = s->n_layer;
    hp->n_embd = s->n_embd;
    hp->n_head = s->n_head;
    hp->n_head_kv = s->n_head_kv;
    hp->head_dim = s->head_dim;
    hp->head_dim_v = s->head_dim;
    hp->n_ff = s->n_ff;
    hp->n_vocab = vocab > 0 ? vocab : s->n_vocab;
    hp->n_ctx_train = s->n_ctx_train;
    hp->rope_type = a == KVV_ARCH_LLAMA ? KVV_ROPE_NORM : KVV_ROPE_NEOX;
    hp->n_rot = s->head_dim;
    hp->rope_base = s->rope_base;
    hp->rope_base_swa = s->rope_base_swa > 0 ? s->rope_base_swa
                        : a == KVV_ARCH_GEMMA3 ? 10000.0f : s->rope_base;
    hp->rope_freqs = NULL;
    hp->norm_eps = s->norm_eps;
    if (a == KVV_ARCH_GEMMA2) {
        hp->attn_softcap = s->attn_softcap > 0 ? s->attn_softcap : 50.0f;
        hp->final_softcap = s->final_softcap > 0 ? s->final_softcap : 30.0f;
    } else if (a == KVV_ARCH_GEMMA3) {
        hp->final_softcap = s->final_softcap;
    }
    if (a == KVV_ARCH_GEMMA2 || (a == KVV_ARCH_GEMMA3 && s->n_swa > 0)) {
        hp->n_swa = s->n_swa > 0 ? s->n_swa : 4096;
        int period = s->swa_pattern > 0 ? s->swa_pattern : a == KVV_ARCH_GEMMA2 ? 2 : 6;
        hp->swa_period = period;
        for (int il = 0; il < s->n_layer && il < KVV_MAX_LAYERS; il++)
            hp->swa_layer[il] = il % period < period - 1;
    }
    hp->query_scale = 1.0f / sqrtf((float)s->head_dim);
    if ((a == KVV_ARCH_GEMMA2 && s->n_layer == 46) || (a == KVV_ARCH_GEMMA3 && s->n_layer == 62))
        hp->query_scale = 1.0f / sqrtf((float)(s->n_embd / s->n_head));
    hp->embd_scale = gemma ? sqrtf((float)s->n_embd) : 1.0f;
    hp->act = gemma ? KVV_ACT_GELU_TANH : KVV_ACT_SILU;
    hp->tied_output = s->tied || a == KVV_ARCH_GEMMA2;
    hp->has_qkv_bias = a == KVV_ARCH_QWEN2;
    hp->has_qk_norm = a == KVV_ARCH_QWEN3 || a == KVV_ARCH_GEMMA3;
    hp->has_post_norms = gemma;
    hp->fused_qkv = a == KVV_ARCH_PHI3;
    hp->fused_gate_up = a == KVV_ARCH_PHI3;
}
