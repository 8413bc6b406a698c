/*
 * test_batch.c — the batch check (verify/batch.h) on synthetic tiny models
 * (written here: no ../shared needed): the reference and the cpu engine in
 * invariant mode pass every mode with the control detected; the cpu engine
 * in fast mode passes isolation (same shapes, same kernels); --force-fail
 * makes it FAIL at A's planted token; --modes and --requests select; bad
 * options are usage errors; an engine without sequences is SKIPPED
 * (unsupported), never passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/synth.h"
#include "tests/test_util.h"
#include "verify/batch.h"
#include "verify/check.h"
#include "verify/report/report.h"

#define N_PROMPT 9
#define N_GEN 8

static kvv_model *synth(const char *shape)
{
    char path[512];
    snprintf(path, sizeof path, "%s/batch-%s.gguf", kvv_test_tmpdir(), shape);
    kvv_synth_opts so = {.shape = kvv_shape_find(shape), .type = KVV_TYPE_F32, .seed = 5};
    assert_non_null(so.shape);
    kvv_error err = {0};
    if (kvv_synth_write(&so, path, &err) != KVV_OK)
        fail_msg("synth %s: %s", shape, err.msg);
    kvv_model *m;
    if (kvv_model_open(path, &m, &err) != KVV_OK)
        fail_msg("%s: %s", path, err.msg);
    return m;
}

/* Does engine `name` (mode) serve several sequences? */
static bool has_seqs(const kvv_model *m, const char *name, kvv_mode mode)
{
    kvv_engine_opts eo = kvv_engine_opts_default();
    eo.name = name;
    eo.mode = mode;
    eo.n_ctx = 64;
    kvv_engine *e;
    kvv_error err = {0};
    if (kvv_engine_open(m, &eo, &e, &err))
        fail_msg("open %s: %s", name, err.msg);
    bool seqs = (kvv_engine_caps(e) & KVV_ENGINE_CAP_SEQS) != 0;
    kvv_engine_close(e);
    return seqs;
}

typedef struct {
    const char *engine;
    kvv_mode mode;
    unsigned modes;
    int requests;
    bool controls, force_fail;
} run_spec;

static kvv_status run(const kvv_model *m, const run_spec *sp, kvv_check_result *r)
{
    int32_t tok[N_PROMPT];
    kvv_prompt_random(11, m->hp.n_vocab, -1, tok, N_PROMPT);
    kvv_check_opts o = kvv_check_opts_default();
    o.model = m;
    o.tokens = tok;
    o.n_tokens = N_PROMPT;
    o.n_gen = N_GEN;
    o.engine.name = sp->engine;
    o.engine.mode = sp->mode;
    o.batch_modes = sp->modes;
    o.n_requests = sp->requests;
    o.controls = sp->controls;
    o.force_fail = sp->force_fail;
    kvv_check_result_init(r, "batch");
    kvv_error err = {0};
    return kvv_check_batch(&o, r, &err);
}

/* The modes r reports, by verdict. */
static int modes_with(const kvv_check_result *r, const char *verdict)
{
    const json_t *modes = json_object_get(r->details, "modes");
    int n = 0;
    for (size_t i = 0; i < json_array_size(modes); i++)
        n += strcmp(json_string_value(json_object_get(json_array_get(modes, i), "verdict")),
                    verdict) == 0;
    return n;
}

/* Every mode passes, the control is detected: or, for an engine without
 * sequences, unsupported (SKIPPED) — never a pass. */
static void expect_pass(const char *shape, const char *engine, kvv_mode mode)
{
    kvv_model *m = synth(shape);
    kvv_check_result r;
    run_spec sp = {.engine = engine, .mode = mode, .controls = true};
    kvv_status s = run(m, &sp, &r);
    assert_true(has_seqs(m, engine, mode)); /* the built-in engines serve sequences */
    {
        assert_int_equal(s, KVV_OK);
        if (r.verdict != KVV_VERDICT_PASS) {
            char mm[256] = "";
            if (r.has_mismatch)
                kvv_mismatch_format(&r.mismatch, mm, sizeof mm);
            fail_msg("%s %s %s: %s — %s %s", shape, engine, kvv_mode_name(mode),
                     kvv_verdict_name(r.verdict), r.key_figure, mm);
        }
        assert_int_equal(r.n_controls, 1);
        assert_true(r.controls[0].detected);
        assert_int_equal(modes_with(&r, "pass"), 6); /* prefix reports copy and split */
        assert_int_equal(r.n_rows, 18);
        for (int k = 0; k < r.n_rows; k++) {
            assert_true(r.rows[k].st.n > 0);
            assert_int_equal(r.rows[k].st.n_diff, 0);
        }
        assert_non_null(json_object_get(json_object_get(r.details, "workload"), "text"));
    }
    kvv_check_result_free(&r);
    kvv_model_close(m);
}

static void test_ref(void **state)
{
    (void)state;
    expect_pass("llama-tiny", "ref", KVV_MODE_EXACT);
    expect_pass("gemma2-tiny", "ref", KVV_MODE_EXACT); /* sliding window, soft caps */
}

static void test_cpu_invariant(void **state)
{
    (void)state;
    expect_pass("qwen3-tiny", "cpu", KVV_MODE_INVARIANT);
}

