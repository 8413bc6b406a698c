/* test_suite_manifest.c — verify/suite/suite.h without running engines: manifest
 * parsing (text and JSON, every key, relative paths, errors that name line
 * and key), loading a file (a read that fails is an I/O error, not an empty
 * manifest) and the shard rule (N shards cover every case exactly once). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/test_util.h"
#include "verify/suite/suite.h"

static kvv_suite *parse_ok(const char *text, const char *base)
{
    kvv_suite *s = NULL;
    kvv_error err = {0};
    kvv_status st = kvv_suite_parse(text, strlen(text), "m.txt", base, &s, &err);
    if (st)
        fail_msg("parse failed: %s", err.msg);
    return s;
}

static void expect_error(const char *text, const char *needle)
{
    kvv_suite *s = (kvv_suite *)1;
    kvv_error err = {0};
    assert_int_equal(kvv_suite_parse(text, strlen(text), "m.txt", "dir", &s, &err), KVV_ERR_FORMAT);
    assert_null(s);
    if (!strstr(err.msg, needle))
        fail_msg("error '%s' lacks '%s'", err.msg, needle);
}

static void test_text_manifest(void **state)
{
    (void)state;
    kvv_suite *s = parse_ok("# nightly\n"
                            "\n"
                            "a model=m.gguf checks=kv,patch\n"
                            "b\tmodel=/abs/m.gguf engine=cpu mode=fast threads=4 cache=bf16 isa=avx2 "
                            "checks=greedy,invariance,kvdirect tokens=7 seed=9 n=3 optional=yes  # c\n"
                            "c model=m.gguf vector=v/x.kvv control=resid:2:5\n"
                            "d model=m.gguf checks=kv control=force-fail\r\n"
                            "e model=m.gguf vector=x.kvv control=weight\n",
                            "base");
    assert_int_equal(s->n_cases, 5);
    const kvv_suite_case *a = &s->cases[0], *b = &s->cases[1], *c = &s->cases[2];
    assert_string_equal(a->name, "a");
    assert_int_equal(a->line, 3);
    assert_string_equal(a->model, "base/m.gguf");
    assert_string_equal(a->engine, "ref");
    assert_string_equal(a->cache, "f32");
    assert_int_equal(a->checks, kvv_suite_check_bit("kv") | kvv_suite_check_bit("patch"));
    assert_int_equal(a->threads, 1);
    assert_int_equal(a->n_tokens, 0); /* not given: the floor for the case's engine, at run time */
    assert_int_equal(a->n_gen, 0);
    assert_false(a->optional);
    assert_string_equal(b->model, "/abs/m.gguf");
    assert_string_equal(b->engine, "cpu");
    assert_string_equal(b->mode, "fast");
    assert_string_equal(b->isa, "avx2");
    assert_string_equal(a->isa, "");
    assert_string_equal(kvv_suite_case_engine(b).isa, "avx2");
    assert_null(kvv_suite_case_engine(a).isa);
    assert_string_equal(b->cache, "bf16");
    assert_int_equal(b->threads, 4);
    assert_int_equal(b->checks, kvv_suite_check_bit("greedy") | kvv_suite_check_bit("invariance") |
                                 kvv_suite_check_bit("kvdirect"));
    assert_int_equal(b->n_tokens, 7);
    assert_true(b->seed == 9);
    assert_int_equal(b->n_gen, 3);
    assert_true(b->optional);
    assert_string_equal(c->vector, "base/v/x.kvv");
    assert_int_equal(c->perturb_layer, 2);
    assert_int_equal(c->perturb_pos, 5);
    assert_int_equal(c->checks, 0);
    assert_true(s->cases[3].force_fail);
    assert_int_equal(s->cases[4].control, KVV_CTL_PERTURB_WEIGHT);
    assert_int_equal(s->cases[4].perturb_layer, -1);
    kvv_suite_free(s);
}

