/*
 * kvv_compute.c — run an engine once and collect every record of a golden
 * vector (list and shapes: kvv_vectors.h). Data flow:
 *
 *   1. prefill the prompt, then n_gen-1 single-token greedy steps, capturing
 *      through the hooks every residual row (entering each layer, and the
 *      final one) and every cached K/V row, and the logits of each step;
 *   2. hash each captured row (FNV-1a 64 over little-endian fp32 bytes);
 *   3. kv: recompute K/V of every layer from the captured residuals, all
 *      positions at once and one position at a time, and count elements
 *      whose bits differ from the cached ones;
 *   4. patch: for each layer l, run a donor prompt B with B's layer-l
 *      residual overwritten by A's, and compare the last logits with A's.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/greedy.h"
#include "runtime/mem_limit.h"
#include "vectors/kvv_vectors_impl.h"

/* ============================================================ small helpers */

uint64_t kvv_vectors_hash_f32(const float *x, uint64_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 offset basis */
    for (uint64_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], 4);
        for (int k = 0; k < 4; k++) {
            h ^= (b >> (8 * k)) & 0xffu;
            h *= 0x100000001b3ull; /* FNV prime */
        }
    }
    return h;
}

void kvv_vectors_random_tokens(uint64_t seed, int n_vocab, int32_t *out, int n)
{
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        /* splitmix64 */
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        out[i] = (int32_t)(z % (uint64_t)n_vocab);
    }
}

void kvv_vset_free(kvv_vset *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        free(s->recs[i].data);
    s->n = 0;
}

const kvv_vrec *kvv_vset_find(const kvv_vset *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->recs[i].name, name) == 0)
            return &s->recs[i];
    return NULL;
}

/* Append a record that takes ownership of data. */
static void vset_add(kvv_vset *s, const char *name, kvv_rec_type t, int nd, uint64_t d0,
                     uint64_t d1, uint64_t d2, void *data, size_t size)
{
    kvv_vrec *r = &s->recs[s->n++];
    memset(r, 0, sizeof *r);
    strncpy(r->name, name, KVV_FILE_NAME_MAX);
    r->type = t;
    r->n_dims = nd;
    r->dims[0] = d0;
    r->dims[1] = d1;
    r->dims[2] = d2;
    r->data = data;
    r->size = size;
}

static bool same_bits(const float *a, const float *b)
{
    return memcmp(a, b, sizeof(float)) == 0;
}

/* ============================================================ hooks */

typedef struct {
    int n_layer, n_embd, kdim, vdim, n_pos;
    float *resid;              /* [n_layer+1][n_pos][n_embd] */
    float *k;                  /* [n_layer][n_pos][kdim] */
    float *v;                  /* [n_layer][n_pos][vdim] */
    bool capture;
    int patch_layer;           /* -1 = no patching */
    const float *patch_src;    /* [n_pos][n_embd] rows written over layer patch_layer */
    int perturb_layer, perturb_pos;
    bool bad_pos;              /* a hook saw a position outside 0..n_pos-1 */
} capture_state;

static void on_residual(void *user, int layer, int n, const int32_t *pos, float *h)
{
    capture_state *c = user;
    if (layer < 0 || layer > c->n_layer) {
        c->bad_pos = true;
        return;
    }
    for (int i = 0; i < n; i++) {
        int p = pos[i];
        if (p < 0 || p >= c->n_pos) {
            c->bad_pos = true;
            continue;
        }
        float *row = h + (size_t)i * c->n_embd;
        if (layer == c->perturb_layer && p == c->perturb_pos) {
            uint32_t b;
            memcpy(&b, &row[0], 4);
            b ^= 1u;
            memcpy(&row[0], &b, 4);
        }
        if (layer == c->patch_layer)
            memcpy(row, c->patch_src + (size_t)p * c->n_embd, sizeof(float) * (size_t)c->n_embd);
        if (c->capture)
            memcpy(c->resid + ((size_t)layer * c->n_pos + p) * c->n_embd, row,
                   sizeof(float) * (size_t)c->n_embd);
    }
}

