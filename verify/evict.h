/*
 * evict.h — `kvverify evict`: every cache policy and both KV-Direct modes
 * against the full cache, at several budgets (DESIGN.md §4 evict).
 *
 * For each (policy, budget) two decodes run through verify/policy_run.h:
 *   greedy           the policy's own argmax tokens  -> token match %, prefix match
 *   teacher-forced   the full cache's tokens fed in  -> top-1 agreement, KL per step,
 *                    and bit-equality of every logit with the full cache
 * A second table compares at EQUAL TOTAL BYTES: for each baseline budget B
 * the byte budget is B tokens of live K/V; KV-Direct gets the largest live
 * budget B' whose K/V plus the checkpoints of the evicted positions fit in
 * it (none, if even B' = 1 does not fit).
 *
 * Verdict: PASS iff both KV-Direct modes are bit-equal to the full cache
 * (greedy tokens and every teacher-forced logit) at every budget they ran;
 * the baselines' numbers are findings, not verdicts.
 */
#ifndef KVV_EVICT_H
#define KVV_EVICT_H

#include <stdio.h>

#include "engine/policy/policy.h"
#include "verify/check.h"

typedef struct {
    kvv_policy_kind kind;
    int budget;               /* live K/V positions */
    int byte_budget_of;       /* equal-bytes table: the baseline budget whose bytes it got, else 0 */
    bool fits;                /* equal-bytes: false when KV-Direct cannot fit at all */
    double greedy_match;      /* fraction of steps whose token equals the full cache's */
    int prefix_match;         /* steps before the first differing token (n_gen if none) */
    double tf_top1;           /* teacher-forced: fraction of steps with the full cache's argmax */
    double kl_mean, kl_max;   /* teacher-forced KL(p_full || p_policy) per step */
    bool bit_equal;           /* tokens and every teacher-forced logit bit-equal to full */
    uint64_t bytes_peak;      /* live K/V + checkpoints, max over steps */
    uint64_t bytes_final;
    double recompute_flops;   /* KV-Direct: FLOPs spent recomputing, whole run */
    int64_t recomputed_rows;  /* KV-Direct: (token, layer) rows recomputed, whole run */
    double seconds;
} kvv_evict_row;

typedef struct {
    kvv_check_opts check;           /* model, engine, prompt (tokens), n_gen, progress */
    const int *budgets;             /* live-token budgets; NULL = 10,25,50,75% of the context */
    int n_budgets;
    const kvv_policy_kind *policies;/* NULL = every policy */
    int n_policies;
    bool equal_bytes;               /* also build the equal-bytes table (default true) */
} kvv_evict_opts;

typedef struct {
    int n_ctx;                      /* prompt + generated positions */
    uint64_t full_bytes;            /* the full cache's bytes at the end */
    uint64_t kv_bytes_per_token;    /* K+V over all layers, cache dtype */
    uint64_t ckpt_layer_per_token;  /* kvdirect-layer checkpoint per evicted token */
    uint64_t ckpt_token_per_token;  /* kvdirect-token checkpoint per evicted token */
    kvv_evict_row *rows;            /* by budget: policies x budgets */
    int n_rows;
    kvv_evict_row *eq_rows;         /* equal bytes */
    int n_eq_rows;
} kvv_evict_result;

/* Run everything, fill res (caller frees with kvv_evict_result_free) and
 * r (verdict, key figure, details JSON with both tables). */
kvv_status kvv_evict_run(const kvv_evict_opts *o, kvv_evict_result *res, kvv_check_result *r,
                         kvv_error *err);
void kvv_evict_result_free(kvv_evict_result *res);

/* Fill the comparison fields of row from a greedy and a teacher-forced
 * run of a policy against the full cache's greedy run (same prompt, same
 * n_gen; the teacher-forced run was fed full->tokens). */
struct kvv_policy_run_out;
void kvv_evict_score_row(kvv_evict_row *row, const struct kvv_policy_run_out *full,
                         const struct kvv_policy_run_out *greedy,
                         const struct kvv_policy_run_out *tf);

/* Console tables and CSV (one line per row, both tables, header first). */
void kvv_evict_print(FILE *f, const kvv_evict_result *res);
kvv_status kvv_evict_write_csv(const kvv_evict_result *res, const char *path, kvv_error *err);

#endif
