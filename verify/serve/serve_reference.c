/* serve_reference.c — the server against kvverify's own engine on the GGUF:
 * the model check (is it the same model at all?) and the reference check
 * (greedy tokens and logprobs, near-ties told apart; see serve.h). */
#include "verify/serve/serve_impl.h"

#include "engine/greedy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A wrong model: first-step logprobs further apart than this (nats), or a
 * top-1 outside the reference's top-k. Far above any two engines' rounding
 * on one model, far below two models' differences. */
#define KVV_SERVE_MODEL_TOL 1.0

/* Greedy decoding on kvverify's engine: toks[n], lsm[n][V] the log-softmax
 * (double) of each step's logits. */
typedef struct {
    int n, V;
    int32_t *toks;
    double *lsm;
} ref_run;

static void ref_free(ref_run *rr)
{
    free(rr->toks);
    free(rr->lsm);
    memset(rr, 0, sizeof *rr);
}

static void log_softmax(const float *l, int V, double *out)
{
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++)
        mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < V; i++)
        sum += exp((double)l[i] - mx);
    double lse = mx + log(sum);
    for (int i = 0; i < V; i++)
        out[i] = (double)l[i] - lse;
}

/* kvv_greedy_row_fn: row i's log-softmax into the run */
static kvv_status keep_row(void *user, int i, const float *row, int32_t argmax, kvv_error *err)
{
    (void)argmax;
    (void)err;
    ref_run *rr = user;
    log_softmax(row, rr->V, &rr->lsm[(size_t)i * rr->V]);
    return KVV_OK;
}

static kvv_status ref_greedy(const kvv_serve *s, int n, ref_run *rr, kvv_check_result *r,
                             kvv_error *err)
{
    const kvv_check_opts *o = s->o.check;
    int T = o->n_tokens, V = s->n_vocab;
    memset(rr, 0, sizeof *rr);
    kvv_engine_opts eo = kvv_check_engine_opts(o, T + n);
    kvv_engine *e = NULL;
    kvv_status st = kvv_check_open_engine(o->model, &eo, 0, r->name, &e, err);
    if (st)
        return st;
    kvv_engine_desc d;
    kvv_engine_describe(e, &d);
    kvv_check_set_engine(r, &d);
    rr->n = n;
    rr->V = V;
    rr->toks = malloc((size_t)n * sizeof *rr->toks);
    rr->lsm = malloc((size_t)n * V * sizeof *rr->lsm);
    float *logits = malloc((size_t)V * sizeof *logits);
    if (!rr->toks || !rr->lsm || !logits) {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", r->name);
        goto out;
    }
    /* the one greedy decode (engine/greedy.h): row i's log-softmax kept */
    kvv_greedy g = {.forward = kvv_greedy_engine_forward, .ctx = e, .n_vocab = V,
                    .prompt = o->tokens, .n_prompt = T, .n_gen = n, .one_row = true,
                    .on_row = keep_row, .user = rr};
    st = kvv_greedy_decode(&g, logits, rr->toks, NULL, err);
out:
    free(logits);
    kvv_engine_close(e);
    if (st)
        ref_free(rr);
    return st;
}

/* The reference's top-1 and top-2 log-probabilities at step i. */
static void top2(const ref_run *rr, int i, double *t1, double *t2)
{
    *t1 = *t2 = -INFINITY;
    for (int v = 0; v < rr->V; v++) {
        double x = rr->lsm[(size_t)i * rr->V + v];
        if (x > *t1) {
            *t2 = *t1;
            *t1 = x;
        } else if (x > *t2) {
            *t2 = x;
        }
    }
}

/* Server c against the reference up to the first divergence. */
typedef struct {
    int diverge;      /* first step whose token differs (-1: none) */
    int steps;        /* steps compared (through the divergence) */
    double max_delta; /* max |lp_server - lp_ref| over the compared top-k and chosen */
    int max_at;       /* its step */
    double gap;       /* reference top-1 minus top-2 at the divergence */
    bool near_tie;    /* gap <= 2 * max_delta */
} ref_cmp;

