/*
 * plugin_fixture.h — helpers for the plugin tests (header-only, static): a
 * synthetic model written to a file (plugins load their model by path), the
 * path of a built plugin, and a "tape" that records every hook call of a
 * forward pass in order, so two engines can be compared byte for byte.
 */
#ifndef KVV_PLUGIN_FIXTURE_H
#define KVV_PLUGIN_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "model/synth.h"
#include "tests/test_util.h"

typedef struct {
    char path[4200];
    kvv_model *m;
} fx_model;

/* Synthesize `shape` in type t into the test's temp folder and open it. */
static inline void fx_model_open(fx_model *f, const char *shape, kvv_type t)
{
    kvv_error err = {0};
    kvv_synth_opts o;
    memset(&o, 0, sizeof o);
    o.shape = kvv_shape_find(shape);
    assert_non_null(o.shape);
    o.type = t;
    o.seed = 3;
    snprintf(f->path, sizeof f->path, "%s/%s-%d.gguf", kvv_test_tmpdir(), shape, (int)t);
    if (kvv_synth_write(&o, f->path, &err) || kvv_model_open(f->path, &f->m, &err))
        fail_msg("%s: %s", shape, err.msg);
}

static inline void fx_model_close(fx_model *f)
{
    kvv_model_close(f->m);
    remove(f->path);
}

/* "plugin:$O/plugins/NAME.so" (O defaults to build) in a static buffer. */
static inline const char *fx_plugin(const char *name)
{
    static char buf[2][1200];
    static int which;
    const char *o = getenv("O");
    which ^= 1;
    snprintf(buf[which], sizeof buf[which], "plugin:%s/plugins/%s.so", o && *o ? o : "build",
             name);
    return buf[which];
}

/* "plugin:$O/tests/plugins/bad_KIND.so" (tests/engine/plugin_bad.c) in a
 * static buffer. */
static inline const char *fx_bad_plugin(const char *kind)
{
    static char buf[1200];
    const char *o = getenv("O");
    snprintf(buf, sizeof buf, "plugin:%s/tests/plugins/bad_%s.so", o && *o ? o : "build", kind);
    return buf;
}

/* The options that tell a bad plugin model m's dimensions ("dI=N"), into
 * buf, NULL-terminated in opts. */
typedef struct {
    char dims[7][32];
    const char *opts[8];
} fx_dims;

static inline void fx_dims_of(const kvv_model *m, fx_dims *d)
{
    const kvv_hparams *hp = &m->hp;
    const int v[7] = {hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv,
                      hp->head_dim, hp->head_dim_v, hp->n_vocab};
    for (int i = 0; i < 7; i++) {
        snprintf(d->dims[i], sizeof d->dims[i], "d%d=%d", i, v[i]);
        d->opts[i] = d->dims[i];
    }
    d->opts[7] = NULL;
}

/* ------------------------------------------------------------ batches */

/* A decode call of up to 48 tokens of several sequences, built by fx_add. */
typedef struct {
    int n;
    int32_t tok[48], pos[48], seq[48];
    uint8_t want[48];
} fx_batch;

static inline void fx_add(fx_batch *b, int seq, int pos, int32_t tok, int want)
{
    assert_true(b->n < 48);
    b->seq[b->n] = seq;
    b->pos[b->n] = pos;
    b->tok[b->n] = tok;
    b->want[b->n++] = (uint8_t)want;
}

static inline kvv_status fx_decode(kvv_engine *e, const fx_batch *b, float *logits,
                                   kvv_error *err)
{
    kvv_batch kb = {b->n, b->tok, b->pos, b->seq, b->want};
    memset(err, 0, sizeof *err);
    return kvv_engine_decode(e, &kb, logits, err);
}

static inline void fx_must_decode(kvv_engine *e, const fx_batch *b, float *logits)
{
    kvv_error err;
    if (fx_decode(e, b, logits, &err))
        fail_msg("decode: %s", err.msg);
}

