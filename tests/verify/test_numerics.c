/*
 * test_numerics.c — kvverify numerics (verify/numerics/numerics.h) and the op sets
 * (engine/engine_ops.h) on stories260K (skipped without ../shared):
 *   - the run rebuilds the op inputs bit for bit (0 mismatches) and gives
 *     finite statistics for every op and layer, for ref and cpu fast and
 *     invariant;
 *   - the cpu op set reproduces the cpu engine's cached K bit for bit (so
 *     the ops are what the engine computes);
 *   - negative control: an op set returning the correctly rounded result
 *     moved by +1 (and -2) ULP is measured as exactly 1 (2) ULP on every
 *     value, the exact op set as 0;
 *   - bad options are KVV_ERR_USAGE.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_ops.h"
#include "tests/test_util.h"
#include "verify/numerics/numerics.h"

#define MODEL "models/stories260K-f32.gguf"

typedef struct {
    kvv_model *m;
    kvv_ops *ref;
    int32_t tok[12];
    int n;
} fixture;

static int setup(void **state)
{
    const char *path = kvv_test_shared(MODEL);
    if (!path) {
        *state = NULL;
        return 0;
    }
    fixture *f = calloc(1, sizeof *f);
    kvv_error err = {0};
    assert_int_equal(kvv_model_open(path, &f->m, &err), KVV_OK);
    kvv_engine_opts eo = kvv_engine_opts_default();
    eo.n_ctx = 16;
    assert_int_equal(kvv_ops_open_ref(f->m, &eo, &f->ref, &err), KVV_OK);
    f->n = 12;
    kvv_prompt_random(7, f->m->hp.n_vocab, 1, f->tok, f->n);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f) {
        kvv_ops_close(f->ref);
        kvv_model_close(f->m);
        free(f);
    }
    return 0;
}

#define NEED_FIXTURE(f)                                               \
    fixture *f = *state;                                              \
    do { if (!f) { skip(); return; } } while (0)

static kvv_numerics_opts opts_for(const fixture *f)
{
    kvv_numerics_opts o = kvv_numerics_opts_default();
    o.model = f->m;
    o.tokens = f->tok;
    o.n_tokens = f->n;
    o.samples = 2;
    o.max_outputs = 48;
    o.math_samples = 300;
    return o;
}

/* Cells a model without post norms / attention soft-cap must fill. */
static bool expected(const kvv_numerics_engine *en, int layer, int n_layer, kvv_op op)
{
    if (!en->measured[op])
        return false;
    if (layer == n_layer)
        return op == KVV_OP_MATMUL || op == KVV_OP_RMSNORM || op == KVV_OP_SOFTCAP;
    return op != KVV_OP_SOFTCAP;
}

