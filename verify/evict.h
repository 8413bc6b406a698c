/*
 * evict.h — `kvverify evict`: every cache policy and both KV-Direct modes
 * against the full cache, at several budgets, over a set of prompts
 * (DESIGN.md §4 evict; method and figures in docs/policies.md).
 *
 * For every policy, budget and prompt: greedy token match, prefix to the
 * first divergence, teacher-forced top-1 agreement and KL per step against
 * the full cache, bytes held — per prompt, and as mean / sd / min / max over
 * the prompts. Where they run:
 *
 *   baselines  figures about the model and the policy, not about exactness:
 *              on the `figures` engine (the cli's default: the cpu engine in
 *              its batch-invariant mode), every prompt.
 *   KV-Direct  exactness is what it claims, so it runs on the ENGINE UNDER
 *              TEST, both modes, at every budget of both tables, on the first
 *              `verify_prompts` prompts (all of them when the figures engine
 *              is the engine under test), and each run is also compared bit
 *              for bit with that engine's full cache: the verdict. Control:
 *              kvdirect-layer with bf16 checkpoints (kvdirect-token if only
 *              that mode is requested) must be detected; force_fail plants
 *              bf16 checkpoints into every KV-Direct run.
 *
 * Per (policy, budget, prompt) a greedy decode runs, and a teacher-forced one
 * (fed the full cache's tokens) only when the greedy tokens differ from the
 * full cache's: with the same tokens both decodes saw the same inputs at every
 * step, so their logits are the same. The full-cache decode runs once per
 * prompt and engine. Runs go to `n_threads` threads, each with its own
 * engines, reused from run to run (verify/policy_run.h).
 *
 * The equal-total-bytes table: for each baseline budget B the byte budget is
 * B tokens of live K/V; a KV-Direct mode gets the largest live budget B'
 * whose K/V plus the checkpoints of the other positions fit in it (none when
 * even B' = 1 does not fit). A baseline whose peak bytes exceed the byte
 * budget on any prompt (snapkv and pyramidkv hold the whole prompt until
 * the end of the prefill, quest keeps everything) is marked over the
 * budget there, its figures left out of that table (not ranked).
 *
 * Verdict: PASS iff every verified KV-Direct run that recomputed anything is
 * bit-equal and the control is detected; FAIL otherwise (first mismatch: the
 * first logit that differs); SKIPPED (exit 77) when nothing was verified —
 * no KV-Direct policy requested, or no KV-Direct run evicted anything.
 */
#ifndef KVV_EVICT_H
#define KVV_EVICT_H

#include <stdio.h>

#include "engine/policy/policy.h"
#include "verify/check.h"
#include "verify/prompt_set.h"

