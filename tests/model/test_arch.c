/*
 * test_arch.c — architecture description: hyperparameters of every shared
 * model against ../shared/peer/models.json, binding errors on models built
 * with the writer (missing tensor, wrong shape, extra tensor, bad rope
 * dimension), unsupported architectures, llama.cpp's defaults (gemma2 window
 * and period, gemma3 without a window, the gemma 27B query scale), and the
 * per-token memory table.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/gguf.h"
#include "model/shapes.h"
#include "tests/test_util.h"

/* ------------------------------------------------------------ shared models */

static json_t *load_models_json(void)
{
    const char *p = kvv_test_shared("peer/models.json");
    if (!p)
        return NULL;
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    assert_non_null(j);
    return j;
}

/* ../shared/models/FILE or ../shared/peer/models/FILE, or NULL. */
static const char *model_path(const char *file)
{
    static char buf[1024];
    const char *dirs[2] = {"models", "peer/models"};
    for (int i = 0; i < 2; i++) {
        const char *d = kvv_test_shared(dirs[i]);
        if (!d)
            return NULL;
        snprintf(buf, sizeof buf, "%s/%s", d, file);
        FILE *f = fopen(buf, "rb");
        if (f) {
            fclose(f);
            return buf;
        }
    }
    return NULL;
}

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : -1.0;
}

static void check_one(const char *stem, json_t *m)
{
    const char *file = json_string_value(json_object_get(m, "file"));
    const char *path = model_path(file);
    assert_non_null(path);
    kvv_model *mod = NULL;
    kvv_error err = {0};
    kvv_status st = kvv_model_open(path, &mod, &err);
    if (st)
        fprintf(stderr, "%s: %s\n", stem, err.msg);
    assert_int_equal(st, KVV_OK);
    const kvv_hparams *hp = &mod->hp;
    assert_string_equal(hp->arch_name, json_string_value(json_object_get(m, "arch")));
    assert_int_equal(hp->n_layer, (int)jnum(m, "n_layer"));
    assert_int_equal(hp->n_embd, (int)jnum(m, "n_embd"));
    assert_int_equal(hp->n_ff, (int)jnum(m, "n_ff"));
    assert_int_equal(hp->n_head, (int)jnum(m, "n_head"));
    assert_int_equal(hp->n_head_kv, (int)jnum(m, "n_head_kv"));
    assert_int_equal(hp->head_dim, (int)jnum(m, "head_dim"));
    assert_int_equal(hp->head_dim_v, (int)jnum(m, "head_dim"));
    assert_int_equal(hp->n_vocab, (int)jnum(m, "n_vocab"));
    assert_int_equal(hp->n_ctx_train, (int)jnum(m, "n_ctx_train"));
    assert_true(hp->rope_base == (float)jnum(m, "rope_freq_base"));
    assert_true(hp->norm_eps == (float)jnum(m, "rms_eps"));
    json_t *swab = json_object_get(m, "rope_freq_base_swa");
    if (json_is_number(swab))
        assert_true(hp->rope_base_swa == (float)json_number_value(swab));
    assert_int_equal(hp->tied_output, json_is_true(json_object_get(m, "tied_embeddings")));
    assert_true(hp->tied_output ? mod->output == mod->tok_embd : mod->output != mod->tok_embd);
    /* window: the file's value for gemma, ignored for phi3 */
    json_t *win = json_object_get(m, "sliding_window");
    if (hp->arch == KVV_ARCH_GEMMA2 || hp->arch == KVV_ARCH_GEMMA3)
        assert_int_equal(hp->n_swa, (int)json_integer_value(win));
    else
        assert_int_equal(hp->n_swa, 0);
    json_t *sc = json_object_get(m, "attn_logit_softcapping");
    assert_true(hp->attn_softcap == (json_is_number(sc) ? (float)json_number_value(sc) : 0.0f));
    sc = json_object_get(m, "final_logit_softcapping");
    assert_true(hp->final_softcap == (json_is_number(sc) ? (float)json_number_value(sc) : 0.0f));
    assert_int_equal(hp->rope_type, hp->arch == KVV_ARCH_LLAMA ? KVV_ROPE_NORM : KVV_ROPE_NEOX);
    /* rope_freqs values */
    json_t *rf = json_object_get(m, "rope_freqs");
    if (json_is_array(rf)) {
        assert_non_null(hp->rope_freqs);
        assert_int_equal((int)json_array_size(rf), hp->n_rot / 2);
        for (size_t i = 0; i < json_array_size(rf); i++)
            assert_true(hp->rope_freqs[i] == (float)json_number_value(json_array_get(rf, i)));
    } else {
        assert_null(hp->rope_freqs);
    }
    /* every tensor in the file is bound with the type models.json lists */
    json_t *types = json_object_get(m, "tensor_types");
    assert_int_equal((int)json_object_size(types), (int)mod->gguf->n_tensors);
    const char *tname;
    json_t *tv;
    json_object_foreach(types, tname, tv) {
        const kvv_gguf_tensor *t = kvv_gguf_find_tensor(mod->gguf, tname);
        assert_non_null(t);
        assert_string_equal(kvv_type_name(t->type), json_string_value(tv));
    }
    assert_true(mod->layers[hp->n_layer - 1].w_down != NULL);
    kvv_model_close(mod);
}

