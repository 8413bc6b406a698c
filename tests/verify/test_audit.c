/*
 * test_audit.c — the pieces around the checks: the audit's check table and
 * its sizing ladder, the prompt generators, the kv chunk rule, and the
 * capture hooks (recording by position, patching, the planted flip, NaN
 * poisoning). No ../shared needed.
 */
#include <math.h>
#include <string.h>

#include "model/shapes.h"
#include "tests/test_util.h"
#include "verify/audit.h"
#include "verify/capture.h"
#include "verify/catalog.h"
#include "verify/kv.h"
#include "verify/patch.h"

static void test_table(void **state)
{
    (void)state;
    int n;
    const kvv_check_entry *t = kvv_audit_checks(&n);
    assert_true(n >= 4);
    const char *const mine[] = {"kv", "patch", "greedy", "invariance"};
    for (int i = 0; i < 4; i++) {
        assert_string_equal(t[i].name, mine[i]); /* the first four, in this order */
        assert_ptr_equal(kvv_audit_find(mine[i]), &t[i]);
        assert_non_null(t[i].run);
        assert_true(strlen(t[i].summary) > 10);
    }
    assert_null(kvv_audit_find("nope"));
}

/* One table: the audit's rows are the catalog's first rows, every other row
 * has no entry point, and every check there is once. */
static void test_one_table(void **state)
{
    (void)state;
    int n_all, n_audit;
    const kvv_check_entry *all = kvv_check_catalog(&n_all);
    const kvv_check_entry *audit = kvv_audit_checks(&n_audit);
    assert_ptr_equal(all, audit);
    assert_true(n_audit >= 8 && n_audit < n_all);
    for (int i = 0; i < n_all; i++) {
        assert_int_equal(all[i].run != NULL, i < n_audit);
        assert_int_equal(all[i].summary != NULL, i < n_audit);
        assert_true(strlen(all[i].proves) > 10 && strlen(all[i].control) > 10);
        assert_non_null(strstr(all[i].command, "kvverify"));
        for (int k = 0; k < i; k++)
            assert_string_not_equal(all[i].name, all[k].name);
    }
    assert_ptr_equal(kvv_audit_find("batch"), &all[6]);
    assert_ptr_equal(kvv_audit_find("tables"), &all[7]);
    assert_null(kvv_audit_find("evict")); /* in the catalog, not in the audit */
    assert_string_equal(all[n_audit].name, "evict");
}

static void plan_of(const char *shape, kvv_audit_plan *p)
{
    kvv_hparams hp;
    const kvv_shape *s = kvv_shape_find(shape);
    assert_non_null(s);
    kvv_shape_hparams(s, 0, &hp);
    kvv_audit_plan_for(&hp, 0, NULL, false, p);
}

static void test_plan(void **state)
{
    (void)state;
    kvv_audit_plan tiny, smol, big;
    plan_of("llama-tiny", &tiny);
    plan_of("smollm2-135m", &smol);
    plan_of("llama-3.2-1b", &big);
    assert_int_equal(tiny.n_prompt, 32);
    assert_int_equal(tiny.n_gen, 48);
    assert_true(tiny.est_macs < 1e10);
    /* 135M and 1B: the floor, never less (an engine without switches: 8, 32) */
    assert_int_equal(smol.floor_prompt, KVV_AUDIT_MIN_PROMPT);
    assert_int_equal(smol.floor_gen, KVV_AUDIT_MIN_STEPS);
    assert_int_equal(smol.n_prompt, 8);
    assert_int_equal(smol.n_gen, 32);
    assert_int_equal(big.n_prompt, 8);
    assert_int_equal(big.n_gen, 32);
    assert_false(big.quick);
    /* --quick: the budget alone, which on bigger models goes below the floor */
    kvv_hparams hp;
    kvv_audit_plan q;
    kvv_shape_hparams(kvv_shape_find("llama-3.2-1b"), 0, &hp);
    kvv_audit_plan_for(&hp, 0, NULL, true, &q);
    assert_true(q.quick);
    assert_true(q.est_macs <= KVV_AUDIT_BUDGET_MACS || (q.n_prompt == 4 && q.n_gen == 4));
    assert_true(q.n_prompt < q.floor_prompt || q.n_gen < q.floor_gen);
    /* an explicit budget is honoured */
    kvv_shape_hparams(kvv_shape_find("smollm2-135m"), 0, &hp);
    kvv_audit_plan p;
    kvv_audit_plan_for(&hp, 1e15, NULL, false, &p);
    assert_int_equal(p.n_prompt, 32);
    double l, h;
    kvv_model_macs_per_token(&hp, &l, &h);
    assert_true(l > 9e7 && l < 1.2e8); /* ~106M MACs through 30 layers */
    assert_true(h == (double)hp.n_embd * hp.n_vocab);
}

