/* test_policies_mock.c — each scoring policy's survivors on hand-made
 * attention probabilities and keys, through a tiny mock engine that
 * implements the engine vtable: it stores the keys a table gives, and
 * reports the attention probabilities a table gives, so the survivors can be
 * worked out by hand. A mock engine is an engine implementation, so it
 * includes engine/engine_impl.h (the only test that does). */
#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "engine/policy/policy.h"

#define NPOS 8

/* Attention weight of query position q to key position k (unnormalised;
 * the mock normalises over the visible keys). Key 1 and key 4 are "heavy". */
static float weight(int q, int k)
{
    if (k > q)
        return 0.0f;
    float w = 1.0f;
    if (k == 1) w = 6.0f;
    if (k == 4) w = 4.0f;
    if (k == q) w += 1.0f;
    return w;
}

/* Key of position p: norm grows with p, except position 5, which is tiny. */
static void key_of(int p, float k[2])
{
    k[0] = p == 5 ? 0.01f : (float)(p + 1);
    k[1] = 0.0f;
}

typedef struct {
    kvv_kv_cache *cache;
    float last_query[NPOS]; /* weights of the last query, for expectations */
} mock;

static void mock_close(kvv_engine *e)
{
    mock *m = e->impl;
    kvv_kv_cache_free(m->cache);
    free(m);
    free(e);
}

static kvv_status mock_forward(kvv_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                               const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                               kvv_error *err)
{
    (void)tokens; (void)lm; (void)logits; (void)err;
    mock *m = e->impl;
    for (int i = 0; i < n; i++) {
        float k[2], v[2] = {0, 0};
        key_of(pos[i], k);
        kvv_kv_cache_store(m->cache, 0, pos[i], k, v);
    }
    if (!hooks || !hooks->attn)
        return KVV_OK;
    int n_keys = pos[n - 1] + 1;
    int32_t key_pos[NPOS];
    float p[NPOS * 2 * NPOS];
    for (int j = 0; j < n_keys; j++)
        key_pos[j] = j;
    for (int i = 0; i < n; i++)
        for (int h = 0; h < 2; h++) {
            float *row = p + ((size_t)i * 2 + (size_t)h) * (size_t)n_keys, sum = 0;
            for (int j = 0; j < n_keys; j++) {
                bool live = kvv_kv_cache_present(m->cache, 0, j, 0);
                row[j] = live ? weight(pos[i], j) : 0.0f;
                sum += row[j];
            }
            for (int j = 0; j < n_keys; j++)
                row[j] /= sum;
        }
    hooks->attn(hooks->user, 0, n, pos, n_keys, key_pos, p);
    return KVV_OK;
}

static kvv_status mock_kv(kvv_engine *e, int layer, int n, const float *h, const int32_t *pos,
                          float *k, float *v, kvv_error *err)
{
    (void)e; (void)layer; (void)n; (void)h; (void)pos; (void)k; (void)v;
    return kvv_error_set(err, KVV_ERR_UNSUPPORTED, "mock: no kv_from_residual");
}

static kvv_kv_cache *mock_cache(kvv_engine *e)
{
    return ((mock *)e->impl)->cache;
}

static void mock_describe(kvv_engine *e, kvv_engine_desc *d)
{
    (void)e;
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "mock");
}

static const kvv_engine_vtable mock_vt = {
    .close = mock_close,
    .forward = mock_forward,
    .kv_from_residual = mock_kv,
    .cache = mock_cache,
    .describe = mock_describe,
};

static kvv_model model; /* only hp is read by the policies */

static kvv_engine *mock_open(void)
{
    memset(&model, 0, sizeof model);
    model.hp.n_layer = 1;
    model.hp.n_head = 2;
    model.hp.n_head_kv = 1;
    model.hp.head_dim = model.hp.head_dim_v = 2;
    model.hp.n_embd = 4;
    kvv_engine *e = calloc(1, sizeof *e);
    mock *m = calloc(1, sizeof *m);
    m->cache = kvv_kv_cache_new(KVV_CACHE_F32, 1, NPOS, 1, 2, 2);
    e->vt = &mock_vt;
    e->model = &model;
    e->impl = m;
    return e;
}

