/* serve_checks.c — the server's bit-level checks: repeat, concurrent,
 * prefix (see serve.h). */
#include "verify/serve/serve_impl.h"

#include <stdlib.h>
#include <string.h>

/* Completion i of n differs from completion 0: how many, and where first. */
typedef struct {
    int n_diff;       /* completions not bit-equal to the first */
    int first;        /* first differing step over all (-1: none) */
    int first_token;  /* first step whose token differs (-1: none) */
    int distinct;     /* distinct completions among them */
} spread;

static spread spread_of(const kvv_serve_completion *const *c, int n)
{
    spread sp = {0, -1, -1, n > 0 ? 1 : 0};
    for (int i = 1; i < n; i++) {
        int tok, at = kvv_serve_completion_diff(c[0], c[i], &tok);
        if (at >= 0) {
            sp.n_diff++;
            if (sp.first < 0 || at < sp.first)
                sp.first = at;
            if (tok >= 0 && (sp.first_token < 0 || tok < sp.first_token))
                sp.first_token = tok;
        }
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = kvv_serve_completion_diff(c[j], c[i], NULL) < 0;
        sp.distinct += !seen;
    }
    return sp;
}

/* " ; first at step s (tokens part at step t)" into buf. */
static const char *where_text(const spread *sp, char *buf, size_t size)
{
    if (sp->first < 0)
        buf[0] = 0;
    else if (sp->first_token >= 0)
        snprintf(buf, size, "; first at step %d, tokens part at step %d", sp->first,
                 sp->first_token);
    else
        snprintf(buf, size, "; first at step %d (logprobs only, tokens equal)", sp->first);
    return buf;
}

/* The control every bit-level check runs: a copy of b with one logprob
 * changed by one ULP must differ from a. */
static void control(kvv_serve *s, kvv_check_result *r, const kvv_serve_completion *a,
                    const kvv_serve_completion *b)
{
    if (!s->o.check->controls)
        return;
    kvv_serve_completion p;
    if (kvv_serve_completion_copy(&p, b)) {
        kvv_check_add_control(r, "one logprob changed by one ULP", false, "out of memory");
        return;
    }
    int step = p.n / 2;
    kvv_serve_completion_plant(&p, step);
    int at = kvv_serve_completion_diff(a, &p, NULL);
    kvv_check_add_control(r, "one logprob changed by one ULP", at >= 0,
                          at >= 0 ? "seen at step %d" : "not seen (planted at step %d)",
                          at >= 0 ? at : step);
    kvv_serve_completion_free(&p);
}

static kvv_serve_job job_for(const kvv_serve *s, const int32_t *prompt, int n, bool cache,
                             const char *what)
{
    kvv_serve_job j = {.prompt = prompt, .n_prompt = n, .n_predict = s->o.n_predict,
                       .cache_prompt = cache};
    snprintf(j.what, sizeof j.what, "%s", what);
    return j;
}

/* ------------------------------------------------------------ repeat */

void kvv_serve_check_repeat(kvv_serve *s, kvv_check_result *r)
{
    const kvv_check_opts *o = s->o.check;
    int n = s->o.repeats;
    kvv_serve_job *jobs = calloc((size_t)n, sizeof *jobs);
    const kvv_serve_completion **cs = calloc((size_t)n, sizeof *cs);
    if (!jobs || !cs) {
        free(jobs);
        free(cs);
        kvv_check_set_verdict(r, KVV_VERDICT_ERROR, "out of memory");
        return;
    }
    for (int i = 0; i < n; i++) {
        char what[96];
        snprintf(what, sizeof what, "serve-repeat request %d of %d", i + 1, n);
        jobs[i] = job_for(s, o->tokens, o->n_tokens, s->o.cache_prompt, what);
        if (kvv_serve_ask(s, &jobs[i])) {
            kvv_serve_set_failed(s, r, &jobs[i].err);
            goto done;
        }
        cs[i] = &jobs[i].c;
    }
    if (o->force_fail)
        kvv_serve_completion_plant(&jobs[n - 1].c, s->o.n_predict / 2);
    for (int i = 1; i < n; i++) {
        char what[48];
        snprintf(what, sizeof what, "request %d vs 1", i + 1);
        kvv_serve_add_row(r, what, &jobs[0].c, &jobs[i].c);
    }
    spread sp = spread_of(cs, n);
    control(s, r, &jobs[0].c, &jobs[1].c);
    char w[96], pass[128], fail[200];
    snprintf(pass, sizeof pass, "%d requests, %d steps each: bit-equal", n, s->o.n_predict);
    snprintf(fail, sizeof fail, "%d of %d requests differ from the first, %d distinct%s",
             sp.n_diff, n, sp.distinct, where_text(&sp, w, sizeof w));
    json_object_set_new(r->details, "requests", json_integer(n));
    json_object_set_new(r->details, "distinct", json_integer(sp.distinct));
    json_object_set_new(r->details, "first_step", json_integer(sp.first));
    json_object_set_new(r->details, "first_token_step", json_integer(sp.first_token));
    kvv_check_conclude(r, sp.n_diff > 0, pass, fail, "the requests were bit-equal");
done:
    kvv_serve_jobs_free(jobs, n);
    free(jobs);
    free(cs);
}

