/* write.c — a suite shard's results as JUnit XML and JSON, built with the
 * report room's writers (verify/report/report.h): the same testcase element
 * and the same check objects as a single run's reports. See suite.h. */
#include "verify/suite/suite.h"

#include <stdio.h>
#include <string.h>

/* " device=D ubatch=N engine-opt=K=V ..." of a case (what only plugins take). */
static void plugin_context(const kvv_suite_case *c, char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    if (c->device[0])
        off += (size_t)snprintf(buf, size, " device=%s", c->device);
    if (c->n_ubatch && off < size)
        off += (size_t)snprintf(buf + off, size - off, " ubatch=%d", c->n_ubatch);
    for (int i = 0; i < c->n_engine_opts && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, " engine-opt=%s", c->engine_opts[i]);
}

/* The line a testcase's <system-out> starts with: where it ran, with the
 * cpu engine's kernel table that ran (r's engine), else the one asked for. */
static void case_context(const kvv_suite_case *c, const kvv_check_result *r, char *buf,
                         size_t size)
{
    char plug[1200];
    plugin_context(c, plug, sizeof plug);
    const char *isa = r->has_engine && r->engine.isa[0] ? r->engine.isa : c->isa;
    snprintf(buf, size, "model=%s engine=%s mode=%s cache=%s threads=%d%s%s%s%s%s", c->model,
             c->engine, kvv_mode_name(kvv_suite_case_engine(c).mode), c->cache, c->threads,
             isa[0] ? " isa=" : "", isa, plug, c->vector[0] ? " vector=" : "", c->vector);
}

kvv_status kvv_suite_write_junit(const kvv_suite_results *res, const char *path, kvv_error *err)
{
    kvv_junit_totals t = {0};
    for (int i = 0; i < res->n_out; i++)
        kvv_junit_count(&t, &res->out[i].r);
    t.seconds = res->seconds;
    char name[1100];
    snprintf(name, sizeof name, "kvverify suite %s shard %d/%d", res->suite->path, res->shard_i,
             res->shard_n);
    kvv_sbuf b = {0};
    kvv_junit_begin(&b, name, NULL, &t);
    for (int i = 0; i < res->n_out; i++) {
        const kvv_suite_case *c = &res->suite->cases[res->out[i].case_index];
        char classname[96], context[5200];
        snprintf(classname, sizeof classname, "kvverify.suite.%s", c->name);
        case_context(c, &res->out[i].r, context, sizeof context);
        if (res->out[i].workload.set) { /* the case's sizes, on the line after */
            char wl[512];
            size_t n = strlen(context);
            snprintf(context + n, sizeof context - n, "\nworkload %s",
                     kvv_workload_format(&res->out[i].workload, wl, sizeof wl));
        }
        kvv_junit_testcase(&b, classname, &res->out[i].r, context);
    }
    kvv_junit_end(&b);
    return kvv_sbuf_write_file(&b, path, err);
}

json_t *kvv_suite_results_to_json(const kvv_suite_results *res)
{
    json_t *cases = json_array();
    int n[4] = {0, 0, 0, 0}, nf[3] = {0, 0, 0};
    for (int i = 0; i < res->n_out; i++) {
        const kvv_check_result *r = &res->out[i].r;
        const kvv_suite_case *c = &res->suite->cases[res->out[i].case_index];
        n[r->verdict]++;
        nf[0] += strcmp(r->fault, "crash") == 0;
        nf[1] += strcmp(r->fault, "timeout") == 0;
        nf[2] += strcmp(r->fault, "contract") == 0;
        if (res->out[i].prior) { /* resumed: as the earlier report wrote it */
            json_array_append(cases, res->out[i].prior);
            continue;
        }
        json_t *j = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:i, s:s, s:o}", "case", c->name,
                              "case_index", res->out[i].case_index, "model", c->model, "engine",
                              c->engine, "mode", kvv_mode_name(kvv_suite_case_engine(c).mode),
                              "cache_type", c->cache, "threads", c->threads, "vector", c->vector,
                              "result", kvv_check_to_json(r));
        if (j) { /* what only plugin engines take */
            json_t *eo = json_array();
            for (int k = 0; k < c->n_engine_opts; k++)
                json_array_append_new(eo, json_string(c->engine_opts[k]));
            json_object_set_new(j, "device", json_string(c->device));
            json_object_set_new(j, "ubatch", json_integer(c->n_ubatch));
            json_object_set_new(j, "engine_opts", eo);
            json_object_set_new(j, "isa", json_string(c->isa)); /* "" = the engine's choice */
            if (res->out[i].workload.set) /* what the case's checks ran */
                json_object_set_new(j, "workload", kvv_workload_to_json(&res->out[i].workload));
        }
        json_array_append_new(cases, j);
    }
    char shard[32];
    snprintf(shard, sizeof shard, "%d/%d", res->shard_i, res->shard_n);
    json_t *doc = json_pack("{s:s, s:s, s:s, s:i, s:f, s:o, s:{s:i, s:i, s:i, s:i}, s:i}", "manifest",
                     res->suite->path, "started", res->started, "shard", shard, "cases_run",
                     res->n_cases_run, "seconds",
                     res->seconds, "results", cases, "summary", "pass", n[KVV_VERDICT_PASS],
                     "fail", n[KVV_VERDICT_FAIL], "error", n[KVV_VERDICT_ERROR], "skipped",
                     n[KVV_VERDICT_SKIPPED], "exit_code", kvv_suite_exit_code(res));
    json_t *sum = doc ? json_object_get(doc, "summary") : NULL;
    if (sum) { /* engine faults, counted apart from wrong bits (docs/isolation.md) */
        json_object_set_new(sum, "crash", json_integer(nf[0]));
        json_object_set_new(sum, "timeout", json_integer(nf[1]));
        json_object_set_new(sum, "contract", json_integer(nf[2]));
        json_object_set_new(doc, "resumed_cases", json_integer(res->n_resumed));
        json_object_set_new(doc, "interrupted", json_boolean(res->interrupted));
    }
    return doc;
}

kvv_status kvv_suite_write_json(const kvv_suite_results *res, const char *path, kvv_error *err)
{
    json_t *j = kvv_suite_results_to_json(res);
    kvv_status st = kvv_json_write_file(j, JSON_INDENT(2) | JSON_SORT_KEYS, path, err);
    json_decref(j);
    return st;
}
