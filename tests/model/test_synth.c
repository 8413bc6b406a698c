/*
 * test_synth.c — synthetic models and named shapes: every architecture x
 * every type synthesizes and binds with the shape's hyperparameters; same
 * options give the same bytes, another seed other bytes; the weight scheme
 * (scales and gains) is what the header says; rope factors match the
 * llama.cpp peer file; the vocabulary is complete and unique; shapes are
 * consistent and the real shapes have their published geometry.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/gguf.h"
#include "model/shapes.h"
#include "model/synth.h"
#include "model/tokenizer.h"
#include "tests/test_util.h"

typedef struct {
    uint8_t *buf;
    size_t size;
    kvv_model *m;
} built;

static void build(const kvv_shape *s, kvv_type t, uint64_t seed, int vocab, built *b)
{
    kvv_synth_opts o = {.shape = s, .type = t, .seed = seed, .n_vocab = vocab};
    kvv_gguf_writer *w = NULL;
    kvv_error err = {0};
    if (kvv_synth_build(&o, &w, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(kvv_gguf_writer_to_buffer(w, &b->buf, &b->size, &err), KVV_OK);
    kvv_gguf_writer_free(w);
    kvv_gguf *g = NULL;
    if (kvv_gguf_open_memory(b->buf, b->size, s->name, &g, &err))
        fail_msg("%s", err.msg);
    if (kvv_model_from_gguf(g, &b->m, &err)) {
        kvv_gguf_close(g);
        fail_msg("%s: %s", s->name, err.msg);
    }
}

static void unbuild(built *b)
{
    kvv_model_close(b->m);
    free(b->buf);
    memset(b, 0, sizeof *b);
}

/* Everything kvv_hparams_read derives must equal what the shape says. */
static void same_hparams(const kvv_hparams *a, const kvv_hparams *b)
{
    assert_int_equal(a->arch, b->arch);
    assert_int_equal(a->n_layer, b->n_layer);
    assert_int_equal(a->n_embd, b->n_embd);
    assert_int_equal(a->n_head, b->n_head);
    assert_int_equal(a->n_head_kv, b->n_head_kv);
    assert_int_equal(a->head_dim, b->head_dim);
    assert_int_equal(a->head_dim_v, b->head_dim_v);
    assert_int_equal(a->n_ff, b->n_ff);
    assert_int_equal(a->n_vocab, b->n_vocab);
    assert_int_equal(a->n_ctx_train, b->n_ctx_train);
    assert_int_equal(a->rope_type, b->rope_type);
    assert_int_equal(a->n_rot, b->n_rot);
    assert_true(a->rope_base == b->rope_base);
    assert_true(a->rope_base_swa == b->rope_base_swa);
    assert_true(a->norm_eps == b->norm_eps);
    assert_true(a->attn_softcap == b->attn_softcap);
    assert_true(a->final_softcap == b->final_softcap);
    assert_true(a->query_scale == b->query_scale);
    assert_true(a->embd_scale == b->embd_scale);
    assert_int_equal(a->n_swa, b->n_swa);
    assert_int_equal(a->swa_period, b->swa_period);
    assert_memory_equal(a->swa_layer, b->swa_layer, sizeof a->swa_layer);
    assert_int_equal(a->act, b->act);
    assert_int_equal(a->tied_output, b->tied_output);
    assert_int_equal(a->has_qkv_bias, b->has_qkv_bias);
    assert_int_equal(a->has_qk_norm, b->has_qk_norm);
    assert_int_equal(a->has_post_norms, b->has_post_norms);
    assert_int_equal(a->fused_qkv, b->fused_qkv);
    assert_int_equal(a->fused_gate_up, b->fused_gate_up);
}

