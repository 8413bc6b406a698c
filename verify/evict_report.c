/*
 * evict_report.c — the figures of `kvverify evict` over the prompts (mean,
 * sd, min, max), the console tables, the CSV and the JSON details
 * (verify/evict.h; layout in docs/report-schema.md).
 */
#include "verify/evict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify/report/sbuf.h"

/* ------------------------------------------------------------ aggregates */

static kvv_evict_spread spread_of(const double *v, int n)
{
    kvv_evict_spread s = {0, 0, 0, 0};
    if (n < 1)
        return s;
    s.min = s.max = v[0];
    for (int i = 0; i < n; i++) {
        s.mean += v[i] / n;
        if (v[i] < s.min)
            s.min = v[i];
        if (v[i] > s.max)
            s.max = v[i];
    }
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (v[i] - s.mean) * (v[i] - s.mean);
    s.sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
    return s;
}

/* One aggregate over rows[0..n) (one policy and budget, every prompt). */
static void aggregate_block(const kvv_evict_row *rows, int n, double *buf, kvv_evict_agg *a)
{
    memset(a, 0, sizeof *a);
    a->kind = rows[0].kind;
    a->byte_budget_of = rows[0].byte_budget_of;
    for (int i = 0; i < n; i++)
        if (rows[i].engine >= 0 && !rows[i].fits) { /* ran, over the byte budget */
            a->n_over++;
            if (rows[i].bytes_peak > a->over_peak)
                a->over_peak = rows[i].bytes_peak;
        }
    if (a->n_over)
        return; /* marked, not ranked: no figures at equal bytes */
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!rows[i].fits || rows[i].engine < 0)
            continue;
        if (k == 0 || rows[i].budget < a->budget_min)
            a->budget_min = rows[i].budget;
        if (k == 0 || rows[i].budget > a->budget_max)
            a->budget_max = rows[i].budget;
        a->n_bit_equal += rows[i].bit_equal;
        k++;
    }
    a->n_prompts = k;
#define SPREAD(field, expr)                                                                        \
    do {                                                                                           \
        int m = 0;                                                                                 \
        for (int i = 0; i < n; i++)                                                                \
            if (rows[i].fits && rows[i].engine >= 0)                                               \
                buf[m++] = (double)(rows[i].expr);                                                 \
        a->field = spread_of(buf, m);                                                              \
    } while (0)
    SPREAD(match, greedy_match);
    SPREAD(prefix, prefix_match);
    SPREAD(tf_top1, tf_top1);
    SPREAD(kl_mean, kl_mean);
    SPREAD(kl_max, kl_max);
    SPREAD(bytes_peak, bytes_peak);
#undef SPREAD
}

kvv_status kvv_evict_aggregate(kvv_evict_result *res, kvv_error *err)
{
    int P = res->n_prompts;
    free(res->aggs);
    free(res->eq_aggs);
    res->n_aggs = P ? res->n_rows / P : 0;
    res->n_eq_aggs = P ? res->n_eq_rows / P : 0;
    res->aggs = calloc((size_t)res->n_aggs + 1, sizeof *res->aggs);
    res->eq_aggs = calloc((size_t)res->n_eq_aggs + 1, sizeof *res->eq_aggs);
    double *buf = calloc((size_t)P + 1, sizeof *buf);
    if (!res->aggs || !res->eq_aggs || !buf) {
        free(buf);
        return kvv_error_set(err, KVV_ERR_NOMEM, "evict: out of memory");
    }
    for (int i = 0; i < res->n_aggs; i++)
        aggregate_block(res->rows + (size_t)i * (size_t)P, P, buf, &res->aggs[i]);
    for (int i = 0; i < res->n_eq_aggs; i++)
        aggregate_block(res->eq_rows + (size_t)i * (size_t)P, P, buf, &res->eq_aggs[i]);
    free(buf);
    return KVV_OK;
}

/* ------------------------------------------------------------ console */