static void test_json_manifest(void **state)
{
    (void)state;
    kvv_suite *s = parse_ok("  {\"cases\": ["
                            "{\"name\": \"j1\", \"model\": \"m.gguf\", \"checks\": [\"kv\", \"greedy\"],"
                            " \"tokens\": 5, \"optional\": true},"
                            "{\"name\": \"j2\", \"model\": \"m.gguf\", \"checks\": \"patch\","
                            " \"vector\": \"v.kvv\", \"cache\": \"f16\"}]}",
                            ".");
    assert_int_equal(s->n_cases, 2);
    assert_int_equal(s->cases[0].checks, kvv_suite_check_bit("kv") | kvv_suite_check_bit("greedy"));
    assert_int_equal(s->cases[0].n_tokens, 5);
    assert_true(s->cases[0].optional);
    assert_string_equal(s->cases[0].model, "m.gguf");
    assert_int_equal(s->cases[1].checks, kvv_suite_check_bit("patch"));
    assert_string_equal(s->cases[1].vector, "v.kvv");
    assert_string_equal(s->cases[1].cache, "f16");
    assert_int_equal(s->cases[1].line, 2);
    kvv_suite_free(s);
}

static void test_manifest_errors(void **state)
{
    (void)state;
    expect_error("", "m.txt: no cases");
    expect_error("# only a comment\n", "no cases");
    expect_error("a checks=kv\n", "m.txt: line 1: key model: missing");
    expect_error("a model=m\n", "line 1: key checks: a case needs checks=... or vector=...");
    expect_error("\n\na model=m checks=kv,nope\n", "line 3: key checks: unknown check 'nope'");
    expect_error("a model=m checks=kv colour=red\n", "line 1: key colour: unknown key");
    expect_error("a model=m checks=kv threads=0\n", "key threads: '0' is not an integer in 1..256");
    expect_error("a model=m checks=kv cache=f8\n", "key cache: 'f8' is not f32, f16 or bf16");
    expect_error("a model=m checks=kv mode=quick\n", "key mode");
    expect_error("a model=m checks=kv engine=cpu isa=avx9\n", "key isa: 'avx9' is not generic");
    expect_error("a model=m checks=kv isa=avx2\n", "key isa: engine ref does not take --isa");
    expect_error("a model=m checks=kv seed=-1\n", "key seed");
    expect_error("a model=m checks=kv optional=maybe\n", "key optional");
    expect_error("a model=m vector=v control=resid:1\n", "key control");
    expect_error("a model=m checks=kv stray\n", "key stray: expected key=value");
    expect_error("a/b model=m checks=kv\n", "key name: 'a/b' is not a case name");
    expect_error("a model=m checks=kv\na model=m checks=patch\n", "line 2: key name: 'a' already used at 1");
    expect_error("{\"cases\": 3}", "key cases: missing, or not an array");
    expect_error("{\"cases\": [{\"model\": \"m\"}]}", "case 1: key name");
    expect_error("{\"cases\": [{\"name\": \"x\", \"model\": \"m\", \"checks\": [1]}]}",
                 "case 1: key checks: array item 0 is not a string");
    expect_error("{\"cases\": [", "m.txt: line 1: JSON");
    const char nul[] = "a model=m checks=kv\0x";
    kvv_suite *s;
    kvv_error err = {0};
    assert_int_equal(kvv_suite_parse(nul, sizeof nul - 1, "n.txt", ".", &s, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "NUL byte"));
    assert_int_equal(kvv_suite_load("/nonexistent/m.txt", &s, &err), KVV_ERR_IO);
}

/* KVV_SUITE_MAX_CASES cases parse (and quickly: names are hashed); one
 * more is an error naming the line; a duplicate far down is still found. */
