/* json.c — the machine-readable report (docs/report-schema.md), and the one
 * way a JSON document becomes a file (kvv_json_write_file). */
#include "verify/report/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

json_t *kvv_engine_desc_to_json(const kvv_engine_desc *d)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:I, s:s}", "name", d->name, "mode", d->mode,
                          "cache_type", d->cache_type, "n_threads", d->n_threads, "control",
                          (json_int_t)d->control, "kernels", d->kernels);
    if (!o)
        return NULL;
    /* what a plugin reports ("" / 0 for the built-in engines) */
    json_object_set_new(o, "version", json_string(d->version));
    json_object_set_new(o, "device", json_string(d->device));
    json_object_set_new(o, "variant", json_string(d->variant));
    json_object_set_new(o, "flash_attn", json_string(d->flash_attn));
    json_object_set_new(o, "n_ubatch", json_integer(d->n_ubatch));
    /* sequences (issue 33): served at once, and whether their cache is one pool */
    json_object_set_new(o, "n_seq_max", json_integer(d->n_seq_max));
    json_object_set_new(o, "kv_unified", json_integer(d->kv_unified));
    /* the cpu engine's kernel table ("" for an engine without tables) */
    json_object_set_new(o, "isa", json_string(d->isa));
    return o;
}

json_t *kvv_cmp_stats_to_json(const kvv_cmp_stats *s)
{
    json_t *o = json_pack("{s:I, s:I, s:I, s:o, s:o, s:I}", "compared", (json_int_t)s->n,
                          "differing", (json_int_t)s->n_diff, "nan_pairs", (json_int_t)s->n_nan,
                          "max_ulp", kvv_json_ulp(s->max_ulp),
                          "nmse", kvv_json_number(kvv_cmp_nmse(s)), "first_index", (json_int_t)s->first);
    if (!o)
        return NULL;
    json_object_set_new(o, "max_abs", kvv_json_number(kvv_cmp_max_abs(s)));
    json_object_set_new(o, "inf_pairs", json_integer((json_int_t)s->n_inf));
    if (s->first >= 0) {
        json_object_set_new(o, "first_expected", kvv_json_float(s->first_ref));
        json_object_set_new(o, "first_actual", kvv_json_float(s->first_test));
    }
    return o;
}

json_t *kvv_mismatch_to_json(const kvv_mismatch *m)
{
    char text[256];
    kvv_mismatch_format(m, text, sizeof text);
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:o, s:o, s:s}", "tensor", m->tensor,
                     "variant", m->variant, "layer", m->layer, "token", m->token, "head",
                     m->head, "index", m->index, "expected", kvv_json_float(m->expected),
                     "actual", kvv_json_float(m->actual), "text", text);
}