static void on_kv(void *user, int layer, int n, const int32_t *pos, const float *k, const float *v)
{
    capture_state *c = user;
    if (!c->capture)
        return;
    if (layer < 0 || layer >= c->n_layer) {
        c->bad_pos = true;
        return;
    }
    for (int i = 0; i < n; i++) {
        int p = pos[i];
        if (p < 0 || p >= c->n_pos) {
            c->bad_pos = true;
            continue;
        }
        memcpy(c->k + ((size_t)layer * c->n_pos + p) * c->kdim, k + (size_t)i * c->kdim,
               sizeof(float) * (size_t)c->kdim);
        memcpy(c->v + ((size_t)layer * c->n_pos + p) * c->vdim, v + (size_t)i * c->vdim,
               sizeof(float) * (size_t)c->vdim);
    }
}

/* ============================================================ compute */

/* One computation's state: the engine, the captures, the buffers. */
typedef struct {
    const kvv_vectors_opts *o;
    int L, E, V, kdim, vdim, np, ng, n_pos;
    kvv_engine *e;
    capture_state c;
    kvv_hooks hooks;
    float *logits;             /* [ng][V] logits of each greedy step */
    int32_t *greedy;           /* [ng] the greedy tokens (handed to the set) */
    int32_t *posv;             /* [n_pos] 0..n_pos-1 */
    float *k2, *v2;            /* [n_pos][kdim | vdim] recompute scratch */
    int32_t *prompt;           /* a copy of the prompt (handed to the set) */
    long done;                 /* progress steps so far */
} compute;

/* Prompt, steps and perturbation inside what the model and a vector hold. */
static kvv_status check_inputs(const kvv_model *m, const kvv_vectors_opts *o, kvv_error *err)
{
    const int L = m->hp.n_layer, V = m->hp.n_vocab, np = o->n_tokens, ng = o->n_gen;
    if (np < 1 || ng < 1 || np > (1 << 20) || ng > (1 << 20))
        return kvv_error_set(err, KVV_ERR_USAGE, "prompt length %d and -n %d must both be >= 1", np, ng);
    for (int i = 0; i < np; i++)
        if (o->tokens[i] < 0 || o->tokens[i] >= V)
            return kvv_error_set(err, KVV_ERR_USAGE, "prompt token %d (#%d) outside the vocabulary 0..%d",
                                 o->tokens[i], i, V - 1);
    const int n_pos = np + ng - 1;
    if (o->perturb_layer > L || (o->perturb_layer >= 0 && (o->perturb_pos < 0 || o->perturb_pos >= n_pos)))
        return kvv_error_set(err, KVV_ERR_USAGE, "perturbation at layer %d position %d is outside "
                             "layers 0..%d, positions 0..%d", o->perturb_layer, o->perturb_pos, L, n_pos - 1);
    return KVV_OK;
}

/* Progress over the whole computation: decode steps, then kv and patch
 * layers. */
static void step(compute *x)
{
    const kvv_vectors_opts *o = x->o;
    if (o->progress)
        o->progress(o->progress_user, "vectors", ++x->done,
                    x->ng + (o->patch ? 2L * x->L : 0));
}

static kvv_status decode_row(void *user, int i, const float *row, int32_t argmax,
                             kvv_error *err)
{
    (void)i, (void)row, (void)argmax, (void)err;
    step(user);
    return KVV_OK;
}

/* 1. prefill + greedy decode (engine/greedy.h), captured through the hooks. */
static kvv_status decode(compute *x, const kvv_engine_desc *d, kvv_error *err)
{
    kvv_engine_reset(x->e);
    const kvv_greedy g = {.forward = kvv_greedy_engine_forward, .ctx = x->e,
                          .hooks = &x->hooks, .n_vocab = x->V, .prompt = x->o->tokens,
                          .n_prompt = x->np, .n_gen = x->ng, .on_row = decode_row, .user = x};
    kvv_status st = kvv_greedy_decode(&g, x->logits, x->greedy, NULL, err);
    if (!st && x->c.bad_pos)
        st = kvv_error_set(err, KVV_ERR_INTERNAL, "engine %s: a hook reported a layer or position "
                           "outside the run", d->name);
    return st;
}

/* 2. the run's records: prompt, greedy tokens, logits (or their hashes),
 * the hash of every residual, K and V row, and with --full the rows. */
