/* greedy.c — greedy decoding (see greedy.h). */
#include "engine/greedy.h"

#include <stdlib.h>

#include "engine/engine.h"
#include "engine/policy/policy.h"
#include "runtime/logits.h"

kvv_status kvv_greedy_engine_forward(void *engine, int n, const int32_t *tokens,
                                     const int32_t *pos, const kvv_hooks *hooks,
                                     kvv_logits_mode lm, float *logits, kvv_error *err)
{
    return kvv_engine_forward(engine, n, tokens, pos, hooks, lm, logits, err);
}

kvv_status kvv_greedy_policy_forward(void *policy, int n, const int32_t *tokens,
                                     const int32_t *pos, const kvv_hooks *hooks,
                                     kvv_logits_mode lm, float *logits, kvv_error *err)
{
    return kvv_policy_forward(policy, n, tokens, pos, hooks, lm, logits, err);
}

kvv_status kvv_greedy_step(kvv_forward_fn forward, void *ctx, const kvv_hooks *hooks,
                           const float *row, int n_vocab, int32_t pos, int32_t *tok, float *next,
                           kvv_error *err)
{
    *tok = kvv_logits_argmax(row, n_vocab);
    return forward(ctx, 1, tok, &pos, hooks, KVV_LOGITS_LAST, next, err);
}

kvv_status kvv_greedy_decode(const kvv_greedy *g, float *logits, int32_t *tokens, int32_t *argmax,
                             kvv_error *err)
{
    const int V = g->n_vocab, T = g->n_prompt;
    if (T < 1 || g->n_gen < 1 || V < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "greedy decode: %d prompt tokens, %d steps, "
                             "%d logits a row (each must be >= 1)", T, g->n_gen, V);
    int32_t *pos = malloc(sizeof *pos * (size_t)T);
    if (!pos)
        return kvv_error_set(err, KVV_ERR_NOMEM, "greedy decode: out of memory");
    for (int i = 0; i < T; i++)
        pos[i] = i;
    kvv_status s = g->forward(g->ctx, T, g->prompt, pos, g->hooks, KVV_LOGITS_LAST, logits, err);
    free(pos);
    for (int i = 0; !s && i < g->n_gen; i++) {
        const float *row = logits + (g->one_row ? 0 : (size_t)i * (size_t)V);
        const int32_t am = kvv_logits_argmax(row, V);
        if (argmax)
            argmax[i] = am;
        tokens[i] = g->forced ? g->forced[i] : am;
        if (g->on_row && (s = g->on_row(g->user, i, row, am, err)))
            break;
        if (i + 1 < g->n_gen) {
            float *next = logits + (g->one_row ? 0 : (size_t)(i + 1) * (size_t)V);
            int32_t p = T + i;
            s = g->forward(g->ctx, 1, &tokens[i], &p, g->hooks, KVV_LOGITS_LAST, next, err);
        }
    }
    return s;
}