static void print_aggs(FILE *f, const kvv_evict_result *res, const kvv_evict_agg *aggs, int n,
                       bool eq)
{
    fprintf(f, "  %-17s %6s %9s  %-20s %-16s %7s  %-30s %11s %7s\n", "policy", "budget",
            eq ? "of budget" : "budget B", "match", "prefix", "tf-top1", "KL mean", "bytes peak",
            "bit-eq");
    for (int i = 0; i < n; i++) {
        const kvv_evict_agg *a = &aggs[i];
        char b[24], c[24];
        if (a->budget_min == a->budget_max)
            snprintf(b, sizeof b, "%d", a->budget_min);
        else
            snprintf(b, sizeof b, "%d-%d", a->budget_min, a->budget_max);
        if (eq)
            snprintf(c, sizeof c, "%d", a->byte_budget_of);
        else
            snprintf(c, sizeof c, "%llu",
                     (unsigned long long)((uint64_t)a->budget_min * res->kv_bytes_per_token));
        if (a->n_over) {
            fprintf(f, "  %-17s %6s %9s  (over the byte budget: holds up to %llu B against "
                       "%llu B on %d of %d prompts; not ranked)\n",
                    kvv_policy_name(a->kind), "-", c, (unsigned long long)a->over_peak,
                    (unsigned long long)((uint64_t)a->byte_budget_of * res->kv_bytes_per_token),
                    a->n_over, res->n_prompts);
            continue;
        }
        if (a->n_prompts == 0) {
            fprintf(f, "  %-17s %6s %9s  %s\n", kvv_policy_name(a->kind), "-", c,
                    res->unsupported[a->kind][0] ? "(unsupported by this engine)"
                                                 : "(checkpoints alone exceed the byte budget)");
            continue;
        }
        char m[40], p[40], k[48];
        snprintf(m, sizeof m, "%5.1f%% [%5.1f, %5.1f]", 100 * a->match.mean, 100 * a->match.min,
                 100 * a->match.max);
        snprintf(p, sizeof p, "%5.1f [%d, %d]", a->prefix.mean, (int)a->prefix.min,
                 (int)a->prefix.max);
        snprintf(k, sizeof k, "%9.3g [%.3g, %.3g]", a->kl_mean.mean, a->kl_mean.min,
                 a->kl_mean.max);
        fprintf(f, "  %-17s %6s %9s  %-20s %-16s %6.1f%%  %-30s %11.0f %3d/%d\n",
                kvv_policy_name(a->kind), b, c, m, p, 100 * a->tf_top1.mean, k,
                a->bytes_peak.mean, a->n_bit_equal, a->n_prompts);
    }
}

static const char *ckpt_name(kvv_ckpt_type t)
{
    return t == KVV_CKPT_F32 ? "f32" : t == KVV_CKPT_F16 ? "f16" : "bf16";
}

/* The verified runs grouped by (policy, budget, checkpoint type). */
static void print_verify(FILE *f, const kvv_evict_result *res)
{
    if (!res->n_verify)
        return;
    fprintf(f, "\nKV-Direct against the full cache, bit for bit, on the engine under test "
               "(%s, %s), %d prompt%s:\n",
            res->test_engine.name, res->test_engine.mode, res->verify_prompts,
            res->verify_prompts == 1 ? "" : "s");
    fprintf(f, "  %-15s %6s %5s %9s %16s\n", "policy", "budget", "ckpt", "bit-equal",
            "rows recomputed");
    for (int i = 0; i < res->n_verify; i++) {
        const kvv_evict_verify *v = &res->verify[i];
        if (v->unsupported) { /* listed above, with the reason */
            fprintf(f, "  %-15s %6d %5s  unsupported by this engine\n",
                    kvv_policy_name(v->row.kind), v->row.budget, ckpt_name(v->ckpt));
            continue;
        }
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = res->verify[j].row.kind == v->row.kind &&
                   res->verify[j].row.budget == v->row.budget && res->verify[j].ckpt == v->ckpt;
        if (seen)
            continue;
        int n = 0, eq = 0;
        long long rows = 0;
        for (int j = i; j < res->n_verify; j++) {
            const kvv_evict_verify *w = &res->verify[j];
            if (w->row.kind != v->row.kind || w->row.budget != v->row.budget || w->ckpt != v->ckpt)
                continue;
            n++;
            eq += !w->differs;
            rows += w->row.recomputed_rows;
        }
        fprintf(f, "  %-15s %6d %5s %5d/%-3d %16lld%s\n", kvv_policy_name(v->row.kind),
                v->row.budget, ckpt_name(v->ckpt), eq, n, rows,
                rows ? "" : "  (evicted nothing: not counted)");
    }
}

