/* batch_check.c — the batch check's workload, comparisons and verdict
 * (see batch.h; the runs are batch.c's). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify/batch_impl.h"

/* What one comparison (one mode, or one side of prefix) found. */
typedef struct {
    kvv_cmp_stats lg, k, v;
    uint64_t rows, rows_differ; /* logit rows + K/V rows (layer, position) */
    bool has_first;
    kvv_mismatch first;
} batch_cmp;

/* The decode step position p of A falls in (-1: the prompt). */
static int step_of(const batch_ctx *c, int p)
{
    if (p < c->T)
        return -1;
    for (int j = 0, q = c->T; j < c->n_steps; q += c->step[j++])
        if (p < q + c->step[j])
            return j;
    return -1;
}

static void note_first(batch_cmp *m, const char *tensor, const char *variant, int layer, int pos,
                       int index, float ref, float test)
{
    if (m->has_first && m->first.token <= pos)
        return;
    m->has_first = true;
    m->first = (kvv_mismatch){.layer = layer, .token = pos, .head = -1, .index = index,
                              .expected = ref, .actual = test};
    snprintf(m->first.tensor, sizeof m->first.tensor, "%s", tensor);
    snprintf(m->first.variant, sizeof m->first.variant, "%s", variant);
}

/* Compare test against ref: logits rows ref gave (positions row0..), and
 * every K/V row of every layer. ulp: the per-layer figure's entry. */
static void compare_runs(const batch_ctx *c, const batch_run *ref, const batch_run *test,
                         int row0, const char *label, batch_cmp *m, json_t *ulp)
{
    memset(m, 0, sizeof *m);
    kvv_cmp_init(&m->lg);
    kvv_cmp_init(&m->k);
    kvv_cmp_init(&m->v);
    int npos = ref->npos < test->npos ? ref->npos : test->npos;
    for (int p = row0; p < npos; p++) {
        if (!ref->have[p])
            continue;
        kvv_cmp_stats s;
        kvv_cmp_init(&s);
        kvv_cmp_update(&s, ref->logits + (size_t)p * c->V, test->logits + (size_t)p * c->V,
                       (size_t)c->V);
        m->rows++;
        if (s.first >= 0) {
            m->rows_differ++;
            note_first(m, "logits", label, -1, p, (int)s.first, s.first_ref, s.first_test);
        }
        kvv_cmp_merge(&m->lg, &s);
    }
    json_t *jk = json_array(), *jv = json_array();
    for (int l = 0; l < c->L; l++) {
        kvv_cmp_stats lk, lv;
        kvv_cmp_init(&lk);
        kvv_cmp_init(&lv);
        for (int p = 0; p < npos; p++) {
            kvv_cmp_stats sk, sv;
            kvv_cmp_init(&sk);
            kvv_cmp_init(&sv);
            kvv_cmp_update(&sk, ref->k + ((size_t)l * ref->npos + p) * c->kd,
                           test->k + ((size_t)l * test->npos + p) * c->kd, (size_t)c->kd);
            kvv_cmp_update(&sv, ref->v + ((size_t)l * ref->npos + p) * c->vd,
                           test->v + ((size_t)l * test->npos + p) * c->vd, (size_t)c->vd);
            m->rows++;
            if (sk.first >= 0 || sv.first >= 0)
                m->rows_differ++;
            if (sk.first >= 0)
                note_first(m, "K", label, l, p, (int)sk.first, sk.first_ref, sk.first_test);
            else if (sv.first >= 0)
                note_first(m, "V", label, l, p, (int)sv.first, sv.first_ref, sv.first_test);
            kvv_cmp_merge(&lk, &sk);
            kvv_cmp_merge(&lv, &sv);
        }
        json_array_append_new(jk, kvv_json_ulp(lk.max_ulp));
        json_array_append_new(jv, kvv_json_ulp(lv.max_ulp));
        kvv_cmp_merge(&m->k, &lk);
        kvv_cmp_merge(&m->v, &lv);
    }
    if (ulp) {
        json_object_set_new(ulp, "variant", json_string(label));
        json_object_set_new(ulp, "K", jk);
        json_object_set_new(ulp, "V", jv);
        json_object_set_new(ulp, "logits", kvv_json_ulp(m->lg.max_ulp));
    } else {
        json_decref(jk);
        json_decref(jv);
    }
}

