/* junit.c — JUnit XML for CI (see report.h). The layout most CI systems
 * read, for a run of checks (kvv_report_write_junit) and, from the same
 * pieces, for a suite shard (verify/suite/write.c):
 *
 *   <testsuites tests= failures= errors= time=>
 *     <testsuite name= tests= failures= errors= skipped= time= timestamp=>
 *       <properties> model, sha256, engine, seed, version </properties>
 *       <testcase classname="kvverify.MODEL" name="kv" time="0.01">
 *         <failure message="first mismatch: ..." type="mismatch">details</failure>   (FAIL)
 *         <error message="..." type="error"/>                                       (ERROR)
 *         <error message="crash: SIGSEGV in ..." type="crash">detail</error>         (FAIL, fault)
 *         <skipped message="..."/>                                                  (SKIPPED)
 *         <skipped message="controls off: unproven: ..."/>         (PASS without controls)
 *         <system-out>context, key figure, controls</system-out>
 *       </testcase>
 */
#include "verify/report/report.h"

#include <stdlib.h>
#include <string.h>

void kvv_junit_count(kvv_junit_totals *t, const kvv_check_result *r)
{
    t->tests++;
    /* an engine fault (crash, timeout, contract) is an <error>, not wrong bits */
    t->failures += r->verdict == KVV_VERDICT_FAIL && !r->fault[0];
    t->errors += r->verdict == KVV_VERDICT_ERROR || (r->verdict == KVV_VERDICT_FAIL && r->fault[0]);
    t->skipped += r->verdict == KVV_VERDICT_SKIPPED || r->unproven;
}

