/* kvdirect.c — see kvdirect.h. */
#include "verify/kvdirect.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "verify/evict.h"
#include "verify/parallel.h"
#include "verify/policy_run.h"

/* One KV-Direct configuration, greedy. If every token matches the full
 * cache's, both runs saw the same inputs at every step, so their logits are
 * compared bit for bit directly (no teacher-forced rerun needed); a token
 * mismatch already fails the comparison. When they differ, *first (if not
 * NULL) gets the first logit that really differs (the same search as
 * evict's). */
static kvv_status run_one(const kvv_check_opts *o, const kvv_policy_run_out *full,
                          const kvv_policy_cfg *cfg, kvv_evict_row *row, kvv_mismatch *first,
                          kvv_error *err)
{
    kvv_policy_run_out g;
    memset(row, 0, sizeof *row);
    kvv_status s = kvv_policy_run(o->model, &o->engine, cfg, o->tokens, o->n_tokens, o->n_gen,
                                  NULL, &g, err);
    if (s != KVV_OK)
        return s;
    kvv_evict_score_row(row, full, &g, &g);
    row->kind = cfg->kind;
    row->budget = cfg->budget;
    row->fits = true;
    if (first && !row->bit_equal) {
        *first = (kvv_mismatch){.layer = -1, .token = row->prefix_match, .head = -1,
                                .index = -1};
        snprintf(first->tensor, sizeof first->tensor, "%s",
                 kvv_evict_first_difference(full, &g, row->prefix_match, first) ? "logits"
                                                                                 : "token");
        if (!strcmp(first->tensor, "token") && row->prefix_match < g.n_gen) {
            first->expected = (float)full->tokens[row->prefix_match];
            first->actual = (float)g.tokens[row->prefix_match];
        }
    }
    kvv_policy_run_out_free(&g);
    return KVV_OK;
}

/* The runs against the full cache, as jobs (verify/parallel.h). */
typedef struct {
    const kvv_check_opts *o;
    const kvv_policy_run_out *full;
    kvv_policy_cfg cfg[4];       /* three configurations, then the control */
    kvv_evict_row row[4];
    kvv_mismatch first[4];
    kvv_status status[4];
    kvv_error err[4];
    int done;                    /* for progress, under lock */
    pthread_mutex_t lock;
} kd_jobs;

static void kd_job(void *user, int i, int worker)
{
    (void)worker;
    kd_jobs *j = user;
    j->status[i] = run_one(j->o, j->full, &j->cfg[i], &j->row[i], &j->first[i], &j->err[i]);
    const kvv_check_opts *o = j->o;
    if (o->progress) {
        pthread_mutex_lock(&j->lock);
        int done = ++j->done;
        o->progress(o->progress_user, "kvdirect", done, 3 + (o->controls ? 1 : 0));
        pthread_mutex_unlock(&j->lock);
    }
}

