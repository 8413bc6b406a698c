/* serve_impl.h — the server session shared by serve.c (session, requests),
 * serve_checks.c (repeat, concurrent, prefix) and serve_reference.c (model,
 * reference). Private to verify/serve/. */
#ifndef KVV_SERVE_IMPL_H
#define KVV_SERVE_IMPL_H

#include "verify/serve/serve.h"

struct kvv_serve {
    kvv_serve_opts o;
    int n_vocab;            /* the GGUF's */
    int slots;              /* the server's slots (-1: not told) */
    int n_ctx;              /* the server's context per slot (-1: not told) */
    int parallel;           /* requests in flight in concurrent */
    char model_id[160];     /* the server's model name (openai "model") */
    json_t *info;           /* what the server told, for the report (owned) */
    bool faulted;           /* a request failed */
    char fault[KVV_ERROR_MSG_MAX]; /* the first failure */
    bool model_bad;         /* serve-model failed: the other checks are skipped */
};

/* One request of a batch: sent after delay seconds, answered into c. */
typedef struct {
    const int32_t *prompt;
    int n_prompt;
    int n_predict;
    bool cache_prompt;
    double delay;           /* seconds after the batch starts */
    char what[96];          /* names the request in messages */
    kvv_serve_completion c; /* the answer (free with kvv_serve_completion_free) */
    double seconds;         /* from its send to its answer */
    kvv_status st;
    kvv_error err;
} kvv_serve_job;

/* Send one request and read the completion. On failure the session is
 * marked faulted (kvv_serve_faulted) and err names the request. */
kvv_status kvv_serve_ask(kvv_serve *s, kvv_serve_job *j);
/* Send n jobs, each on its own thread after its delay, and wait for all.
 * @return the first failing job's status (its err copied to err). */
kvv_status kvv_serve_ask_all(kvv_serve *s, kvv_serve_job *jobs, int n, kvv_error *err);
/* Free the jobs' completions. */
void kvv_serve_jobs_free(kvv_serve_job *jobs, int n);

/* r := ERROR with the request's failure (err), as every check reports it. */
void kvv_serve_set_failed(kvv_serve *s, kvv_check_result *r, const kvv_error *err);

/* A pseudo-random prompt of n tokens (kvv_prompt_random; its first token is
 * the prompt's first, the BOS when the model has one), malloc'ed. NULL on
 * OOM. */
int32_t *kvv_serve_prompt(const kvv_serve *s, uint64_t seed, int n);

/* Add a row comparing b's logprobs (every top entry and the chosen one)
 * with a's, named what; where = b's first differing step. */
void kvv_serve_add_row(kvv_check_result *r, const char *what, const kvv_serve_completion *a,
                       const kvv_serve_completion *b);

/* The checks (serve_checks.c, serve_reference.c). */
void kvv_serve_check_model(kvv_serve *s, kvv_check_result *r);
void kvv_serve_check_repeat(kvv_serve *s, kvv_check_result *r);
void kvv_serve_check_concurrent(kvv_serve *s, kvv_check_result *r);
void kvv_serve_check_prefix(kvv_serve *s, kvv_check_result *r);
void kvv_serve_check_reference(kvv_serve *s, kvv_check_result *r);

#endif