static ref_cmp compare(const ref_run *rr, const kvv_serve_completion *c)
{
    ref_cmp x = {.diverge = -1, .max_at = -1};
    int n = c->n < rr->n ? c->n : rr->n;
    for (int i = 0; i < n; i++) {
        const double *l = &rr->lsm[(size_t)i * rr->V];
        double d = fabs(c->logprob[i] - l[c->tokens[i]]);
        for (int j = 0; j < c->k; j++) {
            int32_t id = c->top_id[(size_t)i * c->k + j];
            if (id >= 0) {
                double dj = fabs(c->top_lp[(size_t)i * c->k + j] - l[id]);
                d = dj > d ? dj : d;
            }
        }
        if (!(d <= x.max_delta)) { /* NaN too */
            x.max_delta = d;
            x.max_at = i;
        }
        x.steps = i + 1;
        if (c->tokens[i] != rr->toks[i]) {
            x.diverge = i;
            double t1, t2;
            top2(rr, i, &t1, &t2);
            x.gap = t1 - t2;
            break;
        }
    }
    x.near_tie = x.diverge >= 0 && x.gap <= 2 * x.max_delta;
    return x;
}

static bool ref_fails(const ref_cmp *x, double tol)
{
    return !(x->max_delta <= tol) || (x->diverge >= 0 && !x->near_tie);
}

/* ------------------------------------------------------------ model */

void kvv_serve_check_model(kvv_serve *s, kvv_check_result *r)
{
    const kvv_check_opts *o = s->o.check;
    kvv_error err = {0};
    const json_t *meta = json_object_get(s->info, "server_meta");
    const json_t *nv = json_object_get(meta, "n_vocab");
    if (json_is_integer(nv) && json_integer_value(nv) != s->n_vocab) {
        s->model_bad = true;
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "the server's vocabulary has %lld tokens, "
                              "the GGUF's %d", (long long)json_integer_value(nv), s->n_vocab);
        kvv_check_set_message(r, "the server does not serve this model (GET /v1/models "
                                 "meta.n_vocab); no other check runs");
        return;
    }
    kvv_serve_job j = {.prompt = o->tokens, .n_prompt = o->n_tokens, .n_predict = 1};
    snprintf(j.what, sizeof j.what, "serve-model: first step of the prompt");
    if (kvv_serve_ask(s, &j)) {
        kvv_serve_set_failed(s, r, &j.err);
        return;
    }
    ref_run rr;
    if (ref_greedy(s, 1, &rr, r, &err)) {
        kvv_serve_completion_free(&j.c);
        kvv_check_set_error(r, &err);
        return;
    }
    /* the server's top-1 among the reference's top-k, and the logprobs close */
    kvv_serve_completion *c = &j.c;
    if (o->force_fail)
        for (int i = 0; i < c->k; i++)
            if (c->top_id[i] >= 0)
                c->top_id[i] = (c->top_id[i] + 1) % s->n_vocab;
    ref_cmp x = compare(&rr, c);
    int rank = 0;
    double lp1 = rr.lsm[c->top_id[0] >= 0 ? c->top_id[0] : 0];
    for (int v = 0; v < s->n_vocab; v++)
        rank += rr.lsm[v] > lp1;
    bool bad = !(x.max_delta <= KVV_SERVE_MODEL_TOL) || rank >= c->k;
    if (o->controls) { /* the same answer with every id shifted by one must be caught */
        kvv_serve_completion p;
        bool seen = false;
        if (kvv_serve_completion_copy(&p, c) == KVV_OK) {
            for (int i = 0; i < p.k; i++)
                if (p.top_id[i] >= 0)
                    p.top_id[i] = (p.top_id[i] + 1) % s->n_vocab;
            ref_cmp y = compare(&rr, &p);
            seen = !(y.max_delta <= KVV_SERVE_MODEL_TOL);
            kvv_serve_completion_free(&p);
        }
        kvv_check_add_control(r, "the answer's token ids shifted by one", seen,
                              seen ? "caught as another model" : "not caught");
    }
    json_object_set_new(r->details, "max_delta_logprob", json_real(x.max_delta));
    json_object_set_new(r->details, "server_top1_rank_in_reference", json_integer(rank));
    s->model_bad = bad;
    char key[200], fail[240];
    snprintf(key, sizeof key, "vocabulary %d; first-step top-%d logprobs within %.3g nats of "
             "the reference (max %.3g)", s->n_vocab, c->k, KVV_SERVE_MODEL_TOL, x.max_delta);
    snprintf(fail, sizeof fail, "not the GGUF's model: first-step logprobs %.3g nats apart, "
             "server's top-1 is the reference's #%d", x.max_delta, rank + 1);
    kvv_check_conclude(r, bad, key, fail, "the server's answer matched the GGUF");
    if (bad)
        kvv_check_set_message(r, "the server does not serve this model (its first-step "
                                 "logprobs cannot come from the GGUF); no other check runs");
    ref_free(&rr);
    kvv_serve_completion_free(&j.c);
}

