/*
 * arch.c — architecture description (see arch.h).
 *
 * Two steps, both following llama.cpp (llama-model.cpp load_hparams /
 * load_tensors) for llama, qwen2, qwen3, gemma2, gemma3 and phi3:
 *
 *   1. kvv_hparams_read: every hyperparameter from {arch}.* metadata, with
 *      llama.cpp's defaults where a key is optional, each value range-checked
 *      (a bad value names the key and its byte offset).
 *   2. kvv_model_from_gguf: every tensor the architecture needs bound by name
 *      and its shape checked against the hyperparameters; a tensor the
 *      architecture does not use is reported too (llama.cpp refuses such a
 *      file with "wrong number of tensors"), so nothing in a file is silently
 *      ignored.
 */
#include "model/arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ names */

static const char *const arch_names[KVV_ARCH_COUNT] = {
    [KVV_ARCH_LLAMA] = "llama",   [KVV_ARCH_QWEN2] = "qwen2",   [KVV_ARCH_QWEN3] = "qwen3",
    [KVV_ARCH_GEMMA2] = "gemma2", [KVV_ARCH_GEMMA3] = "gemma3", [KVV_ARCH_PHI3] = "phi3",
};

#define SUPPORTED_LIST "llama, qwen2, qwen3, gemma2, gemma3, phi3"

bool kvv_arch_from_name(const char *name, kvv_arch_id *out)
{
    if (!name)
        return false;
    for (int a = 0; a < KVV_ARCH_COUNT; a++) {
        if (strcmp(arch_names[a], name) == 0) {
            if (out)
                *out = (kvv_arch_id)a;
            return true;
        }
    }
    return false;
}

const char *kvv_arch_name(kvv_arch_id a)
{
    if ((int)a < 0 || a >= KVV_ARCH_COUNT)
        return "unknown";
    return arch_names[a];
}

/* ------------------------------------------------------------ hparams */

/* Largest width kvverify accepts for any dimension: keeps every product of
 * two widths inside int64 and every width inside int. */
#define MAX_DIM (1 << 24)

static uint64_t kv_offset(const kvv_gguf *g, const char *key)
{
    const kvv_gguf_kv *kv = kvv_gguf_find_kv(g, key);
    return kv ? kv->offset : 0;
}

/* Read {arch}.suffix as u32 into *out (untouched when absent and optional),
 * then check lo <= value <= hi. *found says whether the key exists. */
static kvv_status get_dim(const kvv_gguf *g, const char *arch, const char *suffix, bool required,
                          uint32_t lo, uint32_t hi, int *out, bool *found, kvv_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const kvv_gguf_kv *kv = kvv_gguf_find_kv(g, key);
    if (found)
        *found = kv != NULL;
    if (!kv && !required)
        return KVV_OK;
    uint32_t v = 0;
    kvv_status st = kvv_gguf_get_u32(g, key, required, &v, err);
    if (st)
        return st;
    if (v < lo || v > hi)
        return kvv_error_set(err, KVV_ERR_FORMAT, "%s: %s at byte %llu: %u is out of range (%u..%u)",
                             g->path, key, (unsigned long long)kv->offset, v, lo, hi);
    *out = (int)v;
    return KVV_OK;
}

/* Read {arch}.suffix as f32; must be finite and within [lo, hi]. */
static kvv_status get_real(const kvv_gguf *g, const char *arch, const char *suffix, bool required,
                           float lo, float hi, float *out, bool *found, kvv_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const kvv_gguf_kv *kv = kvv_gguf_find_kv(g, key);
    if (found)
        *found = kv != NULL;
    if (!kv && !required)
        return KVV_OK;
    float v = 0;
    kvv_status st = kvv_gguf_get_f32(g, key, required, &v, err);
    if (st)
        return st;
    if (!(v >= lo && v <= hi)) /* also rejects NaN */
        return kvv_error_set(err, KVV_ERR_FORMAT, "%s: %s at byte %llu: %g is out of range (%g..%g)",
                             g->path, key, (unsigned long long)kv->offset, (double)v, (double)lo,
                             (double)hi);
    *out = v;
    return KVV_OK;
}

