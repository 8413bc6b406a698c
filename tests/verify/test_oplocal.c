/*
 * test_oplocal.c — op taps of the built-in engines and the local error
 * per op (verify/oplocal.h): observing changes no bit; ref and cpu are
 * within every op's budget on every architecture; a planted fault in one
 * op is named exactly, in its layer, with nothing before it.
 * Models are synthetic (written here): no ../shared needed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/shapes.h"
#include "model/synth.h"
#include "tests/test_util.h"
#include "verify/op_explain.h"
#include "verify/oplocal.h"

#define N_TOK 9

static const char *const shapes[] = {"llama-tiny", "llama3-tiny", "qwen2-tiny", "qwen3-tiny",
                                     "gemma2-tiny", "gemma3-tiny", "phi3-tiny"};

static kvv_model *synth_model(const char *shape, kvv_type type)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/opl-%s-%d.gguf", kvv_test_tmpdir(), shape, (int)type);
    kvv_synth_opts so = {.shape = kvv_shape_find(shape), .type = type, .seed = 7};
    kvv_error err = {0};
    if (kvv_synth_write(&so, path, &err))
        fail_msg("synth %s: %s", shape, err.msg);
    kvv_model *m;
    if (kvv_model_open(path, &m, &err))
        fail_msg("%s: %s", path, err.msg);
    return m;
}

static void tokens(const kvv_model *m, int32_t *tok)
{
    for (int t = 0; t < N_TOK; t++)
        tok[t] = (int32_t)((t * 37 + 11) % m->hp.n_vocab);
}

static kvv_engine_opts engine(const char *name, kvv_mode mode)
{
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = name;
    o.mode = mode;
    o.n_ctx = 32;
    return o;
}

/* ------------------------------------------------------------ taps observe only */

typedef struct {
    int count[KVV_TAP_COUNT];
} tally;

static void count_op(void *user, int layer, int op, int n, const int32_t *pos, int width,
                     const float *x)
{
    (void)layer, (void)n, (void)pos, (void)width, (void)x;
    if (op >= 0 && op < KVV_TAP_COUNT)
        ((tally *)user)->count[op]++;
}

static void logits_of(const kvv_model *m, const char *name, kvv_mode mode, bool hook, float *lg,
                      tally *tl)
{
    kvv_engine_opts o = engine(name, mode);
    kvv_engine *e;
    kvv_error err = {0};
    if (kvv_engine_open(m, &o, &e, &err))
        fail_msg("open %s: %s", name, err.msg);
    assert_true(kvv_engine_caps(e) & KVV_ENGINE_CAP_OP_TAPS);
    int32_t tok[N_TOK], pos[N_TOK];
    tokens(m, tok);
    for (int t = 0; t < N_TOK; t++)
        pos[t] = t;
    kvv_hooks hk = {.user = tl, .op = count_op};
    if (kvv_engine_forward(e, N_TOK, tok, pos, hook ? &hk : NULL, KVV_LOGITS_ALL, lg, &err))
        fail_msg("forward %s: %s", name, err.msg);
    kvv_engine_close(e);
}

static void test_taps_change_no_bit(void **state)
{
    (void)state;
    const char *names[] = {"ref", "cpu", "cpu"};
    const kvv_mode modes[] = {KVV_MODE_EXACT, KVV_MODE_FAST, KVV_MODE_INVARIANT};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        kvv_model *m = synth_model(shapes[s], KVV_TYPE_F32);
        const size_t nl = (size_t)N_TOK * m->hp.n_vocab;
        float *a = malloc(nl * sizeof(float)), *b = malloc(nl * sizeof(float));
        for (int k = 0; k < 3; k++) {
            tally tl = {{0}}, none = {{0}};
            logits_of(m, names[k], modes[k], false, a, &none);
            logits_of(m, names[k], modes[k], true, b, &tl);
            if (memcmp(a, b, nl * sizeof(float)))
                fail_msg("%s %s: logits differ with the op hook", shapes[s], names[k]);
            /* every op the model has, once per layer (out_norm/head once) */
            for (int op = 0; op < KVV_TAP_COUNT; op++) {
                const int want = op == KVV_TAP_KQ || op == KVV_TAP_SOFTMAX ? 0
                                 : kvv_tap_width(&m->hp, op, 0) == 0 ? 0
                                 : kvv_tap_is_final(op) ? 1 : m->hp.n_layer;
                if (tl.count[op] != want)
                    fail_msg("%s %s: op %s tapped %d times, want %d", shapes[s], names[k],
                             kvv_tap_name(op), tl.count[op], want);
            }
        }
        free(a);
        free(b);
        kvv_model_close(m);
    }
}

