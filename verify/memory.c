/* memory.c — see memory.h. */
#include "verify/memory.h"

#include <stdlib.h>
#include <string.h>

#include "engine/greedy.h"
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

/* One conversation through one policy, run in lockstep with the others so
 * that each forward's logits are compared with the full cache's as they
 * come (no conversation-long logit store). */
typedef struct {
    kvv_policy_kind kind;
    kvv_ckpt_type ckpt;
    kvv_engine *e;
    kvv_policy *p;
    float *logits;            /* [n_vocab] of the last forward */
    uint64_t *bytes;          /* [n_turns] after each turn */
    uint64_t peak;
    int64_t recomputed;       /* (token, layer) rows restored, whole conversation */
    int32_t *gen;             /* [n_turns * gen_per_turn] generated tokens */
    bool differs;             /* a logit differed from the full cache's */
    kvv_mismatch first;
    int first_turn;           /* turn (from 1) of that first difference */
    char unsupported[192];    /* the engine cannot run this policy: why ("" = it can) */
} conversation;

/* A KV-Direct conversation the engine cannot run stops there, with the
 * reason; the full cache's cannot (nothing could be compared). */
static kvv_status conv_unsupported(conversation *cv, int k, kvv_status s, const kvv_error *err)
{
    if (s != KVV_ERR_UNSUPPORTED || k == 0)
        return s;
    snprintf(cv->unsupported, sizeof cv->unsupported, "%.190s", err->msg);
    return KVV_OK;
}

static kvv_status conv_open(const kvv_memory_opts *o, conversation *cv, kvv_policy_kind kind,
                            kvv_ckpt_type ckpt, int budget, int n_ctx, kvv_error *err)
{
    const kvv_check_opts *c = &o->check;
    memset(cv, 0, sizeof *cv);
    cv->kind = kind;
    cv->ckpt = ckpt;
    size_t n_gen = (size_t)o->n_turns * (size_t)o->gen_per_turn;
    cv->logits = malloc((size_t)c->model->hp.n_vocab * sizeof *cv->logits);
    cv->bytes = calloc((size_t)o->n_turns, sizeof *cv->bytes);
    cv->gen = calloc(n_gen > 0 ? n_gen : 1, sizeof *cv->gen);
    if (!cv->logits || !cv->bytes || !cv->gen)
        return kvv_error_set(err, KVV_ERR_NOMEM, "memory: out of memory");
    kvv_engine_opts eo = c->engine;
    eo.n_ctx = n_ctx;
    kvv_policy_cfg cfg = kvv_policy_cfg_default(kind, kind == KVV_POLICY_FULL ? n_ctx : budget);
    cfg.ckpt = ckpt;
    kvv_status s = kvv_engine_open(c->model, &eo, &cv->e, err);
    return s == KVV_OK ? kvv_policy_open(cv->e, &cfg, &cv->p, err) : s;
}

static void conv_close(conversation *cv)
{
    kvv_policy_close(cv->p);
    kvv_engine_close(cv->e);
    free(cv->logits);
    free(cv->bytes);
    free(cv->gen);
    memset(cv, 0, sizeof *cv);
}

/* Compare the last forward's logits with the full cache's (cv[0]); keep the
 * first difference. Once the tokens part, the inputs differ too, but the
 * first difference always comes at or before that forward. */
static void conv_compare(conversation *cv, const conversation *full, int n_vocab, int turn,
                         int pos)
{
    for (int i = 0; i < n_vocab && !cv->differs; i++)
        if (!kvv_f32_bit_equal(full->logits[i], cv->logits[i])) {
            cv->differs = true;
            cv->first_turn = turn + 1;
            cv->first = (kvv_mismatch){.layer = -1, .token = pos, .head = -1, .index = i,
                                       .expected = full->logits[i], .actual = cv->logits[i]};
            snprintf(cv->first.tensor, sizeof cv->first.tensor, "logits");
            snprintf(cv->first.variant, sizeof cv->first.variant, "%s%s turn=%d",
                     kvv_policy_name(cv->kind), cv->ckpt == KVV_CKPT_BF16 ? " bf16-ckpt" : "",
                     turn + 1);
        }
}