static kvv_status add_run_records(compute *x, kvv_vset *out, kvv_error *err)
{
    const int L = x->L, E = x->E, V = x->V, np = x->np, ng = x->ng, n_pos = x->n_pos;
    const int kdim = x->kdim, vdim = x->vdim;
    const kvv_vectors_opts *o = x->o;
    capture_state *c = &x->c;
    uint64_t *hr = malloc(sizeof(uint64_t) * (size_t)(L + 1) * n_pos);
    uint64_t *hk = malloc(sizeof(uint64_t) * (size_t)L * n_pos);
    uint64_t *hv = malloc(sizeof(uint64_t) * (size_t)L * n_pos);
    if (!hr || !hk || !hv) {
        free(hr), free(hk), free(hv);
        return kvv_error_set(err, KVV_ERR_NOMEM, "out of memory for hashes");
    }
    for (size_t r = 0; r < (size_t)(L + 1) * n_pos; r++)
        hr[r] = kvv_vectors_hash_f32(c->resid + r * E, (uint64_t)E);
    for (size_t r = 0; r < (size_t)L * n_pos; r++) {
        hk[r] = kvv_vectors_hash_f32(c->k + r * kdim, (uint64_t)kdim);
        hv[r] = kvv_vectors_hash_f32(c->v + r * vdim, (uint64_t)vdim);
    }
    vset_add(out, "prompt", KVV_REC_I32, 1, (uint64_t)np, 0, 0, x->prompt, sizeof(int32_t) * (size_t)np);
    x->prompt = NULL;
    vset_add(out, "greedy", KVV_REC_I32, 1, (uint64_t)ng, 0, 0, x->greedy, sizeof(int32_t) * (size_t)ng);
    x->greedy = NULL;
    if (o->logits_full) {
        float *lg = malloc(sizeof(float) * (size_t)ng * V);
        if (lg)
            memcpy(lg, x->logits, sizeof(float) * (size_t)ng * V);
        vset_add(out, "logits", KVV_REC_F32, 2, (uint64_t)ng, (uint64_t)V, 0, lg,
                 sizeof(float) * (size_t)ng * V);
    } else {
        uint64_t *lh = malloc(sizeof(uint64_t) * (size_t)ng);
        for (int s = 0; lh && s < ng; s++)
            lh[s] = kvv_vectors_hash_f32(x->logits + (size_t)s * V, (uint64_t)V);
        vset_add(out, "logits.hash", KVV_REC_U64, 1, (uint64_t)ng, 0, 0, lh, sizeof(uint64_t) * (size_t)ng);
    }
    vset_add(out, "hash.resid", KVV_REC_U64, 2, (uint64_t)L + 1, (uint64_t)n_pos, 0, hr,
             sizeof(uint64_t) * (size_t)(L + 1) * n_pos);
    vset_add(out, "hash.k", KVV_REC_U64, 2, (uint64_t)L, (uint64_t)n_pos, 0, hk,
             sizeof(uint64_t) * (size_t)L * n_pos);
    vset_add(out, "hash.v", KVV_REC_U64, 2, (uint64_t)L, (uint64_t)n_pos, 0, hv,
             sizeof(uint64_t) * (size_t)L * n_pos);
    if (o->full) {
        vset_add(out, "full.resid", KVV_REC_F32, 3, (uint64_t)L + 1, (uint64_t)n_pos, (uint64_t)E,
                 c->resid, sizeof(float) * (size_t)(L + 1) * n_pos * E);
        vset_add(out, "full.k", KVV_REC_F32, 3, (uint64_t)L, (uint64_t)n_pos, (uint64_t)kdim, c->k,
                 sizeof(float) * (size_t)L * n_pos * kdim);
        vset_add(out, "full.v", KVV_REC_F32, 3, (uint64_t)L, (uint64_t)n_pos, (uint64_t)vdim, c->v,
                 sizeof(float) * (size_t)L * n_pos * vdim);
    }
    for (int i = 0; i < out->n; i++)
        if (!out->recs[i].data && out->recs[i].size)
            return kvv_error_set(err, KVV_ERR_NOMEM, "out of memory for record %s", out->recs[i].name);
    return KVV_OK;
}

/* 3. kv: per layer [compared, K and V differing all at once, K and V
 * differing one position at a time], recomputed from the captured residuals. */