static void test_names_round_trip(void **state)
{
    (void)state;
    for (int op = 0; op < KVV_TAP_COUNT; op++) {
        kvv_tap t;
        assert_true(kvv_tap_from_name(kvv_tap_name(op), &t));
        assert_int_equal((int)t, op);
    }
    kvv_tap t;
    assert_false(kvv_tap_from_name("ffn_upp", &t));
    assert_string_equal(kvv_tap_name(KVV_TAP_UP), "ffn_up");
    assert_string_equal(kvv_tap_name(99), "?");
}

/* ------------------------------------------------------------ local error */

static void run_opl(const kvv_model *m, const char *name, kvv_mode mode, kvv_opl_report *rep)
{
    kvv_engine_opts o = engine(name, mode);
    int32_t tok[N_TOK];
    tokens(m, tok);
    kvv_error err = {0};
    if (kvv_opl_run(m, &o, tok, N_TOK, rep, &err))
        fail_msg("ops %s: %s", name, err.msg);
}

static void test_builtin_within_budget(void **state)
{
    (void)state;
    const char *names[] = {"ref", "cpu", "cpu"};
    const kvv_mode modes[] = {KVV_MODE_EXACT, KVV_MODE_FAST, KVV_MODE_INVARIANT};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        kvv_model *m = synth_model(shapes[s], KVV_TYPE_F32);
        for (int k = 0; k < 3; k++) {
            kvv_opl_report rep;
            run_opl(m, names[k], modes[k], &rep);
            if (rep.first >= 0) {
                const kvv_opl_row *r = &rep.rows[rep.first];
                fail_msg("%s %s: %s L%d beyond budget: %.3g of %.3g", shapes[s], names[k],
                         kvv_tap_name(r->op), r->layer, r->max_err, r->budget);
            }
            /* every op checked: none without its input */
            for (int i = 0; i < (rep.n_layer + 1) * KVV_TAP_COUNT; i++)
                if ((rep.rows[i].state == KVV_OPL_NO_INPUT ||
                     rep.rows[i].state == KVV_OPL_NOT_TAPPED) &&
                    rep.rows[i].op != KVV_TAP_KQ && rep.rows[i].op != KVV_TAP_SOFTMAX)
                    fail_msg("%s %s: %s L%d %s", shapes[s], names[k],
                             kvv_tap_name(rep.rows[i].op), rep.rows[i].layer,
                             kvv_opl_state_name(rep.rows[i].state));
            assert_true(rep.n_checked > 10 * m->hp.n_layer);
            kvv_opl_free(&rep);
        }
        kvv_model_close(m);
    }
}

/* A plant of 1e-2 relative in one element of one op: named
 * exactly, nothing before it beyond budget; undone, none is. */
static void test_plant_named_exactly(void **state)
{
    (void)state;
    const int ops[] = {KVV_TAP_UP, KVV_TAP_ATTN_NORM, KVV_TAP_ATTN_OUT, KVV_TAP_Q_ROPE,
                       KVV_TAP_FFN_RESID, KVV_TAP_ACT};
    kvv_model *m = synth_model("gemma2-tiny", KVV_TYPE_F32);
    kvv_opl_report rep;
    run_opl(m, "cpu", KVV_MODE_FAST, &rep);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        const int layer = 1;
        kvv_opl_plant(&rep, layer, ops[k], 4, 3, 1e-2);
        kvv_opl_check_all(&rep);
        if (rep.first < 0)
            fail_msg("plant in %s not found", kvv_tap_name(ops[k]));
        assert_int_equal(rep.rows[rep.first].op, ops[k]);
        assert_int_equal(rep.rows[rep.first].layer, layer);
        assert_int_equal(rep.rows[rep.first].where_pos, 4);
        assert_int_equal(rep.rows[rep.first].where_i, 3);
        kvv_opl_plant(&rep, layer, ops[k], 4, 3, 1.0 / (1.0 + 1e-2) - 1.0); /* undo */
        kvv_opl_check_all(&rep);
        if (rep.first >= 0)
            fail_msg("after undoing %s: %s L%d beyond", kvv_tap_name(ops[k]),
                     kvv_tap_name(rep.rows[rep.first].op), rep.rows[rep.first].layer);
    }
    kvv_opl_free(&rep);
    kvv_model_close(m);
}

/* The example plugin's planted op fault (fault=op:NAME:LN, inside the pass):
 * named exactly, the only op beyond budget; without it, none. */