static void test_shared_models_hparams(void **state)
{
    (void)state;
    json_t *j = load_models_json();
    if (!j) {
        skip();
        return;
    }
    const char *stem;
    json_t *m;
    int n = 0;
    json_object_foreach(j, stem, m) {
        check_one(stem, m);
        n++;
    }
    assert_int_equal(n, 13);
    json_decref(j);
    /* ollama's random llama: the full 32000-token Llama 2 vocabulary */
    kvv_model *tiny;
    kvv_error err = {0};
    assert_int_equal(kvv_model_open(model_path("llama-2-tiny-random.gguf"), &tiny, &err), KVV_OK);
    assert_int_equal(tiny->hp.n_vocab, 32000);
    assert_int_equal(tiny->hp.n_embd, 8);
    assert_int_equal(tiny->hp.n_layer, 1);
    assert_int_equal(tiny->gguf->n_tensors, 12);
    kvv_model_close(tiny);
}

/* Per-architecture facts from ../shared/peer/README.md. */
static void test_peer_semantics(void **state)
{
    (void)state;
    const char *p = model_path("synth-gemma2-f32.gguf");
    if (!p) {
        skip();
        return;
    }
    kvv_model *m;
    kvv_error err = {0};
    assert_int_equal(kvv_model_open(p, &m, &err), KVV_OK);
    /* no pattern key: period 2, layers 0 and 2 local */
    assert_int_equal(m->hp.swa_period, 2);
    assert_true(m->hp.swa_layer[0] && !m->hp.swa_layer[1] && m->hp.swa_layer[2] && !m->hp.swa_layer[3]);
    assert_true(m->hp.embd_scale == sqrtf(64.0f));
    assert_true(m->hp.query_scale == 1.0f / sqrtf(32.0f));
    assert_int_equal(m->hp.act, KVV_ACT_GELU_TANH);
    assert_true(m->hp.has_post_norms && m->layers[0].post_attn_norm && m->layers[0].post_ffw_norm);
    assert_true(kvv_hparams_rope_base(&m->hp, 0) == 10000.0f);
    kvv_model_close(m);

    assert_int_equal(kvv_model_open(model_path("synth-gemma3-f32.gguf"), &m, &err), KVV_OK);
    assert_int_equal(m->hp.swa_period, 3);
    assert_true(m->hp.swa_layer[0] && m->hp.swa_layer[1] && !m->hp.swa_layer[2]);
    assert_true(kvv_hparams_rope_base(&m->hp, 0) == 10000.0f);
    assert_true(kvv_hparams_rope_base(&m->hp, 2) == 1000000.0f);
    assert_non_null(m->layers[2].q_norm);
    kvv_model_close(m);

    assert_int_equal(kvv_model_open(model_path("synth-phi3-f32.gguf"), &m, &err), KVV_OK);
    assert_true(m->hp.fused_qkv && m->hp.fused_gate_up && m->layers[0].wqkv && !m->layers[0].wq);
    assert_null(m->layers[0].w_gate);
    assert_int_equal(m->layers[0].w_up->ne[1], 2 * 256);
    assert_int_equal(m->hp.n_swa, 0);
    kvv_model_close(m);

    assert_int_equal(kvv_model_open(model_path("synth-qwen2-f32.gguf"), &m, &err), KVV_OK);
    assert_true(m->layers[1].bq && m->layers[1].bk && m->layers[1].bv);
    kvv_model_close(m);
}

