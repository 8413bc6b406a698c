/*
 * evict.c — `kvverify evict` (verify/evict.h): plan the runs, run them on
 * threads, score them, decide the verdict. Aggregates, tables and JSON are
 * in evict_report.c.
 */
#include "verify/evict.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "verify/parallel.h"
#include "verify/policy_run.h"

enum { FIG = 0, TEST = 1 }; /* the engine a run uses: figures, or under test */

typedef struct {
    int engine;               /* FIG or TEST */
    int prompt;
    kvv_policy_cfg cfg;
    bool full;                /* the full-cache run of (engine, prompt) */
    kvv_evict_row *row;       /* figures to fill (greedy + teacher-forced), or NULL */
    kvv_evict_verify *verify; /* bit-equality with the full cache to record, or NULL */
    double cost;              /* rough relative cost: the costly runs start first */
} run_job;

typedef struct {
    const kvv_evict_opts *o;
    kvv_evict_result *res;
    kvv_engine_opts eopts[2];
    int n_ctx_max;
    kvv_policy_run_out *full[2];   /* [prompt]; full[TEST] is full[FIG] with one engine */
    kvv_engine **eng;              /* [worker * 2 + engine], opened on first use */
    run_job *jobs;
    int n_jobs, cap_jobs;
    pthread_mutex_t lock;          /* status, err, progress */
    kvv_status status;             /* the first error of any run */
    kvv_error err;
    long done, total;
} evict_ctx;

void kvv_evict_result_free(kvv_evict_result *res)
{
    if (!res)
        return;
    free(res->n_ctx);
    free(res->full_bytes);
    free(res->budgets);
    free(res->rows);
    free(res->eq_rows);
    free(res->aggs);
    free(res->eq_aggs);
    free(res->verify);
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
        if (isnan(kl) || kl > kl_max) /* a NaN stays: never hidden behind a 0 */
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
    row->seconds = greedy->seconds + (tf != greedy ? tf->seconds : 0);
}

/* ------------------------------------------------------------ running */

static kvv_status worker_engine(evict_ctx *x, int worker, int which, kvv_engine **out,
                                kvv_error *err)
{
    kvv_engine **slot = &x->eng[worker * 2 + which];
    if (!*slot) {
        kvv_engine_opts eo = x->eopts[which];
        eo.n_ctx = x->n_ctx_max;
        kvv_status s = kvv_engine_open(x->o->check.model, &eo, slot, err);
        if (s != KVV_OK)
            return s;
    }
    *out = *slot;
    return KVV_OK;
}

/* Record whether greedy run g is bit-equal to full, and where it first differs:
 * the first logit, at or before the step where the tokens part. */
static void record_verify(kvv_evict_verify *v, const run_job *j, const char *prompt_name,
                          const kvv_policy_run_out *full, const kvv_policy_run_out *g)
{
    kvv_evict_score_row(&v->row, full, g, g);
    v->row.kind = j->cfg.kind;
    v->row.prompt = j->prompt;
    v->row.budget = j->cfg.budget;
    v->row.fits = true;
    v->ckpt = j->cfg.ckpt;
    v->differs = !v->row.bit_equal;
    if (!v->differs)
        return;
    kvv_mismatch *m = &v->first;
    *m = (kvv_mismatch){.layer = -1, .token = v->row.prefix_match, .head = -1, .index = -1};
    snprintf(m->tensor, sizeof m->tensor, "logits");
    int len = snprintf(m->variant, sizeof m->variant, "%s budget=%d prompt=%.16s%s",
                       kvv_policy_name(j->cfg.kind), j->cfg.budget, prompt_name,
                       j->cfg.ckpt == KVV_CKPT_BF16 ? " bf16-ckpt" : "");
    (void)len; /* a cut variant still names the run; the JSON row has every field */
    kvv_evict_first_difference(full, g, v->row.prefix_match, m);
}

bool kvv_evict_first_difference(const kvv_policy_run_out *full, const kvv_policy_run_out *g,
                                int prefix_match, kvv_mismatch *m)
{
    int nv = full->n_vocab, last = prefix_match < full->n_gen ? prefix_match : full->n_gen - 1;
    for (int i = 0; i <= last; i++)
        for (int k = 0; k < nv; k++) {
            float a = full->logits[(size_t)i * (size_t)nv + (size_t)k];
            float b = g->logits[(size_t)i * (size_t)nv + (size_t)k];
            if (!kvv_f32_bit_equal(a, b)) {
                m->token = i;
                m->index = k;
                m->expected = a;
                m->actual = b;
                return true;
            }
        }
    return false;
}

