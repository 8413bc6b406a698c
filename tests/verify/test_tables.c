/*
 * test_tables.c — the `tables` check holds the kernel tables to the bound
 * their contract allows per tensor type (issue 31 item 4; verify/tables.h,
 * verify/table_bounds.h):
 *   - the bounds: fp32-activation types get 2·n·γ_K (n the chained
 *     reductions, K the longest), 8-bit-activation types the quantum bound,
 *     the head by its own type;
 *   - the check passes on synthetic F32, Q8_0 and Q2_K models with every
 *     pair of tables within the bounds, prints each figure beside its
 *     bound, and its controls — a residual and a logit planted past the
 *     bound — fail the bound.
 * Synthetic models only (no ../shared).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_isa.h"
#include "model/shapes.h"
#include "model/synth.h"
#include "tests/test_util.h"
#include "verify/check.h"
#include "verify/compare.h"
#include "verify/table_bounds.h"
#include "verify/tables.h"

static kvv_model *synth_model(const char *shape, const char *type)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tb-%s-%s.gguf", kvv_test_tmpdir(), shape, type);
    kvv_synth_opts so = {.shape = kvv_shape_find(shape), .seed = 9};
    assert_true(kvv_synth_type_parse(type, &so.type, &so.mix));
    kvv_error err = {0};
    if (kvv_synth_write(&so, path, &err))
        fail_msg("synth %s %s: %s", shape, type, err.msg);
    kvv_model *m;
    if (kvv_model_open(path, &m, &err))
        fail_msg("%s: %s", path, err.msg);
    return m;
}

static double gamma_k(int K)
{
    const double ku = (double)K * 0x1p-24;
    return ku / (1 - ku);
}

static void test_bounds(void **state)
{
    (void)state;
    kvv_table_bound lb, hb;
    kvv_model *m = synth_model("llama-tiny", "f32");
    kvv_table_bounds(m, 16, KVV_CACHE_F32, &lb, &hb);
    const kvv_hparams *hp = &m->hp;
    int K = hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff;
    K = K > hp->n_head * hp->head_dim_v ? K : hp->n_head * hp->head_dim_v;
    assert_int_equal(lb.kind, KVV_BOUND_ORDER);
    assert_int_equal(lb.type, KVV_TYPE_F32);
    assert_int_equal(lb.K, K);
    assert_int_equal(lb.n, 9);
    assert_true(fabs(lb.bound - 2 * 9 * gamma_k(K)) < 1e-18);
    assert_int_equal(hb.kind, KVV_BOUND_ORDER);
    assert_true(fabs(hb.bound - 2 * 2 * gamma_k(hp->n_embd)) < 1e-18);
    kvv_table_bounds(m, 4096, KVV_CACHE_F32, &lb, &hb); /* a long prompt: the softmax sum is the longest */
    assert_int_equal(lb.K, 4096);
    kvv_table_bounds(m, 16, KVV_CACHE_BF16, &lb, &hb); /* a bf16 cache's rounding may flip */
    assert_int_equal(lb.kind, KVV_BOUND_QUANTUM);
    assert_true(lb.cache && lb.type == KVV_TYPE_BF16);
    assert_int_equal(hb.kind, KVV_BOUND_ORDER);
    kvv_model_close(m);

    m = synth_model("llama-tiny", "q8_0"); /* Q8_0 layers round to 8 bits, the head not */
    kvv_table_bounds(m, 16, KVV_CACHE_F32, &lb, &hb);
    assert_int_equal(lb.kind, KVV_BOUND_QUANTUM);
    assert_int_equal(lb.type, KVV_TYPE_Q8_0);
    assert_true(lb.bound == KVV_COMPARE_LAYER_TOL);
    assert_int_equal(hb.kind, KVV_BOUND_ORDER);
    kvv_model_close(m);

    m = synth_model("llama-k256", "q2_k"); /* K-quants everywhere, the head too */
    kvv_table_bounds(m, 16, KVV_CACHE_F32, &lb, &hb);
    assert_int_equal(lb.kind, KVV_BOUND_QUANTUM);
    assert_int_equal(hb.kind, KVV_BOUND_QUANTUM);
    assert_true(hb.bound == KVV_COMPARE_REL_TOL);
    char text[160];
    assert_non_null(strstr(kvv_table_bound_text(&lb, text, sizeof text), "8-bit activations"));
    kvv_model_close(m);

    m = synth_model("gemma3-tiny", "f32"); /* q/k norms and post-norms: 12 reductions */
    kvv_table_bounds(m, 16, KVV_CACHE_F32, &lb, &hb);
    assert_int_equal(lb.n, 12);
    assert_non_null(strstr(kvv_table_bound_text(&lb, text, sizeof text), "summation order only"));
    kvv_model_close(m);
}

/* The whole check on one model: PASS within the bounds, the bound printed,
 * the bound's controls detected (they fail the bound). */
static void check_model(const char *shape, const char *type)
{
    kvv_model *m = synth_model(shape, type);
    int32_t tok[16];
    kvv_prompt_random(2, m->hp.n_vocab, -1, tok, 16);
    kvv_check_opts o = kvv_check_opts_default();
    o.model = m;
    o.tokens = tok;
    o.n_tokens = 16;
    o.engine.name = "cpu";
    o.engine.mode = KVV_MODE_INVARIANT;
    kvv_check_result r;
    kvv_check_result_init(&r, "tables");
    kvv_error err = {0};
    assert_int_equal(kvv_check_tables(&o, &r, &err), KVV_OK);
    if (r.verdict != KVV_VERDICT_PASS)
        fail_msg("tables %s %s: %s — %s", shape, type, kvv_check_key_figure(&r),
                 kvv_check_message(&r));
    assert_non_null(strstr(kvv_check_key_figure(&r), "(bound "));
    json_t *b = json_object_get(r.details, "bounds");
    assert_true(json_is_object(json_object_get(b, "layers")));
    int bound_controls = 0;
    for (int k = 0; k < r.n_controls; k++) {
        if (!r.controls[k].detected)
            fail_msg("%s %s control '%s': %s", shape, type, r.controls[k].name,
                     r.controls[k].detail);
        if (strstr(r.controls[k].name, "bound")) {
            bound_controls++;
            assert_non_null(strstr(r.controls[k].detail, "cross-table verdict FAIL"));
        }
    }
    assert_int_equal(bound_controls, 2);
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(r.details, "cross_table"), i, p)
        assert_true(json_is_true(json_object_get(json_object_get(p, "layer_by_layer"),
                                                 "within_bounds")));
    kvv_check_result_free(&r);
    kvv_model_close(m);
}

static void test_check_within_bounds(void **state)
{
    (void)state;
    kvv_cpu_isa_info ci;
    kvv_error err = {0};
    assert_int_equal(kvv_cpu_isa_probe(&ci, &err), KVV_OK);
    int n = 0;
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++)
        n += ci.can_run[i];
    if (n < 2) {
        printf("SKIP: one kernel table runs here: nothing to compare across tables\n");
        skip();
    }
    check_model("llama-tiny", "f32");
    check_model("llama-tiny", "q8_0");
    check_model("llama-k256", "q2_k");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_check_within_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
