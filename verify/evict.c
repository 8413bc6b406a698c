/*
 * evict.c — `kvverify evict` (verify/evict.h): policies x budgets against
 * the full cache, plus the equal-total-bytes table.
 */
#include "verify/evict.h"

#include <stdlib.h>
#include <string.h>

#include "verify/policy_run.h"

void kvv_evict_result_free(kvv_evict_result *res)
{
    if (!res)
        return;
    free(res->rows);
    free(res->eq_rows);
    memset(res, 0, sizeof *res);
}

static uint64_t cache_elem(kvv_cache_type t)
{
    return t == KVV_CACHE_F32 ? 4 : 2;
}

void kvv_evict_score_row(kvv_evict_row *row, const kvv_policy_run_out *full,
                      const kvv_policy_run_out *greedy, const kvv_policy_run_out *tf)
{
    int n = full->n_gen, nv = full->n_vocab, match = 0, agree = 0;
    row->prefix_match = n;
    bool equal = true;
    double kl_sum = 0, kl_max = 0;
    for (int i = 0; i < n; i++) {
        if (greedy->tokens[i] == full->tokens[i])
            match++;
        else if (row->prefix_match == n)
            row->prefix_match = i;
        if (tf->argmax[i] == full->argmax[i])
            agree++;
        const float *a = full->logits + (size_t)i * (size_t)nv;
        const float *b = tf->logits + (size_t)i * (size_t)nv;
        double kl = kvv_kl_logits(a, b, nv);
        kl_sum += kl;
        if (kl > kl_max)
            kl_max = kl;
        for (int j = 0; j < nv && equal; j++)
            equal = kvv_f32_bit_equal(a[j], b[j]);
    }
    if (row->prefix_match != n)
        equal = false;
    row->greedy_match = (double)match / n;
    row->tf_top1 = (double)agree / n;
    row->kl_mean = kl_sum / n;
    row->kl_max = kl_max;
    row->bit_equal = equal;
    row->bytes_peak = greedy->stats.peak_bytes > tf->stats.peak_bytes ? greedy->stats.peak_bytes
                                                                        : tf->stats.peak_bytes;
    row->bytes_final = tf->stats.bytes_kv + tf->stats.bytes_ckpt;
    row->recompute_flops = tf->stats.flops_total;
    row->recomputed_rows = tf->stats.recomputed_total;
    row->seconds = greedy->seconds + tf->seconds;
}

static kvv_status run_pair(const kvv_evict_opts *o, const kvv_policy_run_out *full,
                           kvv_policy_kind kind, int budget, kvv_evict_row *row, kvv_error *err)
{
    const kvv_check_opts *c = &o->check;
    kvv_policy_cfg cfg = kvv_policy_cfg_default(kind, budget);
    kvv_policy_run_out g, t;
    memset(row, 0, sizeof *row);
    row->kind = kind;
    row->budget = budget;
    row->fits = true;
    kvv_status s = kvv_policy_run(c->model, &c->engine, &cfg, c->tokens, c->n_tokens, c->n_gen,
                                  NULL, &g, err);
    if (s != KVV_OK)
        return s;
    s = kvv_policy_run(c->model, &c->engine, &cfg, c->tokens, c->n_tokens, c->n_gen,
                       full->tokens, &t, err);
    if (s == KVV_OK)
        kvv_evict_score_row(row, full, &g, &t);
    kvv_policy_run_out_free(&g);
    kvv_policy_run_out_free(&t);
    return s;
}

static const kvv_policy_kind all_policies[] = {
    KVV_POLICY_WINDOW, KVV_POLICY_STREAMING, KVV_POLICY_STREAMING_REINDEX, KVV_POLICY_H2O,
    KVV_POLICY_TOVA,
    KVV_POLICY_SNAPKV, KVV_POLICY_PYRAMIDKV, KVV_POLICY_KNORM, KVV_POLICY_QUEST,
    KVV_POLICY_KVDIRECT_LAYER, KVV_POLICY_KVDIRECT_TOKEN,
};

/* Largest live budget whose K/V plus the checkpoints of the other
 * n_ctx - B' positions fit in `bytes`; 0 if none. */
