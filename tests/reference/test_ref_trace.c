/*
 * test_ref_trace.c — reference/ref_trace.c: the canonical hash does not
 * depend on the order or grouping in which rows are recorded, changes when
 * any recorded bit changes or a row is missing, replaces a re-recorded row,
 * counts rows it cannot record, and matches an independent sha256 of the
 * documented serialization.
 */
#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>

#include "reference/ref_trace.h"
#include "tests/test_util.h"

static kvv_hparams tiny_hp(void)
{
    kvv_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_layer = 2;
    hp.n_embd = 3;
    hp.n_head = 2;
    hp.n_head_kv = 1;
    hp.head_dim = 2;
    hp.head_dim_v = 2;
    hp.n_vocab = 4;
    return hp;
}

/* Residual rows h[layer][pos][3], K/V rows [layer][pos][2], logits [pos][4]. */
static float val(int kind, int layer, int pos, int i)
{
    return (float)(kind * 1000 + layer * 100 + pos * 10 + i) * 0.125f;
}

static void fill(float *x, int n, int kind, int layer, const int32_t *pos, int np, int width)
{
    for (int t = 0; t < np; t++)
        for (int i = 0; i < width; i++)
            x[t * width + i] = val(kind, layer, pos[t], i);
    (void)n;
}

/* Record positions pos[0..np) as one "batch" through the hooks. */
static void record(kvv_trace *tr, const int32_t *pos, int np)
{
    kvv_hooks h = kvv_trace_hooks(tr);
    float r[3 * 8], k[2 * 8], v[2 * 8], lg[4];
    for (int l = 0; l <= 2; l++) {
        fill(r, np, 1, l, pos, np, 3);
        h.residual(h.user, l, np, pos, r);
        if (l == 2)
            break;
        fill(k, np, 2, l, pos, np, 2);
        fill(v, np, 3, l, pos, np, 2);
        h.kv(h.user, l, np, pos, k, v);
    }
    for (int t = 0; t < np; t++) {
        for (int i = 0; i < 4; i++)
            lg[i] = val(4, 0, pos[t], i);
        kvv_trace_add_logits(tr, pos[t], lg);
    }
}

static void put_u32(uint8_t *b, uint32_t x)
{
    b[0] = (uint8_t)x;
    b[1] = (uint8_t)(x >> 8);
    b[2] = (uint8_t)(x >> 16);
    b[3] = (uint8_t)(x >> 24);
}

static void rec(struct sha256_ctx *c, int tag, int layer, int pos, int kind, int klayer, int n)
{
    uint8_t b[9];
    b[0] = (uint8_t)tag;
    put_u32(b + 1, (uint32_t)layer);
    put_u32(b + 5, (uint32_t)pos);
    sha256_update(c, 9, b);
    for (int i = 0; i < n; i++) {
        float f = val(kind, klayer, pos, i);
        uint32_t u;
        memcpy(&u, &f, 4);
        put_u32(b, u);
        sha256_update(c, 4, b);
    }
}

static void test_trace(void **state)
{
    (void)state;
    kvv_hparams hp = tiny_hp();
    char a[65], b[65], c[65];
    int32_t all[4] = {0, 1, 2, 3}, p0[1] = {0}, p1[1] = {1}, p23[2] = {2, 3}, p3[1] = {3};

    kvv_trace *t1 = kvv_trace_new(&hp, 8);
    assert_non_null(t1);
    record(t1, all, 4);
    kvv_trace_sha256_hex(t1, a);

    kvv_trace *t2 = kvv_trace_new(&hp, 8);
    record(t2, p23, 2); /* out of order, in other groups */
    record(t2, p1, 1);
    record(t2, p0, 1);
    kvv_trace_sha256_hex(t2, b);
    assert_string_equal(a, b);
    record(t2, p0, 1); /* a re-recorded row replaces the earlier one */
    kvv_trace_sha256_hex(t2, b);
    assert_string_equal(a, b);
    assert_int_equal(kvv_trace_dropped(t2), 0);

    /* one bit of one logit */
    float lg[4];
    for (int i = 0; i < 4; i++)
        lg[i] = val(4, 0, 2, i);
    uint32_t u;
    memcpy(&u, &lg[3], 4);
    u ^= 1;
    memcpy(&lg[3], &u, 4);
    kvv_trace_add_logits(t2, 2, lg);
    kvv_trace_sha256_hex(t2, c);
    assert_string_not_equal(a, c);

    /* a missing position */
    kvv_trace *t3 = kvv_trace_new(&hp, 8);
    record(t3, all, 3);
    kvv_trace_sha256_hex(t3, c);
    assert_string_not_equal(a, c);
    record(t3, p3, 1);
    kvv_trace_sha256_hex(t3, c);
    assert_string_equal(a, c);

    /* out-of-range rows are counted, not recorded */
    int32_t bad[1] = {8};
    record(t3, bad, 1);
    assert_true(kvv_trace_dropped(t3) > 0);
    kvv_trace_sha256_hex(t3, c);
    assert_string_equal(a, c);

    /* the documented serialization */
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    for (int p = 0; p < 4; p++) {
        for (int l = 0; l <= 2; l++) {
            rec(&ctx, 1, l, p, 1, l, 3);
            if (l == 2)
                break;
            rec(&ctx, 2, l, p, 2, l, 2);
            rec(&ctx, 3, l, p, 3, l, 2);
        }
        rec(&ctx, 4, 0, p, 4, 0, 4);
    }
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof d, d);
    char hex[65];
    for (int i = 0; i < 32; i++) {
        static const char digits[] = "0123456789abcdef";
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[64] = '\0';
    assert_string_equal(a, hex);

    assert_null(kvv_trace_new(&hp, 0));
    kvv_trace_free(NULL);
    kvv_trace_free(t1);
    kvv_trace_free(t2);
    kvv_trace_free(t3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
