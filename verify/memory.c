/* memory.c — see memory.h. */
#include "verify/memory.h"

#include <stdlib.h>
#include <string.h>

#include "engine/policy/policy.h"

void kvv_memory_result_free(kvv_memory_result *res)
{
    if (!res)
        return;
    free(res->turns);
    memset(res, 0, sizeof *res);
}

/* Deterministic ids for a turn without a tokenizer (splitmix64). */
static void random_turn(uint64_t seed, int turn, int n_vocab, int32_t *out, int n)
{
    kvv_prompt_random(seed * 1000003u + (uint64_t)turn, n_vocab, -1, out, n);
}

/* Run the whole conversation through one policy; bytes[t] after each turn,
 * gen[] receives every generated token in order. */
static kvv_status run_policy(const kvv_memory_opts *o, kvv_policy_kind kind, int budget,
                             int n_ctx, int32_t *const *turns, const int *lens,
                             uint64_t *bytes, uint64_t *peak, int32_t *gen, kvv_error *err)
{
    const kvv_check_opts *c = &o->check;
    kvv_engine_opts eo = c->engine;
    eo.n_ctx = n_ctx;
    kvv_engine *e = NULL;
    kvv_policy *p = NULL;
    kvv_policy_cfg cfg = kvv_policy_cfg_default(kind, kind == KVV_POLICY_FULL ? n_ctx : budget);
    int n_vocab = c->model->hp.n_vocab;
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    int32_t *pos = malloc((size_t)n_ctx * sizeof *pos);
    if (!logits || !pos) {
        free(logits);
        free(pos);
        return kvv_error_set(err, KVV_ERR_NOMEM, "memory: out of memory");
    }
    kvv_status s = kvv_engine_open(c->model, &eo, &e, err);
    if (s == KVV_OK)
        s = kvv_policy_open(e, &cfg, &p, err);
    int at = 0, g = 0;
    for (int t = 0; s == KVV_OK && t < o->n_turns; t++) {
        for (int i = 0; i < lens[t]; i++)
            pos[i] = at + i;
        s = kvv_policy_forward(p, lens[t], turns[t], pos, NULL, KVV_LOGITS_LAST, logits, err);
        at += lens[t];
        for (int k = 0; s == KVV_OK && k < o->gen_per_turn; k++) {
            int32_t tok = kvv_argmax_f32(logits, n_vocab), ps = at;
            gen[g++] = tok;
            s = kvv_policy_forward(p, 1, &tok, &ps, NULL, KVV_LOGITS_LAST, logits, err);
            at++;
        }
        if (s == KVV_OK) {
            kvv_policy_stats st;
            kvv_policy_get_stats(p, &st);
            bytes[t] = st.bytes_kv + st.bytes_ckpt;
            *peak = st.peak_bytes;
        }
        if (c->progress)
            c->progress(c->progress_user, kvv_policy_name(kind), t + 1, o->n_turns);
    }
    kvv_policy_close(p);
    kvv_engine_close(e);
    free(logits);
    free(pos);
    return s;
}