static uint64_t cmp_diff(const batch_cmp *m)
{
    return m->lg.n_diff + m->k.n_diff + m->v.n_diff;
}

/* The report's rows and the mode's object for comparison m. */
static kvv_status record(batch_ctx *c, const char *label, const char *compared,
                         const batch_cmp *m, json_t *modes)
{
    const struct { const char *kind; const kvv_cmp_stats *st; } rows[] = {
        {"logits", &m->lg}, {"K", &m->k}, {"V", &m->v}};
    for (size_t i = 0; i < 3; i++) {
        char what[48];
        snprintf(what, sizeof what, "%s %s", rows[i].kind, label);
        if (kvv_check_add_row(c->r, -1, what, rows[i].st))
            return KVV_ERR_NOMEM;
        if (m->has_first && strcmp(m->first.tensor, rows[i].kind) == 0)
            kvv_check_row_where(c->r, "l=%d,t=%d,i=%d", m->first.layer, m->first.token,
                                m->first.index);
    }
    kvv_cmp_stats all = m->lg;
    kvv_cmp_merge(&all, &m->k);
    kvv_cmp_merge(&all, &m->v);
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o}", "mode", label,
                          "compared", compared, "verdict", cmp_diff(m) ? "fail" : "pass",
                          "values", (json_int_t)all.n, "differ", (json_int_t)all.n_diff, "rows",
                          (json_int_t)m->rows, "rows_differ", (json_int_t)m->rows_differ,
                          "max_ulp", kvv_json_ulp(all.max_ulp), "nmse",
                          json_real(isfinite(kvv_cmp_nmse(&all)) ? kvv_cmp_nmse(&all) : -1.0));
    if (all.max_ulp > c->max_ulp)
        c->max_ulp = all.max_ulp;
    if (m->has_first) {
        size_t n = strlen(c->summary);
        char layer_txt[24];
        snprintf(layer_txt, sizeof layer_txt, " layer %d", m->first.layer);
        snprintf(c->summary + n, sizeof c->summary - n,
                 "%s%s: %llu of %llu rows differ, first %s%s position %d%s", n ? "; " : "",
                 label, (unsigned long long)m->rows_differ, (unsigned long long)m->rows,
                 m->first.tensor, m->first.layer >= 0 ? layer_txt : "", m->first.token,
                 step_of(c, m->first.token) >= 0 ? " (a decode step)" : "");
        kvv_check_note_mismatch(c->r, &m->first);
        json_object_set_new(j, "first",
                            json_pack("{s:s, s:i, s:i, s:i, s:i}", "tensor", m->first.tensor,
                                      "layer", m->first.layer, "position", m->first.token,
                                      "step", step_of(c, m->first.token), "index",
                                      m->first.index));
    } else
        json_object_set_new(j, "first", json_null());
    json_array_append_new(modes, j);
    return KVV_OK;
}

/* A mode the engine could not run: recorded, the others go on. */
static void record_unsupported(batch_ctx *c, const char *label, const kvv_error *e,
                               json_t *modes)
{
    json_array_append_new(modes, json_pack("{s:s, s:s, s:s}", "mode", label, "verdict",
                                           "unsupported", "message", e->msg));
    (void)c;
}

/* ------------------------------------------------------------------ sizes */

/* The others' lengths: around A's, never equal to it, alternately longer
 * and shorter (other shapes in the same call). */
static int other_len(int T, int i)
{
    int n = i % 2 == 0 ? T + 2 * i + 3 : T / 2 + i;
    if (n < 1)
        n = 1;
    return n == T ? n + 1 : n;
}


