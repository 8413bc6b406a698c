/* serve.c — the server session: options, what the server says it serves,
 * requests one at a time and several at once (see serve.h). */
#include "verify/serve/serve_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "verify/serve/http.h"

kvv_serve_opts kvv_serve_opts_default(void)
{
    return (kvv_serve_opts){.api = KVV_SERVE_API_LLAMA,
                            .timeout = 60,
                            .rounds = 4,
                            .repeats = 4,
                            .n_predict = 16,
                            .n_probs = 5,
                            .tol = 0.1};
}

static const char *const check_names[] = {"serve-model", "serve-repeat", "serve-concurrent",
                                          "serve-prefix", "serve-reference"};

const char *const *kvv_serve_checks(int *n)
{
    *n = (int)(sizeof check_names / sizeof check_names[0]);
    return check_names;
}

static kvv_status validate(const kvv_serve_opts *o, kvv_error *err)
{
    if (!o->url || (strncmp(o->url, "http://", 7) != 0 && strncmp(o->url, "https://", 8) != 0))
        return kvv_error_set(err, KVV_ERR_USAGE, "URL '%s': not an http:// or https:// URL",
                             o->url ? o->url : "");
    if (!o->check || !o->check->model || !o->check->tokens || o->check->n_tokens < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "serve: needs a model and a prompt");
    if (!(o->timeout > 0))
        return kvv_error_set(err, KVV_ERR_USAGE, "option --timeout: must be > 0");
    if (o->parallel < 0 || o->parallel > 64)
        return kvv_error_set(err, KVV_ERR_USAGE, "option --parallel: %d is not in [1, 64]",
                             o->parallel);
    if (o->rounds < 1 || o->repeats < 2 || o->n_predict < 1 || o->n_probs < 2)
        return kvv_error_set(err, KVV_ERR_USAGE, "serve: rounds >= 1, repeats >= 2, "
                             "n_predict >= 1 and n_probs >= 2 needed");
    if (!(o->tol >= 0))
        return kvv_error_set(err, KVV_ERR_USAGE, "option --tol: must be >= 0");
    return KVV_OK;
}

kvv_status kvv_serve_open(const kvv_serve_opts *o, kvv_serve **out, kvv_error *err)
{
    *out = NULL;
    kvv_status st = validate(o, err);
    if (st)
        return st;
    if ((st = kvv_http_global_init(err)))
        return st;
    kvv_serve *s = calloc(1, sizeof *s);
    if (!s) {
        kvv_http_global_cleanup();
        return kvv_error_set(err, KVV_ERR_NOMEM, "serve: out of memory");
    }
    s->o = *o;
    s->n_vocab = o->check->model->hp.n_vocab;
    s->slots = s->n_ctx = -1;
    s->info = json_object();
    json_t *models = NULL;
    /* the first contact: every OpenAI-compatible server lists its models */
    if ((st = kvv_http_json(o->url, "GET", "/v1/models", NULL, o->timeout, "model list",
                            &models, err))) {
        kvv_serve_close(s);
        return st;
    }
    const json_t *m0 = json_array_get(json_object_get(models, "data"), 0);
    const char *id = json_string_value(json_object_get(m0, "id"));
    snprintf(s->model_id, sizeof s->model_id, "%s", o->model_name ? o->model_name : id ? id : "");
    const json_t *meta = json_object_get(m0, "meta"); /* llama-server's */
    if (json_is_object(meta))
        json_object_set(s->info, "server_meta", (json_t *)meta);
    json_decref(models);
    json_t *props = NULL; /* llama-server's slots and context; other servers have none */
    kvv_error perr = {0};
    if (kvv_http_json(o->url, "GET", "/props", NULL, o->timeout, "server properties", &props,
                      &perr) == KVV_OK) {
        const json_t *ts = json_object_get(props, "total_slots");
        if (json_is_integer(ts))
            s->slots = (int)json_integer_value(ts);
        const json_t *nc =
            json_object_get(json_object_get(props, "default_generation_settings"), "n_ctx");
        if (json_is_integer(nc))
            s->n_ctx = (int)json_integer_value(nc);
        const json_t *bi = json_object_get(props, "build_info");
        if (json_is_string(bi))
            json_object_set(s->info, "build_info", (json_t *)bi);
    }
    json_decref(props);
    s->parallel = o->parallel > 0 ? o->parallel : s->slots > 0 ? s->slots : 4;
    json_object_set_new(s->info, "url", json_string(o->url));
    json_object_set_new(s->info, "api", json_string(kvv_serve_api_name(o->api)));
    json_object_set_new(s->info, "model_id", json_string(s->model_id));
    json_object_set_new(s->info, "slots", json_integer(s->slots));
    json_object_set_new(s->info, "n_ctx", json_integer(s->n_ctx));
    json_object_set_new(s->info, "parallel", json_integer(s->parallel));
    json_object_set_new(s->info, "n_predict", json_integer(o->n_predict));
    json_object_set_new(s->info, "n_probs", json_integer(o->n_probs));
    *out = s;
    return KVV_OK;
}