static kvv_status bad_value(const kvv_gguf *g, const char *arch, const char *suffix, kvv_error *err,
                            const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static kvv_status bad_value(const kvv_gguf *g, const char *arch, const char *suffix, kvv_error *err,
                            const char *fmt, ...)
{
    char key[128], why[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return kvv_error_set(err, KVV_ERR_FORMAT, "%s: %s at byte %llu: %s", g->path, key,
                         (unsigned long long)kv_offset(g, key), why);
}

/* llama.cpp's set_swa_pattern: layer il is local iff il % period < period - 1;
 * period 0 makes every layer local. */
static void set_swa_pattern(kvv_hparams *hp, int period)
{
    hp->swa_period = period;
    for (int il = 0; il < KVV_MAX_LAYERS; il++)
        hp->swa_layer[il] = il < hp->n_layer && (period == 0 || il % period < period - 1);
}

/* Vocabulary size: the tokenizer's token count (what llama.cpp uses), else
 * {arch}.vocab_size, else the rows of token_embd.weight. */
static kvv_status read_vocab(const kvv_gguf *g, const char *arch, kvv_hparams *hp, kvv_error *err)
{
    /* {arch}.vocab_size is range-checked even when the token list decides:
     * a declared 2^31 vocabulary is refused by name, never believed. */
    bool found = false;
    int declared = 0;
    kvv_status st = get_dim(g, arch, "vocab_size", false, 1, MAX_DIM, &declared, &found, err);
    if (st)
        return st;
    const kvv_gguf_kv *tok = kvv_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (tok) {
        if (tok->type != KVV_GGUF_ARRAY || tok->arr_type != KVV_GGUF_STRING)
            return kvv_error_set(err, KVV_ERR_FORMAT,
                                 "%s: tokenizer.ggml.tokens at byte %llu: expected an array of strings",
                                 g->path, (unsigned long long)tok->offset);
        if (tok->arr_n < 1 || tok->arr_n > MAX_DIM)
            return kvv_error_set(err, KVV_ERR_FORMAT,
                                 "%s: tokenizer.ggml.tokens at byte %llu: %llu tokens is out of range (1..%d)",
                                 g->path, (unsigned long long)tok->offset,
                                 (unsigned long long)tok->arr_n, MAX_DIM);
        hp->n_vocab = (int)tok->arr_n;
        return KVV_OK;
    }
    if (found) {
        hp->n_vocab = declared;
        return KVV_OK;
    }
    const kvv_gguf_tensor *t = kvv_gguf_find_tensor(g, "token_embd.weight");
    if (t && t->ne[1] >= 1 && t->ne[1] <= MAX_DIM) {
        hp->n_vocab = (int)t->ne[1];
        return KVV_OK;
    }
    return kvv_error_set(err, KVV_ERR_FORMAT,
                         "%s: vocabulary size unknown: no tokenizer.ggml.tokens, %s.vocab_size or "
                         "token_embd.weight",
                         g->path, arch);
}

kvv_status kvv_hparams_read(const kvv_gguf *g, kvv_hparams *hp, kvv_error *err)
{
    memset(hp, 0, sizeof *hp);
    char arch[64];
    kvv_status st = kvv_gguf_get_str(g, "general.architecture", true, arch, sizeof arch, err);
    if (st)
        return st;
    kvv_arch_id id;
    if (!kvv_arch_from_name(arch, &id))
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                             "%s: general.architecture '%s' is not supported (kvverify supports "
                             SUPPORTED_LIST ")",
                             g->path, arch);
    hp->arch = id;
    hp->arch_name = arch_names[id];
    const char *a = hp->arch_name;
    const bool gemma = id == KVV_ARCH_GEMMA2 || id == KVV_ARCH_GEMMA3;

    /* widths */
    if ((st = get_dim(g, a, "block_count", true, 1, KVV_MAX_LAYERS, &hp->n_layer, NULL, err)) ||
        (st = get_dim(g, a, "embedding_length", true, 1, MAX_DIM, &hp->n_embd, NULL, err)) ||
        (st = get_dim(g, a, "feed_forward_length", true, 1, MAX_DIM, &hp->n_ff, NULL, err)) ||
        (st = get_dim(g, a, "attention.head_count", true, 1, 65536, &hp->n_head, NULL, err)))
        return st;
    hp->n_head_kv = hp->n_head;
    if ((st = get_dim(g, a, "attention.head_count_kv", false, 1, 65536, &hp->n_head_kv, NULL, err)))
        return st;
    if (hp->n_head % hp->n_head_kv != 0)
        return bad_value(g, a, "attention.head_count_kv", err,
                         "%d query heads are not a multiple of %d KV heads", hp->n_head, hp->n_head_kv);
    hp->n_ctx_train = 0;
    if ((st = get_dim(g, a, "context_length", true, 1, 0x7fffffff, &hp->n_ctx_train, NULL, err)))
        return st;

    bool has_k = false;
    if ((st = get_dim(g, a, "attention.key_length", false, 1, 65536, &hp->head_dim, &has_k, err)))
        return st;
    if (!has_k) {
        if (hp->n_embd % hp->n_head != 0)
            return bad_value(g, a, "embedding_length", err,
                             "%d is not a multiple of the head count %d (and no attention.key_length)",
                             hp->n_embd, hp->n_head);
        hp->head_dim = hp->n_embd / hp->n_head;
    }
    hp->head_dim_v = hp->head_dim;
    if ((st = get_dim(g, a, "attention.value_length", false, 1, 65536, &hp->head_dim_v, NULL, err)))
        return st;
    if ((int64_t)hp->n_head * hp->head_dim > MAX_DIM || (int64_t)hp->n_head * hp->head_dim_v > MAX_DIM)
        return bad_value(g, a, "attention.head_count", err, "%d heads of width %d are too wide",
                         hp->n_head, hp->head_dim);
    if ((st = read_vocab(g, a, hp, err)))
        return st;

    /* RoPE */
    hp->rope_type = id == KVV_ARCH_LLAMA ? KVV_ROPE_NORM : KVV_ROPE_NEOX;
    hp->n_rot = hp->head_dim;
    if ((st = get_dim(g, a, "rope.dimension_count", false, 2, 65536, &hp->n_rot, NULL, err)))
        return st;
    if (id == KVV_ARCH_LLAMA && hp->n_rot != hp->head_dim)
        return bad_value(g, a, "rope.dimension_count", err,
                         "%d must equal the head dimension %d for llama (llama.cpp: invalid n_rot)",
                         hp->n_rot, hp->head_dim);
    if (hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim)
        return bad_value(g, a, "rope.dimension_count", err,
                         "%d must be even and at most the head dimension %d", hp->n_rot, hp->head_dim);
    hp->rope_base = 10000.0f;
    if ((st = get_real(g, a, "rope.freq_base", false, 1e-30f, 3.0e38f, &hp->rope_base, NULL, err)))
        return st;
    hp->rope_base_swa = id == KVV_ARCH_GEMMA3 ? 10000.0f : hp->rope_base;
    if ((st = get_real(g, a, "rope.freq_base_swa", false, 1e-30f, 3.0e38f, &hp->rope_base_swa, NULL, err)))
        return st;

    /* norms */
    if ((st = get_real(g, a, "attention.layer_norm_rms_epsilon", true, 0.0f, 1.0f, &hp->norm_eps, NULL, err)))
        return st;

    /* soft-caps: gemma2 always on (defaults 50 / 30); gemma3 final cap if given */
    if (id == KVV_ARCH_GEMMA2) {
        hp->attn_softcap = 50.0f;
        hp->final_softcap = 30.0f;
        if ((st = get_real(g, a, "attn_logit_softcapping", false, 1e-6f, 3.0e38f, &hp->attn_softcap, NULL, err)) ||
            (st = get_real(g, a, "final_logit_softcapping", false, 1e-6f, 3.0e38f, &hp->final_softcap, NULL, err)))
            return st;
    } else if (id == KVV_ARCH_GEMMA3) {
        if ((st = get_real(g, a, "final_logit_softcapping", false, 0.0f, 3.0e38f, &hp->final_softcap, NULL, err)))
            return st;
    }

    /* sliding window: gemma2 default window 4096, period 2; gemma3 only when
     * attention.sliding_window > 0, period 6; phi3's window is ignored like
     * llama.cpp does; an array-valued pattern is ignored (llama.cpp keeps the
     * default for these architectures). */
    if (gemma) {
        bool has_win = false;
        int win = id == KVV_ARCH_GEMMA2 ? 4096 : 0;
        if ((st = get_dim(g, a, "attention.sliding_window", false, 0, 0x7fffffff, &win, &has_win, err)))
            return st;
        if (id == KVV_ARCH_GEMMA2 || (has_win && win > 0)) {
            int period = id == KVV_ARCH_GEMMA2 ? 2 : 6;
            char key[128];
            snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
            const kvv_gguf_kv *pk = kvv_gguf_find_kv(g, key);
            if (pk && pk->type != KVV_GGUF_ARRAY &&
                (st = get_dim(g, a, "attention.sliding_window_pattern", false, 0, KVV_MAX_LAYERS + 1,
                              &period, NULL, err)))
                return st;
            hp->n_swa = win;
            if (win > 0)
                set_swa_pattern(hp, period);
            else
                hp->swa_period = period;
        }
    }

    /* attention scale, embedding scale, activation, structure */
    hp->query_scale = 1.0f / sqrtf((float)hp->head_dim);
    if ((id == KVV_ARCH_GEMMA2 && hp->n_layer == 46) || (id == KVV_ARCH_GEMMA3 && hp->n_layer == 62))
        hp->query_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head)); /* 27B rule */
    hp->embd_scale = gemma ? sqrtf((float)hp->n_embd) : 1.0f;
    hp->act = gemma ? KVV_ACT_GELU_TANH : KVV_ACT_SILU;
    hp->has_qkv_bias = id == KVV_ARCH_QWEN2;
    hp->has_qk_norm = id == KVV_ARCH_QWEN3 || id == KVV_ARCH_GEMMA3;
    hp->has_post_norms = gemma;
    hp->fused_qkv = id == KVV_ARCH_PHI3;
    hp->fused_gate_up = id == KVV_ARCH_PHI3;
    hp->tied_output = id == KVV_ARCH_GEMMA2 || !kvv_gguf_find_tensor(g, "output.weight");
    return KVV_OK;
}

