/* server_api.c — completion requests and answers of the two dialects (see
 * server_api.h). */
#include "verify/serve/server_api.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify/compare_stats.h"

const char *kvv_serve_api_name(kvv_serve_api a)
{
    return a == KVV_SERVE_API_OPENAI ? "openai" : "llama";
}

int kvv_serve_api_from_name(const char *s, kvv_serve_api *out)
{
    if (strcmp(s, "llama") == 0)
        *out = KVV_SERVE_API_LLAMA;
    else if (strcmp(s, "openai") == 0)
        *out = KVV_SERVE_API_OPENAI;
    else
        return 0;
    return 1;
}

const char *kvv_serve_api_path(kvv_serve_api a)
{
    return a == KVV_SERVE_API_OPENAI ? "/v1/completions" : "/completion";
}

json_t *kvv_serve_request_json(kvv_serve_api api, const kvv_serve_req *q)
{
    json_t *ids = json_array();
    for (int i = 0; ids && i < q->n_prompt; i++)
        if (json_array_append_new(ids, json_integer(q->prompt[i])))
            break;
    json_t *b = json_object();
    if (!b || !ids || json_array_size(ids) != (size_t)q->n_prompt) {
        json_decref(ids);
        json_decref(b);
        return NULL;
    }
    json_object_set_new(b, "prompt", ids);
    if (api == KVV_SERVE_API_OPENAI) {
        json_object_set_new(b, "max_tokens", json_integer(q->n_predict));
        json_object_set_new(b, "logprobs", json_integer(q->n_probs));
        json_object_set_new(b, "return_tokens_as_token_ids", json_true()); /* vLLM */
        if (q->model_name)
            json_object_set_new(b, "model", json_string(q->model_name));
    } else {
        json_object_set_new(b, "n_predict", json_integer(q->n_predict));
        json_object_set_new(b, "n_probs", json_integer(q->n_probs));
        json_object_set_new(b, "return_tokens", json_true());
    }
    /* greedy, nothing that depends on earlier tokens' counts or on chance */
    json_object_set_new(b, "temperature", json_real(0));
    json_object_set_new(b, "top_k", json_integer(1));
    json_object_set_new(b, "repeat_penalty", json_real(1));
    json_object_set_new(b, "presence_penalty", json_real(0));
    json_object_set_new(b, "frequency_penalty", json_real(0));
    json_object_set_new(b, "seed", json_integer(1));
    json_object_set_new(b, "ignore_eos", json_true());
    json_object_set_new(b, "cache_prompt", json_boolean(q->cache_prompt));
    json_object_set_new(b, "stream", json_false());
    return b;
}

void kvv_serve_completion_free(kvv_serve_completion *c)
{
    if (!c)
        return;
    free(c->tokens);
    free(c->logprob);
    free(c->top_id);
    free(c->top_lp);
    memset(c, 0, sizeof *c);
}

static kvv_status alloc(kvv_serve_completion *c, int n, int k)
{
    c->n = n;
    c->k = k;
    c->tokens = calloc((size_t)n + 1, sizeof *c->tokens);
    c->logprob = calloc((size_t)n + 1, sizeof *c->logprob);
    c->top_id = malloc(((size_t)n * k + 1) * sizeof *c->top_id);
    c->top_lp = calloc((size_t)n * k + 1, sizeof *c->top_lp);
    if (!c->tokens || !c->logprob || !c->top_id || !c->top_lp)
        return KVV_ERR_NOMEM;
    for (size_t i = 0; i < (size_t)n * k; i++)
        c->top_id[i] = -1;
    return KVV_OK;
}

kvv_status kvv_serve_completion_copy(kvv_serve_completion *dst, const kvv_serve_completion *src)
{
    memset(dst, 0, sizeof *dst);
    if (alloc(dst, src->n, src->k)) {
        kvv_serve_completion_free(dst);
        return KVV_ERR_NOMEM;
    }
    size_t n = (size_t)src->n, nk = n * src->k;
    memcpy(dst->tokens, src->tokens, n * sizeof *dst->tokens);
    memcpy(dst->logprob, src->logprob, n * sizeof *dst->logprob);
    memcpy(dst->top_id, src->top_id, nk * sizeof *dst->top_id);
    memcpy(dst->top_lp, src->top_lp, nk * sizeof *dst->top_lp);
    dst->n_cached = src->n_cached;
    return KVV_OK;
}

void kvv_serve_completion_plant(kvv_serve_completion *c, int step)
{
    if (c->n == 0 || c->k == 0)
        return;
    step = step < c->n ? step : c->n - 1;
    float *v = &c->top_lp[(size_t)step * c->k];
    *v = kvv_f32_from_bits(kvv_f32_bits(*v) ^ 1u);
}

