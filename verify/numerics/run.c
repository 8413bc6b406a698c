/*
 * run.c — kvv_numerics_run (verify/numerics/numerics.h): options, the
 * report, and the order of the work, in data-flow order:
 *   capture (capture.c) -> per layer: rebuild the op inputs with the
 *   reference's ops, check them against the hooks, measure every op set on
 *   the sampled rows (measure.c) -> output block -> portable math on dense
 *   samples (math.c).
 */
#include "verify/numerics/numerics_impl.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ options */

kvv_numerics_opts kvv_numerics_opts_default(void)
{
    kvv_numerics_opts o;
    memset(&o, 0, sizeof o);
    o.samples = 4;
    o.seed = 1;
    o.max_outputs = 256;
    o.math_samples = 20000;
    return o;
}

const kvv_numerics_cell *kvv_numerics_cell_at(const kvv_numerics_report *rep, int e, int layer,
                                              kvv_op op)
{
    if (!rep || e < 0 || e >= rep->n_engines || layer < 0 || layer > rep->n_layer ||
        (unsigned)op >= KVV_OP_COUNT)
        return NULL;
    return &rep->engines[e].cells[(size_t)layer * KVV_OP_COUNT + (size_t)op];
}

/* ------------------------------------------------------------ run */

static void pick_rows(const kvv_numerics_opts *o, int *rows, int S, int n)
{
    /* Row n-1 (it sees every key) plus S-1 distinct others from the seed
     * (splitmix64), sorted. */
    uint64_t x = o->seed;
    int k = 0;
    rows[k++] = n - 1;
    while (k < S) {
        x += 0x9e3779b97f4a7c15ull;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        int t = (int)(z % (uint64_t)n);
        bool dup = false;
        for (int i = 0; i < k; i++)
            dup = dup || rows[i] == t;
        if (!dup)
            rows[k++] = t;
    }
    for (int i = 1; i < S; i++)
        for (int j = i; j > 0 && rows[j - 1] > rows[j]; j--) {
            int t = rows[j];
            rows[j] = rows[j - 1];
            rows[j - 1] = t;
        }
}

void kvv_numerics_report_free(kvv_numerics_report *rep)
{
    if (!rep)
        return;
    for (int e = 0; e < rep->n_engines; e++)
        free(rep->engines[e].cells);
    free(rep->engines);
    free(rep->math);
    free(rep->rows);
    memset(rep, 0, sizeof *rep);
}

static kvv_status validate(const kvv_numerics_opts *o, kvv_ops *capture, kvv_ops *const *ops,
                           int n_ops, kvv_error *err)
{
    if (!o || !o->model)
        return kvv_error_set(err, KVV_ERR_USAGE, "numerics: no model");
    if (!o->tokens || o->n_tokens < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "numerics: the prompt is empty");
    for (int t = 0; t < o->n_tokens; t++)
        if (o->tokens[t] < 0 || o->tokens[t] >= o->model->hp.n_vocab)
            return kvv_error_set(err, KVV_ERR_USAGE,
                                 "numerics: token %d (prompt row %d) is outside the vocabulary "
                                 "0..%d", (int)o->tokens[t], t, o->model->hp.n_vocab - 1);
    if (o->samples < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "numerics: samples must be >= 1 (got %d)",
                             o->samples);
    if (o->max_outputs < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "numerics: max_outputs must be >= 1 (got %d)",
                             o->max_outputs);
    if (!capture || !capture->engine || !capture->vt->tensor || !capture->vt->softmax ||
        !capture->vt->softcap)
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "numerics: the capture op set must be the reference's");
    if (n_ops < 1 || !ops)
        return kvv_error_set(err, KVV_ERR_USAGE, "numerics: no op set to measure");
    for (int e = 0; e < n_ops; e++)
        if (!ops[e] || !ops[e]->vt->matmul || !ops[e]->vt->dot || !ops[e]->vt->rmsnorm ||
            !ops[e]->vt->rope || !ops[e]->vt->silu || !ops[e]->vt->gelu)
            return kvv_error_set(err, KVV_ERR_USAGE, "numerics: op set %d lacks a required op",
                                 e);
    return KVV_OK;
}