float kvv_hparams_rope_base(const kvv_hparams *hp, int il)
{
    if (il >= 0 && il < hp->n_layer && il < KVV_MAX_LAYERS && hp->swa_layer[il])
        return hp->rope_base_swa;
    return hp->rope_base;
}

/* ------------------------------------------------------------ binding */

typedef struct {
    const kvv_gguf *g;
    const char *arch;    /* for messages */
    bool *used;          /* one flag per tensor in the file */
    kvv_error *err;
} binder;

static void shape_str(char *buf, size_t n, const int64_t *ne, int nd)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "{");
    for (int i = 0; i < nd && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)ne[i]);
    if (k < n)
        snprintf(buf + k, n - k, "}");
}

/* Bind tensor `name` of shape {e0} (e1 == 0) or {e0, e1}. A missing tensor
 * is an error when required; a present one must match the shape exactly
 * (trailing dimensions 1) and have a type kvverify can dequantize. */
static kvv_status bind(binder *b, const char *name, int64_t e0, int64_t e1, bool required,
                       const kvv_gguf_tensor **out)
{
    *out = NULL;
    const kvv_gguf_tensor *t = kvv_gguf_find_tensor(b->g, name);
    if (!t) {
        if (!required)
            return KVV_OK;
        return kvv_error_set(b->err, KVV_ERR_FORMAT, "%s: tensor %s: missing (required by %s)",
                             b->g->path, name, b->arch);
    }
    int64_t want[KVV_GGUF_MAX_DIMS] = {e0, e1 ? e1 : 1, 1, 1};
    int nd_want = e1 ? 2 : 1;
    if (t->ne[0] != want[0] || t->ne[1] != want[1] || t->ne[2] != 1 || t->ne[3] != 1) {
        char ws[96], fs[128];
        shape_str(ws, sizeof ws, want, nd_want);
        shape_str(fs, sizeof fs, t->ne, (int)t->n_dims);
        return kvv_error_set(b->err, KVV_ERR_FORMAT,
                             "%s: tensor %s (info at byte %llu): expected shape %s, found %s",
                             b->g->path, name, (unsigned long long)t->info_offset, ws, fs);
    }
    const kvv_type_traits *tt = kvv_type_traits_of(t->type);
    if (!tt || !tt->can_dequantize)
        return kvv_error_set(b->err, KVV_ERR_UNSUPPORTED,
                             "%s: tensor %s (info at byte %llu): type %s cannot be dequantized by kvverify",
                             b->g->path, name, (unsigned long long)t->info_offset, kvv_type_name(t->type));
    b->used[t - b->g->tensors] = true;
    *out = t;
    return KVV_OK;
}