static kvv_status kv_counts(compute *x, uint64_t *kv, kvv_error *err)
{
    const int E = x->E, n_pos = x->n_pos, kdim = x->kdim, vdim = x->vdim;
    const capture_state *c = &x->c;
    float *k2 = x->k2, *v2 = x->v2;
    kvv_status st = KVV_OK;
    for (int l = 0; !st && l < x->L; l++) {
        step(x);
        const float *h = c->resid + (size_t)l * n_pos * E;
        const float *ck = c->k + (size_t)l * n_pos * kdim, *cv = c->v + (size_t)l * n_pos * vdim;
        uint64_t *row5 = kv + (size_t)l * 5;
        row5[0] = (uint64_t)n_pos * (uint64_t)(kdim + vdim);
        st = kvv_engine_kv_from_residual(x->e, l, n_pos, h, x->posv, k2, v2, err);
        for (size_t i = 0; !st && i < (size_t)n_pos * kdim; i++)
            row5[1] += !same_bits(&k2[i], &ck[i]);
        for (size_t i = 0; !st && i < (size_t)n_pos * vdim; i++)
            row5[2] += !same_bits(&v2[i], &cv[i]);
        for (int t = 0; !st && t < n_pos; t++) {
            st = kvv_engine_kv_from_residual(x->e, l, 1, h + (size_t)t * E, &x->posv[t], k2, v2, err);
            for (int i = 0; !st && i < kdim; i++)
                row5[3] += !same_bits(&k2[i], &ck[(size_t)t * kdim + i]);
            for (int i = 0; !st && i < vdim; i++)
                row5[4] += !same_bits(&v2[i], &cv[(size_t)t * vdim + i]);
        }
    }
    return st;
}

/* 4. patch: per layer l, a donor prompt B with its layer-l residual
 * overwritten by A's: [last logits differing from A's, their hash]. */
static kvv_status patch_counts(compute *x, const int32_t *donor, uint64_t *pr, float *row,
                               kvv_error *err)
{
    const int V = x->V;
    capture_state *c = &x->c;
    kvv_status st = KVV_OK;
    c->capture = false;
    for (int l = 0; !st && l < x->L; l++) {
        step(x);
        c->patch_layer = l;
        c->patch_src = c->resid + (size_t)l * x->n_pos * x->E;
        kvv_engine_reset(x->e);
        st = kvv_engine_forward(x->e, x->np, donor, x->posv, &x->hooks, KVV_LOGITS_LAST, row, err);
        if (st)
            break;
        for (int i = 0; i < V; i++)
            pr[(size_t)l * 2] += !same_bits(&row[i], &x->logits[i]);
        pr[(size_t)l * 2 + 1] = kvv_vectors_hash_f32(row, (uint64_t)V);
    }
    return st;
}

/* 3.-4. the kv, patch.donor and patch records. */
static kvv_status add_kv_patch_records(compute *x, kvv_vset *out, kvv_error *err)
{
    const int L = x->L, np = x->np;
    uint64_t *kv = calloc((size_t)L * 5, sizeof(uint64_t));
    int32_t *donor = malloc(sizeof(int32_t) * (size_t)np);
    uint64_t *pr = calloc((size_t)L * 2, sizeof(uint64_t));
    float *row = malloc(sizeof(float) * (size_t)x->V);
    kvv_status st = KVV_OK;
    if (!kv || !donor || !pr || !row)
        st = kvv_error_set(err, KVV_ERR_NOMEM, "out of memory for the kv/patch records");
    if (!st)
        st = kv_counts(x, kv, err);
    if (!st) {
        kvv_vectors_random_tokens(x->o->seed + 1, x->V, donor, np);
        st = patch_counts(x, donor, pr, row, err);
    }
    free(row);
    if (st) {
        free(kv), free(donor), free(pr);
        return st;
    }
    vset_add(out, "kv", KVV_REC_U64, 2, (uint64_t)L, 5, 0, kv, sizeof(uint64_t) * (size_t)L * 5);
    vset_add(out, "patch.donor", KVV_REC_I32, 1, (uint64_t)np, 0, 0, donor, sizeof(int32_t) * (size_t)np);
    vset_add(out, "patch", KVV_REC_U64, 2, (uint64_t)L, 2, 0, pr, sizeof(uint64_t) * (size_t)L * 2);
    return KVV_OK;
}