kvv_status kvv_check_kvdirect(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err)
{
    double t0 = kvv_now_seconds();
    int n_ctx = o->n_tokens + o->n_gen;
    kvv_status s = kvv_check_opts_validate(o, n_ctx, err);
    if (s != KVV_OK) {
        kvv_check_set_error(r, err);
        return s;
    }
    kvv_policy_run_out full;
    kvv_policy_cfg fcfg = kvv_policy_cfg_default(KVV_POLICY_FULL, n_ctx);
    s = kvv_policy_run(o->model, &o->engine, &fcfg, o->tokens, o->n_tokens, o->n_gen, NULL, &full,
                       err);
    if (s != KVV_OK) {
        kvv_check_set_error(r, err);
        return s;
    }
    /* a non-finite logit is never equal (compare_stats.h): counted for the verdict */
    size_t nonfinite = 0;
    for (size_t i = 0; i < (size_t)full.n_gen * (size_t)full.n_vocab; i++)
        nonfinite += !isfinite(full.logits[i]);
    /* Per-layer mode at a quarter and half of the context; the single-vector
     * mode, whose restoration re-runs every layer over the evicted span, at
     * half (its cost grows with the evicted count). */
    int quarter = n_ctx / 4 > 0 ? n_ctx / 4 : 1, half = n_ctx / 2 > 0 ? n_ctx / 2 : 1;
    const struct { kvv_policy_kind kind; int budget; } plan[3] = {
        {KVV_POLICY_KVDIRECT_LAYER, quarter},
        {KVV_POLICY_KVDIRECT_LAYER, half},
        {KVV_POLICY_KVDIRECT_TOKEN, half},
    };
    /* The configurations and the control are independent runs against the
     * same full-cache run: o->n_jobs at a time, each opening its own engine,
     * then read in order. */
    kd_jobs jobs = {.o = o, .full = &full};
    for (int i = 0; i < 3; i++) {
        jobs.cfg[i] = kvv_policy_cfg_default(plan[i].kind, plan[i].budget);
        if (o->force_fail && plan[i].kind == KVV_POLICY_KVDIRECT_LAYER)
            jobs.cfg[i].ckpt = KVV_CKPT_BF16; /* plant the control in the real comparison */
    }
    int n_jobs = 3;
    if (o->controls) {
        /* Control: approximate (bf16) per-layer checkpoints must change the logits. */
        jobs.cfg[n_jobs] = kvv_policy_cfg_default(KVV_POLICY_KVDIRECT_LAYER, quarter);
        jobs.cfg[n_jobs].ckpt = KVV_CKPT_BF16;
        n_jobs++;
    }
    pthread_mutex_init(&jobs.lock, NULL);
    kvv_parallel_for(n_jobs, kvv_check_jobs(o), kd_job, &jobs);
    pthread_mutex_destroy(&jobs.lock);
    int runs = 0, equal = 0, layer_runs = 0;
    uint64_t peak = 0;
    double flops = 0;
    json_t *arr = json_array(), *unsup = json_array();
    kvv_error why = {0}; /* the last configuration the engine could not run */
    for (int i = 0; i < 3 && s == KVV_OK; i++) {
        kvv_policy_kind kind = plan[i].kind;
        int budget = plan[i].budget;
        if (jobs.status[i] == KVV_ERR_UNSUPPORTED) { /* this mode cannot run here; the others may */
            why = jobs.err[i];
            json_array_append_new(unsup, json_pack("{s:s, s:i, s:s}", "policy",
                                                   kvv_policy_name(kind), "budget", budget,
                                                   "reason", jobs.err[i].msg));
            continue;
        }
        if ((s = jobs.status[i]) != KVV_OK) {
            *err = jobs.err[i];
            break;
        }
        const kvv_evict_row *row = &jobs.row[i];
        layer_runs += kind == KVV_POLICY_KVDIRECT_LAYER;
        runs++;
        equal += row->bit_equal;
        if (row->bytes_peak > peak)
            peak = row->bytes_peak;
        flops += row->recompute_flops;
        json_t *j = json_object();
        json_object_set_new(j, "policy", json_string(kvv_policy_name(kind)));
        json_object_set_new(j, "budget", json_integer(budget));
        json_object_set_new(j, "greedy_match", json_real(row->greedy_match));
        json_object_set_new(j, "bit_equal", json_boolean(row->bit_equal));
        json_object_set_new(j, "bytes_peak", json_integer((json_int_t)row->bytes_peak));
        json_object_set_new(j, "recomputed_rows", json_integer((json_int_t)row->recomputed_rows));
        json_object_set_new(j, "recompute_flops", json_real(row->recompute_flops));
        json_array_append_new(arr, j);
        if (!row->bit_equal && !r->has_mismatch) {
            kvv_mismatch mm = jobs.first[i];
            snprintf(mm.variant, sizeof mm.variant, "%s budget=%d", kvv_policy_name(kind),
                     budget);
            kvv_check_note_mismatch(r, &mm);
        }
    }
    if (s == KVV_OK && runs == 0) /* no mode could run: the check is unsupported */
        s = kvv_error_set(err, KVV_ERR_UNSUPPORTED, "%s", why.msg);
    if (s == KVV_OK && n_jobs == 4) {
        const kvv_evict_row *row = &jobs.row[3];
        if (jobs.status[3] == KVV_ERR_UNSUPPORTED || layer_runs == 0) {
            kvv_check_add_control(r, "kvdirect-layer with bf16 checkpoints", false,
                                  "not run: the engine cannot run kvdirect-layer");
        } else if ((s = jobs.status[3]) != KVV_OK) {
            *err = jobs.err[3];
        } else {
            kvv_check_add_control(r, "kvdirect-layer with bf16 checkpoints", !row->bit_equal,
                                  row->bit_equal ? "logits stayed bit-equal: not detected"
                                                 : "logits differ (KL max %.3g, token match %.1f%%)",
                                  row->kl_max, 100 * row->greedy_match);
        }
    }
    kvv_policy_run_out_free(&full);
    if (s != KVV_OK) {
        json_decref(arr);
        json_decref(unsup);
        kvv_check_set_error(r, err);
        return s;
    }
    json_object_set_new(r->details, "runs", arr);
    json_object_set_new(r->details, "unsupported_runs", unsup);
    json_object_set_new(r->details, "n_ctx", json_integer(n_ctx));
    r->seconds = kvv_now_seconds() - t0;
    char skipped[64] = "";
    if (json_array_size(unsup))
        snprintf(skipped, sizeof skipped, " (%zu unsupported by this engine)",
                 json_array_size(unsup));
    int missed = kvv_check_controls_missed(r);
    if (nonfinite) { /* the reason first: the full-cache run itself is not finite */
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "%zu logits of the full-cache run not finite "
                              "(NaN/inf); %d/%d runs bit-equal to full%s", nonfinite, equal,
                              runs, skipped);
        kvv_check_set_message(r, "the full-cache run's logits hold %zu NaN/inf values: a "
                              "non-finite value is never equal, whatever the other side holds",
                              nonfinite);
    } else if (equal == runs && missed == 0)
        kvv_check_set_verdict(r, KVV_VERDICT_PASS,
                              "%d/%d runs bit-equal to full%s; peak %llu B; recompute %.3g FLOPs",
                              equal, runs, skipped, (unsigned long long)peak, flops);
    else {
        /* the reason first: differing runs, else the undetected control */
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "%s%d/%d runs bit-equal to full%s",
                              equal == runs ? "control NOT detected; " : "", equal, runs,
                              skipped);
        kvv_check_set_message(r, "%s", equal != runs ? "KV-Direct differs from the full cache"
                                                     : "the bf16-checkpoint control was not detected");
    }
    return KVV_OK;
}