static bool same_bits(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

int kvv_serve_completion_diff(const kvv_serve_completion *a, const kvv_serve_completion *b,
                              int *token_step)
{
    int n = a->n < b->n ? a->n : b->n, k = a->k < b->k ? a->k : b->k, first = -1;
    if (token_step)
        *token_step = -1;
    for (int s = 0; s < n; s++) {
        bool d = a->tokens[s] != b->tokens[s] || !same_bits(a->logprob[s], b->logprob[s]);
        if (a->tokens[s] != b->tokens[s] && token_step && *token_step < 0)
            *token_step = s;
        for (int j = 0; j < k && !d; j++)
            d = a->top_id[(size_t)s * a->k + j] != b->top_id[(size_t)s * b->k + j] ||
                !same_bits(a->top_lp[(size_t)s * a->k + j], b->top_lp[(size_t)s * b->k + j]);
        if (d && first < 0)
            first = s;
    }
    if (first < 0 && a->n != b->n)
        first = n;
    return first;
}

/* A logprob as the server wrote it: a finite number <= 0 (float; llama-server
 * writes a float's exact value). */
static bool get_lp(const json_t *v, float *out)
{
    if (!json_is_number(v))
        return false;
    double d = json_number_value(v);
    if (!isfinite(d) || d > 0)
        return false;
    *out = (float)d;
    return true;
}

static bool get_id(const json_t *v, int n_vocab, int32_t *out)
{
    if (!json_is_integer(v))
        return false;
    json_int_t i = json_integer_value(v);
    if (i < 0 || i >= n_vocab)
        return false;
    *out = (int32_t)i;
    return true;
}

/* llama-server's form: [{"id", "logprob", "top_logprobs": [{"id", "logprob"}]}]. */
static kvv_status parse_llama_probs(const json_t *arr, const char *field, const kvv_serve_req *q,
                                    int n_vocab, const char *what, kvv_serve_completion *c,
                                    kvv_error *err)
{
    int n = (int)json_array_size(arr);
    if (alloc(c, n, q->n_probs))
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", what);
    for (int s = 0; s < n; s++) {
        const json_t *e = json_array_get(arr, s);
        if (!get_id(json_object_get(e, "id"), n_vocab, &c->tokens[s]))
            return kvv_error_set(err, KVV_ERR_IO, "%s: %s[%d].id: missing or not a token id "
                                 "in [0, %d)", what, field, s, n_vocab);
        if (!get_lp(json_object_get(e, "logprob"), &c->logprob[s]))
            return kvv_error_set(err, KVV_ERR_IO, "%s: %s[%d].logprob: missing or not a "
                                 "finite number <= 0", what, field, s);
        const json_t *top = json_object_get(e, "top_logprobs");
        if (!json_is_array(top) || json_array_size(top) == 0)
            return kvv_error_set(err, KVV_ERR_IO, "%s: %s[%d].top_logprobs: missing or empty",
                                 what, field, s);
        for (int j = 0; j < q->n_probs && j < (int)json_array_size(top); j++) {
            const json_t *t = json_array_get(top, j);
            size_t at = (size_t)s * c->k + j;
            if (!get_id(json_object_get(t, "id"), n_vocab, &c->top_id[at]) ||
                !get_lp(json_object_get(t, "logprob"), &c->top_lp[at]))
                return kvv_error_set(err, KVV_ERR_IO, "%s: %s[%d].top_logprobs[%d]: needs an "
                                     "id in [0, %d) and a finite logprob <= 0", what, field, s,
                                     j, n_vocab);
        }
    }
    return KVV_OK;
}

/* "token_id:N" (vLLM's return_tokens_as_token_ids). */
static bool legacy_id(const char *s, int n_vocab, int32_t *out)
{
    if (!s || strncmp(s, "token_id:", 9) != 0)
        return false;
    char *end;
    long v = strtol(s + 9, &end, 10);
    if (end == s + 9 || *end || v < 0 || v >= n_vocab)
        return false;
    *out = (int32_t)v;
    return true;
}

/* The legacy OpenAI form: tokens, token_logprobs, top_logprobs [{tok: lp}]. */
static kvv_status parse_legacy(const json_t *lp, const kvv_serve_req *q, int n_vocab,
                               const char *what, kvv_serve_completion *c, kvv_error *err)
{
    const json_t *toks = json_object_get(lp, "tokens"), *tlp = json_object_get(lp, "token_logprobs"),
                 *top = json_object_get(lp, "top_logprobs");
    if (!json_is_array(toks) || !json_is_array(tlp) || !json_is_array(top))
        return kvv_error_set(err, KVV_ERR_IO, "%s: choices[0].logprobs: neither \"content\" "
                             "nor \"tokens\", \"token_logprobs\" and \"top_logprobs\"", what);
    int n = (int)json_array_size(toks);
    if ((int)json_array_size(tlp) != n || (int)json_array_size(top) != n)
        return kvv_error_set(err, KVV_ERR_IO, "%s: choices[0].logprobs: tokens, token_logprobs "
                             "and top_logprobs differ in length", what);
    if (alloc(c, n, q->n_probs))
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", what);
    for (int s = 0; s < n; s++) {
        const char *ts = json_string_value(json_array_get(toks, s));
        if (!legacy_id(ts, n_vocab, &c->tokens[s]))
            return kvv_error_set(err, KVV_ERR_IO, "%s: choices[0].logprobs.tokens[%d]: \"%.40s\" "
                                 "is not \"token_id:N\" with N in [0, %d) (a server that "
                                 "returns token text: see docs/serve.md)", what, s,
                                 ts ? ts : "(not a string)", n_vocab);
        if (!get_lp(json_array_get(tlp, s), &c->logprob[s]))
            return kvv_error_set(err, KVV_ERR_IO, "%s: choices[0].logprobs.token_logprobs[%d]: "
                                 "not a finite number <= 0", what, s);
        const json_t *o = json_array_get(top, s);
        if (!json_is_object(o) || json_object_size(o) == 0)
            return kvv_error_set(err, KVV_ERR_IO, "%s: choices[0].logprobs.top_logprobs[%d]: "
                                 "missing or empty", what, s);
        const char *key;
        json_t *v;
        int j = 0;
        json_object_foreach((json_t *)o, key, v) {
            int32_t id;
            float l;
            if (!legacy_id(key, n_vocab, &id) || !get_lp(v, &l))
                return kvv_error_set(err, KVV_ERR_IO, "%s: choices[0].logprobs.top_logprobs[%d]"
                                     ": entry \"%.40s\" is not \"token_id:N\": logprob", what,
                                     s, key);
            /* insertion sort by logprob, highest first, ties by id */
            size_t base = (size_t)s * c->k;
            int at = j < c->k ? j : c->k;
            while (at > 0 && (c->top_lp[base + at - 1] < l ||
                              (c->top_lp[base + at - 1] == l && c->top_id[base + at - 1] > id))) {
                if (at < c->k) {
                    c->top_lp[base + at] = c->top_lp[base + at - 1];
                    c->top_id[base + at] = c->top_id[base + at - 1];
                }
                at--;
            }
            if (at < c->k) {
                c->top_lp[base + at] = l;
                c->top_id[base + at] = id;
            }
            j++;
        }
    }
    return KVV_OK;
}

kvv_status kvv_serve_parse(kvv_serve_api api, const json_t *ans, const kvv_serve_req *q,
                           int n_vocab, const char *what, kvv_serve_completion *c,
                           kvv_error *err)
{
    memset(c, 0, sizeof *c);
    c->n_cached = -1;
    kvv_status st;
    if (!json_is_object(ans))
        return kvv_error_set(err, KVV_ERR_IO, "%s: the answer is not a JSON object", what);
    if (api == KVV_SERVE_API_LLAMA) {
        const json_t *p = json_object_get(ans, "completion_probabilities");
        if (!json_is_array(p))
            return kvv_error_set(err, KVV_ERR_IO, "%s: no \"completion_probabilities\" in the "
                                 "answer (not llama-server's /completion? try --api openai)",
                                 what);
        st = parse_llama_probs(p, "completion_probabilities", q, n_vocab, what, c, err);
        /* timings.cache_n: the prompt tokens taken from the cache; tokens_cached
         * is the slot's whole cache after the answer (prompt and generated),
         * read only from a server that gives no timings */
        const json_t *cn = json_object_get(json_object_get(ans, "timings"), "cache_n");
        const json_t *tc = json_object_get(ans, "tokens_cached");
        if (json_is_integer(cn))
            c->n_cached = (int)json_integer_value(cn);
        else if (json_is_integer(tc))
            c->n_cached = (int)json_integer_value(tc);
    } else {
        const json_t *ch = json_array_get(json_object_get(ans, "choices"), 0);
        const json_t *lp = json_object_get(ch, "logprobs");
        if (!json_is_object(lp))
            return kvv_error_set(err, KVV_ERR_IO, "%s: no choices[0].logprobs in the answer "
                                 "(the server ignored \"logprobs\"?)", what);
        const json_t *content = json_object_get(lp, "content");
        st = json_is_array(content)
                 ? parse_llama_probs(content, "choices[0].logprobs.content", q, n_vocab, what, c,
                                     err)
                 : parse_legacy(lp, q, n_vocab, what, c, err);
        const json_t *cached = json_object_get(
            json_object_get(json_object_get(ans, "usage"), "prompt_tokens_details"),
            "cached_tokens");
        if (json_is_integer(cached))
            c->n_cached = (int)json_integer_value(cached);
    }
    if (st == KVV_OK && c->n < q->n_predict)
        st = kvv_error_set(err, KVV_ERR_IO, "%s: %d steps with logprobs, %d asked for (the "
                           "server stopped early or dropped logprobs)", what, c->n,
                           q->n_predict);
    return st;
}
