/*
 * test_report.c — the result model and the writers (verify/report/report.h):
 * a real audit's JSON validates against docs/report-schema.json (checked by
 * a small JSON-Schema validator below, for the keywords that schema uses:
 * $ref, allOf, type, enum, required, properties, items, minimum), the JUnit
 * XML has one testcase per check and escapes what it must, exit codes follow
 * DESIGN.md §6, and writes are atomic.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/sha256.h"
#include "model/synth.h"
#include "tests/test_util.h"
#include "verify/audit.h"
#include "verify/report/report.h"

/* ------------------------------------------------ a small schema validator */

static const char *type_of(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static int type_ok(const json_t *v, const char *t)
{
    const char *vt = type_of(v);
    if (strcmp(t, vt) == 0)
        return 1;
    return strcmp(t, "number") == 0 && strcmp(vt, "integer") == 0;
}

static int validate(const json_t *root, const json_t *schema, const json_t *v, const char *path,
                    char *why, size_t nwhy);

static int validate(const json_t *root, const json_t *schema, const json_t *v, const char *path,
                    char *why, size_t nwhy)
{
    const json_t *ref = json_object_get(schema, "$ref");
    if (ref) {
        const char *r = json_string_value(ref);
        const char *pre = "#/definitions/";
        if (!r || strncmp(r, pre, strlen(pre)) != 0) {
            snprintf(why, nwhy, "%s: unsupported $ref", path);
            return 0;
        }
        const json_t *def = json_object_get(json_object_get(root, "definitions"), r + strlen(pre));
        if (!def) {
            snprintf(why, nwhy, "%s: dangling $ref %s", path, r);
            return 0;
        }
        if (!validate(root, def, v, path, why, nwhy))
            return 0;
    }
    const json_t *all = json_object_get(schema, "allOf");
    size_t i;
    const json_t *item;
    json_array_foreach(all, i, item) if (!validate(root, item, v, path, why, nwhy)) return 0;

    const json_t *type = json_object_get(schema, "type");
    if (type) {
        int ok = 0;
        if (json_is_string(type))
            ok = type_ok(v, json_string_value(type));
        json_array_foreach(type, i, item) ok |= type_ok(v, json_string_value(item));
        if (!ok) {
            snprintf(why, nwhy, "%s: type %s not allowed", path, type_of(v));
            return 0;
        }
    }
    const json_t *en = json_object_get(schema, "enum");
    if (en) {
        int ok = 0;
        json_array_foreach(en, i, item) ok |= json_equal((json_t *)item, (json_t *)v);
        if (!ok) {
            snprintf(why, nwhy, "%s: value not in enum", path);
            return 0;
        }
    }
    const json_t *mn = json_object_get(schema, "minimum");
    if (mn && json_is_number(v) && json_number_value(v) < json_number_value(mn)) {
        snprintf(why, nwhy, "%s: below minimum", path);
        return 0;
    }
    if (json_is_object(v)) {
        const json_t *req = json_object_get(schema, "required");
        json_array_foreach(req, i, item) {
            if (!json_object_get(v, json_string_value(item))) {
                snprintf(why, nwhy, "%s: required field '%s' missing", path,
                         json_string_value(item));
                return 0;
            }
        }
        const char *key;
        const json_t *sub;
        json_object_foreach((json_t *)json_object_get(schema, "properties"), key, sub)
        {
            const json_t *f = json_object_get(v, key);
            char p[512];
            snprintf(p, sizeof p, "%.400s.%s", path, key);
            if (f && !validate(root, sub, f, p, why, nwhy))
                return 0;
        }
    }
    const json_t *items = json_object_get(schema, "items");
    if (items && json_is_array(v)) {
        json_array_foreach(v, i, item) {
            char p[512];
            snprintf(p, sizeof p, "%.400s[%zu]", path, i);
            if (!validate(root, items, item, p, why, nwhy))
                return 0;
        }
    }
    return 1;
}

static json_t *load_schema(void)
{
    json_error_t je;
    json_t *s = json_load_file("docs/report-schema.json", 0, &je);
    if (!s)
        fail_msg("docs/report-schema.json: %s at line %d", je.text, je.line);
    return s;
}

/* ------------------------------------------------ a real audit */

static void run_audit(kvv_report *rep, char *model_path, size_t size, bool force_fail)
{
    snprintf(model_path, size, "%s/gemma2.gguf", kvv_test_tmpdir());
    kvv_synth_opts so = {.shape = kvv_shape_find("gemma2-tiny"), .type = KVV_TYPE_F32, .seed = 5};
    kvv_error err = {0};
    if (kvv_synth_write(&so, model_path, &err))
        fail_msg("%s", err.msg);
    kvv_model *m;
    assert_int_equal(kvv_model_open(model_path, &m, &err), KVV_OK);
    int32_t tok[5];
    kvv_prompt_random(11, m->hp.n_vocab, 1, tok, 5);
    kvv_check_opts o = kvv_check_opts_default();
    o.model = m;
    o.tokens = tok;
    o.n_tokens = 5;
    o.n_gen = 3;
    o.force_fail = force_fail;
    kvv_report_init(rep, model_path, 11);
    assert_int_equal(kvv_sha256_file(model_path, rep->model_sha256, &err), KVV_OK);
    snprintf(rep->architecture, sizeof rep->architecture, "%s", m->hp.arch_name);
    snprintf(rep->prompt_source, sizeof rep->prompt_source, "random");
    rep->n_prompt = 5;
    assert_int_equal(kvv_audit_run(&o, NULL, 0, rep, &err), KVV_OK);
    kvv_model_close(m);
}

static void check_json_file(const char *path, int expect_code)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc)
        fail_msg("%s: %s", path, je.text);
    json_t *schema = load_schema();
    char why[600] = "";
    if (!validate(schema, schema, doc, "$", why, sizeof why))
        fail_msg("%s does not validate: %s", path, why);
    assert_int_equal(json_integer_value(json_object_get(doc, "exit_code")), expect_code);
    json_t *checks = json_object_get(doc, "checks");
    int n_table, n_ref = 0;
    const kvv_check_entry *t = kvv_audit_checks(&n_table);
    for (int i = 0; i < n_table; i++) /* the audit of the ref engine: those for it */
        n_ref += kvv_audit_applies(&t[i], "ref");
    assert_int_equal(json_array_size(checks), n_ref);
    const char *sha = json_string_value(json_object_get(json_object_get(doc, "model"), "sha256"));
    assert_non_null(sha);
    assert_int_equal(strlen(sha), 64);
    json_decref(schema);
    json_decref(doc);
}

