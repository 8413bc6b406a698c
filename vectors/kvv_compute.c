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

/* Greedy choice: the largest logit, lowest id on ties; NaN never wins. */
static int32_t argmax(const float *x, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i]))
            best = i;
    return best;
}

/* ============================================================ compute */

kvv_status kvv_vectors_compute(const kvv_model *m, const kvv_vectors_opts *o, kvv_vset *out,
                               kvv_engine_desc *d, kvv_error *err)
{
    memset(out, 0, sizeof *out);
    const kvv_hparams *hp = &m->hp;
    const int L = hp->n_layer, E = hp->n_embd, V = hp->n_vocab;
    const int kdim = hp->n_head_kv * hp->head_dim, vdim = hp->n_head_kv * hp->head_dim_v;
    const int np = o->n_tokens, ng = o->n_gen;
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

    kvv_engine_opts eo = o->engine;
    eo.n_ctx = n_pos;
    kvv_engine *e = NULL;
    kvv_status st = kvv_engine_open(m, &eo, &e, err);
    if (st)
        return st;
    kvv_engine_describe(e, d);

    capture_state c = {L, E, kdim, vdim, n_pos, NULL, NULL, NULL, true, -1, NULL,
                       o->perturb_layer, o->perturb_pos, false};
    const size_t n_res = (size_t)(L + 1) * n_pos * E;
    const size_t n_k = (size_t)L * n_pos * kdim, n_v = (size_t)L * n_pos * vdim;
    c.resid = calloc(n_res, sizeof(float));
    c.k = calloc(n_k, sizeof(float));
    c.v = calloc(n_v, sizeof(float));
    float *logits = calloc((size_t)ng * V, sizeof(float));
    int32_t *greedy = calloc((size_t)ng, sizeof(int32_t));
    int32_t *posv = calloc((size_t)n_pos, sizeof(int32_t));
    float *k2 = calloc((size_t)n_pos * kdim, sizeof(float));
    float *v2 = calloc((size_t)n_pos * vdim, sizeof(float));
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)np);
    if (!c.resid || !c.k || !c.v || !logits || !greedy || !posv || !k2 || !v2 || !prompt) {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "out of memory for a vector of %d positions", n_pos);
        goto done;
    }
    for (int i = 0; i < n_pos; i++)
        posv[i] = i;
    memcpy(prompt, o->tokens, sizeof(int32_t) * (size_t)np);
    kvv_hooks hooks = {.user = &c, .residual = on_residual, .kv = on_kv};

    /* 1. prefill + greedy decode */
    kvv_engine_reset(e);
    st = kvv_engine_forward(e, np, o->tokens, posv, &hooks, KVV_LOGITS_LAST, logits, err);
    for (int s = 0; !st && s < ng; s++) {
        greedy[s] = argmax(logits + (size_t)s * V, V);
        if (s + 1 < ng) {
            int32_t p = np + s;
            st = kvv_engine_forward(e, 1, &greedy[s], &p, &hooks, KVV_LOGITS_LAST,
                                    logits + (size_t)(s + 1) * V, err);
        }
    }
    if (st)
        goto done;
    if (c.bad_pos) {
        st = kvv_error_set(err, KVV_ERR_INTERNAL, "engine %s: a hook reported a layer or position "
                           "outside the run", d->name);
        goto done;
    }

    /* 2. hashes */
    uint64_t *hr = malloc(sizeof(uint64_t) * (size_t)(L + 1) * n_pos);
    uint64_t *hk = malloc(sizeof(uint64_t) * (size_t)L * n_pos);
    uint64_t *hv = malloc(sizeof(uint64_t) * (size_t)L * n_pos);
    if (!hr || !hk || !hv) {
        free(hr), free(hk), free(hv);
        st = kvv_error_set(err, KVV_ERR_NOMEM, "out of memory for hashes");
        goto done;
    }
    for (size_t r = 0; r < (size_t)(L + 1) * n_pos; r++)
        hr[r] = kvv_vectors_hash_f32(c.resid + r * E, (uint64_t)E);
    for (size_t r = 0; r < (size_t)L * n_pos; r++) {
        hk[r] = kvv_vectors_hash_f32(c.k + r * kdim, (uint64_t)kdim);
        hv[r] = kvv_vectors_hash_f32(c.v + r * vdim, (uint64_t)vdim);
    }
    vset_add(out, "prompt", KVV_REC_I32, 1, (uint64_t)np, 0, 0, prompt, sizeof(int32_t) * (size_t)np);
    prompt = NULL;
    vset_add(out, "greedy", KVV_REC_I32, 1, (uint64_t)ng, 0, 0, greedy, sizeof(int32_t) * (size_t)ng);
    greedy = NULL;
    if (o->logits_full) {
        float *lg = malloc(sizeof(float) * (size_t)ng * V);
        if (lg)
            memcpy(lg, logits, sizeof(float) * (size_t)ng * V);
        vset_add(out, "logits", KVV_REC_F32, 2, (uint64_t)ng, (uint64_t)V, 0, lg,
                 sizeof(float) * (size_t)ng * V);
    } else {
        uint64_t *lh = malloc(sizeof(uint64_t) * (size_t)ng);
        for (int s = 0; lh && s < ng; s++)
            lh[s] = kvv_vectors_hash_f32(logits + (size_t)s * V, (uint64_t)V);
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
                 c.resid, sizeof(float) * n_res);
        vset_add(out, "full.k", KVV_REC_F32, 3, (uint64_t)L, (uint64_t)n_pos, (uint64_t)kdim, c.k,
                 sizeof(float) * n_k);
        vset_add(out, "full.v", KVV_REC_F32, 3, (uint64_t)L, (uint64_t)n_pos, (uint64_t)vdim, c.v,
                 sizeof(float) * n_v);
    }
    for (int i = 0; i < out->n; i++)
        if (!out->recs[i].data && out->recs[i].size) {
            st = kvv_error_set(err, KVV_ERR_NOMEM, "out of memory for record %s", out->recs[i].name);
            goto done;
        }

    if (o->patch) {
        /* 3. kv: recompute from residuals, all at once and one at a time */
        uint64_t *kv = calloc((size_t)L * 5, sizeof(uint64_t));
        int32_t *donor = malloc(sizeof(int32_t) * (size_t)np);
        uint64_t *pr = calloc((size_t)L * 2, sizeof(uint64_t));
        float *row = malloc(sizeof(float) * (size_t)V);
        if (!kv || !donor || !pr || !row) {
            free(kv), free(donor), free(pr), free(row);
            st = kvv_error_set(err, KVV_ERR_NOMEM, "out of memory for the kv/patch records");
            goto done;
        }
        for (int l = 0; !st && l < L; l++) {
            const float *h = c.resid + (size_t)l * n_pos * E;
            const float *ck = c.k + (size_t)l * n_pos * kdim, *cv = c.v + (size_t)l * n_pos * vdim;
            uint64_t *row5 = kv + (size_t)l * 5;
            row5[0] = (uint64_t)n_pos * (uint64_t)(kdim + vdim);
            st = kvv_engine_kv_from_residual(e, l, n_pos, h, posv, k2, v2, err);
            for (size_t i = 0; !st && i < (size_t)n_pos * kdim; i++)
                row5[1] += !same_bits(&k2[i], &ck[i]);
            for (size_t i = 0; !st && i < (size_t)n_pos * vdim; i++)
                row5[2] += !same_bits(&v2[i], &cv[i]);
            for (int t = 0; !st && t < n_pos; t++) {
                st = kvv_engine_kv_from_residual(e, l, 1, h + (size_t)t * E, &posv[t], k2, v2, err);
                for (int i = 0; !st && i < kdim; i++)
                    row5[3] += !same_bits(&k2[i], &ck[(size_t)t * kdim + i]);
                for (int i = 0; !st && i < vdim; i++)
                    row5[4] += !same_bits(&v2[i], &cv[(size_t)t * vdim + i]);
            }
        }
        /* 4. patch: B's layer-l residual := A's, every layer */
        kvv_vectors_random_tokens(o->seed + 1, V, donor, np);
        c.capture = false;
        for (int l = 0; !st && l < L; l++) {
            c.patch_layer = l;
            c.patch_src = c.resid + (size_t)l * n_pos * E;
            kvv_engine_reset(e);
            st = kvv_engine_forward(e, np, donor, posv, &hooks, KVV_LOGITS_LAST, row, err);
            if (st)
                break;
            for (int i = 0; i < V; i++)
                pr[(size_t)l * 2] += !same_bits(&row[i], &logits[i]);
            pr[(size_t)l * 2 + 1] = kvv_vectors_hash_f32(row, (uint64_t)V);
        }
        free(row);
        if (st) {
            free(kv), free(donor), free(pr);
            goto done;
        }
        vset_add(out, "kv", KVV_REC_U64, 2, (uint64_t)L, 5, 0, kv, sizeof(uint64_t) * (size_t)L * 5);
        vset_add(out, "patch.donor", KVV_REC_I32, 1, (uint64_t)np, 0, 0, donor, sizeof(int32_t) * (size_t)np);
        vset_add(out, "patch", KVV_REC_U64, 2, (uint64_t)L, 2, 0, pr, sizeof(uint64_t) * (size_t)L * 2);
    }

done:
    if (!o->full || st) {
        /* when full, the captures were handed to records (freed with the set) */
        bool owned = false;
        for (int i = 0; i < out->n; i++)
            owned |= out->recs[i].data == c.resid;
        if (!owned) {
            free(c.resid);
            free(c.k);
            free(c.v);
        }
    }
    free(logits);
    free(greedy);
    free(posv);
    free(k2);
    free(v2);
    free(prompt);
    kvv_engine_close(e);
    if (st)
        kvv_vset_free(out);
    return st;
}