/* One forward of every conversation: prefill of turn t (step < 0) or its
 * decode step `step` (each feeds its own previous argmax). */
static kvv_status conv_step(const kvv_memory_opts *o, conversation *cv, int n_conv,
                            const int32_t *turn, int len, int at, int t, int step,
                            int32_t *pos, kvv_error *err)
{
    int n_vocab = o->check.model->hp.n_vocab;
    for (int k = 0; k < n_conv; k++) {
        if (cv[k].unsupported[0])
            continue;
        kvv_status s;
        if (step < 0) {
            for (int i = 0; i < len; i++)
                pos[i] = at + i;
            s = kvv_policy_forward(cv[k].p, len, turn, pos, NULL, KVV_LOGITS_LAST, cv[k].logits,
                                   err);
        } else {
            s = kvv_greedy_step(kvv_greedy_policy_forward, cv[k].p, NULL, cv[k].logits, n_vocab,
                                at, &cv[k].gen[t * o->gen_per_turn + step], cv[k].logits, err);
        }
        if ((s = conv_unsupported(&cv[k], k, s, err)) != KVV_OK)
            return s;
        if (k > 0 && !cv[k].unsupported[0])
            conv_compare(&cv[k], &cv[0], n_vocab, t, step < 0 ? at + len - 1 : at);
    }
    return KVV_OK;
}

static void conv_turn_done(conversation *cv, int n_conv, int t)
{
    for (int k = 0; k < n_conv; k++) {
        if (cv[k].unsupported[0])
            continue;
        kvv_policy_stats st;
        kvv_policy_get_stats(cv[k].p, &st);
        cv[k].bytes[t] = st.bytes_kv + st.bytes_ckpt;
        cv[k].peak = st.peak_bytes;
        cv[k].recomputed = st.recomputed_total;
    }
}

/* The conversation through full, kvdirect-layer, kvdirect-token (and the
 * bf16-checkpoint control), all at once. */
static kvv_status run_conversations(const kvv_memory_opts *o, int budget, int n_ctx,
                                    int32_t *const *turns, const int *lens, conversation *cv,
                                    int n_conv, kvv_error *err)
{
    const kvv_check_opts *c = &o->check;
    /* --force-fail plants the control's bf16 checkpoints into both real runs. */
    kvv_ckpt_type real = c->force_fail ? KVV_CKPT_BF16 : KVV_CKPT_F32;
    const struct { kvv_policy_kind kind; kvv_ckpt_type ckpt; } plan[4] = {
        {KVV_POLICY_FULL, KVV_CKPT_F32},
        {KVV_POLICY_KVDIRECT_LAYER, real},
        {KVV_POLICY_KVDIRECT_TOKEN, real},
        {KVV_POLICY_KVDIRECT_LAYER, KVV_CKPT_BF16},
    };
    int max_len = 1;
    for (int t = 0; t < o->n_turns; t++)
        max_len = lens[t] > max_len ? lens[t] : max_len;
    int32_t *pos = malloc((size_t)max_len * sizeof *pos);
    kvv_status s = pos ? KVV_OK : kvv_error_set(err, KVV_ERR_NOMEM, "memory: out of memory");
    for (int k = 0; s == KVV_OK && k < n_conv; k++)
        s = conv_unsupported(&cv[k], k, conv_open(o, &cv[k], plan[k].kind, plan[k].ckpt, budget,
                                                  n_ctx, err), err);
    int at = 0;
    for (int t = 0; s == KVV_OK && t < o->n_turns; t++) {
        s = conv_step(o, cv, n_conv, turns[t], lens[t], at, t, -1, pos, err);
        at += lens[t];
        for (int k = 0; s == KVV_OK && k < o->gen_per_turn; k++, at++)
            s = conv_step(o, cv, n_conv, NULL, 0, at, t, k, pos, err);
        if (s == KVV_OK)
            conv_turn_done(cv, n_conv, t);
        if (c->progress)
            c->progress(c->progress_user, "memory", t + 1, o->n_turns);
    }
    free(pos);
    return s;
}

