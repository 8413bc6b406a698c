/*
 * synth.c — random-weight GGUF models (see synth.h).
 *
 * Sections: portable math (log, exp: double precision, basic operations
 * only, so every machine computes the same bits), the generator (PCG32,
 * polar-method normals), the weight recipes, the metadata, the tensors.
 */
#include "model/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ portable math
 * frexp/ldexp/sqrt are exact (IEEE); everything else is + - * /, evaluated
 * in a fixed order (the build uses -ffp-contract=off). */

#define LN2 0.6931471805599453094
#define LN2_HI 6.93147180369123816490e-01 /* upper bits of ln 2 (exact product with k) */
#define LN2_LO 1.90821492927058770002e-10

/* Natural log for x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)),
 * log m = 2 atanh(t), t = (m-1)/(m+1), |t| < 0.1716: 11 terms of
 * t + t^3/3 + t^5/5 + ... (Horner in t^2) leave an error below 1e-17. */
static double synth_log(double x)
{
    static const double inv_odd[11] = {1.0,       1.0 / 3,  1.0 / 5,  1.0 / 7,
                                       1.0 / 9,   1.0 / 11, 1.0 / 13, 1.0 / 15,
                                       1.0 / 17,  1.0 / 19, 1.0 / 21};
    int e;
    double m = frexp(x, &e);
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        e--;
    }
    double t = (m - 1.0) / (m + 1.0), t2 = t * t, p = inv_odd[10];
    for (int k = 9; k >= 0; k--)
        p = p * t2 + inv_odd[k];
    return 2.0 * t * p + (double)e * LN2;
}

/* exp(x) for |x| < 700: x = k ln2 + r, |r| <= ln2/2, 22 Taylor terms. */
static double synth_exp(double x)
{
    double kf = floor(x / LN2 + 0.5);
    double r = (x - kf * LN2_HI) - kf * LN2_LO;
    double term = 1.0, sum = 1.0;
    for (int i = 1; i < 22; i++) {
        term *= r / (double)i;
        sum += term;
    }
    return ldexp(sum, (int)kf);
}

/* ------------------------------------------------------------ generator */

typedef struct {
    uint64_t state, inc;
    double spare;      /* second normal of the last polar pair */
    int has_spare;
} rng;

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t pcg32(rng *r)
{
    uint64_t old = r->state;
    r->state = old * 6364136223846793005ull + r->inc;
    uint32_t xs = (uint32_t)(((old >> 18) ^ old) >> 27);
    uint32_t rot = (uint32_t)(old >> 59);
    return (xs >> rot) | (xs << ((32 - rot) & 31));
}

/* One stream per tensor: seeded from the model seed and the tensor name
 * (FNV-1a), so a tensor's values do not depend on the others. */
static void rng_init(rng *r, uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = name; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    uint64_t s = seed ^ h;
    r->state = splitmix64(&s);
    r->inc = splitmix64(&s) | 1u;
    r->has_spare = 0;
    r->spare = 0.0;
}