static kvv_status do_job(evict_ctx *x, const run_job *j, int worker, kvv_error *err)
{
    const kvv_prompt *p = &x->o->prompts->items[j->prompt];
    int n_gen = x->o->check.n_gen;
    kvv_engine *e = NULL;
    kvv_status s = worker_engine(x, worker, j->engine, &e, err);
    if (s != KVV_OK)
        return s;
    if (j->full)
        return kvv_policy_run_engine(e, &j->cfg, p->tokens, p->n_tokens, n_gen, NULL,
                                     &x->full[j->engine][j->prompt], err);
    const kvv_policy_run_out *full = &x->full[j->engine][j->prompt];
    kvv_policy_run_out g, t;
    s = kvv_policy_run_engine(e, &j->cfg, p->tokens, p->n_tokens, n_gen, NULL, &g, err);
    if (s != KVV_OK)
        return s;
    if (j->verify)
        record_verify(j->verify, j, p->name, full, &g);
    if (j->row) {
        /* Same tokens: the teacher-forced decode would see the greedy one's
         * inputs at every step, hence its logits. */
        bool same = memcmp(g.tokens, full->tokens, (size_t)n_gen * sizeof *g.tokens) == 0;
        if (!same)
            s = kvv_policy_run_engine(e, &j->cfg, p->tokens, p->n_tokens, n_gen, full->tokens,
                                      &t, err);
        if (s == KVV_OK)
            kvv_evict_score_row(j->row, full, &g, same ? &g : &t);
        if (!same)
            kvv_policy_run_out_free(&t);
    }
    kvv_policy_run_out_free(&g);
    return s;
}

static void job_main(void *user, int i, int worker)
{
    evict_ctx *x = user;
    pthread_mutex_lock(&x->lock);
    bool stop = x->status != KVV_OK;
    pthread_mutex_unlock(&x->lock);
    if (stop)
        return;
    kvv_error err = {0};
    const run_job *j = &x->jobs[i];
    kvv_status s = do_job(x, j, worker, &err);
    pthread_mutex_lock(&x->lock);
    if (s == KVV_ERR_UNSUPPORTED && !j->full) {
        /* a policy this engine cannot run: its rows say "not run", the
         * report says why; the other policies go on */
        char *why = x->res->unsupported[j->cfg.kind];
        if (!why[0])
            snprintf(why, sizeof x->res->unsupported[0], "%.190s", err.msg);
        if (j->row)
            j->row->engine = -1;
        if (j->verify) {
            j->verify->row.kind = j->cfg.kind;
            j->verify->row.budget = j->cfg.budget;
            j->verify->ckpt = j->cfg.ckpt;
            j->verify->unsupported = true;
        }
        s = KVV_OK;
    }
    if (s != KVV_OK && x->status == KVV_OK) {
        x->status = s;
        x->err = err;
    }
    x->done++;
    if (x->o->check.progress)
        x->o->check.progress(x->o->check.progress_user, "evict", x->done, x->total);
    pthread_mutex_unlock(&x->lock);
}

static int by_cost(const void *a, const void *b)
{
    const run_job *x = a, *y = b;
    return (x->cost < y->cost) - (x->cost > y->cost);
}

/* Run the planned jobs, costliest first, and forget them. */
static kvv_status run_jobs(evict_ctx *x, kvv_error *err)
{
    qsort(x->jobs, (size_t)x->n_jobs, sizeof *x->jobs, by_cost);
    kvv_parallel_for(x->n_jobs, x->res->n_threads, job_main, x);
    x->n_jobs = 0;
    if (x->status != KVV_OK)
        *err = x->err;
    return x->status;
}

/* ------------------------------------------------------------ planning */

