/*
 * test_html.c — the HTML report's pieces without a browser (the browser test
 * is tests/cli/test_html.sh): the SVG module's ticks, number formats and
 * scales; a real audit's page holds each check's figure with the JSON's
 * count of points; text from the report is escaped; a skipped check and an
 * engine's extra description fields are shown from the JSON as they are;
 * documents of no known kind, mixed trends and unwritable paths are errors
 * naming what is wrong.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/synth.h"
#include "tests/test_util.h"
#include "verify/audit.h"
#include "verify/report/report.h"
#include "verify/report/svg.h"

/* ------------------------------------------------ svg */

static void test_format(void **state)
{
    (void)state;
    char b[48];
    assert_string_equal(kvv_svg_format(0, KVV_FMT_NUM, b, sizeof b), "0");
    assert_string_equal(kvv_svg_format(1e-6, KVV_FMT_NUM, b, sizeof b), "1e-6");
    assert_string_equal(kvv_svg_format(2.5e7, KVV_FMT_NUM, b, sizeof b), "2.5e7");
    assert_string_equal(kvv_svg_format(10000, KVV_FMT_NUM, b, sizeof b), "10000");
    assert_string_equal(kvv_svg_format(0.25, KVV_FMT_NUM, b, sizeof b), "0.25");
    assert_string_equal(kvv_svg_format(40960, KVV_FMT_BYTES, b, sizeof b), "41 kB");
    assert_string_equal(kvv_svg_format(512, KVV_FMT_BYTES, b, sizeof b), "512 B");
    assert_string_equal(kvv_svg_format(0.5, KVV_FMT_PERCENT, b, sizeof b), "50%");
    assert_string_equal(kvv_svg_format(3.4e-6, KVV_FMT_SECONDS, b, sizeof b), "3.4 µs");
    assert_string_equal(kvv_svg_format(NAN, KVV_FMT_NUM, b, sizeof b), "NaN");
}

static void test_ticks(void **state)
{
    (void)state;
    double t[32];
    kvv_svg_axis lin = {.lo = -0.5, .hi = 31.5, .integer = true};
    int n = kvv_svg_ticks(&lin, t, 9);
    assert_int_equal(n, 7); /* 0, 5, ..., 30 */
    assert_true(t[0] == 0 && t[1] == 5 && t[6] == 30);
    kvv_svg_axis small = {.lo = -0.5, .hi = 2.5, .integer = true};
    n = kvv_svg_ticks(&small, t, 9);
    assert_int_equal(n, 3); /* 0, 1, 2: never 0.5 steps on an integer axis */
    kvv_svg_axis lg = {.lo = 1e-9, .hi = 1, .log = true};
    n = kvv_svg_ticks(&lg, t, 7);
    assert_true(n >= 2 && n <= 7);
    for (int i = 0; i < n; i++) /* decades only */
        assert_true(fabs(log10(t[i]) - round(log10(t[i]))) < 1e-9);
    const char *cats[3] = {"a", "b", "c"};
    n = kvv_svg_ticks(&(kvv_svg_axis){.cats = cats, .n_cats = 3, .lo = -0.5, .hi = 2.5}, t, 30);
    assert_int_equal(n, 3);
}

static void test_scales(void **state)
{
    (void)state;
    kvv_sbuf b = {0};
    kvv_svg s;
    kvv_svg_axis x = {.lo = 0, .hi = 10};
    kvv_svg_axis y = {.lo = 1e-6, .hi = 1, .log = true, .zero_band = true};
    kvv_svg_begin(&s, &b, 400, 300, &x, &y);
    /* ends of the axes at the ends of the plot area; zeros in the band below */
    assert_true(fabs(kvv_svg_px(&s, 0) - s.x0) < 1e-9 && fabs(kvv_svg_px(&s, 10) - s.x1) < 1e-9);
    assert_true(fabs(kvv_svg_py(&s, 1) - s.y0) < 1e-9);
    double zero = kvv_svg_py(&s, 0), lo = kvv_svg_py(&s, 1e-6);
    assert_true(zero > lo && zero <= s.y1);
    assert_true(isnan(kvv_svg_py(&s, NAN)));
    kvv_svg_point(&s, 5, 0, "#000", KVV_SHAPE_CIRCLE, "zero <%d>", 1);
    kvv_svg_point(&s, 5, NAN, "#000", KVV_SHAPE_CIRCLE, "not drawn");
    kvv_svg_end(&s);
    assert_int_equal(s.n_points, 1);
    assert_non_null(strstr(b.p, "<title>zero &lt;1&gt;</title>"));
    kvv_sbuf_free(&b);
}