kvv_status kvv_memory_run(const kvv_memory_opts *o, kvv_memory_result *res, kvv_check_result *r,
                          kvv_error *err)
{
    memset(res, 0, sizeof *res);
    const kvv_check_opts *c = &o->check;
    double t0 = kvv_now_seconds();
    if (!c->model || o->n_turns < 1 || o->gen_per_turn < 0) {
        kvv_error_set(err, KVV_ERR_USAGE, "memory: need a model, >= 1 turn, gen >= 0");
        kvv_check_set_error(r, err);
        return err->status;
    }
    int n_vocab = c->model->hp.n_vocab;
    int32_t **turns = calloc((size_t)o->n_turns, sizeof *turns);
    int *lens = calloc((size_t)o->n_turns, sizeof *lens);
    kvv_status s = turns && lens ? KVV_OK : kvv_error_set(err, KVV_ERR_NOMEM, "memory: out of memory");
    int n_ctx = 0;
    for (int t = 0; s == KVV_OK && t < o->n_turns; t++) {
        int n = o->turn_tokens ? o->turn_len[t] : (o->random_turn_len > 0 ? o->random_turn_len : 12);
        turns[t] = malloc((size_t)(n > 0 ? n : 1) * sizeof **turns);
        if (!turns[t] || n < 1) {
            s = kvv_error_set(err, n < 1 ? KVV_ERR_USAGE : KVV_ERR_NOMEM,
                              "memory: turn %d is empty or out of memory", t + 1);
            break;
        }
        if (o->turn_tokens)
            memcpy(turns[t], o->turn_tokens[t], (size_t)n * sizeof **turns);
        else
            random_turn(c->seed, t, n_vocab, turns[t], n);
        lens[t] = n;
        n_ctx += n + o->gen_per_turn;
    }
    int budget = o->budget > 0 ? o->budget : (n_ctx / 4 > 0 ? n_ctx / 4 : 1);
    res->n_turns = o->n_turns;
    res->budget = budget;
    res->turns = calloc((size_t)o->n_turns, sizeof *res->turns);
    uint64_t *b3 = calloc(3 * (size_t)o->n_turns, sizeof *b3);
    int n_gen = o->n_turns * o->gen_per_turn;
    int32_t *gen = calloc(3 * (size_t)(n_gen > 0 ? n_gen : 1), sizeof *gen);
    if (s == KVV_OK && (!res->turns || !b3 || !gen))
        s = kvv_error_set(err, KVV_ERR_NOMEM, "memory: out of memory");
    if (s == KVV_OK)
        s = kvv_check_opts_validate(&(kvv_check_opts){.model = c->model, .engine = c->engine,
                                                      .tokens = turns[0], .n_tokens = lens[0]},
                                    n_ctx, err);
    const kvv_policy_kind kinds[3] = {KVV_POLICY_FULL, KVV_POLICY_KVDIRECT_LAYER,
                                      KVV_POLICY_KVDIRECT_TOKEN};
    uint64_t peaks[3] = {0, 0, 0};
    for (int k = 0; s == KVV_OK && k < 3; k++)
        s = run_policy(o, kinds[k], budget, n_ctx, turns, lens, b3 + (size_t)k * o->n_turns,
                       &peaks[k], gen + (size_t)k * (size_t)n_gen, err);
    if (s == KVV_OK) {
        int at = 0;
        for (int t = 0; t < o->n_turns; t++) {
            at += lens[t] + o->gen_per_turn;
            kvv_memory_turn *m = &res->turns[t];
            m->turn = t + 1;
            m->positions = at;
            m->full_bytes = b3[t];
            m->kvd_layer_bytes = b3[o->n_turns + t];
            m->kvd_token_bytes = b3[2 * o->n_turns + t];
        }
        res->peak_full = peaks[0];
        res->peak_layer = peaks[1];
        res->peak_token = peaks[2];
        res->layer_tokens_equal = memcmp(gen, gen + n_gen, (size_t)n_gen * sizeof *gen) == 0;
        res->token_tokens_equal = memcmp(gen, gen + 2 * (size_t)n_gen, (size_t)n_gen * sizeof *gen) == 0;
    }
    for (int t = 0; turns && t < o->n_turns; t++)
        free(turns[t]);
    free(turns);
    free(lens);
    free(b3);
    free(gen);
    if (s != KVV_OK) {
        kvv_memory_result_free(res);
        kvv_check_set_error(r, err);
        return s;
    }
    json_t *arr = json_array();
    for (int t = 0; t < res->n_turns; t++) {
        const kvv_memory_turn *m = &res->turns[t];
        json_t *j = json_object();
        json_object_set_new(j, "turn", json_integer(m->turn));
        json_object_set_new(j, "positions", json_integer(m->positions));
        json_object_set_new(j, "full_bytes", json_integer((json_int_t)m->full_bytes));
        json_object_set_new(j, "kvdirect_layer_bytes", json_integer((json_int_t)m->kvd_layer_bytes));
        json_object_set_new(j, "kvdirect_token_bytes", json_integer((json_int_t)m->kvd_token_bytes));
        json_array_append_new(arr, j);
    }
    json_object_set_new(r->details, "turns", arr);
    json_object_set_new(r->details, "budget", json_integer(res->budget));
    json_object_set_new(r->details, "peak_full", json_integer((json_int_t)res->peak_full));
    json_object_set_new(r->details, "peak_kvdirect_layer", json_integer((json_int_t)res->peak_layer));
    json_object_set_new(r->details, "peak_kvdirect_token", json_integer((json_int_t)res->peak_token));
    r->seconds = kvv_now_seconds() - t0;
    if (res->layer_tokens_equal && res->token_tokens_equal)
        kvv_check_set_verdict(r, KVV_VERDICT_PASS,
                              "peak full %llu B, kvdirect-layer %llu B, kvdirect-token %llu B; "
                              "tokens identical",
                              (unsigned long long)res->peak_full,
                              (unsigned long long)res->peak_layer,
                              (unsigned long long)res->peak_token);
    else {
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "KV-Direct generated different tokens (%s%s)",
                              res->layer_tokens_equal ? "" : "layer mode ",
                              res->token_tokens_equal ? "" : "token mode");
        kvv_check_set_message(r, "KV-Direct's conversation diverged from the full cache's");
    }
    return KVV_OK;
}

