/*
 * test_engine_registry.c — engine/engine.c, engine/engine_registry.c and the
 * reference adapter engine/ref/engine_ref.c: opening by name, an unknown
 * name (KVV_ERR_USAGE naming the engines available), each engine's facts
 * (the registry's columns), modes, option checks, the vtable wrappers
 * (forward, kv_from_residual, cache, describe, reset) giving exactly what the
 * reference engine gives, and mode/cache-type names.
 * Uses a synthetic model built in memory (no ../shared needed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/engine_ops.h"
#include "engine/engine_registry.h"
#include "reference/ref.h"
#include "model/synth.h"
#include "tests/test_util.h"

typedef struct {
    uint8_t *buf;
    kvv_model *m;
} synth_model;

static void synth_open(synth_model *s, const char *shape)
{
    kvv_error err = {0};
    kvv_synth_opts o;
    memset(&o, 0, sizeof o);
    o.shape = kvv_shape_find(shape);
    assert_non_null(o.shape);
    o.type = KVV_TYPE_F32;
    o.seed = 2;
    kvv_gguf_writer *w;
    size_t size = 0;
    kvv_gguf *g = NULL;
    if (kvv_synth_build(&o, &w, &err) || kvv_gguf_writer_to_buffer(w, &s->buf, &size, &err))
        fail_msg("%s", err.msg);
    kvv_gguf_writer_free(w);
    if (kvv_gguf_open_memory(s->buf, size, shape, &g, &err) || kvv_model_from_gguf(g, &s->m, &err))
        fail_msg("%s", err.msg);
}

static void synth_close(synth_model *s)
{
    kvv_model_close(s->m);
    free(s->buf);
}

static void test_names(void **state)
{
    (void)state;
    kvv_mode md;
    assert_string_equal(kvv_mode_name(KVV_MODE_EXACT), "exact");
    assert_string_equal(kvv_mode_name(KVV_MODE_INVARIANT), "invariant");
    assert_string_equal(kvv_mode_name((kvv_mode)99), "unknown");
    assert_true(kvv_mode_from_name("fast", &md) && md == KVV_MODE_FAST);
    assert_false(kvv_mode_from_name("Fast", &md));
    assert_false(kvv_mode_from_name(NULL, &md));
    kvv_cache_type ct;
    assert_true(kvv_cache_type_from_name("bf16", &ct) && ct == KVV_CACHE_BF16);
    assert_false(kvv_cache_type_from_name("f8", &ct));
    assert_string_equal(kvv_cache_type_name(KVV_CACHE_F16), "f16");
    kvv_engine_opts o = kvv_engine_opts_default();
    assert_string_equal(o.name, "ref");
    assert_int_equal(o.mode, KVV_MODE_EXACT);
    assert_int_equal(o.cache_type, KVV_CACHE_F32);
}

static void test_open_errors(void **state)
{
    (void)state;
    synth_model s;
    synth_open(&s, "llama-tiny");
    kvv_error err = {0};
    kvv_engine *e = (kvv_engine *)&err; /* must be reset to NULL on failure */
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = "nope";
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_ERR_USAGE);
    assert_null(e);
    assert_non_null(strstr(err.msg, "unknown engine 'nope'"));
    assert_non_null(strstr(err.msg, "available: ref"));
    o = kvv_engine_opts_default();
    o.mode = KVV_MODE_FAST;
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "exact"));
    o = kvv_engine_opts_default();
    o.n_ctx = -3;
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_ERR_USAGE);
    o = kvv_engine_opts_default();
    o.cache_type = (kvv_cache_type)7;
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_ERR_USAGE);
    o = kvv_engine_opts_default(); /* kernel tables are the cpu engine's */
    o.isa = "generic";
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_ERR_USAGE);
    assert_string_equal(err.msg, "engine ref does not take --isa generic (it applies to the cpu "
                                 "engine)");
    o.name = "cpu"; /* the reference's mode is not the cpu engine's (as fast is not the
                     * reference's): refused, never run as another mode */
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_ERR_USAGE);
    assert_null(e);
    assert_string_equal(err.msg, "engine cpu has no mode 'exact' (its modes: fast, invariant)");
    o.mode = KVV_MODE_INVARIANT;
    o.isa = "avx9000";
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_ERR_USAGE);
    assert_null(e);
    assert_non_null(strstr(err.msg, "avx9000: no such kernel table"));
    o.isa = "generic";
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_OK);
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    assert_string_equal(d.isa, "generic");
    kvv_engine_close(e);
    assert_int_equal(kvv_engine_open(NULL, NULL, &e, &err), KVV_ERR_USAGE);
    kvv_engine_close(NULL);
    assert_int_equal(kvv_engine_forward(NULL, 1, NULL, NULL, NULL, KVV_LOGITS_NONE, NULL, &err),
                     KVV_ERR_USAGE);
    assert_null(kvv_engine_cache(NULL));
    synth_close(&s);
}

