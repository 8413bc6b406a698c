/* test_evict.c — `kvverify evict` over a prompt set, `memory` and `latency`
 * verdicts, on synthetic models (no ../shared needed): the job runner runs
 * every job once, prompt sets (built-in texts, seeded random prompts for a
 * model without a tokenizer, files), the figures over prompts (mean, sample
 * sd, min, max), figures that do not depend on the thread count, and
 * verdicts that can fail: --force-fail, controls, "nothing verified". */
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/synth.h"
#include "verify/evict.h"
#include "verify/latency.h"
#include "verify/memory.h"
#include "verify/parallel.h"
#include "verify/prompt_set.h"
#include "verify/texts.h"

/* ------------------------------------------------------------ helpers */

/* A synthetic llama-tiny; with tokenizer = false, rewritten without
 * tokenizer.ggml.model, so no tokenizer opens. Caller closes. */
static kvv_model *synth_model(bool tokenizer)
{
    char path[4096], tmp[4096];
    snprintf(path, sizeof path, "%s/evict-%s.gguf", kvv_test_tmpdir(), tokenizer ? "tok" : "notok");
    snprintf(tmp, sizeof tmp, "%s/evict-synth.gguf", kvv_test_tmpdir());
    kvv_synth_opts so = {.shape = kvv_shape_find("llama-tiny"), .type = KVV_TYPE_F32, .seed = 5};
    kvv_error err = {0};
    if (kvv_synth_write(&so, tokenizer ? path : tmp, &err) != KVV_OK)
        fail_msg("synth: %s", err.msg);
    if (!tokenizer) {
        kvv_gguf *g = NULL;
        if (kvv_gguf_open(tmp, &g, &err) != KVV_OK)
            fail_msg("%s", err.msg);
        kvv_gguf_writer *w = kvv_gguf_writer_new(g->version, KVV_GGUF_DEFAULT_ALIGNMENT);
        assert_non_null(w);
        for (uint64_t i = 0; i < g->n_kv; i++)
            if (strcmp(g->kv[i].key, "tokenizer.ggml.model") != 0)
                assert_int_equal(kvv_gguf_writer_copy_kv(w, &g->kv[i]), KVV_OK);
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const kvv_gguf_tensor *t = &g->tensors[i];
            assert_int_equal(kvv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne,
                                                        t->data),
                             KVV_OK);
        }
        if (kvv_gguf_writer_write(w, path, &err) != KVV_OK)
            fail_msg("write: %s", err.msg);
        kvv_gguf_writer_free(w);
        kvv_gguf_close(g);
    }
    kvv_model *m = NULL;
    if (kvv_model_open(path, &m, &err) != KVV_OK)
        fail_msg("open: %s", err.msg);
    return m;
}

static const char *write_text(const char *name, const char *text)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", kvv_test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* ------------------------------------------------------------ parallel */

typedef struct {
    int runs[200];
    int worker[200];
    int n_threads;
} par_ctx;

static void par_job(void *user, int i, int worker)
{
    par_ctx *c = user;
    c->runs[i]++;
    c->worker[i] = worker;
}

static void test_parallel_for(void **state)
{
    (void)state;
    for (int t = 1; t <= 4; t++) {
        par_ctx c;
        memset(&c, 0, sizeof c);
        kvv_parallel_for(200, t, par_job, &c);
        for (int i = 0; i < 200; i++) {
            assert_int_equal(c.runs[i], 1);
            assert_true(c.worker[i] >= 0 && c.worker[i] < t);
        }
    }
    par_ctx c;
    memset(&c, 0, sizeof c);
    kvv_parallel_for(0, 2, par_job, &c);
    kvv_parallel_for(3, 0, par_job, &c); /* < 1 thread: the caller runs them */
    assert_int_equal(c.runs[0] + c.runs[1] + c.runs[2], 3);
    assert_true(kvv_parallel_cpus() >= 1);
}

/* ------------------------------------------------------------ prompt sets */