/* Turns as token arrays (copies of the caller's, or seeded ids). */
static kvv_status make_turns(const kvv_memory_opts *o, int32_t **turns, int *lens, int *n_ctx,
                             kvv_error *err)
{
    const kvv_check_opts *c = &o->check;
    *n_ctx = 0;
    for (int t = 0; t < o->n_turns; t++) {
        int n = o->turn_tokens ? o->turn_len[t] : (o->random_turn_len > 0 ? o->random_turn_len : 12);
        turns[t] = malloc((size_t)(n > 0 ? n : 1) * sizeof **turns);
        if (!turns[t] || n < 1)
            return kvv_error_set(err, n < 1 ? KVV_ERR_USAGE : KVV_ERR_NOMEM,
                                 "memory: turn %d is empty or out of memory", t + 1);
        if (o->turn_tokens)
            memcpy(turns[t], o->turn_tokens[t], (size_t)n * sizeof **turns);
        else
            random_turn(c->seed, t, c->model->hp.n_vocab, turns[t], n);
        lens[t] = n;
        *n_ctx += n + o->gen_per_turn;
    }
    return kvv_check_opts_validate(&(kvv_check_opts){.model = c->model, .engine = c->engine,
                                                     .tokens = turns[0], .n_tokens = lens[0]},
                                   *n_ctx, err);
}

static void fill_result(const kvv_memory_opts *o, const int *lens, const conversation *cv,
                        kvv_memory_result *res)
{
    int at = 0, n_gen = o->n_turns * o->gen_per_turn;
    for (int t = 0; t < o->n_turns; t++) {
        at += lens[t] + o->gen_per_turn;
        kvv_memory_turn *m = &res->turns[t];
        m->turn = t + 1;
        m->positions = at;
        m->full_bytes = cv[0].bytes[t];
        m->kvd_layer_bytes = cv[1].unsupported[0] ? 0 : cv[1].bytes[t];
        m->kvd_token_bytes = cv[2].unsupported[0] ? 0 : cv[2].bytes[t];
    }
    res->peak_full = cv[0].peak;
    res->peak_layer = cv[1].unsupported[0] ? 0 : cv[1].peak;
    res->peak_token = cv[2].unsupported[0] ? 0 : cv[2].peak;
    size_t gb = (size_t)n_gen * sizeof *cv[0].gen;
    res->layer_tokens_equal = memcmp(cv[0].gen, cv[1].gen, gb) == 0;
    res->token_tokens_equal = memcmp(cv[0].gen, cv[2].gen, gb) == 0;
    res->layer_bit_equal = !cv[1].differs;
    res->token_bit_equal = !cv[2].differs;
    res->recomputed_layer = cv[1].recomputed;
    res->recomputed_token = cv[2].recomputed;
    snprintf(res->layer_unsupported, sizeof res->layer_unsupported, "%s", cv[1].unsupported);
    snprintf(res->token_unsupported, sizeof res->token_unsupported, "%s", cv[2].unsupported);
    res->layer_tokens_equal &= !cv[1].unsupported[0];
    res->token_tokens_equal &= !cv[2].unsupported[0];
}

