/*
 * ref_trace.c — record and hash a run (reference/ref_trace.h).
 */
#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "reference/ref_trace.h"

enum { TAG_RESID = 1, TAG_K = 2, TAG_V = 3, TAG_LOGITS = 4 };

struct kvv_trace {
    int n_layer;
    int n_ctx;
    int n_embd;      /* residual row */
    int k_width;     /* n_head_kv * head_dim */
    int v_width;     /* n_head_kv * head_dim_v */
    int n_vocab;
    float **resid;   /* [(n_layer + 1) * n_ctx] -> (n_embd), NULL = none */
    float **k;       /* [n_layer * n_ctx] -> (k_width) */
    float **v;       /* [n_layer * n_ctx] -> (v_width) */
    float **logits;  /* [n_ctx] -> (n_vocab) */
    long dropped;
};

kvv_trace *kvv_trace_new(const kvv_hparams *hp, int n_ctx)
{
    if (!hp || n_ctx <= 0 || hp->n_layer <= 0)
        return NULL;
    kvv_trace *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->n_layer = hp->n_layer;
    t->n_ctx = n_ctx;
    t->n_embd = hp->n_embd;
    t->k_width = hp->n_head_kv * hp->head_dim;
    t->v_width = hp->n_head_kv * hp->head_dim_v;
    t->n_vocab = hp->n_vocab;
    const size_t L = (size_t)hp->n_layer, C = (size_t)n_ctx;
    t->resid = calloc((L + 1) * C, sizeof *t->resid);
    t->k = calloc(L * C, sizeof *t->k);
    t->v = calloc(L * C, sizeof *t->v);
    t->logits = calloc(C, sizeof *t->logits);
    if (!t->resid || !t->k || !t->v || !t->logits) {
        kvv_trace_free(t);
        return NULL;
    }
    return t;
}

void kvv_trace_free(kvv_trace *t)
{
    if (!t)
        return;
    const size_t L = (size_t)t->n_layer, C = (size_t)t->n_ctx;
    for (size_t i = 0; t->resid && i < (L + 1) * C; i++)
        free(t->resid[i]);
    for (size_t i = 0; t->k && i < L * C; i++)
        free(t->k[i]);
    for (size_t i = 0; t->v && i < L * C; i++)
        free(t->v[i]);
    for (size_t i = 0; t->logits && i < C; i++)
        free(t->logits[i]);
    free(t->resid);
    free(t->k);
    free(t->v);
    free(t->logits);
    free(t);
}

/* Copy n floats into *slot (allocating it once). */
static void put(kvv_trace *t, float **slot, const float *src, int n)
{
    if (!*slot)
        *slot = malloc((size_t)n * sizeof(float));
    if (!*slot) {
        t->dropped++;
        return;
    }
    memcpy(*slot, src, (size_t)n * sizeof(float));
}

static void on_residual(void *user, int layer, int n, const int32_t *pos, float *h)
{
    kvv_trace *t = user;
    for (int i = 0; i < n; i++) {
        if (layer < 0 || layer > t->n_layer || pos[i] < 0 || pos[i] >= t->n_ctx) {
            t->dropped++;
            continue;
        }
        put(t, &t->resid[(size_t)layer * t->n_ctx + (size_t)pos[i]], h + (size_t)i * t->n_embd,
            t->n_embd);
    }
}

static void on_kv(void *user, int layer, int n, const int32_t *pos, const float *k,
                  const float *v)
{
    kvv_trace *t = user;
    for (int i = 0; i < n; i++) {
        if (layer < 0 || layer >= t->n_layer || pos[i] < 0 || pos[i] >= t->n_ctx) {
            t->dropped++;
            continue;
        }
        size_t slot = (size_t)layer * t->n_ctx + (size_t)pos[i];
        put(t, &t->k[slot], k + (size_t)i * t->k_width, t->k_width);
        put(t, &t->v[slot], v + (size_t)i * t->v_width, t->v_width);
    }
}

kvv_hooks kvv_trace_hooks(kvv_trace *t)
{
    kvv_hooks h;
    memset(&h, 0, sizeof h);
    h.user = t;
    h.residual = on_residual;
    h.kv = on_kv;
    return h;
}

void kvv_trace_add_logits(kvv_trace *t, int pos, const float *row)
{
    if (pos < 0 || pos >= t->n_ctx) {
        t->dropped++;
        return;
    }
    put(t, &t->logits[pos], row, t->n_vocab);
}

long kvv_trace_dropped(const kvv_trace *t)
{
    return t ? t->dropped : 0;
}

/* ------------------------------------------------------------ hashing */

static void put_u32(uint8_t *b, uint32_t x)
{
    b[0] = (uint8_t)x;
    b[1] = (uint8_t)(x >> 8);
    b[2] = (uint8_t)(x >> 16);
    b[3] = (uint8_t)(x >> 24);
}

static void hash_record(struct sha256_ctx *ctx, int tag, int layer, int pos, const float *x, int n)
{
    uint8_t head[9];
    head[0] = (uint8_t)tag;
    put_u32(head + 1, (uint32_t)layer);
    put_u32(head + 5, (uint32_t)pos);
    sha256_update(ctx, sizeof head, head);
    uint8_t buf[256];
    int used = 0;
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        put_u32(buf + used, u);
        used += 4;
        if (used == (int)sizeof buf) {
            sha256_update(ctx, (size_t)used, buf);
            used = 0;
        }
    }
    if (used)
        sha256_update(ctx, (size_t)used, buf);
}

void kvv_trace_sha256_hex(const kvv_trace *t, char hex[65])
{
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    const size_t C = (size_t)t->n_ctx;
    for (size_t p = 0; p < C; p++) {
        for (int l = 0; l <= t->n_layer; l++) {
            const float *r = t->resid[(size_t)l * C + p];
            if (r)
                hash_record(&ctx, TAG_RESID, l, (int)p, r, t->n_embd);
            if (l == t->n_layer)
                break;
            const float *k = t->k[(size_t)l * C + p], *v = t->v[(size_t)l * C + p];
            if (k)
                hash_record(&ctx, TAG_K, l, (int)p, k, t->k_width);
            if (v)
                hash_record(&ctx, TAG_V, l, (int)p, v, t->v_width);
        }
        if (t->logits[p])
            hash_record(&ctx, TAG_LOGITS, 0, (int)p, t->logits[p], t->n_vocab);
    }
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof d, d);
    kvv_sha256_hex(d, hex);
}
