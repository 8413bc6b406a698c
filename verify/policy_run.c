/* policy_run.c — see policy_run.h. */
#include "verify/policy_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/greedy.h"
#include "verify/check.h"

/* After each row: the cache's bytes at that step. */
static kvv_status record_bytes(void *user, int i, const float *row, int32_t argmax,
                               kvv_error *err)
{
    (void)row, (void)argmax, (void)err;
    void **u = user; /* {policy, out} */
    kvv_policy_run_out *out = u[1];
    kvv_policy_stats st;
    kvv_policy_get_stats(u[0], &st);
    out->bytes_per_step[i] = st.bytes_kv + st.bytes_ckpt;
    return KVV_OK;
}

void kvv_policy_run_out_free(kvv_policy_run_out *out)
{
    if (!out)
        return;
    free(out->tokens);
    free(out->argmax);
    free(out->logits);
    free(out->bytes_per_step);
    memset(out, 0, sizeof *out);
}

kvv_status kvv_policy_run_engine(kvv_engine *e, const kvv_policy_cfg *cfg,
                                 const int32_t *prompt, int n_prompt, int n_gen,
                                 const int32_t *forced, kvv_policy_run_out *out, kvv_error *err)
{
    memset(out, 0, sizeof *out);
    if (n_prompt < 1 || n_gen < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "policy run: empty prompt or no steps");
    int n_vocab = kvv_engine_model(e)->hp.n_vocab;
    out->n_gen = n_gen;
    out->n_vocab = n_vocab;
    out->tokens = calloc((size_t)n_gen, sizeof *out->tokens);
    out->argmax = calloc((size_t)n_gen, sizeof *out->argmax);
    out->logits = malloc((size_t)n_gen * (size_t)n_vocab * sizeof *out->logits);
    out->bytes_per_step = calloc((size_t)n_gen, sizeof *out->bytes_per_step);
    if (!out->tokens || !out->argmax || !out->logits || !out->bytes_per_step) {
        kvv_policy_run_out_free(out);
        return kvv_error_set(err, KVV_ERR_NOMEM, "policy run: out of memory");
    }
    kvv_policy *p = NULL;
    double t0 = kvv_now_seconds();
    kvv_engine_reset(e);
    kvv_status s = kvv_policy_open(e, cfg, &p, err);
    void *user[2] = {p, out};
    const kvv_greedy g = {.forward = kvv_greedy_policy_forward, .ctx = p, .n_vocab = n_vocab,
                          .prompt = prompt, .n_prompt = n_prompt, .n_gen = n_gen,
                          .forced = forced, .on_row = record_bytes, .user = user};
    if (s == KVV_OK)
        s = kvv_greedy_decode(&g, out->logits, out->tokens, out->argmax, err);
    if (s == KVV_OK)
        kvv_policy_get_stats(p, &out->stats);
    out->seconds = kvv_now_seconds() - t0;
    kvv_policy_close(p);
    kvv_engine_reset(e);
    if (s != KVV_OK)
        kvv_policy_run_out_free(out);
    return s;
}

kvv_status kvv_policy_run(const kvv_model *m, const kvv_engine_opts *eo,
                          const kvv_policy_cfg *cfg, const int32_t *prompt, int n_prompt,
                          int n_gen, const int32_t *forced, kvv_policy_run_out *out,
                          kvv_error *err)
{
    memset(out, 0, sizeof *out);
    if (n_prompt < 1 || n_gen < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "policy run: empty prompt or no steps");
    kvv_engine_opts o = *eo;
    o.n_ctx = n_prompt + n_gen;
    kvv_engine *e = NULL;
    double t0 = kvv_now_seconds();
    kvv_status s = kvv_engine_open(m, &o, &e, err);
    if (s == KVV_OK)
        s = kvv_policy_run_engine(e, cfg, prompt, n_prompt, n_gen, forced, out, err);
    if (s == KVV_OK)
        out->seconds = kvv_now_seconds() - t0; /* the engine's opening included, as before */
    kvv_engine_close(e);
    return s;
}

/* Stable log-softmax in double; the same code for both rows, so identical
 * rows give identical probabilities and every KL term is exactly 0. */
double kvv_kl_logits(const float *p_logits, const float *q_logits, int n)
{
    double mp = -INFINITY, mq = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (isnan(p_logits[i]) || isnan(q_logits[i]))
            return NAN; /* undefined, and said so: never a 0 over the other logits */
        if (p_logits[i] > mp) mp = p_logits[i];
        if (q_logits[i] > mq) mq = q_logits[i];
    }
    double sp = 0, sq = 0;
    for (int i = 0; i < n; i++) {
        sp += exp((double)p_logits[i] - mp);
        sq += exp((double)q_logits[i] - mq);
    }
    double lsp = log(sp), lsq = log(sq), kl = 0;
    for (int i = 0; i < n; i++) {
        double lp = (double)p_logits[i] - mp - lsp;
        double lq = (double)q_logits[i] - mq - lsq;
        double pi = exp(lp);
        if (pi > 0)
            kl += pi * (lp - lq);
    }
    return kl;
}
