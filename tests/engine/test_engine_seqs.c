/*
 * test_engine_seqs.c — several sequences through kvv_engine_decode on the
 * built-in engines (issue 33 item 2): a request's bits do not depend on
 * what else shares its calls.
 *
 * Request A (sequence 2: 9 prompt tokens, then 6 decode tokens) runs
 * alone (its prompt in one call, then one token per call), then in
 * schedules shared with requests B (sequence 0) and C (sequence 5):
 *   mixed     the three prompts (3, 9, 7 tokens) in one call, then decode
 *             calls where A takes 1, 2 and 3 tokens beside others' 1..5
 *   interleaved  the same, the call's tokens interleaved one by one
 *   prompt-with-decode  B and C prefilled first; A's prompt in a call with
 *             their decode tokens
 *   prefix-cp  A's first 5 tokens computed in sequence P (3) beside B and
 *             C, copied into A with seq_cp, then the rest
 *   rm        A's last two prompt-extension tokens removed with seq_rm and
 *             recomputed
 * and every logit of A and every K/V row (and presence flag) of A's
 * sequence, in every layer, must be bit-identical to A alone: for the
 * reference (f32 and f16 cache) and the cpu engine in invariant mode (1 and
 * 2 threads, f32 and f16 cache), on F32, Q8_0, Q4_0 and Q4_K_M models (the
 * cpu engine's Q8_0 and K-quant products change kernel with the token
 * count). Fast mode's differences are printed, not asserted. The negative control mislabels
 * one of B's tokens as A's (a wrong sequence id, the leak a server bug
 * makes) and must be caught. Argument errors: sequence ids, gaps,
 * n_seq_max above KVV_ENGINE_MAX_SEQS, an engine opened for one sequence.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "model/shapes.h"
#include "model/synth.h"
#include "tests/test_util.h"

enum { SA = 2, SB = 0, SC = 5, SP = 3, N_SEQ = 6 };
#define LA 9     /* A's prompt */
#define DA 6     /* A's decode tokens */
#define TA (LA + DA)
#define N_CTX 32
#define MAX_CHUNKS 40

/* Token of stream s at position p: any fixed tokens. */
static int32_t tok_of(int stream, int p, int n_vocab)
{
    return (int32_t)(((unsigned)stream * 7919u + (unsigned)p * 104729u + 17u) %
                     (unsigned)n_vocab);
}

/* One step of a schedule: a call of chunks (seq, n tokens from stream),
 * or seq_cp / seq_rm. */
typedef struct {
    char op; /* 'd' decode, 'c' seq_cp(a, b, p0, p1), 'r' seq_rm(a, p0, p1), 0 end */
    int a, b, p0, p1;
    struct {
        int seq, n, stream; /* stream -1: the sequence's own */
    } ch[MAX_CHUNKS];
} step;

/* A's logits per position and its K/V rows per layer. */
typedef struct {
    float *logits;   /* [TA][n_vocab] */
    uint8_t got[TA]; /* logits recorded at this position */
    float *k, *v;    /* [n_layer][TA][K or V] */
    uint8_t *pres;   /* [n_layer][TA][n_head_kv] */
} trace;

typedef struct {
    const char *engine;
    kvv_mode mode;
    int threads;
    kvv_cache_type cache;
} config;

static const kvv_model *g_model;

static void trace_alloc(trace *t, const kvv_model *m)
{
    const kvv_hparams *hp = &m->hp;
    memset(t, 0, sizeof *t);
    t->logits = calloc((size_t)TA * hp->n_vocab, sizeof(float));
    t->k = calloc((size_t)hp->n_layer * TA * hp->n_head_kv * hp->head_dim, sizeof(float));
    t->v = calloc((size_t)hp->n_layer * TA * hp->n_head_kv * hp->head_dim_v, sizeof(float));
    t->pres = calloc((size_t)hp->n_layer * TA * hp->n_head_kv, 1);
    assert_true(t->logits && t->k && t->v && t->pres);
}

static void trace_free(trace *t)
{
    free(t->logits);
    free(t->k);
    free(t->v);
    free(t->pres);
}