json_t *kvv_check_to_json(const kvv_check_result *r)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o}", "name", r->name, "verdict",
                          kvv_verdict_name(r->verdict), "key_figure", kvv_check_key_figure(r),
                          "message", kvv_check_message(r), "seconds", kvv_json_number(r->seconds));
    if (!o)
        return NULL;
    json_object_set_new(o, "unsupported", json_boolean(r->unsupported));
    if (r->interrupted) /* stopped by a signal (verdict error); absent otherwise */
        json_object_set_new(o, "interrupted", json_true());
    /* a pass without its controls: unproven, never "passed" */
    json_object_set_new(o, "unproven", json_boolean(r->unproven));
    /* how the engine broke ("crash", "timeout", "contract"), null when it did not */
    json_object_set_new(o, "fault", r->fault[0] ? json_string(r->fault) : json_null());
    json_object_set_new(o, "engine", r->has_engine ? kvv_engine_desc_to_json(&r->engine)
                                                   : json_null());
    json_object_set_new(o, "first_mismatch",
                        r->has_mismatch ? kvv_mismatch_to_json(&r->mismatch) : json_null());
    json_t *ctl = json_array();
    for (int i = 0; i < r->n_controls; i++)
        json_array_append_new(ctl, json_pack("{s:s, s:b, s:s}", "name", r->controls[i].name,
                                             "detected", r->controls[i].detected, "detail",
                                             r->controls[i].detail));
    json_object_set_new(o, "controls", ctl);
    json_t *rows = json_array();
    kvv_cmp_stats all;
    kvv_cmp_init(&all);
    for (int i = 0; i < r->n_rows; i++) {
        kvv_cmp_merge(&all, &r->rows[i].st);
        json_t *row = kvv_cmp_stats_to_json(&r->rows[i].st);
        if (!row)
            continue;
        json_object_set_new(row, "layer", json_integer(r->rows[i].layer));
        json_object_set_new(row, "what", json_string(r->rows[i].what));
        json_object_set_new(row, "first_where", json_string(r->rows[i].where));
        json_array_append_new(rows, row);
    }
    json_object_set_new(o, "layers", rows);
    /* every row folded into one: what a trend over nights plots */
    json_object_set_new(o, "totals",
                        json_pack("{s:I, s:I, s:o}", "compared", (json_int_t)all.n, "differing",
                                  (json_int_t)all.n_diff, "max_ulp", kvv_json_ulp(all.max_ulp)));
    json_object_set_new(o, "details", r->details ? json_incref(r->details) : json_object());
    return o;
}

