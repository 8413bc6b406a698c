/*
 * test_checks.c — kv, patch, greedy and invariance on the reference engine:
 * every check passes, with every negative control detected, for every model
 * in ../shared/models and ../shared/peer/models and for synthetic models of
 * every architecture (written here, so this part needs no ../shared), with
 * f32, f16 and bf16 caches; --force-fail makes every check FAIL; and a
 * stop flag raised before the audit starts no check.
 * Prompts are short (6 tokens, 4 greedy steps) to keep the whole run fast.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/shapes.h"
#include "model/synth.h"
#include "tests/test_util.h"
#include "verify/audit.h"
#include "verify/check.h"
#include "verify/isolate.h"
#include "verify/report/report.h"

#define N_PROMPT 6
#define N_GEN 4

/* The checks of this module (the audit table holds others too). */
static const char *const mine[] = {"kv", "patch", "greedy", "invariance"};
#define N_MINE 4

/* Controls each check must plant (and detect). */
static int expected_controls(const char *name)
{
    return strcmp(name, "kv") == 0 ? 2 : 1;
}

/* Run every audit check on one model and cache type; assert pass. */
static void check_model(const char *path, kvv_cache_type ct)
{
    kvv_model *m;
    kvv_error err = {0};
    if (kvv_model_open(path, &m, &err) != KVV_OK)
        fail_msg("%s: %s", path, err.msg);
    int32_t tok[N_PROMPT];
    kvv_prompt_random(7, m->hp.n_vocab, -1, tok, N_PROMPT);
    kvv_check_opts o = kvv_check_opts_default();
    o.model = m;
    o.tokens = tok;
    o.n_tokens = N_PROMPT;
    o.n_gen = N_GEN;
    o.engine.cache_type = ct;
    for (int i = 0; i < N_MINE; i++) {
        const kvv_check_entry *ce = kvv_audit_find(mine[i]);
        assert_non_null(ce);
        kvv_check_result r;
        kvv_check_result_init(&r, ce->name);
        kvv_status s = ce->run(&o, &r, &err);
        if (s != KVV_OK || r.verdict != KVV_VERDICT_PASS) {
            char mm[256] = "";
            if (r.has_mismatch)
                kvv_mismatch_format(&r.mismatch, mm, sizeof mm);
            fail_msg("%s cache %s check %s: %s — %s %s %s", path, kvv_cache_type_name(ct),
                     ce->name, kvv_verdict_name(r.verdict), r.key_figure, r.message, mm);
        }
        assert_int_equal(r.n_controls, expected_controls(ce->name));
        for (int c = 0; c < r.n_controls; c++)
            if (!r.controls[c].detected)
                fail_msg("%s %s control '%s' not detected: %s", path, ce->name,
                         r.controls[c].name, r.controls[c].detail);
        assert_true(r.has_engine);
        assert_string_equal(r.engine.name, "ref");
        assert_string_equal(r.engine.cache_type, kvv_cache_type_name(ct));
        assert_true(r.n_rows > 0);
        for (int k = 0; k < r.n_rows; k++) {
            assert_true(r.rows[k].st.n > 0);
            assert_int_equal(r.rows[k].st.n_diff, 0);
        }
        kvv_check_result_free(&r);
    }
    kvv_model_close(m);
}

static const kvv_cache_type cache_types[] = {KVV_CACHE_F32, KVV_CACHE_F16, KVV_CACHE_BF16};

/* Every *.gguf directly in dir (not in subfolders). @return files checked. */
static int check_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    char names[64][256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64) {
        size_t l = strlen(e->d_name);
        if (l > 5 && l < 250 && strcmp(e->d_name + l - 5, ".gguf") == 0)
            snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%.4000s/%.255s", dir, names[i]);
        for (size_t c = 0; c < 3; c++)
            check_model(path, cache_types[c]);
    }
    return n;
}

static void test_shared_models(void **state)
{
    (void)state;
    KVV_NEED_SHARED(dir, "models");
    char d[4096];
    snprintf(d, sizeof d, "%s", dir);
    assert_true(check_dir(d) >= 3);
}

static void test_peer_models(void **state)
{
    (void)state;
    KVV_NEED_SHARED(dir, "peer/models");
    char d[4096];
    snprintf(d, sizeof d, "%s", dir);
    assert_true(check_dir(d) >= 1);
}