static void set_verdict(const kvv_memory_opts *o, const kvv_memory_result *res,
                        const conversation *cv, int n_conv, int n_positions, kvv_check_result *r)
{
    if (res->layer_unsupported[0] && res->token_unsupported[0]) { /* neither mode ran */
        kvv_error e = {.status = KVV_ERR_UNSUPPORTED};
        snprintf(e.msg, sizeof e.msg, "%s", res->layer_unsupported);
        kvv_check_set_error(r, &e);
        return;
    }
    if (res->recomputed_layer == 0 && res->recomputed_token == 0) {
        kvv_check_set_verdict(r, KVV_VERDICT_SKIPPED,
                              "nothing verified: KV-Direct evicted nothing");
        kvv_check_set_message(r, "nothing verified: the live budget of %d tokens holds the "
                                 "whole conversation (%d positions); give --budget below it",
                              res->budget, n_positions);
        return; /* the control could not show anything either */
    }
    if (n_conv > 3 && !cv[3].unsupported[0])
        kvv_check_add_control(r, "kvdirect-layer with bf16 checkpoints", cv[3].differs,
                              cv[3].differs ? "logits differ from turn %d on"
                                            : "stayed bit-equal over %d turns: not detected",
                              cv[3].differs ? cv[3].first_turn : o->n_turns);
    bool differs = cv[1].differs || cv[2].differs;
    char pass[160], fail[160];
    snprintf(pass, sizeof pass,
             "peak full %llu B, kvdirect-layer %llu B, kvdirect-token %llu B; bit-equal%s",
             (unsigned long long)res->peak_full, (unsigned long long)res->peak_layer,
             (unsigned long long)res->peak_token,
             res->token_unsupported[0]   ? " (kvdirect-token unsupported by this engine)"
             : res->layer_unsupported[0] ? " (kvdirect-layer unsupported by this engine)"
                                         : "");
    snprintf(fail, sizeof fail, "KV-Direct differs from the full cache (%s%s)%s",
             cv[1].differs ? "layer mode" : "",
             cv[1].differs && cv[2].differs ? ", token mode"
             : cv[2].differs                ? "token mode"
                                            : "",
             o->check.force_fail ? "; --force-fail: bf16 checkpoints planted" : "");
    kvv_check_conclude(r, differs, pass, fail, "KV-Direct bit-equal to the full cache");
    if (differs) {
        kvv_check_note_mismatch(r, cv[1].differs ? &cv[1].first : &cv[2].first);
        kvv_check_set_message(r, "KV-Direct's conversation was not bit-equal to the full "
                                 "cache's");
    }
}

static void result_json(const kvv_memory_result *res, json_t *d)
{
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
    json_object_set_new(d, "turns", arr);
    json_object_set_new(d, "budget", json_integer(res->budget));
    json_object_set_new(d, "peak_full", json_integer((json_int_t)res->peak_full));
    json_object_set_new(d, "peak_kvdirect_layer", json_integer((json_int_t)res->peak_layer));
    json_object_set_new(d, "peak_kvdirect_token", json_integer((json_int_t)res->peak_token));
    json_object_set_new(d, "kvdirect_layer_bit_equal", json_boolean(res->layer_bit_equal));
    json_object_set_new(d, "kvdirect_token_bit_equal", json_boolean(res->token_bit_equal));
    json_object_set_new(d, "kvdirect_layer_tokens_equal", json_boolean(res->layer_tokens_equal));
    json_object_set_new(d, "kvdirect_token_tokens_equal", json_boolean(res->token_tokens_equal));
    json_object_set_new(d, "recomputed_rows_layer", json_integer(res->recomputed_layer));
    json_object_set_new(d, "recomputed_rows_token", json_integer(res->recomputed_token));
    json_object_set_new(d, "kvdirect_layer_unsupported", json_string(res->layer_unsupported));
    json_object_set_new(d, "kvdirect_token_unsupported", json_string(res->token_unsupported));
}

