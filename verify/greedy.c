/* greedy.c — cached vs cache-free greedy decoding (see greedy.h). */
#include "verify/greedy.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/greedy.h"
#include "runtime/logits.h"
#include "verify/parallel.h"

typedef struct {
    const kvv_check_opts *o;
    kvv_check_result *r;
    int T, N, V;
    int32_t *seq;     /* [T+N] prompt then generated (scratch for the no-cache run) */
    int32_t *pos;     /* [T+N] 0..T+N-1 */
    int32_t *tok_c;   /* [N] cached run's tokens */
    int32_t *tok_n;   /* [N] no-cache run's tokens */
    int32_t *tok_x;   /* [N] control run's tokens */
    float *lc, *ln, *lx; /* [N][V] logits per step: cached, no-cache, control */
} greedy_ctx;

/* Cached decode on e: prompt, then N-1 single-token steps. */
static kvv_status decode_cached(greedy_ctx *c, kvv_engine *e, int32_t *toks, float *logits,
                                kvv_error *err)
{
    kvv_engine_reset(e);
    const kvv_greedy g = {.forward = kvv_greedy_engine_forward, .ctx = e, .n_vocab = c->V,
                          .prompt = c->o->tokens, .n_prompt = c->T, .n_gen = c->N};
    return kvv_greedy_decode(&g, logits, toks, NULL, err);
}

/* One cache-free step: the whole sequence seq[0 .. T+i) from scratch on e;
 * its last logits row into ln[i], its argmax into tok_n[i]. */
static kvv_status nocache_step(greedy_ctx *c, kvv_engine *e, const int32_t *seq, int i,
                               kvv_error *err)
{
    float *row = c->ln + (size_t)i * c->V;
    kvv_engine_reset(e);
    kvv_status s = kvv_engine_forward(e, c->T + i, seq, c->pos, NULL, KVV_LOGITS_LAST, row, err);
    if (!s)
        c->tok_n[i] = kvv_logits_argmax(row, c->V);
    return s;
}

/* The cache-free steps as independent jobs (they share nothing but the
 * sequence they read): each worker has its own engine, opened on first
 * use (worker 0 uses the caller's). */
typedef struct {
    greedy_ctx *c;
    const int32_t *seq;
    kvv_engine **engines;  /* [n_workers] */
    kvv_engine_opts eo;
    pthread_mutex_t lock;  /* status, err, progress */
    kvv_status status;
    kvv_error err;
    int done;
} nocache_jobs;

static void nocache_job(void *user, int i, int worker)
{
    nocache_jobs *j = user;
    kvv_error err = {0};
    kvv_status s = KVV_OK;
    if (!j->engines[worker])
        s = kvv_engine_open(j->c->o->model, &j->eo, &j->engines[worker], &err);
    if (!s)
        s = nocache_step(j->c, j->engines[worker], j->seq, i, &err);
    pthread_mutex_lock(&j->lock);
    if (s && !j->status) {
        j->status = s;
        j->err = err;
    }
    int done = ++j->done;
    const kvv_check_opts *o = j->c->o;
    if (o->progress && (done % 8 == 0 || done == j->c->N))
        o->progress(o->progress_user, "greedy", done, j->c->N);
    pthread_mutex_unlock(&j->lock);
}

/* No-cache decode: recompute the whole sequence at every step. Step i
 * reads the tokens of steps before it; they are taken from the cached run
 * (toks), so the steps are independent and run o->n_jobs at a time. The
 * results are exactly those of running the steps one after another: up to
 * the first step whose token differs from the cached run's, the sequences
 * are the same; after it, the cache-free run continues with its own
 * tokens, one step at a time, as the sequential decode would. */