static kvv_status bind_blk(binder *b, int il, const char *what, int64_t e0, int64_t e1, bool required,
                           const kvv_gguf_tensor **out)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", il, what);
    return bind(b, name, e0, e1, required, out);
}

static kvv_status bind_layer(binder *b, const kvv_hparams *hp, int il, kvv_layer_tensors *L)
{
    const int64_t E = hp->n_embd, F = hp->n_ff;
    const int64_t Q = (int64_t)hp->n_head * hp->head_dim;
    const int64_t K = (int64_t)hp->n_head_kv * hp->head_dim;
    const int64_t V = (int64_t)hp->n_head_kv * hp->head_dim_v;
    const int64_t O = (int64_t)hp->n_head * hp->head_dim_v;
    kvv_status st;
    if ((st = bind_blk(b, il, "attn_norm.weight", E, 0, true, &L->attn_norm)))
        return st;
    if (hp->fused_qkv) {
        if ((st = bind_blk(b, il, "attn_qkv.weight", E, Q + K + V, true, &L->wqkv)))
            return st;
    } else if ((st = bind_blk(b, il, "attn_q.weight", E, Q, true, &L->wq)) ||
               (st = bind_blk(b, il, "attn_k.weight", E, K, true, &L->wk)) ||
               (st = bind_blk(b, il, "attn_v.weight", E, V, true, &L->wv))) {
        return st;
    }
    if (hp->has_qkv_bias &&
        ((st = bind_blk(b, il, "attn_q.bias", Q, 0, true, &L->bq)) ||
         (st = bind_blk(b, il, "attn_k.bias", K, 0, true, &L->bk)) ||
         (st = bind_blk(b, il, "attn_v.bias", V, 0, true, &L->bv))))
        return st;
    if (hp->has_qk_norm &&
        ((st = bind_blk(b, il, "attn_q_norm.weight", hp->head_dim, 0, true, &L->q_norm)) ||
         (st = bind_blk(b, il, "attn_k_norm.weight", hp->head_dim, 0, true, &L->k_norm))))
        return st;
    if ((st = bind_blk(b, il, "attn_output.weight", O, E, true, &L->wo)))
        return st;
    if (hp->has_post_norms &&
        (st = bind_blk(b, il, "post_attention_norm.weight", E, 0, true, &L->post_attn_norm)))
        return st;
    if ((st = bind_blk(b, il, "ffn_norm.weight", E, 0, true, &L->ffn_norm)))
        return st;
    if (hp->fused_gate_up) {
        if ((st = bind_blk(b, il, "ffn_up.weight", E, 2 * F, true, &L->w_up)))
            return st;
    } else if ((st = bind_blk(b, il, "ffn_gate.weight", E, F, true, &L->w_gate)) ||
               (st = bind_blk(b, il, "ffn_up.weight", E, F, true, &L->w_up))) {
        return st;
    }
    if ((st = bind_blk(b, il, "ffn_down.weight", F, E, true, &L->w_down)))
        return st;
    if (hp->has_post_norms &&
        (st = bind_blk(b, il, "post_ffw_norm.weight", E, 0, true, &L->post_ffw_norm)))
        return st;
    return KVV_OK;
}

