/* html.c — the HTML documents (report.h): a check report's page, and the
 * dispatch by document kind to the suite page (html_trend.c) and the
 * numerics page (html_measures.c). */
#include "verify/report/html_impl.h"
#include "verify/report/report.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void report_page(kvv_sbuf *b, const json_t *doc)
{
    const json_t *checks = json_object_get(doc, "checks");
    const json_t *model = json_object_get(doc, "model");
    const char *path = kvv_jget_str(model, "path");
    const char *base = strrchr(path, '/');
    char title[512];
    size_t n = json_array_size(checks);
    const char *what = n == 1 ? kvv_jget_str(json_array_get(checks, 0), "name") : "audit";
    snprintf(title, sizeof title, "kvverify %s — %s — %s", what, base ? base + 1 : path,
             kvv_jget_str(doc, "verdict"));
    kvv_html_begin(b, title);
    snprintf(title, sizeof title, "kvverify %s", what);
    kvv_html_report_header(b, doc, title);
    kvv_html_report_body(b, doc, "");
    kvv_html_end(b);
}

kvv_status kvv_html_render(const json_t *doc, kvv_sbuf *b, kvv_error *err)
{
    const char *kind = kvv_html_doc_kind(doc);
    if (!kind)
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "not a kvverify report: expected a check report (\"checks\"), "
                             "suite results (\"results\") or a numerics report");
    if (strcmp(kind, "report") == 0)
        report_page(b, doc);
    else if (strcmp(kind, "suite") == 0)
        kvv_html_suite_page(b, doc);
    else
        kvv_html_numerics_page(b, doc);
    return KVV_OK;
}

kvv_status kvv_html_write(const json_t *doc, const char *path, kvv_error *err)
{
    kvv_sbuf b = {0};
    kvv_status st = kvv_html_render(doc, &b, err);
    if (st) {
        kvv_sbuf_free(&b);
        return st;
    }
    return kvv_sbuf_write_file(&b, path, err); /* "-": stdout */
}