static kvv_status decode_nocache(greedy_ctx *c, kvv_engine *e, const kvv_engine_opts *eo,
                                 const int32_t *toks, kvv_error *err)
{
    memcpy(c->seq, c->o->tokens, (size_t)c->T * sizeof *c->seq);
    memcpy(c->seq + c->T, toks, (size_t)(c->N - 1) * sizeof *c->seq);
    int workers = kvv_check_jobs(c->o);
    nocache_jobs j = {.c = c, .seq = c->seq, .eo = *eo, .status = KVV_OK};
    j.engines = calloc((size_t)workers, sizeof *j.engines);
    if (!j.engines)
        return kvv_error_set(err, KVV_ERR_NOMEM, "greedy: out of memory");
    j.engines[0] = e;
    pthread_mutex_init(&j.lock, NULL);
    kvv_parallel_for(c->N, workers, nocache_job, &j);
    pthread_mutex_destroy(&j.lock);
    for (int w = 1; w < workers; w++)
        kvv_engine_close(j.engines[w]);
    free(j.engines);
    if (j.status) {
        *err = j.err;
        return j.status;
    }
    /* from the first divergence on, the cache-free run's own continuation */
    int i = 0;
    while (i < c->N - 1 && c->tok_n[i] == toks[i])
        i++;
    for (i = i + 1; i < c->N; i++) {
        c->seq[c->T + i - 1] = c->tok_n[i - 1];
        kvv_status s = nocache_step(c, e, c->seq, i, err);
        if (s)
            return s;
    }
    return KVV_OK;
}

typedef struct {
    int first_token_diff;   /* step, -1 if none */
    int first_logit_diff;   /* step, -1 if none */
    int steps;              /* steps whose logits were compared */
    kvv_cmp_stats st;
} cmp_out;

/* Compare a cached-style run (toks, logits) against the no-cache run. */
static void compare_runs(const greedy_ctx *c, const int32_t *toks, const float *logits,
                         cmp_out *out, json_t *per_step)
{
    kvv_cmp_init(&out->st);
    out->first_token_diff = out->first_logit_diff = -1;
    out->steps = 0;
    for (int i = 0; i < c->N; i++) {
        kvv_cmp_stats s;
        kvv_cmp_init(&s);
        kvv_cmp_update(&s, c->ln + (size_t)i * c->V, logits + (size_t)i * c->V, (size_t)c->V);
        kvv_cmp_merge(&out->st, &s);
        out->steps++;
        if (per_step)
            json_array_append_new(per_step, json_integer((json_int_t)s.n_diff));
        if (s.n_diff && out->first_logit_diff < 0)
            out->first_logit_diff = i;
        if (toks[i] != c->tok_n[i]) {
            out->first_token_diff = i;
            break; /* later steps see different contexts */
        }
    }
}

static json_t *tokens_json(const int32_t *t, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(t[i]));
    return a;
}

static json_t *top2_json(const float *row, int V)
{
    int i1, i2;
    float v1, v2;
    kvv_logits_top2(row, V, &i1, &v1, &i2, &v2);
    char m[40];
    snprintf(m, sizeof m, "%.9g", (double)v1 - (double)v2);
    char t1[24], t2[24], b1[24], b2[24];
    snprintf(t1, sizeof t1, "%.9g", (double)v1);
    snprintf(t2, sizeof t2, "%.9g", (double)v2);
    snprintf(b1, sizeof b1, "0x%08x", (unsigned)kvv_f32_bits(v1));
    snprintf(b2, sizeof b2, "0x%08x", (unsigned)kvv_f32_bits(v2));
    return json_pack("{s:i, s:s, s:s, s:i, s:s, s:s, s:s}", "top1", i1, "top1_logit", t1,
                     "top1_bits", b1, "top2", i2, "top2_logit", t2, "top2_bits", b2, "margin",
                     m);
}

/* The top-1 minus top-2 logit of each of N rows [N][V] (how close each
 * greedy choice was), for the report's margin-per-step figure. */
static json_t *margins_json(const float *logits, int N, int V)
{
    json_t *a = json_array();
    for (int i = 0; i < N; i++) {
        int i1, i2;
        float v1, v2;
        kvv_logits_top2(logits + (size_t)i * V, V, &i1, &v1, &i2, &v2);
        double m = (double)v1 - (double)v2;
        json_array_append_new(a, i2 >= 0 && isfinite(m) ? json_real(m) : json_null());
    }
    return a;
}