static kvv_engine *open_cfg(const config *c, int n_seq)
{
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = c->engine;
    o.mode = c->mode;
    o.n_threads = c->threads;
    o.cache_type = c->cache;
    o.n_ctx = N_CTX;
    o.n_seq_max = n_seq;
    kvv_engine *e = NULL;
    kvv_error err = {0};
    if (kvv_engine_open(g_model, &o, &e, &err))
        fail_msg("open %s: %s", c->engine, err.msg);
    return e;
}

/* Run schedule s on a fresh engine; A's logits and K/V into t. */
static void run_schedule(const config *c, const step *s, trace *t)
{
    const kvv_hparams *hp = &g_model->hp;
    const int V = hp->n_vocab;
    kvv_engine *e = open_cfg(c, N_SEQ);
    int next[N_SEQ] = {0};
    int32_t tok[64], pos[64], seq[64];
    uint8_t want[64];
    float *logits = malloc(sizeof(float) * 64 * (size_t)V);
    assert_non_null(logits);
    kvv_error err = {0};
    for (; s->op; s++) {
        if (s->op == 'c') {
            if (kvv_engine_seq_cp(e, s->a, s->b, s->p0, s->p1, &err))
                fail_msg("seq_cp: %s", err.msg);
            next[s->b] = next[s->a];
            continue;
        }
        if (s->op == 'r') {
            if (kvv_engine_seq_rm(e, s->a, s->p0, s->p1, &err))
                fail_msg("seq_rm: %s", err.msg);
            next[s->a] = s->p0;
            continue;
        }
        int n = 0;
        for (int k = 0; k < MAX_CHUNKS && s->ch[k].n; k++)
            for (int i = 0; i < s->ch[k].n; i++) {
                const int q = s->ch[k].seq;
                const int stream = s->ch[k].stream >= 0 ? s->ch[k].stream : q;
                tok[n] = tok_of(stream, next[q], V);
                pos[n] = next[q]++;
                seq[n] = q;
                want[n] = 1;
                n++;
            }
        kvv_batch b = {.n = n, .token = tok, .pos = pos, .seq = seq, .logits = want};
        if (kvv_engine_decode(e, &b, logits, &err))
            fail_msg("decode of %d tokens: %s", n, err.msg);
        for (int i = 0; i < n; i++)
            if (seq[i] == SA && pos[i] < TA) {
                memcpy(t->logits + (size_t)pos[i] * V, logits + (size_t)i * V,
                       sizeof(float) * V);
                t->got[pos[i]] = 1;
            }
    }
    const int K = hp->n_head_kv * hp->head_dim, Vd = hp->n_head_kv * hp->head_dim_v;
    for (int l = 0; l < hp->n_layer; l++)
        if (kvv_engine_seq_kv(e, SA, l, 0, TA, t->k + (size_t)l * TA * K,
                              t->v + (size_t)l * TA * Vd, t->pres + (size_t)l * TA * hp->n_head_kv,
                              &err))
            fail_msg("seq_kv: %s", err.msg);
    free(logits);
    kvv_engine_close(e);
}

/* Differences of b from a over the logits both recorded and every K/V row. */
typedef struct {
    long logits, kv, pres; /* values differing in their bits */
    double max_abs;
} diff;

static int bits_differ(float x, float y)
{
    return memcmp(&x, &y, sizeof x) != 0;
}

static diff compare(const trace *a, const trace *b)
{
    const kvv_hparams *hp = &g_model->hp;
    const size_t V = (size_t)hp->n_vocab;
    diff d = {0, 0, 0, 0.0};
    for (int p = 0; p < TA; p++) {
        if (!a->got[p] || !b->got[p])
            continue;
        for (size_t i = 0; i < V; i++) {
            float x = a->logits[p * V + i], y = b->logits[p * V + i];
            if (bits_differ(x, y)) {
                d.logits++;
                if (fabs((double)x - y) > d.max_abs)
                    d.max_abs = fabs((double)x - y);
            }
        }
    }
    const size_t nk = (size_t)hp->n_layer * TA * hp->n_head_kv * hp->head_dim;
    const size_t nv = (size_t)hp->n_layer * TA * hp->n_head_kv * hp->head_dim_v;
    for (size_t i = 0; i < nk; i++)
        d.kv += bits_differ(a->k[i], b->k[i]);
    for (size_t i = 0; i < nv; i++)
        d.kv += bits_differ(a->v[i], b->v[i]);
    for (size_t i = 0; i < (size_t)hp->n_layer * TA * hp->n_head_kv; i++)
        d.pres += a->pres[i] != b->pres[i];
    return d;
}