static void test_json_schema(void **state)
{
    (void)state;
    kvv_report rep;
    char mp[4096], jp[4200];
    run_audit(&rep, mp, sizeof mp, false);
    assert_int_equal(kvv_report_exit_code(&rep), KVV_EXIT_PASS);
    snprintf(jp, sizeof jp, "%s/r.json", kvv_test_tmpdir());
    kvv_error err = {0};
    assert_int_equal(kvv_report_write_json(&rep, jp, &err), KVV_OK);
    check_json_file(jp, 0);
    kvv_report_free(&rep);

    /* a failing run validates too, with first_mismatch objects */
    run_audit(&rep, mp, sizeof mp, true);
    assert_int_equal(kvv_report_exit_code(&rep), KVV_EXIT_FAIL);
    assert_int_equal(kvv_report_write_json(&rep, jp, &err), KVV_OK);
    check_json_file(jp, 1);
    kvv_report_free(&rep);
}

/* The schema rejects what it should (the validator is not vacuous). */
static void test_schema_rejects(void **state)
{
    (void)state;
    json_t *schema = load_schema();
    json_t *bad = json_pack("{s:s}", "kvverify_version", "0.1.0");
    char why[600];
    assert_false(validate(schema, schema, bad, "$", why, sizeof why));
    assert_non_null(strstr(why, "required"));
    json_decref(bad);
    kvv_report rep;
    kvv_report_init(&rep, "m.gguf", 3);
    kvv_check_result *r = kvv_report_add(&rep, "kv");
    kvv_check_set_verdict(r, KVV_VERDICT_PASS, "ok");
    json_t *doc = kvv_report_to_json(&rep);
    assert_true(validate(schema, schema, doc, "$", why, sizeof why));
    json_object_set_new(json_array_get(json_object_get(doc, "checks"), 0), "verdict",
                        json_string("maybe"));
    assert_false(validate(schema, schema, doc, "$", why, sizeof why));
    json_decref(doc);
    kvv_report_free(&rep);
    json_decref(schema);
}

