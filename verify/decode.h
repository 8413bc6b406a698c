/*
 * decode.h — one decode of a prompt on one engine, step by step, as
 * `kvverify run` shows it: greedy (engine/greedy.h: the prompt in one batch,
 * then one token per call, each the argmax of the previous row) or
 * teacher-forced (the whole prompt in one batch, logits at every position).
 * Each step comes with its position, input token, argmax and top-K ids
 * (runtime/logits.h's order); the run counts its non-finite logits, times
 * its forward calls, and with `hash` hashes every logit, K, V and residual
 * in the canonical order of reference/ref_trace.h (same hash, same bits).
 *
 *   kvv_decode_opts o = {.engine = e, .prompt = ids, .n_prompt = n, .n_gen = 16,
 *                        .top_k = 5, .on_step = show, .user = &me};
 *   kvv_decode_result res;
 *   if (kvv_decode(&o, &res, &err)) ...       // res.gen[0..n_gen), res.sha256 ...
 *   kvv_decode_result_free(&res);
 *
 * Step i of a greedy run reports position n_prompt - 1 + i, the logits that
 * chose generated token i; step t of a teacher-forced run reports position t.
 */
#ifndef KVV_VERIFY_DECODE_H
#define KVV_VERIFY_DECODE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "verify/check.h"

/* One step as the run reports it (pointers valid during on_step only). */
typedef struct {
    int step;                 /* 0.. */
    int pos;                  /* the position whose logits these are */
    int32_t input;            /* the token fed at pos */
    int32_t argmax;           /* kvv_logits_argmax of the row */
    const int *top;           /* [k] the k largest ids (kvv_logits_top_k), descending */
    int k;
    const float *row;         /* [n_vocab] the logits */
} kvv_decode_step;

typedef struct {
    kvv_engine *engine;       /* borrowed, opened by the caller */
    const int32_t *prompt;    /* [n_prompt] ids inside the vocabulary, n_prompt >= 1 */
    int n_prompt;
    int n_gen;                /* greedy: tokens to generate (>= 1); teacher: ignored */
    bool teacher;             /* teacher forcing: every position of the prompt */
    int top_k;                /* ids per step in kvv_decode_step.top (clamped to n_vocab) */
    bool hash;                /* fill res.sha256 */
    void (*on_step)(void *user, const kvv_decode_step *s); /* optional, each step in order */
    void *user;
    kvv_progress_fn progress; /* optional: after each greedy step */
    void *progress_user;
} kvv_decode_opts;

typedef struct {
    int32_t *gen;             /* [n_gen] generated tokens (greedy; NULL teacher-forced) */
    int n_gen;
    float *logits;            /* teacher: [n_prompt][n_vocab] every row; greedy: the last row */
    int n_rows;               /* rows in logits */
    char sha256[65];          /* with o.hash: hex digest, else "" */
    long n_logits;            /* logits produced (rows x n_vocab) */
    long n_nan, n_inf;        /* of them NaN, +-inf */
    double prompt_wall, prompt_cpu; /* seconds in the prompt's forward call */
    double dec_wall, dec_cpu;       /* seconds in the single-token calls */
} kvv_decode_result;

/* Run the decode described at the top of this file. res is the caller's to
 * free with kvv_decode_result_free (also after an error).
 * @return KVV_OK, KVV_ERR_USAGE (an empty prompt, n_gen < 1, or prompt +
 * generated tokens beyond the engine's n_ctx: the message names them),
 * KVV_ERR_NOMEM, or the engine's error. */
kvv_status kvv_decode(const kvv_decode_opts *o, kvv_decode_result *res, kvv_error *err);
void kvv_decode_result_free(kvv_decode_result *res); /* accepts NULL */

#endif