void kvv_memory_print(FILE *f, const kvv_memory_result *res)
{
    fprintf(f, "KV-Direct live budget: %d tokens\n", res->budget);
    fprintf(f, "  %4s %9s %14s %16s %16s\n", "turn", "positions", "full (B)", "kvdirect-layer",
            "kvdirect-token");
    for (int t = 0; t < res->n_turns; t++) {
        const kvv_memory_turn *m = &res->turns[t];
        fprintf(f, "  %4d %9d %14llu %16llu %16llu\n", m->turn, m->positions,
                (unsigned long long)m->full_bytes, (unsigned long long)m->kvd_layer_bytes,
                (unsigned long long)m->kvd_token_bytes);
    }
    fprintf(f, "  peak %24llu %16llu %16llu\n", (unsigned long long)res->peak_full,
            (unsigned long long)res->peak_layer, (unsigned long long)res->peak_token);
    fprintf(f, "  generated tokens identical to the full cache: layer mode %s, token mode %s\n",
            res->layer_tokens_equal ? "yes" : "NO", res->token_tokens_equal ? "yes" : "NO");
}

/* ------------------------------------------------------------ arithmetic */

typedef struct {
    double kv_tok, res1, res_layers; /* bytes per token, bf16 */
    int n_local, n_global, window;
} arith;

static arith arith_of(const kvv_hparams *hp)
{
    arith a;
    a.kv_tok = (double)hp->n_layer * hp->n_head_kv * (hp->head_dim + hp->head_dim_v) * 2.0;
    a.res1 = (double)hp->n_embd * 2.0;
    a.res_layers = a.res1 * hp->n_layer;
    a.n_local = 0;
    for (int l = 0; l < hp->n_layer && l < KVV_MAX_LAYERS; l++)
        a.n_local += hp->n_swa > 0 && hp->swa_layer[l];
    a.n_global = hp->n_layer - a.n_local;
    a.window = hp->n_swa;
    return a;
}

/* Bytes of a sliding-window-aware cache at n tokens: local layers keep at
 * most `window` tokens. */
static double swa_bytes(const arith *a, double per_layer_tok, double n)
{
    double local = a->window > 0 && n > a->window ? a->window : n;
    return per_layer_tok * (a->n_global * n + a->n_local * local);
}

static const double arith_n[] = {512, 1024, 2048, 4096, 8192, 32768, 131072};
#define N_ARITH (sizeof arith_n / sizeof arith_n[0])
#define ARITH_B 256.0

