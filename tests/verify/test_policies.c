/* test_policies.c — cache policies through a real engine (the reference):
 * budget >= context is bit-identical to the full cache for every policy,
 * KV-Direct is bit-equal to full at every budget on every shared model,
 * byte accounting is exact, and the eviction baselines fall measurably below
 * 100% token match at small budgets on stories260K. */
#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/policy/policy.h"
#include "model/arch.h"
#include "verify/check.h"
#include "verify/evict.h"
#include "verify/policy_run.h"

static kvv_model *open_model(const char *path)
{
    kvv_model *m = NULL;
    kvv_error err = {0};
    if (kvv_model_open(path, &m, &err) != KVV_OK)
        fail_msg("%s", err.msg);
    return m;
}

/* Greedy + teacher-forced run of one policy scored against full. */
/* The engines every policy must work with: the reference, and the cpu
 * engine in its batch-invariant mode with two threads. */
static kvv_engine_opts engine_opts(int which)
{
    kvv_engine_opts eo = kvv_engine_opts_default();
    if (which == 1) {
        eo.name = "cpu";
        eo.mode = KVV_MODE_INVARIANT;
        eo.n_threads = 2;
    }
    return eo;
}

static kvv_evict_row run_policy_on(int which, const kvv_model *m, kvv_policy_kind kind,
                                   int budget, const int32_t *prompt, int n_prompt, int n_gen,
                                   const kvv_policy_run_out *full)
{
    kvv_engine_opts eo = engine_opts(which);
    kvv_policy_cfg cfg = kvv_policy_cfg_default(kind, budget);
    kvv_policy_run_out g, t;
    kvv_error err = {0};
    if (kvv_policy_run(m, &eo, &cfg, prompt, n_prompt, n_gen, NULL, &g, &err) != KVV_OK)
        fail_msg("%s: %s", kvv_policy_name(kind), err.msg);
    if (kvv_policy_run(m, &eo, &cfg, prompt, n_prompt, n_gen, full->tokens, &t, &err) != KVV_OK)
        fail_msg("%s: %s", kvv_policy_name(kind), err.msg);
    kvv_evict_row row;
    memset(&row, 0, sizeof row);
    kvv_evict_score_row(&row, full, &g, &t);
    kvv_policy_run_out_free(&g);
    kvv_policy_run_out_free(&t);
    return row;
}

static kvv_evict_row run_policy(const kvv_model *m, kvv_policy_kind kind, int budget,
                                const int32_t *prompt, int n_prompt, int n_gen,
                                const kvv_policy_run_out *full)
{
    return run_policy_on(0, m, kind, budget, prompt, n_prompt, n_gen, full);
}

static void full_run_on(int which, const kvv_model *m, const int32_t *prompt, int n_prompt,
                        int n_gen, kvv_policy_run_out *full)
{
    kvv_engine_opts eo = engine_opts(which);
    kvv_policy_cfg cfg = kvv_policy_cfg_default(KVV_POLICY_FULL, n_prompt + n_gen);
    kvv_error err = {0};
    if (kvv_policy_run(m, &eo, &cfg, prompt, n_prompt, n_gen, NULL, full, &err) != KVV_OK)
        fail_msg("full: %s", err.msg);
}

static void full_run(const kvv_model *m, const int32_t *prompt, int n_prompt, int n_gen,
                     kvv_policy_run_out *full)
{
    full_run_on(0, m, prompt, n_prompt, n_gen, full);
}

static void test_budget_covers_context(void **state)
{
    (void)state;
    KVV_NEED_SHARED(path, "models/stories260K-f32.gguf");
    kvv_model *m = open_model(path);
    int32_t prompt[24];
    kvv_prompt_random(7, m->hp.n_vocab, 1, prompt, 24);
    for (int which = 0; which < 2; which++) {
        kvv_policy_run_out full;
        full_run_on(which, m, prompt, 24, 12, &full);
        for (int k = 0; k < KVV_POLICY_COUNT; k++) {
            kvv_evict_row row =
                run_policy_on(which, m, (kvv_policy_kind)k, 36, prompt, 24, 12, &full);
            if (!row.bit_equal)
                fail_msg("%s engine: %s with budget = context is not bit-identical to full",
                         which ? "cpu" : "ref", kvv_policy_name((kvv_policy_kind)k));
        }
        /* Quest at a small budget must really select (differ from full). */
        kvv_evict_row q = run_policy_on(which, m, KVV_POLICY_QUEST, 8, prompt, 24, 12, &full);
        if (q.bit_equal)
            fail_msg("%s engine: quest with budget 8 is bit-identical to full: the select hook "
                     "had no effect", which ? "cpu" : "ref");
        kvv_policy_run_out_free(&full);
    }
    kvv_model_close(m);
}