static void test_prompt_set_builtin(void **state)
{
    (void)state;
    kvv_model *m = synth_model(true);
    kvv_prompt_set s;
    kvv_prompt_set_init(&s);
    kvv_error err = {0};
    /* more prompts than texts: refused, never fewer prompts than asked */
    assert_int_equal(kvv_prompt_set_builtin(m, KVV_TEXT_PROMPTS + 1, 40, 1, &s, &err),
                     KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "the built-in texts are"));
    assert_int_equal(s.n, 0);
    assert_int_equal(kvv_prompt_set_builtin(m, KVV_TEXT_PROMPTS, 40, 1, &s, &err), KVV_OK);
    assert_string_equal(s.source, "text");
    assert_int_equal(s.n, KVV_TEXT_PROMPTS);
    for (int i = 0; i < s.n; i++) {
        assert_int_equal(s.items[i].n_tokens, 40); /* one length for all */
        assert_string_equal(s.items[i].name, kvv_text_prompts[i].name);
        for (int j = i + 1; j < s.n; j++)
            assert_memory_not_equal(s.items[i].tokens, s.items[j].tokens, 40 * sizeof(int32_t));
    }
    kvv_prompt_set_free(&s);
    /* Longer than the shortest text: every prompt is cut to that one. */
    kvv_prompt_set_init(&s);
    assert_int_equal(kvv_prompt_set_builtin(m, 3, 1 << 20, 1, &s, &err), KVV_OK);
    assert_int_equal(s.n, 3);
    assert_true(s.items[0].n_tokens > 100);
    assert_int_equal(s.items[0].n_tokens, s.items[1].n_tokens);
    assert_int_equal(s.items[1].n_tokens, s.items[2].n_tokens);
    kvv_prompt_set_free(&s);
    kvv_prompt_set_init(&s);
    assert_int_equal(kvv_prompt_set_builtin(m, 0, 40, 1, &s, &err), KVV_ERR_USAGE);
    kvv_prompt_set_free(&s);
    kvv_model_close(m);
}

static void test_prompt_set_random(void **state)
{
    (void)state;
    kvv_model *m = synth_model(false);
    kvv_prompt_set a, b;
    kvv_prompt_set_init(&a);
    kvv_prompt_set_init(&b);
    kvv_error err = {0};
    assert_int_equal(kvv_prompt_set_builtin(m, 9, 32, 7, &a, &err), KVV_OK);
    assert_int_equal(kvv_prompt_set_builtin(m, 9, 32, 7, &b, &err), KVV_OK);
    assert_string_equal(a.source, "random");
    assert_int_equal(a.n, 9); /* random prompts: as many as asked */
    for (int i = 0; i < a.n; i++) {
        assert_int_equal(a.items[i].n_tokens, 32);
        assert_memory_equal(a.items[i].tokens, b.items[i].tokens, 32 * sizeof(int32_t));
        if (i)
            assert_memory_not_equal(a.items[i].tokens, a.items[0].tokens, 32 * sizeof(int32_t));
    }
    kvv_prompt_set_free(&a);
    kvv_prompt_set_free(&b);
    /* Prompts from a file need a tokenizer. */
    kvv_prompt_set_init(&a);
    assert_int_equal(kvv_prompt_set_from_file(m, write_text("p1.txt", "hello\n"), &a, &err),
                     KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "tokenizer"));
    kvv_prompt_set_free(&a);
    kvv_model_close(m);
}