static void test_every_arch_every_type(void **state)
{
    (void)state;
    const kvv_type types[] = {KVV_TYPE_F32, KVV_TYPE_F16, KVV_TYPE_BF16, KVV_TYPE_Q8_0, KVV_TYPE_Q4_0};
    int tiny = 0;
    for (int i = 0; i < kvv_shape_count(); i++) {
        const kvv_shape *s = kvv_shape_at(i);
        if (s->n_vocab != 512)
            continue; /* real shapes: too big for a unit test */
        tiny++;
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
            built b;
            build(s, types[k], 7, 0, &b);
            kvv_hparams want;
            kvv_shape_hparams(s, 0, &want);
            same_hparams(&b.m->hp, &want);
            /* projections take the type, norms stay F32 */
            assert_int_equal(b.m->tok_embd->type, types[k]);
            assert_int_equal(b.m->output_norm->type, KVV_TYPE_F32);
            assert_int_equal(b.m->layers[0].attn_norm->type, KVV_TYPE_F32);
            assert_int_equal(b.m->layers[0].w_down->type, types[k]);
            /* the name never contains "phi3" (llama.cpp's vocab quirk) */
            char name[128];
            kvv_error err = {0};
            assert_int_equal(kvv_gguf_get_str(b.m->gguf, "general.name", true, name, sizeof name, &err), KVV_OK);
            assert_null(strstr(name, "phi3"));
            unbuild(&b);
        }
    }
    assert_true(tiny >= 6);
    for (int a = 0; a < KVV_ARCH_COUNT; a++)
        assert_non_null(kvv_shape_default((kvv_arch_id)a));
}

static void test_deterministic(void **state)
{
    (void)state;
    const kvv_shape *s = kvv_shape_find("gemma2-tiny");
    built a, b, c;
    build(s, KVV_TYPE_Q8_0, 42, 0, &a);
    build(s, KVV_TYPE_Q8_0, 42, 0, &b);
    build(s, KVV_TYPE_Q8_0, 43, 0, &c);
    assert_int_equal(a.size, b.size);
    assert_memory_equal(a.buf, b.buf, a.size);
    assert_int_equal(a.size, c.size);
    assert_true(memcmp(a.buf, c.buf, a.size) != 0);
    /* the metadata is the same, the weights differ everywhere */
    assert_memory_equal(a.buf, c.buf, a.m->gguf->data_offset);
    const kvv_gguf_tensor *ta = a.m->layers[3].w_up, *tc = c.m->layers[3].w_up;
    assert_true(memcmp(ta->data, tc->data, ta->nbytes) != 0);
    unbuild(&a);
    unbuild(&b);
    unbuild(&c);
    /* and through the file writer */
    kvv_synth_opts o = {.shape = kvv_shape_find("qwen3-tiny"), .type = KVV_TYPE_F16, .seed = 5};
    char p1[1024], p2[1024];
    snprintf(p1, sizeof p1, "%s/s1.gguf", kvv_test_tmpdir());
    snprintf(p2, sizeof p2, "%s/s2.gguf", kvv_test_tmpdir());
    kvv_error err = {0};
    assert_int_equal(kvv_synth_write(&o, p1, &err), KVV_OK);
    assert_int_equal(kvv_synth_write(&o, p2, &err), KVV_OK);
    size_t n1, n2;
    uint8_t *f1 = kvv_test_read_file(p1, &n1), *f2 = kvv_test_read_file(p2, &n2);
    assert_non_null(f1);
    assert_non_null(f2);
    assert_int_equal(n1, n2);
    assert_memory_equal(f1, f2, n1);
    free(f1);
    free(f2);
}

/* mean and standard deviation of a F32 tensor's values */
static void stats(const kvv_gguf_tensor *t, double *mean, double *sd)
{
    assert_int_equal(t->type, KVV_TYPE_F32);
    int64_t n = t->ne[0] * t->ne[1];
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, t->data + 4 * i, 4);
        s += v;
        s2 += (double)v * v;
    }
    *mean = s / (double)n;
    *sd = sqrt(s2 / (double)n - *mean * *mean);
}

static void near(double got, double want, double tol)
{
    if (fabs(got - want) > tol)
        fail_msg("got %g, want %g +- %g", got, want, tol);
}

