/* junit.c — JUnit XML for CI (see report.h). The layout most CI
 * systems read:
 *
 *   <testsuites>
 *     <testsuite name="kvverify" tests= failures= errors= skipped= time= timestamp=>
 *       <properties> model, sha256, engine, seed, version </properties>
 *       <testcase classname="kvverify.MODEL" name="kv" time="0.01">
 *         <failure message="first mismatch">details</failure>   (FAIL)
 *         <error message="...">...</error>                       (ERROR)
 *         <skipped message="..."/>                                (SKIPPED)
 *         <system-out>key figure, controls</system-out>
 *       </testcase>
 */
#include "verify/report/report.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 4096;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_fmt(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_fmt(sbuf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* XML-escape s (attribute-safe); control characters other than tab and
 * newline are not allowed in XML 1.0 and become '?'. */
static void sb_esc(sbuf *b, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': sb_str(b, "&amp;"); break;
        case '<': sb_str(b, "&lt;"); break;
        case '>': sb_str(b, "&gt;"); break;
        case '"': sb_str(b, "&quot;"); break;
        case '\'': sb_str(b, "&apos;"); break;
        case '\n': sb_str(b, "&#10;"); break;
        case '\t': sb_str(b, "&#9;"); break;
        default:
            if (c < 0x20)
                sb_put(b, "?", 1);
            else
                sb_put(b, (const char *)&c, 1);
        }
    }
}

static void property(sbuf *b, const char *name, const char *value)
{
    sb_str(b, "      <property name=\"");
    sb_esc(b, name);
    sb_str(b, "\" value=\"");
    sb_esc(b, value);
    sb_str(b, "\"/>\n");
}

static void testcase(sbuf *b, const char *classname, const kvv_check_result *r)
{
    sb_str(b, "    <testcase classname=\"");
    sb_esc(b, classname);
    sb_str(b, "\" name=\"");
    sb_esc(b, r->name);
    sb_fmt(b, "\" time=\"%.6f\">\n", r->seconds);
    char mm[256] = "";
    if (r->has_mismatch)
        kvv_mismatch_format(&r->mismatch, mm, sizeof mm);
    if (r->verdict == KVV_VERDICT_FAIL) {
        char msg[700];
        if (mm[0])
            snprintf(msg, sizeof msg, "first mismatch: %s", mm);
        else
            snprintf(msg, sizeof msg, "%s", r->message[0] ? r->message : r->key_figure);
        sb_str(b, "      <failure message=\"");
        sb_esc(b, msg);
        sb_str(b, "\" type=\"mismatch\">");
        sb_esc(b, r->key_figure);
        if (r->message[0]) {
            sb_str(b, "\n");
            sb_esc(b, r->message);
        }
        for (int i = 0; i < r->n_controls; i++)
            if (!r->controls[i].detected) {
                sb_str(b, "\ncontrol not detected: ");
                sb_esc(b, r->controls[i].name);
            }
        sb_str(b, "</failure>\n");
    } else if (r->verdict == KVV_VERDICT_ERROR) {
        sb_str(b, "      <error message=\"");
        sb_esc(b, r->message);
        sb_str(b, "\" type=\"error\"/>\n");
    } else if (r->verdict == KVV_VERDICT_SKIPPED) {
        sb_str(b, "      <skipped message=\"");
        sb_esc(b, r->message[0] ? r->message : r->key_figure);
        sb_str(b, "\"/>\n");
    }
    sb_str(b, "      <system-out>");
    sb_esc(b, r->key_figure);
    for (int i = 0; i < r->n_controls; i++) {
        sb_str(b, "\ncontrol: ");
        sb_esc(b, r->controls[i].name);
        sb_str(b, r->controls[i].detected ? " — detected (" : " — NOT DETECTED (");
        sb_esc(b, r->controls[i].detail);
        sb_str(b, ")");
    }
    sb_str(b, "</system-out>\n    </testcase>\n");
}

kvv_status kvv_report_write_junit(const kvv_report *rep, const char *path, kvv_error *err)
{
    int fail = 0, error = 0, skipped = 0;
    for (int i = 0; i < rep->n_checks; i++) {
        fail += rep->checks[i].verdict == KVV_VERDICT_FAIL;
        error += rep->checks[i].verdict == KVV_VERDICT_ERROR;
        skipped += rep->checks[i].verdict == KVV_VERDICT_SKIPPED;
    }
    const char *base = strrchr(rep->model_path, '/');
    base = base ? base + 1 : rep->model_path;
    char classname[sizeof rep->model_path + 16];
    snprintf(classname, sizeof classname, "kvverify.%s", base);

    sbuf b = {0};
    sb_str(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    sb_fmt(&b, "<testsuites tests=\"%d\" failures=\"%d\" errors=\"%d\" time=\"%.6f\">\n",
           rep->n_checks, fail, error, rep->seconds);
    sb_str(&b, "  <testsuite name=\"kvverify\" tests=\"");
    sb_fmt(&b, "%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.6f\" timestamp=\"",
           rep->n_checks, fail, error, skipped, rep->seconds);
    sb_esc(&b, rep->started);
    sb_str(&b, "\">\n    <properties>\n");
    char tmp[64];
    property(&b, "model", rep->model_path);
    property(&b, "sha256", rep->model_sha256);
    property(&b, "kvverify_version", rep->version);
    snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)rep->seed);
    property(&b, "seed", tmp);
    if (rep->has_engine) {
        char eng[320];
        snprintf(eng, sizeof eng, "%s %s cache=%s threads=%d %s", rep->engine.name,
                 rep->engine.mode, rep->engine.cache_type, rep->engine.n_threads,
                 rep->engine.kernels);
        property(&b, "engine", eng);
    }
    sb_str(&b, "    </properties>\n");
    for (int i = 0; i < rep->n_checks; i++)
        testcase(&b, classname, &rep->checks[i]);
    sb_str(&b, "  </testsuite>\n</testsuites>\n");
    if (b.oom) {
        free(b.p);
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory building the JUnit report",
                             path);
    }
    kvv_status st = kvv_write_file_atomic(path, b.p, b.n, err);
    free(b.p);
    return st;
}