void kvv_evict_print(FILE *f, const kvv_evict_result *res)
{
    int nc_min = res->n_ctx[0], nc_max = res->n_ctx[0];
    for (int p = 1; p < res->n_prompts; p++) {
        nc_min = res->n_ctx[p] < nc_min ? res->n_ctx[p] : nc_min;
        nc_max = res->n_ctx[p] > nc_max ? res->n_ctx[p] : nc_max;
    }
    fprintf(f, "baselines on %s (%s), 1 thread a run, %d runs at a time, every prompt; "
               "KV-Direct on the engine\nunder test, %s (%s), the first %d prompt%s; one "
               "full-cache run per prompt and engine%s%s\n",
            res->figures_engine.name, res->figures_engine.mode, res->n_threads,
            res->test_engine.name, res->test_engine.mode, res->verify_prompts,
            res->verify_prompts == 1 ? "" : "s", res->figures_note[0] ? "\n  " : "",
            res->figures_note);
    if (nc_min == nc_max)
        fprintf(f, "context %d positions per prompt (%d generated); full cache %llu bytes "
                   "(%llu per token)\n",
                nc_min, res->n_gen, (unsigned long long)((uint64_t)nc_min *
                                                         res->kv_bytes_per_token),
                (unsigned long long)res->kv_bytes_per_token);
    else
        fprintf(f, "context %d to %d positions (%d generated); %llu bytes of full cache per "
                   "token\n",
                nc_min, nc_max, res->n_gen, (unsigned long long)res->kv_bytes_per_token);
    for (int k = 0; k < KVV_POLICY_COUNT; k++)
        if (res->unsupported[k][0])
            fprintf(f, "%s: unsupported by this engine (not run): %s\n",
                    kvv_policy_name((kvv_policy_kind)k), res->unsupported[k]);
    fprintf(f, "\nBy live-token budget: mean [min, max] over the prompts run (match = greedy "
               "token match, prefix = steps\nto the first divergence, tf-top1 = teacher-forced "
               "argmax agreement, KL = KL(p_full || p_policy)\nper step, mean over the steps; "
               "bit-eq = prompts bit-equal to the full cache / prompts run):\n");
    print_aggs(f, res, res->aggs, res->n_aggs, false);
    if (res->n_eq_aggs) {
        fprintf(f, "\nAt equal total bytes (budget B tokens of K/V; KV-Direct's checkpoints "
                   "charged: %llu B/token per-layer, %llu B/token single-vector):\n",
                (unsigned long long)res->ckpt_layer_per_token,
                (unsigned long long)res->ckpt_token_per_token);
        print_aggs(f, res, res->eq_aggs, res->n_eq_aggs, true);
    }
    print_verify(f, res);
}

/* ------------------------------------------------------------ CSV */

/* The engine a row ran on, by name ("" when it did not run). */
static const char *engine_name(const kvv_evict_result *res, const kvv_evict_row *w)
{
    return w->engine == 0 ? res->figures_engine.name : w->engine == 1 ? res->test_engine.name : "";
}

kvv_status kvv_evict_write_csv(const kvv_evict_result *res, const kvv_prompt_set *prompts,
                               const char *path, kvv_error *err)
{
    kvv_sbuf b = {0};
    kvv_sbuf_str(&b, "table,policy,budget,budget_bytes,prompt,prompt_name,engine,"
                     "bytes_of_budget,fits,greedy_match,prefix_match,teacher_top1,kl_mean,"
                     "kl_max,bit_equal,bytes_peak,recompute_flops\n");
    for (int t = 0; t < 2; t++) {
        const kvv_evict_row *rows = t ? res->eq_rows : res->rows;
        int n = t ? res->n_eq_rows : res->n_rows;
        for (int i = 0; i < n; i++) {
            const kvv_evict_row *w = &rows[i];
            if (w->engine < 0 && w->fits)
                continue; /* not run */
            kvv_sbuf_fmt(&b, "%s,%s,%d,%llu,%d,%s,%s,%d,%d,%.6f,%d,%.6f,%.9g,%.9g,%d,%llu,%.6g\n",
                         t ? "equal_bytes" : "by_budget", kvv_policy_name(w->kind), w->budget,
                         (unsigned long long)((uint64_t)w->budget * res->kv_bytes_per_token),
                         w->prompt, prompts->items[w->prompt].name, engine_name(res, w),
                         w->byte_budget_of, w->fits, w->greedy_match, w->prefix_match,
                         w->tf_top1, w->kl_mean, w->kl_max, w->bit_equal,
                         (unsigned long long)w->bytes_peak, w->recompute_flops);
        }
    }
    return kvv_sbuf_write_file(&b, path, err);
}

/* ------------------------------------------------------------ JSON */

