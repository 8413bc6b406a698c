/*
 * cpu_engine.c — open/close of the cpu engine and the engine vtable (weight
 * preparation: cpu_weights.c). See cpu_engine.h for the overview.
 */
#include "engine/cpu/cpu_engine.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_impl.h"
#include "model/tensor_types.h"
#include "runtime/mem_limit.h"

kvv_cpu_opts kvv_cpu_opts_default(void)
{
    kvv_cpu_opts o = {.dequant_all = 0, .f32_act = 0, .seq_leak = 0};
    return o;
}

static int max_cols(const kvv_cpu *c)
{
    int mc = c->hp->n_embd;
    for (int l = 0; l < c->hp->n_layer; l++) {
        const kvv_cpu_layer *L = &c->layers[l];
        if (L->wo.cols > mc)
            mc = L->wo.cols;
        if (L->wd.cols > mc)
            mc = L->wd.cols;
    }
    return mc;
}

static void cpu_close(kvv_engine *e)
{
    if (!e)
        return;
    kvv_cpu *c = e->impl;
    if (c) {
        kvv_cpu_pool_free(c->pool);
        kvv_kv_seqs_free(&c->seqs);
        kvv_kv_cache_free(c->cache);
        for (int i = 0; i < c->n_owned; i++)
            free(c->owned[i]);
        free(c->owned);
        if (c->rope_cos[1] != c->rope_cos[0]) {
            free(c->rope_cos[1]);
            free(c->rope_sin[1]);
        }
        free(c->rope_cos[0]);
        free(c->rope_sin[0]);
        free(c->x); free(c->xn); free(c->q); free(c->kk); free(c->vv);
        free(c->o); free(c->g); free(c->u); free(c->y); free(c->qx); free(c->dx); free(c->sx); free(c->probs);
        free(c->q8k.q); free(c->q8k.d); free(c->q8k.bsums);
        free(c->q81.q); free(c->q81.d); free(c->q81.s);
        free(c->key_pos); free(c->key_idx);
        if (c->ts)
            for (int i = 0; i < c->n_threads; i++) {
                free(c->ts[i].scores);
                free(c->ts[i].tile);
                free(c->ts[i].qs);
                free(c->ts[i].krows);
            }
        free(c->ts);
        free(c);
    }
    free(e);
}

static kvv_kv_cache *cpu_cache(kvv_engine *e)
{
    return ((kvv_cpu *)e->impl)->cache;
}

static bool is_kq(const kvv_cpu_weight *w)
{
    return w->kq >= 0;
}

static bool is_q40_x16(const kvv_cpu_weight *w)
{
    return w->x16 && (w->type == KVV_TYPE_Q4_0 || w->type == KVV_TYPE_Q5_0);
}

static bool is_q80_x16(const kvv_cpu_weight *w)
{
    return (w->x16 || w->x16_fly) && w->type == KVV_TYPE_Q8_0;
}

/* Does any product satisfy pred? */
static bool any_weight(const kvv_cpu *c, bool (*pred)(const kvv_cpu_weight *))
{
    bool k = pred(&c->output);
    for (int l = 0; l < c->hp->n_layer && !k; l++) {
        const kvv_cpu_layer *L = &c->layers[l];
        k = pred(&L->wq) || pred(&L->wk) || pred(&L->wv) || pred(&L->wo) || pred(&L->wg) ||
            pred(&L->wu) || pred(&L->wd);
    }
    return k;
}