json_t *kvv_memory_arith_json(const kvv_hparams *hp, double full_mb, double kvd_mb)
{
    arith a = arith_of(hp);
    double per_layer = a.kv_tok / hp->n_layer;
    json_t *j = json_object(), *rows = json_array();
    json_object_set_new(j, "kv_bf16_per_token", json_real(a.kv_tok));
    json_object_set_new(j, "residual_bf16_per_token", json_real(a.res1));
    json_object_set_new(j, "residuals_per_layer_bf16_per_token", json_real(a.res_layers));
    json_object_set_new(j, "local_layers", json_integer(a.n_local));
    json_object_set_new(j, "window", json_integer(a.window));
    for (size_t i = 0; i < N_ARITH; i++) {
        double n = arith_n[i], b = n < ARITH_B ? n : ARITH_B;
        json_t *r = json_object();
        json_object_set_new(r, "tokens", json_real(n));
        json_object_set_new(r, "full", json_real(n * a.kv_tok));
        json_object_set_new(r, "swa_aware", json_real(swa_bytes(&a, per_layer, n)));
        json_object_set_new(r, "kvdirect_token_b256", json_real(b * a.kv_tok + (n - b) * a.res1));
        json_object_set_new(r, "kvdirect_layer_b256",
                            json_real(b * a.kv_tok + (n - b) * a.res_layers));
        json_array_append_new(rows, r);
    }
    json_object_set_new(j, "rows", rows);
    if (full_mb > 0 && kvd_mb > 0) {
        double n = full_mb * 1e6 / a.kv_tok;
        double b = (kvd_mb * 1e6 - n * a.res1) / (a.kv_tok - a.res1);
        json_object_set_new(j, "reproduce_tokens", json_real(n));
        json_object_set_new(j, "reproduce_live_budget", json_real(b));
    }
    return j;
}

void kvv_memory_arith(FILE *f, const kvv_hparams *hp, double full_mb, double kvd_mb)
{
    arith a = arith_of(hp);
    double per_layer = a.kv_tok / hp->n_layer;
    fprintf(f, "per token, bf16: K+V %.0f B (%.1f KiB), one residual %.0f B (%.1f KiB, %.1fx "
               "smaller), residuals of every layer %.0f B (%.1f KiB)\n",
            a.kv_tok, a.kv_tok / 1024, a.res1, a.res1 / 1024, a.kv_tok / a.res1, a.res_layers,
            a.res_layers / 1024);
    if (a.n_local)
        fprintf(f, "%d of %d layers are local (sliding window %d): a window-aware cache keeps at "
                   "most %d tokens there\n",
                a.n_local, hp->n_layer, a.window, a.window);
    fprintf(f, "\n  %8s %12s %12s %18s %18s   (MB = 10^6 bytes; KV-Direct with %d live tokens)\n",
            "tokens", "full", "window-aware", "kvdirect-token", "kvdirect-layer", (int)ARITH_B);
    for (size_t i = 0; i < N_ARITH; i++) {
        double n = arith_n[i], b = n < ARITH_B ? n : ARITH_B;
        fprintf(f, "  %8.0f %10.1fMB %10.1fMB %16.1fMB %16.1fMB\n", n, n * a.kv_tok / 1e6,
                swa_bytes(&a, per_layer, n) / 1e6, (b * a.kv_tok + (n - b) * a.res1) / 1e6,
                (b * a.kv_tok + (n - b) * a.res_layers) / 1e6);
    }
    if (full_mb > 0 && kvd_mb > 0) {
        double n = full_mb * 1e6 / a.kv_tok;
        double b = (kvd_mb * 1e6 - n * a.res1) / (a.kv_tok - a.res1);
        fprintf(f, "\n%.0f MB of full cache is %.0f tokens. KV-Direct holds %.0f MB there if it keeps "
                   "K/V live for %.0f tokens and one %.0f-byte residual for each of the other "
                   "%.0f.\n",
                full_mb, n, kvd_mb, b, a.res1, n - b);
        if (a.n_local && n <= a.window)
            fprintf(f, "At %.0f tokens every local layer is still inside its %d-token window, "
                       "so a window-aware cache holds the same %.0f MB; past %d tokens it grows "
                       "only on the %d global layers.\n",
                    n, a.window, full_mb, a.window, a.n_global);
        if (a.res_layers >= per_layer * hp->n_layer)
            fprintf(f, "Per-layer residual checkpoints (%.0f B/token) are not smaller than the "
                       "K/V they replace (%.0f B/token): only the single-vector mode saves "
                       "memory, at the cost of re-running every layer.\n",
                    a.res_layers, a.kv_tok);
    }
}