/* Uniform in (-1, 1): 53 random bits. */
static double rng_sym(rng *r)
{
    uint64_t u = ((uint64_t)pcg32(r) << 32) | pcg32(r);
    return (double)(u >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* Standard normal: Marsaglia's polar method. */
static double rng_normal(rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u, v, s;
    do {
        u = rng_sym(r);
        v = rng_sym(r);
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double f = sqrt(-2.0 * synth_log(s) / s);
    r->spare = v * f;
    r->has_spare = 1;
    return u * f;
}

/* ------------------------------------------------------------ recipes */

typedef enum {
    W_LINEAR,   /* N(0, 1/fan_in) * gain; fan_in = ne0 */
    W_NORM,     /* gain * (1 + 0.1 N) */
    W_BIAS,     /* gain * N */
    W_EMBD,     /* rows: N(0, scale^2) * exp(tau N) */
    W_ROPE      /* Llama-3 rope factors */
} recipe;

typedef struct {
    char name[64];
    int64_t ne0, ne1;     /* ne1 = 0: 1-D */
    recipe how;
    double gain;
    int64_t gain_rows;    /* W_LINEAR: only rows < gain_rows get gain (phi3 qkv); 0 = all */
    bool quantize;        /* a projection or embedding: takes the file type */
} tdesc;

/* The Llama-3 rope factors as convert_hf_to_gguf.py computes them: in
 * float32 (torch tensors), freq = 1 / base^(2i/dim), wavelen = 2 pi / freq,
 * factor 1 above high_freq_wavelen, rope_factor below low_freq_wavelen,
 * smooth interpolation between. The power is computed in double and
 * rounded once, like a correctly rounded powf. */
static void rope_factors(const kvv_shape *s, float *out, int n)
{
    const float ctx = (float)s->rope_orig_ctx, lo = s->rope_low_freq, hi = s->rope_high_freq;
    const float fac = s->rope_factor;
    const float lo_wave = ctx / lo, hi_wave = ctx / hi;
    const double lb = synth_log((double)s->rope_base);
    for (int i = 0; i < n; i++) {
        float e = (float)(2 * i) / (float)s->head_dim;
        float p = (float)synth_exp(lb * (double)e);
        float freq = 1.0f / p;
        float wave = (float)(2.0 * 3.14159265358979323846) / freq;
        float f;
        if (wave < hi_wave) {
            f = 1.0f;
        } else if (wave > lo_wave) {
            f = fac;
        } else {
            float smooth = (ctx / wave - lo) / (hi - lo);
            f = 1.0f / ((1.0f - smooth) / fac + smooth);
        }
        out[i] = f;
    }
}

static void fill(const tdesc *t, const kvv_shape *s, uint64_t seed, float *x)
{
    rng r;
    rng_init(&r, seed, t->name);
    int64_t rows = t->ne1 ? t->ne1 : 1, n = t->ne0 * rows;
    switch (t->how) {
    case W_LINEAR: {
        double sd = 1.0 / sqrt((double)t->ne0);
        for (int64_t row = 0; row < rows; row++) {
            double g = (t->gain_rows == 0 || row < t->gain_rows) ? t->gain : 1.0;
            for (int64_t i = 0; i < t->ne0; i++)
                x[row * t->ne0 + i] = (float)(rng_normal(&r) * sd * g);
        }
        break;
    }
    case W_NORM:
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)(t->gain * (1.0 + 0.1 * rng_normal(&r)));
        break;
    case W_BIAS:
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)(t->gain * rng_normal(&r));
        break;
    case W_EMBD:
        for (int64_t row = 0; row < rows; row++) {
            double g = t->gain;
            if (s->emb_tau > 0) /* log-normal with mean square 1: E[exp(2tN - 2t^2)] = 1 */
                g *= synth_exp((double)s->emb_tau * rng_normal(&r) - (double)s->emb_tau * s->emb_tau);
            for (int64_t i = 0; i < t->ne0; i++)
                x[row * t->ne0 + i] = (float)(rng_normal(&r) * g);
        }
        break;
    case W_ROPE:
        rope_factors(s, x, (int)n);
        break;
    }
}

static void add(tdesc *list, int *n, const char *name, int64_t ne0, int64_t ne1, recipe how,
                double gain, bool quantize)
{
    if (list) {
        tdesc *t = &list[*n];
        snprintf(t->name, sizeof t->name, "%s", name);
        t->ne0 = ne0;
        t->ne1 = ne1;
        t->how = how;
        t->gain = gain;
        t->gain_rows = 0;
        t->quantize = quantize;
    }
    (*n)++;
}

/* Every tensor of the shape, in the converter's order. @return the count
 * (list may be NULL to count). */
static int describe(const kvv_shape *s, int n_vocab, tdesc *list)
{
    const kvv_arch_id a = s->arch;
    const bool gemma = a == KVV_ARCH_GEMMA2 || a == KVV_ARCH_GEMMA3;
    const int64_t E = s->n_embd, F = s->n_ff, D = s->head_dim;
    const int64_t Q = s->n_head * D, KV = s->n_head_kv * D;
    const double res = gemma ? 1.0 : s->res_gain;
    int n = 0;
    char nm[64];
    add(list, &n, "token_embd.weight", E, n_vocab, W_EMBD, gemma ? 1.0 / sqrt((double)E) : 1.0, true);
    add(list, &n, "output_norm.weight", E, 0, W_NORM, s->out_gain, false);
    if (!s->tied && a != KVV_ARCH_GEMMA2)
        add(list, &n, "output.weight", E, n_vocab, W_LINEAR, 1.0, true);
    if (a == KVV_ARCH_LLAMA && s->rope_factor > 0)
        add(list, &n, "rope_freqs.weight", D / 2, 0, W_ROPE, 1.0, false);
#define BLK(what, a0, a1, h, g, q) \
    (snprintf(nm, sizeof nm, "blk.%d." what, il), add(list, &n, nm, a0, a1, h, g, q))
    for (int il = 0; il < s->n_layer; il++) {
        BLK("attn_norm.weight", E, 0, W_NORM, 1.0, false);
        if (a == KVV_ARCH_PHI3) {
            BLK("attn_qkv.weight", E, Q + 2 * KV, W_LINEAR, s->qk_gain, true);
            if (list)
                list[n - 1].gain_rows = Q + KV; /* q and k rows only */
        } else {
            BLK("attn_q.weight", E, Q, W_LINEAR, s->qk_gain, true);
            BLK("attn_k.weight", E, KV, W_LINEAR, s->qk_gain, true);
            BLK("attn_v.weight", E, KV, W_LINEAR, 1.0, true);
        }
        if (a == KVV_ARCH_QWEN2) {
            BLK("attn_q.bias", Q, 0, W_BIAS, s->bias_scale, false);
            BLK("attn_k.bias", KV, 0, W_BIAS, s->bias_scale, false);
            BLK("attn_v.bias", KV, 0, W_BIAS, s->bias_scale, false);
        }
        if (a == KVV_ARCH_QWEN3 || a == KVV_ARCH_GEMMA3) {
            BLK("attn_q_norm.weight", D, 0, W_NORM, s->qk_norm_gain, false);
            BLK("attn_k_norm.weight", D, 0, W_NORM, s->qk_norm_gain, false);
        }
        BLK("attn_output.weight", Q, E, W_LINEAR, res, true);
        if (gemma)
            BLK("post_attention_norm.weight", E, 0, W_NORM, s->res_gain, false);
        BLK("ffn_norm.weight", E, 0, W_NORM, 1.0, false);
        if (a == KVV_ARCH_PHI3) {
            BLK("ffn_up.weight", E, 2 * F, W_LINEAR, 1.0, true);
        } else {
            BLK("ffn_gate.weight", E, F, W_LINEAR, 1.0, true);
            BLK("ffn_up.weight", E, F, W_LINEAR, 1.0, true);
        }
        BLK("ffn_down.weight", F, E, W_LINEAR, res, true);
        if (gemma)
            BLK("post_ffw_norm.weight", E, 0, W_NORM, s->res_gain, false);
    }
#undef BLK
    return n;
}

/* Does the list hold an output.weight of its own (not tied)? */
static bool has_output(const tdesc *list, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].name, "output.weight") == 0)
            return true;
    return false;
}