static void cpu_describe(kvv_engine *e, kvv_engine_desc *d)
{
    const kvv_cpu *c = e->impl;
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "cpu");
    snprintf(d->mode, sizeof d->mode, "%s", kvv_mode_name(c->mode));
    snprintf(d->cache_type, sizeof d->cache_type, "%s", kvv_cache_type_name(c->cache_type));
    d->n_threads = c->n_threads;
    d->control = c->control;
    snprintf(d->kernels, sizeof d->kernels, "%s", c->kernels);
    snprintf(d->isa, sizeof d->isa, "%s", c->k->name);
    d->n_seq_max = c->seqs.n_seq;
    d->kv_unified = 0; /* a cache per sequence (cpu_seqs.c) */
    /* the roundings every batch size has; a model with a layer matrix of a
     * type outside X16 (other activations there) declares none for it */
    d->ggml = c->kq_act && any_weight(c, is_kq) ? KVV_GGML_KQ_ACT : 0;
    if (any_weight(c, is_q40_x16) &&
        !(c->x16_outside & (1u << KVV_X16_Q4_0 | 1u << KVV_X16_Q5_0)))
        d->ggml |= KVV_GGML_Q40_ACT;
    if (any_weight(c, is_q80_x16) && !(c->x16_outside & 1u << KVV_X16_Q8_0))
        d->ggml |= KVV_GGML_Q80_ACT;
}

static void cpu_batch_paths(kvv_engine *e, kvv_batch_paths *p)
{
    kvv_cpu_batch_paths(e->impl, p);
}

static unsigned cpu_caps(kvv_engine *e)
{
    (void)e;
    return KVV_ENGINE_CAP_BUILTIN | KVV_ENGINE_CAP_SEQS;
}

static double cpu_worker_cpu_seconds(kvv_engine *e)
{
    return kvv_cpu_pool_worker_cpu_seconds(((kvv_cpu *)e->impl)->pool);
}

static const kvv_engine_vtable cpu_vtable = {
    .close = cpu_close,
    .forward = kvv_cpu_forward,
    .kv_from_residual = kvv_cpu_kv_from_residual,
    .cache = cpu_cache,
    .describe = cpu_describe,
    .batch_paths = cpu_batch_paths,
    .worker_cpu_seconds = cpu_worker_cpu_seconds,
    .caps = cpu_caps,
    .decode = kvv_cpu_decode,
    .seq_rm = kvv_cpu_seq_rm,
    .seq_cp = kvv_cpu_seq_cp,
    .seq_kv = kvv_cpu_seq_kv,
};

/* The options as the engine keeps them (no allocation). */
static void setup(kvv_cpu *c, const kvv_model *m, const kvv_engine_opts *o, const kvv_cpu_opts *co,
                  const kvv_cpu_kernels *k)
{
    const kvv_hparams *hp = &m->hp;
    c->m = m;
    c->hp = hp;
    c->mode = o->mode == KVV_MODE_FAST ? KVV_MODE_FAST : KVV_MODE_INVARIANT;
    c->control = o->control;
    c->cache_type = o->cache_type;
    c->k = k;
    c->copts = *co;
    c->q8_act = c->mode == KVV_MODE_FAST && !co->f32_act;
    c->kq_act = !co->f32_act && !co->dequant_all;
    c->repack = c->mode == KVV_MODE_INVARIANT && o->repack;
    c->n_threads = o->n_threads > 0 ? o->n_threads : 1;
    c->n_ctx = o->n_ctx;
    if (c->n_ctx == 0)
        c->n_ctx = hp->n_ctx_train > 0 && hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
}

/* What open allocates for a set-up c: weights (cpu_weights.c), the KV
 * cache, the RoPE tables, the per-thread attention scratch. */