static void test_weight_scheme(void **state)
{
    (void)state;
    double m, sd;
    built b;
    const kvv_shape *s = kvv_shape_find("llama-tiny");
    build(s, KVV_TYPE_F32, 1, 0, &b);
    stats(b.m->tok_embd, &m, &sd);
    near(m, 0, 0.02);
    near(sd, 1.0, 0.02);
    stats(b.m->layers[0].wq, &m, &sd);
    near(sd * sqrt(96.0), s->qk_gain, 0.05);
    stats(b.m->layers[0].wv, &m, &sd);
    near(sd * sqrt(96.0), 1.0, 0.05);
    stats(b.m->layers[1].wo, &m, &sd);
    near(sd * sqrt(96.0), s->res_gain, 0.3);
    stats(b.m->layers[2].w_down, &m, &sd);
    near(sd * sqrt(256.0), s->res_gain, 0.3);
    stats(b.m->output_norm, &m, &sd);
    near(m, s->out_gain, 0.1);
    near(sd, 0.1 * s->out_gain, 0.05);
    stats(b.m->layers[0].attn_norm, &m, &sd);
    near(m, 1.0, 0.05);
    near(sd, 0.1, 0.03);
    unbuild(&b);

    s = kvv_shape_find("gemma2-tiny");
    build(s, KVV_TYPE_F32, 1, 0, &b);
    stats(b.m->layers[0].post_ffw_norm, &m, &sd);
    near(m, s->res_gain, 1.0);
    stats(b.m->layers[0].wo, &m, &sd);
    near(sd * sqrt(128.0), 1.0, 0.05); /* Gemma: the gain is on the post norm */
    stats(b.m->layers[0].wk, &m, &sd);
    near(sd * sqrt(64.0), 3.0, 0.15);
    /* embedding rows have log-normal scales: their RMS spreads widely */
    double lo = 1e9, hi = 0;
    for (int r = 0; r < 512; r++) {
        double s2 = 0;
        for (int i = 0; i < 64; i++) {
            float v;
            memcpy(&v, b.m->tok_embd->data + 4 * (r * 64 + i), 4);
            s2 += (double)v * v;
        }
        double rms = sqrt(s2 / 64);
        lo = rms < lo ? rms : lo;
        hi = rms > hi ? rms : hi;
    }
    assert_true(hi / lo > 20);
    unbuild(&b);

    s = kvv_shape_find("qwen2-tiny");
    build(s, KVV_TYPE_F32, 1, 0, &b);
    const kvv_gguf_tensor *bq = b.m->layers[0].bq;
    stats(bq, &m, &sd);
    near(sd, 0.5, 0.15);
    stats(b.m->output, &m, &sd);
    near(sd * 8.0, 1.0, 0.05);
    unbuild(&b);

    /* phi3: q/k rows of attn_qkv carry qk_gain, v rows do not */
    s = kvv_shape_find("phi3-tiny");
    build(s, KVV_TYPE_F32, 1, 0, &b);
    const kvv_gguf_tensor *qkv = b.m->layers[0].wqkv;
    double sq = 0, sv = 0;
    for (int r = 0; r < 384; r++)
        for (int i = 0; i < 128; i++) {
            float v;
            memcpy(&v, qkv->data + 4 * (r * 128 + i), 4);
            if (r < 256)
                sq += (double)v * v;
            else
                sv += (double)v * v;
        }
    near(sqrt(sq / (256 * 128)) * sqrt(128.0), 1.5, 0.05);
    near(sqrt(sv / (128 * 128)) * sqrt(128.0), 1.0, 0.05);
    unbuild(&b);
}

static void test_rope_factors_match_peer(void **state)
{
    (void)state;
    built b;
    build(kvv_shape_find("llama3-tiny"), KVV_TYPE_F32, 1, 0, &b);
    const float *f = b.m->hp.rope_freqs;
    assert_non_null(f);
    assert_int_equal(b.m->hp.n_rot, 32);
    /* ../shared/peer/models.json, synth-llama3-rope-f32 "rope_freqs" */
    const double peer[16] = {1, 1, 1, 1, 1, 1.9936383962631226, 4.781833648681641, 8, 8, 8, 8, 8, 8, 8, 8, 8};
    for (int i = 0; i < 16; i++)
        near(f[i], peer[i], 4e-7 * peer[i]);
    unbuild(&b);
    /* compare bit for bit with the peer file when it is there */
    const char *p = kvv_test_shared("peer/models/synth-llama3-rope-f32.gguf");
    if (!p)
        return;
    kvv_model *pm;
    kvv_error err = {0};
    assert_int_equal(kvv_model_open(p, &pm, &err), KVV_OK);
    build(kvv_shape_find("llama3-tiny"), KVV_TYPE_F32, 1, 0, &b);
    for (int i = 0; i < 16; i++)
        near(b.m->hp.rope_freqs[i], pm->hp.rope_freqs[i], 4e-7 * pm->hp.rope_freqs[i]);
    same_hparams(&b.m->hp, &pm->hp);
    unbuild(&b);
    kvv_model_close(pm);
}