/* Synthetic tiny models of every architecture: no ../shared needed. */
static const char *const tiny_shapes[] = {"llama-tiny", "llama3-tiny", "qwen2-tiny", "qwen3-tiny",
                                          "gemma2-tiny", "gemma3-tiny", "phi3-tiny"};

static const char *synth_path(const char *shape, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s.gguf", kvv_test_tmpdir(), shape);
    kvv_synth_opts so = {.shape = kvv_shape_find(shape), .type = KVV_TYPE_F32, .seed = 3};
    if (!so.shape)
        return NULL;
    kvv_error err = {0};
    if (kvv_synth_write(&so, buf, &err) != KVV_OK)
        fail_msg("synth %s: %s", shape, err.msg);
    return buf;
}

static void test_synth_models(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof tiny_shapes / sizeof tiny_shapes[0]; i++) {
        char path[4096];
        if (!synth_path(tiny_shapes[i], path, sizeof path))
            fail_msg("shape %s unknown", tiny_shapes[i]);
        for (size_t c = 0; c < 3; c++)
            check_model(path, cache_types[c]);
    }
}

/* --force-fail: every check must FAIL (and still return KVV_OK). */
static void test_force_fail(void **state)
{
    (void)state;
    char path[4096];
    synth_path("qwen3-tiny", path, sizeof path);
    kvv_model *m;
    kvv_error err = {0};
    assert_int_equal(kvv_model_open(path, &m, &err), KVV_OK);
    int32_t tok[N_PROMPT];
    kvv_prompt_random(9, m->hp.n_vocab, -1, tok, N_PROMPT);
    kvv_check_opts o = kvv_check_opts_default();
    o.model = m;
    o.tokens = tok;
    o.n_tokens = N_PROMPT;
    o.n_gen = N_GEN;
    o.force_fail = true;
    for (int i = 0; i < N_MINE; i++) {
        const kvv_check_entry *ce = kvv_audit_find(mine[i]);
        kvv_check_result r;
        kvv_check_result_init(&r, ce->name);
        assert_int_equal(ce->run(&o, &r, &err), KVV_OK);
        if (r.verdict != KVV_VERDICT_FAIL)
            fail_msg("%s with force_fail: %s (%s)", ce->name, kvv_verdict_name(r.verdict),
                     r.key_figure);
        assert_true(r.has_mismatch);
        kvv_check_result_free(&r);
    }
    kvv_model_close(m);
}

/* A signal before the audit's checks start (*o.stop set, cli/interrupt.h):
 * in process and isolated, no check runs; each reads ERROR "interrupted",
 * and the report is 130 with "interrupted" in its JSON. */
static void test_stopped_audit(void **state)
{
    (void)state;
    char path[4096];
    synth_path("llama-tiny", path, sizeof path);
    kvv_model *m;
    kvv_error err = {0};
    assert_int_equal(kvv_model_open(path, &m, &err), KVV_OK);
    int32_t tok[N_PROMPT];
    kvv_prompt_random(9, m->hp.n_vocab, -1, tok, N_PROMPT);
    volatile sig_atomic_t stop = 1;
    for (int isolate = 0; isolate < 2; isolate++) {
        kvv_check_opts o = kvv_check_opts_default();
        o.model = m;
        o.tokens = tok;
        o.n_tokens = N_PROMPT;
        o.n_gen = N_GEN;
        o.n_jobs = 2;
        o.isolate = isolate ? KVV_ISOLATE_ON : KVV_ISOLATE_OFF;
        o.stop = &stop;
        kvv_report rep;
        kvv_report_init(&rep, path, 1);
        assert_int_equal(kvv_audit_run(&o, mine, N_MINE, &rep, &err), KVV_OK);
        assert_int_equal(rep.n_checks, N_MINE);
        for (int i = 0; i < rep.n_checks; i++) {
            assert_int_equal(rep.checks[i].verdict, KVV_VERDICT_ERROR);
            assert_true(rep.checks[i].interrupted);
            assert_string_equal(rep.checks[i].key_figure, "interrupted");
        }
        assert_int_equal(kvv_report_exit_code(&rep), KVV_EXIT_BAD_INPUT);
        rep.interrupted = true; /* what the command sets when its flag is up */
        assert_int_equal(kvv_report_exit_code(&rep), KVV_EXIT_INTERRUPTED);
        json_t *j = kvv_report_to_json(&rep);
        assert_true(json_is_true(json_object_get(j, "interrupted")));
        assert_int_equal(json_integer_value(json_object_get(j, "exit_code")), 130);
        json_t *c0 = json_array_get(json_object_get(j, "checks"), 0);
        assert_true(json_is_true(json_object_get(c0, "interrupted")));
        json_decref(j);
        kvv_report_free(&rep);
    }
    kvv_model_close(m);
}

