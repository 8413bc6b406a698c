/*
 * test_plugin_ops.c — op taps through the plugin ABI 1.1
 * (engine/plugin/plugin_ops.c, plugins/example/example_ops.c): the example
 * plugin declares them and its taps are the reference engine's bit for
 * bit; without=op-taps and a 1.0 plugin (whose caps carry bit 16 anyway)
 * list them unsupported and a forward asking for them is refused; the
 * planted op fault's option is checked.
 */
#include "tests/engine/plugin_fixture.h"
#include "runtime/op_taps.h"

#define N_TOK 7

/* Every tap, in call order: (layer, op, n, width, rows). */
static void tape_op(void *u, int layer, int op, int n, const int32_t *pos, int width,
                    const float *x)
{
    fx_tape *t = u;
    fx_head(t, 'o', layer, n, pos);
    fx_put(t, &op, sizeof op);
    fx_put(t, &width, sizeof width);
    fx_put(t, x, (size_t)n * (size_t)width * sizeof(float));
}

static kvv_engine *open_name(const fx_model *f, const char *name, const char *opt)
{
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = name;
    o.n_ctx = 32;
    const char *opts[1] = {opt};
    o.engine_opts = opt ? opts : NULL;
    o.n_engine_opts = opt ? 1 : 0;
    kvv_engine *e = NULL;
    kvv_error err = {0};
    if (kvv_engine_open(f->m, &o, &e, &err))
        fail_msg("open %s %s: %s", name, opt ? opt : "", err.msg);
    return e;
}

static void tape_of(const fx_model *f, const char *name, const char *opt, fx_tape *t,
                    float *logits)
{
    kvv_engine *e = open_name(f, name, opt);
    assert_true(kvv_engine_caps(e) & KVV_ENGINE_CAP_OP_TAPS);
    int32_t tok[N_TOK], pos[N_TOK];
    for (int i = 0; i < N_TOK; i++)
        tok[i] = 3 + 5 * i, pos[i] = i;
    kvv_hooks h = {.user = t, .op = tape_op};
    kvv_error err = {0};
    if (kvv_engine_forward(e, N_TOK, tok, pos, &h, KVV_LOGITS_ALL, logits, &err))
        fail_msg("forward %s: %s", name, err.msg);
    kvv_engine_close(e);
}

static void test_example_taps_are_the_references(void **state)
{
    (void)state;
    const char *shapes[] = {"gemma2-tiny", "qwen3-tiny", "llama-tiny"};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        fx_model f;
        fx_model_open(&f, shapes[s], KVV_TYPE_F32);
        const size_t nl = (size_t)N_TOK * f.m->hp.n_vocab;
        float *la = calloc(nl, sizeof(float)), *lb = calloc(nl, sizeof(float));
        fx_tape a, b;
        fx_tape_init(&a, &f.m->hp);
        fx_tape_init(&b, &f.m->hp);
        tape_of(&f, "ref", NULL, &a, la);
        tape_of(&f, fx_plugin("example"), NULL, &b, lb);
        assert_true(a.n > 0);
        if (a.n != b.n || memcmp(a.b, b.b, a.n))
            fail_msg("%s: example's op taps differ from the reference's (%zu vs %zu bytes)",
                     shapes[s], a.n, b.n);
        assert_memory_equal(la, lb, nl * sizeof(float));
        /* a planted op fault changes the logits (it is inside the pass) */
        fx_tape c;
        fx_tape_init(&c, &f.m->hp);
        tape_of(&f, fx_plugin("example"), "fault=op:ffn_up:L1", &c, lb);
        assert_true(memcmp(la, lb, nl * sizeof(float)) != 0);
        fx_tape_free(&a);
        fx_tape_free(&b);
        fx_tape_free(&c);
        free(la);
        free(lb);
        fx_model_close(&f);
    }
}

