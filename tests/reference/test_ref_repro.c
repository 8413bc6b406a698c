/*
 * test_ref_repro.c — the reference engine is reproducible to the bit: a
 * sha256 over every logit, K, V and residual of stories260K-f32 on a fixed
 * 32-token prompt (reference/ref_trace.h canonical order) must equal the
 * committed expectation below, identically for
 *   - the prompt in one batch, token by token, and in uneven chunks;
 *   - all hooks set (residual, kv, attn, attn_out, select keeping every key)
 *     and only the tracing hooks;
 *   - and without hooks, the logits and the cache contents equal the hooked
 *     run's.
 * The same prompt through `kvverify run --tokens ... --teacher --hash` gives
 * the same hash (tests/cli/test_repro_builds.sh checks it across -O0, -O2
 * and clang builds). Skips without ../shared.
 *
 * If a deliberate change to the reference numerics changes the hash, update
 * EXPECTED and say why in the commit: golden vectors depend on it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "reference/ref.h"
#include "reference/ref_trace.h"
#include "tests/test_util.h"

/* sha256 of the trace of PROMPT through stories260K-f32.gguf (sha256 prefix
 * 1f3a103a6cf35edb), f32 cache. */
static const char EXPECTED[] = "081d1f39d9f98cf5906937d74777dfe2eb87f992c852d0198caa990b8c27eea9";

static const int32_t PROMPT[32] = {1,   403, 407, 261, 378, 432, 383, 286, 261, 376, 298,
                                   315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410,
                                   408, 419, 292, 411, 322, 265, 262, 379, 426, 385};
#define N_PROMPT 32

typedef struct {
    kvv_trace *tr;
    kvv_hooks inner;   /* the trace's hooks */
    long n_attn, n_select, n_out;
} extra;

static void x_resid(void *u, int l, int n, const int32_t *pos, float *h)
{
    extra *x = u;
    x->inner.residual(x->inner.user, l, n, pos, h);
}

static void x_kv(void *u, int l, int n, const int32_t *pos, const float *k, const float *v)
{
    extra *x = u;
    x->inner.kv(x->inner.user, l, n, pos, k, v);
}

static void x_attn(void *u, int l, int n, const int32_t *pos, int nk, const int32_t *kp,
                   const float *p)
{
    (void)l, (void)n, (void)pos, (void)nk, (void)kp, (void)p;
    ((extra *)u)->n_attn++;
}

static void x_out(void *u, int l, int n, const int32_t *pos, const float *o)
{
    (void)l, (void)n, (void)pos, (void)o;
    ((extra *)u)->n_out++;
}

static void x_select(void *u, int l, int qpos, int head, const float *q, int nk,
                     const int32_t *kp, uint8_t *keep)
{
    (void)l, (void)qpos, (void)head, (void)q, (void)nk, (void)kp, (void)keep;
    ((extra *)u)->n_select++;
}

/* Run PROMPT in the given chunk sizes (0-terminated, rest in one go). */
static void run(kvv_ref *r, const kvv_model *m, const int *chunks, int hook_kind, char hex[65],
                float *logits)
{
    kvv_trace *tr = kvv_trace_new(&m->hp, 64);
    assert_non_null(tr);
    extra x = {tr, kvv_trace_hooks(tr), 0, 0, 0};
    kvv_hooks all;
    memset(&all, 0, sizeof all);
    all.user = &x;
    all.residual = x_resid;
    all.kv = x_kv;
    all.attn = x_attn;
    all.attn_out = x_out;
    all.select = x_select;
    const kvv_hooks *h = hook_kind == 0 ? NULL : hook_kind == 1 ? &x.inner : &all;
    int32_t pos[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++)
        pos[i] = i;
    const int nv = m->hp.n_vocab;
    kvv_kv_cache_clear(kvv_ref_cache(r));
    kvv_error err = {0};
    int done = 0, c = 0;
    while (done < N_PROMPT) {
        int n = chunks && chunks[c] ? chunks[c++] : N_PROMPT - done;
        if (n > N_PROMPT - done)
            n = N_PROMPT - done;
        float *rows = logits + (size_t)done * nv;
        assert_int_equal(kvv_ref_forward(r, n, PROMPT + done, pos + done, h, KVV_LOGITS_ALL, rows,
                                         &err), KVV_OK);
        for (int i = 0; i < n; i++)
            kvv_trace_add_logits(tr, done + i, rows + (size_t)i * nv);
        done += n;
    }
    if (hook_kind == 2) {
        assert_true(x.n_attn > 0 && x.n_out > 0);
        assert_true(x.n_select >= (long)N_PROMPT * m->hp.n_head * m->hp.n_layer);
    }
    kvv_trace_sha256_hex(tr, hex);
    kvv_trace_free(tr);
}