/* ---------------------------------------------------------------- schedules */

#define D(...) {.op = 'd', .ch = {__VA_ARGS__}}
#define C(q, k) {.seq = q, .n = k, .stream = -1}
#define END {.op = 0}

static const step s_alone[] = {
    D(C(SA, LA)), D(C(SA, 1)), D(C(SA, 1)), D(C(SA, 1)), D(C(SA, 1)), D(C(SA, 1)), D(C(SA, 1)),
    END,
};
static const step s_mixed[] = {
    D(C(SB, 3), C(SA, LA), C(SC, 7)),
    D(C(SC, 2), C(SA, 1), C(SB, 1)),
    D(C(SA, 2), C(SB, 5)),
    D(C(SB, 1), C(SA, 3)),
    END,
};
/* the prompts interleaved token by token, then decode tokens interleaved */
static const step s_interleaved[] = {
    D(C(SA, 1), C(SB, 1), C(SA, 1), C(SC, 1), C(SA, 1), C(SB, 1), C(SA, 1), C(SC, 1),
      C(SA, 1), C(SC, 1), C(SA, 1), C(SB, 1), C(SA, 1), C(SC, 2), C(SA, 2)),
    D(C(SB, 1), C(SA, 1), C(SC, 1), C(SA, 1)),
    D(C(SC, 1), C(SA, 1), C(SB, 1), C(SA, 1), C(SC, 1), C(SA, 1), C(SB, 2), C(SA, 1)),
    END,
};
static const step s_prompt_with_decode[] = {
    D(C(SB, 4), C(SC, 2)),
    D(C(SB, 1), C(SA, LA), C(SC, 2)),
    D(C(SA, 1), C(SC, 1)),
    D(C(SB, 2), C(SA, 1)),
    D(C(SA, 1)),
    D(C(SC, 3), C(SA, 3), C(SB, 1)),
    END,
};
/* P computes A's first 5 tokens (A's stream) beside B and C; copied into A */
static const step s_prefix_cp[] = {
    D(C(SB, 2), {.seq = SP, .n = 5, .stream = SA}, C(SC, 3)),
    {.op = 'c', .a = SP, .b = SA, .p0 = 0, .p1 = -1},
    D(C(SA, 4), C(SB, 1), {.seq = SP, .n = 2, .stream = SC}),
    D(C(SA, 1), C(SB, 1)),
    D(C(SA, 2), C(SC, 4)),
    D(C(SA, 3)),
    END,
};
/* A runs 2 tokens past its prompt, they are removed and recomputed */
static const step s_rm[] = {
    D(C(SA, LA), C(SB, 3)),
    D(C(SA, 2), C(SB, 1)),
    {.op = 'r', .a = SA, .p0 = LA, .p1 = -1},
    D(C(SA, 1), C(SC, 2)),
    D(C(SA, 3), C(SB, 1)),
    D(C(SA, 2), C(SC, 1)),
    END,
};
/* negative control: one of B's tokens tagged as sequence A's */
static const step s_leak[] = {
    D(C(SB, 3), C(SA, LA), C(SC, 7)),
    D(C(SC, 2), C(SA, 1), C(SB, 1)),
    D(C(SA, 1), {.seq = SA, .n = 1, .stream = SB}, C(SB, 5)),
    D(C(SB, 1), C(SA, 3)),
    END,
};

static const struct {
    const char *name;
    const step *s;
} schedules[] = {
    {"mixed", s_mixed},
    {"interleaved", s_interleaved},
    {"prompt-with-decode", s_prompt_with_decode},
    {"prefix-cp", s_prefix_cp},
    {"rm", s_rm},
};
#define N_SCHED ((int)(sizeof schedules / sizeof schedules[0]))

/* ---------------------------------------------------------------- models */

/* f32, Q8_0 (its products change kernel with the token count), Q4_0
 * (X16 at every size) and llama-quantize's Q4_K_M mix on 256-wide rows
 * (K-quant products, repacked to X16 from 4 tokens) */
static const char *const model_shapes[] = {"llama-tiny", "llama-tiny", "llama-tiny", "llama-k256"};
static const char *const model_types[] = {"f32", "q8_0", "q4_0", "q4_k_m"};
#define N_MODELS 4
static kvv_model *g_models[N_MODELS];