static void test_manifest_case_bound(void **state)
{
    (void)state;
    const int n = KVV_SUITE_MAX_CASES + 1;
    char *text = malloc((size_t)n * 32 + 64);
    assert_non_null(text);
    size_t o = 0, all_but_last = 0;
    for (int i = 0; i < n; i++) {
        all_but_last = o;
        o += (size_t)sprintf(text + o, "c%d model=m checks=kv\n", i);
    }
    kvv_suite *s = NULL;
    kvv_error err = {0};
    assert_int_equal(kvv_suite_parse(text, all_but_last, "big.txt", ".", &s, &err), KVV_OK);
    assert_int_equal(s->n_cases, KVV_SUITE_MAX_CASES);
    kvv_suite_free(s);
    assert_int_equal(kvv_suite_parse(text, o, "big.txt", ".", &s, &err), KVV_ERR_FORMAT);
    assert_null(s);
    char want[96];
    snprintf(want, sizeof want, "big.txt: line %d: key name: more than %d cases", n,
             KVV_SUITE_MAX_CASES);
    assert_non_null(strstr(err.msg, want));
    /* line 5001 repeats line 1's name */
    o = 0;
    for (int i = 0; i < 5000; i++)
        o += (size_t)sprintf(text + o, "c%d model=m checks=kv\n", i);
    o += (size_t)sprintf(text + o, "c0 model=m checks=patch\n");
    assert_int_equal(kvv_suite_parse(text, o, "dup.txt", ".", &s, &err), KVV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "dup.txt: line 5001: key name: 'c0' already used at 1"));
    free(text);
}

/* Every case lands in exactly one of the N shards, and shards differ in
 * size by at most one. */
static void test_shards(void **state)
{
    (void)state;
    for (int n_cases = 0; n_cases <= 40; n_cases++)
        for (int n = 1; n <= 12; n++) {
            int lo = n_cases, hi = 0;
            for (int i = 1; i <= n; i++) {
                int k = 0;
                for (int c = 0; c < n_cases; c++)
                    k += kvv_suite_in_shard(c, i, n);
                lo = k < lo ? k : lo;
                hi = k > hi ? k : hi;
            }
            for (int c = 0; c < n_cases; c++) {
                int owners = 0;
                for (int i = 1; i <= n; i++)
                    owners += kvv_suite_in_shard(c, i, n);
                assert_int_equal(owners, 1);
            }
            assert_true(hi - lo <= 1);
        }
    assert_false(kvv_suite_in_shard(0, 0, 2));
    assert_false(kvv_suite_in_shard(0, 3, 2));
    int i, n;
    assert_true(kvv_suite_parse_shard("3/8", &i, &n));
    assert_int_equal(i, 3);
    assert_int_equal(n, 8);
    assert_false(kvv_suite_parse_shard("0/8", &i, &n));
    assert_false(kvv_suite_parse_shard("9/8", &i, &n));
    assert_false(kvv_suite_parse_shard("1/8x", &i, &n));
    assert_false(kvv_suite_parse_shard("1", &i, &n));
    assert_false(kvv_suite_parse_shard("-1/2", &i, &n));
}

/* kvv_suite_load reads through common/read_file.h: a folder opens, but its
 * read fails (EISDIR), which is an I/O error naming it; the old loader never
 * checked ferror and parsed nothing as an empty manifest. */
static void test_manifest_load_errors(void **state)
{
    (void)state;
    kvv_suite *s = NULL;
    kvv_error err = {0};
    assert_int_equal(kvv_suite_load(kvv_test_tmpdir(), &s, &err), KVV_ERR_IO);
    assert_null(s);
    assert_non_null(strstr(err.msg, "read error"));
    char p[4096];
    snprintf(p, sizeof p, "%s/no_such_manifest.txt", kvv_test_tmpdir());
    assert_int_equal(kvv_suite_load(p, &s, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_manifest),
        cmocka_unit_test(test_json_manifest),
        cmocka_unit_test(test_manifest_errors),
        cmocka_unit_test(test_manifest_case_bound),
        cmocka_unit_test(test_manifest_load_errors),
        cmocka_unit_test(test_shards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