static void test_unsupported_vocab_file(void **state)
{
    (void)state;
    const char *p = kvv_test_shared("models/vocab/ggml-vocab-bert-bge.gguf");
    if (!p) {
        skip();
        return;
    }
    kvv_gguf *g;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_open(p, &g, &err), KVV_OK);
    kvv_hparams hp;
    assert_int_equal(kvv_hparams_read(g, &hp, &err), KVV_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "general.architecture 'bert' is not supported"));
    assert_non_null(strstr(err.msg, "llama, qwen2, qwen3, gemma2, gemma3, phi3"));
    kvv_model *m;
    assert_int_equal(kvv_model_from_gguf(g, &m, &err), KVV_ERR_UNSUPPORTED);
    kvv_gguf_close(g);
    /* a vocab-only llama file has no tensors: the binding says what is missing */
    p = kvv_test_shared("models/vocab/ggml-vocab-llama-spm.gguf");
    assert_int_equal(kvv_model_open(p, &m, &err), KVV_ERR_FORMAT);
}

/* ------------------------------------------------------------ built models */

typedef struct {
    const char *arch;
    int n_layer;
    int rope_dim;           /* 0: not written */
    int window;             /* 0: not written */
    int pattern;            /* 0: not written; -1: written as an array */
    const char *skip_tensor;    /* leave this tensor out */
    const char *bad_tensor;     /* give this tensor a wrong shape */
    const char *extra_tensor;   /* add this tensor */
} build_opts;

/* A small model (n_embd 16, 2 heads / 1 kv head, head dim 8, n_ff 32,
 * vocab 24) of a llama-like structure for opts->arch, F32 zeros. */
static kvv_gguf *build(const build_opts *o, kvv_error *err)
{
    const int E = 16, H = 2, KV = 1, D = 8, F = 32, NV = 24;
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    char key[128];
    kvv_gguf_writer_set_str(w, "general.architecture", o->arch);
#define KEY(s) (snprintf(key, sizeof key, "%s.%s", o->arch, s), key)
    kvv_gguf_writer_set_u32(w, KEY("context_length"), 256);
    kvv_gguf_writer_set_u32(w, KEY("embedding_length"), E);
    kvv_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)o->n_layer);
    kvv_gguf_writer_set_u32(w, KEY("feed_forward_length"), F);
    kvv_gguf_writer_set_u32(w, KEY("attention.head_count"), H);
    kvv_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), KV);
    kvv_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    if (o->rope_dim)
        kvv_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)o->rope_dim);
    if (o->window)
        kvv_gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)o->window);
    if (o->pattern > 0)
        kvv_gguf_writer_set_u32(w, KEY("attention.sliding_window_pattern"), (uint32_t)o->pattern);
    if (o->pattern < 0) {
        const uint8_t pat[4] = {1, 0, 1, 0};
        kvv_gguf_writer_set_arr(w, KEY("attention.sliding_window_pattern"), KVV_GGUF_BOOL, pat, 4);
    }
    kvv_gguf_writer_set_u32(w, KEY("vocab_size"), NV);
#undef KEY
    static const float zeros[64 * 64] = {0};
    kvv_arch_id id;
    bool known = kvv_arch_from_name(o->arch, &id);
    bool gemma = known && (id == KVV_ARCH_GEMMA2 || id == KVV_ARCH_GEMMA3);
    bool qkn = known && (id == KVV_ARCH_QWEN3 || id == KVV_ARCH_GEMMA3);
    struct tinfo { char name[64]; int64_t ne0, ne1; };
    struct tinfo *t = calloc((size_t)(3 + 16 * o->n_layer), sizeof *t);
    assert_non_null(t);
    int n = 0;
