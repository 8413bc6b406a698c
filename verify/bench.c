/* bench.c — throughput of one engine or two alternating (see bench.h). */
#include "verify/bench.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/median.h"
#include "common/roofline.h"
#include "engine/cpu/cpu_engine.h"
#include "model/tensor_types.h"
#include "verify/audit_plan.h"

/* ---- the token ids and the calls' buffers ---------------------------- */

/* The token ids and positions every engine runs, and one logits row per
 * sequence; the call being built for requests. */
typedef struct {
    int32_t *tok, *pos;       /* [n_prompt + n_gen] */
    float *logits;            /* [nb][n_vocab] */
    int32_t *btok, *bpos, *bseq; /* [nb] the kvv_batch being built */
    uint8_t *blg;             /* [nb] */
} bench_io;

static bool io_alloc(bench_io *io, const kvv_bench_opts *o)
{
    const int total = o->n_prompt + o->n_gen;
    const size_t nb = (size_t)(o->requests > 1 ? o->requests : 1) * (size_t)(total + 1);
    io->tok = malloc((size_t)total * sizeof(int32_t));
    io->pos = malloc((size_t)total * sizeof(int32_t));
    io->logits = malloc(nb * (size_t)o->model->hp.n_vocab * sizeof(float));
    io->btok = malloc(nb * sizeof(int32_t));
    io->bpos = malloc(nb * sizeof(int32_t));
    io->bseq = malloc(nb * sizeof(int32_t));
    io->blg = malloc(nb);
    return io->tok && io->pos && io->logits && io->btok && io->bpos && io->bseq && io->blg;
}

static void io_free(bench_io *io)
{
    free(io->tok);
    free(io->pos);
    free(io->logits);
    free(io->btok);
    free(io->bpos);
    free(io->bseq);
    free(io->blg);
}

/* ---- one engine: warm-up and one repeat ------------------------------ */

/* Warm-up: page the weights in (up to 8 prompt tokens, 1 without a prompt). */
static kvv_status warm_up(const kvv_bench_opts *o, kvv_engine *e, bench_io *io, kvv_error *err)
{
    const int np = o->n_prompt;
    kvv_engine_reset(e);
    return kvv_engine_forward(e, np > 8 ? 8 : (np > 0 ? np : 1), io->tok, io->pos, NULL,
                              KVV_LOGITS_LAST, io->logits, err);
}

/* Repeat k on one engine: the prompt in one forward call, then n_gen
 * tokens one call each, each phase from an empty cache. */
static kvv_status one_repeat(const kvv_bench_opts *o, kvv_engine *e, kvv_bench_side *s,
                             bench_io *io, int k, kvv_error *err)
{
    const int np = o->n_prompt, ng = o->n_gen, total = np + ng;
    kvv_status st;
    kvv_engine_reset(e);
    double t0 = kvv_now_seconds(), c0 = kvv_engine_cpu_seconds(e);
    if (np > 0 && (st = kvv_engine_forward(e, np, io->tok, io->pos, NULL, KVV_LOGITS_LAST,
                                           io->logits, err)))
        return st;
    double t1 = kvv_now_seconds(), c1 = kvv_engine_cpu_seconds(e);
    s->pp[k] = np > 0 ? np / (t1 - t0) : 0;
    s->ppc[k] = np > 0 ? (c1 - c0) / (t1 - t0) : 0;
    kvv_engine_reset(e);
    t1 = kvv_now_seconds();
    c1 = kvv_engine_cpu_seconds(e);
    for (int i = np; i < total; i++)
        if ((st = kvv_engine_forward(e, 1, io->tok + i, io->pos + (i - np), NULL,
                                     KVV_LOGITS_LAST, io->logits, err)))
            return st;
    double t2 = kvv_now_seconds(), c2 = kvv_engine_cpu_seconds(e);
    s->tg[k] = ng > 0 ? ng / (t2 - t1) : 0;
    s->tgc[k] = ng > 0 ? (c2 - c1) / (t2 - t1) : 0;
    return KVV_OK;
}

/* Repeat k with requests N: the N prompts in one call (sequence q reads
 * the tokens from offset q), then n_gen calls of one token per sequence;
 * each phase from empty caches. */