static kvv_status alloc_ctx(batch_ctx *c, int npos_max, batch_run *runs, int n_runs)
{
    const kvv_check_opts *o = c->o;
    int total = c->T + c->D; /* A's tokens, the largest single request */
    int cap = total;
    for (int i = 0; i < c->N - 1; i++)
        cap += c->olen_max;
    c->a = malloc((size_t)total * sizeof *c->a);
    c->olen = calloc((size_t)c->N, sizeof *c->olen);
    c->oseq = calloc((size_t)c->N, sizeof *c->oseq);
    for (int s = 0; s < 2; s++)
        c->oth[s] = malloc(((size_t)c->N * c->olen_max + 1) * sizeof *c->oth[s]);
    c->bb.tok = malloc((size_t)cap * sizeof(int32_t));
    c->bb.pos = malloc((size_t)cap * sizeof(int32_t));
    c->bb.seq = malloc((size_t)cap * sizeof(int32_t));
    c->bb.lg = malloc((size_t)cap);
    c->bb.a_pos = malloc((size_t)cap * sizeof(int));
    c->lbuf = malloc((size_t)cap * c->V * sizeof(float));
    bool ok = c->a && c->olen && c->oseq && c->oth[0] && c->oth[1] && c->bb.tok && c->bb.pos &&
              c->bb.seq && c->bb.lg && c->bb.a_pos && c->lbuf;
    for (int i = 0; i < n_runs; i++) {
        runs[i].logits = malloc((size_t)npos_max * c->V * sizeof(float));
        runs[i].have = malloc((size_t)npos_max);
        runs[i].k = malloc((size_t)c->L * npos_max * c->kd * sizeof(float));
        runs[i].v = malloc((size_t)c->L * npos_max * c->vd * sizeof(float));
        ok = ok && runs[i].logits && runs[i].have && runs[i].k && runs[i].v;
    }
    if (!ok)
        return KVV_ERR_NOMEM;
    /* A: the prompt, then decode tokens from the seed; the others: random
     * tokens from their own seeds, B' (set 1) another draw of the same lengths */
    memcpy(c->a, o->tokens, (size_t)c->T * sizeof *c->a);
    if (c->D + c->iso_steps > 0)
        kvv_prompt_random(o->seed * 7919u + 1, c->V, -1, c->a + c->T,
                          c->D > c->iso_steps ? c->D : c->iso_steps);
    for (int s = 0; s < 2; s++)
        kvv_prompt_random(o->seed * 104729u + 17u * (unsigned)s + 3, c->V,
                          o->tokens[0] /* the same first token (BOS) as A */, c->oth[s],
                          (c->N - 1) * c->olen_max + 1);
    for (int i = 0; i < c->N - 1; i++) {
        for (int s = 0; s < 2; s++)
            c->oth[s][(size_t)i * c->olen_max] = o->tokens[0];
        c->olen[i] = other_len(c->T, i);
        c->oseq[i] = i < c->seq_a ? i : i + 1;
    }
    return KVV_OK;
}

static void workload_json(batch_ctx *c)
{
    json_t *ol = json_array(), *st = json_array();
    char text[256];
    int off = snprintf(text, sizeof text, "%d requests: A %d tokens (sequence %d), others", c->N,
                       c->T, c->seq_a);
    for (int i = 0; i < c->N - 1; i++) {
        json_array_append_new(ol, json_integer(c->olen[i]));
        if (off < (int)sizeof text)
            off += snprintf(text + off, sizeof text - (size_t)off, "%s%d", i ? "," : " ",
                            c->olen[i]);
    }
    for (int j = 0; j < c->n_steps; j++)
        json_array_append_new(st, json_integer(c->step[j]));
    unsigned want = c->o->batch_modes ? c->o->batch_modes : KVV_BATCH_MODE_ALL;
    if ((want & KVV_BATCH_MODE_DECODE) && off < (int)sizeof text)
        off += snprintf(text + off, sizeof text - (size_t)off,
                        "; decode %d steps in %d calls of 1,2,%d tokens per request", c->D,
                        c->n_steps, KVV_BATCH_DECODE_K);
    if ((want & KVV_BATCH_MODE_PREFIX) && off < (int)sizeof text)
        off += snprintf(text + off, sizeof text - (size_t)off, "; prefix %d of %d copied", c->P,
                        c->T);
    if ((want & KVV_BATCH_MODE_ISOLATION) && off < (int)sizeof text)
        off += snprintf(text + off, sizeof text - (size_t)off, "; isolation %d steps",
                        c->iso_steps);
    json_object_set_new(c->r->details, "workload",
                        json_pack("{s:i, s:i, s:i, s:o, s:i, s:o, s:i, s:i, s:s}", "n_requests",
                                  c->N, "a_tokens", c->T, "a_sequence", c->seq_a,
                                  "other_tokens", ol, "decode_steps", c->D, "decode_calls", st,
                                  "prefix", c->P, "isolation_steps", c->iso_steps, "text",
                                  text));
}