static run_job *add_job(evict_ctx *x, int engine, int prompt, kvv_policy_cfg cfg)
{
    if (x->n_jobs == x->cap_jobs) {
        int cap = x->cap_jobs ? 2 * x->cap_jobs : 256;
        run_job *j = realloc(x->jobs, (size_t)cap * sizeof *j);
        if (!j)
            return NULL;
        x->jobs = j;
        x->cap_jobs = cap;
    }
    run_job *j = &x->jobs[x->n_jobs++];
    memset(j, 0, sizeof *j);
    j->engine = engine;
    j->prompt = prompt;
    j->cfg = cfg;
    /* kvdirect-token re-runs the evicted span at every step; the engine
     * under test (the reference, usually) is the slower one. */
    int n_ctx = x->res->n_ctx[prompt];
    double evicted = cfg.budget < n_ctx ? n_ctx - cfg.budget : 0;
    j->cost = n_ctx + (cfg.kind == KVV_POLICY_KVDIRECT_TOKEN ? evicted * x->o->check.n_gen : 0);
    if (engine == TEST && !x->res->figures_is_test)
        j->cost *= 3;
    x->total++;
    return j;
}

static kvv_evict_verify *new_verify(kvv_evict_result *res)
{
    kvv_evict_verify *v = &res->verify[res->n_verify++];
    memset(v, 0, sizeof *v);
    return v;
}

/* Largest live budget whose K/V plus the checkpoints of the other
 * n_ctx - B' positions fit in `bytes`; 0 if none. */
static int kvdirect_budget_for(uint64_t bytes, uint64_t kv_tok, uint64_t ck_tok, int n_ctx)
{
    for (int b = n_ctx; b >= 1; b--)
        if ((uint64_t)b * kv_tok + (uint64_t)(n_ctx - b) * ck_tok <= bytes)
            return b;
    return 0;
}

static int eq_budget(const kvv_evict_result *res, kvv_policy_kind kind, int bi, int prompt)
{
    uint64_t ck = kind == KVV_POLICY_KVDIRECT_LAYER ? res->ckpt_layer_per_token
                                                    : res->ckpt_token_per_token;
    return kvdirect_budget_for((uint64_t)res->budgets[bi] * res->kv_bytes_per_token,
                               res->kv_bytes_per_token, ck, res->n_ctx[prompt]);
}

static kvv_policy_cfg cfg_for(const kvv_evict_opts *o, kvv_policy_kind kind, int budget,
                              bool verified)
{
    kvv_policy_cfg c = kvv_policy_cfg_default(kind, budget);
    if (verified && o->check.force_fail && kvv_policy_is_kvdirect(kind))
        c.ckpt = KVV_CKPT_BF16; /* plant the control in the real comparison */
    return c;
}

/* One cell of a table: a baseline on the figures engine for every prompt; a
 * KV-Direct mode on the engine under test, verified, for the first
 * verify_prompts prompts (the others are left not run). */
static kvv_status plan_cell(evict_ctx *x, kvv_evict_row *row, kvv_policy_kind kind, int prompt,
                            int budget)
{
    kvv_evict_result *res = x->res;
    bool kvd = kvv_policy_is_kvdirect(kind);
    row->kind = kind;
    row->prompt = prompt;
    row->budget = budget;
    row->fits = budget >= 1;
    row->engine = -1;
    if (!row->fits || (kvd && prompt >= res->verify_prompts))
        return KVV_OK;
    row->engine = kvd ? TEST : FIG;
    run_job *j = add_job(x, row->engine, prompt, cfg_for(x->o, kind, budget, kvd));
    if (!j)
        return KVV_ERR_NOMEM;
    j->row = row;
    if (kvd)
        j->verify = new_verify(res);
    return KVV_OK;
}

/* Both tables, laid out [budget][policy][prompt]. */
static kvv_status plan_tables(evict_ctx *x, const kvv_policy_kind *pols, int np)
{
    kvv_evict_result *res = x->res;
    int P = res->n_prompts;
    kvv_status s = KVV_OK;
    for (int bi = 0; bi < res->n_budgets; bi++)
        for (int pi = 0; pi < np; pi++)
            for (int p = 0; p < P && s == KVV_OK; p++)
                s = plan_cell(x, &res->rows[res->n_rows++], pols[pi], p, res->budgets[bi]);
    for (int bi = 0; x->o->equal_bytes && bi < res->n_budgets; bi++)
        for (int pi = 0; pi < np; pi++)
            for (int p = 0; p < P && s == KVV_OK; p++) {
                kvv_evict_row *row = &res->eq_rows[res->n_eq_rows++];
                row->byte_budget_of = res->budgets[bi];
                if (kvv_policy_is_kvdirect(pols[pi]))
                    s = plan_cell(x, row, pols[pi], p, eq_budget(res, pols[pi], bi, p));
                else
                    row->kind = pols[pi]; /* copied from the by-budget table after the runs */
            }
    return s;
}