/* ------------------------------------------------------------ concurrent */

/* The others' prompt lengths: around the request's, none equal to it. */
static int other_len(const kvv_serve *s, int T, int i)
{
    static const int num[] = {1, 4, 3, 5, 2, 7}, den[] = {2, 2, 2, 4, 3, 4};
    int len = T * num[i % 6] / den[i % 6] + i / 6 + 1;
    int cap = s->n_ctx > 0 ? s->n_ctx - 3 * s->o.n_predict - 8 : 4 * T;
    if (len > cap)
        len = cap;
    if (len == T)
        len = T > 1 ? T - 1 : T + 1;
    return len > 0 ? len : 1;
}

void kvv_serve_check_concurrent(kvv_serve *s, kvv_check_result *r)
{
    const kvv_check_opts *o = s->o.check;
    int K = s->parallel - 1, R = s->o.rounds, T = o->n_tokens;
    if (K < 1) {
        kvv_check_set_verdict(r, KVV_VERDICT_SKIPPED, "--parallel 1: no other requests to share with");
        kvv_check_set_message(r, "serve-concurrent needs --parallel 2 or more: with one request "
                                 "in flight nothing can share its batch");
        return;
    }
    static const char *const modes[] = {"single", "mixed"};
    enum { N_MODES = 2 };
    int n_res = 1 + N_MODES * R;
    kvv_serve_completion *res = calloc((size_t)n_res, sizeof *res);
    const kvv_serve_completion **cs = calloc((size_t)n_res, sizeof *cs);
    kvv_serve_job *jobs = calloc((size_t)K + 1, sizeof *jobs);
    int32_t **others = calloc((size_t)K, sizeof *others);
    json_t *jm = json_object(), *lens = json_array();
    if (!res || !cs || !jobs || !others) {
        kvv_check_set_verdict(r, KVV_VERDICT_ERROR, "out of memory");
        goto done;
    }
    /* the request alone: the baseline, and how long one takes */
    kvv_serve_job alone = job_for(s, o->tokens, T, s->o.cache_prompt,
                                  "serve-concurrent: the request alone");
    if (kvv_serve_ask(s, &alone)) {
        kvv_serve_set_failed(s, r, &alone.err);
        goto done;
    }
    res[0] = alone.c;
    cs[0] = &res[0];
    double t_alone = alone.seconds;
    for (int i = 0; i < K; i++)
        json_array_append_new(lens, json_integer(other_len(s, T, i)));
    int at = 1;
    for (int m = 0; m < N_MODES; m++) {
        for (int rd = 0; rd < R; rd++) {
            kvv_error err = {0};
            for (int i = 0; i < K; i++) {
                int len = other_len(s, T, i);
                free(others[i]);
                others[i] = kvv_serve_prompt(s, o->seed * 7919u + 1000u * (uint64_t)(m * R + rd) + (uint64_t)i + 1, len);
                if (!others[i]) {
                    kvv_check_set_verdict(r, KVV_VERDICT_ERROR, "out of memory");
                    goto done;
                }
                char what[96];
                snprintf(what, sizeof what, "serve-concurrent %s round %d, other request %d of %d",
                         modes[m], rd + 1, i + 1, K);
                jobs[i + 1] = job_for(s, others[i], len, s->o.cache_prompt, what);
                jobs[i + 1].n_predict = 2 * s->o.n_predict + 8; /* still decoding when A comes */
                /* single: all at once, arrival order left to the threads;
                 * mixed: the others first, A later each round */
                jobs[i + 1].delay = 0;
            }
            char what[96];
            snprintf(what, sizeof what, "serve-concurrent %s round %d, the request", modes[m],
                     rd + 1);
            jobs[0] = job_for(s, o->tokens, T, s->o.cache_prompt, what);
            jobs[0].delay = m == 0 ? 0 : t_alone * (rd + 1) / (R + 1) + 0.002 * rd;
            if (kvv_serve_ask_all(s, jobs, K + 1, &err)) {
                kvv_serve_jobs_free(jobs, K + 1);
                kvv_serve_set_failed(s, r, &err);
                goto done;
            }
            res[at] = jobs[0].c;
            memset(&jobs[0].c, 0, sizeof jobs[0].c);
            kvv_serve_jobs_free(jobs + 1, K);
            cs[at] = &res[at];
            at++;
        }
    }
    if (o->force_fail)
        kvv_serve_completion_plant(&res[n_res - 1], s->o.n_predict / 2);
    /* per mode: its rounds against the request alone */
    spread all = spread_of(cs, n_res);
    bool differs = all.n_diff > 0;
    char per[320] = "", w[96];
    for (int m = 0; m < N_MODES; m++) {
        const kvv_serve_completion **mc = calloc((size_t)R + 1, sizeof *mc);
        if (!mc)
            break;
        mc[0] = &res[0];
        for (int rd = 0; rd < R; rd++) {
            mc[rd + 1] = &res[1 + m * R + rd];
            char what[48];
            snprintf(what, sizeof what, "%s round %d vs alone", modes[m], rd + 1);
            kvv_serve_add_row(r, what, &res[0], mc[rd + 1]);
        }
        spread sp = spread_of(mc, R + 1);
        free(mc);
        json_t *e = json_object();
        json_object_set_new(e, "rounds", json_integer(R));
        json_object_set_new(e, "differ", json_integer(sp.n_diff));
        json_object_set_new(e, "distinct", json_integer(sp.distinct));
        json_object_set_new(e, "first_step", json_integer(sp.first));
        json_object_set_new(e, "first_token_step", json_integer(sp.first_token));
        json_object_set_new(e, "verdict", json_string(sp.n_diff ? "fail" : "pass"));
        json_object_set_new(jm, modes[m], e);
        size_t l = strlen(per);
        snprintf(per + l, sizeof per - l, "%s%s %s (%d of %d rounds differ, %d distinct%s)",
                 m ? "; " : "", modes[m], sp.n_diff ? "FAIL" : "pass", sp.n_diff, R,
                 sp.distinct, where_text(&sp, w, sizeof w));
    }
    control(s, r, &res[0], &res[1]);
    json_object_set_new(r->details, "modes", json_incref(jm));
    json_object_set_new(r->details, "other_prompt_lengths", json_incref(lens));
    json_object_set_new(r->details, "others", json_integer(K));
    json_object_set_new(r->details, "distinct", json_integer(all.distinct));
    json_object_set_new(r->details, "first_step", json_integer(all.first));
    json_object_set_new(r->details, "first_token_step", json_integer(all.first_token));
    json_object_set_new(r->details, "seconds_alone", json_real(t_alone));
    char slot_note[200] = "";
    if (s->slots == 1)
        snprintf(slot_note, sizeof slot_note, "; the server has 1 slot: the requests were "
                 "served one after another, none shared a batch");
    char pass[400], fail[480];
    snprintf(pass, sizeof pass, "%d completions with %d others in flight, %d distinct%s",
             n_res, K, all.distinct, slot_note);
    snprintf(fail, sizeof fail, "%d distinct completions of %d with %d others in flight%s%s",
             all.distinct, n_res, K, where_text(&all, w, sizeof w), slot_note);
    kvv_check_conclude(r, differs, pass, fail, "every completion was bit-equal");
    if (r->verdict == KVV_VERDICT_PASS || r->verdict == KVV_VERDICT_FAIL)
        kvv_check_set_message(r, "%s%s", per,
                              s->slots == 1 ? ". With 1 slot the server queues requests: a "
                                              "pass shows queueing changes nothing, not that "
                                              "shared batches are invariant" : "");
done:
    for (int i = 0; res && i < n_res; i++)
        kvv_serve_completion_free(&res[i]);
    for (int i = 0; others && i < K; i++)
        free(others[i]);
    free(res);
    free(cs);
    free(jobs);
    free(others);
    json_decref(jm);
    json_decref(lens);
}