/* ------------------------------------------------------------------ the check */

typedef struct {
    batch_ctx c;
    batch_run run[3]; /* alone, among, a third (prefix split, isolation B', control) */
} batch_state;

static const char *mode_label(int i)
{
    return kvv_batch_mode_name(i);
}

/* Run and compare mode i; *n_diff gains its differences, *ran whether it ran. */
static kvv_status run_mode(batch_state *b, int i, json_t *modes, uint64_t *n_diff, bool *ran,
                           kvv_error *err)
{
    batch_ctx *c = &b->c;
    batch_run *alone = &b->run[0], *among = &b->run[1], *third = &b->run[2];
    json_t *ulp = json_object_get(c->r->details, "ulp_by_layer");
    kvv_error me = {0};
    kvv_status s = KVV_OK;
    batch_cmp m;
    const char *label = mode_label(i);
    *ran = false;
    if (i == 3 && c->P == 0) {
        snprintf(me.msg, sizeof me.msg, "a 1-token prompt has no prefix to copy");
        record_unsupported(c, label, &me, modes);
        return KVV_OK;
    }
    switch (1u << i) {
    case KVV_BATCH_MODE_SINGLE:
        if (!(s = kvv_batch_run_alone(c, alone, false, &me)))
            s = kvv_batch_run_single(c, among, c->o->force_fail ? c->T - 1 : -1, &me);
        break;
    case KVV_BATCH_MODE_DECODE:
        if (!(s = kvv_batch_run_alone(c, alone, true, &me)))
            s = kvv_batch_run_decode(c, among, &me);
        break;
    case KVV_BATCH_MODE_MIXED:
        if (!(s = kvv_batch_run_alone(c, alone, false, &me)))
            s = kvv_batch_run_mixed(c, among, &me);
        break;
    case KVV_BATCH_MODE_PREFIX:
        if (!(s = kvv_batch_run_alone(c, alone, false, &me)) &&
            !(s = kvv_batch_run_prefix(c, third, false, &me)))
            s = kvv_batch_run_prefix(c, among, true, &me);
        break;
    case KVV_BATCH_MODE_ISOLATION:
        if (!(s = kvv_batch_run_isolation(c, alone, 0, &me)))
            s = kvv_batch_run_isolation(c, among, 1, &me);
        break;
    }
    if (s == KVV_ERR_UNSUPPORTED) {
        record_unsupported(c, label, &me, modes);
        return KVV_OK;
    }
    if (s) {
        *err = me;
        return s;
    }
    *ran = true;
    json_t *u = json_object();
    if (i == 3) { /* prefix: the copy against the split, the split against fresh */
        json_t *u2 = json_object();
        batch_cmp m2;
        compare_runs(c, third, among, 0, "prefix copy", &m, u);
        compare_runs(c, alone, third, 0, "prefix split", &m2, u2);
        json_array_append_new(ulp, u2);
        if ((s = record(c, "prefix copy", "copied prefix vs the same split computed in A", &m,
                        modes)) ||
            (s = record(c, "prefix split", "split (P, then the rest) vs one call", &m2, modes)))
            return s;
        *n_diff += cmp_diff(&m2);
    } else {
        compare_runs(c, alone, among, i == 1 ? c->T : 0, label, &m, u);
        s = record(c, label,
                   i == 4 ? "beside B vs beside B' (same lengths, other tokens)"
                          : "alone vs among the other requests",
                   &m, modes);
    }
    json_array_append_new(ulp, u);
    *n_diff += cmp_diff(&m);
    return s;
}

/* The control: the shared call of single with A's last prompt token changed,
 * against the same call unplanted; the difference must be found. */