static json_t *int_array(const int *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

json_t *kvv_workload_to_json(const kvv_workload *w)
{
    json_t *j = json_pack("{s:i, s:i, s:i, s:o, s:o, s:s, s:{s:i, s:i}, s:b, s:b}", "n_prompt",
                          w->n_prompt, "n_gen", w->n_gen, "kv_chunk", w->kv_chunk, "chunks",
                          int_array(w->chunks, w->n_chunks), "threads",
                          int_array(w->threads, w->n_threads), "kernel_switches", w->switches,
                          "floor", "n_prompt", w->floor_prompt, "n_gen", w->floor_gen, "quick",
                          w->quick, "below_floor", w->below_floor);
    if (j && w->n_batches) { /* latency's own sizes */
        json_object_set_new(j, "batches", int_array(w->batches, w->n_batches));
        json_object_set_new(j, "repeats", json_integer(w->repeats));
    }
    if (j && w->requests[0]) /* batch's requests */
        json_object_set_new(j, "requests", json_string(w->requests));
    return j;
}

/* Up to max integers of JSON array a into out. @return how many. */
static int int_array_read(const json_t *a, int *out, int max)
{
    int n = 0;
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
        if (json_is_integer(v) && n < max)
            out[n++] = (int)json_integer_value(v);
    return n;
}

void kvv_workload_from_json(const json_t *j, kvv_workload *w)
{
    memset(w, 0, sizeof *w);
    if (!json_is_object(j))
        return;
    w->set = true;
    w->n_prompt = (int)json_integer_value(json_object_get(j, "n_prompt"));
    w->n_gen = (int)json_integer_value(json_object_get(j, "n_gen"));
    w->kv_chunk = (int)json_integer_value(json_object_get(j, "kv_chunk"));
    w->n_chunks = int_array_read(json_object_get(j, "chunks"), w->chunks, KVV_WORKLOAD_MAX);
    w->n_threads = int_array_read(json_object_get(j, "threads"), w->threads, KVV_WORKLOAD_MAX);
    const char *sw = json_string_value(json_object_get(j, "kernel_switches"));
    snprintf(w->switches, sizeof w->switches, "%s", sw ? sw : "unknown");
    const json_t *fl = json_object_get(j, "floor");
    w->floor_prompt = (int)json_integer_value(json_object_get(fl, "n_prompt"));
    w->floor_gen = (int)json_integer_value(json_object_get(fl, "n_gen"));
    w->quick = json_is_true(json_object_get(j, "quick"));
    w->below_floor = json_is_true(json_object_get(j, "below_floor"));
    w->n_batches = int_array_read(json_object_get(j, "batches"), w->batches, KVV_WORKLOAD_MAX);
    w->repeats = (int)json_integer_value(json_object_get(j, "repeats"));
    const char *rq = json_string_value(json_object_get(j, "requests"));
    snprintf(w->requests, sizeof w->requests, "%s", rq ? rq : "");
}

json_t *kvv_report_to_json(const kvv_report *rep)
{
    json_t *o = json_pack("{s:s, s:i, s:s, s:s, s:s, s:I, s:s, s:o, s:i}", "kvverify_version",
                          rep->version, "schema_version", KVV_REPORT_SCHEMA, "started",
                          rep->started, "verdict", "", "prompt_source", rep->prompt_source,
                          "seed", (json_int_t)rep->seed, "seed_hex", "", "seconds",
                          kvv_json_number(rep->seconds), "exit_code", kvv_report_exit_code(rep));
    if (!o)
        return NULL;
    char seed_hex[24];
    snprintf(seed_hex, sizeof seed_hex, "0x%016llx", (unsigned long long)rep->seed);
    json_object_set_new(o, "seed_hex", json_string(seed_hex));
    /* seed as a JSON integer is exact only below 2^63; seed_hex always is */
    if (rep->seed > (uint64_t)INT64_MAX)
        json_object_set_new(o, "seed", json_null());
    json_object_set_new(o, "verdict", json_string(kvv_report_verdict_name(rep)));
    /* --no-controls: no check is proven able to fail (docs/checks.md) */
    json_object_set_new(o, "controls", json_string(rep->controls_off ? "off" : "on"));
    json_object_set_new(o, "interrupted", json_boolean(rep->interrupted));
    json_object_set_new(o, "n_prompt", json_integer(rep->n_prompt));
    if (rep->vs[0]) /* compare: the engine under test is "engine", A is this */
        json_object_set_new(o, "compared_against", json_string(rep->vs));
    if (rep->workload.set)
        json_object_set_new(o, "workload", kvv_workload_to_json(&rep->workload));
    json_object_set_new(o, "model",
                        json_pack("{s:s, s:s, s:s}", "path", rep->model_path, "sha256",
                                  rep->model_sha256, "architecture", rep->architecture));
    json_object_set_new(o, "engine", rep->has_engine ? kvv_engine_desc_to_json(&rep->engine)
                                                     : json_null());
    json_t *checks = json_array();
    for (int i = 0; i < rep->n_checks; i++)
        json_array_append_new(checks, kvv_check_to_json(&rep->checks[i]));
    json_object_set_new(o, "checks", checks);
    /* failures by cause: the engine crashed, hung or broke its contract
     * (docs/isolation.md), or it ran to the end with wrong bits */
    int crash, timeout, contract, wrong = 0;
    kvv_report_count_faults(rep, &crash, &timeout, &contract);
    for (int i = 0; i < rep->n_checks; i++)
        wrong += rep->checks[i].verdict == KVV_VERDICT_FAIL && !rep->checks[i].fault[0];
    json_object_set_new(o, "faults", json_pack("{s:i, s:i, s:i, s:i}", "crash", crash, "timeout",
                                               timeout, "contract", contract, "wrong_bits", wrong));
    return o;
}

kvv_status kvv_json_write_file(const json_t *j, size_t flags, const char *path, kvv_error *err)
{
    char *s = j ? json_dumps(j, flags) : NULL;
    if (!s)
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory building the JSON", path);
    kvv_sbuf b = {0};
    kvv_sbuf_str(&b, s);
    kvv_sbuf_put(&b, "\n", 1);
    free(s);
    return kvv_sbuf_write_file(&b, path, err);
}

kvv_status kvv_report_write_json(const kvv_report *rep, const char *path, kvv_error *err)
{
    json_t *o = kvv_report_to_json(rep);
    kvv_status st = kvv_json_write_file(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER, path, err);
    json_decref(o);
    return st;
}