/* ------------------------------------------------------------ prefix */

void kvv_serve_check_prefix(kvv_serve *s, kvv_check_result *r)
{
    const kvv_check_opts *o = s->o.check;
    int T = o->n_tokens;
    enum { N = 5 }; /* off, on, on again, the sharer, on after the sharer */
    kvv_serve_job j[N];
    memset(j, 0, sizeof j);
    int32_t *b = kvv_serve_prompt(s, o->seed * 31u + 77u, T);
    if (!b) {
        kvv_check_set_verdict(r, KVV_VERDICT_ERROR, "out of memory");
        return;
    }
    int half = T / 2 > 0 ? T / 2 : 1;
    memcpy(b, o->tokens, (size_t)half * sizeof *b);
    if (half < T && b[half] == o->tokens[half])
        b[half] = (b[half] + 1) % s->n_vocab; /* B parts from A right after the half */
    j[0] = job_for(s, o->tokens, T, false, "serve-prefix: cache_prompt off");
    j[1] = job_for(s, o->tokens, T, true, "serve-prefix: cache_prompt on");
    j[2] = job_for(s, o->tokens, T, true, "serve-prefix: cache_prompt on, again");
    j[3] = job_for(s, b, T, true, "serve-prefix: another request sharing the first half");
    j[4] = job_for(s, o->tokens, T, true, "serve-prefix: cache_prompt on, after the sharer");
    for (int i = 0; i < N; i++)
        if (kvv_serve_ask(s, &j[i])) {
            kvv_serve_set_failed(s, r, &j[i].err);
            goto done;
        }
    if (o->force_fail)
        kvv_serve_completion_plant(&j[4].c, s->o.n_predict / 2);
    static const int cmp[] = {1, 2, 4};
    static const char *const names[] = {"cache on vs off", "cache on again vs off",
                                        "after shared prefix vs off"};
    const kvv_serve_completion *cs[4] = {&j[0].c, &j[1].c, &j[2].c, &j[4].c};
    json_t *cases = json_array();
    for (int i = 0; i < 3; i++) {
        kvv_serve_add_row(r, names[i], &j[0].c, &j[cmp[i]].c);
        int tok, at = kvv_serve_completion_diff(&j[0].c, &j[cmp[i]].c, &tok);
        json_t *e = json_object();
        json_object_set_new(e, "case", json_string(names[i]));
        json_object_set_new(e, "tokens_cached", json_integer(j[cmp[i]].c.n_cached));
        json_object_set_new(e, "first_step", json_integer(at));
        json_object_set_new(e, "first_token_step", json_integer(tok));
        json_array_append_new(cases, e);
    }
    json_object_set_new(r->details, "cases", cases);
    spread sp = spread_of(cs, 4);
    control(s, r, &j[0].c, &j[2].c);
    int hit_own = j[2].c.n_cached, hit_shared = j[4].c.n_cached;
    char used[200], w[96], pass[320], fail[400];
    if (hit_own < 0)
        snprintf(used, sizeof used, "the server does not say how many tokens it took from its cache");
    else
        snprintf(used, sizeof used, "%d of %d prompt tokens from the cache again, %d after the "
                 "sharer", hit_own, T, hit_shared);
    snprintf(pass, sizeof pass, "cache_prompt on = off, bit for bit (%s)", used);
    snprintf(fail, sizeof fail, "%d of 3 cached runs differ from cache_prompt off%s (%s)",
             sp.n_diff, where_text(&sp, w, sizeof w), used);
    kvv_check_conclude(r, sp.n_diff > 0, pass, fail, "cached runs were bit-equal");
    if (hit_own == 0 && hit_shared == 0 && r->verdict == KVV_VERDICT_PASS) {
        /* equal, but the cached path never ran: nothing was proven */
        kvv_check_set_verdict(r, KVV_VERDICT_SKIPPED, "the server took no token from its cache");
        kvv_check_set_message(r, "cache_prompt on took 0 prompt tokens from the cache: the "
                                 "cached path was not exercised, nothing checked");
    }
done:
    for (int i = 0; i < N; i++)
        kvv_serve_completion_free(&j[i].c);
    free(b);
}