static kvv_status run(greedy_ctx *c, kvv_error *err)
{
    const kvv_check_opts *o = c->o;
    kvv_check_result *r = c->r;
    kvv_engine *e = NULL, *ep = NULL;
    kvv_engine_opts eo = kvv_check_engine_opts(o, c->T + c->N);
    kvv_status s = kvv_engine_open(o->model, &eo, &e, err);
    if (s)
        return s;
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    kvv_check_set_engine(r, &d);
    /* the batch sizes compared: the cached run's prefill T and 1-token steps
     * against the cache-free run's T .. T+N-1 */
    const int sizes[] = {c->T, c->N > 1 ? 1 : c->T, c->T + c->N - 1};
    if (kvv_check_skip_one_path(r, e, sizes, 3))
        goto out;
    if (o->controls || o->force_fail) {
        kvv_engine_opts po = eo;
        po.control |= KVV_CTL_PERTURB_WEIGHT;
        if ((s = kvv_engine_open(o->model, &po, &ep, err)))
            goto out;
    }
    if ((s = decode_cached(c, o->force_fail ? ep : e, c->tok_c, c->lc, err)))
        goto out;
    if ((s = decode_nocache(c, e, &eo, c->tok_c, err)))
        goto out;

    json_t *per_step = json_array();
    json_object_set_new(r->details, "logits_differing_per_step", per_step);
    cmp_out m;
    compare_runs(c, c->tok_c, c->lc, &m, per_step);
    if (kvv_check_add_row(r, -1, "logits", &m.st))
        goto nomem;
    if (m.st.first >= 0)
        kvv_check_row_where(r, "step=%d,i=%d", (int)(m.st.first / c->V),
                            (int)(m.st.first % c->V));

    int step = m.first_token_diff >= 0 ? m.first_token_diff : m.first_logit_diff;
    if (step >= 0) {
        const float *rc = c->lc + (size_t)step * c->V, *rn = c->ln + (size_t)step * c->V;
        json_object_set_new(r->details, "at_first_difference",
                            json_pack("{s:i, s:o, s:o}", "step", step, "cached",
                                      top2_json(rc, c->V), "nocache", top2_json(rn, c->V)));
        kvv_cmp_stats s1;
        kvv_cmp_init(&s1);
        kvv_cmp_update(&s1, rn, rc, (size_t)c->V);
        kvv_mismatch mm = {.layer = -1, .token = step, .head = -1, .index = -1};
        if (m.first_logit_diff == step && s1.first >= 0) {
            snprintf(mm.tensor, sizeof mm.tensor, "logits");
            mm.index = (int)s1.first;
            mm.expected = s1.first_ref;
            mm.actual = s1.first_test;
        } else {
            snprintf(mm.tensor, sizeof mm.tensor, "token");
            mm.expected = (float)c->tok_n[step];
            mm.actual = (float)c->tok_c[step];
        }
        int i1, i2, j1, j2;
        float v1, v2, w1, w2;
        kvv_logits_top2(rc, c->V, &i1, &v1, &i2, &v2);
        kvv_logits_top2(rn, c->V, &j1, &w1, &j2, &w2);
        snprintf(mm.variant, sizeof mm.variant, "step %d, top-2 margin %.6g", step,
                 (double)v1 - (double)v2);
        kvv_check_note_mismatch(r, &mm);
        kvv_check_set_message(r,
                              "at step %d: cached top-1 %d (%.9g) top-2 %d (%.9g) margin %.9g; "
                              "no-cache top-1 %d (%.9g) top-2 %d (%.9g) margin %.9g",
                              step, i1, (double)v1, i2, (double)v2, (double)v1 - (double)v2, j1,
                              (double)w1, j2, (double)w2, (double)w1 - (double)w2);
    }

    if (o->controls) {
        if ((s = decode_cached(c, ep, c->tok_x, c->lx, err)))
            goto out;
        cmp_out x;
        compare_runs(c, c->tok_x, c->lx, &x, NULL);
        char tokdiv[64];
        if (x.first_token_diff >= 0)
            snprintf(tokdiv, sizeof tokdiv, "tokens diverge at step %d", x.first_token_diff);
        else
            snprintf(tokdiv, sizeof tokdiv, "tokens identical");
        bool det = x.st.n_diff > 0 || x.first_token_diff >= 0;
        char what[128], name[160];
        snprintf(name, sizeof name, "cached decode with %s",
                 kvv_engine_control_name(kvv_engine_options(ep)->control, "one perturbed weight "
                                         "(output_norm[0])", what, sizeof what));
        if (kvv_check_add_control(r, name, det,
                                  "%llu of %llu logits differ over %d steps; %s",
                                  (unsigned long long)x.st.n_diff, (unsigned long long)x.st.n,
                                  x.steps, tokdiv))
            goto nomem;
    }

    json_object_set_new(r->details, "n_prompt", json_integer(c->T));
    json_object_set_new(r->details, "n_gen", json_integer(c->N));
    json_object_set_new(r->details, "steps_compared", json_integer(m.steps));
    json_object_set_new(r->details, "first_token_divergence", json_integer(m.first_token_diff));
    json_object_set_new(r->details, "first_logits_difference", json_integer(m.first_logit_diff));
    json_object_set_new(r->details, "tokens_cached", tokens_json(c->tok_c, c->N));
    json_object_set_new(r->details, "tokens_nocache", tokens_json(c->tok_n, c->N));
    json_object_set_new(r->details, "margins_cached", margins_json(c->lc, c->N, c->V));
    json_object_set_new(r->details, "margins_nocache", margins_json(c->ln, c->N, c->V));
    json_object_set_new(r->details, "force_fail", json_boolean(o->force_fail));

    char pass[160], fail[160];
    snprintf(pass, sizeof pass, "%d of %d tokens identical; logits bit-equal at every step", c->N,
             c->N);
    char nonfinite[64] = "";
    if (m.st.n_nan || m.st.n_inf)
        snprintf(nonfinite, sizeof nonfinite, ", %llu NaN, %llu inf",
                 (unsigned long long)m.st.n_nan, (unsigned long long)m.st.n_inf);
    /* "before divergence" only when the tokens diverged */
    char toks[64];
    if (m.first_token_diff >= 0)
        snprintf(toks, sizeof toks, "%d of %d tokens match before divergence",
                 m.first_token_diff, c->N);
    else
        snprintf(toks, sizeof toks, "%d of %d tokens identical", c->N, c->N);
    snprintf(fail, sizeof fail, "%s; logits differ from step %d (%llu values%s)", toks,
             m.first_logit_diff, (unsigned long long)m.st.n_diff, nonfinite);
    kvv_check_conclude(r, m.first_token_diff >= 0 || m.st.n_diff, pass, fail,
                       "tokens and logits identical");
    goto out;
nomem:
    s = kvv_error_set(err, KVV_ERR_NOMEM, "greedy: out of memory");
out:
    kvv_engine_close(ep);
    kvv_engine_close(e);
    return s;
}