static kvv_status requests_repeat(const kvv_bench_opts *o, kvv_engine *e, kvv_bench_side *s,
                                  bench_io *io, int k, kvv_error *err)
{
    const int np = o->n_prompt, ng = o->n_gen, N = o->requests, total = np + ng;
    kvv_status st = KVV_OK;
    for (int q = 0; q < N && !st; q++)
        st = kvv_engine_seq_rm(e, q, 0, -1, err);
    int n = 0;
    for (int q = 0; q < N; q++)
        for (int i = 0; i < np; i++, n++) {
            io->btok[n] = io->tok[(i + q) % total];
            io->bpos[n] = i;
            io->bseq[n] = q;
            io->blg[n] = i == np - 1;
        }
    double t0 = kvv_now_seconds(), c0 = kvv_engine_cpu_seconds(e);
    if (!st && np > 0)
        st = kvv_engine_decode(e, &(kvv_batch){n, io->btok, io->bpos, io->bseq, io->blg},
                               io->logits, err);
    double t1 = kvv_now_seconds(), c1 = kvv_engine_cpu_seconds(e);
    s->pp[k] = np > 0 ? (double)N * np / (t1 - t0) : 0;
    s->ppc[k] = np > 0 ? (c1 - c0) / (t1 - t0) : 0;
    for (int q = 0; q < N && !st; q++)
        st = kvv_engine_seq_rm(e, q, 0, -1, err);
    t1 = kvv_now_seconds();
    c1 = kvv_engine_cpu_seconds(e);
    for (int i = 0; i < ng && !st; i++) {
        for (int q = 0; q < N; q++) {
            io->btok[q] = io->tok[(np + i + q) % total];
            io->bpos[q] = i;
            io->bseq[q] = q;
            io->blg[q] = 1;
        }
        st = kvv_engine_decode(e, &(kvv_batch){N, io->btok, io->bpos, io->bseq, io->blg},
                               io->logits, err);
    }
    if (st)
        return st;
    double t2 = kvv_now_seconds(), c2 = kvv_engine_cpu_seconds(e);
    s->tg[k] = ng > 0 ? (double)N * ng / (t2 - t1) : 0;
    s->tgc[k] = ng > 0 ? (c2 - c1) / (t2 - t1) : 0;
    return KVV_OK;
}

/* ---- the measure loop ------------------------------------------------ */

/* Every engine warmed up, then the repeats, each running every engine
 * once (the order rotating from one repeat to the next) and, with
 * roofline, the passes of the read loop after them (res->read[k]). */
static kvv_status measure(const kvv_bench_opts *o, kvv_bench_result *res, kvv_error *err)
{
    const int total = o->n_prompt + o->n_gen, R = o->repeats, n = o->n_engines;
    bench_io io = {0};
    kvv_status st = KVV_OK;
    if (!io_alloc(&io, o)) {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "out of memory");
        goto out;
    }
    kvv_prompt_random(o->seed, o->model->hp.n_vocab, -1, io.tok, total);
    for (int i = 0; i < total; i++)
        io.pos[i] = i;
    for (int s = 0; s < n && !st; s++)
        st = warm_up(o, o->engines[s], &io, err);
    for (int k = 0; k < R && !st; k++) {
        for (int i = 0; i < n && !st; i++) {
            const int s = (i + k) % n;
            st = o->requests ? requests_repeat(o, o->engines[s], &res->sides[s], &io, k, err)
                             : one_repeat(o, o->engines[s], &res->sides[s], &io, k, err);
        }
        for (int p = 0; res->read && !st && p < KVV_ROOFLINE_READ_PASSES; p++) {
            double g = kvv_roofline_read_gbs(o->threads, &res->sink);
            res->read[k] = g > res->read[k] ? g : res->read[k];
        }
        if (o->progress)
            o->progress(o->progress_user, "bench", k + 1, R);
    }
    for (int s = 0; s < n && !st; s++) {
        kvv_bench_side *d = &res->sides[s];
        d->pp_med = kvv_median(d->pp, R);
        d->tg_med = kvv_median(d->tg, R);
        d->ppc_med = kvv_median(d->ppc, R);
        d->tgc_med = kvv_median(d->tgc, R);
    }
out:
    io_free(&io);
    return st;
}

/* ---- what the rates mean, and the comparisons ------------------------ */

/* Bytes of weights one token's pass reads: as the cpu engine holds them
 * (it says), or as the file stores them (the reference reads the mapped
 * rows and widens each to fp32 as it uses it). */
static double weight_bytes(const kvv_model *m, const kvv_engine *e, double *head)
{
    double b = kvv_cpu_engine_weight_bytes(e, head);
    if (b >= 0)
        return b;
    b = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const kvv_layer_tensors *L = &m->layers[l];
        const kvv_gguf_tensor *ts[] = {L->wq, L->wk, L->wv, L->wqkv, L->wo,
                                       L->w_gate, L->w_up, L->w_down};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
            if (ts[i])
                b += (double)ts[i]->nbytes;
    }
    const kvv_gguf_tensor *h = m->output ? m->output : m->tok_embd;
    *head = (double)h->nbytes;
    return b;
}

static void figures_of(const kvv_bench_opts *o, kvv_engine *e, kvv_bench_figures *f)
{
    const int np = o->n_prompt;
    double macs_layers, macs_head, head_bytes;
    kvv_model_macs_per_token(&o->model->hp, &macs_layers, &macs_head);
    double wbytes = weight_bytes(o->model, e, &head_bytes);
    f->flops_pp = 2.0 * macs_layers + (np > 0 ? 2.0 * macs_head / np : 0);
    f->flops_tg = 2.0 * (macs_layers + macs_head);
    /* one call reads the weights once for every sequence's token in it */
    const double nreq = o->requests > 1 ? (double)o->requests : 1.0;
    f->bytes_tg = (wbytes + head_bytes) / nreq;
    f->bytes_pp = np > 0 ? (wbytes + head_bytes) / (np * nreq) : 0;
    kvv_engine_describe(e, &f->d);
}