static void plan_of(const kvv_cpu *c, kvv_mem_plan *p)
{
    const kvv_hparams *hp = c->hp;
    const uint64_t ctx = (uint64_t)c->n_ctx;
    const uint64_t grp = (uint64_t)(hp->n_head / hp->n_head_kv);
    const uint64_t rowmax = (uint64_t)(hp->head_dim > hp->head_dim_v ? hp->head_dim : hp->head_dim_v);
    /* per thread: scores [grp][n_ctx], key rows [n_ctx][rowmax], queries
     * [grp][head_dim], the dequantization tile (max_cols once loaded: the
     * widest projection input, n_embd, n_head*head_dim_v or n_ff) */
    uint64_t cols = (uint64_t)hp->n_embd;
    if ((uint64_t)hp->n_head * (uint64_t)hp->head_dim_v > cols)
        cols = (uint64_t)hp->n_head * (uint64_t)hp->head_dim_v;
    if ((uint64_t)hp->n_ff > cols)
        cols = (uint64_t)hp->n_ff;
    uint64_t tile = 5 * cols > KVV_CPU_TILE_FLOATS ? 5 * cols : KVV_CPU_TILE_FLOATS;
    uint64_t per_thread = kvv_mem_mul(kvv_mem_add(kvv_mem_add(kvv_mem_mul(grp, ctx),
                                                              kvv_mem_mul(ctx, rowmax)),
                                                  kvv_mem_add(tile, grp * (uint64_t)hp->head_dim)),
                                      sizeof(float));
    /* cos and sin [n_ctx][n_rot/2], for one base or two (local layers) */
    uint64_t rope = kvv_mem_mul(kvv_mem_mul(ctx, (uint64_t)(hp->n_rot / 2)),
                                (hp->rope_base_swa == hp->rope_base ? 2 : 4) * sizeof(float));
    *p = kvv_mem_plan_new("cpu engine");
    kvv_mem_plan_add(p, kvv_cpu_weights_plan(c), "weights as held (%s mode)", kvv_mode_name(c->mode));
    kvv_mem_plan_add(p, kvv_kv_cache_bytes(c->cache_type, hp->n_layer, c->n_ctx, hp->n_head_kv,
                                           hp->head_dim, hp->head_dim_v),
                     "KV cache of %d positions (%s)", c->n_ctx, kvv_cache_type_name(c->cache_type));
    kvv_mem_plan_add(p, kvv_mem_add(rope, kvv_mem_mul(ctx, 2 * sizeof(int32_t))),
                     "RoPE tables and key index");
    kvv_mem_plan_add(p, kvv_mem_mul(per_thread, (uint64_t)c->n_threads),
                     "attention scratch of %d threads", c->n_threads);
    /* Address space that is mostly never touched counts only against a
     * data limit (--max-memory), not against the machine's memory: the pool
     * threads' stacks and, in fast mode, the OpenBLAS work buffer each pool
     * thread beyond the caller maps for its own sgemm. */
    if (kvv_mem_available() == UINT64_MAX)
        return;
    kvv_mem_plan_add(p, kvv_mem_mul(kvv_mem_thread_stack(), (uint64_t)c->n_threads - 1),
                     "stacks of %d pool threads", c->n_threads - 1);
    if (c->mode == KVV_MODE_FAST)
        kvv_mem_plan_add(p, kvv_mem_mul(KVV_MEM_BLAS_BUFFER, (uint64_t)c->n_threads - 1),
                         "OpenBLAS buffers of %d pool threads", c->n_threads - 1);
}

void kvv_cpu_engine_plan(const kvv_model *m, const kvv_engine_opts *o, const kvv_cpu_opts *co,
                         kvv_mem_plan *p)
{
    kvv_cpu_opts dco = kvv_cpu_opts_default();
    kvv_cpu_isa isa;
    kvv_error ierr = {0};
    if (kvv_cpu_isa_choose(o->isa, &isa, &ierr))
        isa = KVV_CPU_ISA_GENERIC; /* the open refuses it; the plan's size is the same */
    kvv_cpu c;
    memset(&c, 0, sizeof c);
    setup(&c, m, o, co ? co : &dco, kvv_cpu_kernels_of(isa));
    plan_of(&c, p);
}