static void test_q8_odd_rows_stay_f16(void **state)
{
    (void)state;
    kvv_shape s = *kvv_shape_find("llama-tiny");
    s.n_ff = 172; /* like stories260K: ffn_down rows of 172 */
    built b;
    build(&s, KVV_TYPE_Q8_0, 1, 300, &b);
    assert_int_equal(b.m->hp.n_vocab, 300);
    assert_int_equal(b.m->layers[0].w_down->type, KVV_TYPE_F16);
    assert_int_equal(b.m->layers[0].w_up->type, KVV_TYPE_Q8_0);
    unbuild(&b);
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_vocab(void **state)
{
    (void)state;
    kvv_synth_vocab v;
    kvv_error err = {0};
    assert_int_equal(kvv_synth_vocab_build(KVV_SYNTH_MIN_VOCAB - 1, &v, &err), KVV_ERR_USAGE);
    assert_int_equal(kvv_synth_vocab_build(49152, &v, &err), KVV_OK);
    assert_int_equal(v.n, 49152);
    assert_string_equal(v.tokens[0], "<unk>");
    assert_string_equal(v.tokens[1], "<s>");
    assert_string_equal(v.tokens[2], "</s>");
    assert_string_equal(v.tokens[3], "<0x00>");
    assert_string_equal(v.tokens[258], "<0xFF>");
    assert_string_equal(v.tokens[259], "\xe2\x96\x81");
    assert_int_equal(v.types[0], 2);
    assert_int_equal(v.types[2], 3);
    assert_int_equal(v.types[100], 6);
    assert_int_equal(v.types[300], 1);
    assert_true(v.scores[300] < v.scores[299]);
    /* all unique: sort copies and compare neighbours */
    char **c = malloc((size_t)v.n * sizeof *c);
    memcpy(c, v.tokens, (size_t)v.n * sizeof *c);
    qsort(c, (size_t)v.n, sizeof *c, cmp);
    for (int i = 1; i < v.n; i++)
        if (strcmp(c[i - 1], c[i]) == 0)
            fail_msg("duplicate token '%s'", c[i]);
    free(c);
    kvv_synth_vocab_free(&v);
    kvv_synth_vocab_free(NULL);
}

/* The synthetic vocabulary works as a SentencePiece tokenizer: words of the
 * vocabulary become single pieces, anything else falls back to bytes, and
 * decoding gives the text back. */
static void test_vocab_tokenizes(void **state)
{
    (void)state;
    built b;
    build(kvv_shape_find("llama-tiny"), KVV_TYPE_F32, 1, 4000, &b);
    kvv_tokenizer *tok = NULL;
    kvv_error err = {0};
    if (kvv_tokenizer_open(b.m->gguf, &tok, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(kvv_tokenizer_n_vocab(tok), 4000);
    assert_int_equal(kvv_tokenizer_bos(tok), 1);
    assert_int_equal(kvv_tokenizer_eos(tok), 2);
    const char *text = "ab cd!\n\xc3\xa9";
    int32_t *ids = NULL;
    int n = 0;
    assert_int_equal(kvv_tokenize(tok, text, strlen(text), true, &ids, &n, &err), KVV_OK);
    assert_true(n >= 4);
    assert_int_equal(ids[0], 1); /* BOS */
    /* "▁ab" is a piece of the vocabulary: the first word is one token */
    char piece[64];
    int len = kvv_token_piece(tok, ids[1], piece, sizeof piece);
    assert_int_equal(len, 3);
    assert_memory_equal(piece, " ab", 3);
    /* decoding keeps SentencePiece's leading space, as for stories260K's
     * vocabulary ("Once upon" -> " Once upon") */
    char *back = NULL;
    size_t blen = 0;
    assert_int_equal(kvv_detokenize(tok, ids, n, &back, &blen, &err), KVV_OK);
    if (blen != strlen(text) + 1 || back[0] != ' ' || memcmp(back + 1, text, blen - 1) != 0)
        fail_msg("decoded %zu bytes: [%.*s]", blen, (int)blen, back);
    free(back);
    free(ids);
    kvv_tokenizer_free(tok);
    unbuild(&b);
}

static void test_bad_options(void **state)
{
    (void)state;
    kvv_gguf_writer *w;
    kvv_error err = {0};
    kvv_synth_opts o = {.shape = kvv_shape_find("llama-tiny"), .type = KVV_TYPE_IQ4_XS};
    assert_int_equal(kvv_synth_build(&o, &w, &err), KVV_ERR_USAGE);
    assert_null(w);
    o.type = KVV_TYPE_Q8_0; /* a mix names its own type */
    o.mix = KVV_SYNTH_Q4_K_M;
    assert_int_equal(kvv_synth_build(&o, &w, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "Q4_K_M"));
    o.mix = KVV_SYNTH_PLAIN;
    o.type = KVV_TYPE_F32;
    o.n_vocab = 12;
    assert_int_equal(kvv_synth_build(&o, &w, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "vocabulary size 12"));
    o.shape = NULL;
    assert_int_equal(kvv_synth_build(&o, &w, &err), KVV_ERR_USAGE);
    assert_int_equal(kvv_synth_size(&o), 0);
}

static void test_shapes(void **state)
{
    (void)state;
    char list[1024];
    kvv_shape_list(list, sizeof list);
    for (int i = 0; i < kvv_shape_count(); i++) {
        const kvv_shape *s = kvv_shape_at(i);
        assert_ptr_equal(kvv_shape_find(s->name), s);
        assert_non_null(strstr(list, s->name));
        assert_int_equal(s->n_head % s->n_head_kv, 0);
        if (!s->write_head_dim)
            assert_int_equal(s->n_embd, s->n_head * s->head_dim); /* head_dim is implied */
        assert_true(s->n_vocab <= s->real_vocab);
        assert_true(s->n_vocab <= KVV_SHAPE_VOCAB_CAP || strcmp(s->name, "smollm2-135m") == 0);
        assert_true(s->n_layer <= KVV_MAX_LAYERS);
    }
    assert_null(kvv_shape_find("nope"));
    assert_null(kvv_shape_at(-1));
    assert_null(kvv_shape_at(kvv_shape_count()));
    /* published geometry (config.json) */
    struct { const char *n; int L, E, H, KV, D, F; float base; } real[] = {
        {"smollm2-135m", 30, 576, 9, 3, 64, 1536, 100000.0f},
        {"qwen2.5-0.5b", 24, 896, 14, 2, 64, 4864, 1000000.0f},
        {"qwen3-0.6b", 28, 1024, 16, 8, 128, 3072, 1000000.0f},
        {"qwen3-1.7b", 28, 2048, 16, 8, 128, 6144, 1000000.0f},
        {"llama-3.2-1b", 16, 2048, 32, 8, 64, 8192, 500000.0f},
        {"gemma3-1b", 26, 1152, 4, 1, 256, 6912, 1000000.0f},
        {"gemma3-4b", 34, 2560, 8, 4, 256, 10240, 1000000.0f},
    };
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        const kvv_shape *s = kvv_shape_find(real[i].n);
        assert_non_null(s);
        assert_int_equal(s->n_layer, real[i].L);
        assert_int_equal(s->n_embd, real[i].E);
        assert_int_equal(s->n_head, real[i].H);
        assert_int_equal(s->n_head_kv, real[i].KV);
        assert_int_equal(s->head_dim, real[i].D);
        assert_int_equal(s->n_ff, real[i].F);
        assert_true(s->rope_base == real[i].base);
    }
    assert_int_equal(kvv_shape_find("smollm2-135m")->n_vocab, 49152);
    kvv_hparams hp;
    kvv_shape_hparams(kvv_shape_find("gemma3-1b"), 1000, &hp);
    assert_int_equal(hp.n_vocab, 1000);
    assert_int_equal(hp.n_swa, 512);
    assert_true(hp.swa_layer[4] && !hp.swa_layer[5]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_vocab),
        cmocka_unit_test(test_vocab_tokenizes),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_every_arch_every_type),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_weight_scheme),
        cmocka_unit_test(test_rope_factors_match_peer),
        cmocka_unit_test(test_q8_odd_rows_stay_f16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