static void expect_no_taps(const fx_model *f, const char *name, const char *opt)
{
    kvv_engine *e = open_name(f, name, opt);
    assert_false(kvv_engine_caps(e) & KVV_ENGINE_CAP_OP_TAPS);
    fx_tape t;
    fx_tape_init(&t, &f->m->hp);
    int32_t tok = 1, pos = 0;
    kvv_hooks h = {.user = &t, .op = tape_op};
    kvv_error err = {0};
    assert_int_equal(kvv_engine_forward(e, 1, &tok, &pos, &h, KVV_LOGITS_NONE, NULL, &err),
                     KVV_ERR_UNSUPPORTED);
    if (!strstr(err.msg, "op-taps"))
        fail_msg("%s: %s", name, err.msg);
    assert_int_equal(t.n, 0);
    fx_tape_free(&t);
    kvv_engine_close(e);
}

static void test_unsupported(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "llama-tiny", KVV_TYPE_F32);
    expect_no_taps(&f, fx_plugin("example"), "without=op-taps");
    /* a 1.0 plugin: loads; its stray bit 16 is not op taps */
    const kvv_hparams *hp = &f.m->hp;
    char dims[7][32], path[1200];
    const char *dopts[8] = {0};
    const int v[7] = {hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv,
                      hp->head_dim, hp->head_dim_v, hp->n_vocab};
    for (int i = 0; i < 7; i++) {
        snprintf(dims[i], sizeof dims[i], "d%d=%d", i, v[i]);
        dopts[i] = dims[i];
    }
    const char *o = getenv("O");
    snprintf(path, sizeof path, "plugin:%s/tests/plugins/bad_old.so", o && *o ? o : "build");
    kvv_engine_opts eo = kvv_engine_opts_default();
    eo.name = path;
    eo.n_ctx = 32;
    eo.engine_opts = dopts;
    eo.n_engine_opts = 7;
    kvv_engine *e = NULL;
    kvv_error err = {0};
    if (kvv_engine_open(f.m, &eo, &e, &err))
        fail_msg("1.0 plugin: %s", err.msg);
    assert_false(kvv_engine_caps(e) & KVV_ENGINE_CAP_OP_TAPS);
    int32_t tok = 1, pos = 0;
    kvv_hooks h = {.op = tape_op};
    assert_int_equal(kvv_engine_forward(e, 1, &tok, &pos, &h, KVV_LOGITS_NONE, NULL, &err),
                     KVV_ERR_UNSUPPORTED);
    kvv_engine_close(e);
    fx_model_close(&f);
}

static void expect_bad_option(const fx_model *f, const char *opt, const char *needle)
{
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = fx_plugin("example");
    o.n_ctx = 32;
    const char *opts[1] = {opt};
    o.engine_opts = opts;
    o.n_engine_opts = 1;
    kvv_engine *e = NULL;
    kvv_error err = {0};
    kvv_status s = kvv_engine_open(f->m, &o, &e, &err);
    if (s != KVV_ERR_USAGE || !strstr(err.msg, needle))
        fail_msg("%s: status %d, '%s' (want '%s')", opt, (int)s, err.msg, needle);
}

static void test_fault_option(void **state)
{
    (void)state;
    fx_model f;
    fx_model_open(&f, "llama-tiny", KVV_TYPE_F32);
    expect_bad_option(&f, "fault=op:ffn_upp:L1", "'ffn_upp' is not an op this model has");
    expect_bad_option(&f, "fault=op:q_norm:L0", "'q_norm' is not an op this model has");
    expect_bad_option(&f, "fault=op:ffn_up:L99", "is not L0..L");
    expect_bad_option(&f, "fault=op:ffn_up:1", "not op:NAME:LN");
    expect_bad_option(&f, "fault=op:head:L0", "is not L");
    kvv_engine_close(open_name(&f, fx_plugin("example"), "fault=op:head:L3"));
    fx_model_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_taps_are_the_references),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_fault_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