void kvv_serve_close(kvv_serve *s)
{
    if (!s)
        return;
    json_decref(s->info);
    free(s);
    kvv_http_global_cleanup();
}

bool kvv_serve_faulted(const kvv_serve *s)
{
    return s->faulted;
}

int kvv_serve_slots(const kvv_serve *s)
{
    return s->slots;
}

const json_t *kvv_serve_info(const kvv_serve *s)
{
    return s->info;
}

void kvv_serve_run(kvv_serve *s, const char *name, kvv_check_result *r)
{
    double t0 = kvv_now_seconds();
    if (s->faulted) {
        kvv_check_set_verdict(r, KVV_VERDICT_ERROR, "not run: the server failed earlier");
        kvv_check_set_message(r, "not run: %s", s->fault);
    } else if (s->model_bad && strcmp(name, "serve-model") != 0) {
        kvv_check_set_verdict(r, KVV_VERDICT_SKIPPED, "not run: the server's model is not the GGUF");
        kvv_check_set_message(r, "serve-model failed: the server does not serve this model");
    } else if (strcmp(name, "serve-model") == 0) {
        kvv_serve_check_model(s, r);
    } else if (strcmp(name, "serve-repeat") == 0) {
        kvv_serve_check_repeat(s, r);
    } else if (strcmp(name, "serve-concurrent") == 0) {
        kvv_serve_check_concurrent(s, r);
    } else if (strcmp(name, "serve-prefix") == 0) {
        kvv_serve_check_prefix(s, r);
    } else if (strcmp(name, "serve-reference") == 0) {
        kvv_serve_check_reference(s, r);
    } else {
        kvv_check_set_verdict(r, KVV_VERDICT_ERROR, "unknown check");
        kvv_check_set_message(r, "serve: no check called '%s'", name);
    }
    if (r->details) {
        json_object_set_new(r->details, "server", json_deep_copy(s->info));
    }
    r->seconds = kvv_now_seconds() - t0;
}

/* ------------------------------------------------------------ requests */

kvv_status kvv_serve_ask(kvv_serve *s, kvv_serve_job *j)
{
    kvv_serve_req q = {.prompt = j->prompt, .n_prompt = j->n_prompt, .n_predict = j->n_predict,
                       .n_probs = s->o.n_probs, .cache_prompt = j->cache_prompt,
                       .model_name = s->model_id[0] ? s->model_id : NULL};
    memset(&j->c, 0, sizeof j->c);
    json_t *body = kvv_serve_request_json(s->o.api, &q);
    if (!body)
        return j->st = kvv_error_set(&j->err, KVV_ERR_NOMEM, "%s: out of memory", j->what);
    double t0 = kvv_now_seconds();
    json_t *ans = NULL;
    j->st = kvv_http_json(s->o.url, "POST", kvv_serve_api_path(s->o.api), body, s->o.timeout,
                          j->what, &ans, &j->err);
    json_decref(body);
    j->seconds = kvv_now_seconds() - t0;
    if (j->st == KVV_OK) {
        char what[200];
        snprintf(what, sizeof what, "POST %s%s (%s)", s->o.url, kvv_serve_api_path(s->o.api),
                 j->what);
        j->st = kvv_serve_parse(s->o.api, ans, &q, s->n_vocab, what, &j->c, &j->err);
    }
    json_decref(ans);
    return j->st;
}