static int kvdirect_budget_for(uint64_t bytes, uint64_t kv_tok, uint64_t ck_tok, int n_ctx)
{
    for (int b = n_ctx; b >= 1; b--)
        if ((uint64_t)b * kv_tok + (uint64_t)(n_ctx - b) * ck_tok <= bytes)
            return b;
    return 0;
}

static json_t *row_json(const kvv_evict_row *w)
{
    json_t *j = json_object();
    json_object_set_new(j, "policy", json_string(kvv_policy_name(w->kind)));
    json_object_set_new(j, "budget", json_integer(w->budget));
    if (w->byte_budget_of)
        json_object_set_new(j, "bytes_of_budget", json_integer(w->byte_budget_of));
    json_object_set_new(j, "fits", json_boolean(w->fits));
    json_object_set_new(j, "greedy_match", json_real(w->greedy_match));
    json_object_set_new(j, "prefix_match", json_integer(w->prefix_match));
    json_object_set_new(j, "teacher_top1", json_real(w->tf_top1));
    json_object_set_new(j, "kl_mean", json_real(w->kl_mean));
    json_object_set_new(j, "kl_max", json_real(w->kl_max));
    json_object_set_new(j, "bit_equal", json_boolean(w->bit_equal));
    json_object_set_new(j, "bytes_peak", json_integer((json_int_t)w->bytes_peak));
    json_object_set_new(j, "bytes_final", json_integer((json_int_t)w->bytes_final));
    json_object_set_new(j, "recompute_flops", json_real(w->recompute_flops));
    json_object_set_new(j, "recomputed_rows", json_integer((json_int_t)w->recomputed_rows));
    json_object_set_new(j, "seconds", json_real(w->seconds));
    return j;
}