/* Bad configurations are errors (ERROR verdict, USAGE status), not crashes. */
static void test_bad_opts(void **state)
{
    (void)state;
    char path[4096];
    synth_path("llama-tiny", path, sizeof path);
    kvv_model *m;
    kvv_error err = {0};
    assert_int_equal(kvv_model_open(path, &m, &err), KVV_OK);
    int32_t tok[3] = {1, 2, (int32_t)m->hp.n_vocab}; /* last out of range */
    kvv_check_opts o = kvv_check_opts_default();
    o.model = m;
    o.tokens = tok;
    o.n_tokens = 3;
    o.n_gen = 2;
    for (int i = 0; i < N_MINE; i++) {
        const kvv_check_entry *ce = kvv_audit_find(mine[i]);
        kvv_check_result r;
        kvv_check_result_init(&r, ce->name);
        err = (kvv_error){0};
        assert_int_equal(ce->run(&o, &r, &err), KVV_ERR_USAGE);
        assert_int_equal(r.verdict, KVV_VERDICT_ERROR);
        assert_non_null(strstr(r.message, "vocabulary"));
        kvv_check_result_free(&r);
    }
    /* unknown engine */
    tok[2] = 3;
    o.engine.name = "no-such-engine";
    kvv_check_result r;
    kvv_check_result_init(&r, "kv");
    assert_int_equal(kvv_audit_find("kv")->run(&o, &r, &err), KVV_ERR_USAGE);
    kvv_check_result_free(&r);
    kvv_model_close(m);
}

/* An architecture kvverify cannot run (written with the GGUF writer): the
 * model does not open, with KVV_ERR_UNSUPPORTED = exit code 77. */
static void test_unsupported_arch(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/bert.gguf", kvv_test_tmpdir());
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    assert_non_null(w);
    assert_int_equal(kvv_gguf_writer_set_str(w, "general.architecture", "bert"), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u32(w, "bert.block_count", 1), KVV_OK);
    assert_int_equal(kvv_gguf_writer_set_u32(w, "bert.embedding_length", 8), KVV_OK);
    float embd[8 * 16] = {0};
    int64_t ne[2] = {8, 16};
    assert_int_equal(kvv_gguf_writer_add_tensor(w, "token_embd.weight", KVV_TYPE_F32, 2, ne,
                                                embd),
                     KVV_OK);
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_writer_write(w, path, &err), KVV_OK);
    kvv_gguf_writer_free(w);
    kvv_model *m = NULL;
    kvv_status s = kvv_model_open(path, &m, &err);
    assert_int_equal(s, KVV_ERR_UNSUPPORTED);
    assert_null(m);
    assert_int_equal(kvv_exit_code(s), KVV_EXIT_NOTHING);
    assert_non_null(strstr(err.msg, "bert"));
}

/* Write value v over element 0 of tensor `name` of the GGUF file at path
 * (an F32 tensor; its offset from the reader, the bytes written in place). */
static void patch_f32(const char *path, const char *name, float v)
{
    kvv_gguf *g;
    kvv_error err = {0};
    if (kvv_gguf_open(path, &g, &err))
        fail_msg("%s: %s", path, err.msg);
    const kvv_gguf_tensor *t = kvv_gguf_find_tensor(g, name);
    assert_non_null(t);
    assert_int_equal(t->type, KVV_TYPE_F32);
    long off = (long)(g->data_offset + t->offset);
    kvv_gguf_close(g);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    assert_int_equal(fwrite(&v, sizeof v, 1, f), 1); /* little-endian host, as the file */
    assert_int_equal(fclose(f), 0);
}