/* Each engine's facts come from its registry row; a name the table does not
 * hold is a plugin's. */
static void test_facts(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(kvv_engine_registered(0), "ref"); /* the default engine first */
    assert_string_equal(kvv_engine_registered(1), "cpu");
    assert_string_equal(kvv_engine_registered(2), "llama.cpp");
    assert_null(kvv_engine_registered(3));
    assert_null(kvv_engine_registered(-1));
    assert_int_equal(kvv_engine_default_mode(NULL), KVV_MODE_EXACT);
    assert_int_equal(kvv_engine_default_mode("ref"), KVV_MODE_EXACT);
    assert_int_equal(kvv_engine_default_mode("cpu"), KVV_MODE_INVARIANT);
    assert_int_equal(kvv_engine_default_mode("plugin:x.so"), KVV_MODE_INVARIANT);
    assert_true(kvv_engine_has_mode("ref", KVV_MODE_EXACT));
    assert_false(kvv_engine_has_mode("ref", KVV_MODE_FAST));
    assert_false(kvv_engine_has_mode("cpu", KVV_MODE_EXACT));
    assert_true(kvv_engine_has_mode("cpu", KVV_MODE_FAST));
    assert_true(kvv_engine_has_mode("example", KVV_MODE_FAST)); /* a plugin: passed on */
    assert_false(kvv_engine_has_mode("cpu", (kvv_mode)KVV_MODE_COUNT));
    assert_string_equal(kvv_engine_modes("cpu", buf, sizeof buf), "fast, invariant");
    assert_string_equal(kvv_engine_modes("ref", buf, sizeof buf), "exact");
    assert_string_equal(kvv_engine_modes("llama.cpp", buf, sizeof buf), "native");
    kvv_error err = {0};
    assert_int_equal(kvv_engine_check_mode("cpu", KVV_MODE_EXACT, &err), KVV_ERR_USAGE);
    assert_string_equal(err.msg, "engine cpu has no mode 'exact' (its modes: fast, invariant)");
    assert_int_equal(kvv_engine_check_mode("ref", KVV_MODE_FAST, &err), KVV_ERR_USAGE);
    assert_string_equal(err.msg, "engine ref has no mode 'fast' (its modes: exact)");
    assert_int_equal(kvv_engine_check_mode("cpu", KVV_MODE_FAST, &err), KVV_OK);
    assert_true(kvv_engine_name_concurrent(NULL));
    assert_true(kvv_engine_name_concurrent("cpu"));
    assert_false(kvv_engine_name_concurrent("llama.cpp"));
    assert_false(kvv_engine_name_concurrent("plugin:x.so"));
    assert_false(kvv_engine_is_plugin("ref"));
    assert_true(kvv_engine_is_plugin("llama.cpp"));
    assert_true(kvv_engine_is_plugin("example"));
    assert_true(kvv_ops_available("ref") && kvv_ops_available("cpu"));
    assert_false(kvv_ops_available("llama.cpp"));
}

/* The generic mode check refuses cpu exact at open, as it refuses ref fast;
 * an op set is opened by name. */