/* Free what the set did not take: with --full the captures belong to it. */
static void compute_free(compute *x, const kvv_vset *out)
{
    bool owned = false;
    for (int i = 0; i < out->n; i++)
        owned |= out->recs[i].data == x->c.resid;
    if (!owned) {
        free(x->c.resid);
        free(x->c.k);
        free(x->c.v);
    }
    free(x->logits);
    free(x->greedy);
    free(x->posv);
    free(x->k2);
    free(x->v2);
    free(x->prompt);
    kvv_engine_close(x->e);
}

kvv_status kvv_vectors_compute(const kvv_model *m, const kvv_vectors_opts *o, kvv_vset *out,
                               kvv_engine_desc *d, kvv_error *err)
{
    memset(out, 0, sizeof *out);
    kvv_status st = check_inputs(m, o, err);
    if (st)
        return st;
    const kvv_hparams *hp = &m->hp;
    compute x = {.o = o, .L = hp->n_layer, .E = hp->n_embd, .V = hp->n_vocab,
                 .kdim = hp->n_head_kv * hp->head_dim, .vdim = hp->n_head_kv * hp->head_dim_v,
                 .np = o->n_tokens, .ng = o->n_gen, .n_pos = o->n_tokens + o->n_gen - 1};
    kvv_engine_opts eo = o->engine;
    eo.n_ctx = x.n_pos;
    if ((st = kvv_engine_open(m, &eo, &x.e, err)))
        return st;
    kvv_engine_describe(x.e, d);

    const int n_pos = x.n_pos;
    const uint64_t L = (uint64_t)x.L, P = (uint64_t)n_pos;
    kvv_mem_plan plan = kvv_mem_plan_new("vector capture");
    kvv_mem_plan_add(&plan, kvv_mem_mul(kvv_mem_mul(L + 1, P), (uint64_t)x.E * sizeof(float)),
                     "residuals of %d layers x %d positions", x.L + 1, n_pos);
    kvv_mem_plan_add(&plan, kvv_mem_mul(kvv_mem_mul(L + 1, P),
                                        ((uint64_t)x.kdim + (uint64_t)x.vdim) * sizeof(float)),
                     "K and V of %d layers x %d positions (and their recompute)", x.L, n_pos);
    kvv_mem_plan_add(&plan, kvv_mem_mul((uint64_t)x.ng, (uint64_t)x.V * sizeof(float)),
                     "logits of %d steps", x.ng);
    if ((st = kvv_mem_plan_check(&plan, err))) {
        kvv_engine_close(x.e);
        return st;
    }
    x.c = (capture_state){x.L, x.E, x.kdim, x.vdim, n_pos, NULL, NULL, NULL, true, -1, NULL,
                          o->perturb_layer, o->perturb_pos, false};
    x.c.resid = calloc((size_t)(x.L + 1) * n_pos * x.E, sizeof(float));
    x.c.k = calloc((size_t)x.L * n_pos * x.kdim, sizeof(float));
    x.c.v = calloc((size_t)x.L * n_pos * x.vdim, sizeof(float));
    x.logits = calloc((size_t)x.ng * x.V, sizeof(float));
    x.greedy = calloc((size_t)x.ng, sizeof(int32_t));
    x.posv = calloc((size_t)n_pos, sizeof(int32_t));
    x.k2 = calloc((size_t)n_pos * x.kdim, sizeof(float));
    x.v2 = calloc((size_t)n_pos * x.vdim, sizeof(float));
    x.prompt = malloc(sizeof(int32_t) * (size_t)x.np);
    if (!x.c.resid || !x.c.k || !x.c.v || !x.logits || !x.greedy || !x.posv || !x.k2 || !x.v2 ||
        !x.prompt)
        st = kvv_error_set(err, KVV_ERR_NOMEM, "out of memory for a vector of %d positions", n_pos);
    if (!st) {
        for (int i = 0; i < n_pos; i++)
            x.posv[i] = i;
        memcpy(x.prompt, o->tokens, sizeof(int32_t) * (size_t)x.np);
        x.hooks = (kvv_hooks){.user = &x.c, .residual = on_residual, .kv = on_kv};
        st = decode(&x, d, err);
    }
    if (!st)
        st = add_run_records(&x, out, err);
    if (!st && o->patch)
        st = add_kv_patch_records(&x, out, err);
    compute_free(&x, out);
    if (st)
        kvv_vset_free(out);
    return st;
}