/* The type a tensor is stored as in a file of the options' type and mix
 * (synth_mix.c); norms, biases and rope factors stay F32. */
static kvv_type stored_type(const tdesc *t, const kvv_synth_opts *o, bool own_output)
{
    if (!t->quantize)
        return KVV_TYPE_F32;
    return kvv_synth_tensor_type(o->type, o->mix, t->name, t->ne0, o->shape->n_layer,
                                 own_output);
}

static kvv_status check_opts(const kvv_synth_opts *o, int *n_vocab, kvv_error *err)
{
    if (!o->shape)
        return kvv_error_set(err, KVV_ERR_USAGE, "synth: no shape given");
    if (!kvv_synth_type_ok(o->type) ||
        (o->mix == KVV_SYNTH_Q4_K_M && o->type != KVV_TYPE_Q4_K) ||
        (o->mix == KVV_SYNTH_Q5_K_M && o->type != KVV_TYPE_Q5_K) ||
        (o->mix != KVV_SYNTH_PLAIN && o->mix != KVV_SYNTH_Q4_K_M && o->mix != KVV_SYNTH_Q5_K_M))
        return kvv_error_set(err, KVV_ERR_USAGE, "synth: type %s is not one synth writes (%s)",
                             kvv_synth_type_label(o->type, o->mix), KVV_SYNTH_TYPE_NAMES);
    *n_vocab = o->n_vocab > 0 ? o->n_vocab : o->shape->n_vocab;
    if (*n_vocab < KVV_SYNTH_MIN_VOCAB || *n_vocab > KVV_SYNTH_MAX_VOCAB)
        return kvv_error_set(err, KVV_ERR_USAGE, "synth: vocabulary size %d is out of range (%d..%d)",
                             *n_vocab, KVV_SYNTH_MIN_VOCAB, KVV_SYNTH_MAX_VOCAB);
    return KVV_OK;
}

/* ------------------------------------------------------------ metadata */

