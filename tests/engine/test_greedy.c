/*
 * test_greedy.c — engine/greedy.c over a fake forward whose rows are
 * planted: NaN at id 0 and ties must pick what runtime/logits.h says (the
 * lowest id among the largest numbers), the positions and fed tokens follow
 * the contract of greedy.h, teacher forcing feeds the forced tokens while
 * recording each row's argmax, one_row reuses one row, kvv_greedy_step
 * agrees with the decode, and errors stop the run.
 */
#include <math.h>
#include <string.h>

#include "engine/greedy.h"
#include "runtime/logits.h"
#include "tests/test_util.h"

#define V 5

/* Row r (r = the calls so far) of the fake model; every row has a NaN at
 * id 0 and a tie for the largest value. */
static const float rows[4][V] = {
    {NAN, 1, 4, 4, 2},   /* argmax 2 (tie 2/3, NaN at 0 never wins) */
    {NAN, 9, NAN, 9, 9}, /* argmax 1 */
    {NAN, -INFINITY, -1, -1, NAN}, /* argmax 2 */
    {NAN, NAN, NAN, NAN, NAN},     /* argmax 0: no number at all */
};

typedef struct {
    int calls;
    int32_t fed[8], pos[8]; /* single-token calls: the token and its position */
    int n_first;            /* the first call's batch size */
    int fail_at;            /* call that fails (-1: none) */
} fake;

static kvv_status fake_forward(void *ctx, int n, const int32_t *tokens, const int32_t *pos,
                               const kvv_hooks *hooks, kvv_logits_mode lm, float *logits,
                               kvv_error *err)
{
    (void)hooks;
    fake *f = ctx;
    assert_int_equal(lm, KVV_LOGITS_LAST);
    if (f->calls == f->fail_at)
        return kvv_error_set(err, KVV_ERR_ENGINE, "planted failure");
    if (f->calls == 0) {
        f->n_first = n;
        for (int i = 0; i < n; i++)
            assert_int_equal(pos[i], i);
    } else {
        assert_int_equal(n, 1);
        f->fed[f->calls] = tokens[0];
        f->pos[f->calls] = pos[0];
    }
    memcpy(logits, rows[f->calls % 4], sizeof rows[0]);
    f->calls++;
    return KVV_OK;
}

static const int32_t prompt[3] = {4, 1, 3};

static void test_decode_nan_and_ties(void **state)
{
    (void)state;
    fake f = {.fail_at = -1};
    float logits[4][V];
    int32_t tok[4], am[4];
    const kvv_greedy g = {.forward = fake_forward, .ctx = &f, .n_vocab = V, .prompt = prompt,
                          .n_prompt = 3, .n_gen = 4};
    assert_int_equal(kvv_greedy_decode(&g, &logits[0][0], tok, am, NULL), KVV_OK);
    const int32_t want[4] = {2, 1, 2, 0};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tok[i], want[i]);
        assert_int_equal(am[i], want[i]);
        assert_int_equal(tok[i], kvv_logits_argmax(rows[i], V));
    }
    assert_int_equal(f.calls, 4); /* the prompt, then n_gen - 1 steps */
    assert_int_equal(f.n_first, 3);
    for (int i = 1; i < 4; i++) {
        assert_int_equal(f.fed[i], want[i - 1]);
        assert_int_equal(f.pos[i], 3 + i - 1);
    }
}

/* What `kvverify run` does (one row, a callback per row) and what the
 * greedy check does (every row kept) choose the same tokens. */
typedef struct {
    int32_t seen[4];
    int n;
} row_log;

static kvv_status log_row(void *user, int i, const float *row, int32_t argmax, kvv_error *err)
{
    (void)err;
    row_log *l = user;
    assert_int_equal(i, l->n);
    assert_int_equal(argmax, kvv_logits_argmax(row, V));
    l->seen[l->n++] = argmax;
    return l->n == 9 ? KVV_ERR_INTERNAL : KVV_OK;
}

static void test_one_row_agrees(void **state)
{
    (void)state;
    fake f1 = {.fail_at = -1}, f2 = {.fail_at = -1};
    float all[4][V], one[V];
    int32_t t1[4], t2[4];
    row_log l = {{0}, 0};
    const kvv_greedy g1 = {.forward = fake_forward, .ctx = &f1, .n_vocab = V, .prompt = prompt,
                           .n_prompt = 3, .n_gen = 4};
    kvv_greedy g2 = g1;
    g2.ctx = &f2;
    g2.one_row = true;
    g2.on_row = log_row;
    g2.user = &l;
    assert_int_equal(kvv_greedy_decode(&g1, &all[0][0], t1, NULL, NULL), KVV_OK);
    assert_int_equal(kvv_greedy_decode(&g2, one, t2, NULL, NULL), KVV_OK);
    assert_int_equal(l.n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t1[i], t2[i]);
        assert_int_equal(l.seen[i], t1[i]);
    }
}

static void test_forced(void **state)
{
    (void)state;
    fake f = {.fail_at = -1};
    float logits[3][V];
    int32_t tok[3], am[3];
    const int32_t forced[3] = {4, 4, 1};
    const kvv_greedy g = {.forward = fake_forward, .ctx = &f, .n_vocab = V, .prompt = prompt,
                          .n_prompt = 3, .n_gen = 3, .forced = forced};
    assert_int_equal(kvv_greedy_decode(&g, &logits[0][0], tok, am, NULL), KVV_OK);
    assert_int_equal(f.fed[1], 4);
    assert_int_equal(f.fed[2], 4);
    assert_int_equal(am[0], 2);
    assert_int_equal(am[1], 1);
    assert_int_equal(tok[2], 1);
}

static void test_step_and_errors(void **state)
{
    (void)state;
    fake f = {.calls = 1, .fail_at = -1};
    float next[V];
    int32_t tok = -1;
    assert_int_equal(kvv_greedy_step(fake_forward, &f, NULL, rows[0], V, 7, &tok, next, NULL),
                     KVV_OK);
    assert_int_equal(tok, 2);
    assert_int_equal(f.fed[1], 2);
    assert_int_equal(f.pos[1], 7);

    fake bad = {.fail_at = 2};
    float logits[4][V];
    int32_t t[4];
    kvv_error err = {0};
    const kvv_greedy g = {.forward = fake_forward, .ctx = &bad, .n_vocab = V, .prompt = prompt,
                          .n_prompt = 3, .n_gen = 4};
    assert_int_equal(kvv_greedy_decode(&g, &logits[0][0], t, NULL, &err), KVV_ERR_ENGINE);
    assert_int_equal(bad.calls, 2);
    kvv_greedy empty = g;
    empty.n_gen = 0;
    assert_int_equal(kvv_greedy_decode(&empty, &logits[0][0], t, NULL, &err), KVV_ERR_USAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_nan_and_ties),
        cmocka_unit_test(test_one_row_agrees),
        cmocka_unit_test(test_forced),
        cmocka_unit_test(test_step_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