kvv_status kvv_evict_run(const kvv_evict_opts *o, kvv_evict_result *res, kvv_check_result *r,
                         kvv_error *err)
{
    memset(res, 0, sizeof *res);
    const kvv_check_opts *c = &o->check;
    double t0 = kvv_now_seconds();
    int n_ctx = c->n_tokens + c->n_gen;
    kvv_status s = kvv_check_opts_validate(c, n_ctx, err);
    if (s != KVV_OK) {
        kvv_check_set_error(r, err);
        return s;
    }
    const kvv_hparams *hp = &c->model->hp;
    res->n_ctx = n_ctx;
    res->kv_bytes_per_token = (uint64_t)hp->n_layer * hp->n_head_kv *
                              (uint64_t)(hp->head_dim + hp->head_dim_v) *
                              cache_elem(c->engine.cache_type);
    res->ckpt_layer_per_token = (uint64_t)hp->n_layer * hp->n_embd * 4;
    res->ckpt_token_per_token = (uint64_t)hp->n_embd * 4;

    int def_budgets[4], nb = o->n_budgets;
    const int *budgets = o->budgets;
    if (!budgets) {
        const int pct[4] = {10, 25, 50, 75};
        for (int i = 0; i < 4; i++)
            def_budgets[i] = n_ctx * pct[i] / 100 > 0 ? n_ctx * pct[i] / 100 : 1;
        budgets = def_budgets;
        nb = 4;
    }
    const kvv_policy_kind *pols = o->policies ? o->policies : all_policies;
    int np = o->policies ? o->n_policies
                         : (int)(sizeof all_policies / sizeof all_policies[0]);

    /* The reference run: the full cache, greedy (its tokens feed every
     * teacher-forced run). */
    kvv_policy_run_out full;
    kvv_policy_cfg fcfg = kvv_policy_cfg_default(KVV_POLICY_FULL, n_ctx);
    s = kvv_policy_run(c->model, &c->engine, &fcfg, c->tokens, c->n_tokens, c->n_gen, NULL,
                       &full, err);
    if (s != KVV_OK) {
        kvv_check_set_error(r, err);
        return s;
    }
    res->full_bytes = full.stats.bytes_kv;

    int n_eq_base = 0;
    for (int pi = 0; pi < np; pi++)
        n_eq_base += !kvv_policy_is_kvdirect(pols[pi]);
    res->rows = calloc((size_t)np * (size_t)nb, sizeof *res->rows);
    res->eq_rows = calloc((size_t)(n_eq_base + 2) * (size_t)nb, sizeof *res->eq_rows);
    if (!res->rows || !res->eq_rows) {
        kvv_policy_run_out_free(&full);
        kvv_evict_result_free(res);
        s = kvv_error_set(err, KVV_ERR_NOMEM, "evict: out of memory");
        kvv_check_set_error(r, err);
        return s;
    }
    long total = (long)np * nb + (o->equal_bytes ? 2L * nb : 0), done = 0;
    int kvd_runs = 0, kvd_equal = 0;
    for (int bi = 0; bi < nb && s == KVV_OK; bi++)
        for (int pi = 0; pi < np && s == KVV_OK; pi++) {
            kvv_evict_row *row = &res->rows[res->n_rows];
            s = run_pair(o, &full, pols[pi], budgets[bi], row, err);
            if (s != KVV_OK)
                break;
            res->n_rows++;
            if (kvv_policy_is_kvdirect(pols[pi])) {
                kvd_runs++;
                kvd_equal += row->bit_equal;
            }
            if (c->progress)
                c->progress(c->progress_user, "evict", ++done, total);
        }
    /* Equal total bytes: baselines as measured, KV-Direct re-run at the
     * live budget its checkpoints leave. */
    for (int bi = 0; s == KVV_OK && o->equal_bytes && bi < nb; bi++) {
        uint64_t bytes = (uint64_t)budgets[bi] * res->kv_bytes_per_token;
        for (int k = 0; k < res->n_rows; k++)
            if (res->rows[k].budget == budgets[bi] && !kvv_policy_is_kvdirect(res->rows[k].kind)) {
                kvv_evict_row *e = &res->eq_rows[res->n_eq_rows++];
                *e = res->rows[k];
                e->byte_budget_of = budgets[bi];
            }
        const kvv_policy_kind kinds[2] = {KVV_POLICY_KVDIRECT_LAYER, KVV_POLICY_KVDIRECT_TOKEN};
        for (int m = 0; m < 2 && s == KVV_OK; m++) {
            uint64_t ck = m == 0 ? res->ckpt_layer_per_token : res->ckpt_token_per_token;
            int b = kvdirect_budget_for(bytes, res->kv_bytes_per_token, ck, n_ctx);
            kvv_evict_row *e = &res->eq_rows[res->n_eq_rows];
            if (b < 1) {
                memset(e, 0, sizeof *e);
                e->kind = kinds[m];
                e->fits = false;
            } else {
                s = run_pair(o, &full, kinds[m], b, e, err);
                if (s != KVV_OK)
                    break;
                kvd_runs++;
                kvd_equal += e->bit_equal;
            }
            e->byte_budget_of = budgets[bi];
            res->n_eq_rows++;
            if (c->progress)
                c->progress(c->progress_user, "evict", ++done, total);
        }
    }
    kvv_policy_run_out_free(&full);
    if (s != KVV_OK) {
        kvv_check_set_error(r, err);
        return s;
    }
    json_t *t1 = json_array(), *t2 = json_array();
    for (int k = 0; k < res->n_rows; k++)
        json_array_append_new(t1, row_json(&res->rows[k]));
    for (int k = 0; k < res->n_eq_rows; k++)
        json_array_append_new(t2, row_json(&res->eq_rows[k]));
    json_object_set_new(r->details, "n_ctx", json_integer(n_ctx));
    json_object_set_new(r->details, "n_prompt", json_integer(c->n_tokens));
    json_object_set_new(r->details, "n_gen", json_integer(c->n_gen));
    json_object_set_new(r->details, "full_bytes", json_integer((json_int_t)res->full_bytes));
    json_object_set_new(r->details, "kv_bytes_per_token",
                        json_integer((json_int_t)res->kv_bytes_per_token));
    json_object_set_new(r->details, "by_budget", t1);
    json_object_set_new(r->details, "equal_bytes", t2);
    r->seconds = kvv_now_seconds() - t0;
    if (kvd_runs == 0)
        kvv_check_set_verdict(r, KVV_VERDICT_PASS, "%d policy runs (no KV-Direct run requested)",
                              res->n_rows);
    else if (kvd_equal == kvd_runs)
        kvv_check_set_verdict(r, KVV_VERDICT_PASS,
                              "KV-Direct bit-equal to the full cache in %d of %d runs",
                              kvd_equal, kvd_runs);
    else {
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL,
                              "KV-Direct differs from the full cache in %d of %d runs",
                              kvd_runs - kvd_equal, kvd_runs);
        kvv_check_set_message(r, "a KV-Direct run was not bit-equal to the full cache");
    }
    return KVV_OK;
}