/* ------------------------------------------------ pages */

static char *read_text(const char *path)
{
    size_t n;
    uint8_t *p = kvv_test_read_file(path, &n);
    assert_non_null(p);
    char *s = realloc(p, n + 1);
    assert_non_null(s);
    s[n] = 0;
    return s;
}

/* A real audit of a synthetic model as its JSON document. */
static json_t *audit_doc(const char *model_name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", kvv_test_tmpdir(), model_name);
    kvv_synth_opts so = {.shape = kvv_shape_find("llama-tiny"), .type = KVV_TYPE_F32, .seed = 5};
    kvv_error err = {0};
    if (kvv_synth_write(&so, path, &err))
        fail_msg("%s", err.msg);
    kvv_model *m;
    assert_int_equal(kvv_model_open(path, &m, &err), KVV_OK);
    int32_t tok[6];
    kvv_prompt_random(3, m->hp.n_vocab, 1, tok, 6);
    kvv_check_opts o = kvv_check_opts_default();
    o.model = m;
    o.tokens = tok;
    o.n_tokens = 6;
    o.n_gen = 4;
    kvv_report rep;
    kvv_report_init(&rep, path, 3);
    rep.n_prompt = 6;
    assert_int_equal(kvv_audit_run(&o, NULL, 0, &rep, &err), KVV_OK);
    json_t *doc = kvv_report_to_json(&rep);
    kvv_report_free(&rep);
    kvv_model_close(m);
    assert_non_null(doc);
    return doc;
}

static char *render(const json_t *doc, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", kvv_test_tmpdir(), name);
    kvv_error err = {0};
    if (kvv_html_write(doc, path, &err))
        fail_msg("%s", err.msg);
    return read_text(path);
}

static void expect_figure(const char *page, const char *kind, long points)
{
    char want[128];
    snprintf(want, sizeof want, "data-figure=\"%s\" data-points=\"%ld\"", kind, points);
    if (!strstr(page, want))
        fail_msg("page lacks %s", want);
}

static void test_audit_page(void **state)
{
    (void)state;
    json_t *doc = audit_doc("page.gguf");
    char *page = render(doc, "audit.html");
    const json_t *checks = json_object_get(doc, "checks");
    const json_t *kv = json_object_get(json_array_get(checks, 0), "details");
    const json_t *grid = json_object_get(json_object_get(kv, "ulp_by_position"), "K");
    long L = (long)json_array_size(grid), T = (long)json_array_size(json_array_get(grid, 0));
    assert_true(L > 0 && T == 6);
    expect_figure(page, "kv-ulp", 2 * L * T);
    const json_t *gd = json_object_get(json_array_get(checks, 2), "details");
    expect_figure(page, "greedy-margin", 2 * (long)json_array_size(json_object_get(gd, "margins_cached")));
    assert_non_null(strstr(page, "data-figure=\"patch-kl\""));
    assert_non_null(strstr(page, "data-figure=\"invariance-ulp\""));
    assert_non_null(strstr(page, "data-figure=\"compare-residual-map\""));
    assert_non_null(strstr(page, "bit-exact"));
    /* the audit's compare is ref against cpu, never the reference with itself */
    assert_non_null(strstr(page, "ref vs cpu"));
    assert_null(strstr(page, "<script"));
    /* no URL but the SVG namespace: nothing to fetch */
    for (const char *u = strstr(page, "http"); u; u = strstr(u + 1, "http"))
        if (strncmp(u, "http://www.w3.org/2000/svg", 26) != 0)
            fail_msg("a URL in the page: %.60s", u);
    /* rendering is a function of the document: twice, the same bytes */
    char *again = render(doc, "audit2.html");
    assert_string_equal(page, again);
    free(again);
    free(page);
    json_decref(doc);
}