static void test_junit(void **state)
{
    (void)state;
    kvv_report rep;
    char mp[4096], xp[4200];
    run_audit(&rep, mp, sizeof mp, true);
    kvv_check_result *r = kvv_report_add(&rep, "odd<&\"'>name");
    kvv_check_set_verdict(r, KVV_VERDICT_ERROR, "x");
    kvv_check_set_message(r, "bad \x01 byte & <tag>");
    snprintf(xp, sizeof xp, "%s/r.xml", kvv_test_tmpdir());
    kvv_error err = {0};
    assert_int_equal(kvv_report_write_junit(&rep, xp, &err), KVV_OK);
    size_t n;
    char *x = (char *)kvv_test_read_file(xp, &n);
    assert_non_null(x);
    int cases = 0, failures = 0;
    for (const char *p = x; (p = strstr(p, "<testcase ")); p++)
        cases++;
    for (const char *p = x; (p = strstr(p, "<failure message=\"first mismatch: ")); p++)
        failures++;
    int n_table, n_ref = 0;
    const kvv_check_entry *t = kvv_audit_checks(&n_table);
    for (int i = 0; i < n_table; i++) /* the audit of the ref engine: those for it */
        n_ref += kvv_audit_applies(&t[i], "ref");
    assert_int_equal(cases, n_ref + 1);
    assert_true(failures >= 4); /* kv, patch, greedy, invariance at least */
    assert_non_null(strstr(x, "odd&lt;&amp;&quot;&apos;&gt;name"));
    assert_null(strchr(x, '\x01'));
    assert_non_null(strstr(x, "errors=\"1\""));
    free(x);
    /* well-formed per xmllint when it is installed */
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "command -v xmllint >/dev/null 2>&1 || exit 0; xmllint --noout '%s'",
             xp);
    assert_int_equal(system(cmd), 0);
    kvv_report_free(&rep);
}

static void test_exit_codes(void **state)
{
    (void)state;
    kvv_report rep;
    kvv_report_init(&rep, "m", 1);
    assert_int_equal(kvv_report_exit_code(&rep), KVV_EXIT_NOTHING); /* nothing checked */
    kvv_check_result *a = kvv_report_add(&rep, "a");
    kvv_check_set_verdict(a, KVV_VERDICT_PASS, "ok");
    assert_int_equal(kvv_report_exit_code(&rep), KVV_EXIT_PASS);
    kvv_check_result *b = kvv_report_add(&rep, "b");
    assert_int_equal(b->verdict, KVV_VERDICT_SKIPPED);
    /* a check that could not run beside one that passed: 0 (issue 15) */
    kvv_error u = {.status = KVV_ERR_UNSUPPORTED};
    snprintf(u.msg, sizeof u.msg, "engine x does not offer kv-write (needed by b)");
    kvv_check_set_error(b, &u);
    assert_true(b->unsupported);
    assert_string_equal(b->key_figure, "unsupported by this engine");
    assert_int_equal(kvv_report_exit_code(&rep), KVV_EXIT_PASS);
    kvv_check_set_verdict(a, KVV_VERDICT_SKIPPED, "unsupported by this engine");
    assert_int_equal(kvv_report_exit_code(&rep), KVV_EXIT_NOTHING); /* none could run */
    kvv_check_set_verdict(a, KVV_VERDICT_PASS, "ok");
    kvv_error e = {.status = KVV_ERR_NOMEM};
    snprintf(e.msg, sizeof e.msg, "out of memory");
    kvv_check_set_error(&rep.checks[1], &e);
    assert_int_equal(kvv_report_exit_code(&rep), KVV_EXIT_BAD_INPUT);
    kvv_check_result *c = kvv_report_add(&rep, "c");
    kvv_check_set_verdict(c, KVV_VERDICT_FAIL, "bad");
    assert_int_equal(kvv_report_exit_code(&rep), KVV_EXIT_FAIL);
    kvv_report_free(&rep);
    kvv_report_free(NULL);
    kvv_check_result_free(NULL);
}

static void test_mismatch_format(void **state)
{
    (void)state;
    kvv_mismatch m = {.tensor = "K", .variant = "chunk=5", .layer = 2, .token = 5, .head = 1,
                      .index = 3, .expected = 1.0f, .actual = 0.0f};
    m.actual = kvv_f32_from_bits(0x3f800001);
    char buf[256];
    kvv_mismatch_format(&m, buf, sizeof buf);
    assert_string_equal(buf, "K[l=2,t=5,h=1,i=3] chunk=5: expected 0x3f800000 (1) got "
                             "0x3f800001 (1.00000012)");
    kvv_mismatch g = {.tensor = "logits", .layer = -1, .token = 4, .head = -1, .index = 7};
    kvv_mismatch_format(&g, buf, sizeof buf);
    assert_non_null(strstr(buf, "logits[t=4,i=7]:"));
}

/* A workload read back from its JSON (what the HTML page and `kvverify
 * report` draw from) formats to the run's own line; a latency workload too;
 * a document without one reads as unset. */