void kvv_junit_begin(kvv_sbuf *b, const char *suite_name, const char *timestamp,
                     const kvv_junit_totals *t)
{
    kvv_sbuf_str(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    kvv_sbuf_fmt(b, "<testsuites tests=\"%d\" failures=\"%d\" errors=\"%d\" time=\"%.6f\">\n",
                 t->tests, t->failures, t->errors, t->seconds);
    kvv_sbuf_str(b, "  <testsuite name=\"");
    kvv_sbuf_xml(b, suite_name);
    kvv_sbuf_fmt(b, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.6f\"",
                 t->tests, t->failures, t->errors, t->skipped, t->seconds);
    if (timestamp) {
        kvv_sbuf_str(b, " timestamp=\"");
        kvv_sbuf_xml(b, timestamp);
        kvv_sbuf_str(b, "\"");
    }
    kvv_sbuf_str(b, ">\n");
}

void kvv_junit_properties(kvv_sbuf *b, const char *const *kv, int n)
{
    kvv_sbuf_str(b, "    <properties>\n");
    for (int i = 0; i < n; i++) {
        kvv_sbuf_str(b, "      <property name=\"");
        kvv_sbuf_xml(b, kv[2 * i]);
        kvv_sbuf_str(b, "\" value=\"");
        kvv_sbuf_xml(b, kv[2 * i + 1]);
        kvv_sbuf_str(b, "\"/>\n");
    }
    kvv_sbuf_str(b, "    </properties>\n");
}

/* <failure>: the first mismatch as the message; the key figure, the reason
 * and every undetected control as the body. */
static void failure(kvv_sbuf *b, const kvv_check_result *r)
{
    char mm[256] = "";
    kvv_sbuf_str(b, "      <failure message=\"");
    if (r->has_mismatch) {
        kvv_sbuf_str(b, "first mismatch: ");
        kvv_sbuf_xml(b, kvv_mismatch_format(&r->mismatch, mm, sizeof mm));
    } else {
        kvv_sbuf_xml(b, r->message[0] ? kvv_check_message(r) : kvv_check_key_figure(r));
    }
    kvv_sbuf_str(b, "\" type=\"mismatch\">");
    kvv_sbuf_xml(b, kvv_check_key_figure(r));
    if (r->message[0]) {
        kvv_sbuf_str(b, "\n");
        kvv_sbuf_xml(b, kvv_check_message(r));
    }
    for (int i = 0; i < r->n_controls; i++)
        if (!r->controls[i].detected) {
            kvv_sbuf_str(b, "\ncontrol not detected: ");
            kvv_sbuf_xml(b, r->controls[i].name);
        }
    kvv_sbuf_str(b, "</failure>\n");
}

void kvv_junit_testcase(kvv_sbuf *b, const char *classname, const kvv_check_result *r,
                        const char *context)
{
    kvv_sbuf_str(b, "    <testcase classname=\"");
    kvv_sbuf_xml(b, classname);
    kvv_sbuf_str(b, "\" name=\"");
    kvv_sbuf_xml(b, r->name);
    kvv_sbuf_fmt(b, "\" time=\"%.6f\">\n", r->seconds);
    if (r->verdict == KVV_VERDICT_FAIL && r->fault[0]) {
        /* the engine crashed, hung or broke its contract (verify/isolate.h) */
        kvv_sbuf_str(b, "      <error message=\"");
        kvv_sbuf_xml(b, kvv_check_key_figure(r));
        kvv_sbuf_str(b, "\" type=\"");
        kvv_sbuf_xml(b, r->fault);
        kvv_sbuf_str(b, "\">");
        kvv_sbuf_xml(b, kvv_check_message(r));
        kvv_sbuf_str(b, "</error>\n");
    } else if (r->verdict == KVV_VERDICT_FAIL) {
        failure(b, r);
    } else if (r->verdict == KVV_VERDICT_ERROR) {
        kvv_sbuf_str(b, "      <error message=\"");
        kvv_sbuf_xml(b, kvv_check_message(r));
        kvv_sbuf_str(b, "\" type=\"error\"/>\n");
    } else if (r->verdict == KVV_VERDICT_SKIPPED) {
        kvv_sbuf_str(b, "      <skipped message=\"");
        kvv_sbuf_xml(b, r->message[0] ? kvv_check_message(r) : kvv_check_key_figure(r));
        kvv_sbuf_str(b, "\"/>\n");
    } else if (r->unproven) { /* a CI would show a plain testcase as passed */
        kvv_sbuf_str(b, "      <skipped message=\"" KVV_UNPROVEN ": ");
        kvv_sbuf_xml(b, kvv_check_key_figure(r));
        kvv_sbuf_str(b, "\"/>\n");
    }
    kvv_sbuf_str(b, "      <system-out>");
    if (context) {
        kvv_sbuf_xml(b, context);
        kvv_sbuf_str(b, "\n");
    }
    kvv_sbuf_xml(b, kvv_check_key_figure(r));
    if (r->unproven)
        kvv_sbuf_str(b, "\n" KVV_UNPROVEN " (--no-controls: no negative control ran)");
    for (int i = 0; i < r->n_controls; i++) {
        kvv_sbuf_str(b, "\ncontrol: ");
        kvv_sbuf_xml(b, r->controls[i].name);
        kvv_sbuf_str(b, r->controls[i].detected ? " — detected (" : " — NOT DETECTED (");
        kvv_sbuf_xml(b, r->controls[i].detail);
        kvv_sbuf_str(b, ")");
    }
    kvv_sbuf_str(b, "</system-out>\n    </testcase>\n");
}

void kvv_junit_end(kvv_sbuf *b)
{
    kvv_sbuf_str(b, "  </testsuite>\n</testsuites>\n");
}

kvv_status kvv_report_write_junit(const kvv_report *rep, const char *path, kvv_error *err)
{
    kvv_junit_totals t = {0};
    for (int i = 0; i < rep->n_checks; i++)
        kvv_junit_count(&t, &rep->checks[i]);
    t.seconds = rep->seconds;
    const char *base = strrchr(rep->model_path, '/');
    base = base ? base + 1 : rep->model_path;
    char classname[sizeof rep->model_path + 16];
    snprintf(classname, sizeof classname, "kvverify.%s", base);

    kvv_sbuf b = {0};
    kvv_junit_begin(&b, "kvverify", rep->started, &t);
    char seed[32], eng[320] = "", ub[16], work[512];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)rep->seed);
    const char *props[32] = {"model", rep->model_path, "sha256", rep->model_sha256,
                             "kvverify_version", rep->version, "seed", seed};
    int n_props = 4;
    if (rep->has_engine) {
        const kvv_engine_desc *d = &rep->engine;
        snprintf(eng, sizeof eng, "%s %s cache=%s threads=%d %s", d->name, d->mode,
                 d->cache_type, d->n_threads, d->kernels);
        snprintf(ub, sizeof ub, "%d", d->n_ubatch);
        const char *extra[] = {"engine", eng, "engine_version", d->version, "engine_device",
                               d->device, "engine_variant", d->variant, "engine_flash_attn",
                               d->flash_attn, "engine_n_ubatch", d->n_ubatch > 0 ? ub : "",
                               "engine_isa", d->isa};
        for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i += 2)
            if (extra[i + 1][0]) { /* the built-in engines report no version, device, ... */
                props[2 * n_props] = extra[i];
                props[2 * n_props + 1] = extra[i + 1];
                n_props++;
            }
    }
    if (rep->controls_off) {
        props[2 * n_props] = "controls";
        props[2 * n_props + 1] = "off: unproven";
        n_props++;
    }
    if (rep->workload.set) {
        props[2 * n_props] = "workload";
        props[2 * n_props + 1] = kvv_workload_format(&rep->workload, work, sizeof work);
        n_props++;
    }
    kvv_junit_properties(&b, props, n_props);
    for (int i = 0; i < rep->n_checks; i++)
        kvv_junit_testcase(&b, classname, &rep->checks[i], NULL);
    kvv_junit_end(&b);
    return kvv_sbuf_write_file(&b, path, err);
}
