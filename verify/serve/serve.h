/*
 * serve.h — certify a running inference server from outside, over its HTTP
 * completion API (DESIGN.md §4 "Requests, ops and servers"; docs/serve.md).
 * The GGUF the server is said to serve gives the vocabulary and the
 * reference side; the server is asked greedy completions of token-id
 * prompts with top-k logprobs, and the checks compare what comes back:
 *
 *   serve-model       the server's vocabulary and first-step logprobs can be
 *                     the GGUF's (a wrong model is caught first; the other
 *                     checks do not run after it fails)
 *   serve-repeat      the same request N times, one at a time: bit-equal
 *   serve-concurrent  the request alone vs among K others of other lengths:
 *                     "single" (all sent at once: prompts and decode steps
 *                     share batches) and "mixed" (sent while the others
 *                     decode, a later start each round); distinct completions,
 *                     first step where they part
 *   serve-prefix      cache_prompt off vs on: the same request again (its
 *                     own cached prompt), and after another request that
 *                     shares its first half (a shared prefix)
 *   serve-reference   greedy tokens vs kvverify's engine (--engine, default
 *                     ref) on the GGUF: first divergence, logprob deltas; a
 *                     divergence whose top-1/top-2 gap lies within twice the
 *                     measured logprob error is a near-tie, not a failure
 *
 *   kvv_serve *s;
 *   if (kvv_serve_open(&so, &s, &err)) ...          // unreachable: err names the URL
 *   kvv_serve_run(s, "serve-repeat", r);            // fills r (a verdict, or ERROR)
 *   bool broke = kvv_serve_faulted(s);              // a request failed: exit 2
 *   kvv_serve_close(s);
 *
 * Every comparison is bit-level (logprob bits, token ids) except the
 * reference's, which is a tolerance comparison (DESIGN.md §7: llama.cpp is a
 * tolerance reference). Controls: each check plants a one-ULP change in one
 * logprob (or a different token, for the reference) of a copy and must see
 * it; force_fail plants it into the real comparison.
 */
#ifndef KVV_SERVE_H
#define KVV_SERVE_H

#include <stdbool.h>

#include "verify/check.h"
#include "verify/serve/server_api.h"

typedef struct {
    const char *url;          /* "http://127.0.0.1:8080" (borrowed) */
    kvv_serve_api api;
    const char *model_name;   /* openai's "model" field (NULL: the first of /v1/models) */
    double timeout;           /* seconds per request (> 0) */
    int parallel;             /* requests in flight in concurrent (0: the server's slots,
                                 else 4) */
    int rounds;               /* concurrent rounds per mode (>= 1) */
    int repeats;              /* repeat: requests (>= 2) */
    int n_predict;            /* tokens per completion (>= 1) */
    int n_probs;              /* top-k logprobs per step (>= 2) */
    double tol;               /* reference: largest |delta logprob| accepted (nats) */
    bool cache_prompt;        /* repeat, concurrent, reference: requests may reuse the
                                 server's prompt cache (llama-server cache_prompt) */
    const kvv_check_opts *check; /* model, prompt, reference engine, controls, seed */
} kvv_serve_opts;

/* Defaults: api llama, timeout 60 s, parallel 0, rounds 4, repeats 4,
 * n_predict 16, n_probs 5, tol 0.1. */
kvv_serve_opts kvv_serve_opts_default(void);

typedef struct kvv_serve kvv_serve;

/* Check the options and ask the server what it serves (GET /v1/models; and
 * llama-server's /props for its slots): a server that cannot be reached,
 * answers an error or no JSON is KVV_ERR_IO naming the URL, at once.
 * KVV_ERR_USAGE for bad options (naming the field). *out: close with
 * kvv_serve_close. */
kvv_status kvv_serve_open(const kvv_serve_opts *o, kvv_serve **out, kvv_error *err);
void kvv_serve_close(kvv_serve *s); /* accepts NULL */

/* The check names, in the order a run runs them; *n their count. */
const char *const *kvv_serve_checks(int *n);

/* Run check `name` (one of kvv_serve_checks) into r: PASS / FAIL with
 * figures, rows and controls; ERROR naming the request when the server
 * failed one (and every later check: "not run: the server failed ..."),
 * SKIPPED after serve-model failed. */
void kvv_serve_run(kvv_serve *s, const char *name, kvv_check_result *r);

/* Did a request fail (transport, HTTP status, bad body, timeout)? */
bool kvv_serve_faulted(const kvv_serve *s);
/* The server's slots as it told them (-1: not told). */
int kvv_serve_slots(const kvv_serve *s);
/* The server's description (id, slots, n_ctx, URL, api) as JSON: borrowed. */
const json_t *kvv_serve_info(const kvv_serve *s);

#endif