/* Control: approximate (bf16) checkpoints must be seen by the comparison. */
static kvv_status plan_control(evict_ctx *x, const kvv_policy_kind *pols, int np)
{
    kvv_evict_result *res = x->res;
    kvv_policy_kind kind = KVV_POLICY_COUNT;
    for (int pi = 0; pi < np; pi++)
        if (pols[pi] == KVV_POLICY_KVDIRECT_LAYER ||
            (pols[pi] == KVV_POLICY_KVDIRECT_TOKEN && kind == KVV_POLICY_COUNT))
            kind = pols[pi];
    if (!x->o->check.controls || kind == KVV_POLICY_COUNT)
        return KVV_OK;
    int budget = res->budgets[0];
    for (int bi = 1; bi < res->n_budgets; bi++)
        if (res->budgets[bi] < budget)
            budget = res->budgets[bi];
    if (budget >= res->n_ctx[0])
        budget = res->n_ctx[0] / 4 > 0 ? res->n_ctx[0] / 4 : 1;
    kvv_policy_cfg cfg = kvv_policy_cfg_default(kind, budget);
    cfg.ckpt = KVV_CKPT_BF16;
    run_job *j = add_job(x, TEST, 0, cfg);
    if (!j)
        return KVV_ERR_NOMEM;
    res->has_control = true;
    j->verify = &res->control;
    return KVV_OK;
}

static const kvv_policy_kind all_policies[] = {
    KVV_POLICY_WINDOW, KVV_POLICY_STREAMING, KVV_POLICY_STREAMING_REINDEX, KVV_POLICY_H2O,
    KVV_POLICY_TOVA,
    KVV_POLICY_SNAPKV, KVV_POLICY_PYRAMIDKV, KVV_POLICY_KNORM, KVV_POLICY_QUEST,
    KVV_POLICY_KVDIRECT_LAYER, KVV_POLICY_KVDIRECT_TOKEN,
};

static bool same_engine(const kvv_engine_opts *a, const kvv_engine_opts *b)
{
    return strcmp(a->name, b->name) == 0 && a->mode == b->mode && a->n_threads == b->n_threads &&
           a->cache_type == b->cache_type && a->control == b->control && a->ggml == b->ggml;
}

/* Sizes, budgets and engines of the run; opens worker 0's engines (their
 * descriptions go into the report). */
