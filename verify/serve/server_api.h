/*
 * server_api.h — the two completion dialects `kvverify serve` speaks: the
 * request it sends (token-id prompt, greedy, top-k logprobs) and the
 * completion it reads back (token ids, the chosen token's logprob, the top-k
 * ids and logprobs of every step). docs/serve.md lists the servers.
 *
 *   llama   llama-server's own POST /completion: {"prompt": [ids], "n_predict",
 *           "n_probs", "cache_prompt", ...} -> "completion_probabilities":
 *           [{"id", "logprob", "top_logprobs": [{"id", "logprob"}]}], and
 *           "tokens_cached" (prompt tokens taken from the slot's cache)
 *   openai  POST /v1/completions: {"prompt": [ids], "max_tokens", "logprobs": k}
 *           -> choices[0].logprobs either llama-server's {"content": [...]} (as
 *           above) or the legacy OpenAI form {"tokens", "token_logprobs",
 *           "top_logprobs": [{token: lp}]} whose tokens must be ids
 *           ("token_id:N", vLLM's return_tokens_as_token_ids); token text
 *           cannot be mapped back to ids without guessing, so it is refused.
 *
 *   kvv_serve_req q = {.prompt = ids, .n_prompt = 32, .n_predict = 16, .n_probs = 5,
 *                      .cache_prompt = false};
 *   json_t *body = kvv_serve_request_json(KVV_SERVE_API_LLAMA, &q);
 *   ... kvv_http_json(url, "POST", kvv_serve_api_path(api), body, ...) -> ans
 *   kvv_serve_completion c;
 *   kvv_serve_parse(api, ans, &q, "repeat #1", &c, &err);  // c.tokens[0..c.n)
 *   kvv_serve_completion_free(&c);
 */
#ifndef KVV_SERVE_API_H
#define KVV_SERVE_API_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "common/error.h"

typedef enum { KVV_SERVE_API_LLAMA = 0, KVV_SERVE_API_OPENAI = 1 } kvv_serve_api;

/* "llama", "openai"; from a name: 1 on success. */
const char *kvv_serve_api_name(kvv_serve_api a);
int kvv_serve_api_from_name(const char *s, kvv_serve_api *out);
/* "/completion", "/v1/completions". */
const char *kvv_serve_api_path(kvv_serve_api a);

typedef struct {
    const int32_t *prompt;  /* token ids, sent as they are (no BOS added); borrowed */
    int n_prompt;
    int n_predict;          /* tokens to generate (end-of-text ignored) */
    int n_probs;            /* top-k logprobs per step */
    bool cache_prompt;      /* llama-server: may reuse a slot's cached prefix */
    const char *model_name; /* openai's "model" field, or NULL */
} kvv_serve_req;

/* The request body: greedy (temperature 0, no penalties), fixed seed,
 * end-of-text ignored so every completion has n_predict steps. Caller
 * json_decref's. NULL on OOM. */
json_t *kvv_serve_request_json(kvv_serve_api api, const kvv_serve_req *q);

typedef struct {
    int n;              /* steps returned */
    int k;              /* top entries kept per step (the request's n_probs) */
    int32_t *tokens;    /* [n] generated ids */
    float *logprob;     /* [n] the generated token's logprob */
    int32_t *top_id;    /* [n][k] by the server's order; -1 where it gave fewer */
    float *top_lp;      /* [n][k] */
    int n_cached;       /* prompt tokens taken from the server's cache (-1: not told) */
} kvv_serve_completion;

/* Read ans into c (zeroed first; caller frees with kvv_serve_completion_free,
 * also after an error). KVV_ERR_IO naming `what` and the field when the
 * answer lacks logprobs or ids, gives fewer than q->n_predict steps, an id
 * outside [0, n_vocab), or a logprob that is not a finite number <= 0. */
kvv_status kvv_serve_parse(kvv_serve_api api, const json_t *ans, const kvv_serve_req *q,
                           int n_vocab, const char *what, kvv_serve_completion *c,
                           kvv_error *err);
void kvv_serve_completion_free(kvv_serve_completion *c); /* accepts NULL */

/* Deep copy (dst zeroed first). @return KVV_OK or KVV_ERR_NOMEM. */
kvv_status kvv_serve_completion_copy(kvv_serve_completion *dst, const kvv_serve_completion *src);

/* First step where a and b differ — a token, the chosen logprob's bits, or
 * a top-k id or logprob's bits — or -1 when bit-equal over the steps both
 * have (and they have as many). *token_step (may be NULL): the first step
 * whose token differs, -1 none. */
int kvv_serve_completion_diff(const kvv_serve_completion *a, const kvv_serve_completion *b,
                              int *token_step);

/* Change c's top-1 logprob at step `step` (the last step when past it) by
 * one ULP: the control every bit-level check must see. */
void kvv_serve_completion_plant(kvv_serve_completion *c, int step);

#endif
