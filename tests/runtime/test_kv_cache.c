/*
 * test_kv_cache.c — runtime/kv_cache.c and the cache type names of
 * runtime/runtime.c: storage and rounding per dtype (f16/bf16 round to
 * nearest even at store and read back the rounded value), presence flags,
 * per-head and whole-position eviction, live counts and exact byte
 * accounting, truncate and clear, raw element pointers, bad sizes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/tensor_types.h"
#include "runtime/kv_cache.h"
#include "tests/test_util.h"

static void test_names(void **state)
{
    (void)state;
    kvv_cache_type t;
    const char *names[3] = {"f32", "f16", "bf16"};
    for (int i = 0; i < 3; i++) {
        assert_string_equal(kvv_cache_type_name((kvv_cache_type)i), names[i]);
        assert_true(kvv_cache_type_from_name(names[i], &t));
        assert_int_equal(t, i);
    }
    assert_false(kvv_cache_type_from_name("F32", &t));
    assert_false(kvv_cache_type_from_name("", &t));
    assert_string_equal(kvv_cache_type_name((kvv_cache_type)5), "unknown");
}

static void test_round(void **state)
{
    (void)state;
    /* 1 + 2^-11 is a tie for f16: rounds to even (1.0); 1 + 3*2^-11 -> up. */
    assert_true(kvv_cache_round(KVV_CACHE_F16, 1.0f + 0x1p-11f) == 1.0f);
    assert_true(kvv_cache_round(KVV_CACHE_F16, 1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);
    assert_true(kvv_cache_round(KVV_CACHE_BF16, 1.0f + 0x1p-8f) == 1.0f);
    assert_true(kvv_cache_round(KVV_CACHE_BF16, 1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
    assert_true(kvv_cache_round(KVV_CACHE_F32, 0.1f) == 0.1f);
    assert_true(isinf(kvv_cache_round(KVV_CACHE_F16, 70000.0f)));
    assert_true(isnan(kvv_cache_round(KVV_CACHE_BF16, NAN)));
}

static void check_type(kvv_cache_type type)
{
    const int L = 3, C = 10, H = 2, DK = 4, DV = 3;
    kvv_kv_cache *c = kvv_kv_cache_new(type, L, C, H, DK, DV);
    assert_non_null(c);
    assert_int_equal(c->n_pos, 0);
    float k[8], v[6], kb[8], vb[6];
    for (int l = 0; l < L; l++)
        for (int p = 0; p < 6; p++) {
            for (int i = 0; i < H * DK; i++)
                k[i] = 0.1f * (float)(l + 1) + 0.0137f * (float)(p * 8 + i);
            for (int i = 0; i < H * DV; i++)
                v[i] = -0.3f * (float)(l + 1) + 0.0271f * (float)(p * 6 + i);
            kvv_kv_cache_store(c, l, p, k, v);
            kvv_kv_cache_load_k(c, l, p, kb);
            kvv_kv_cache_load_v(c, l, p, vb);
            for (int i = 0; i < H * DK; i++)
                assert_true(kb[i] == kvv_cache_round(type, k[i]));
            for (int i = 0; i < H * DV; i++)
                assert_true(vb[i] == kvv_cache_round(type, v[i]));
        }
    /* raw element pointer: the first K element as stored */
    const void *raw = kvv_kv_cache_k_ptr(c, 1, 2);
    kvv_kv_cache_load_k(c, 1, 2, kb);
    if (type == KVV_CACHE_F32) {
        float f;
        memcpy(&f, raw, 4);
        assert_true(f == kb[0]);
    } else {
        uint16_t u;
        memcpy(&u, raw, 2);
        assert_true((type == KVV_CACHE_F16 ? kvv_fp16_to_fp32(u) : kvv_bf16_to_fp32(u)) == kb[0]);
    }
    assert_int_equal(c->n_pos, 6);
    const uint64_t esz = type == KVV_CACHE_F32 ? 4 : 2;
    const uint64_t per_head = (uint64_t)(DK + DV) * esz;
    assert_int_equal(kvv_kv_cache_live(c, 0), 6 * H);
    assert_int_equal(kvv_kv_cache_bytes_live(c), (uint64_t)L * 6 * H * per_head);
    assert_true(kvv_kv_cache_present(c, 2, 5, 1));
    assert_false(kvv_kv_cache_present(c, 2, 6, 0));
    assert_false(kvv_kv_cache_present(c, 3, 0, 0));   /* bad layer */
    assert_false(kvv_kv_cache_present(c, 0, -1, 0));  /* bad position */
    assert_false(kvv_kv_cache_present(c, 0, 0, 2));   /* bad head */

    kvv_kv_cache_evict(c, 1, 3, 1);                   /* one head */
    assert_true(kvv_kv_cache_present(c, 1, 3, 0));
    assert_false(kvv_kv_cache_present(c, 1, 3, 1));
    kvv_kv_cache_evict(c, 1, 4, -1);                  /* whole position */
    assert_false(kvv_kv_cache_present(c, 1, 4, 0) || kvv_kv_cache_present(c, 1, 4, 1));
    kvv_kv_cache_evict(c, 9, 4, -1);                  /* out of range: ignored */
    assert_int_equal(kvv_kv_cache_live(c, 1), 6 * H - 3);
    assert_int_equal(kvv_kv_cache_bytes_live(c), ((uint64_t)L * 6 * H - 3) * per_head);

    kvv_kv_cache_truncate(c, 4);
    assert_int_equal(c->n_pos, 4);
    assert_false(kvv_kv_cache_present(c, 0, 4, 0));
    assert_true(kvv_kv_cache_present(c, 0, 3, 0));
    kvv_kv_cache_truncate(c, 8); /* growing is a no-op */
    assert_int_equal(c->n_pos, 4);
    /* storing again makes a position live */
    kvv_kv_cache_store(c, 1, 3, k, v);
    assert_true(kvv_kv_cache_present(c, 1, 3, 1));
    kvv_kv_cache_clear(c);
    assert_int_equal(c->n_pos, 0);
    for (int l = 0; l < L; l++)
        assert_int_equal(kvv_kv_cache_live(c, l), 0);
    assert_int_equal(kvv_kv_cache_bytes_live(c), 0);
    kvv_kv_cache_free(c);
}

static void test_types(void **state)
{
    (void)state;
    check_type(KVV_CACHE_F32);
    check_type(KVV_CACHE_F16);
    check_type(KVV_CACHE_BF16);
}

static void test_bad_sizes(void **state)
{
    (void)state;
    assert_null(kvv_kv_cache_new(KVV_CACHE_F32, 0, 4, 1, 1, 1));
    assert_null(kvv_kv_cache_new(KVV_CACHE_F32, 1, 0, 1, 1, 1));
    assert_null(kvv_kv_cache_new(KVV_CACHE_F32, 1, 4, 0, 1, 1));
    assert_null(kvv_kv_cache_new(KVV_CACHE_F32, 1, 4, 1, -1, 1));
    assert_null(kvv_kv_cache_new((kvv_cache_type)3, 1, 4, 1, 1, 1));
    assert_null(kvv_kv_cache_new(KVV_CACHE_F16, 1, 1 << 30, 1 << 10, 1 << 10, 1));
    kvv_kv_cache_free(NULL);
    kvv_kv_cache_clear(NULL);
    assert_int_equal(kvv_kv_cache_live(NULL, 0), 0);
    assert_int_equal(kvv_kv_cache_bytes_live(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_round),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_bad_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
