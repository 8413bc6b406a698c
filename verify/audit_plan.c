/* audit_plan.c — the audit's workload: cost estimate, floor and plan
 * (verify/audit_plan.h). */
#include "verify/audit_plan.h"

#include <string.h>

#include "verify/kv.h"

void kvv_model_macs_per_token(const kvv_hparams *hp, double *layers, double *head)
{
    double e = hp->n_embd;
    double q = (double)hp->n_head * hp->head_dim;
    double k = (double)hp->n_head_kv * hp->head_dim;
    double v = (double)hp->n_head_kv * hp->head_dim_v;
    double o = (double)hp->n_head * hp->head_dim_v;
    double ffn = 3.0 * e * hp->n_ff;
    *layers = hp->n_layer * (e * (q + k + v) + o * e + ffn);
    *head = e * hp->n_vocab;
}

double kvv_audit_cost(const kvv_hparams *hp, int T, int N)
{
    double cl, ch;
    kvv_model_macs_per_token(hp, &cl, &ch);
    double L = hp->n_layer;
    double kvproj = (double)hp->n_embd * hp->n_head_kv * (hp->head_dim + hp->head_dim_v);
    /* kv: one prefill; 3 recomputes + bit-flip + up to 3 control recomputes */
    double kv = T * cl + 7.0 * T * L * kvproj;
    /* patch: A, B, L+1 patched runs, 1 control; all logits rows */
    double patch = (L + 4.0) * T * (cl + ch);
    /* greedy: no-cache sum_{i<N} (T+i) tokens + two cached decodes; plus
     * attention, which for tiny models is not negligible: a token at
     * position p costs n_layer * n_head * (head_dim + head_dim_v) * p */
    double nocache_tok = (double)N * T + (double)N * (N - 1) / 2.0;
    double att = L * hp->n_head * (double)(hp->head_dim + hp->head_dim_v);
    double nocache_att = 0.0;
    for (int i = 0; i < N; i++)
        nocache_att += (double)(T + i) * (T + i) / 2.0;
    double greedy = nocache_tok * cl + nocache_att * att + 2.0 * (T + N) * cl + 3.0 * N * ch;
    /* invariance: baseline + 4 variants + control (+ threads where present) */
    double inv = 6.0 * T * (cl + ch);
    /* kvdirect: full + 3 configurations + control, each T + N positions; the
     * single-vector mode at budget (T+N)/2 re-runs about N*(T+N)/4 evicted
     * tokens in all; per-layer recompute is below 1% of a layer. */
    double kvd = 5.0 * (T + N) * cl + (double)N * (T + N) / 4.0 * cl + 5.0 * N * ch;
    return kv + patch + greedy + inv + kvd;
}

void kvv_audit_plan_for(const kvv_hparams *hp, double budget, const kvv_batch_paths *paths,
                        bool quick, kvv_audit_plan *out)
{
    static const struct { int T, N; } ladder[] = {
        {32, 48}, {24, 40}, {16, 32}, {12, 24}, {8, 16}, {6, 12}, {5, 8}, {4, 6}, {4, 4}};
    const int n = (int)(sizeof ladder / sizeof ladder[0]);
    memset(out, 0, sizeof *out);
    if (paths)
        out->paths = *paths;
    if (budget <= 0)
        budget = KVV_AUDIT_BUDGET_MACS;
    int pick = n - 1;
    for (int i = 0; i < n; i++)
        if (kvv_audit_cost(hp, ladder[i].T, ladder[i].N) <= budget) {
            pick = i;
            break;
        }
    int top = out->paths.n ? out->paths.sw[out->paths.n - 1].at : 0;
    out->floor_prompt = 2 * top > KVV_AUDIT_MIN_PROMPT ? 2 * top : KVV_AUDIT_MIN_PROMPT;
    out->floor_gen = KVV_AUDIT_MIN_STEPS;
    out->quick = quick;
    out->n_prompt = ladder[pick].T;
    out->n_gen = ladder[pick].N;
    if (!quick) {
        out->n_prompt = out->n_prompt > out->floor_prompt ? out->n_prompt : out->floor_prompt;
        out->n_gen = out->n_gen > out->floor_gen ? out->n_gen : out->floor_gen;
    }
    out->est_macs = kvv_audit_cost(hp, out->n_prompt, out->n_gen);
}

kvv_status kvv_audit_plan_engine(const kvv_model *m, const kvv_engine_opts *eo, bool quick,
                                 kvv_audit_plan *out, kvv_error *err)
{
    kvv_engine_opts o = *eo;
    o.n_ctx = 16; /* asked, not run: a small cache */
    kvv_engine *e;
    kvv_status s = kvv_engine_open(m, &o, &e, err);
    if (s)
        return s;
    kvv_batch_paths paths;
    kvv_engine_batch_paths(e, &paths);
    kvv_engine_close(e);
    kvv_audit_plan_for(&m->hp, 0, &paths, quick, out);
    return KVV_OK;
}

/* The largest switch, 0 when none (or quick: the plan ignores them). */
static int top_switch(const kvv_audit_plan *p)
{
    return p->quick || !p->paths.n ? 0 : p->paths.sw[p->paths.n - 1].at;
}

int kvv_audit_kv_chunk(const kvv_audit_plan *p, int T)
{
    int c = kvv_kv_default_chunk(T);
    int top = top_switch(p);
    /* the smallest odd size at or above the largest switch, below T and not
     * dividing it (pieces of c and T % c, both sides of the switch) */
    for (int k = top | 1; top && c < top && k < T; k += 2)
        if (T % k) {
            c = k;
            break;
        }
    return c;
}

int kvv_audit_chunks(const kvv_audit_plan *p, int T, int *out, int max)
{
    int cand[3 + 2 * KVV_BATCH_MAX_SWITCHES], nc = 0;
    cand[nc++] = 1;
    cand[nc++] = 2;
    cand[nc++] = 7;
    for (int k = 0; k < p->paths.n && !p->quick; k++) {
        cand[nc++] = p->paths.sw[k].at - 1;
        cand[nc++] = p->paths.sw[k].at;
    }
    int n = 0;
    for (int v = 1; v < T && n < max; v++) /* ascending, distinct */
        for (int i = 0; i < nc; i++)
            if (cand[i] == v) {
                out[n++] = v;
                break;
            }
    return n;
}