static void test_engines_finite(void **state)
{
    NEED_FIXTURE(f);
    kvv_error err = {0};
    kvv_ops *list[3] = {f->ref, NULL, NULL};
    int n_list = 1;
    kvv_engine_opts eo = kvv_engine_opts_default();
    eo.n_ctx = 16;
    eo.mode = KVV_MODE_FAST;
    if (kvv_ops_open_cpu(f->m, &eo, &list[n_list], &err) == KVV_OK)
        n_list++;
    else
        printf("note: cpu engine unavailable (%s); ref only\n", err.msg);
    eo.mode = KVV_MODE_INVARIANT;
    if (n_list == 2 && kvv_ops_open_cpu(f->m, &eo, &list[n_list], &err) == KVV_OK)
        n_list++;

    kvv_numerics_opts o = opts_for(f);
    kvv_numerics_report rep;
    assert_int_equal(kvv_numerics_run(&o, f->ref, list, n_list, &rep, &err), KVV_OK);
    assert_int_equal(rep.n_engines, n_list);
    assert_true(rep.capture_checked > 1000);
    assert_int_equal(rep.capture_mismatch, 0);
    assert_int_equal(rep.samples, 2);
    assert_int_equal(rep.rows[1], f->n - 1);
    for (int e = 0; e < rep.n_engines; e++) {
        const kvv_numerics_engine *en = &rep.engines[e];
        for (int l = 0; l <= rep.n_layer; l++)
            for (int op = 0; op < KVV_OP_COUNT; op++) {
                const kvv_numerics_cell *c = kvv_numerics_cell_at(&rep, e, l, (kvv_op)op);
                if (!expected(en, l, rep.n_layer, (kvv_op)op)) {
                    if (!en->measured[op])
                        assert_int_equal(c->hist.n, 0);
                    continue;
                }
                if (c->hist.n == 0 || c->hist.nan != 0)
                    fail_msg("%s layer %d %s: %llu values, %llu NaN", en->name, l,
                             kvv_op_name((kvv_op)op), (unsigned long long)c->hist.n,
                             (unsigned long long)c->hist.nan);
                assert_true(isfinite(kvv_oracle_hist_mean(&c->hist)));
                assert_true(c->worst.set && c->worst.ulp == c->hist.max);
            }
        /* elementwise ops stay within a few ULP; rmsnorm has 3 roundings */
        assert_true(en->total[KVV_OP_RMSNORM].hist.max <= 8);
        assert_true(en->total[KVV_OP_SILU].hist.max <= 8);
    }
    /* the reference's kmath is within its documented 0.501 ULP */
    int ref_math = 0;
    for (int i = 0; i < rep.n_math; i++)
        if (strcmp(rep.math[i].engine, "ref") == 0) {
            ref_math++;
            assert_true(rep.math[i].max_err < 0.501);
        }
    assert_int_equal(ref_math, 7);
    printf("ref matmul max %llu ULP, mean %.3f over %llu values\n",
           (unsigned long long)rep.engines[0].total[KVV_OP_MATMUL].hist.max,
           kvv_oracle_hist_mean(&rep.engines[0].total[KVV_OP_MATMUL].hist),
           (unsigned long long)rep.engines[0].total[KVV_OP_MATMUL].hist.n);
    kvv_numerics_report_free(&rep);
    for (int i = 1; i < n_list; i++)
        kvv_ops_close(list[i]);
}

/* K of every layer rebuilt with the cpu op set equals the cpu engine's
 * cache, bit for bit, in both modes (the batch is the forward's). */
typedef struct {
    float *k;       /* [n_layer][n][K] */
    float *resid;   /* [n_layer+1][n][E] */
    int n, K, E;
} kcap;

static void kv_hook(void *u, int l, int n, const int32_t *pos, const float *k, const float *v)
{
    kcap *c = u;
    (void)pos;
    (void)v;
    memcpy(c->k + (size_t)l * n * c->K, k, (size_t)n * c->K * sizeof *k);
}

static void resid_hook(void *u, int l, int n, const int32_t *pos, float *h)
{
    kcap *c = u;
    (void)pos;
    memcpy(c->resid + (size_t)l * n * c->E, h, (size_t)n * c->E * sizeof *h);
}

static void test_cpu_ops_are_the_engine(void **state)
{
    NEED_FIXTURE(f);
    const kvv_hparams *hp = &f->m->hp;
    const int n = f->n, E = hp->n_embd, K = hp->n_head_kv * hp->head_dim, hd = hp->head_dim;
    for (int mode = 0; mode < 2; mode++) {
        kvv_error err = {0};
        kvv_engine_opts eo = kvv_engine_opts_default();
        eo.n_ctx = 16;
        eo.mode = mode ? KVV_MODE_INVARIANT : KVV_MODE_FAST;
        kvv_ops *cpu;
        if (kvv_ops_open_cpu(f->m, &eo, &cpu, &err) != KVV_OK) {
            printf("SKIP: cpu engine unavailable: %s\n", err.msg);
            skip();
            return;
        }
        kcap cap = {.k = calloc((size_t)hp->n_layer * n * K, sizeof(float)),
                    .resid = calloc((size_t)(hp->n_layer + 1) * n * E, sizeof(float)),
                    .n = n, .K = K, .E = E};
        kvv_hooks h = {.user = &cap, .kv = kv_hook, .residual = resid_hook};
        int32_t pos[12];
        for (int t = 0; t < n; t++)
            pos[t] = t;
        assert_int_equal(kvv_engine_forward(cpu->engine, n, f->tok, pos, &h, KVV_LOGITS_NONE,
                                            NULL, &err), KVV_OK);
        float *xn = calloc((size_t)n * E, sizeof(float)), *k = calloc((size_t)n * K, sizeof(float));
        long diff = 0;
        for (int l = 0; l < hp->n_layer; l++) {
            const float *w = f->ref->vt->tensor(f->ref, l, KVV_T_ATTN_NORM, NULL, NULL);
            for (int t = 0; t < n; t++)
                cpu->vt->rmsnorm(cpu, cap.resid + ((size_t)l * n + t) * E, w, E, hp->norm_eps,
                                 xn + (size_t)t * E);
            cpu->vt->matmul(cpu, l, KVV_T_WK, n, xn, k);
            for (int t = 0; t < n; t++)
                for (int g = 0; g < hp->n_head_kv; g++) {
                    float *kh = k + (size_t)t * K + (size_t)g * hd;
                    cpu->vt->rope(cpu, l, t, kh, kh);
                }
            diff += memcmp(k, cap.k + (size_t)l * n * K, (size_t)n * K * sizeof *k) != 0;
        }
        assert_int_equal(diff, 0);
        free(xn);
        free(k);
        free(cap.k);
        free(cap.resid);
        kvv_ops_close(cpu);
    }
}