/* A report document shaped like a plugin run: hostile text, a skipped
 * check, an engine describing more fields than the built-in ones. */
static void test_escaping_and_skipped(void **state)
{
    (void)state;
    json_t *doc = json_pack(
        "{s:s, s:i, s:s, s:s, s:s, s:i, s:s, s:f, s:i, s:i, s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s, "
        "s:i, s:i, s:s, s:s}, s:[{s:s, s:s, s:s, s:s, s:f, s:n, s:n, s:[], s:[], s:{}}]}",
        "kvverify_version", "0.1.0", "schema_version", 1, "started", "2026-01-01T00:00:00Z",
        "verdict", "skipped", "prompt_source", "random", "seed", 1, "seed_hex", "0x1", "seconds",
        0.5, "exit_code", 77, "n_prompt", 4, "model", "path", "<script>alert(1)</script>&.gguf",
        "sha256", "", "architecture", "llama", "engine", "name", "plugin:x.so", "mode", "fast",
        "cache_type", "f16", "n_threads", 4, "control", 0, "kernels", "k", "device",
        "vulkan0 \"<gpu>\"", "checks", "name", "kv", "verdict", "skipped", "key_figure",
        "not supported", "message", "engine lacks kv_from_residual", "seconds", 0.0, "engine",
        "first_mismatch", "controls", "layers", "details");
    assert_non_null(doc);
    char *page = render(doc, "skipped.html");
    assert_null(strstr(page, "<script>alert"));
    assert_non_null(strstr(page, "&lt;script&gt;alert(1)&lt;/script&gt;&amp;.gguf"));
    assert_non_null(strstr(page, "<span class=\"badge skipped\">SKIPPED</span>"));
    assert_non_null(strstr(page, "engine lacks kv_from_residual"));
    assert_non_null(strstr(page, "No figure"));
    assert_null(strstr(page, "data-figure="));
    /* an engine field kvverify does not know is shown as it is */
    assert_non_null(strstr(page, "<dt>device</dt><dd>vulkan0 &quot;&lt;gpu&gt;&quot;</dd>"));
    free(page);
    json_decref(doc);
}

static void test_errors(void **state)
{
    (void)state;
    kvv_error err = {0};
    json_t *other = json_pack("{s:i}", "hello", 1);
    assert_null(kvv_html_doc_kind(other));
    char path[4200];
    snprintf(path, sizeof path, "%s/x.html", kvv_test_tmpdir());
    assert_int_equal(kvv_html_write(other, path, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "not a kvverify report"));
    json_t *doc = audit_doc("err.gguf");
    assert_string_equal(kvv_html_doc_kind(doc), "report");
    assert_int_equal(kvv_html_write(doc, "/nonexistent-dir/x.html", &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x.html"));
    json_t *num = json_pack("{s:s, s:[]}", "command", "numerics", "engines");
    assert_string_equal(kvv_html_doc_kind(num), "numerics");
    const json_t *mixed[2] = {doc, num};
    const char *labels[2] = {"a.json", "b.json"};
    assert_int_equal(kvv_html_write_trend(mixed, labels, 2, path, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "b.json"));
    const json_t *nights[2] = {doc, doc};
    assert_int_equal(kvv_html_write_trend(nights, labels, 2, path, &err), KVV_OK);
    char *page = read_text(path);
    assert_non_null(strstr(page, "data-figure=\"trend-verdicts\""));
    assert_non_null(strstr(page, "data-figure=\"trend-check\""));
    free(page);
    json_decref(num);
    json_decref(doc);
    json_decref(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),       cmocka_unit_test(test_ticks),
        cmocka_unit_test(test_scales),       cmocka_unit_test(test_audit_page),
        cmocka_unit_test(test_escaping_and_skipped), cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