/* Ratios repeat by repeat, their median and range; the read loop's. */
static void compare_sides(kvv_bench_result *res)
{
    const int R = res->repeats;
    const kvv_bench_side *s0 = &res->sides[0], *s1 = &res->sides[1];
    if (res->read) {
        res->read_med = kvv_median(res->read, R);
        kvv_range(res->read, R, &res->read_lo, &res->read_hi);
        /* repeat by repeat: the machine's speed drifts between repeats */
        for (int k = 0; k < R; k++)
            res->frac[k] = res->read[k] > 0 ? s0->f.bytes_tg * s0->tg[k] * 1e-9 / res->read[k]
                                            : 0;
        res->frac_med = kvv_median(res->frac, R);
        kvv_range(res->frac, R, &res->frac_lo, &res->frac_hi);
    }
    if (res->n_sides < 2)
        return;
    for (int k = 0; k < R; k++) {
        res->r_pp[k] = s1->pp[k] > 0 ? s0->pp[k] / s1->pp[k] : 0;
        res->r_tg[k] = s1->tg[k] > 0 ? s0->tg[k] / s1->tg[k] : 0;
    }
    res->r_pp_med = s1->pp_med > 0 ? s0->pp_med / s1->pp_med : 0;
    res->r_tg_med = s1->tg_med > 0 ? s0->tg_med / s1->tg_med : 0;
    kvv_range(res->r_pp, R, &res->r_pp_lo, &res->r_pp_hi);
    kvv_range(res->r_tg, R, &res->r_tg_lo, &res->r_tg_hi);
}

/* ---- the whole run --------------------------------------------------- */

static double *reals(int n)
{
    return calloc((size_t)n, sizeof(double));
}

/* The per-repeat arrays the options ask for. @return false when one
 * cannot be allocated. */
static bool result_alloc(const kvv_bench_opts *o, kvv_bench_result *res)
{
    const int R = o->repeats;
    bool ok = true;
    for (int s = 0; s < res->n_sides; s++) {
        kvv_bench_side *d = &res->sides[s];
        d->pp = reals(R);
        d->tg = reals(R);
        d->ppc = reals(R);
        d->tgc = reals(R);
        ok = ok && d->pp && d->tg && d->ppc && d->tgc;
    }
    if (o->roofline) {
        res->read = reals(R);
        res->frac = reals(R);
        ok = ok && res->read && res->frac;
    }
    if (res->n_sides > 1) {
        res->r_pp = reals(R);
        res->r_tg = reals(R);
        ok = ok && res->r_pp && res->r_tg;
    }
    return ok;
}

kvv_status kvv_bench_run(const kvv_bench_opts *o, kvv_bench_result *res, kvv_error *err)
{
    memset(res, 0, sizeof *res);
    if (o->n_engines < 1 || o->n_engines > KVV_BENCH_MAX_ENGINES)
        return kvv_error_set(err, KVV_ERR_USAGE, "bench: %d engines (1 or %d)", o->n_engines,
                             KVV_BENCH_MAX_ENGINES);
    if (o->repeats < 1 || o->n_prompt < 0 || o->n_gen < 0 || o->n_prompt + o->n_gen == 0)
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "bench: %d repeats of %d prompt and %d decoded tokens",
                             o->repeats, o->n_prompt, o->n_gen);
    if (o->requests < 0 || o->requests > KVV_ENGINE_MAX_SEQS)
        return kvv_error_set(err, KVV_ERR_USAGE, "bench: %d requests (0..%d)", o->requests,
                             KVV_ENGINE_MAX_SEQS);
    res->repeats = o->repeats;
    res->n_sides = o->n_engines;
    res->threads = o->roofline ? o->threads : 0;
    if (!result_alloc(o, res))
        return kvv_error_set(err, KVV_ERR_NOMEM, "out of memory");
    if (o->roofline)
        res->sgemm_gflops = kvv_roofline_sgemm_gflops(o->threads);
    kvv_status st = measure(o, res, err);
    kvv_roofline_free();
    if (st)
        return st;
    for (int s = 0; s < res->n_sides; s++)
        figures_of(o, o->engines[s], &res->sides[s].f);
    compare_sides(res);
    return KVV_OK;
}

void kvv_bench_result_free(kvv_bench_result *res)
{
    if (!res)
        return;
    for (int s = 0; s < KVV_BENCH_MAX_ENGINES; s++) {
        free(res->sides[s].pp);
        free(res->sides[s].tg);
        free(res->sides[s].ppc);
        free(res->sides[s].tgc);
    }
    free(res->read);
    free(res->frac);
    free(res->r_pp);
    free(res->r_tg);
    memset(res, 0, sizeof *res);
}