static int setup(void **state)
{
    (void)state;
    kvv_error err = {0};
    for (int i = 0; i < N_MODELS; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seqs-%s-%s.gguf", kvv_test_tmpdir(), model_shapes[i],
                 model_types[i]);
        kvv_synth_opts so = {.shape = kvv_shape_find(model_shapes[i]), .seed = 33};
        if (!kvv_synth_type_parse(model_types[i], &so.type, &so.mix) ||
            kvv_synth_write(&so, path, &err) || kvv_model_open(path, &g_models[i], &err)) {
            fprintf(stderr, "synth %s: %s\n", model_types[i], err.msg);
            return -1;
        }
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < N_MODELS; i++)
        kvv_model_close(g_models[i]);
    return 0;
}

static const char *cfg_name(const config *c, char *buf, size_t size)
{
    snprintf(buf, size, "%s %s threads=%d cache=%s", c->engine, kvv_mode_name(c->mode),
             c->threads, kvv_cache_type_name(c->cache));
    return buf;
}

/* Every schedule against A alone on config c; assert bit-identity when
 * exact, else print the differences. @return schedules that differed. */
static int check_config(const config *c, bool exact)
{
    int differed = 0;
    for (int mi = 0; mi < N_MODELS; mi++) {
        g_model = g_models[mi];
        char name[96];
        cfg_name(c, name, sizeof name);
        trace alone;
        trace_alloc(&alone, g_model);
        run_schedule(c, s_alone, &alone);
        for (int p = 0; p < TA; p++)
            assert_true(alone.got[p]);
        for (int k = 0; k < N_SCHED; k++) {
            trace t;
            trace_alloc(&t, g_model);
            run_schedule(c, schedules[k].s, &t);
            diff d = compare(&alone, &t);
            if (d.logits || d.kv || d.pres) {
                differed++;
                printf("%s, %s model, %s: %ld logits, %ld K/V values, %ld flags differ from A "
                       "alone (max |diff| %.3g)\n", name, model_types[mi], schedules[k].name,
                       d.logits, d.kv, d.pres, d.max_abs);
                if (exact)
                    fail_msg("%s, %s model, %s: request A's bits depend on the batch", name,
                             model_types[mi], schedules[k].name);
            }
            trace_free(&t);
        }
        if (exact)
            printf("%s, %s model: A bit-identical in %d schedules\n", name, model_types[mi],
                   N_SCHED);
        trace_free(&alone);
    }
    return differed;
}

static void test_ref_batch_invariant(void **state)
{
    (void)state;
    const kvv_cache_type caches[] = {KVV_CACHE_F32, KVV_CACHE_F16};
    for (int i = 0; i < 2; i++) {
        config c = {"ref", KVV_MODE_EXACT, 1, caches[i]};
        check_config(&c, true);
    }
}

static void test_cpu_invariant_batch_invariant(void **state)
{
    (void)state;
    const kvv_cache_type caches[] = {KVV_CACHE_F32, KVV_CACHE_F16};
    for (int th = 1; th <= 2; th++)
        for (int i = 0; i < 2; i++) {
            config c = {"cpu", KVV_MODE_INVARIANT, th, caches[i]};
            check_config(&c, true);
        }
}

/* Fast mode promises nothing: what it gives is recorded. */
static void test_cpu_fast_recorded(void **state)
{
    (void)state;
    const kvv_cache_type caches[] = {KVV_CACHE_F32, KVV_CACHE_F16};
    for (int th = 1; th <= 2; th++)
        for (int i = 0; i < 2; i++) {
            config c = {"cpu", KVV_MODE_FAST, th, caches[i]};
            int n = check_config(&c, false);
            printf("cpu fast threads=%d cache=%s: %d of %d (model, schedule) runs differ from "
                   "A alone\n", th, kvv_cache_type_name(caches[i]), n, N_MODELS * N_SCHED);
        }
}

/* The control: a wrong sequence id puts one of B's tokens into A; the
 * comparison must see it, on both engines. */