static void test_mode_refused(void **state)
{
    (void)state;
    synth_model s;
    synth_open(&s, "llama-tiny");
    kvv_error err = {0};
    kvv_engine *e = NULL;
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = "cpu"; /* mode exact, the default options' */
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_ERR_USAGE);
    assert_null(e);
    assert_non_null(strstr(err.msg, "engine cpu has no mode 'exact'"));
    o.mode = kvv_engine_default_mode(o.name);
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_OK);
    kvv_engine_close(e);
    kvv_ops *ops = NULL;
    o.name = "llama.cpp";
    assert_int_equal(kvv_ops_open(s.m, &o, &ops, &err), KVV_ERR_UNSUPPORTED);
    assert_null(ops);
    assert_non_null(strstr(err.msg, "engines with one: ref, cpu"));
    o.name = "cpu";
    o.mode = KVV_MODE_EXACT;
    assert_int_equal(kvv_ops_open(s.m, &o, &ops, &err), KVV_ERR_USAGE);
    o.mode = KVV_MODE_FAST;
    o.n_ctx = 16;
    assert_int_equal(kvv_ops_open(s.m, &o, &ops, &err), KVV_OK);
    assert_string_equal(ops->name, "cpu/fast");
    kvv_ops_close(ops);
    synth_close(&s);
}

/* The options table: which engine takes what, one check at open with one
 * message, and the options for a second engine. */
static void test_options(void **state)
{
    (void)state;
    assert_true(kvv_engine_takes("ref", KVV_ENGINE_OPT_GGML));
    assert_false(kvv_engine_takes("ref", KVV_ENGINE_OPT_THREADS));
    assert_true(kvv_engine_takes("ref", KVV_ENGINE_OPT_MODE | KVV_ENGINE_OPT_CACHE));
    assert_true(kvv_engine_takes("cpu", KVV_ENGINE_OPT_ISA | KVV_ENGINE_OPT_REPACK));
    assert_false(kvv_engine_takes("cpu", KVV_ENGINE_OPT_ISA | KVV_ENGINE_OPT_DEVICE));
    assert_true(kvv_engine_takes("llama.cpp", KVV_ENGINE_OPT_DEVICE | KVV_ENGINE_OPT_UBATCH));
    assert_true(kvv_engine_takes("plugin:x.so", KVV_ENGINE_OPT_EOPT));
    assert_false(kvv_engine_takes("plugin:x.so", KVV_ENGINE_OPT_ISA));
    assert_false(kvv_engine_takes("cpu", 0));
    assert_true(kvv_engine_takes_key("cpu", "dequant_all=1"));
    assert_true(kvv_engine_takes_key("cpu", "f32_act"));
    assert_false(kvv_engine_takes_key("cpu", "f32_ac=1"));
    assert_false(kvv_engine_takes_key("cpu", "dequant_all_x=1"));
    assert_false(kvv_engine_takes_key("ref", "dequant_all=1"));
    assert_true(kvv_engine_takes_key("example", "anything=1")); /* the plugin checks */
    assert_string_equal(kvv_engine_opt_name(KVV_ENGINE_OPT_REPACK), "--repack");
    assert_string_equal(kvv_engine_opt_name(3), "?");

    kvv_error err = {0};
    kvv_engine_opts o = kvv_engine_opts_default();
    assert_int_equal(kvv_engine_check_opts(&o, &err), KVV_OK);
    o.n_threads = 8; /* never refused: the reference runs one */
    assert_int_equal(kvv_engine_check_opts(&o, &err), KVV_OK);
    o.repack = 1;
    assert_int_equal(kvv_engine_check_opts(&o, &err), KVV_ERR_USAGE);
    assert_string_equal(err.msg, "engine ref does not take --repack (it applies to the cpu "
                                 "engine)");
    o.repack = 0;
    o.n_ubatch = 4;
    assert_int_equal(kvv_engine_check_opts(&o, &err), KVV_ERR_USAGE);
    assert_string_equal(err.msg, "engine ref does not take --ubatch 4 (it applies to the "
                                 "llama.cpp engine and plugins)");
    o.n_ubatch = 0;
    o.device = "cpu"; /* its one device may be named */
    assert_int_equal(kvv_engine_check_opts(&o, &err), KVV_OK);
    const char *eo[] = {"dequant_all=1", "f32_act=0"};
    o.engine_opts = eo;
    o.n_engine_opts = 2;
    assert_int_equal(kvv_engine_check_opts(&o, &err), KVV_ERR_USAGE);
    assert_string_equal(err.msg, "engine ref does not take --engine-opt dequant_all=1 (it "
                                 "applies to the cpu and llama.cpp engines and plugins)");
    o.name = "cpu";
    o.mode = KVV_MODE_FAST;
    assert_int_equal(kvv_engine_check_opts(&o, &err), KVV_OK);
    eo[1] = "f32=1";
    assert_int_equal(kvv_engine_check_opts(&o, &err), KVV_ERR_USAGE);
    assert_string_equal(err.msg, "engine cpu does not take --engine-opt f32=1 (its keys: "
                                 "dequant_all, f32_act, seq_leak)");
    o.n_engine_opts = 0;
    o.ggml = 1;
    assert_int_equal(kvv_engine_check_opts(&o, &err), KVV_ERR_USAGE);
    assert_string_equal(err.msg, "engine cpu does not take --emulate-ggml (flags 0x1) (it "
                                 "applies to the ref engine)");

    /* a second engine from the first one's options */
    o = kvv_engine_opts_default();
    o.name = "cpu";
    o.mode = KVV_MODE_FAST;
    o.n_threads = 4;
    o.isa = "generic";
    o.repack = 1;
    o.device = "cpu";
    o.engine_opts = eo;
    o.n_engine_opts = 1;
    o.cache_type = KVV_CACHE_F16;
    o.n_ctx = 64;
    kvv_engine_opts r = kvv_engine_opts_for(&o, "ref");
    assert_string_equal(r.name, "ref");
    assert_int_equal(r.mode, KVV_MODE_EXACT);
    assert_int_equal(r.n_threads, 1);
    assert_null(r.isa);
    assert_int_equal(r.repack, 0);
    assert_null(r.device);
    assert_int_equal(r.n_engine_opts, 0);
    assert_int_equal(r.cache_type, KVV_CACHE_F16);
    assert_int_equal(r.n_ctx, 64);
    assert_int_equal(kvv_engine_check_opts(&r, &err), KVV_OK);
    kvv_engine_opts c = kvv_engine_opts_for(&o, "cpu");
    assert_int_equal(c.mode, KVV_MODE_INVARIANT);
    assert_int_equal(c.n_threads, 4);
    assert_string_equal(c.isa, "generic");
    assert_int_equal(c.repack, 1);
    assert_int_equal(c.n_engine_opts, 0);
}