static kvv_status put_meta(kvv_gguf_writer *w, const kvv_shape *s, uint32_t ftype,
                           const kvv_synth_vocab *v)
{
    const char *a = kvv_arch_name(s->arch);
    char key[128], name[96];
    kvv_status st = KVV_OK;
#define K(sfx) (snprintf(key, sizeof key, "%s.%s", a, sfx), key)
#define PUT(call) do { if (st == KVV_OK) st = (call); } while (0)
    /* general.name must not contain "phi3": llama.cpp's vocab loader then
     * looks for <|endoftext|> by name (../shared/peer/README.md quirks) */
    const char *ph = strstr(s->name, "phi3");
    if (ph)
        snprintf(name, sizeof name, "kvverify-synth-fused-qkv%s", ph + 4);
    else
        snprintf(name, sizeof name, "kvverify-synth-%s", s->name);
    PUT(kvv_gguf_writer_set_str(w, "general.architecture", a));
    PUT(kvv_gguf_writer_set_str(w, "general.name", name));
    PUT(kvv_gguf_writer_set_u32(w, "general.file_type", ftype));
    PUT(kvv_gguf_writer_set_u32(w, "general.quantization_version", 2));
    PUT(kvv_gguf_writer_set_u32(w, "general.alignment", KVV_GGUF_DEFAULT_ALIGNMENT));
    PUT(kvv_gguf_writer_set_u32(w, K("context_length"), (uint32_t)s->n_ctx_train));
    PUT(kvv_gguf_writer_set_u32(w, K("embedding_length"), (uint32_t)s->n_embd));
    PUT(kvv_gguf_writer_set_u32(w, K("block_count"), (uint32_t)s->n_layer));
    PUT(kvv_gguf_writer_set_u32(w, K("feed_forward_length"), (uint32_t)s->n_ff));
    PUT(kvv_gguf_writer_set_u32(w, K("attention.head_count"), (uint32_t)s->n_head));
    PUT(kvv_gguf_writer_set_u32(w, K("attention.head_count_kv"), (uint32_t)s->n_head_kv));
    PUT(kvv_gguf_writer_set_f32(w, K("attention.layer_norm_rms_epsilon"), s->norm_eps));
    PUT(kvv_gguf_writer_set_f32(w, K("rope.freq_base"), s->rope_base));
    if (s->write_head_dim) {
        PUT(kvv_gguf_writer_set_u32(w, K("attention.key_length"), (uint32_t)s->head_dim));
        PUT(kvv_gguf_writer_set_u32(w, K("attention.value_length"), (uint32_t)s->head_dim));
    }
    if (s->arch == KVV_ARCH_LLAMA || s->arch == KVV_ARCH_PHI3)
        PUT(kvv_gguf_writer_set_u32(w, K("rope.dimension_count"), (uint32_t)s->head_dim));
    if (s->arch == KVV_ARCH_LLAMA)
        PUT(kvv_gguf_writer_set_u32(w, K("vocab_size"), (uint32_t)v->n));
    if (s->arch == KVV_ARCH_PHI3)
        PUT(kvv_gguf_writer_set_u32(w, K("rope.scaling.original_context_length"),
                                    (uint32_t)s->n_ctx_train));
    if (s->n_swa > 0)
        PUT(kvv_gguf_writer_set_u32(w, K("attention.sliding_window"), (uint32_t)s->n_swa));
    if (s->swa_pattern > 0)
        PUT(kvv_gguf_writer_set_u32(w, K("attention.sliding_window_pattern"), (uint32_t)s->swa_pattern));
    if (s->rope_base_swa > 0)
        PUT(kvv_gguf_writer_set_f32(w, K("rope.freq_base_swa"), s->rope_base_swa));
    if (s->attn_softcap > 0)
        PUT(kvv_gguf_writer_set_f32(w, K("attn_logit_softcapping"), s->attn_softcap));
    if (s->final_softcap > 0)
        PUT(kvv_gguf_writer_set_f32(w, K("final_logit_softcapping"), s->final_softcap));
    /* tokenizer */
    PUT(kvv_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"));
    PUT(kvv_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens,
                                    (uint64_t)v->n));
    PUT(kvv_gguf_writer_set_arr(w, "tokenizer.ggml.scores", KVV_GGUF_FLOAT32, v->scores,
                                (uint64_t)v->n));
    PUT(kvv_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", KVV_GGUF_INT32, v->types,
                                (uint64_t)v->n));
    PUT(kvv_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0));
    PUT(kvv_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1));
    PUT(kvv_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2));
    PUT(kvv_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true));
    PUT(kvv_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false));