static void test_leak_detected(void **state)
{
    (void)state;
    const config cfgs[] = {{"ref", KVV_MODE_EXACT, 1, KVV_CACHE_F32},
                           {"cpu", KVV_MODE_INVARIANT, 2, KVV_CACHE_F16}};
    g_model = g_models[1];
    for (int i = 0; i < 2; i++) {
        trace alone, t;
        trace_alloc(&alone, g_model);
        trace_alloc(&t, g_model);
        run_schedule(&cfgs[i], s_alone, &alone);
        run_schedule(&cfgs[i], s_leak, &t);
        diff d = compare(&alone, &t);
        printf("%s leak control: %ld logits, %ld K/V values differ\n", cfgs[i].engine, d.logits,
               d.kv);
        assert_true(d.logits > 0 && d.kv > 0);
        trace_free(&alone);
        trace_free(&t);
    }
}

/* Sequence 0 through decode is kvv_engine_forward's sequence. */
static void test_seq0_is_forward(void **state)
{
    (void)state;
    g_model = g_models[1];
    const int V = g_model->hp.n_vocab;
    const char *names[] = {"ref", "cpu"};
    for (int i = 0; i < 2; i++) {
        config c = {names[i], i ? KVV_MODE_INVARIANT : KVV_MODE_EXACT, 1, KVV_CACHE_F32};
        kvv_engine *e = open_cfg(&c, 1), *f = open_cfg(&c, 3);
        int32_t tok[LA], pos[LA], seq[LA] = {0};
        uint8_t want[LA] = {0};
        for (int p = 0; p < LA; p++) {
            tok[p] = tok_of(SA, p, V);
            pos[p] = p;
        }
        want[LA - 1] = 1;
        float *l1 = malloc(sizeof(float) * V), *l2 = malloc(sizeof(float) * V);
        kvv_error err = {0};
        assert_int_equal(kvv_engine_forward(e, LA, tok, pos, NULL, KVV_LOGITS_LAST, l1, &err),
                         KVV_OK);
        kvv_batch b = {.n = LA, .token = tok, .pos = pos, .seq = seq, .logits = want};
        assert_int_equal(kvv_engine_decode(f, &b, l2, &err), KVV_OK);
        assert_memory_equal(l1, l2, sizeof(float) * V);
        const kvv_kv_cache *c1 = kvv_engine_cache(e), *c2 = kvv_engine_cache(f);
        assert_int_equal(c1->n_pos, LA);
        assert_int_equal(c2->n_pos, LA);
        assert_memory_equal(c1->k[0], c2->k[0], sizeof(float) * LA * c1->n_kv_head * c1->head_dim_k);
        kvv_engine_desc d;
        kvv_engine_describe(f, &d);
        assert_int_equal(d.n_seq_max, 3);
        assert_int_equal(d.kv_unified, 0);
        assert_true(kvv_engine_caps(f) & KVV_ENGINE_CAP_SEQS);
        free(l1);
        free(l2);
        kvv_engine_close(e);
        kvv_engine_close(f);
    }
}