/* The floor follows the engine's switches: the prompt is twice the largest,
 * kv's chunk is at or above it, invariance's chunks straddle each. */
static void test_floor(void **state)
{
    (void)state;
    kvv_hparams hp;
    kvv_shape_hparams(kvv_shape_find("qwen3-0.6b"), 0, &hp);
    kvv_batch_paths fast = {0}, many = {0};
    kvv_batch_paths_add(&fast, 4, "sgemm");
    kvv_batch_paths_add(&many, 2, "x4");
    kvv_batch_paths_add(&many, 4, "fused");
    kvv_batch_paths_add(&many, 16, "a made-up third");
    kvv_audit_plan p;
    kvv_audit_plan_for(&hp, 0, &fast, false, &p);
    assert_int_equal(p.floor_prompt, 8);
    assert_int_equal(p.n_prompt, 8);
    assert_int_equal(p.n_gen, 32);
    assert_int_equal(kvv_audit_kv_chunk(&p, 8), 5); /* pieces 5 and 3: both sides of 4 */
    int ch[KVV_AUDIT_MAX_CHUNKS];
    int n = kvv_audit_chunks(&p, 8, ch, KVV_AUDIT_MAX_CHUNKS);
    const int want[] = {1, 2, 3, 4, 7};
    assert_int_equal(n, 5);
    assert_memory_equal(ch, want, sizeof want);
    kvv_audit_plan_for(&hp, 0, &many, false, &p);
    assert_int_equal(p.floor_prompt, 32);
    assert_int_equal(p.n_prompt, 32);
    int c = kvv_audit_kv_chunk(&p, 32);
    assert_true(c >= 16 && c % 2 == 1 && 32 % c != 0);
    n = kvv_audit_chunks(&p, 32, ch, KVV_AUDIT_MAX_CHUNKS);
    const int want2[] = {1, 2, 3, 4, 7, 15, 16};
    assert_int_equal(n, 7);
    assert_memory_equal(ch, want2, sizeof want2);
    /* quick: the budget alone, the plain chunkings */
    kvv_audit_plan_for(&hp, 0, &many, true, &p);
    assert_true(p.n_prompt < 32);
    n = kvv_audit_chunks(&p, 32, ch, KVV_AUDIT_MAX_CHUNKS);
    assert_int_equal(n, 3);
    /* the path of a batch size */
    assert_int_equal(kvv_batch_path_of(&many, 1), 0);
    assert_int_equal(kvv_batch_path_of(&many, 2), 1);
    assert_int_equal(kvv_batch_path_of(&many, 15), 2);
    assert_int_equal(kvv_batch_path_of(&many, 16), 3);
    kvv_batch_paths unknown = {0};
    assert_int_equal(kvv_batch_path_of(&unknown, 7), 7);
}

static void test_prompts(void **state)
{
    (void)state;
    int32_t a[64], b[64];
    kvv_prompt_random(5, 300, 1, a, 64);
    kvv_prompt_random(5, 300, 1, b, 64);
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(a[0], 1);
    int distinct = 0;
    for (int i = 0; i < 64; i++) {
        assert_true(a[i] >= 0 && a[i] < 300);
        distinct += i > 0 && a[i] != a[i - 1];
    }
    assert_true(distinct > 40);
    kvv_prompt_random(6, 300, -1, b, 64);
    assert_memory_not_equal(a, b, sizeof a);

    /* prompt B: same length and first token, differs before the last position */
    int32_t pb[8];
    kvv_patch_prompt_b(a, 8, 300, 1, pb);
    assert_int_equal(pb[0], a[0]);
    int differ = 0;
    for (int i = 0; i < 7; i++)
        differ |= pb[i] != a[i];
    assert_true(differ);
    /* even with a 2-token vocabulary and a 2-token prompt */
    int32_t two[2] = {0, 1}, tb[2];
    kvv_patch_prompt_b(two, 2, 2, 3, tb);
    assert_true(tb[0] != two[0]);
}