static void check_kvdirect_model(const char *rel)
{
    const char *path = kvv_test_shared(rel);
    if (!path)
        return;
    kvv_model *m = open_model(path);
    int32_t prompt[20];
    kvv_prompt_random(11, m->hp.n_vocab, 1, prompt, 20);
    for (int which = 0; which < 2; which++) {
        kvv_policy_run_out full;
        full_run_on(which, m, prompt, 20, 10, &full);
        const int budgets[3] = {1, 7, 15};
        for (int b = 0; b < 3; b++)
            for (int k = KVV_POLICY_KVDIRECT_LAYER; k <= KVV_POLICY_KVDIRECT_TOKEN; k++) {
                kvv_evict_row row = run_policy_on(which, m, (kvv_policy_kind)k, budgets[b],
                                                  prompt, 20, 10, &full);
                if (!row.bit_equal)
                    fail_msg("%s on %s: %s budget %d differs from full (match %.2f)", rel,
                             which ? "cpu invariant" : "ref", kvv_policy_name((kvv_policy_kind)k),
                             budgets[b], row.greedy_match);
            }
        kvv_policy_run_out_free(&full);
    }
    kvv_model_close(m);
}

static void test_kvdirect_every_model(void **state)
{
    (void)state;
    if (!kvv_test_shared("models/stories260K-f32.gguf")) {
        skip();
        return;
    }
    static const char *const models[] = {
        "models/stories260K-f32.gguf", "models/stories260K-q8_0.gguf",
        "models/llama-2-tiny-random.gguf",
        "peer/models/synth-gemma2-f32.gguf", "peer/models/synth-gemma3-f32.gguf",
        "peer/models/synth-llama-gqa-f16.gguf", "peer/models/synth-llama-gqa-f32.gguf",
        "peer/models/synth-llama-gqa-q8_0.gguf", "peer/models/synth-llama3-rope-f32.gguf",
        "peer/models/synth-phi3-f32.gguf", "peer/models/synth-qwen2-f32.gguf",
        "peer/models/synth-qwen3-f16.gguf", "peer/models/synth-qwen3-f32.gguf",
        "peer/models/synth-qwen3-q8_0.gguf",
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        check_kvdirect_model(models[i]);
}

static void test_byte_accounting(void **state)
{
    (void)state;
    KVV_NEED_SHARED(path, "models/stories260K-f32.gguf");
    kvv_model *m = open_model(path);
    const kvv_hparams *hp = &m->hp;
    int32_t prompt[30];
    kvv_prompt_random(3, hp->n_vocab, 1, prompt, 30);
    uint64_t kv_tok = (uint64_t)hp->n_layer * hp->n_head_kv * (hp->head_dim + hp->head_dim_v) * 4;
    uint64_t ck_layer = (uint64_t)hp->n_layer * hp->n_embd * 4, ck_tok = (uint64_t)hp->n_embd * 4;
    const kvv_policy_kind kinds[3] = {KVV_POLICY_WINDOW, KVV_POLICY_KVDIRECT_LAYER,
                                      KVV_POLICY_KVDIRECT_TOKEN};
    for (int k = 0; k < 3; k++) {
        kvv_engine_opts eo = kvv_engine_opts_default();
        kvv_policy_cfg cfg = kvv_policy_cfg_default(kinds[k], 8);
        kvv_policy_run_out out;
        kvv_error err = {0};
        assert_int_equal(kvv_policy_run(m, &eo, &cfg, prompt, 30, 6, NULL, &out, &err), KVV_OK);
        /* 35 positions processed (30 + 5 decode inputs), 8 live, 27 evicted. */
        assert_int_equal(out.stats.bytes_kv, 8 * kv_tok);
        uint64_t want_ck = k == 0 ? 0 : (k == 1 ? 27 * ck_layer : 27 * ck_tok);
        assert_int_equal(out.stats.bytes_ckpt, want_ck);
        /* After the prefill step: 8 live, 22 evicted. */
        assert_int_equal(out.bytes_per_step[0],
                         8 * kv_tok + (k == 0 ? 0 : (k == 1 ? 22 * ck_layer : 22 * ck_tok)));
        if (k > 0)
            assert_true(out.stats.recomputed_total > 0 && out.stats.flops_total > 0);
        kvv_policy_run_out_free(&out);
    }
    kvv_model_close(m);
}

static void test_baselines_fall_short(void **state)
{
    (void)state;
    KVV_NEED_SHARED(path, "models/stories260K-f32.gguf");
    kvv_model *m = open_model(path);
    int n_prompt = 200, n_gen = 40;
    int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt);
    kvv_prompt_random(5, m->hp.n_vocab, 1, prompt, n_prompt);
    kvv_policy_run_out full;
    full_run(m, prompt, n_prompt, n_gen, &full);
    const kvv_policy_kind base[] = {KVV_POLICY_WINDOW, KVV_POLICY_STREAMING, KVV_POLICY_H2O,
                                    KVV_POLICY_TOVA, KVV_POLICY_KNORM};
    int below = 0;
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) {
        kvv_evict_row row = run_policy(m, base[i], 16, prompt, n_prompt, n_gen, &full);
        printf("  %-10s budget 16: token match %.1f%%, teacher top-1 %.1f%%, KL max %.3g\n",
               kvv_policy_name(base[i]), 100 * row.greedy_match, 100 * row.tf_top1, row.kl_max);
        below += row.tf_top1 < 1.0 || row.greedy_match < 1.0;
        assert_false(row.bit_equal);
    }
    assert_int_equal(below, (int)(sizeof base / sizeof base[0]));
    free(prompt);
    kvv_policy_run_out_free(&full);
    kvv_model_close(m);
}

