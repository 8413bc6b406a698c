/*
 * test_synth_ktypes.c — the K types of synth and their encoders: the
 * per-tensor types of the Q4_K_M / Q5_K_M mixes are llama-quantize's
 * (counts measured on files it wrote: docs/cpu-engine.md), plain types
 * take llama-quantize's fallbacks; the Q2_K..Q6_K and IQ4_NL encoders
 * (model/quantize_k.c) round-trip within their format's error, give
 * zeros for zeros and the same bytes every time; a llama-k256 model in
 * every K type binds with the expected tensor types and file type.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/gguf.h"
#include "model/shapes.h"
#include "model/synth.h"
#include "tests/test_util.h"

/* Count the types of a shape's quantized tensors (the names synth writes
 * for a llama/qwen3 layer stack) under (t, mix); index by kvv_type. */
static void count_types(const kvv_shape *s, kvv_type t, kvv_synth_mix mix, int *count)
{
    memset(count, 0, sizeof(int) * KVV_TYPE_COUNT);
    const int64_t E = s->n_embd, Q = (int64_t)s->n_head * s->head_dim, F = s->n_ff;
    count[kvv_synth_tensor_type(t, mix, "token_embd.weight", E, s->n_layer, !s->tied)]++;
    if (!s->tied)
        count[kvv_synth_tensor_type(t, mix, "output.weight", E, s->n_layer, true)]++;
    static const char *const names[] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                        "ffn_gate", "ffn_up", "ffn_down"};
    for (int l = 0; l < s->n_layer; l++)
        for (int k = 0; k < 7; k++) {
            char nm[64];
            snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, names[k]);
            int64_t ne0 = k == 3 ? Q : k == 6 ? F : E;
            count[kvv_synth_tensor_type(t, mix, nm, ne0, s->n_layer, !s->tied)]++;
        }
}

static void test_mix_counts(void **state)
{
    (void)state;
    int c[KVV_TYPE_COUNT];
    /* llama-quantize Q4_K_M of synth smollm2-135m: 576-wide rows fall back */
    count_types(kvv_shape_find("smollm2-135m"), KVV_TYPE_Q4_K, KVV_SYNTH_Q4_K_M, c);
    assert_int_equal(c[KVV_TYPE_Q5_0], 166);
    assert_int_equal(c[KVV_TYPE_Q8_0], 15);
    assert_int_equal(c[KVV_TYPE_Q4_K], 16);
    assert_int_equal(c[KVV_TYPE_Q6_K], 14);
    /* ... of qwen3-0.6b: 168 Q4_K, 29 Q6_K (the tied embedding is the output) */
    count_types(kvv_shape_find("qwen3-0.6b"), KVV_TYPE_Q4_K, KVV_SYNTH_Q4_K_M, c);
    assert_int_equal(c[KVV_TYPE_Q4_K], 168);
    assert_int_equal(c[KVV_TYPE_Q6_K], 29);
    count_types(kvv_shape_find("qwen3-0.6b"), KVV_TYPE_Q5_K, KVV_SYNTH_Q5_K_M, c);
    assert_int_equal(c[KVV_TYPE_Q5_K], 168);
    assert_int_equal(c[KVV_TYPE_Q6_K], 29);
    /* plain types: every tensor, with the fallbacks */
    count_types(kvv_shape_find("qwen3-0.6b"), KVV_TYPE_Q6_K, KVV_SYNTH_PLAIN, c);
    assert_int_equal(c[KVV_TYPE_Q6_K], 197);
    count_types(kvv_shape_find("smollm2-135m"), KVV_TYPE_Q2_K, KVV_SYNTH_PLAIN, c);
    assert_int_equal(c[KVV_TYPE_Q2_K], 30);     /* ffn_down: 1536 wide */
    assert_int_equal(c[KVV_TYPE_IQ4_NL], 181);
    assert_int_equal(kvv_synth_tensor_type(KVV_TYPE_Q8_0, KVV_SYNTH_PLAIN, "blk.0.attn_q.weight",
                                           48, 4, true), KVV_TYPE_F16);
    assert_int_equal(kvv_synth_tensor_type(KVV_TYPE_Q5_K, KVV_SYNTH_Q5_K_M, "blk.0.attn_qkv.weight",
                                           256, 4, true), KVV_TYPE_Q6_K);
    assert_int_equal(kvv_synth_tensor_type(KVV_TYPE_Q4_K, KVV_SYNTH_Q4_K_M, "blk.0.attn_qkv.weight",
                                           256, 4, true), KVV_TYPE_Q5_K);
    /* names */
    kvv_type t;
    kvv_synth_mix mix;
    assert_true(kvv_synth_type_parse("Q4_K_M", &t, &mix));
    assert_int_equal(t, KVV_TYPE_Q4_K);
    assert_int_equal(mix, KVV_SYNTH_Q4_K_M);
    assert_true(kvv_synth_type_parse("q3_k", &t, &mix));
    assert_int_equal(mix, KVV_SYNTH_PLAIN);
    assert_false(kvv_synth_type_parse("q8_k", &t, &mix));
    assert_false(kvv_synth_type_parse("q4_k_s", &t, &mix));
    assert_string_equal(kvv_synth_type_label(KVV_TYPE_Q5_K, KVV_SYNTH_Q5_K_M), "Q5_K_M");
    assert_int_equal(kvv_synth_file_type(KVV_TYPE_Q4_K, KVV_SYNTH_Q4_K_M), 15);
    assert_int_equal(kvv_synth_file_type(KVV_TYPE_Q6_K, KVV_SYNTH_PLAIN), 18);
}