static void test_chunk(void **state)
{
    (void)state;
    assert_int_equal(kvv_kv_default_chunk(32), 5);
    assert_int_equal(kvv_kv_default_chunk(10), 3);
    assert_int_equal(kvv_kv_default_chunk(15), 7);
    assert_int_equal(kvv_kv_default_chunk(2), 1);
    assert_int_equal(kvv_kv_default_chunk(4), 3);
    for (int n = 3; n < 200; n++) {
        int c = kvv_kv_default_chunk(n);
        assert_true(c % 2 == 1);
        assert_true(c < n);
    }
}

static void test_capture(void **state)
{
    (void)state;
    kvv_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_layer = 2;
    hp.n_embd = 4;
    hp.n_head_kv = 1;
    hp.head_dim = 2;
    hp.head_dim_v = 2;
    kvv_capture c;
    kvv_error err = {0};
    assert_int_equal(kvv_capture_init(&c, &hp, 3, KVV_CAPTURE_RESID | KVV_CAPTURE_KV, &err),
                     KVV_OK);
    kvv_capture_poison(&c);
    assert_true(isnan(kvv_capture_resid(&c, 2, 2)[3]));
    float src[3][4] = {{9, 9, 9, 9}, {8, 8, 8, 8}, {7, 7, 7, 7}};
    c.patch_layer = 1;
    c.patch_src = &src[0][0];
    c.patch_lo = 1;
    c.patch_hi = 2;
    c.flip_layer = 0;
    c.flip_pos = 2;
    c.flip_index = 1;
    kvv_hooks h = kvv_capture_hooks(&c);
    /* a batch of positions 1 and 2 */
    int32_t pos[2] = {1, 2};
    float rows[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
    h.residual(h.user, 0, 2, pos, &rows[0][0]);
    assert_true(kvv_capture_resid(&c, 0, 1)[1] == 2.0f);
    /* the flip: lowest mantissa bit of resid[0][2][1], also in the engine's buffer */
    assert_int_equal(kvv_f32_bits(rows[1][1]), kvv_f32_bits(6.0f) ^ 1u);
    assert_int_equal(kvv_f32_bits(kvv_capture_resid(&c, 0, 2)[1]), kvv_f32_bits(6.0f) ^ 1u);
    /* the patch overwrites positions 1..2 of layer 1 in place */
    float rows1[2][4] = {{1, 1, 1, 1}, {2, 2, 2, 2}};
    h.residual(h.user, 1, 2, pos, &rows1[0][0]);
    assert_true(rows1[0][0] == 8.0f && rows1[1][3] == 7.0f);
    assert_true(kvv_capture_resid(&c, 1, 2)[0] == 7.0f);
    assert_true(isnan(kvv_capture_resid(&c, 1, 0)[0])); /* position 0 never seen */
    /* K/V by position */
    float k[2][2] = {{1, 2}, {3, 4}}, v[2][2] = {{5, 6}, {7, 8}};
    h.kv(h.user, 1, 2, pos, &k[0][0], &v[0][0]);
    assert_true(kvv_capture_k(&c, 1, 2)[1] == 4.0f && kvv_capture_v(&c, 1, 1)[0] == 5.0f);
    /* positions outside the capture are ignored, not written */
    int32_t far[1] = {7};
    h.kv(h.user, 0, 1, far, &k[0][0], &v[0][0]);
    kvv_capture_free(&c);
    kvv_capture_free(&c); /* idempotent */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_one_table), cmocka_unit_test(test_plan), cmocka_unit_test(test_floor),
        cmocka_unit_test(test_prompts), cmocka_unit_test(test_chunk),
        cmocka_unit_test(test_capture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