static void test_prompt_set_file(void **state)
{
    (void)state;
    kvv_model *m = synth_model(true);
    kvv_prompt_set s;
    kvv_prompt_set_init(&s);
    kvv_error err = {0};
    const char *p = write_text("p2.txt", "Once upon a time\n\n \t \r\nthe end\r\n");
    assert_int_equal(kvv_prompt_set_from_file(m, p, &s, &err), KVV_OK);
    assert_string_equal(s.source, "file");
    assert_int_equal(s.n, 2);
    assert_string_equal(s.items[0].name, "line 1");
    assert_string_equal(s.items[1].name, "line 4");
    kvv_prompt_set_free(&s);

    kvv_prompt_set_init(&s);
    err = (kvv_error){0};
    assert_int_equal(kvv_prompt_set_from_file(m, write_text("p3.txt", "\n  \n"), &s, &err),
                     KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "no prompt"));
    kvv_prompt_set_free(&s);

    kvv_prompt_set_init(&s);
    err = (kvv_error){0};
    assert_int_equal(kvv_prompt_set_from_file(m, "/nonexistent/prompts.txt", &s, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/prompts.txt"));
    kvv_prompt_set_free(&s);
    kvv_model_close(m);
}

/* ------------------------------------------------------------ aggregates */

static void test_aggregate(void **state)
{
    (void)state;
    kvv_evict_row rows[6];
    memset(rows, 0, sizeof rows);
    const double match[3] = {0.25, 0.5, 1.0}, kl[3] = {0.3, 0.2, 0.1};
    for (int i = 0; i < 6; i++) {
        rows[i].kind = i < 3 ? KVV_POLICY_WINDOW : KVV_POLICY_KVDIRECT_TOKEN;
        rows[i].prompt = i % 3;
        rows[i].budget = 10 + i % 3;
        rows[i].fits = i != 5; /* the last prompt's KV-Direct row did not fit (not run) */
        rows[i].engine = i == 5 ? -1 : 0;
        rows[i].greedy_match = match[i % 3];
        rows[i].prefix_match = 2 * (i % 3);
        rows[i].kl_mean = kl[i % 3];
        rows[i].bit_equal = i >= 3;
    }
    kvv_evict_result res;
    memset(&res, 0, sizeof res);
    res.n_prompts = 3;
    res.rows = rows;
    res.n_rows = 6;
    kvv_error err = {0};
    assert_int_equal(kvv_evict_aggregate(&res, &err), KVV_OK);
    assert_int_equal(res.n_aggs, 2);
    const kvv_evict_agg *a = &res.aggs[0], *b = &res.aggs[1];
    assert_int_equal(a->n_prompts, 3);
    assert_int_equal(a->n_bit_equal, 0);
    assert_float_equal(a->match.mean, 1.75 / 3, 1e-12);
    assert_float_equal(a->match.min, 0.25, 0);
    assert_float_equal(a->match.max, 1.0, 0);
    /* sample sd of 0.25, 0.5, 1: sqrt(((1/3)^2 ... ) / 2) */
    double mu = 1.75 / 3, ss = (0.25 - mu) * (0.25 - mu) + (0.5 - mu) * (0.5 - mu) +
                               (1 - mu) * (1 - mu);
    assert_float_equal(a->match.sd, sqrt(ss / 2), 1e-12);
    assert_float_equal(a->kl_mean.mean, 0.2, 1e-12);
    assert_float_equal(a->prefix.max, 4, 0);
    assert_int_equal(a->budget_min, 10);
    assert_int_equal(a->budget_max, 12);
    assert_int_equal(b->n_prompts, 2); /* only rows that fitted */
    assert_int_equal(b->n_bit_equal, 2);
    assert_float_equal(b->match.mean, 0.375, 1e-12);
    assert_float_equal(b->match.max, 0.5, 0);
    assert_int_equal(a->n_over + b->n_over, 0);
    free(res.aggs);
    free(res.eq_aggs);

    /* a run that held more than its byte budget (fits false, it ran): the
     * policy is marked over the budget there, with no figures (not ranked) */
    rows[1].fits = false;
    rows[1].bytes_peak = 5000;
    rows[2].bytes_peak = 7000;
    rows[2].fits = false;
    memset(&res, 0, sizeof res);
    res.n_prompts = 3;
    res.eq_rows = rows;
    res.n_eq_rows = 3;
    assert_int_equal(kvv_evict_aggregate(&res, &err), KVV_OK);
    assert_int_equal(res.n_eq_aggs, 1);
    assert_int_equal(res.eq_aggs[0].n_over, 2);
    assert_int_equal(res.eq_aggs[0].over_peak, 7000);
    assert_int_equal(res.eq_aggs[0].n_prompts, 0);
    assert_float_equal(res.eq_aggs[0].match.mean, 0, 0);
    free(res.aggs);
    free(res.eq_aggs);
}

/* ------------------------------------------------------------ evict runs */

typedef struct {
    kvv_model *m;
    kvv_prompt_set ps;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->m = synth_model(false);
    kvv_prompt_set_init(&f->ps);
    kvv_error err = {0};
    if (kvv_prompt_set_builtin(f->m, 3, 24, 11, &f->ps, &err) != KVV_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    kvv_prompt_set_free(&f->ps);
    kvv_model_close(f->m);
    free(f);
    return 0;
}

static const kvv_policy_kind two_pols[2] = {KVV_POLICY_WINDOW, KVV_POLICY_KVDIRECT_LAYER};
static const int two_budgets[2] = {6, 14};

static kvv_evict_opts evict_opts(fixture *f, const kvv_engine_opts *fig, int jobs)
{
    kvv_evict_opts o = {.check = kvv_check_opts_default(), .prompts = &f->ps,
                        .budgets = two_budgets, .n_budgets = 2, .policies = two_pols,
                        .n_policies = 2, .equal_bytes = true, .figures = fig,
                        .verify_prompts = 1, .n_threads = jobs};
    o.check.model = f->m;
    o.check.n_gen = 6;
    return o;
}

static kvv_verdict run_evict(const kvv_evict_opts *o, kvv_evict_result *res,
                             kvv_check_result *r)
{
    kvv_check_result_init(r, "evict");
    kvv_error err = {0};
    if (kvv_check_evict(o, res, r, &err) != KVV_OK)
        fail_msg("evict: %s", err.msg);
    return r->verdict;
}

static void test_evict_figures_and_verdict(void **state)
{
    fixture *f = *state;
    kvv_engine_opts fig = kvv_engine_opts_default();
    fig.name = "cpu";
    fig.mode = KVV_MODE_INVARIANT;
    kvv_evict_opts o = evict_opts(f, &fig, 2);
    kvv_evict_result a, b;
    kvv_check_result ra, rb;
    assert_int_equal(run_evict(&o, &a, &ra), KVV_VERDICT_PASS);
    assert_false(a.figures_is_test);
    assert_string_equal(a.figures_engine.name, "cpu");
    assert_string_equal(a.test_engine.name, "ref");
    assert_int_equal(a.n_rows, 2 * 2 * 3);
    assert_int_equal(a.n_aggs, 4);
    assert_int_equal(a.n_eq_rows, 2 * 2 * 3);
    assert_int_equal(ra.n_controls, 1);
    assert_true(ra.controls[0].detected);
    /* Verified on the first prompt only: kvdirect-layer at 6 and 14, plus
     * the equal-bytes budgets that fit (none: per-layer checkpoints weigh
     * as much as the K/V here). */
    assert_int_equal(a.verify_prompts, 1);
    assert_true(a.n_verify >= 2);
    for (int i = 0; i < a.n_verify; i++) {
        assert_int_equal(a.verify[i].row.prompt, 0);
        assert_false(a.verify[i].differs);
    }
    /* window on the figures engine for every prompt, KV-Direct on the
     * engine under test for the first one. */
    for (int i = 0; i < a.n_rows; i++) {
        const kvv_evict_row *w = &a.rows[i];
        if (w->kind == KVV_POLICY_WINDOW)
            assert_int_equal(w->engine, 0);
        else if (w->prompt == 0)
            assert_true(w->engine == 1 && w->bit_equal);
        else
            assert_int_equal(w->engine, -1);
    }
    assert_int_equal(a.aggs[1].n_prompts, 1); /* kvdirect-layer at budget 6 */
    assert_int_equal(a.aggs[0].n_prompts, 3);
    json_t *by = json_object_get(ra.details, "by_budget");
    assert_int_equal(json_array_size(by), 2 * 3 + 2 * 1); /* the rows that ran */
    assert_int_equal(json_array_size(json_object_get(ra.details, "by_budget_summary")), 4);
    json_t *row0 = json_array_get(by, 0);
    assert_int_equal(json_integer_value(json_object_get(row0, "budget_bytes")),
                     6 * (json_int_t)a.kv_bytes_per_token);
    /* One thread gives the same figures as two. */
    o.n_threads = 1;
    assert_int_equal(run_evict(&o, &b, &rb), KVV_VERDICT_PASS);
    for (int i = 0; i < a.n_rows; i++) {
        assert_int_equal(a.rows[i].prefix_match, b.rows[i].prefix_match);
        assert_memory_equal(&a.rows[i].kl_mean, &b.rows[i].kl_mean, sizeof(double));
        assert_int_equal(a.rows[i].bytes_peak, b.rows[i].bytes_peak);
    }
    kvv_evict_result_free(&a);
    kvv_evict_result_free(&b);
    kvv_check_result_free(&ra);
    kvv_check_result_free(&rb);

    /* One engine for both: KV-Direct verified on every prompt. */
    o = evict_opts(f, NULL, 2);
    assert_int_equal(run_evict(&o, &a, &ra), KVV_VERDICT_PASS);
    assert_true(a.figures_is_test);
    assert_int_equal(a.verify_prompts, 3);
    assert_int_equal(a.n_verify, 2 * 3);
    kvv_evict_result_free(&a);
    kvv_check_result_free(&ra);
}

static void test_evict_force_fail_and_nothing(void **state)
{
    fixture *f = *state;
    kvv_engine_opts fig = kvv_engine_opts_default();
    fig.name = "cpu";
    fig.mode = KVV_MODE_INVARIANT;
    kvv_evict_opts o = evict_opts(f, &fig, 2);
    kvv_evict_result res;
    kvv_check_result r;
    o.check.force_fail = true;
    assert_int_equal(run_evict(&o, &res, &r), KVV_VERDICT_FAIL);
    assert_true(r.has_mismatch);
    /* The first mismatch names an element that really differs. */
    assert_int_not_equal(kvv_f32_bits(r.mismatch.expected), kvv_f32_bits(r.mismatch.actual));
    assert_string_equal(r.mismatch.tensor, "logits");
    kvv_evict_result_free(&res);
    kvv_check_result_free(&r);

    o.check.force_fail = false;
    o.policies = two_pols;
    o.n_policies = 1; /* window only: nothing verified */
    assert_int_equal(run_evict(&o, &res, &r), KVV_VERDICT_SKIPPED);
    assert_non_null(strstr(r.message, "nothing verified"));
    kvv_evict_result_free(&res);
    kvv_check_result_free(&r);

    static const int whole[1] = {1000};
    o.n_policies = 2;
    o.budgets = whole; /* holds every context: KV-Direct evicts nothing */
    o.n_budgets = 1;
    assert_int_equal(run_evict(&o, &res, &r), KVV_VERDICT_SKIPPED);
    kvv_evict_result_free(&res);
    kvv_check_result_free(&r);
}

/* ------------------------------------------------------------ memory, latency */

static kvv_verdict run_memory(fixture *f, bool force_fail, int budget, kvv_check_result *r)
{
    kvv_memory_opts o = {.check = kvv_check_opts_default(), .n_turns = 3, .gen_per_turn = 3,
                         .budget = budget, .random_turn_len = 6};
    o.check.model = f->m;
    o.check.force_fail = force_fail;
    kvv_memory_result res;
    kvv_error err = {0};
    kvv_check_result_init(r, "memory");
    if (kvv_check_memory(&o, &res, r, &err) != KVV_OK)
        fail_msg("memory: %s", err.msg);
    kvv_memory_result_free(&res);
    return r->verdict;
}

static void test_memory_verdicts(void **state)
{
    fixture *f = *state;
    kvv_check_result r;
    assert_int_equal(run_memory(f, false, 0, &r), KVV_VERDICT_PASS);
    assert_int_equal(r.n_controls, 1);
    assert_true(r.controls[0].detected);
    kvv_check_result_free(&r);
    assert_int_equal(run_memory(f, true, 0, &r), KVV_VERDICT_FAIL);
    assert_true(r.has_mismatch);
    assert_int_not_equal(kvv_f32_bits(r.mismatch.expected), kvv_f32_bits(r.mismatch.actual));
    kvv_check_result_free(&r);
    assert_int_equal(run_memory(f, false, 1000, &r), KVV_VERDICT_SKIPPED);
    kvv_check_result_free(&r);
}

static kvv_verdict run_latency(fixture *f, bool force_fail, kvv_check_result *r)
{
    static const int batches[2] = {1, 5};
    kvv_latency_opts o = {.check = kvv_check_opts_default(), .batches = batches, .n_batches = 2,
                          .repeats = 1};
    o.check.model = f->m;
    o.check.force_fail = force_fail;
    kvv_latency_result res;
    kvv_error err = {0};
    kvv_check_result_init(r, "latency");
    if (kvv_latency_run(&o, &res, r, &err) != KVV_OK)
        fail_msg("latency: %s", err.msg);
    assert_true(res.compared > 0);
    kvv_latency_result_free(&res);
    return r->verdict;
}

static void test_latency_verdicts(void **state)
{
    fixture *f = *state;
    kvv_check_result r;
    assert_int_equal(run_latency(f, false, &r), KVV_VERDICT_PASS);
    assert_int_equal(r.n_controls, 1);
    assert_true(r.controls[0].detected);
    kvv_check_result_free(&r);
    assert_int_equal(run_latency(f, true, &r), KVV_VERDICT_FAIL);
    assert_true(r.has_mismatch);
    kvv_check_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parallel_for),
        cmocka_unit_test(test_prompt_set_builtin),
        cmocka_unit_test(test_prompt_set_random),
        cmocka_unit_test(test_prompt_set_file),
        cmocka_unit_test(test_aggregate),
        cmocka_unit_test_setup_teardown(test_evict_figures_and_verdict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evict_force_fail_and_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_verdicts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_latency_verdicts, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