static void test_argument_errors(void **state)
{
    (void)state;
    g_model = g_models[0];
    const char *names[] = {"ref", "cpu"};
    for (int i = 0; i < 2; i++) {
        config c = {names[i], i ? KVV_MODE_INVARIANT : KVV_MODE_EXACT, 1, KVV_CACHE_F32};
        kvv_engine *e = open_cfg(&c, 4);
        kvv_error err = {0};
        int32_t tok[3] = {5, 6, 7}, pos[3] = {0, 1, 2}, seq[3] = {1, 1, 1};
        kvv_batch b = {.n = 3, .token = tok, .pos = pos, .seq = seq};
        /* a sequence id outside 0..3 */
        seq[1] = 4;
        assert_int_equal(kvv_engine_decode(e, &b, NULL, &err), KVV_ERR_USAGE);
        seq[1] = -1;
        assert_int_equal(kvv_engine_decode(e, &b, NULL, &err), KVV_ERR_USAGE);
        seq[1] = 1;
        /* a gap: an empty sequence starts at 0 */
        pos[0] = 1, pos[1] = 2, pos[2] = 3;
        assert_int_equal(kvv_engine_decode(e, &b, NULL, &err), KVV_ERR_USAGE);
        assert_non_null(strstr(err.msg, "expected 0"));
        /* not increasing inside the call */
        pos[0] = 0, pos[1] = 2, pos[2] = 1;
        assert_int_equal(kvv_engine_decode(e, &b, NULL, &err), KVV_ERR_USAGE);
        /* nothing was stored by the refused calls */
        uint8_t pres[2];
        float k[2 * 64], v[2 * 64];
        assert_int_equal(kvv_engine_seq_kv(e, 1, 0, 0, 1, k, v, pres, &err), KVV_OK);
        assert_int_equal(pres[0] | pres[1], 0);
        pos[0] = 0, pos[1] = 1, pos[2] = 2;
        assert_int_equal(kvv_engine_decode(e, &b, NULL, &err), KVV_OK);
        /* a gap after the cached positions, and an overwrite */
        pos[0] = 4, pos[1] = 5, pos[2] = 6;
        assert_int_equal(kvv_engine_decode(e, &b, NULL, &err), KVV_ERR_USAGE);
        assert_non_null(strstr(err.msg, "expected 3"));
        pos[0] = 2, pos[1] = 3, pos[2] = 4;
        assert_int_equal(kvv_engine_decode(e, &b, NULL, &err), KVV_ERR_USAGE);
        /* after seq_rm the sequence continues where it was cut */
        assert_int_equal(kvv_engine_seq_rm(e, 1, 1, -1, &err), KVV_OK);
        pos[0] = 1, pos[1] = 2, pos[2] = 3;
        assert_int_equal(kvv_engine_decode(e, &b, NULL, &err), KVV_OK);
        /* seq_rm / seq_cp / seq_kv with a bad id */
        assert_int_equal(kvv_engine_seq_rm(e, 4, 0, -1, &err), KVV_ERR_USAGE);
        assert_int_equal(kvv_engine_seq_cp(e, 1, 7, 0, -1, &err), KVV_ERR_USAGE);
        assert_int_equal(kvv_engine_seq_kv(e, -1, 0, 0, 1, k, v, pres, &err), KVV_ERR_USAGE);
        /* seq_cp of a prefix: the rows and flags as the source holds them */
        assert_int_equal(kvv_engine_seq_cp(e, 1, 3, 0, 2, &err), KVV_OK);
        float k2[2 * 64], v2[2 * 64];
        uint8_t p2[2];
        assert_int_equal(kvv_engine_seq_kv(e, 1, 2, 0, 1, k, v, pres, &err), KVV_OK);
        assert_int_equal(kvv_engine_seq_kv(e, 3, 2, 0, 1, k2, v2, p2, &err), KVV_OK);
        assert_memory_equal(k, k2, sizeof(float) * 32);
        assert_memory_equal(pres, p2, 2);
        assert_int_equal(kvv_engine_seq_kv(e, 3, 2, 2, 1, k2, v2, p2, &err), KVV_OK);
        assert_int_equal(p2[0] | p2[1], 0); /* position 2 was not copied */
        kvv_engine_close(e);

        /* one sequence: decode of sequence 1 refused */
        e = open_cfg(&c, 1);
        seq[0] = seq[1] = seq[2] = 1;
        pos[0] = 0, pos[1] = 1, pos[2] = 2;
        assert_int_equal(kvv_engine_decode(e, &b, NULL, &err), KVV_ERR_UNSUPPORTED);
        kvv_engine_close(e);

        /* n_seq_max above the limit: open refused */
        kvv_engine_opts o = kvv_engine_opts_default();
        o.name = names[i];
        o.mode = c.mode;
        o.n_ctx = N_CTX;
        o.n_seq_max = KVV_ENGINE_MAX_SEQS + 1;
        e = NULL;
        assert_int_equal(kvv_engine_open(g_model, &o, &e, &err), KVV_ERR_USAGE);
        assert_null(e);
        o.n_seq_max = KVV_ENGINE_MAX_SEQS;
        assert_int_equal(kvv_engine_open(g_model, &o, &e, &err), KVV_OK);
        assert_int_equal(kvv_engine_n_seq(e), KVV_ENGINE_MAX_SEQS);
        kvv_engine_close(e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seq0_is_forward),
        cmocka_unit_test(test_argument_errors),
        cmocka_unit_test(test_ref_batch_invariant),
        cmocka_unit_test(test_leak_detected),
        cmocka_unit_test(test_cpu_invariant_batch_invariant),
        cmocka_unit_test(test_cpu_fast_recorded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
