/* resume.c — `suite --resume`: the results of an earlier run's JSON report
 * (kvv_suite_write_json's layout, docs/nightly.md) read back, so the cases
 * it holds are not run again. See suite.h. */
#include "verify/suite/suite.h"

#include <stdlib.h>
#include <string.h>

static kvv_status bad(kvv_error *err, const char *path, int i, const char *field, const char *why)
{
    return kvv_error_set(err, KVV_ERR_FORMAT, "%s: results[%d]: field %s: %s", path, i, field, why);
}

/* The string member key of j, or NULL when absent / not a string. */
static const char *str(const json_t *j, const char *key)
{
    return json_string_value(json_object_get(j, key));
}

kvv_status kvv_check_result_from_json(const json_t *j, kvv_check_result *r, kvv_error *err)
{
    const char *name = str(j, "name"), *verdict = str(j, "verdict");
    kvv_check_result_init(r, name ? name : "");
    if (!json_is_object(j) || !name || !verdict)
        return kvv_error_set(err, KVV_ERR_FORMAT, "check result: field %s missing or not a string",
                             !json_is_object(j) ? "(the object)" : !name ? "name" : "verdict");
    static const char *const verdicts[] = {"pass", "fail", "error", "skipped"};
    int v = -1;
    for (int k = 0; k < 4; k++)
        if (strcmp(verdict, verdicts[k]) == 0)
            v = k;
    if (v < 0)
        return kvv_error_set(err, KVV_ERR_FORMAT, "check result %s: field verdict: '%s' is not "
                             "pass, fail, error or skipped", name, verdict);
    const char *key = str(j, "key_figure"), *msg = str(j, "message"), *fault = str(j, "fault");
    kvv_check_set_verdict(r, (kvv_verdict)v, "%s", key ? key : "");
    kvv_check_set_message(r, "%s", msg ? msg : "");
    if (fault && (strcmp(fault, "crash") == 0 || strcmp(fault, "timeout") == 0 ||
                  strcmp(fault, "contract") == 0))
        snprintf(r->fault, sizeof r->fault, "%s", fault);
    r->unsupported = json_is_true(json_object_get(j, "unsupported"));
    r->seconds = json_number_value(json_object_get(j, "seconds"));
    const json_t *ctl = json_object_get(j, "controls");
    for (size_t i = 0; i < json_array_size(ctl); i++) {
        const json_t *c = json_array_get(ctl, i);
        const char *cn = str(c, "name"), *cd = str(c, "detail");
        if (kvv_check_add_control(r, cn ? cn : "", json_is_true(json_object_get(c, "detected")),
                                  "%s", cd ? cd : ""))
            return kvv_error_set(err, KVV_ERR_NOMEM, "check result %s: out of memory", name);
    }
    const json_t *d = json_object_get(j, "details");
    if (json_is_object(d) && r->details)
        json_object_update(r->details, (json_t *)d);
    return KVV_OK;
}

/* The manifest index of the case called name, or -1. */
static int case_index(const kvv_suite *s, const char *name)
{
    for (int i = 0; i < s->n_cases; i++)
        if (strcmp(s->cases[i].name, name) == 0)
            return i;
    return -1;
}

static kvv_status add_prior(kvv_suite_results *res, int ci, json_t *entry, const json_t *result,
                            kvv_error *err)
{
    if (res->n_out == res->cap_out) {
        int nc = res->cap_out ? res->cap_out * 2 : 16;
        kvv_suite_outcome *n = realloc(res->out, (size_t)nc * sizeof *n);
        if (!n)
            return kvv_error_set(err, KVV_ERR_NOMEM, "suite --resume: out of memory");
        res->out = n;
        res->cap_out = nc;
    }
    kvv_suite_outcome *o = &res->out[res->n_out];
    memset(o, 0, sizeof *o);
    o->case_index = ci;
    const json_t *wl = json_object_get(entry, "workload"); /* the case's sizes, as written */
    if (json_is_object(wl))
        kvv_workload_from_json(wl, &o->workload);
    kvv_status st = kvv_check_result_from_json(result, &o->r, err);
    if (st) {
        kvv_check_result_free(&o->r);
        return st;
    }
    o->prior = json_incref(entry);
    res->n_out++;
    return KVV_OK;
}

kvv_status kvv_suite_resume_load(const kvv_suite *s, const char *path, kvv_suite_results *res,
                                 bool *done, kvv_error *err)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc)
        return kvv_error_set(err, je.line < 0 ? KVV_ERR_IO : KVV_ERR_FORMAT,
                             "%s: cannot read the report to resume: %s (line %d, column %d)",
                             path, je.text, je.line, je.column);
    const json_t *results = json_object_get(doc, "results");
    kvv_status st = KVV_OK;
    if (!json_is_array(results))
        st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: field results: missing or not an array (not "
                           "a report of kvverify suite --json)", path);
    for (size_t i = 0; !st && i < json_array_size(results); i++) {
        json_t *e = json_array_get(results, i);
        const char *cname = str(e, "case");
        const json_t *result = json_object_get(e, "result");
        if (!cname) {
            st = bad(err, path, (int)i, "case", "missing or not a string");
            break;
        }
        if (!json_is_object(result)) {
            st = bad(err, path, (int)i, "result", "missing or not an object");
            break;
        }
        int ci = case_index(s, cname);
        if (ci < 0)
            continue; /* a case the manifest no longer has: not resumed */
        if ((st = add_prior(res, ci, e, result, err)))
            break;
        if (!done[ci])
            res->n_resumed++;
        done[ci] = true;
    }
    json_decref(doc);
    return st;
}