static void test_workload_roundtrip(void **state)
{
    (void)state;
    kvv_workload w = {.set = true, .n_prompt = 32, .n_gen = 48, .kv_chunk = 5,
                      .chunks = {1, 2, 3, 4, 7}, .n_chunks = 5, .threads = {1, 2}, .n_threads = 2,
                      .floor_prompt = 8, .floor_gen = 32};
    snprintf(w.switches, sizeof w.switches, "4");
    kvv_workload l = {.set = true, .threads = {1}, .n_threads = 1, .batches = {1, 4, 16},
                      .n_batches = 3, .repeats = 2};
    snprintf(l.switches, sizeof l.switches, "unknown");
    const kvv_workload *cases[] = {&w, &l};
    for (int i = 0; i < 2; i++) {
        char a[512], b[512];
        json_t *j = kvv_workload_to_json(cases[i]);
        assert_non_null(j);
        kvv_workload back;
        kvv_workload_from_json(j, &back);
        json_decref(j);
        assert_true(back.set);
        assert_string_equal(kvv_workload_format(&back, b, sizeof b),
                            kvv_workload_format(cases[i], a, sizeof a));
    }
    char a[512];
    assert_string_equal(kvv_workload_format(&l, a, sizeof a),
                        "batches 1,4,16 tokens, 2 repeats each (median), threads 1; kernel "
                        "switches unknown");
    kvv_workload none;
    kvv_workload_from_json(NULL, &none);
    assert_false(none.set);
}

/* A figure too long for its field is cut at a word boundary with "…",
 * never inside a number; the whole text stays for JSON and JUnit. */
static void test_text_fit(void **state)
{
    (void)state;
    char buf[40];
    assert_false(kvv_text_fit(buf, sizeof buf, "short"));
    assert_string_equal(buf, "short");
    assert_true(kvv_text_fit(buf, sizeof buf, "expected 0xc1223486 (-10.1378231) actual 0xc1223487"));
    assert_string_equal(buf, "expected 0xc1223486 (-10.1378231)\xe2\x80\xa6");
    assert_true(strlen(buf) < sizeof buf);
    /* one long word is cut between runs of digits and letters, not inside one */
    assert_true(kvv_text_fit(buf, 12, "abcdefgh-0123456789"));
    assert_string_equal(buf, "abcdefgh\xe2\x80\xa6");
    assert_true(kvv_text_fit(buf, 14, "abcdefgh-0123456789"));
    assert_string_equal(buf, "abcdefgh-\xe2\x80\xa6");

    kvv_check_result r;
    kvv_check_result_init(&r, "vector");
    char long_fig[400];
    memset(long_fig, 'x', 150);
    snprintf(long_fig + 150, sizeof long_fig - 150, " expected 0xc1223486 (-10.1378231)");
    kvv_check_set_verdict(&r, KVV_VERDICT_PASS, "%s", long_fig);
    assert_non_null(r.key_full);
    assert_string_equal(kvv_check_key_figure(&r), long_fig);
    assert_true(strlen(r.key_figure) < sizeof r.key_figure);
    assert_null(strstr(r.key_figure, "0xc1")); /* dropped whole, not cut */
    json_t *j = kvv_check_to_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "key_figure")), long_fig);
    json_decref(j);
    kvv_check_set_verdict(&r, KVV_VERDICT_PASS, "fits");
    assert_null(r.key_full);
    kvv_check_result_free(&r);
}

static void test_atomic_write(void **state)
{
    (void)state;
    kvv_report rep;
    kvv_report_init(&rep, "m", 1);
    kvv_error err = {0};
    /* a directory that does not exist: an error naming the file, nothing written */
    assert_int_equal(kvv_report_write_json(&rep, "/nonexistent-dir/r.json", &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/r.json"));
    char p[4200];
    snprintf(p, sizeof p, "%s/keep.json", kvv_test_tmpdir());
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);
    assert_int_equal(kvv_report_write_json(&rep, p, &err), KVV_OK);
    size_t n;
    char *s = (char *)kvv_test_read_file(p, &n);
    assert_non_null(strstr(s, "\"kvverify_version\""));
    free(s);
    struct stat st;
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    assert_int_not_equal(stat(tmp, &st), 0);
    kvv_report_free(&rep);
}

static void test_sha256(void **state)
{
    (void)state;
    char p[4200], hex[65];
    snprintf(p, sizeof p, "%s/abc.txt", kvv_test_tmpdir());
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("abc", f);
    fclose(f);
    kvv_error err = {0};
    assert_int_equal(kvv_sha256_file(p, hex, &err), KVV_OK);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_int_equal(kvv_sha256_file("/nonexistent/x", hex, &err), KVV_ERR_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_schema),  cmocka_unit_test(test_schema_rejects),
        cmocka_unit_test(test_junit),        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_mismatch_format), cmocka_unit_test(test_atomic_write),
        cmocka_unit_test(test_sha256),       cmocka_unit_test(test_text_fit),
        cmocka_unit_test(test_workload_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