/* The cpu engine's own options arrive through --engine-opt. */
static void test_cpu_keys(void **state)
{
    (void)state;
    synth_model s;
    synth_open(&s, "llama-tiny");
    kvv_error err = {0};
    kvv_engine *e = NULL;
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = "cpu";
    o.mode = KVV_MODE_FAST;
    o.n_ctx = 16;
    const char *eo[] = {"dequant_all=1", "f32_act=1"};
    o.engine_opts = eo;
    o.n_engine_opts = 2;
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_OK);
    assert_int_equal(kvv_engine_options(e)->n_engine_opts, 0); /* read at open, not kept */
    kvv_engine_close(e);
    eo[1] = "f32_act=yes";
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_ERR_USAGE);
    assert_null(e);
    assert_non_null(strstr(err.msg, "f32_act=yes is not KEY=0 or KEY=1"));
    synth_close(&s);
}

/* The wrappers give the reference engine's bits. */
static void test_ref_through_vtable(void **state)
{
    (void)state;
    synth_model s;
    synth_open(&s, "qwen2-tiny");
    const kvv_hparams *hp = &s.m->hp;
    kvv_error err = {0};
    kvv_engine_opts o = kvv_engine_opts_default();
    o.cache_type = KVV_CACHE_F16;
    o.control = KVV_CTL_KV_REVERSED_SUM;
    kvv_engine *e;
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_OK);
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    assert_string_equal(d.name, "ref");
    assert_string_equal(d.mode, "exact");
    assert_string_equal(d.cache_type, "f16");
    assert_int_equal(d.n_threads, 1);
    assert_int_equal(d.control, KVV_CTL_KV_REVERSED_SUM);
    assert_true(strlen(d.kernels) > 0);
    assert_string_equal(d.isa, ""); /* no kernel tables */
    kvv_kv_cache *c = kvv_engine_cache(e);
    assert_non_null(c);
    assert_int_equal(c->type, KVV_CACHE_F16);
    assert_int_equal(c->n_ctx, hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    kvv_engine_close(e);

    /* llama.cpp emulation: accepted by ref and recorded; unknown flags refused */
    o = kvv_engine_opts_default();
    o.ggml = KVV_GGML_GELU_FP16 | KVV_GGML_ACT_QUANT;
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_OK);
    kvv_engine_describe(e, &d);
    assert_non_null(strstr(d.kernels, "ggml-gelu-fp16"));
    assert_non_null(strstr(d.kernels, "ggml-act-quant"));
    kvv_engine_close(e);
    o.ggml = 1u << 9;
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_ERR_USAGE);
    assert_null(e);

    /* forward + reset + kv_from_residual against the bare reference */
    o = kvv_engine_opts_default();
    o.n_ctx = 32;
    assert_int_equal(kvv_engine_open(s.m, &o, &e, &err), KVV_OK);
    kvv_ref_opts ro = kvv_ref_opts_default();
    ro.n_ctx = 32;
    kvv_ref *r;
    assert_int_equal(kvv_ref_open(s.m, &ro, &r, &err), KVV_OK);
    int32_t tok[6] = {1, 7, 99, 300, 4, 58}, pos[6] = {0, 1, 2, 3, 4, 5};
    const size_t nv = (size_t)hp->n_vocab;
    float *a = malloc(6 * nv * sizeof(float)), *b = malloc(6 * nv * sizeof(float));
    assert_true(a && b);
    assert_int_equal(kvv_engine_forward(e, 6, tok, pos, NULL, KVV_LOGITS_ALL, a, &err), KVV_OK);
    assert_int_equal(kvv_ref_forward(r, 6, tok, pos, NULL, KVV_LOGITS_ALL, b, &err), KVV_OK);
    assert_memory_equal(a, b, 6 * nv * sizeof(float));
    assert_int_equal(kvv_engine_cache(e)->n_pos, 6);
    kvv_engine_reset(e);
    assert_int_equal(kvv_engine_cache(e)->n_pos, 0);
    assert_int_equal(kvv_kv_cache_live(kvv_engine_cache(e), 0), 0);
    assert_int_equal(kvv_engine_forward(e, 6, tok, pos, NULL, KVV_LOGITS_ALL, a, &err), KVV_OK);
    assert_memory_equal(a, b, 6 * nv * sizeof(float));
    float h[64 * 6];
    assert_true(hp->n_embd <= 64);
    for (int i = 0; i < 6 * hp->n_embd; i++)
        h[i] = (float)((i * 7) % 13) * 0.25f - 1.5f;
    const size_t kw = (size_t)hp->n_head_kv * hp->head_dim;
    float *k1 = malloc(6 * kw * sizeof(float)), *v1 = malloc(6 * kw * sizeof(float));
    float *k2 = malloc(6 * kw * sizeof(float)), *v2 = malloc(6 * kw * sizeof(float));
    assert_true(k1 && v1 && k2 && v2);
    assert_int_equal(kvv_engine_kv_from_residual(e, 1, 6, h, pos, k1, v1, &err), KVV_OK);
    assert_int_equal(kvv_ref_kv_from_residual(r, 1, 6, h, pos, k2, v2, &err), KVV_OK);
    assert_memory_equal(k1, k2, 6 * kw * sizeof(float));
    assert_memory_equal(v1, v2, 6 * kw * sizeof(float));
    assert_int_equal(kvv_engine_kv_from_residual(e, hp->n_layer, 1, h, pos, k1, v1, &err),
                     KVV_ERR_USAGE);
    free(k1);
    free(v1);
    free(k2);
    free(v2);
    free(a);
    free(b);
    kvv_ref_close(r);
    kvv_engine_close(e);
    synth_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_facts),
        cmocka_unit_test(test_mode_refused),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_cpu_keys),
        cmocka_unit_test(test_ref_through_vtable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
