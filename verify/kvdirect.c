/* kvdirect.c — see kvdirect.h. */
#include "verify/kvdirect.h"

#include <string.h>

#include "verify/evict.h"
#include "verify/policy_run.h"

/* One KV-Direct configuration, greedy. If every token matches the full
 * cache's, both runs saw the same inputs at every step, so their logits are
 * compared bit for bit directly (no teacher-forced rerun needed); a token
 * mismatch already fails the comparison. */
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
    /* the first logit whose bits differ (steps before any token difference) */
    first->layer = first->head = first->index = first->token = -1;
    for (int i = 0; i < g.n_gen && first->token < 0; i++) {
        kvv_cmp_stats st;
        kvv_cmp_init(&st);
        kvv_cmp_update(&st, full->logits + (size_t)i * g.n_vocab, g.logits + (size_t)i * g.n_vocab,
                       (size_t)g.n_vocab);
        if (st.first >= 0) {
            first->token = i;
            first->index = (int)st.first;
            first->expected = st.first_ref;
            first->actual = st.first_test;
        }
        if (full->tokens[i] != g.tokens[i])
            break;
    }
    row->kind = cfg->kind;
    row->budget = cfg->budget;
    row->fits = true;
    kvv_policy_run_out_free(&g);
    return KVV_OK;
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
    /* Per-layer mode at a quarter and half of the context; the single-vector
     * mode, whose restoration re-runs every layer over the evicted span, at
     * half (its cost grows with the evicted count). */
    int quarter = n_ctx / 4 > 0 ? n_ctx / 4 : 1, half = n_ctx / 2 > 0 ? n_ctx / 2 : 1;
    const struct { kvv_policy_kind kind; int budget; } plan[3] = {
        {KVV_POLICY_KVDIRECT_LAYER, quarter},
        {KVV_POLICY_KVDIRECT_LAYER, half},
        {KVV_POLICY_KVDIRECT_TOKEN, half},
    };
    int runs = 0, equal = 0, layer_runs = 0;
    uint64_t peak = 0;
    double flops = 0;
    json_t *arr = json_array(), *unsup = json_array();
    kvv_error why = {0}; /* the last configuration the engine could not run */
    for (int i = 0; i < 3 && s == KVV_OK; i++) {
        kvv_policy_kind kind = plan[i].kind;
        int budget = plan[i].budget;
        kvv_policy_cfg cfg = kvv_policy_cfg_default(kind, budget);
        if (o->force_fail && kind == KVV_POLICY_KVDIRECT_LAYER)
            cfg.ckpt = KVV_CKPT_BF16; /* plant the control in the real comparison */
        kvv_evict_row row;
        kvv_mismatch mm = {.tensor = "logits"};
        s = run_one(o, &full, &cfg, &row, &mm, err);
        if (s == KVV_ERR_UNSUPPORTED) { /* this mode cannot run here; the others may */
            why = *err;
            json_array_append_new(unsup, json_pack("{s:s, s:i, s:s}", "policy",
                                                   kvv_policy_name(kind), "budget", budget,
                                                   "reason", err->msg));
            s = KVV_OK;
            continue;
        }
        if (s != KVV_OK)
            break;
        layer_runs += kind == KVV_POLICY_KVDIRECT_LAYER;
        runs++;
        equal += row.bit_equal;
        if (row.bytes_peak > peak)
            peak = row.bytes_peak;
        flops += row.recompute_flops;
        json_t *j = json_object();
        json_object_set_new(j, "policy", json_string(kvv_policy_name(kind)));
        json_object_set_new(j, "budget", json_integer(budget));
        json_object_set_new(j, "greedy_match", json_real(row.greedy_match));
        json_object_set_new(j, "bit_equal", json_boolean(row.bit_equal));
        json_object_set_new(j, "bytes_peak", json_integer((json_int_t)row.bytes_peak));
        json_object_set_new(j, "recomputed_rows", json_integer((json_int_t)row.recomputed_rows));
        json_object_set_new(j, "recompute_flops", json_real(row.recompute_flops));
        json_array_append_new(arr, j);
        if (!row.bit_equal && !r->has_mismatch) {
            if (mm.token < 0) { /* no logit differs: the tokens parted first */
                mm.token = row.prefix_match;
                snprintf(mm.tensor, sizeof mm.tensor, "token");
            }
            snprintf(mm.variant, sizeof mm.variant, "step %d, %s budget=%d", mm.token,
                     kvv_policy_name(kind), budget);
            kvv_check_note_mismatch(r, &mm);
        }
        if (o->progress)
            o->progress(o->progress_user, "kvdirect", runs, 3 + (o->controls ? 1 : 0));
    }
    if (s == KVV_OK && runs == 0) /* no mode could run: the check is unsupported */
        s = kvv_error_set(err, KVV_ERR_UNSUPPORTED, "%s", why.msg);
    if (s == KVV_OK && o->controls && layer_runs > 0) {
        /* Control: approximate (bf16) per-layer checkpoints must change the logits. */
        kvv_policy_cfg cfg = kvv_policy_cfg_default(KVV_POLICY_KVDIRECT_LAYER, quarter);
        cfg.ckpt = KVV_CKPT_BF16;
        kvv_evict_row row;
        kvv_mismatch ignored;
        s = run_one(o, &full, &cfg, &row, &ignored, err);
        if (s == KVV_OK)
            kvv_check_add_control(r, "kvdirect-layer with bf16 checkpoints", !row.bit_equal,
                                  row.bit_equal ? "logits stayed bit-equal: not detected"
                                                : "logits differ (KL max %.3g, token match %.1f%%)",
                                  row.kl_max, 100 * row.greedy_match);
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
    int missed = kvv_check_controls_missed(r);
    char skipped[64] = "";
    if (json_array_size(unsup))
        snprintf(skipped, sizeof skipped, " (%zu unsupported by this engine)",
                 json_array_size(unsup));
    if (layer_runs == 0 && o->controls) /* the control needs a per-layer run */
        kvv_check_add_control(r, "kvdirect-layer with bf16 checkpoints", false,
                              "not run: the engine cannot run kvdirect-layer");
    missed = kvv_check_controls_missed(r);
    if (equal == runs && missed == 0)
        kvv_check_set_verdict(r, KVV_VERDICT_PASS,
                              "%d/%d runs bit-equal to full%s; peak %llu B; recompute %.3g FLOPs",
                              equal, runs, skipped, (unsigned long long)peak, flops);
    else {
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "%d/%d runs bit-equal to full%s%s", equal,
                              runs, skipped, missed ? "; a control was not detected" : "");
        kvv_check_set_message(r, "%s", equal != runs ? "KV-Direct differs from the full cache"
                                                     : "the bf16-checkpoint control was not detected");
    }
    return KVV_OK;
}