typedef struct {
    kvv_policy_kind kind;
    int prompt;               /* index in the prompt set */
    int engine;               /* 0 the figures engine, 1 the engine under test, -1 not run */
    int budget;               /* live K/V positions */
    int byte_budget_of;       /* equal-bytes table: the baseline budget whose bytes it got, else 0 */
    bool fits;                /* equal-bytes: false when KV-Direct cannot fit at all
                                 (engine -1), or a baseline's peak bytes exceed the byte
                                 budget (it ran: its figures are not at equal bytes) */
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

/* One figure over the prompts: sd is the sample standard deviation (n - 1;
 * 0 for one prompt). */
typedef struct {
    double mean, sd, min, max;
} kvv_evict_spread;

/* A (policy, budget) row of a table over the prompts whose run ran and fitted. */
typedef struct {
    kvv_policy_kind kind;
    int byte_budget_of;       /* as in kvv_evict_row */
    int budget_min, budget_max; /* live budget (differ only for equal-bytes KV-Direct rows
                                   over prompts of different lengths) */
    int n_prompts;            /* rows aggregated (0: fitted nowhere, or over the budget) */
    int n_bit_equal;
    int n_over;               /* equal bytes: prompts whose run held more than the byte
                                 budget; any makes the policy unranked there (n_prompts 0) */
    uint64_t over_peak;       /* ... the largest peak bytes among them */
    kvv_evict_spread match, prefix, tf_top1, kl_mean, kl_max, bytes_peak;
} kvv_evict_agg;

/* A KV-Direct run compared bit for bit on the engine under test. */
typedef struct {
    kvv_evict_row row;
    kvv_ckpt_type ckpt;       /* f32; bf16 in the control and under force_fail */
    bool differs;             /* not bit-equal */
    kvv_mismatch first;       /* the first logit that differs (when differs) */
    bool unsupported;         /* the engine could not run it (result.unsupported says why) */
} kvv_evict_verify;

typedef struct {
    kvv_check_opts check;            /* model, engine under test, n_gen, controls, force_fail,
                                        progress (tokens unused) */
    const kvv_prompt_set *prompts;   /* required, n >= 1 */
    const int *budgets;              /* live-token budgets; NULL = 10,25,50,75% of the
                                        shortest context */
    int n_budgets;
    const kvv_policy_kind *policies; /* NULL = every policy */
    int n_policies;
    bool equal_bytes;                /* also build the equal-bytes table */
    const kvv_engine_opts *figures;  /* engine of the figures; NULL = the engine under test */
    int verify_prompts;              /* prompts KV-Direct runs on (the first ones); < 1 = 1 */
    int n_threads;                   /* runs at a time; < 1 = processors online */
} kvv_evict_opts;

typedef struct {
    int n_prompts, n_gen;
    int *n_ctx;                     /* [n_prompts] prompt + generated positions */
    uint64_t *full_bytes;           /* [n_prompts] the full cache's bytes at the end */
    int *budgets;                   /* [n_budgets] the by-budget table's budgets */
    int n_budgets;
    uint64_t kv_bytes_per_token;    /* K+V over all layers, cache dtype */
    uint64_t ckpt_layer_per_token;  /* kvdirect-layer checkpoint per evicted token */
    uint64_t ckpt_token_per_token;  /* kvdirect-token checkpoint per evicted token */
    kvv_engine_desc figures_engine, test_engine;
    bool figures_is_test;           /* one engine: verified on every prompt */
    char figures_note[160];         /* why the figures ran elsewhere than asked, or "" */
    int n_threads;
    kvv_evict_row *rows;            /* by budget: [budget][policy][prompt] (engine -1: not run) */
    int n_rows;
    kvv_evict_row *eq_rows;         /* equal bytes: [byte budget][policy][prompt] */
    int n_eq_rows;
    kvv_evict_agg *aggs, *eq_aggs;  /* one per (policy, budget) block of n_prompts rows */
    int n_aggs, n_eq_aggs;
    kvv_evict_verify *verify;       /* KV-Direct runs on the engine under test */
    /* [kind]: why the engine could not run that policy ("" = it could); its
     * rows are "not run" (engine -1): "unsupported by this engine" */
    char unsupported[KVV_POLICY_COUNT][192];
    int n_verify;
    int verify_prompts;             /* prompts KV-Direct ran on (the first ones) */
    bool has_control;
    kvv_evict_verify control;
    double seconds;
} kvv_evict_result;

/* Run everything, fill res (caller frees with kvv_evict_result_free, also
 * after an error) and r (verdict, key figure, controls, details JSON). */
kvv_status kvv_check_evict(const kvv_evict_opts *o, kvv_evict_result *res, kvv_check_result *r,
                           kvv_error *err);
void kvv_evict_result_free(kvv_evict_result *res); /* accepts NULL */

/* Fill the comparison fields of row from a greedy and a teacher-forced
 * run of a policy against the full cache's greedy run (same prompt, same
 * n_gen; the teacher-forced run was fed full->tokens, or is the greedy run
 * itself when their tokens agree). */
struct kvv_policy_run_out;
void kvv_evict_score_row(kvv_evict_row *row, const struct kvv_policy_run_out *full,
                         const struct kvv_policy_run_out *greedy,
                         const struct kvv_policy_run_out *tf);

/* Where greedy run g first differs from the full cache's run full: the
 * first logit whose bits differ, at or before the step where the tokens
 * part (prefix_match, kvv_evict_row), into m->token (step), m->index,
 * m->expected (full) and m->actual (g) — an element that really differs;
 * m's other fields are left. @return false when no logit differs there. */
bool kvv_evict_first_difference(const struct kvv_policy_run_out *full,
                                const struct kvv_policy_run_out *g, int prefix_match,
                                kvv_mismatch *m);

/* --- evict_report.c: figures over the prompts, console, CSV, JSON --- */

/* Fill res->aggs / eq_aggs from the rows. @return KVV_OK or KVV_ERR_NOMEM. */
kvv_status kvv_evict_aggregate(kvv_evict_result *res, kvv_error *err);
/* Console tables: mean [min, max] over the prompts, then the KV-Direct runs. */
void kvv_evict_print(FILE *f, const kvv_evict_result *res);
/* CSV: one line per row of both tables, per prompt, header first. */
kvv_status kvv_evict_write_csv(const kvv_evict_result *res, const kvv_prompt_set *prompts,
                               const char *path, kvv_error *err);
/* Everything in res as the check's details (docs/report-schema.md). */
void kvv_evict_details_json(const kvv_evict_result *res, const kvv_prompt_set *prompts,
                            json_t *details);

#endif