kvv_status kvv_check_memory(const kvv_memory_opts *o, kvv_memory_result *res,
                            kvv_check_result *r, kvv_error *err)
{
    memset(res, 0, sizeof *res);
    const kvv_check_opts *c = &o->check;
    double t0 = kvv_now_seconds();
    if (!c->model || o->n_turns < 1 || o->gen_per_turn < 0) {
        kvv_error_set(err, KVV_ERR_USAGE, "memory: need a model, >= 1 turn, gen >= 0");
        kvv_check_set_error(r, err);
        return err->status;
    }
    int32_t **turns = calloc((size_t)o->n_turns, sizeof *turns);
    int *lens = calloc((size_t)o->n_turns, sizeof *lens);
    int n_ctx = 0;
    kvv_status s = turns && lens ? make_turns(o, turns, lens, &n_ctx, err)
                                 : kvv_error_set(err, KVV_ERR_NOMEM, "memory: out of memory");
    int budget = o->budget > 0 ? o->budget : (n_ctx / 4 > 0 ? n_ctx / 4 : 1);
    res->n_turns = o->n_turns;
    res->budget = budget;
    res->turns = calloc((size_t)o->n_turns, sizeof *res->turns);
    if (s == KVV_OK && !res->turns)
        s = kvv_error_set(err, KVV_ERR_NOMEM, "memory: out of memory");
    conversation cv[4];
    memset(cv, 0, sizeof cv);
    int n_conv = c->controls ? 4 : 3;
    if (s == KVV_OK)
        s = run_conversations(o, budget, n_ctx, turns, lens, cv, n_conv, err);
    if (s == KVV_OK)
        fill_result(o, lens, cv, res);
    for (int t = 0; turns && t < o->n_turns; t++)
        free(turns[t]);
    free(turns);
    free(lens);
    if (s != KVV_OK) {
        for (int k = 0; k < 4; k++)
            conv_close(&cv[k]);
        kvv_memory_result_free(res);
        kvv_check_set_error(r, err);
        return s;
    }
    result_json(res, r->details);
    json_object_set_new(r->details, "force_fail", json_boolean(c->force_fail));
    kvv_engine_desc desc;
    kvv_engine_describe(cv[0].e, &desc);
    kvv_check_set_engine(r, &desc);
    set_verdict(o, res, cv, n_conv, n_ctx, r);
    for (int k = 0; k < 4; k++)
        conv_close(&cv[k]);
    r->seconds = kvv_now_seconds() - t0;
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
    const char *nl = res->layer_unsupported[0] ? "not run" : NULL;
    const char *nt = res->token_unsupported[0] ? "not run" : NULL;
    fprintf(f, "  generated tokens identical to the full cache: layer mode %s, token mode %s\n",
            nl ? nl : res->layer_tokens_equal ? "yes" : "NO",
            nt ? nt : res->token_tokens_equal ? "yes" : "NO");
    fprintf(f, "  every logit bit-equal to the full cache's: layer mode %s, token mode %s "
               "(%lld and %lld rows recomputed)\n",
            nl ? nl : res->layer_bit_equal ? "yes" : "NO",
            nt ? nt : res->token_bit_equal ? "yes" : "NO", (long long)res->recomputed_layer,
            (long long)res->recomputed_token);
    if (res->layer_unsupported[0])
        fprintf(f, "  kvdirect-layer: unsupported by this engine (not run): %s\n",
                res->layer_unsupported);
    if (res->token_unsupported[0])
        fprintf(f, "  kvdirect-token: unsupported by this engine (not run): %s\n",
                res->token_unsupported);
}

/* ------------------------------------------------------------ arithmetic */

kvv_memory_arith_opts kvv_memory_arith_opts_default(void)
{
    return (kvv_memory_arith_opts){.full_mb = 103, .kvd_mb = 42, .budget = 256,
                                   .storage = KVV_CACHE_BF16};
}

typedef struct {
    double kv_tok, res1, res_layers; /* bytes per token in the storage type */
    int n_local, n_global, window;
} arith;