/* rope_freqs.weight (llama only, optional): n_rot/2 factors, copied to fp32. */
static kvv_status bind_rope_freqs(binder *b, kvv_model *m)
{
    kvv_hparams *hp = &m->hp;
    if (hp->arch != KVV_ARCH_LLAMA)
        return KVV_OK;
    const kvv_gguf_tensor *t;
    kvv_status st = bind(b, "rope_freqs.weight", hp->n_rot / 2, 0, false, &t);
    if (st || !t)
        return st;
    int64_t n = hp->n_rot / 2;
    const kvv_type_traits *tt = kvv_type_traits_of(t->type);
    if (n % tt->blck_size != 0)
        return kvv_error_set(b->err, KVV_ERR_FORMAT,
                             "%s: tensor rope_freqs.weight (info at byte %llu): %lld factors are not a "
                             "multiple of the %s block size",
                             b->g->path, (unsigned long long)t->info_offset, (long long)n,
                             kvv_type_name(t->type));
    m->rope_freqs_buf = malloc((size_t)n * sizeof(float));
    if (!m->rope_freqs_buf)
        return kvv_error_set(b->err, KVV_ERR_NOMEM, "%s: out of memory for rope_freqs", b->g->path);
    kvv_dequantize_row(t->type, t->data, m->rope_freqs_buf, n);
    for (int64_t i = 0; i < n; i++) {
        float f = m->rope_freqs_buf[i];
        if (!(f > 0.0f && f < 3.0e38f))
            return kvv_error_set(b->err, KVV_ERR_FORMAT,
                                 "%s: tensor rope_freqs.weight (info at byte %llu): factor %lld is %g, "
                                 "not a positive finite number",
                                 b->g->path, (unsigned long long)t->info_offset, (long long)i, (double)f);
    }
    hp->rope_freqs = m->rope_freqs_buf;
    return KVV_OK;
}