static kvv_status control(batch_state *b, kvv_error *err)
{
    batch_ctx *c = &b->c;
    kvv_status s = kvv_batch_run_single(c, &b->run[1], -1, err);
    if (!s)
        s = kvv_batch_run_single(c, &b->run[2], c->T - 1, err);
    if (s)
        return s;
    batch_cmp m;
    compare_runs(c, &b->run[1], &b->run[2], 0, "control", &m, NULL);
    uint64_t d = cmp_diff(&m);
    if (d)
        return kvv_check_add_control(c->r, "A's last prompt token changed in the shared call",
                                     true, "%llu values differ in %llu rows, first %s at "
                                     "layer %d position %d", (unsigned long long)d,
                                     (unsigned long long)m.rows_differ, m.first.tensor,
                                     m.first.layer, m.first.token);
    return kvv_check_add_control(c->r, "A's last prompt token changed in the shared call", false,
                                 "no logit or K/V value of A differs");
}

static kvv_status batch_body(void *ctx, kvv_error *err)
{
    batch_state *b = ctx;
    batch_ctx *c = &b->c;
    const kvv_check_opts *o = c->o;
    int npos = c->T + (c->D > c->iso_steps ? c->D : c->iso_steps);
    if (c->olen_max > npos)
        npos = c->olen_max;
    /* positions per sequence, but also the largest call: a plugin host takes
     * at most n_ctx tokens per call */
    kvv_engine_opts eo = kvv_check_engine_opts(o, npos > c->max_call ? npos : c->max_call);
    eo.n_seq_max = c->N;
    kvv_status s = kvv_check_open_engine(o->model, &eo, KVV_ENGINE_CAP_SEQS, "batch", &c->e, err);
    if (s)
        return s;
    kvv_engine_desc d;
    kvv_engine_describe(c->e, &d);
    kvv_check_set_engine(c->r, &d);
    if (kvv_engine_n_seq(c->e) < c->N)
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                             "engine %s serves %d sequences; %d requests need %d", d.name,
                             kvv_engine_n_seq(c->e), c->N, c->N);
    if (alloc_ctx(c, npos, b->run, 3))
        return kvv_error_set(err, KVV_ERR_NOMEM, "batch: out of memory");
    workload_json(c);
    json_t *modes = json_array(), *ulp = json_array();
    json_object_set_new(c->r->details, "modes", modes);
    json_object_set_new(c->r->details, "ulp_by_layer", ulp);
    unsigned want = o->batch_modes ? o->batch_modes : KVV_BATCH_MODE_ALL;
    uint64_t n_diff = 0;
    int n_ran = 0, n_want = 0;
    char differ[128] = "";
    c->max_ulp = 0;
    for (int i = 0; i < KVV_BATCH_N_MODES && !s; i++) {
        if (!(want & (1u << i)))
            continue;
        n_want++;
        if (o->stop && *o->stop)
            return kvv_error_set(err, KVV_ERR_INTERNAL, "batch: interrupted");
        if (o->progress)
            o->progress(o->progress_user, mode_label(i), i, KVV_BATCH_N_MODES);
        uint64_t before = n_diff;
        bool ran;
        s = run_mode(b, i, modes, &n_diff, &ran, err);
        n_ran += ran;
        if (n_diff > before)
            snprintf(differ + strlen(differ), sizeof differ - strlen(differ), "%s%s",
                     differ[0] ? ", " : "", mode_label(i));
    }
    if (s)
        return s == KVV_ERR_NOMEM ? kvv_error_set(err, s, "batch: out of memory") : s;
    if (!n_ran)
        return kvv_error_set(err, KVV_ERR_UNSUPPORTED, "engine %s ran none of the batch modes: "
                             "%s", d.name, json_string_value(json_object_get(
                                 json_array_get(modes, 0), "message")));
    if (o->controls && (s = control(b, err)))
        return s;
    json_object_set_new(c->r->details, "calls", json_integer(c->n_calls));
    char pass_key[160], fail_key[160];
    snprintf(pass_key, sizeof pass_key, "%d of %d modes bit-equal, %d requests%s", n_ran, n_want,
             c->N, n_ran < n_want ? " (others unsupported)" : "");
    char mu[32];
    if (c->max_ulp == KVV_ULP_NAN)
        snprintf(mu, sizeof mu, "NaN");
    else
        snprintf(mu, sizeof mu, "%llu", (unsigned long long)c->max_ulp);
    snprintf(fail_key, sizeof fail_key, "A differs among other requests in %s (%llu values, "
             "max %s ULP)", differ, (unsigned long long)n_diff, mu);
    kvv_check_conclude(c->r, n_diff > 0, pass_key, fail_key, "every mode bit-equal");
    if (n_diff > 0)
        kvv_check_set_message(c->r, "%s", c->summary);
    return KVV_OK;
}