/* ------------------------------------------------------------ the tape */

typedef struct {
    unsigned char *b;
    size_t n, cap;
    int n_embd, kd, vd, qd, ad, n_head;
    int write_layer;        /* >= 0: residual hook adds 0.25 to h[0] there (patching) */
} fx_tape;

static inline void fx_put(fx_tape *t, const void *p, size_t n)
{
    if (t->n + n > t->cap) {
        t->cap = (t->n + n) * 2 + 4096;
        t->b = realloc(t->b, t->cap);
        assert_non_null(t->b);
    }
    memcpy(t->b + t->n, p, n);
    t->n += n;
}

static inline void fx_head(fx_tape *t, char kind, int layer, int n, const int32_t *pos)
{
    fx_put(t, &kind, 1);
    fx_put(t, &layer, sizeof layer);
    fx_put(t, &n, sizeof n);
    fx_put(t, pos, (size_t)n * sizeof *pos);
}

static inline void fx_residual(void *u, int layer, int n, const int32_t *pos, float *h)
{
    fx_tape *t = u;
    if (layer == t->write_layer)
        for (int i = 0; i < n; i++)
            h[(size_t)i * t->n_embd] += 0.25f;
    fx_head(t, 'r', layer, n, pos);
    fx_put(t, h, (size_t)n * t->n_embd * sizeof *h);
}

static inline void fx_kv(void *u, int layer, int n, const int32_t *pos, const float *k, const float *v)
{
    fx_tape *t = u;
    fx_head(t, 'k', layer, n, pos);
    fx_put(t, k, (size_t)n * t->kd * sizeof *k);
    fx_put(t, v, (size_t)n * t->vd * sizeof *v);
}

static inline void fx_attn(void *u, int layer, int n, const int32_t *pos, int n_keys,
                    const int32_t *key_pos, const float *p)
{
    fx_tape *t = u;
    fx_head(t, 'a', layer, n, pos);
    fx_put(t, &n_keys, sizeof n_keys);
    fx_put(t, key_pos, (size_t)n_keys * sizeof *key_pos);
    fx_put(t, p, (size_t)n * t->n_head * n_keys * sizeof *p);
}

static inline void fx_attn_out(void *u, int layer, int n, const int32_t *pos, const float *o)
{
    fx_tape *t = u;
    fx_head(t, 'o', layer, n, pos);
    fx_put(t, o, (size_t)n * t->ad * sizeof *o);
}

static inline void fx_select(void *u, int layer, int qpos, int head, const float *q, int n_keys,
                      const int32_t *key_pos, uint8_t *keep)
{
    fx_tape *t = u;
    (void)keep;
    fx_head(t, 's', layer, 1, &qpos);
    fx_put(t, &head, sizeof head);
    fx_put(t, q, (size_t)t->qd * sizeof *q);
    fx_put(t, key_pos, (size_t)n_keys * sizeof *key_pos);
}

static inline void fx_tape_init(fx_tape *t, const kvv_hparams *hp)
{
    memset(t, 0, sizeof *t);
    t->n_embd = hp->n_embd;
    t->kd = hp->n_head_kv * hp->head_dim;
    t->vd = hp->n_head_kv * hp->head_dim_v;
    t->qd = hp->head_dim;
    t->ad = hp->n_head * hp->head_dim_v;
    t->n_head = hp->n_head;
    t->write_layer = -1;
}

/* Every hook, recording into t. */
static inline kvv_hooks fx_tape_hooks(fx_tape *t)
{
    kvv_hooks h = {.user = t, .residual = fx_residual, .kv = fx_kv, .attn = fx_attn,
                   .attn_out = fx_attn_out, .select = fx_select};
    return h;
}

static inline void fx_tape_free(fx_tape *t)
{
    free(t->b);
    t->b = NULL;
    t->n = t->cap = 0;
}

#endif