kvv_status kvv_numerics_run(const kvv_numerics_opts *o, kvv_ops *capture, kvv_ops *const *ops,
                            int n_ops, kvv_numerics_report *rep, kvv_error *err)
{
    memset(rep, 0, sizeof *rep);
    kvv_status st = validate(o, capture, ops, n_ops, err);
    if (st)
        return st;
    const double t0 = kvv_now_seconds();
    const kvv_hparams *hp = &o->model->hp;
    const int n = o->n_tokens, L = hp->n_layer, E = hp->n_embd, F = hp->n_ff;
    const int hd = hp->head_dim, Q = hp->n_head * hd, K = hp->n_head_kv * hd;
    const int O = hp->n_head * hp->head_dim_v, V = hp->n_vocab;
    const int S = o->samples < n ? o->samples : n;

    rep->n_layer = L;
    rep->n_tokens = n;
    rep->samples = S;
    rep->max_outputs = o->max_outputs;
    rep->attn_cap = hp->attn_softcap;
    for (int op = 0; op < KVV_OP_COUNT; op++)
        rep->used[op] = true;
    rep->used[KVV_OP_SILU] = hp->act == KVV_ACT_SILU;
    rep->used[KVV_OP_GELU] = hp->act == KVV_ACT_GELU_TANH;
    rep->used[KVV_OP_SOFTCAP] = hp->attn_softcap > 0.0f || hp->final_softcap > 0.0f;
    rep->rows = calloc((size_t)S, sizeof *rep->rows);
    rep->engines = calloc((size_t)n_ops, sizeof *rep->engines);
    rep->n_engines = rep->engines ? n_ops : 0;
    bool ok = rep->rows && rep->engines;
    for (int e = 0; ok && e < n_ops; e++) {
        kvv_numerics_engine *en = &rep->engines[e];
        snprintf(en->name, sizeof en->name, "%s", ops[e]->name);
        en->desc = ops[e]->desc;
        for (int op = 0; op < KVV_OP_COUNT; op++) {
            en->measured[op] = !(op == KVV_OP_SOFTMAX && !ops[e]->vt->softmax) &&
                               !(op == KVV_OP_SOFTCAP && !ops[e]->vt->softcap);
            snprintf(en->where[op], sizeof en->where[op], "%s",
                     ops[e]->where[op] ? ops[e]->where[op] : "");
            kvv_oracle_hist_init(&en->total[op].hist);
        }
        en->cells = calloc((size_t)(L + 1) * KVV_OP_COUNT, sizeof *en->cells);
        ok = en->cells != NULL;
        for (size_t i = 0; ok && i < (size_t)(L + 1) * KVV_OP_COUNT; i++)
            kvv_oracle_hist_init(&en->cells[i].hist);
    }
    if (!ok) {
        kvv_numerics_report_free(rep);
        return kvv_error_set(err, KVV_ERR_NOMEM, "numerics: out of memory");
    }
    pick_rows(o, rep->rows, S, n);

    /* 1. the forward pass, captured */
    hooks_capture c = {.hp = hp, .n = n};
    c.resid = num_falloc((size_t)(L + 1) * n * E);
    c.k = num_falloc((size_t)L * n * K);
    c.probs = num_falloc((size_t)L * S * hp->n_head * n);
    c.rows = rep->rows;
    c.S = S;
    c.att = num_falloc((size_t)L * n * O);
    float *logits = num_falloc((size_t)n * V);
    int32_t *pos = calloc((size_t)n, sizeof *pos);
    const int dims[] = {E, F, Q, K, hp->n_head_kv * hp->head_dim_v, O, V};
    size_t wide = (size_t)n;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        wide = (size_t)dims[i] > wide ? (size_t)dims[i] : wide;
    nrun r = {.o = o, .hp = hp, .cap = capture, .ops = ops, .n_ops = n_ops, .rep = rep, .n = n,
              .orc = kvv_oracle_new(), .got = num_falloc(wide), .exact = num_falloc(wide),
              .tmp = num_falloc(wide), .batch = num_falloc((size_t)n * wide)};
    layer_buf b;
    float **bufs[] = {&b.xn, &b.q, &b.k, &b.qpre, &b.kpre, &b.proj, &b.down, &b.hmid,
                      &b.xf, &b.gate, &b.up, &b.act, &b.hout, &b.sc, &b.qs};
    const size_t sizes[] = {(size_t)n * E, (size_t)n * Q, (size_t)n * K, (size_t)n * Q,
                            (size_t)n * K, (size_t)n * E, (size_t)n * E, (size_t)n * E,
                            (size_t)n * E, (size_t)n * F, (size_t)n * F, (size_t)n * F,
                            (size_t)n * E, (size_t)n * E + (size_t)V, (size_t)hd};
    ok = c.resid && c.k && c.probs && c.att && logits && pos && r.orc && r.got && r.exact &&
         r.tmp && r.batch;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ok = (*bufs[i] = num_falloc(sizes[i])) != NULL && ok;
    if (ok) {
        for (int t = 0; t < n; t++)
            pos[t] = t;
        st = num_capture(&r, &c, pos, logits, err);
        /* 2.-3. per layer, then the output block */
        for (int l = 0; !st && l < L; l++) {
            num_rebuild_layer(&r, l, &c, &b);
            if (o->progress)
                o->progress(o->progress_user, "numerics layers", l + 1, L + 1);
        }
        if (!st) {
            num_rebuild_output(&r, &c, logits, &b);
            if (o->progress)
                o->progress(o->progress_user, "numerics layers", L + 1, L + 1);
            st = num_math(&r, err);
        }
    } else {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "numerics: out of memory for %d tokens", n);
    }
    if (r.orc)
        rep->oracle = kvv_oracle_get_stats(r.orc);
    kvv_oracle_free(r.orc);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(*bufs[i]);
    free(r.got);
    free(r.exact);
    free(r.tmp);
    free(r.batch);
    free(c.resid);
    free(c.k);
    free(c.probs);
    free(c.att);
    free(logits);
    free(pos);
    if (st) {
        kvv_numerics_report_free(rep);
        return st;
    }
    rep->seconds = kvv_now_seconds() - t0;
    return KVV_OK;
}