/* Fast mode may differ in the batch-shape modes, never in isolation nor
 * in the copied prefix (the same split, the same kernels). */
static void test_cpu_fast_isolation(void **state)
{
    (void)state;
    kvv_model *m = synth("llama-tiny");
    kvv_check_result r;
    run_spec all = {.engine = "cpu", .mode = KVV_MODE_FAST, .controls = true};
    assert_int_equal(run(m, &all, &r), KVV_OK);
    assert_true(r.verdict == KVV_VERDICT_PASS || r.verdict == KVV_VERDICT_FAIL);
    const json_t *modes = json_object_get(r.details, "modes");
    for (size_t i = 0; i < json_array_size(modes); i++) {
        const json_t *mo = json_array_get(modes, i);
        const char *name = json_string_value(json_object_get(mo, "mode"));
        if (strcmp(name, "isolation") == 0 || strcmp(name, "prefix copy") == 0)
            assert_string_equal(json_string_value(json_object_get(mo, "verdict")), "pass");
    }
    print_message("# cpu fast, all modes: %s — %s\n", kvv_verdict_name(r.verdict), r.key_figure);
    assert_true(r.controls[0].detected);
    kvv_check_result_free(&r);
    run_spec sp = {.engine = "cpu", .mode = KVV_MODE_FAST, .modes = KVV_BATCH_MODE_ISOLATION,
                   .requests = 3, .controls = true};
    kvv_status s = run(m, &sp, &r);
    if (has_seqs(m, "cpu", KVV_MODE_FAST)) {
        assert_int_equal(s, KVV_OK);
        assert_int_equal(r.verdict, KVV_VERDICT_PASS);
        assert_int_equal(modes_with(&r, "pass"), 1);
        assert_int_equal(json_integer_value(json_object_get(
                             json_object_get(r.details, "workload"), "n_requests")), 3);
    } else {
        assert_int_equal(s, KVV_ERR_UNSUPPORTED);
        assert_int_equal(r.verdict, KVV_VERDICT_SKIPPED);
    }
    kvv_check_result_free(&r);
    kvv_model_close(m);
}

/* --force-fail plants A's changed token into the single mode: FAIL, found
 * at A's last prompt position; the other modes still pass. */
static void test_force_fail(void **state)
{
    (void)state;
    kvv_model *m = synth("llama-tiny");
    if (!has_seqs(m, "ref", KVV_MODE_EXACT)) {
        kvv_model_close(m);
        skip();
    }
    kvv_check_result r;
    run_spec sp = {.engine = "ref", .force_fail = true, .controls = true,
                   .modes = KVV_BATCH_MODE_SINGLE | KVV_BATCH_MODE_DECODE};
    assert_int_equal(run(m, &sp, &r), KVV_OK);
    assert_int_equal(r.verdict, KVV_VERDICT_FAIL);
    assert_true(r.has_mismatch);
    assert_int_equal(r.mismatch.token, N_PROMPT - 1);
    assert_int_equal(modes_with(&r, "fail"), 1);
    assert_int_equal(modes_with(&r, "pass"), 1);
    assert_non_null(strstr(r.key_figure, "single"));
    kvv_check_result_free(&r);
    kvv_model_close(m);
}

/* Without controls: a verdict with no control recorded (the report marks
 * it unproven). */
static void test_no_controls(void **state)
{
    (void)state;
    kvv_model *m = synth("llama-tiny");
    kvv_check_result r;
    run_spec sp = {.engine = "ref", .modes = KVV_BATCH_MODE_MIXED};
    kvv_status s = run(m, &sp, &r);
    assert_int_equal(s, has_seqs(m, "ref", KVV_MODE_EXACT) ? KVV_OK : KVV_ERR_UNSUPPORTED);
    assert_int_equal(r.n_controls, 0);
    assert_true(r.verdict == KVV_VERDICT_PASS || r.verdict == KVV_VERDICT_SKIPPED);
    kvv_check_result_free(&r);
    kvv_model_close(m);
}

static void test_bad_options(void **state)
{
    (void)state;
    kvv_model *m = synth("llama-tiny");
    kvv_check_result r;
    run_spec sp = {.engine = "ref", .requests = 1};
    assert_int_equal(run(m, &sp, &r), KVV_ERR_USAGE);
    assert_int_equal(r.verdict, KVV_VERDICT_ERROR);
    kvv_check_result_free(&r);
    kvv_model_close(m);

    unsigned modes;
    char bad[64];
    assert_true(kvv_batch_modes_parse("single,prefix", &modes, bad, sizeof bad));
    assert_int_equal(modes, KVV_BATCH_MODE_SINGLE | KVV_BATCH_MODE_PREFIX);
    assert_true(kvv_batch_modes_parse("all", &modes, bad, sizeof bad));
    assert_int_equal(modes, KVV_BATCH_MODE_ALL);
    assert_false(kvv_batch_modes_parse("single,bogus", &modes, bad, sizeof bad));
    assert_string_equal(bad, "bogus");
    assert_false(kvv_batch_modes_parse("", &modes, bad, sizeof bad));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref),          cmocka_unit_test(test_cpu_invariant),
        cmocka_unit_test(test_cpu_fast_isolation), cmocka_unit_test(test_force_fail),
        cmocka_unit_test(test_no_controls),  cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