static void test_stories_hash(void **state)
{
    (void)state;
    KVV_NEED_SHARED(path, "models/stories260K-f32.gguf");
    kvv_error err = {0};
    kvv_model *m;
    assert_int_equal(kvv_model_open(path, &m, &err), KVV_OK);
    kvv_ref_opts o = kvv_ref_opts_default();
    o.n_ctx = 64;
    kvv_ref *r;
    assert_int_equal(kvv_ref_open(m, &o, &r, &err), KVV_OK);
    const size_t nl = (size_t)N_PROMPT * m->hp.n_vocab;
    float *ref_logits = malloc(nl * sizeof(float)), *lg = malloc(nl * sizeof(float));
    assert_true(ref_logits && lg);

    char batch[65], hex[65];
    run(r, m, NULL, 1, batch, ref_logits);
    printf("stories260K-f32, 32 tokens, one batch: sha256 %s\n", batch);
    if (strcmp(batch, EXPECTED) != 0)
        fail_msg("hash %s differs from the committed %s", batch, EXPECTED);

    static const int ones[N_PROMPT + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                           1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    static const int uneven[] = {5, 1, 9, 2, 0};
    static const int halves[] = {16, 16, 0};
    const int *splits[3] = {ones, uneven, halves};
    const char *names[3] = {"token by token", "chunks 5,1,9,2,15", "two halves"};
    for (int k = 0; k < 3; k++)
        for (int hk = 1; hk <= 2; hk++) {
            run(r, m, splits[k], hk, hex, lg);
            if (strcmp(hex, batch) != 0)
                fail_msg("%s (%s hooks): sha256 %s, one batch %s", names[k],
                         hk == 1 ? "trace" : "all", hex, batch);
            assert_memory_equal(lg, ref_logits, nl * sizeof(float));
        }

    /* Without hooks: the same logits and the same cache contents. */
    kvv_kv_cache *c = kvv_ref_cache(r);
    const size_t kw = (size_t)m->hp.n_head_kv * m->hp.head_dim;
    float *cached = malloc(sizeof(float) * (size_t)m->hp.n_layer * N_PROMPT * kw);
    assert_non_null(cached);
    for (int l = 0; l < m->hp.n_layer; l++)
        for (int p = 0; p < N_PROMPT; p++)
            kvv_kv_cache_load_k(c, l, p, cached + ((size_t)l * N_PROMPT + p) * kw);
    run(r, m, uneven, 0, hex, lg);
    assert_memory_equal(lg, ref_logits, nl * sizeof(float));
    float row[256];
    assert_true(kw <= 256);
    for (int l = 0; l < m->hp.n_layer; l++)
        for (int p = 0; p < N_PROMPT; p++) {
            kvv_kv_cache_load_k(c, l, p, row);
            assert_memory_equal(row, cached + ((size_t)l * N_PROMPT + p) * kw, kw * sizeof(float));
        }
    free(cached);
    free(ref_logits);
    free(lg);
    kvv_ref_close(r);
    kvv_model_close(m);
}

/* Two engines on the same model agree, and a second run on the same engine
 * after clearing the cache gives the same bits. */
static void test_run_twice(void **state)
{
    (void)state;
    KVV_NEED_SHARED(path, "models/stories260K-q8_0.gguf");
    kvv_error err = {0};
    kvv_model *m;
    assert_int_equal(kvv_model_open(path, &m, &err), KVV_OK);
    kvv_ref_opts o = kvv_ref_opts_default();
    o.n_ctx = 64;
    kvv_ref *r1, *r2;
    assert_int_equal(kvv_ref_open(m, &o, &r1, &err), KVV_OK);
    assert_int_equal(kvv_ref_open(m, &o, &r2, &err), KVV_OK);
    const size_t nl = (size_t)N_PROMPT * m->hp.n_vocab;
    float *a = malloc(nl * sizeof(float)), *b = malloc(nl * sizeof(float));
    assert_true(a && b);
    char ha[65], hb[65];
    run(r1, m, NULL, 1, ha, a);
    run(r2, m, NULL, 1, hb, b);
    assert_string_equal(ha, hb);
    run(r1, m, NULL, 2, hb, b);
    assert_string_equal(ha, hb);
    assert_memory_equal(a, b, nl * sizeof(float));
    free(a);
    free(b);
    kvv_ref_close(r1);
    kvv_ref_close(r2);
    kvv_model_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories_hash),
        cmocka_unit_test(test_run_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