#undef PUT
#undef K
    return st;
}

/* ------------------------------------------------------------ tensors */

/* Encode n floats (rows of ne0) as type into dst. */
static void encode(kvv_type type, const float *x, int64_t ne0, int64_t rows, uint8_t *dst)
{
    size_t rs = kvv_type_row_size(type, ne0);
    for (int64_t r = 0; r < rows; r++)
        kvv_quantize_row(type, x + r * ne0, dst + (size_t)r * rs, ne0);
}

kvv_status kvv_synth_build(const kvv_synth_opts *o, kvv_gguf_writer **out, kvv_error *err)
{
    *out = NULL;
    int n_vocab = 0;
    kvv_status st = check_opts(o, &n_vocab, err);
    if (st)
        return st;
    const kvv_shape *s = o->shape;
    int n = describe(s, n_vocab, NULL);
    tdesc *list = calloc((size_t)n, sizeof *list);
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, KVV_GGUF_DEFAULT_ALIGNMENT);
    kvv_synth_vocab v;
    memset(&v, 0, sizeof v);
    if (!list || !w) {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "synth: out of memory");
        goto done;
    }
    describe(s, n_vocab, list);
    if ((st = kvv_synth_vocab_build(n_vocab, &v, err)))
        goto done;
    if ((st = put_meta(w, s, kvv_synth_file_type(o->type, o->mix), &v))) {
        kvv_error_set(err, st, "synth: cannot add metadata (%s)", kvv_strerror(st));
        goto done;
    }
    const bool own_output = has_output(list, n);
    for (int i = 0; i < n; i++) {
        const tdesc *t = &list[i];
        int64_t rows = t->ne1 ? t->ne1 : 1;
        size_t count = (size_t)(t->ne0 * rows);
        kvv_type ty = stored_type(t, o, own_output);
        float *x = malloc(count * sizeof *x);
        uint8_t *bytes = ty == KVV_TYPE_F32 ? NULL : malloc(kvv_type_row_size(ty, t->ne0) * (size_t)rows);
        if (!x || (ty != KVV_TYPE_F32 && !bytes)) {
            free(x);
            free(bytes);
            st = kvv_error_set(err, KVV_ERR_NOMEM, "synth: out of memory for tensor %s", t->name);
            goto done;
        }
        fill(t, s, o->seed, x);
        if (bytes)
            encode(ty, x, t->ne0, rows, bytes);
        int64_t ne[2] = {t->ne0, rows};
        st = kvv_gguf_writer_add_tensor(w, t->name, ty, t->ne1 ? 2 : 1, ne, bytes ? (void *)bytes : (void *)x);
        free(x);
        free(bytes);
        if (st) {
            kvv_error_set(err, st, "synth: cannot add tensor %s (%s)", t->name, kvv_strerror(st));
            goto done;
        }
        if (o->progress)
            o->progress(o->progress_ctx, i + 1, n);
    }
done:
    kvv_synth_vocab_free(&v);
    free(list);
    if (st) {
        kvv_gguf_writer_free(w);
        return st;
    }
    *out = w;
    return KVV_OK;
}

kvv_status kvv_synth_write(const kvv_synth_opts *o, const char *path, kvv_error *err)
{
    kvv_gguf_writer *w = NULL;
    kvv_status st = kvv_synth_build(o, &w, err);
    if (st)
        return st;
    st = kvv_gguf_writer_write(w, path, err);
    kvv_gguf_writer_free(w);
    return st;
}

uint64_t kvv_synth_size(const kvv_synth_opts *o)
{
    int n_vocab = 0;
    if (check_opts(o, &n_vocab, NULL))
        return 0;
    int n = describe(o->shape, n_vocab, NULL);
    tdesc *list = calloc((size_t)n, sizeof *list);
    if (!list)
        return 0;
    describe(o->shape, n_vocab, list);
    uint64_t total = 0;
    const bool own_output = has_output(list, n);
    for (int i = 0; i < n; i++) {
        uint64_t rows = list[i].ne1 ? (uint64_t)list[i].ne1 : 1;
        uint64_t b = kvv_type_row_size(stored_type(&list[i], o, own_output), list[i].ne0) * rows;
        total += (b + KVV_GGUF_DEFAULT_ALIGNMENT - 1) / KVV_GGUF_DEFAULT_ALIGNMENT * KVV_GGUF_DEFAULT_ALIGNMENT;
    }
    free(list);
    return total;
}