/* Issue 31 item 6: output_norm[0] = inf makes every logit non-finite, on
 * both sides of every comparison alike. Each check that compares logits
 * fails and says how many; kv (K/V only, all finite) still passes. */
static void test_nonfinite_fails(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/inf-norm.gguf", kvv_test_tmpdir());
    kvv_synth_opts so = {.shape = kvv_shape_find("llama-tiny"), .type = KVV_TYPE_F32, .seed = 3};
    kvv_error err = {0};
    assert_int_equal(kvv_synth_write(&so, path, &err), KVV_OK);
    patch_f32(path, "output_norm.weight", INFINITY);
    kvv_model *m;
    assert_int_equal(kvv_model_open(path, &m, &err), KVV_OK);
    int32_t tok[N_PROMPT];
    kvv_prompt_random(7, m->hp.n_vocab, -1, tok, N_PROMPT);
    kvv_check_opts o = kvv_check_opts_default();
    o.model = m;
    o.tokens = tok;
    o.n_tokens = N_PROMPT;
    o.n_gen = N_GEN;
    for (int i = 0; i < N_MINE; i++) {
        const kvv_check_entry *ce = kvv_audit_find(mine[i]);
        kvv_check_result r;
        kvv_check_result_init(&r, ce->name);
        assert_int_equal(ce->run(&o, &r, &err), KVV_OK);
        if (strcmp(ce->name, "kv") == 0) {
            assert_int_equal(r.verdict, KVV_VERDICT_PASS);
        } else {
            if (r.verdict != KVV_VERDICT_FAIL || !strstr(r.key_figure, "not finite"))
                fail_msg("%s on an inf output norm: %s (%s)", ce->name,
                         kvv_verdict_name(r.verdict), r.key_figure);
            uint64_t nan, inf;
            assert_true(kvv_check_nonfinite(&r, &nan, &inf) > 0);
            char want[64];
            snprintf(want, sizeof want, "%llu compared values not finite",
                     (unsigned long long)(nan + inf));
            assert_non_null(strstr(r.key_figure, want));
        }
        kvv_check_result_free(&r);
    }
    kvv_model_close(m);
}

/* The rule itself: a row with an infinity on both sides turns a clean
 * comparison into FAIL, the reason first; the frame does the same after a
 * check's own PASS. */
static void test_nonfinite_rule(void **state)
{
    (void)state;
    kvv_check_result r;
    kvv_check_result_init(&r, "x");
    float a[2] = {1.0f, INFINITY};
    kvv_cmp_stats st;
    kvv_cmp_init(&st);
    kvv_cmp_update(&st, a, a, 2);
    assert_int_equal(kvv_check_add_row(&r, 0, "logits", &st), KVV_OK);
    kvv_check_conclude(&r, false, "all equal", "differ", "clean");
    assert_int_equal(r.verdict, KVV_VERDICT_FAIL);
    assert_string_equal(r.key_figure, "1 compared values not finite (0 NaN, 1 inf); clean");
    kvv_check_result_free(&r);
    kvv_check_result_init(&r, "x");
    kvv_check_conclude(&r, false, "all equal", "differ", "clean"); /* no rows: a PASS */
    assert_int_equal(r.verdict, KVV_VERDICT_PASS);
    kvv_check_result_free(&r);
    /* issue 31 item 8: an undetected control is the reason, so it comes first */
    kvv_check_result_init(&r, "x");
    assert_int_equal(kvv_check_add_control(&r, "planted", false, "not seen"), KVV_OK);
    kvv_check_conclude(&r, false, "all equal", "differ", "0 differ");
    assert_int_equal(r.verdict, KVV_VERDICT_FAIL);
    assert_string_equal(r.key_figure, "1 control NOT detected; 0 differ");
    kvv_check_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synth_models), cmocka_unit_test(test_force_fail),
        cmocka_unit_test(test_bad_opts),     cmocka_unit_test(test_unsupported_arch),
        cmocka_unit_test(test_stopped_audit),
        cmocka_unit_test(test_nonfinite_fails), cmocka_unit_test(test_nonfinite_rule),
        cmocka_unit_test(test_shared_models),
        cmocka_unit_test(test_peer_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