static json_t *row_json(const kvv_evict_result *res, const kvv_evict_row *w, bool eq)
{
    json_t *j = json_object();
    json_object_set_new(j, "policy", json_string(kvv_policy_name(w->kind)));
    json_object_set_new(j, "prompt", json_integer(w->prompt));
    json_object_set_new(j, "engine", w->engine < 0    ? json_null()
                                     : w->engine == 1 ? json_string("under_test")
                                                      : json_string("figures"));
    json_object_set_new(j, "budget", json_integer(w->budget));
    json_object_set_new(j, "budget_bytes",
                        json_integer((json_int_t)((uint64_t)w->budget * res->kv_bytes_per_token)));
    if (eq) {
        json_object_set_new(j, "bytes_of_budget", json_integer(w->byte_budget_of));
        json_object_set_new(j, "byte_budget", json_integer((json_int_t)(
                                                  (uint64_t)w->byte_budget_of *
                                                  res->kv_bytes_per_token)));
    }
    json_object_set_new(j, "fits", json_boolean(w->fits));
    json_object_set_new(j, "greedy_match", kvv_json_number(w->greedy_match));
    json_object_set_new(j, "prefix_match", json_integer(w->prefix_match));
    json_object_set_new(j, "teacher_top1", kvv_json_number(w->tf_top1));
    json_object_set_new(j, "kl_mean", kvv_json_number(w->kl_mean));
    json_object_set_new(j, "kl_max", kvv_json_number(w->kl_max));
    json_object_set_new(j, "bit_equal", json_boolean(w->bit_equal));
    json_object_set_new(j, "bytes_peak", json_integer((json_int_t)w->bytes_peak));
    json_object_set_new(j, "bytes_final", json_integer((json_int_t)w->bytes_final));
    json_object_set_new(j, "recompute_flops", kvv_json_number(w->recompute_flops));
    json_object_set_new(j, "recomputed_rows", json_integer((json_int_t)w->recomputed_rows));
    json_object_set_new(j, "seconds", kvv_json_number(w->seconds));
    return j;
}

static json_t *spread_json(const kvv_evict_spread *s)
{
    return json_pack("{s:o, s:o, s:o, s:o}", "mean", kvv_json_number(s->mean), "sd",
                     kvv_json_number(s->sd), "min", kvv_json_number(s->min), "max",
                     kvv_json_number(s->max));
}

static json_t *agg_json(const kvv_evict_result *res, const kvv_evict_agg *a, bool eq)
{
    json_t *j = json_object();
    json_object_set_new(j, "policy", json_string(kvv_policy_name(a->kind)));
    json_object_set_new(j, "budget", json_integer(a->budget_min));
    if (a->budget_max != a->budget_min)
        json_object_set_new(j, "budget_max", json_integer(a->budget_max));
    json_object_set_new(j, "budget_bytes", json_integer((json_int_t)(
                                               (uint64_t)a->budget_min *
                                               res->kv_bytes_per_token)));
    if (eq) {
        json_object_set_new(j, "bytes_of_budget", json_integer(a->byte_budget_of));
        json_object_set_new(j, "byte_budget", json_integer((json_int_t)(
                                                  (uint64_t)a->byte_budget_of *
                                                  res->kv_bytes_per_token)));
    }
    json_object_set_new(j, "n_prompts", json_integer(a->n_prompts));
    json_object_set_new(j, "n_bit_equal", json_integer(a->n_bit_equal));
    if (eq) {
        json_object_set_new(j, "n_over_budget", json_integer(a->n_over));
        json_object_set_new(j, "over_budget_peak", json_integer((json_int_t)a->over_peak));
    }
    json_object_set_new(j, "greedy_match", spread_json(&a->match));
    json_object_set_new(j, "prefix_match", spread_json(&a->prefix));
    json_object_set_new(j, "teacher_top1", spread_json(&a->tf_top1));
    json_object_set_new(j, "kl_mean", spread_json(&a->kl_mean));
    json_object_set_new(j, "kl_max", spread_json(&a->kl_max));
    json_object_set_new(j, "bytes_peak", spread_json(&a->bytes_peak));
    return j;
}