static kvv_status bind_all(binder *b, kvv_model *m)
{
    kvv_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, NV = hp->n_vocab;
    kvv_status st;
    if ((st = bind(b, "token_embd.weight", E, NV, true, &m->tok_embd)) ||
        (st = bind(b, "output_norm.weight", E, 0, true, &m->output_norm)))
        return st;
    if (hp->arch != KVV_ARCH_GEMMA2) {
        /* phi3 requires output.weight in llama.cpp; the others may tie it */
        if ((st = bind(b, "output.weight", E, NV, hp->arch == KVV_ARCH_PHI3, &m->output)))
            return st;
    }
    hp->tied_output = m->output == NULL;
    if (hp->tied_output)
        m->output = m->tok_embd;
    if ((st = bind_rope_freqs(b, m)))
        return st;
    for (int il = 0; il < hp->n_layer; il++)
        if ((st = bind_layer(b, hp, il, &m->layers[il])))
            return st;
    for (uint64_t i = 0; i < b->g->n_tensors; i++) {
        if (!b->used[i]) {
            const kvv_gguf_tensor *t = &b->g->tensors[i];
            return kvv_error_set(b->err, KVV_ERR_UNSUPPORTED,
                                 "%s: tensor %s (info at byte %llu) is not part of the %s architecture "
                                 "as kvverify implements it",
                                 b->g->path, t->name, (unsigned long long)t->info_offset, hp->arch_name);
        }
    }
    return KVV_OK;
}

kvv_status kvv_model_from_gguf(kvv_gguf *g, kvv_model **out, kvv_error *err)
{
    *out = NULL;
    kvv_model *m = calloc(1, sizeof *m);
    if (!m)
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", g->path);
    kvv_status st = kvv_hparams_read(g, &m->hp, err);
    if (st) {
        free(m);
        return st;
    }
    m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
    bool *used = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *used);
    if (!m->layers || !used) {
        free(used);
        free(m->layers);
        free(m);
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", g->path);
    }
    binder b = {.g = g, .arch = m->hp.arch_name, .used = used, .err = err};
    st = bind_all(&b, m);
    free(used);
    if (st) {
        free(m->rope_freqs_buf);
        free(m->layers);
        free(m);
        return st;
    }
    m->gguf = g;
    *out = m;
    return KVV_OK;
}

kvv_status kvv_model_open(const char *path, kvv_model **out, kvv_error *err)
{
    *out = NULL;
    kvv_gguf *g = NULL;
    kvv_status st = kvv_gguf_open(path, &g, err);
    if (st)
        return st;
    st = kvv_model_from_gguf(g, out, err);
    if (st) {
        kvv_gguf_close(g);
        return st;
    }
    /* The header has been parsed and the model read from it (the
     * tokenizer's strings are most of it). Give its pages back: a reader of
     * the strings faults them in again, and a command that never tokenizes
     * (bench) does not hold them: 650 KB of smollm2-135m's 105 MB file
     * (docs/cpu-engine.md, "Weights"). */
    kvv_gguf_drop_pages(g, g->base, g->data_offset);
    return KVV_OK;
}

void kvv_model_close(kvv_model *m)
{
    if (!m)
        return;
    kvv_gguf_close(m->gguf);
    free(m->rope_freqs_buf);
    free(m->layers);
    free(m);
}

/* ------------------------------------------------------------ memory */

void kvv_token_memory_of(const kvv_hparams *hp, kvv_token_memory *out)
{
    /* K and V of one token over every layer (every layer keeps a full-length
     * cache here; a sliding window would only bound how many tokens). */
    uint64_t kv_elems = (uint64_t)hp->n_layer * (uint64_t)hp->n_head_kv *
                        (uint64_t)(hp->head_dim + hp->head_dim_v);
    uint64_t resid = (uint64_t)hp->n_embd;
    out->kv_f32 = kv_elems * 4;
    out->kv_f16 = kv_elems * 2;
    out->kv_bf16 = kv_elems * 2;
    out->resid_f32 = resid * 4;
    out->resid_bf16 = resid * 2;
    out->resid_layers_f32 = (uint64_t)hp->n_layer * resid * 4;
    out->resid_layers_bf16 = (uint64_t)hp->n_layer * resid * 2;
}