/* Round trip of N(0,1)-like values through each encoder: relative RMS error
 * below the bound (what these formats allow: measured 0.27, 0.15, 0.074,
 * 0.036, 0.018, 0.077), an all-zero block decodes to zeros, the same input
 * gives the same bytes. */
static void test_encoders(void **state)
{
    (void)state;
    const kvv_type types[] = {KVV_TYPE_Q2_K, KVV_TYPE_Q3_K, KVV_TYPE_Q4_K,
                              KVV_TYPE_Q5_K, KVV_TYPE_Q6_K, KVV_TYPE_IQ4_NL};
    const double bound[] = {0.30, 0.17, 0.085, 0.042, 0.021, 0.09};
    enum { N = 256 * 32 };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    uint8_t *q = malloc(N), *q2 = malloc(N);
    uint64_t r = 88172645463325252ull;
    for (int i = 0; i < N; i++) { /* sum of 4 uniforms: roughly normal */
        double s = 0;
        for (int k = 0; k < 4; k++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            s += (double)(r >> 11) / 9007199254740992.0 - 0.5;
        }
        x[i] = (float)(s * 1.7320508) * (i < N / 2 ? 1.0f : 0.01f);
    }
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        assert_true(kvv_quantize_row(types[k], x, q, N));
        assert_true(kvv_quantize_row(types[k], x, q2, N));
        size_t bytes = kvv_type_row_size(types[k], N);
        assert_memory_equal(q, q2, bytes);
        assert_true(kvv_dequantize_row(types[k], q, y, N));
        double e = 0, s = 0;
        for (int i = 0; i < N; i++) {
            e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
            s += (double)x[i] * x[i];
        }
        print_message("  %-6s rms rel error %.4f\n", kvv_type_name(types[k]), sqrt(e / s));
        assert_true(sqrt(e / s) < bound[k]);
        float z[256] = {0};
        assert_true(kvv_quantize_row(types[k], z, q, 256));
        assert_true(kvv_dequantize_row(types[k], q, y, 256));
        for (int i = 0; i < 256; i++)
            assert_true(y[i] == 0.0f);
    }
    x[5] = NAN; /* no undefined behaviour on NaN or infinities: some bytes come out */
    x[300] = INFINITY;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        assert_true(kvv_quantize_row(types[k], x, q, 512));
    free(x);
    free(y);
    free(q);
    free(q2);
}

/* A llama-k256 model in each K type and mix: the stored types, the file
 * type, and weights within the format's error of the F32 model's. */
static void test_k256_models(void **state)
{
    (void)state;
    const char *names[] = {"q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q4_k_m", "q5_k_m"};
    const uint32_t ftype[] = {10, 11, 14, 16, 18, 15, 17};
    const kvv_shape *s = kvv_shape_find("llama-k256");
    assert_non_null(s);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        kvv_synth_opts o = {.shape = s, .seed = 5};
        assert_true(kvv_synth_type_parse(names[i], &o.type, &o.mix));
        kvv_gguf_writer *w = NULL;
        kvv_error err = {0};
        if (kvv_synth_build(&o, &w, &err))
            fail_msg("%s", err.msg);
        uint8_t *buf;
        size_t size;
        assert_int_equal(kvv_gguf_writer_to_buffer(w, &buf, &size, &err), KVV_OK);
        kvv_gguf_writer_free(w);
        kvv_gguf *g = NULL;
        kvv_model *m = NULL;
        assert_int_equal(kvv_gguf_open_memory(buf, size, names[i], &g, &err), KVV_OK);
        if (kvv_model_from_gguf(g, &m, &err))
            fail_msg("%s: %s", names[i], err.msg);
        uint32_t ft = 0;
        assert_int_equal(kvv_gguf_get_u32(g, "general.file_type", true, &ft, &err), KVV_OK);
        assert_int_equal(ft, ftype[i]);
        const kvv_type want = o.mix ? KVV_TYPE_Q6_K : o.type;
        assert_int_equal(m->output->type, want);                  /* the output */
        assert_int_equal(m->layers[1].w_down->type, want);        /* a more-bits layer */
        assert_int_equal(m->layers[0].wq->type, o.type);
        assert_int_equal(m->layers[0].attn_norm->type, KVV_TYPE_F32);
        print_message("  %s: %zu bytes\n", names[i], size);
        kvv_model_close(m);
        free(buf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mix_counts),
        cmocka_unit_test(test_encoders),
        cmocka_unit_test(test_k256_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