/* RoPE at p, shifted by delta, equals RoPE at p + delta (to fp32 rounding):
 * NORM (stories260K), NEOX (qwen3) and rope_freqs factors (llama3-rope). */
static void check_rope_shift(const char *rel)
{
    const char *path = kvv_test_shared(rel);
    if (!path)
        return;
    kvv_model *m = open_model(path);
    const kvv_hparams *hp = &m->hp;
    kvv_engine_opts eo = kvv_engine_opts_default();
    kvv_engine *e = NULL;
    kvv_error err = {0};
    assert_int_equal(kvv_engine_open(m, &eo, &e, &err), KVV_OK);
    int dk = hp->n_head_kv * hp->head_dim, dv = hp->n_head_kv * hp->head_dim_v;
    float *h = calloc((size_t)hp->n_embd, sizeof *h);
    float *k1 = calloc((size_t)dk, sizeof *k1), *k2 = calloc((size_t)dk, sizeof *k2);
    float *v = calloc((size_t)dv, sizeof *v);
    for (int i = 0; i < hp->n_embd; i++)
        h[i] = (float)((i * 37) % 11 - 5) * 0.25f;
    const int32_t from[3] = {300, 17, 120}, to[3] = {4, 9, 119};
    for (int c = 0; c < 3; c++)
        for (int l = 0; l < hp->n_layer; l++) {
            assert_int_equal(kvv_engine_kv_from_residual(e, l, 1, h, &from[c], k1, v, &err), KVV_OK);
            assert_int_equal(kvv_engine_kv_from_residual(e, l, 1, h, &to[c], k2, v, &err), KVV_OK);
            kvv_rope_shift(hp, l, hp->n_head_kv, hp->head_dim, k1, to[c] - from[c]);
            double num = 0, den = 0;
            for (int i = 0; i < dk; i++) {
                num += ((double)k1[i] - k2[i]) * ((double)k1[i] - k2[i]);
                den += (double)k2[i] * k2[i];
            }
            if (!(num <= 1e-10 * den))
                fail_msg("%s layer %d: shifted %d->%d differs from RoPE at %d (nmse %g)", rel, l,
                         from[c], to[c], to[c], den > 0 ? num / den : num);
        }
    free(h);
    free(k1);
    free(k2);
    free(v);
    kvv_engine_close(e);
    kvv_model_close(m);
}

static void test_rope_shift(void **state)
{
    (void)state;
    if (!kvv_test_shared("models/stories260K-f32.gguf")) {
        skip();
        return;
    }
    check_rope_shift("models/stories260K-f32.gguf");
    check_rope_shift("peer/models/synth-qwen3-f32.gguf");
    check_rope_shift("peer/models/synth-llama3-rope-f32.gguf");
    check_rope_shift("peer/models/synth-gemma3-f32.gguf");
}

/* streaming-reindex keeps the cache compact (slots 0..budget-1) and, at a
 * small budget, computes something different from original-position
 * streaming (the query sees re-indexed distances). */
static void test_streaming_reindex(void **state)
{
    (void)state;
    KVV_NEED_SHARED(path, "models/stories260K-f32.gguf");
    kvv_model *m = open_model(path);
    int32_t prompt[40];
    kvv_prompt_random(9, m->hp.n_vocab, 1, prompt, 40);
    kvv_policy_run_out full;
    full_run(m, prompt, 40, 16, &full);
    kvv_evict_row a = run_policy(m, KVV_POLICY_STREAMING, 12, prompt, 40, 16, &full);
    kvv_evict_row b = run_policy(m, KVV_POLICY_STREAMING_REINDEX, 12, prompt, 40, 16, &full);
    assert_false(b.bit_equal);
    assert_int_equal(a.bytes_final, b.bytes_final);
    assert_true(a.kl_mean != b.kl_mean || a.tf_top1 != b.tf_top1);
    printf("  streaming budget 12: KL mean %.4g; re-indexed: KL mean %.4g\n", a.kl_mean, b.kl_mean);
    kvv_policy_run_out_free(&full);
    kvv_model_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_covers_context),
        cmocka_unit_test(test_kvdirect_every_model),
        cmocka_unit_test(test_byte_accounting),
        cmocka_unit_test(test_baselines_fall_short),
        cmocka_unit_test(test_rope_shift),
        cmocka_unit_test(test_streaming_reindex),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