/* ------------------------------------------------------------ reference */

void kvv_serve_check_reference(kvv_serve *s, kvv_check_result *r)
{
    const kvv_check_opts *o = s->o.check;
    int n = s->o.n_predict;
    kvv_error err = {0};
    kvv_serve_job j = {.prompt = o->tokens, .n_prompt = o->n_tokens, .n_predict = n,
                       .cache_prompt = s->o.cache_prompt};
    snprintf(j.what, sizeof j.what, "serve-reference: greedy completion");
    if (kvv_serve_ask(s, &j)) {
        kvv_serve_set_failed(s, r, &j.err);
        return;
    }
    ref_run rr;
    if (ref_greedy(s, n, &rr, r, &err)) {
        kvv_serve_completion_free(&j.c);
        kvv_check_set_error(r, &err);
        return;
    }
    double planted = 10 * s->o.tol + 1;
    if (o->force_fail)
        j.c.top_lp[0] -= (float)planted;
    ref_cmp x = compare(&rr, &j.c);
    if (o->controls) {
        kvv_serve_completion p;
        bool seen = false;
        if (kvv_serve_completion_copy(&p, &j.c) == KVV_OK) {
            p.top_lp[0] -= (float)planted;
            ref_cmp y = compare(&rr, &p);
            seen = ref_fails(&y, s->o.tol);
            kvv_serve_completion_free(&p);
        }
        kvv_check_add_control(r, "one logprob moved by 10 x tol + 1 nats", seen,
                              seen ? "beyond --tol: caught" : "not caught");
    }
    json_t *steps = json_array();
    for (int i = 0; i < x.steps; i++) {
        double t1, t2;
        top2(&rr, i, &t1, &t2);
        json_t *e = json_object();
        json_object_set_new(e, "step", json_integer(i));
        json_object_set_new(e, "server_token", json_integer(j.c.tokens[i]));
        json_object_set_new(e, "reference_token", json_integer(rr.toks[i]));
        json_object_set_new(e, "reference_gap", json_real(t1 - t2));
        json_object_set_new(e, "delta_chosen",
                            json_real(fabs(j.c.logprob[i] - rr.lsm[(size_t)i * rr.V + j.c.tokens[i]])));
        json_array_append_new(steps, e);
    }
    json_object_set_new(r->details, "steps", steps);
    json_object_set_new(r->details, "first_divergence", json_integer(x.diverge));
    json_object_set_new(r->details, "max_delta_logprob", json_real(x.max_delta));
    json_object_set_new(r->details, "tol", json_real(s->o.tol));
    json_object_set_new(r->details, "near_tie", json_boolean(x.near_tie));
    char pass[240], fail[300];
    if (x.diverge < 0)
        snprintf(pass, sizeof pass, "%d of %d greedy tokens equal; max |d logprob| %.3g <= %.3g "
                 "(step %d)", n, n, x.max_delta, s->o.tol, x.max_at);
    else
        snprintf(pass, sizeof pass, "tokens part at step %d: a near-tie (reference gap %.3g <= "
                 "2 x max |d logprob| %.3g)", x.diverge, x.gap, x.max_delta);
    if (!(x.max_delta <= s->o.tol))
        snprintf(fail, sizeof fail, "max |d logprob| %.3g > --tol %.3g at step %d%s", x.max_delta,
                 s->o.tol, x.max_at, x.diverge >= 0 ? "; tokens part too" : "");
    else
        snprintf(fail, sizeof fail, "tokens part at step %d, not a near-tie: reference gap %.3g "
                 "> 2 x max |d logprob| %.3g", x.diverge, x.gap, x.max_delta);
    kvv_check_conclude(r, ref_fails(&x, s->o.tol), pass, fail, "the server agreed with the reference");
    ref_free(&rr);
    kvv_serve_completion_free(&j.c);
}