#define T(nm, a, b) (snprintf(t[n].name, sizeof t[n].name, "%s", nm), t[n].ne0 = (a), t[n].ne1 = (b), n++)
    T("token_embd.weight", E, NV);
    T("output_norm.weight", E, 0);
    for (int il = 0; il < o->n_layer; il++) {
        char nm[64];
#define B(s, a, b) (snprintf(nm, sizeof nm, "blk.%d.%s", il, s), T(nm, a, b))
        B("attn_norm.weight", E, 0);
        B("attn_q.weight", E, H * D);
        B("attn_k.weight", E, KV * D);
        B("attn_v.weight", E, KV * D);
        if (qkn) {
            B("attn_q_norm.weight", D, 0);
            B("attn_k_norm.weight", D, 0);
        }
        B("attn_output.weight", H * D, E);
        if (gemma)
            B("post_attention_norm.weight", E, 0);
        B("ffn_norm.weight", E, 0);
        B("ffn_gate.weight", E, F);
        B("ffn_up.weight", E, F);
        B("ffn_down.weight", F, E);
        if (gemma)
            B("post_ffw_norm.weight", E, 0);
#undef B
    }
    if (o->extra_tensor)
        T(o->extra_tensor, E, 0);
#undef T
    for (int i = 0; i < n; i++) {
        if (o->skip_tensor && strcmp(t[i].name, o->skip_tensor) == 0)
            continue;
        int64_t ne[2] = {t[i].ne0, t[i].ne1};
        if (o->bad_tensor && strcmp(t[i].name, o->bad_tensor) == 0)
            ne[0] += 1;
        kvv_gguf_writer_add_tensor(w, t[i].name, KVV_TYPE_F32, ne[1] ? 2 : 1, ne, zeros);
    }
    free(t);
    char path[1024];
    snprintf(path, sizeof path, "%s/built.gguf", kvv_test_tmpdir());
    kvv_status st = kvv_gguf_writer_write(w, path, err);
    kvv_gguf_writer_free(w);
    assert_int_equal(st, KVV_OK);
    kvv_gguf *g = NULL;
    st = kvv_gguf_open(path, &g, err);
    assert_int_equal(st, KVV_OK);
    return g;
}

static kvv_status bind_built(const build_opts *o, kvv_error *err, kvv_model **out)
{
    kvv_error e0 = {0};
    kvv_gguf *g = build(o, &e0);
    kvv_model *m = NULL;
    kvv_status st = kvv_model_from_gguf(g, &m, err);
    if (st) {
        kvv_gguf_close(g);
        *out = NULL;
    } else {
        *out = m;
    }
    return st;
}

static void test_bind_ok_and_errors(void **state)
{
    (void)state;
    kvv_error err = {0};
    kvv_model *m;
    build_opts o = {.arch = "llama", .n_layer = 2, .rope_dim = 8};
    assert_int_equal(bind_built(&o, &err, &m), KVV_OK);
    assert_true(m->hp.tied_output && m->output == m->tok_embd);
    assert_int_equal(m->hp.n_vocab, 24);
    kvv_model_close(m);

    o.skip_tensor = "blk.1.ffn_up.weight";
    assert_int_equal(bind_built(&o, &err, &m), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "built.gguf: tensor blk.1.ffn_up.weight: missing"));

    o.skip_tensor = NULL;
    o.bad_tensor = "blk.0.attn_k.weight";
    assert_int_equal(bind_built(&o, &err, &m), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "tensor blk.0.attn_k.weight"));
    assert_non_null(strstr(err.msg, "expected shape {16,8}, found {17,8}"));

    o.bad_tensor = "output_norm.weight";
    assert_int_equal(bind_built(&o, &err, &m), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "expected shape {16}, found {17}"));

    o.bad_tensor = NULL;
    o.extra_tensor = "blk.0.attn_q.bias";
    assert_int_equal(bind_built(&o, &err, &m), KVV_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "blk.0.attn_q.bias"));

    /* llama: rope.dimension_count must equal head_dim */
    build_opts r = {.arch = "llama", .n_layer = 1, .rope_dim = 4};
    assert_int_equal(bind_built(&r, &err, &m), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "llama.rope.dimension_count at byte "));
    assert_non_null(strstr(err.msg, "invalid n_rot"));

    /* qwen3 without its q/k norms */
    build_opts q = {.arch = "qwen3", .n_layer = 1, .skip_tensor = "blk.0.attn_k_norm.weight"};
    assert_int_equal(bind_built(&q, &err, &m), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "attn_k_norm.weight: missing (required by qwen3)"));
    q.skip_tensor = NULL;
    assert_int_equal(bind_built(&q, &err, &m), KVV_OK);
    assert_int_equal(m->hp.rope_type, KVV_ROPE_NEOX);
    kvv_model_close(m);

    /* unsupported architecture, even with tensors */
    build_opts b = {.arch = "bert", .n_layer = 1};
    assert_int_equal(bind_built(&b, &err, &m), KVV_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "built.gguf: general.architecture 'bert' is not supported"));
}