static kvv_status setup(evict_ctx *x, kvv_error *err)
{
    const kvv_evict_opts *o = x->o;
    const kvv_check_opts *c = &o->check;
    kvv_evict_result *res = x->res;
    const kvv_prompt_set *ps = o->prompts;
    if (!ps || ps->n < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "evict: no prompt");
    res->n_prompts = ps->n;
    res->n_gen = c->n_gen;
    res->n_ctx = calloc((size_t)ps->n, sizeof *res->n_ctx);
    res->full_bytes = calloc((size_t)ps->n, sizeof *res->full_bytes);
    if (!res->n_ctx || !res->full_bytes)
        return kvv_error_set(err, KVV_ERR_NOMEM, "evict: out of memory");
    int min_ctx = 0;
    for (int p = 0; p < ps->n; p++) {
        kvv_check_opts v = *c;
        v.tokens = ps->items[p].tokens;
        v.n_tokens = ps->items[p].n_tokens;
        res->n_ctx[p] = v.n_tokens + c->n_gen;
        kvv_error verr = {0};
        kvv_status s = kvv_check_opts_validate(&v, res->n_ctx[p], &verr);
        if (s != KVV_OK)
            return kvv_error_set(err, s, "evict: prompt %d (%s): %s", p + 1, ps->items[p].name,
                                 verr.msg);
        if (min_ctx == 0 || res->n_ctx[p] < min_ctx)
            min_ctx = res->n_ctx[p];
        if (res->n_ctx[p] > x->n_ctx_max)
            x->n_ctx_max = res->n_ctx[p];
    }
    res->n_budgets = o->budgets ? o->n_budgets : 4;
    res->budgets = calloc((size_t)(res->n_budgets > 0 ? res->n_budgets : 1), sizeof *res->budgets);
    if (!res->budgets || res->n_budgets < 1)
        return kvv_error_set(err, res->budgets ? KVV_ERR_USAGE : KVV_ERR_NOMEM,
                             "evict: no budget");
    const int pct[4] = {10, 25, 50, 75};
    for (int i = 0; i < res->n_budgets; i++) {
        int b = o->budgets ? o->budgets[i] : min_ctx * pct[i] / 100;
        res->budgets[i] = b > 0 ? b : 1;
    }
    const kvv_hparams *hp = &c->model->hp;
    res->kv_bytes_per_token = (uint64_t)hp->n_layer * hp->n_head_kv *
                              (uint64_t)(hp->head_dim + hp->head_dim_v) *
                              cache_elem(c->engine.cache_type);
    res->ckpt_layer_per_token = (uint64_t)hp->n_layer * hp->n_embd * 4;
    res->ckpt_token_per_token = (uint64_t)hp->n_embd * 4;

    x->eopts[TEST] = c->engine;
    x->eopts[FIG] = o->figures ? *o->figures : c->engine;
    res->figures_is_test = same_engine(&x->eopts[FIG], &x->eopts[TEST]);
    res->n_threads = o->n_threads > 0 ? o->n_threads : kvv_parallel_cpus();
    x->eng = calloc((size_t)res->n_threads * 2, sizeof *x->eng);
    if (!x->eng)
        return kvv_error_set(err, KVV_ERR_NOMEM, "evict: out of memory");
    kvv_engine *e = NULL;
    kvv_status s = worker_engine(x, 0, TEST, &e, err);
    if (s != KVV_OK)
        return s;
    if (!kvv_engine_concurrent(e)) /* a plugin takes one call at a time */
        res->n_threads = 1;
    kvv_engine_describe(e, &res->test_engine);
    if (!res->figures_is_test) {
        kvv_error ferr = {0};
        if (worker_engine(x, 0, FIG, &e, &ferr) != KVV_OK) {
            /* The figures engine cannot run this model: measure them on the
             * engine under test instead, and say so. */
            snprintf(res->figures_note, sizeof res->figures_note,
                     "figures on the engine under test: %s cannot run this model (%.80s)",
                     x->eopts[FIG].name, ferr.msg);
            x->eopts[FIG] = x->eopts[TEST];
            res->figures_is_test = true;
        }
    }
    if (res->figures_is_test)
        res->figures_engine = res->test_engine;
    else
        kvv_engine_describe(e, &res->figures_engine);
    if (!res->figures_is_test && !kvv_engine_concurrent(e))
        res->n_threads = 1;
    res->verify_prompts = res->figures_is_test ? ps->n
                          : o->verify_prompts < 1 ? 1
                          : o->verify_prompts > ps->n ? ps->n
                                                      : o->verify_prompts;
    return KVV_OK;
}

/* Allocate both tables and the verify records (jobs point into them, so
 * they are never reallocated). */
static kvv_status alloc_tables(kvv_evict_result *res, int np, int n_kvd)
{
    size_t block = (size_t)np * (size_t)res->n_budgets * (size_t)res->n_prompts;
    size_t n_verify = (size_t)n_kvd * 2 * (size_t)res->n_budgets * (size_t)res->verify_prompts;
    res->rows = calloc(block, sizeof *res->rows);
    res->eq_rows = calloc(block, sizeof *res->eq_rows);
    res->verify = calloc(n_verify > 0 ? n_verify : 1, sizeof *res->verify);
    return res->rows && res->eq_rows && res->verify ? KVV_OK : KVV_ERR_NOMEM;
}

/* Equal-bytes rows of the baselines are their by-budget rows; a row that
 * ran holding more than the byte budget does not fit it (KV-Direct's are
 * sized to fit: checked all the same). */
static void copy_baselines(kvv_evict_result *res, int np)
{
    int P = res->n_prompts;
    for (int i = 0; i < res->n_eq_rows; i++) {
        kvv_evict_row *e = &res->eq_rows[i];
        int of = e->byte_budget_of;
        if (!kvv_policy_is_kvdirect(e->kind)) {
            int bi = i / (np * P), rest = i % (np * P);
            *e = res->rows[(size_t)bi * (size_t)np * (size_t)P + (size_t)rest];
            e->byte_budget_of = of;
        }
        if (e->engine >= 0)
            e->fits = e->bytes_peak <= (uint64_t)of * res->kv_bytes_per_token;
    }
}