kvv_status kvv_check_batch(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err)
{
    batch_state b;
    memset(&b, 0, sizeof b);
    batch_ctx *c = &b.c;
    c->o = o;
    c->r = r;
    kvv_status s = KVV_OK;
    if (o->model && o->tokens && o->n_tokens > 0) {
        const kvv_hparams *hp = &o->model->hp;
        c->L = hp->n_layer;
        c->V = hp->n_vocab;
        c->kd = hp->n_head_kv * hp->head_dim;
        c->vd = hp->n_head_kv * hp->head_dim_v;
        c->T = o->n_tokens;
        c->N = o->n_requests > 0 ? o->n_requests : KVV_BATCH_DEFAULT_REQUESTS;
        if (c->N < 2 || c->N > KVV_ENGINE_MAX_SEQS) {
            kvv_error_set(err, KVV_ERR_USAGE, "batch: %d requests: A and 1 to %d others", c->N,
                          KVV_ENGINE_MAX_SEQS - 1);
            kvv_check_set_error(r, err);
            return KVV_ERR_USAGE;
        }
        c->seq_a = c->N / 2;
        c->P = c->T / 2 > 0 ? c->T / 2 : 1;
        if (c->P >= c->T && (o->batch_modes & KVV_BATCH_MODE_PREFIX)) {
            kvv_error_set(err, KVV_ERR_USAGE, "batch: the prefix mode needs a prompt of 2 "
                          "tokens or more");
            kvv_check_set_error(r, err);
            return KVV_ERR_USAGE;
        }
        if (c->P >= c->T) /* a 1-token prompt: no split to copy */
            c->P = 0;
        c->iso_steps = 3;
        int cap = o->n_gen < 2 * (3 + KVV_BATCH_DECODE_K) ? o->n_gen : 2 * (3 + KVV_BATCH_DECODE_K);
        static const int cycle[3] = {1, 2, KVV_BATCH_DECODE_K};
        for (int left = cap; left > 0 && c->n_steps < BATCH_MAX_STEPS; c->n_steps++) {
            int m = cycle[c->n_steps % 3] < left ? cycle[c->n_steps % 3] : left;
            c->step[c->n_steps] = m;
            left -= m;
            c->D += m;
        }
        int omax = 0, osum = 0;
        for (int i = 0; i < c->N - 1; i++) {
            omax = other_len(c->T, i) > omax ? other_len(c->T, i) : omax;
            osum += other_len(c->T, i);
        }
        c->max_call = c->T + osum > c->N * KVV_BATCH_DECODE_K ? c->T + osum
                                                               : c->N * KVV_BATCH_DECODE_K;
        c->olen_max = omax + (c->D > c->iso_steps ? c->D : c->iso_steps) + 1;
    }
    int npos = c->T + (c->D > c->iso_steps ? c->D : c->iso_steps);
    if (c->olen_max > npos)
        npos = c->olen_max;
    s = kvv_check_frame(o, r, npos, batch_body, &b, err);
    kvv_engine_close(c->e);
    free(c->a);
    free(c->olen);
    free(c->oseq);
    free(c->oth[0]);
    free(c->oth[1]);
    free(c->bb.tok);
    free(c->bb.pos);
    free(c->bb.seq);
    free(c->bb.lg);
    free(c->bb.a_pos);
    free(c->lbuf);
    for (int i = 0; i < 3; i++) {
        free(b.run[i].logits);
        free(b.run[i].have);
        free(b.run[i].k);
        free(b.run[i].v);
    }
    return s;
}