static void test_swa_defaults(void **state)
{
    (void)state;
    kvv_error err = {0};
    kvv_model *m;
    /* gemma2 without window keys: llama.cpp's 4096, period 2 */
    build_opts o = {.arch = "gemma2", .n_layer = 4};
    assert_int_equal(bind_built(&o, &err, &m), KVV_OK);
    assert_int_equal(m->hp.n_swa, 4096);
    assert_int_equal(m->hp.swa_period, 2);
    assert_true(m->hp.swa_layer[0] && !m->hp.swa_layer[1]);
    assert_true(m->hp.attn_softcap == 50.0f && m->hp.final_softcap == 30.0f);
    kvv_model_close(m);
    /* an array-valued pattern is ignored (the default stays) */
    o.pattern = -1;
    o.window = 8;
    assert_int_equal(bind_built(&o, &err, &m), KVV_OK);
    assert_int_equal(m->hp.swa_period, 2);
    assert_int_equal(m->hp.n_swa, 8);
    kvv_model_close(m);
    /* gemma3: period 6 by default; layer 5 global, 0..4 and 6 local */
    build_opts g3 = {.arch = "gemma3", .n_layer = 7, .window = 32};
    assert_int_equal(bind_built(&g3, &err, &m), KVV_OK);
    assert_int_equal(m->hp.swa_period, 6);
    for (int il = 0; il < 7; il++)
        assert_int_equal(m->hp.swa_layer[il], il != 5);
    assert_true(kvv_hparams_rope_base(&m->hp, 0) == 10000.0f);
    assert_true(kvv_hparams_rope_base(&m->hp, 5) == 10000.0f); /* no freq_base: default 1e4 */
    kvv_model_close(m);
    /* gemma3 without a window: no local layers */
    g3.window = 0;
    if (bind_built(&g3, &err, &m) != KVV_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(m->hp.n_swa, 0);
    for (int il = 0; il < 7; il++)
        assert_false(m->hp.swa_layer[il]);
    kvv_model_close(m);
    /* gemma2 with 46 layers is the 27B: q scale 1/sqrt(n_embd/n_head) */
    build_opts big = {.arch = "gemma2", .n_layer = 46};
    assert_int_equal(bind_built(&big, &err, &m), KVV_OK);
    assert_true(m->hp.query_scale == 1.0f / sqrtf(8.0f));
    kvv_model_close(m);
}

/* ------------------------------------------------------------ memory */

static void test_token_memory(void **state)
{
    (void)state;
    const kvv_shape *s = kvv_shape_find("gemma3-4b");
    assert_non_null(s);
    kvv_hparams hp;
    kvv_shape_hparams(s, 0, &hp);
    kvv_token_memory mem;
    kvv_token_memory_of(&hp, &mem);
    assert_int_equal(mem.kv_bf16, 136 * 1024);
    assert_int_equal(mem.kv_f16, 136 * 1024);
    assert_int_equal(mem.kv_f32, 272 * 1024);
    assert_int_equal(mem.resid_bf16, 5 * 1024);
    assert_int_equal(mem.resid_f32, 10 * 1024);
    assert_int_equal(mem.resid_layers_bf16, 170 * 1024);
    assert_true(fabs((double)mem.kv_bf16 / (double)mem.resid_bf16 - 27.2) < 1e-9);
}

static void test_arch_names(void **state)
{
    (void)state;
    kvv_arch_id a;
    for (int i = 0; i < KVV_ARCH_COUNT; i++) {
        assert_true(kvv_arch_from_name(kvv_arch_name((kvv_arch_id)i), &a));
        assert_int_equal(a, i);
    }
    assert_false(kvv_arch_from_name("bert", &a));
    assert_false(kvv_arch_from_name("Llama", &a));
    assert_string_equal(kvv_arch_name(KVV_ARCH_COUNT), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arch_names),
        cmocka_unit_test(test_shared_models_hparams),
        cmocka_unit_test(test_peer_semantics),
        cmocka_unit_test(test_unsupported_vocab_file),
        cmocka_unit_test(test_bind_ok_and_errors),
        cmocka_unit_test(test_swa_defaults),
        cmocka_unit_test(test_token_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