/* The planted control: oracle +nudge ULP measured as exactly |nudge|. */
static void check_nudge(fixture *f, int nudge)
{
    kvv_error err = {0};
    kvv_ops *ctl;
    assert_int_equal(kvv_ops_open_oracle(f->ref, nudge, &ctl, &err), KVV_OK);
    kvv_numerics_opts o = opts_for(f);
    o.n_tokens = 6;
    o.math_samples = 0;
    kvv_ops *list[1] = {ctl};
    kvv_numerics_report rep;
    assert_int_equal(kvv_numerics_run(&o, f->ref, list, 1, &rep, &err), KVV_OK);
    const uint64_t want = (uint64_t)(nudge < 0 ? -nudge : nudge);
    for (int op = 0; op < KVV_OP_COUNT; op++) {
        const kvv_oracle_hist *h = &rep.engines[0].total[op].hist;
        assert_true(h->n > 0);
        assert_int_equal(h->nan, 0);
        assert_int_equal(h->max, want);
        assert_int_equal(h->bins[kvv_oracle_hist_bin(want)], h->n);
        assert_true(kvv_oracle_hist_mean(h) == (double)want);
    }
    assert_int_equal(rep.n_math, 0);
    kvv_numerics_report_free(&rep);
    kvv_ops_close(ctl);
}

static void test_control_one_ulp(void **state)
{
    NEED_FIXTURE(f);
    check_nudge(f, 1);
}

static void test_control_exact_and_minus_two(void **state)
{
    NEED_FIXTURE(f);
    check_nudge(f, 0);
    check_nudge(f, -2);
}

static void test_bad_options(void **state)
{
    NEED_FIXTURE(f);
    kvv_error err = {0};
    kvv_ops *list[1] = {f->ref};
    kvv_numerics_report rep;
    kvv_numerics_opts o = opts_for(f);
    o.samples = 0;
    assert_int_equal(kvv_numerics_run(&o, f->ref, list, 1, &rep, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "samples"));
    o = opts_for(f);
    int32_t bad[2] = {1, 100000};
    o.tokens = bad;
    o.n_tokens = 2;
    assert_int_equal(kvv_numerics_run(&o, f->ref, list, 1, &rep, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "vocabulary"));
    o = opts_for(f);
    kvv_ops *ctl;
    assert_int_equal(kvv_ops_open_oracle(f->ref, 0, &ctl, &err), KVV_OK);
    assert_int_equal(kvv_numerics_run(&o, ctl, list, 1, &rep, &err), KVV_ERR_USAGE);
    assert_non_null(strstr(err.msg, "capture"));
    kvv_ops_close(ctl);
    assert_int_equal(kvv_numerics_run(&o, f->ref, list, 0, &rep, &err), KVV_ERR_USAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engines_finite),
        cmocka_unit_test(test_cpu_ops_are_the_engine),
        cmocka_unit_test(test_control_one_ulp),
        cmocka_unit_test(test_control_exact_and_minus_two),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