/* Its own option check (-n), the buffers, run, free. */
static kvv_status body(void *ctx, kvv_error *err)
{
    greedy_ctx *c = ctx;
    const kvv_check_opts *o = c->o;
    c->N = o->n_gen;
    if (c->N < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "greedy: -n %d: need at least 1 token", c->N);
    c->T = o->n_tokens;
    c->V = o->model->hp.n_vocab;
    size_t nl = (size_t)c->N * c->V;
    c->seq = malloc((size_t)(c->T + c->N) * sizeof *c->seq);
    c->pos = malloc((size_t)(c->T + c->N) * sizeof *c->pos);
    c->tok_c = calloc((size_t)c->N, sizeof *c->tok_c);
    c->tok_n = calloc((size_t)c->N, sizeof *c->tok_n);
    c->tok_x = calloc((size_t)c->N, sizeof *c->tok_x);
    c->lc = malloc(nl * sizeof(float));
    c->ln = malloc(nl * sizeof(float));
    c->lx = malloc(nl * sizeof(float));
    kvv_status s = KVV_OK;
    if (!c->seq || !c->pos || !c->tok_c || !c->tok_n || !c->tok_x || !c->lc || !c->ln || !c->lx)
        s = kvv_error_set(err, KVV_ERR_NOMEM, "greedy: out of memory for %d steps", c->N);
    if (!s) {
        for (int i = 0; i < c->T + c->N; i++)
            c->pos[i] = i;
        s = run(c, err);
    }
    free(c->seq);
    free(c->pos);
    free(c->tok_c);
    free(c->tok_n);
    free(c->tok_x);
    free(c->lc);
    free(c->ln);
    free(c->lx);
    return s;
}

kvv_status kvv_check_greedy(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err)
{
    greedy_ctx c = {.o = o, .r = r};
    int n = o->n_gen > 0 ? o->n_gen : 1; /* positions evaluated: n_tokens + n_gen - 1 */
    return kvv_check_frame(o, r, o->n_tokens + n - 1, body, &c, err);
}