/* Prefill all NPOS positions through policy cfg; return the survivors as a
 * '0'/'1' string. */
static void survivors(const kvv_policy_cfg *cfg, char out[NPOS + 1])
{
    kvv_engine *e = mock_open();
    kvv_policy *p = NULL;
    kvv_error err = {0};
    assert_int_equal(kvv_policy_open(e, cfg, &p, &err), KVV_OK);
    int32_t tok[NPOS], pos[NPOS];
    for (int i = 0; i < NPOS; i++)
        tok[i] = 0, pos[i] = i;
    assert_int_equal(kvv_policy_forward(p, NPOS, tok, pos, NULL, KVV_LOGITS_NONE, NULL, &err),
                     KVV_OK);
    for (int i = 0; i < NPOS; i++)
        out[i] = kvv_kv_cache_present(kvv_engine_cache(e), 0, i, 0) ? '1' : '0';
    out[NPOS] = 0;
    kvv_policy_close(p);
    kvv_engine_close(e);
}

static void expect(kvv_policy_kind k, int budget, const char *want, void (*tweak)(kvv_policy_cfg *))
{
    kvv_policy_cfg cfg = kvv_policy_cfg_default(k, budget);
    if (tweak)
        tweak(&cfg);
    char got[NPOS + 1];
    survivors(&cfg, got);
    if (strcmp(got, want) != 0)
        fail_msg("%s budget %d: survivors %s, expected %s", kvv_policy_name(k), budget, got, want);
}

static void obs2_kernel1(kvv_policy_cfg *c) { c->obs_window = 2; c->kernel = 1; }
static void obs2_kernel3(kvv_policy_cfg *c) { c->obs_window = 2; c->kernel = 3; }
static void sinks2(kvv_policy_cfg *c) { c->sinks = 2; }

static void test_survivors(void **state)
{
    (void)state;
    /* window: the last 4 */
    expect(KVV_POLICY_WINDOW, 4, "00001111", NULL);
    /* streaming: sinks 0,1 + last 2 */
    expect(KVV_POLICY_STREAMING, 4, "11000011", sinks2);
    /* h2o: recent window 2 (6, 7) + the two largest sums of normalised
     * attention over all 8 queries. By hand: key 1 = 7/8 + 6/9 + 6/10 + 6/14
     * + 6/15 + 6/16 + 6/17 = 3.70; key 0 = 2/2 + 1/8 + 1/9 + ... + 1/17 = 1.60
     * (every query sees it: the attention-sink effect); key 4 = 5/14 + 4/15 +
     * 4/16 + 4/17 = 1.11. Survivors: 0, 1, 6, 7. */
    expect(KVV_POLICY_H2O, 4, "11000011", NULL);
    /* tova: the last query (7) weights: key 1 (6), key 4 (4), key 7 (2), then
     * keys 0,2,3,5,6 tie at 1 -> the lowest (0) */
    expect(KVV_POLICY_TOVA, 4, "11001001", NULL);
    /* snapkv, observation window 2 (6, 7 kept), no pooling: keys 1 and 4 */
    expect(KVV_POLICY_SNAPKV, 4, "01001011", obs2_kernel1);
    /* snapkv with kernel 3. Window queries 6 (weights /16) and 7 (/17); in
     * units of 1/272 the summed scores of keys 0..7 are 33, 198, 33, 33,
     * 132, 33, 50, 32. Pooled over 3 with zero padding: key 0 = 231,
     * 1 = 264, 2 = 264, 3 = 198, 4 = 198, 5 = 215. Top two of 0..5: 1 and 2. */
    expect(KVV_POLICY_SNAPKV, 4, "01100011", obs2_kernel3);
    /* knorm: lowest key norms: 5 (tiny), then 0, 1, 2 */
    expect(KVV_POLICY_KNORM, 4, "11100100", NULL);
    /* budget >= positions keeps everything */
    expect(KVV_POLICY_H2O, 8, "11111111", NULL);
    expect(KVV_POLICY_KNORM, 9, "11111111", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_survivors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