static void test_plugin_fault_named(void **state)
{
    (void)state;
    static const struct { const char *shape, *opt; int op, layer; } cases[] = {
        {"gemma2-tiny", "fault=op:ffn_up:L1", KVV_TAP_UP, 1},
        {"gemma2-tiny", "fault=op:attn_norm:L0", KVV_TAP_ATTN_NORM, 0},
        {"gemma2-tiny", "fault=op:post_ffw_norm:L0", KVV_TAP_POST_FFW_NORM, 0},
        {"qwen3-tiny", "fault=op:k_norm:L1", KVV_TAP_K_NORM, 1},
        {"qwen3-tiny", "fault=op:attn_out:L0", KVV_TAP_ATTN_OUT, 0},
        {"llama-tiny", "fault=op:head:L3", KVV_TAP_HEAD, 3},
        {"llama-tiny", "fault=op:ffn_act:L2", KVV_TAP_ACT, 2},
        {"llama-tiny", NULL, -1, -1},
    };
    char path[1200];
    const char *o = getenv("O");
    snprintf(path, sizeof path, "plugin:%s/plugins/example.so", o && *o ? o : "build");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        kvv_model *m = synth_model(cases[k].shape, KVV_TYPE_F32);
        kvv_engine_opts eo = engine(path, KVV_MODE_EXACT);
        const char *opts[1] = {cases[k].opt};
        eo.engine_opts = cases[k].opt ? opts : NULL;
        eo.n_engine_opts = cases[k].opt ? 1 : 0;
        int32_t tok[N_TOK];
        tokens(m, tok);
        kvv_opl_report rep;
        kvv_error err = {0};
        if (kvv_opl_run(m, &eo, tok, N_TOK, &rep, &err))
            fail_msg("%s: %s", cases[k].opt ? cases[k].opt : "example", err.msg);
        if (cases[k].op < 0) {
            assert_int_equal(rep.first, -1);
        } else {
            if (rep.first < 0)
                fail_msg("%s: not found", cases[k].opt);
            const kvv_opl_row *r = &rep.rows[rep.first];
            if (r->op != cases[k].op || r->layer != cases[k].layer || rep.n_beyond != 1)
                fail_msg("%s: first beyond %s L%d, %d beyond", cases[k].opt, kvv_tap_name(r->op),
                         r->layer, rep.n_beyond);
            kvv_opl_explanation x;
            assert_true(kvv_opl_explain(&rep, r->layer, r->op, &x));
            assert_int_equal(x.n_explained, 0); /* none of the known */
        }
        kvv_opl_free(&rep);
        kvv_model_close(m);
    }
}

/* ------------------------------------------------------------ explanations */

static const kvv_opl_hyp_result *find_hyp(const kvv_opl_explanation *x, const char *prefix)
{
    for (int k = 0; k < KVV_OPL_N_HYP; k++)
        if (strncmp(x->h[k].name, prefix, strlen(prefix)) == 0)
            return &x->h[k];
    fail_msg("no hypothesis %s", prefix);
    return NULL;
}

/* The reference emulating llama.cpp's rounding is a known engine: its
 * first op beyond budget and the hypothesis that reproduces it. */
static void expect_explained(const char *shape, kvv_type type, unsigned ggml, int op,
                             const char *hyp)
{
    kvv_model *m = synth_model(shape, type);
    kvv_engine_opts o = engine("ref", KVV_MODE_EXACT);
    o.ggml = ggml;
    int32_t tok[N_TOK];
    tokens(m, tok);
    kvv_opl_report rep;
    kvv_error err = {0};
    if (kvv_opl_run(m, &o, tok, N_TOK, &rep, &err))
        fail_msg("ops: %s", err.msg);
    if (rep.first < 0)
        fail_msg("%s ggml %#x: no op beyond budget", shape, ggml);
    const kvv_opl_row *r = &rep.rows[rep.first];
    if (r->op != op || r->layer != 0)
        fail_msg("%s ggml %#x: first beyond is %s L%d", shape, ggml, kvv_tap_name(r->op), r->layer);
    kvv_opl_explanation x;
    assert_true(kvv_opl_explain(&rep, r->layer, r->op, &x));
    const kvv_opl_hyp_result *h = find_hyp(&x, hyp);
    if (!h->explains)
        fail_msg("%s: '%s' does not explain it (bits %.3f, resid %.3g)", shape, hyp,
                 h->bits_equal, h->resid);
    /* negative: output rounded to bf16 explains neither */
    const kvv_opl_hyp_result *no = find_hyp(&x, "output rounded to bf16");
    assert_false(no->explains);
    kvv_opl_free(&rep);
    kvv_model_close(m);
}

static void test_explanations(void **state)
{
    (void)state;
    expect_explained("gemma2-tiny", KVV_TYPE_F32, KVV_GGML_GELU_FP16, KVV_TAP_ACT,
                     "function from a 16-bit lookup table");
    expect_explained("llama-tiny", KVV_TYPE_F16, KVV_GGML_ACT_QUANT, KVV_TAP_Q,
                     "inputs rounded to f16");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_round_trip),
        cmocka_unit_test(test_taps_change_no_bit),
        cmocka_unit_test(test_builtin_within_budget),
        cmocka_unit_test(test_plant_named_exactly),
        cmocka_unit_test(test_explanations),
        cmocka_unit_test(test_plugin_fault_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