static arith arith_of(const kvv_hparams *hp, kvv_cache_type storage)
{
    double el = storage == KVV_CACHE_F32 ? 4.0 : 2.0;
    arith a;
    a.kv_tok = (double)hp->n_layer * hp->n_head_kv * (hp->head_dim + hp->head_dim_v) * el;
    a.res1 = (double)hp->n_embd * el;
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

/* KV-Direct at n tokens, budget live: K/V of the live ones, checkpoints
 * (per_evicted bytes each) of the others. */
static double kvd_bytes(const arith *a, double n, double budget, double per_evicted)
{
    double b = n < budget ? n : budget;
    return b * a->kv_tok + (n - b) * per_evicted;
}

static const double arith_n[] = {512, 1024, 2048, 4096, 8192, 32768, 131072};
#define N_ARITH (sizeof arith_n / sizeof arith_n[0])

json_t *kvv_memory_arith_json(const kvv_hparams *hp, const kvv_memory_arith_opts *o)
{
    arith a = arith_of(hp, o->storage);
    double per_layer = a.kv_tok / hp->n_layer, B = o->budget;
    json_t *j = json_object(), *rows = json_array();
    json_object_set_new(j, "storage", json_string(kvv_cache_type_name(o->storage)));
    json_object_set_new(j, "budget", json_integer(o->budget));
    json_object_set_new(j, "kv_per_token", json_real(a.kv_tok));
    json_object_set_new(j, "residual_per_token", json_real(a.res1));
    json_object_set_new(j, "residuals_per_layer_per_token", json_real(a.res_layers));
    json_object_set_new(j, "local_layers", json_integer(a.n_local));
    json_object_set_new(j, "window", json_integer(a.window));
    for (size_t i = 0; i < N_ARITH; i++) {
        double n = arith_n[i];
        json_t *r = json_object();
        json_object_set_new(r, "tokens", json_real(n));
        json_object_set_new(r, "full", json_real(n * a.kv_tok));
        json_object_set_new(r, "swa_aware", json_real(swa_bytes(&a, per_layer, n)));
        json_object_set_new(r, "kvdirect_token", json_real(kvd_bytes(&a, n, B, a.res1)));
        json_object_set_new(r, "kvdirect_layer", json_real(kvd_bytes(&a, n, B, a.res_layers)));
        json_array_append_new(rows, r);
    }
    json_object_set_new(j, "rows", rows);
    if (o->full_mb > 0 && o->kvd_mb > 0) {
        double n = o->full_mb * 1e6 / a.kv_tok;
        double b = (o->kvd_mb * 1e6 - n * a.res1) / (a.kv_tok - a.res1);
        json_object_set_new(j, "reproduce_tokens", json_real(n));
        json_object_set_new(j, "reproduce_live_budget", json_real(b));
    }
    return j;
}

void kvv_memory_arith(FILE *f, const kvv_hparams *hp, const kvv_memory_arith_opts *o)
{
    arith a = arith_of(hp, o->storage);
    double per_layer = a.kv_tok / hp->n_layer, B = o->budget;
    const char *st = kvv_cache_type_name(o->storage);
    fprintf(f, "per token, %s: K+V %.0f B (%.1f KiB), one residual %.0f B (%.1f KiB, %.1fx "
               "smaller), residuals of every layer %.0f B (%.1f KiB)\n",
            st, a.kv_tok, a.kv_tok / 1024, a.res1, a.res1 / 1024, a.kv_tok / a.res1,
            a.res_layers, a.res_layers / 1024);
    if (a.n_local)
        fprintf(f, "%d of %d layers are local (sliding window %d): a window-aware cache keeps at "
                   "most %d tokens there\n",
                a.n_local, hp->n_layer, a.window, a.window);
    fprintf(f, "\n  %8s %12s %12s %18s %18s   (MB = 10^6 bytes; KV-Direct with %d live tokens)\n",
            "tokens", "full", "window-aware", "kvdirect-token", "kvdirect-layer", o->budget);
    for (size_t i = 0; i < N_ARITH; i++) {
        double n = arith_n[i];
        fprintf(f, "  %8.0f %10.1fMB %10.1fMB %16.1fMB %16.1fMB\n", n, n * a.kv_tok / 1e6,
                swa_bytes(&a, per_layer, n) / 1e6, kvd_bytes(&a, n, B, a.res1) / 1e6,
                kvd_bytes(&a, n, B, a.res_layers) / 1e6);
    }
    if (o->full_mb > 0 && o->kvd_mb > 0) {
        double n = o->full_mb * 1e6 / a.kv_tok;
        double b = (o->kvd_mb * 1e6 - n * a.res1) / (a.kv_tok - a.res1);
        fprintf(f, "\n%.0f MB of full cache is %.0f tokens. KV-Direct holds %.0f MB there if it keeps "
                   "K/V live for %.0f tokens and one %.0f-byte residual for each of the other "
                   "%.0f.\n",
                o->full_mb, n, o->kvd_mb, b, a.res1, n - b);
        if (a.n_local && n <= a.window)
            fprintf(f, "At %.0f tokens every local layer is still inside its %d-token window, "
                       "so a window-aware cache holds the same %.0f MB; past %d tokens it grows "
                       "only on the %d global layers.\n",
                    n, a.window, o->full_mb, a.window, a.n_global);
        if (a.res_layers >= per_layer * hp->n_layer)
            fprintf(f, "Per-layer residual checkpoints (%.0f B/token) are not smaller than the "
                       "K/V they replace (%.0f B/token): only the single-vector mode saves "
                       "memory, at the cost of re-running every layer.\n",
                    a.res_layers, a.kv_tok);
    }
}