/* ------------------------------------------------------------ verdict */

static void set_verdict(const kvv_evict_opts *o, kvv_evict_result *res, int n_kvd,
                        kvv_check_result *r)
{
    int exercised = 0, differ = 0;
    const kvv_evict_verify *first = NULL;
    for (int i = 0; i < res->n_verify; i++) {
        const kvv_evict_verify *v = &res->verify[i];
        exercised += v->row.recomputed_rows > 0;
        if (v->differs) {
            differ++;
            if (!first)
                first = v;
        }
    }
    if (res->has_control) {
        const kvv_evict_verify *c = &res->control;
        const char *pname = o->prompts->items[0].name;
        kvv_check_add_control(r, "KV-Direct with bf16 checkpoints", c->differs,
                              c->differs ? "%s budget %d, prompt %s: logits differ (KL max %.3g, "
                                           "token match %.1f%%)"
                                         : "%s budget %d, prompt %s: stayed bit-equal, not "
                                           "detected",
                              kvv_policy_name(c->row.kind), c->row.budget, pname, c->row.kl_max,
                              100 * c->row.greedy_match);
    }
    const char *eng = res->test_engine.name;
    int kvd_unsupported = 0;
    const char *why = "";
    for (int k = 0; k < KVV_POLICY_COUNT; k++)
        if (res->unsupported[k][0]) {
            why = res->unsupported[k];
            kvd_unsupported += kvv_policy_is_kvdirect((kvv_policy_kind)k);
        }
    if (n_kvd > 0 && kvd_unsupported == n_kvd) { /* none of the verified policies ran */
        kvv_error e = {.status = KVV_ERR_UNSUPPORTED};
        snprintf(e.msg, sizeof e.msg, "%s", why);
        kvv_check_set_error(r, &e);
        return;
    }
    if (n_kvd == 0) {
        kvv_check_set_verdict(r, KVV_VERDICT_SKIPPED,
                              "nothing verified: no KV-Direct policy requested");
        kvv_check_set_message(r, "nothing verified: the baselines' figures are findings, not a "
                                 "verdict; add kvdirect-layer or kvdirect-token to --policies");
        return;
    }
    if (!differ && exercised == 0) {
        kvv_check_set_verdict(r, KVV_VERDICT_SKIPPED,
                              "nothing verified: no KV-Direct run evicted anything");
        kvv_check_set_message(r, "nothing verified: every KV-Direct budget holds the whole "
                                 "context; give --budgets below %d",
                              res->n_ctx[0]);
        return;
    }
    char pass[160], fail[160];
    snprintf(pass, sizeof pass,
             "KV-Direct bit-equal to the full cache on %s in %d of %d runs (%d prompt%s); "
             "baselines over %d prompts",
             eng, exercised, exercised, res->verify_prompts, res->verify_prompts == 1 ? "" : "s",
             res->n_prompts);
    snprintf(fail, sizeof fail, "KV-Direct differs from the full cache on %s in %d of %d runs%s",
             eng, differ, res->n_verify,
             o->check.force_fail ? " (--force-fail: bf16 checkpoints planted)" : "");
    kvv_check_conclude(r, differ > 0, pass, fail, "KV-Direct bit-equal to the full cache");
    if (differ) {
        kvv_check_note_mismatch(r, &first->first);
        kvv_check_set_message(r, "a KV-Direct run was not bit-equal to the full cache");
    }
}