static json_t *verify_json(const kvv_evict_result *res, const kvv_evict_verify *v)
{
    json_t *j = json_object();
    json_object_set_new(j, "policy", json_string(kvv_policy_name(v->row.kind)));
    json_object_set_new(j, "prompt", json_integer(v->row.prompt));
    json_object_set_new(j, "budget", json_integer(v->row.budget));
    json_object_set_new(j, "budget_bytes",
                        json_integer((json_int_t)((uint64_t)v->row.budget *
                                                  res->kv_bytes_per_token)));
    json_object_set_new(j, "checkpoints", json_string(ckpt_name(v->ckpt)));
    json_object_set_new(j, "bit_equal", json_boolean(!v->differs));
    json_object_set_new(j, "unsupported", json_boolean(v->unsupported));
    json_object_set_new(j, "recomputed_rows", json_integer((json_int_t)v->row.recomputed_rows));
    json_object_set_new(j, "greedy_match", kvv_json_number(v->row.greedy_match));
    json_object_set_new(j, "prefix_match", json_integer(v->row.prefix_match));
    json_object_set_new(j, "first_difference",
                        v->differs ? kvv_mismatch_to_json(&v->first) : json_null());
    json_object_set_new(j, "seconds", kvv_json_number(v->row.seconds));
    return j;
}

void kvv_evict_details_json(const kvv_evict_result *res, const kvv_prompt_set *prompts,
                            json_t *d)
{
    json_t *ps = json_array(), *bs = json_array();
    for (int p = 0; p < res->n_prompts; p++)
        json_array_append_new(ps, json_pack("{s:i, s:s, s:i, s:i, s:I}", "index", p, "name",
                                            prompts->items[p].name, "n_tokens",
                                            prompts->items[p].n_tokens, "n_ctx", res->n_ctx[p],
                                            "full_bytes", (json_int_t)res->full_bytes[p]));
    for (int b = 0; b < res->n_budgets; b++)
        json_array_append_new(bs, json_pack("{s:i, s:I}", "tokens", res->budgets[b], "bytes",
                                            (json_int_t)((uint64_t)res->budgets[b] *
                                                         res->kv_bytes_per_token)));
    json_object_set_new(d, "n_gen", json_integer(res->n_gen));
    json_object_set_new(d, "n_prompts", json_integer(res->n_prompts));
    json_object_set_new(d, "prompt_set", json_string(prompts->source));
    json_object_set_new(d, "prompts", ps);
    json_object_set_new(d, "budgets", bs);
    json_object_set_new(d, "kv_bytes_per_token", json_integer((json_int_t)res->kv_bytes_per_token));
    json_object_set_new(d, "ckpt_layer_bytes_per_token",
                        json_integer((json_int_t)res->ckpt_layer_per_token));
    json_object_set_new(d, "ckpt_token_bytes_per_token",
                        json_integer((json_int_t)res->ckpt_token_per_token));
    json_object_set_new(d, "figures_engine", kvv_engine_desc_to_json(&res->figures_engine));
    json_object_set_new(d, "figures_engine_is_engine_under_test",
                        json_boolean(res->figures_is_test));
    if (res->figures_note[0])
        json_object_set_new(d, "figures_note", json_string(res->figures_note));
    json_object_set_new(d, "threads", json_integer(res->n_threads));
    json_t *t1 = json_array(), *t2 = json_array(), *a1 = json_array(), *a2 = json_array();
    /* Rows that ran (and equal-bytes rows that cannot fit, marked so). */
    for (int i = 0; i < res->n_rows; i++)
        if (res->rows[i].engine >= 0)
            json_array_append_new(t1, row_json(res, &res->rows[i], false));
    for (int i = 0; i < res->n_eq_rows; i++)
        if (res->eq_rows[i].engine >= 0 || !res->eq_rows[i].fits)
            json_array_append_new(t2, row_json(res, &res->eq_rows[i], true));
    for (int i = 0; i < res->n_aggs; i++)
        json_array_append_new(a1, agg_json(res, &res->aggs[i], false));
    for (int i = 0; i < res->n_eq_aggs; i++)
        json_array_append_new(a2, agg_json(res, &res->eq_aggs[i], true));
    json_object_set_new(d, "by_budget", t1);
    json_object_set_new(d, "equal_bytes", t2);
    json_object_set_new(d, "by_budget_summary", a1);
    json_object_set_new(d, "equal_bytes_summary", a2);
    json_t *v = json_array();
    for (int i = 0; i < res->n_verify; i++)
        json_array_append_new(v, verify_json(res, &res->verify[i]));
    json_t *kv = json_object();
    json_object_set_new(kv, "engine", kvv_engine_desc_to_json(&res->test_engine));
    json_object_set_new(kv, "prompts", json_integer(res->verify_prompts));
    json_object_set_new(kv, "runs", v);
    json_object_set_new(kv, "control",
                        res->has_control ? verify_json(res, &res->control) : json_null());
    json_object_set_new(d, "kvdirect_verified", kv);
}
