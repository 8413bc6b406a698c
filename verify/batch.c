/* batch.c — request A alone against A among other requests, per mode
 * (see batch.h). The runs; batch_cmp.c compares and reports them. */
#include "verify/batch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "verify/batch_impl.h"

static const char *const mode_names[KVV_BATCH_N_MODES] = {"single", "decode", "mixed",
                                                          "prefix", "isolation"};

const char *kvv_batch_mode_name(int i)
{
    return i >= 0 && i < KVV_BATCH_N_MODES ? mode_names[i] : NULL;
}

int kvv_batch_modes_parse(const char *s, unsigned *modes, char *bad, size_t size)
{
    *modes = 0;
    const char *p = s;
    while (p && *p) {
        const char *q = strchr(p, ',');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        int found = -1;
        for (int i = 0; i < KVV_BATCH_N_MODES; i++)
            if (strlen(mode_names[i]) == n && strncmp(p, mode_names[i], n) == 0)
                found = i;
        if (n == 3 && strncmp(p, "all", 3) == 0)
            *modes |= KVV_BATCH_MODE_ALL;
        else if (found < 0) {
            snprintf(bad, size, "%.*s", (int)(n < 64 ? n : 64), p);
            return 0;
        } else
            *modes |= 1u << found;
        p = q ? q + 1 : NULL;
    }
    if (!*modes) {
        snprintf(bad, size, "%s", s);
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ runs */

void kvv_bb_clear(batch_bb *b)
{
    b->n = 0;
}

/* Append one token: sequence seq, token tok at pos; a_pos >= 0 when it is
 * A's token at that position (its logits row is kept). */
static void bb_add(batch_bb *b, int seq, int32_t tok, int pos, bool logits, int a_pos)
{
    int i = b->n++;
    b->tok[i] = tok;
    b->pos[i] = pos;
    b->seq[i] = seq;
    b->lg[i] = logits;
    b->a_pos[i] = a_pos;
}

/* Empty every sequence the check uses. */
static kvv_status clear_all(batch_ctx *c, kvv_error *err)
{
    kvv_status s = KVV_OK;
    for (int q = 0; q < c->N && !s; q++)
        s = kvv_engine_seq_rm(c->e, q, 0, -1, err);
    return s;
}

/* Submit c->bb as one call; A's rows go into run->logits. */
static kvv_status submit(batch_ctx *c, batch_run *run, kvv_error *err)
{
    batch_bb *b = &c->bb;
    kvv_batch kb = {.n = b->n, .token = b->tok, .pos = b->pos, .seq = b->seq, .logits = b->lg};
    kvv_status s = kvv_engine_decode(c->e, &kb, c->lbuf, err);
    if (s)
        return s;
    c->n_calls++;
    int row = 0;
    for (int i = 0; i < b->n; i++) {
        if (!b->lg[i])
            continue;
        if (b->a_pos[i] >= 0 && b->a_pos[i] < run->npos) {
            memcpy(run->logits + (size_t)b->a_pos[i] * c->V, c->lbuf + (size_t)row * c->V,
                   (size_t)c->V * sizeof(float));
            run->have[b->a_pos[i]] = 1;
        }
        row++;
    }
    kvv_bb_clear(b);
    return KVV_OK;
}

/* A's tokens a[p0..p1) into the batch on sequence seq (every row's logits),
 * with token `plant` in place of a[plant_at] when plant_at >= 0. */
static void add_a(batch_ctx *c, int seq, int p0, int p1, int plant_at)
{
    for (int p = p0; p < p1; p++) {
        int32_t t = c->a[p];
        if (p == plant_at)
            t = (t + 1) % c->V;
        bb_add(&c->bb, seq, t, p, true, p);
    }
}

/* Other request i's tokens [p0, p1) of token set `set` (logits for the last). */
static void add_other(batch_ctx *c, int i, int set, int p0, int p1)
{
    for (int p = p0; p < p1; p++)
        bb_add(&c->bb, c->oseq[i], c->oth[set][(size_t)i * c->olen_max + p], p, p == p1 - 1,
               -1);
}

/* Start a run over npos positions of A: NaN everywhere, nothing produced. */
static void run_begin(batch_ctx *c, batch_run *run, int npos)
{
    run->npos = npos;
    for (size_t i = 0; i < (size_t)npos * c->V; i++)
        run->logits[i] = NAN;
    memset(run->have, 0, (size_t)npos);
}

/* Read A's K/V rows (sequence seq, positions 0..npos-1, every layer). */
static kvv_status run_read_kv(batch_ctx *c, batch_run *run, int seq, kvv_error *err)
{
    size_t nk = (size_t)c->L * run->npos * c->kd, nv = (size_t)c->L * run->npos * c->vd;
    for (size_t i = 0; i < nk; i++)
        run->k[i] = NAN;
    for (size_t i = 0; i < nv; i++)
        run->v[i] = NAN;
    kvv_status s = KVV_OK;
    for (int l = 0; l < c->L && !s; l++)
        s = kvv_engine_seq_kv(c->e, seq, l, 0, run->npos, run->k + (size_t)l * run->npos * c->kd,
                              run->v + (size_t)l * run->npos * c->vd, NULL, err);
    return s;
}

/* The prompts of the others (set `set`) in one call, each its own sequence. */
static kvv_status others_prompts(batch_ctx *c, batch_run *run, int set, kvv_error *err)
{
    for (int i = 0; i < c->N - 1; i++)
        add_other(c, i, set, 0, c->olen[i]);
    return submit(c, run, err);
}

kvv_status kvv_batch_run_alone(batch_ctx *c, batch_run *run, bool steps, kvv_error *err)
{
    kvv_status s = clear_all(c, err);
    run_begin(c, run, steps ? c->T + c->D : c->T);
    if (s)
        return s;
    add_a(c, 0, 0, c->T, -1);
    s = submit(c, run, err);
    for (int j = 0, p = c->T; steps && !s && j < c->n_steps; p += c->step[j++]) {
        add_a(c, 0, p, p + c->step[j], -1);
        s = submit(c, run, err);
    }
    return s ? s : run_read_kv(c, run, 0, err);
}

kvv_status kvv_batch_run_single(batch_ctx *c, batch_run *run, int plant_at, kvv_error *err)
{
    kvv_status s = clear_all(c, err);
    run_begin(c, run, c->T);
    if (s)
        return s;
    int half = (c->N - 1) / 2;
    for (int i = 0; i < half; i++)
        add_other(c, i, 0, 0, c->olen[i]);
    add_a(c, c->seq_a, 0, c->T, plant_at);
    for (int i = half; i < c->N - 1; i++)
        add_other(c, i, 0, 0, c->olen[i]);
    s = submit(c, run, err);
    return s ? s : run_read_kv(c, run, c->seq_a, err);
}

kvv_status kvv_batch_run_decode(batch_ctx *c, batch_run *run, kvv_error *err)
{
    kvv_status s = clear_all(c, err);
    run_begin(c, run, c->T + c->D);
    if (s)
        return s;
    add_a(c, c->seq_a, 0, c->T, -1); /* A's prompt as alone: the steps are the question */
    if (!(s = submit(c, run, err)))
        s = others_prompts(c, run, 0, err);
    int half = (c->N - 1) / 2;
    for (int j = 0, p = c->T, d = 0; !s && j < c->n_steps; d += c->step[j], p += c->step[j++]) {
        int m = c->step[j];
        for (int i = 0; i < half; i++)
            add_other(c, i, 0, c->olen[i] + d, c->olen[i] + d + m);
        add_a(c, c->seq_a, p, p + m, -1);
        for (int i = half; i < c->N - 1; i++)
            add_other(c, i, 0, c->olen[i] + d, c->olen[i] + d + m);
        s = submit(c, run, err);
    }
    return s ? s : run_read_kv(c, run, c->seq_a, err);
}

kvv_status kvv_batch_run_mixed(batch_ctx *c, batch_run *run, kvv_error *err)
{
    kvv_status s = clear_all(c, err);
    run_begin(c, run, c->T);
    if (s || (s = others_prompts(c, run, 0, err)))
        return s;
    int half = (c->N - 1) / 2;
    for (int i = 0; i < half; i++)
        add_other(c, i, 0, c->olen[i], c->olen[i] + 1);
    add_a(c, c->seq_a, 0, c->T, -1);
    for (int i = half; i < c->N - 1; i++)
        add_other(c, i, 0, c->olen[i], c->olen[i] + 1);
    s = submit(c, run, err);
    return s ? s : run_read_kv(c, run, c->seq_a, err);
}

kvv_status kvv_batch_run_prefix(batch_ctx *c, batch_run *run, bool copy, kvv_error *err)
{
    kvv_status s = clear_all(c, err);
    run_begin(c, run, c->T);
    if (s)
        return s;
    int src = copy ? c->oseq[0] : c->seq_a;
    add_a(c, src, 0, c->P, -1);
    if (!(s = submit(c, run, err)) && copy)
        s = kvv_engine_seq_cp(c->e, src, c->seq_a, 0, c->P, err);
    if (!s) {
        add_a(c, c->seq_a, c->P, c->T, -1);
        s = submit(c, run, err);
    }
    return s ? s : run_read_kv(c, run, c->seq_a, err);
}

kvv_status kvv_batch_run_isolation(batch_ctx *c, batch_run *run, int set, kvv_error *err)
{
    kvv_status s = clear_all(c, err);
    run_begin(c, run, c->T + c->iso_steps);
    if (s)
        return s;
    int half = (c->N - 1) / 2;
    for (int j = -1; j < c->iso_steps && !s; j++) {
        for (int i = 0; i < half; i++)
            add_other(c, i, set, j < 0 ? 0 : c->olen[i] + j, j < 0 ? c->olen[i] : c->olen[i] + j + 1);
        if (j < 0)
            add_a(c, c->seq_a, 0, c->T, -1);
        else
            add_a(c, c->seq_a, c->T + j, c->T + j + 1, -1);
        for (int i = half; i < c->N - 1; i++)
            add_other(c, i, set, j < 0 ? 0 : c->olen[i] + j, j < 0 ? c->olen[i] : c->olen[i] + j + 1);
        s = submit(c, run, err);
    }
    return s ? s : run_read_kv(c, run, c->seq_a, err);
}