kvv_status kvv_check_evict(const kvv_evict_opts *o, kvv_evict_result *res, kvv_check_result *r,
                           kvv_error *err)
{
    memset(res, 0, sizeof *res);
    double t0 = kvv_now_seconds();
    evict_ctx x = {.o = o, .res = res};
    pthread_mutex_init(&x.lock, NULL);
    const kvv_policy_kind *pols = o->policies ? o->policies : all_policies;
    int np = o->policies ? o->n_policies : (int)(sizeof all_policies / sizeof all_policies[0]);
    int n_kvd = 0;
    for (int pi = 0; pi < np; pi++)
        n_kvd += kvv_policy_is_kvdirect(pols[pi]);
    kvv_status s = setup(&x, err);
    if (s == KVV_OK && alloc_tables(res, np, n_kvd) != KVV_OK)
        s = kvv_error_set(err, KVV_ERR_NOMEM, "evict: out of memory");
    x.full[FIG] = calloc((size_t)res->n_prompts, sizeof *x.full[FIG]);
    x.full[TEST] = res->figures_is_test ? x.full[FIG]
                                        : calloc((size_t)res->n_prompts, sizeof *x.full[TEST]);
    if (s == KVV_OK && (!x.full[FIG] || !x.full[TEST]))
        s = kvv_error_set(err, KVV_ERR_NOMEM, "evict: out of memory");
    /* Phase 1: the full-cache decodes the others are scored against: on the
     * figures engine for the baselines, on the engine under test for
     * KV-Direct (one and the same run when the engines are). */
    bool need_fig = n_kvd < np, need_test = n_kvd > 0;
    for (int p = 0; s == KVV_OK && p < res->n_prompts; p++)
        for (int e = FIG; e <= TEST; e++) {
            bool need = e == FIG ? need_fig || (res->figures_is_test && need_test &&
                                                p < res->verify_prompts)
                                 : !res->figures_is_test && need_test && p < res->verify_prompts;
            if (!need)
                continue;
            run_job *j = add_job(&x, e, p, kvv_policy_cfg_default(KVV_POLICY_FULL,
                                                                   res->n_ctx[p]));
            if (!j)
                s = kvv_error_set(err, KVV_ERR_NOMEM, "evict: out of memory");
            else
                j->full = true;
        }
    /* Count phase 2 before running phase 1, so progress has its total. */
    int n_full = x.n_jobs;
    if (s == KVV_OK && (plan_tables(&x, pols, np) || plan_control(&x, pols, np)))
        s = kvv_error_set(err, KVV_ERR_NOMEM, "evict: out of memory");
    if (s == KVV_OK) {
        /* Phase 2 needs the full runs: run phase 1's jobs alone first. */
        run_job *later = NULL;
        int n_later = x.n_jobs - n_full;
        if (n_later > 0) {
            later = malloc((size_t)n_later * sizeof *later);
            if (later)
                memcpy(later, x.jobs + n_full, (size_t)n_later * sizeof *later);
        }
        if (n_later > 0 && !later)
            s = kvv_error_set(err, KVV_ERR_NOMEM, "evict: out of memory");
        if (s == KVV_OK) {
            x.n_jobs = n_full;
            s = run_jobs(&x, err);
        }
        if (s == KVV_OK && n_later > 0) {
            memcpy(x.jobs, later, (size_t)n_later * sizeof *later);
            x.n_jobs = n_later;
            s = run_jobs(&x, err);
        }
        free(later);
    }
    for (int p = 0; s == KVV_OK && p < res->n_prompts; p++)
        res->full_bytes[p] = x.full[FIG][p].logits ? x.full[FIG][p].stats.bytes_kv
                                                   : x.full[TEST][p].stats.bytes_kv;
    for (int i = 0; x.eng && i < res->n_threads * 2; i++)
        kvv_engine_close(x.eng[i]);
    for (int p = 0; p < res->n_prompts; p++) {
        if (x.full[FIG])
            kvv_policy_run_out_free(&x.full[FIG][p]);
        if (x.full[TEST] && x.full[TEST] != x.full[FIG])
            kvv_policy_run_out_free(&x.full[TEST][p]);
    }
    if (x.full[TEST] != x.full[FIG])
        free(x.full[TEST]);
    free(x.full[FIG]);
    free(x.eng);
    free(x.jobs);
    pthread_mutex_destroy(&x.lock);
    if (s == KVV_OK) {
        copy_baselines(res, np);
        s = kvv_evict_aggregate(res, err);
    }
    if (s != KVV_OK) {
        kvv_check_set_error(r, err);
        return s;
    }
    res->seconds = kvv_now_seconds() - t0;
    kvv_check_set_engine(r, &res->test_engine);
    kvv_evict_details_json(res, o->prompts, r->details);
    json_object_set_new(r->details, "force_fail", json_boolean(o->check.force_fail));
    json_t *un = json_object(); /* policies the engine could not run, and why */
    for (int k = 0; k < KVV_POLICY_COUNT; k++)
        if (res->unsupported[k][0])
            json_object_set_new(un, kvv_policy_name((kvv_policy_kind)k),
                                json_string(res->unsupported[k]));
    json_object_set_new(r->details, "unsupported_policies", un);
    set_verdict(o, res, n_kvd, r);
    r->seconds = res->seconds;
    return KVV_OK;
}