typedef struct {
    kvv_serve *s;
    kvv_serve_job *j;
} job_arg;

static void *job_main(void *p)
{
    job_arg *a = p;
    if (a->j->delay > 0) {
        struct timespec ts = {.tv_sec = (time_t)a->j->delay,
                              .tv_nsec = (long)((a->j->delay - (double)(time_t)a->j->delay) * 1e9)};
        nanosleep(&ts, NULL);
    }
    kvv_serve_ask(a->s, a->j);
    return NULL;
}

kvv_status kvv_serve_ask_all(kvv_serve *s, kvv_serve_job *jobs, int n, kvv_error *err)
{
    pthread_t *th = calloc((size_t)n, sizeof *th);
    job_arg *args = calloc((size_t)n, sizeof *args);
    bool *started = calloc((size_t)n, sizeof *started);
    if (!th || !args || !started) {
        free(th);
        free(args);
        free(started);
        return kvv_error_set(err, KVV_ERR_NOMEM, "serve: out of memory");
    }
    for (int i = 0; i < n; i++) {
        args[i] = (job_arg){s, &jobs[i]};
        started[i] = pthread_create(&th[i], NULL, job_main, &args[i]) == 0;
        if (!started[i])
            kvv_serve_ask(s, &jobs[i]); /* no thread: still asked, one after another */
    }
    for (int i = 0; i < n; i++)
        if (started[i])
            pthread_join(th[i], NULL);
    free(th);
    free(args);
    free(started);
    for (int i = 0; i < n; i++)
        if (jobs[i].st) {
            if (jobs[i].st != KVV_ERR_NOMEM && !s->faulted) {
                s->faulted = true;
                snprintf(s->fault, sizeof s->fault, "%s", jobs[i].err.msg);
            }
            *err = jobs[i].err;
            return jobs[i].st;
        }
    return KVV_OK;
}

void kvv_serve_jobs_free(kvv_serve_job *jobs, int n)
{
    for (int i = 0; jobs && i < n; i++)
        kvv_serve_completion_free(&jobs[i].c);
}

void kvv_serve_set_failed(kvv_serve *s, kvv_check_result *r, const kvv_error *err)
{
    if (err->status != KVV_ERR_NOMEM && !s->faulted) {
        s->faulted = true;
        snprintf(s->fault, sizeof s->fault, "%s", err->msg);
    }
    kvv_check_set_verdict(r, KVV_VERDICT_ERROR, "the server failed a request");
    kvv_check_set_message(r, "%s", err->msg);
}

int32_t *kvv_serve_prompt(const kvv_serve *s, uint64_t seed, int n)
{
    int32_t *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (p)
        kvv_prompt_random(seed, s->n_vocab, s->o.check->tokens[0], p, n);
    return p;
}

void kvv_serve_add_row(kvv_check_result *r, const char *what, const kvv_serve_completion *a,
                       const kvv_serve_completion *b)
{
    kvv_cmp_stats st;
    kvv_cmp_init(&st);
    int n = a->n < b->n ? a->n : b->n;
    size_t k = (size_t)(a->k < b->k ? a->k : b->k);
    for (int i = 0; i < n; i++) {
        kvv_cmp_update(&st, &a->logprob[i], &b->logprob[i], 1);
        kvv_cmp_update(&st, &a->top_lp[(size_t)i * a->k], &b->top_lp[(size_t)i * b->k], k);
    }
    kvv_check_add_row(r, -1, what, &st);
    int tok;
    int at = kvv_serve_completion_diff(a, b, &tok);
    if (at >= 0)
        kvv_check_row_where(r, "step %d%s", at, tok >= 0 ? ", tokens part" : "");
}