/* The engine options (KVV_CPU_ENGINE_KEYS) into co: KEY=0 or KEY=1. */
static kvv_status own_opts(const kvv_engine_opts *o, kvv_cpu_opts *co, kvv_error *err)
{
    for (int i = 0; i < o->n_engine_opts; i++) {
        const char *kv = o->engine_opts[i], *eq = strchr(kv, '=');
        size_t n = eq ? (size_t)(eq - kv) : strlen(kv);
        int *field = n == 11 && strncmp(kv, "dequant_all", n) == 0 ? &co->dequant_all
                     : n == 7 && strncmp(kv, "f32_act", n) == 0    ? &co->f32_act
                     : n == 8 && strncmp(kv, "seq_leak", n) == 0   ? &co->seq_leak
                                                                   : NULL;
        if (!field || !eq || (strcmp(eq + 1, "0") != 0 && strcmp(eq + 1, "1") != 0))
            return kvv_error_set(err, KVV_ERR_USAGE, "engine cpu: --engine-opt %s is not KEY=0 "
                                 "or KEY=1 for a key of %s", kv, KVV_CPU_ENGINE_KEYS);
        *field = eq[1] == '1';
    }
    return KVV_OK;
}

/* The registry's open (engine/engine_impl.h): mode and options checked. */
kvv_status kvv_engine_open_cpu(const kvv_model *m, const kvv_engine_opts *o, kvv_engine **out,
                               kvv_error *err)
{
    kvv_cpu_opts co = kvv_cpu_opts_default();
    *out = NULL;
    kvv_status s = own_opts(o, &co, err);
    return s ? s : kvv_cpu_engine_open_ex(m, o, &co, out, err);
}