static void print_rows(FILE *f, const kvv_evict_row *rows, int n, bool eq)
{
    fprintf(f, "  %-15s %7s %9s %8s %7s %9s %12s %12s %12s %s\n", "policy", "budget",
            eq ? "of budget" : "match", eq ? "match" : "prefix", "tf-top1", "KL mean", "KL max",
            "bytes peak", "recompute", "bit-equal");
    for (int i = 0; i < n; i++) {
        const kvv_evict_row *w = &rows[i];
        if (!w->fits) {
            fprintf(f, "  %-15s %7s %9d   (checkpoints alone exceed the byte budget)\n",
                    kvv_policy_name(w->kind), "-", w->byte_budget_of);
            continue;
        }
        char a[16], b[16];
        if (eq) {
            snprintf(a, sizeof a, "%d", w->byte_budget_of);
            snprintf(b, sizeof b, "%.1f%%", 100 * w->greedy_match);
        } else {
            snprintf(a, sizeof a, "%.1f%%", 100 * w->greedy_match);
            snprintf(b, sizeof b, "%d", w->prefix_match);
        }
        fprintf(f, "  %-15s %7d %9s %8s %6.1f%% %9.3g %12.6g %12llu %12.3g %s\n",
                kvv_policy_name(w->kind), w->budget, a, b, 100 * w->tf_top1, w->kl_mean,
                w->kl_max, (unsigned long long)w->bytes_peak, w->recompute_flops,
                w->bit_equal ? "yes" : "no");
    }
}

void kvv_evict_print(FILE *f, const kvv_evict_result *res)
{
    fprintf(f, "context %d positions; full cache holds %llu bytes (%llu per token)\n",
            res->n_ctx, (unsigned long long)res->full_bytes,
            (unsigned long long)res->kv_bytes_per_token);
    fprintf(f, "\nBy live-token budget (match = greedy token match, prefix = steps to the first "
               "divergence,\ntf-top1 = teacher-forced argmax agreement, KL = KL(p_full || "
               "p_policy) per step):\n");
    print_rows(f, res->rows, res->n_rows, false);
    if (res->n_eq_rows) {
        fprintf(f, "\nAt equal total bytes (budget B tokens of K/V; KV-Direct's checkpoints "
                   "charged: %llu B/token per-layer, %llu B/token single-vector):\n",
                (unsigned long long)res->ckpt_layer_per_token,
                (unsigned long long)res->ckpt_token_per_token);
        print_rows(f, res->eq_rows, res->n_eq_rows, true);
    }
}

kvv_status kvv_evict_write_csv(const kvv_evict_result *res, const char *path, kvv_error *err)
{
    kvv_sbuf b = {0};
    kvv_sbuf_str(&b, "table,policy,budget,bytes_of_budget,fits,greedy_match,prefix_match,"
                     "teacher_top1,kl_mean,kl_max,bit_equal,bytes_peak,recompute_flops\n");
    for (int t = 0; t < 2; t++) {
        const kvv_evict_row *rows = t ? res->eq_rows : res->rows;
        int n = t ? res->n_eq_rows : res->n_rows;
        for (int i = 0; i < n; i++) {
            const kvv_evict_row *w = &rows[i];
            kvv_sbuf_fmt(&b, "%s,%s,%d,%d,%d,%.6f,%d,%.6f,%.9g,%.9g,%d,%llu,%.6g\n",
                         t ? "equal_bytes" : "by_budget", kvv_policy_name(w->kind), w->budget,
                         w->byte_budget_of, w->fits, w->greedy_match, w->prefix_match,
                         w->tf_top1, w->kl_mean, w->kl_max, w->bit_equal,
                         (unsigned long long)w->bytes_peak, w->recompute_flops);
        }
    }
    return kvv_sbuf_write_file(&b, path, err);
}