kvv_status kvv_cpu_engine_open_ex(const kvv_model *m, const kvv_engine_opts *o,
                                  const kvv_cpu_opts *co, kvv_engine **out, kvv_error *err)
{
    *out = NULL;
    const kvv_hparams *hp = &m->hp;
    if (o->n_threads < 0 || o->n_threads > KVV_ENGINE_MAX_THREADS)
        return kvv_error_set(err, KVV_ERR_USAGE, "cpu engine: --threads %d outside 1..%d",
                             o->n_threads, KVV_ENGINE_MAX_THREADS);
    if (o->n_ctx < 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "cpu engine: n_ctx %d is negative", o->n_ctx);
    kvv_cpu_isa isa;
    kvv_error ierr = {0};
    if (kvv_cpu_isa_choose(o->isa, &isa, &ierr))
        return kvv_error_set(err, ierr.status, "cpu engine: %s", ierr.msg);
    const kvv_cpu_kernels *k = kvv_cpu_kernels_of(isa);
    kvv_engine *e = calloc(1, sizeof *e);
    kvv_cpu *c = calloc(1, sizeof *c);
    if (!e || !c) {
        free(e);
        free(c);
        return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory");
    }
    e->vt = &cpu_vtable;
    e->model = m;
    e->opts = *o;
    e->opts.engine_opts = NULL; /* borrowed from the caller, read at open; not kept */
    e->opts.n_engine_opts = 0;
    e->impl = c;
    setup(c, m, o, co, k);
    e->opts.mode = c->mode;
    e->opts.n_threads = c->n_threads;
    e->opts.n_ctx = c->n_ctx;

    kvv_mem_plan plan;
    plan_of(c, &plan);
    kvv_status st = kvv_mem_plan_check(&plan, err);
    if (!st)
        st = kvv_cpu_load_weights(c, err);
    if (st) {
        cpu_close(e);
        return st;
    }
    c->cache = kvv_kv_cache_new(c->cache_type, hp->n_layer, c->n_ctx, hp->n_head_kv,
                                hp->head_dim, hp->head_dim_v);
    if (c->cache)
        kvv_kv_seqs_init(&c->seqs, c->cache, o->n_seq_max);
    c->pool = kvv_cpu_pool_new(c->n_threads);
    c->ts = calloc((size_t)c->n_threads, sizeof *c->ts);
    if (!c->cache || !c->pool || !c->ts || !kvv_cpu_rope_init(c)) {
        cpu_close(e);
        return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory (n_ctx %d)",
                             c->n_ctx);
    }
    c->key_pos = malloc((size_t)c->n_ctx * sizeof(int32_t));
    c->key_idx = malloc((size_t)c->n_ctx * sizeof(int32_t));
    if (!c->key_pos || !c->key_idx) {
        cpu_close(e);
        return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory");
    }
    int mc = max_cols(c);
    size_t tile = (size_t)mc * 5 > KVV_CPU_TILE_FLOATS ? (size_t)mc * 5 : KVV_CPU_TILE_FLOATS;
    int rowmax = hp->head_dim > hp->head_dim_v ? hp->head_dim : hp->head_dim_v;
    for (int i = 0; i < c->n_threads; i++) {
        size_t grp = (size_t)(hp->n_head / hp->n_head_kv);
        c->ts[i].scores = malloc(grp * (size_t)c->n_ctx * sizeof(float));
        c->ts[i].krows = malloc((size_t)c->n_ctx * (size_t)rowmax * sizeof(float));
        c->ts[i].tile = malloc(tile * sizeof(float));
        c->ts[i].qs = malloc(grp * (size_t)hp->head_dim * sizeof(float));
        if (!c->ts[i].scores || !c->ts[i].tile || !c->ts[i].qs ||
            !c->ts[i].krows) {
            cpu_close(e);
            return kvv_error_set(err, KVV_ERR_NOMEM, "cpu engine: out of memory");
        }
    }
    /* Our pool owns the parallelism: each thread's sgemm runs single-threaded. */
    if (c->mode == KVV_MODE_FAST)
        openblas_set_num_threads(1);
    const char *kq = co->dequant_all ? "f32" : c->kq_act ? "int8(act q8_k/q8_1)" : "tile";
    /* X16 (cpu_weights.c): Q4_0/Q5_0 in both modes, Q4_1/Q5_1 in fast mode
     * (invariant mode reads their blocks, k-quants= below, the same bits);
     * with --f32-act Q4_0 keeps fast mode's routes */
    const char *x16 = !c->kq_act ? (co->dequant_all                 ? "f32"
                                    : c->mode == KVV_MODE_FAST ? "tile"
                                                               : "as-q8_0")
                      : c->mode == KVV_MODE_FAST ? "int8-x16(act q8_0/q8_1)"
                                                 : "int8-x16(act q8_0)";
    if (c->mode == KVV_MODE_FAST)
        snprintf(c->kernels, sizeof c->kernels,
                 "gemm=openblas-sgemm(n>=%d) gemv=%s attn=%s q8_0=%s q4_0..q5_1=%s k-quants=%s",
                 KVV_CPU_SGEMM_MIN_TOKENS, k->name, k->name,
                 co->dequant_all ? "f32" : c->q8_act ? "int8-x16(act q8_0)" : "fused", x16, kq);
    else
        snprintf(c->kernels, sizeof c->kernels,
                 "gemm=%s-invariant(%d lanes) gemv=%s attn=%s q8_0=%s q8_0-head=%s "
                 "q4_0/q5_0=%s k-quants=%s weights=%s",
                 k->name, k->lanes, k->name, k->name,
                 co->dequant_all ? "f32"
                 : !c->kq_act    ? "tile"
                 : c->repack     ? "int8-x16(act q8_0)"
                                 : "int8-x16-from-file(act q8_0)",
                 co->dequant_all                       ? "f32"
                 : c->repack && k->gemv_q8_0_x4        ? "fused-x4"
                                                       : "fused",
                 x16, kq, c->repack ? "repacked" : "in-place");
    *out = e;
    return KVV_OK;
}

static double held_bytes(const kvv_cpu_weight *w)
{
    return (double)w->rows * (double)w->row_bytes;
}

double kvv_cpu_engine_weight_bytes(const kvv_engine *e, double *head)
{
    if (!e || e->vt != &cpu_vtable)
        return -1;
    const kvv_cpu *c = e->impl;
    double b = 0;
    for (int l = 0; l < c->hp->n_layer; l++) {
        const kvv_cpu_layer *L = &c->layers[l];
        b += held_bytes(&L->wq) + held_bytes(&L->wk) + held_bytes(&L->wv) + held_bytes(&L->wo) +
             held_bytes(&L->wg) + held_bytes(&L->wu) + held_bytes(&L->wd);
    }
    *head = held_bytes(&c->output);
    return b;
}
