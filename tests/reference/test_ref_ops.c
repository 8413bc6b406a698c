/*
 * test_ref_ops.c — the reference kernels (reference/ref_ops.c) against their
 * documented orders and formulas, re-derived here independently: the 8-lane
 * dot product (bit for bit, every length 0..70), matmul = per-element dot +
 * bias, matmul on weights as the file stores them (every dequantizable type,
 * aligned and misaligned F32 rows, row views) = matmul on their fp32 copy
 * bit for bit, RMSNorm (double sum of squares), RoPE angles (ggml's repeated fp32
 * multiplication) and rotations (NORM pairs vs NEOX halves, partial n_rot),
 * softmax (double sum, multiply by the rounded reciprocal), SiLU, GELU-tanh
 * and the soft-cap against long double math.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference/kmath.h"
#include "reference/ref_internal.h"
#include "tests/test_util.h"

/* Deterministic pseudo-random floats in [-2, 2). */
static float rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) * 0x1p-22f - 2.0f;
}

static float dot_documented(const float *a, const float *b, int n)
{
    float lane[8];
    for (int j = 0; j < 8; j++)
        lane[j] = 0.0f;
    int full = n / 8 * 8;
    for (int i = 0; i < full; i++) {
        float p = a[i] * b[i];
        lane[i % 8] = lane[i % 8] + p;
    }
    float t01 = lane[0] + lane[1], t23 = lane[2] + lane[3];
    float t45 = lane[4] + lane[5], t67 = lane[6] + lane[7];
    float t = (t01 + t23) + (t45 + t67);
    for (int i = full; i < n; i++) {
        float p = a[i] * b[i];
        t = t + p;
    }
    return t;
}

static void test_dot(void **state)
{
    (void)state;
    uint32_t s = 1;
    float a[70], b[70];
    for (int i = 0; i < 70; i++) {
        a[i] = rnd(&s);
        b[i] = rnd(&s) * 1000.0f;
    }
    int rev_differs = 0;
    for (int n = 0; n <= 70; n++) {
        float d = ref_dot(a, b, n), e = dot_documented(a, b, n);
        assert_memory_equal(&d, &e, sizeof d);
        float r = ref_dot_reversed(a, b, n);
        float re = 0.0f;
        for (int i = n - 1; i >= 0; i--)
            re = re + a[i] * b[i];
        assert_memory_equal(&r, &re, sizeof r);
        rev_differs += memcmp(&r, &d, sizeof r) != 0;
    }
    assert_true(rev_differs > 10); /* the control really sums differently */
}

static void test_matmul(void **state)
{
    (void)state;
    uint32_t s = 7;
    enum { N = 6, R = 5, C = 19 }; /* N > 4: the 4-token path and the tail */
    float W[R * C], x[N * C], bias[R], out[N * R], out1[R];
    for (int i = 0; i < R * C; i++)
        W[i] = rnd(&s);
    for (int i = 0; i < N * C; i++)
        x[i] = rnd(&s);
    for (int i = 0; i < R; i++)
        bias[i] = rnd(&s);
    ref_matmul(out, x, W, bias, N, R, C, false);
    for (int t = 0; t < N; t++) {
        for (int r = 0; r < R; r++) {
            float e = ref_dot(W + r * C, x + t * C, C) + bias[r];
            assert_memory_equal(&out[t * R + r], &e, sizeof e);
        }
        /* one token alone gives the same row (batch invariance) */
        ref_matmul(out1, x + t * C, W, bias, 1, R, C, false);
        assert_memory_equal(out1, out + t * R, sizeof out1);
    }
    ref_matmul(out, x, W, NULL, N, R, C, true);
    float e = ref_dot_reversed(W + 2 * C, x + C, C);
    assert_memory_equal(&out[1 * R + 2], &e, sizeof e);
}

/* Random bytes of type t with small fp16 scales (finite, moderate weights):
 * the d/dmin fields of each block layout (docs/tensor-types.md). */
static void random_rows(kvv_type t, uint8_t *x, size_t bytes, uint32_t *s)
{
    for (size_t i = 0; i < bytes; i++) {
        *s = *s * 1664525u + 1013904223u;
        x[i] = (uint8_t)(*s >> 24);
    }
    const kvv_type_traits *tt = kvv_type_traits_of(t);
    if (t == KVV_TYPE_F16 || t == KVV_TYPE_BF16) {
        for (size_t i = 1; i < bytes; i += 2) /* exponent bits: |w| about 2^-4 */
            x[i] = (uint8_t)((x[i] & 0x80) | (t == KVV_TYPE_F16 ? 0x2c : 0x3d));
        return;
    }
    if (t == KVV_TYPE_F32) {
        for (size_t i = 3; i < bytes; i += 4)
            x[i] = (uint8_t)((x[i] & 0x80) | 0x3d);
        return;
    }
    for (uint8_t *b = x; b + tt->type_size <= x + bytes; b += tt->type_size) {
        const uint8_t d[2] = {0x00, 0x20}; /* fp16 2^-7 */
        switch (t) {
        case KVV_TYPE_Q2_K: memcpy(b + 80, d, 2); memcpy(b + 82, d, 2); break;
        case KVV_TYPE_Q3_K: memcpy(b + 108, d, 2); break;
        case KVV_TYPE_Q6_K: memcpy(b + 208, d, 2); break;
        case KVV_TYPE_Q8_K: b[0] = 0; b[1] = 0; b[2] = 0; b[3] = 0x3c; break; /* f32 2^-7 */
        case KVV_TYPE_TQ1_0: memcpy(b + 52, d, 2); break;
        case KVV_TYPE_TQ2_0: memcpy(b + 64, d, 2); break;
        case KVV_TYPE_MXFP4: b[0] = 120; break;
        case KVV_TYPE_Q4_K: case KVV_TYPE_Q5_K: case KVV_TYPE_Q4_1: case KVV_TYPE_Q5_1:
            memcpy(b, d, 2);
            memcpy(b + 2, d, 2);
            break;
        default: memcpy(b, d, 2); break; /* *_0, IQ4_NL, IQ4_XS: d first */
        }
    }
}

/* The reference keeps weights as stored and widens a row when it uses it:
 * ref_matmul_mat on the stored rows gives the bits of ref_matmul on a full
 * fp32 copy (kvv_dequantize_row), for every type, with and without bias,
 * for a row view (phi3's fused tensors) and for F32 rows that are not
 * 4-byte aligned (copied, not read in place). */
static void test_matmul_stored(void **state)
{
    (void)state;
    enum { N = 5, R = 6, C = 512 };
    uint32_t s = 11;
    float x[N * C], bias[R], want[N * R], got[N * R], wrow[C];
    for (int i = 0; i < N * C; i++)
        x[i] = rnd(&s);
    for (int i = 0; i < R; i++)
        bias[i] = rnd(&s);
    float *W = malloc(sizeof(float) * R * C);
    assert_non_null(W);
    int types = 0;
    for (int t = 0; t < KVV_TYPE_COUNT; t++) {
        const kvv_type_traits *tt = kvv_type_traits_of((uint32_t)t);
        if (!tt || !tt->can_dequantize)
            continue;
        const size_t rb = kvv_type_row_size((uint32_t)t, C);
        assert_true(rb > 0);
        for (int misalign = 0; misalign < 2; misalign++) {
            uint8_t *buf = malloc(rb * R + 8);
            assert_non_null(buf);
            uint8_t *rows = buf + 4 + misalign; /* +4 aligned for F32, +5 not */
            random_rows((kvv_type)t, rows, rb * R, &s);
            for (int r = 0; r < R; r++)
                assert_true(kvv_dequantize_row((kvv_type)t, rows + r * rb, W + r * C, C));
            ref_mat m = {.data = rows, .row_bytes = rb, .type = (kvv_type)t, .rows = R, .cols = C};
            if (t == KVV_TYPE_F32) /* borrowed in place exactly when aligned */
                assert_true((ref_mat_row(&m, 1, wrow) == (const float *)(const void *)(rows + rb)) ==
                            !misalign);
            for (int b = 0; b < 2; b++) {
                ref_matmul(want, x, W, b ? bias : NULL, N, R, C, false);
                memset(got, 0xff, sizeof got);
                ref_matmul_mat(got, x, &m, b ? bias : NULL, N, false, wrow);
                if (memcmp(got, want, sizeof got) != 0)
                    fail_msg("type %s%s%s: stored-row matmul differs from the fp32 copy's",
                             tt->name, misalign ? " (misaligned)" : "", b ? " with bias" : "");
            }
            /* rows [2, 5) as a view */
            ref_mat v = m;
            v.data = rows + 2 * rb;
            v.rows = 3;
            ref_matmul(want, x, W + 2 * C, NULL, N, 3, C, true);
            ref_matmul_mat(got, x, &v, NULL, N, true, wrow);
            assert_memory_equal(got, want, sizeof(float) * N * 3);
            free(buf);
        }
        types++;
    }
    assert_true(types >= 19); /* F32 .. MXFP4: every dequantizable type */
    free(W);
}

static void test_rmsnorm(void **state)
{
    (void)state;
    uint32_t s = 3;
    enum { N = 2, D = 13 };
    float x[N * D], w[D], y[N * D];
    for (int i = 0; i < N * D; i++)
        x[i] = rnd(&s);
    for (int i = 0; i < D; i++)
        w[i] = 1.0f + 0.1f * rnd(&s);
    ref_rmsnorm(y, x, w, N, D, 1e-5f);
    for (int t = 0; t < N; t++) {
        double sum = 0;
        for (int i = 0; i < D; i++) {
            float sq = x[t * D + i] * x[t * D + i];
            sum = sum + (double)sq;
        }
        float mean = (float)(sum / D);
        float sc = 1.0f / sqrtf(mean + 1e-5f);
        for (int i = 0; i < D; i++) {
            float e = (x[t * D + i] * sc) * w[i];
            assert_memory_equal(&y[t * D + i], &e, sizeof e);
        }
    }
    /* in place */
    memcpy(y, x, sizeof x);
    ref_rmsnorm(y, y, w, N, D, 1e-5f);
    float y2[N * D];
    ref_rmsnorm(y2, x, w, N, D, 1e-5f);
    assert_memory_equal(y, y2, sizeof y);
}

static void test_rope(void **state)
{
    (void)state;
    const int n_rot = 8;
    const float ts = kvv_powf(10000.0f, -2.0f / (float)n_rot);
    const float ff[4] = {1.0f, 2.0f, 4.0f, 8.0f};
    float cs[8];
    ref_rope_angles(cs, 5, n_rot, ts, ff);
    float theta = 5.0f;
    for (int i = 0; i < 4; i++) {
        float c, sn;
        kvv_sincosf(theta / ff[i], &sn, &c);
        assert_true(cs[2 * i] == c && cs[2 * i + 1] == sn);
        theta = theta * ts;
    }
    /* position 0: identity */
    ref_rope_angles(cs, 0, n_rot, ts, NULL);
    float x[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, x0[10];
    memcpy(x0, x, sizeof x);
    ref_rope_apply(x, cs, n_rot, KVV_ROPE_NEOX);
    assert_memory_equal(x, x0, sizeof x);
    /* NORM rotates (0,1); NEOX rotates (0,4); dims >= n_rot untouched */
    ref_rope_angles(cs, 3, n_rot, ts, NULL);
    float xn[10] = {1, 0, 0, 0, 0, 0, 0, 0, 9, 10}, xx[10];
    memcpy(xx, xn, sizeof xn);
    ref_rope_apply(xn, cs, n_rot, KVV_ROPE_NORM);
    assert_true(xn[0] == cs[0] && xn[1] == cs[1] && xn[4] == 0.0f);
    ref_rope_apply(xx, cs, n_rot, KVV_ROPE_NEOX);
    assert_true(xx[0] == cs[0] && xx[4] == cs[1] && xx[1] == 0.0f);
    assert_true(xn[8] == 9.0f && xn[9] == 10.0f && xx[8] == 9.0f && xx[9] == 10.0f);
    /* a rotation keeps the norm */
    float y[8] = {0.3f, -1.2f, 2.0f, 0.7f, -0.4f, 1.1f, 0.9f, -2.2f};
    double n0 = 0, n1 = 0;
    for (int i = 0; i < 8; i++)
        n0 += (double)y[i] * y[i];
    ref_rope_apply(y, cs, n_rot, KVV_ROPE_NORM);
    for (int i = 0; i < 8; i++)
        n1 += (double)y[i] * y[i];
    assert_true(fabs(n0 - n1) < 1e-5 * n0);
}

static void test_softmax(void **state)
{
    (void)state;
    float s[5] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f}, e[5];
    double sum = 0;
    for (int j = 0; j < 5; j++) {
        e[j] = kvv_expf(s[j] - 3.0f);
        sum = sum + (double)e[j];
    }
    float inv = (float)(1.0 / sum);
    ref_softmax(s, 5);
    for (int j = 0; j < 5; j++) {
        float w = e[j] * inv;
        assert_memory_equal(&s[j], &w, sizeof w);
    }
    assert_true(s[1] == s[3]);
    float one[1] = {-1e30f};
    ref_softmax(one, 1);
    assert_true(one[0] == 1.0f);
    ref_softmax(one, 0); /* no-op */
}

static void test_activations(void **state)
{
    (void)state;
    double worst_silu = 0, worst_gelu = 0;
    for (int i = -4000; i <= 4000; i++) {
        float x = (float)i * 0.005f;
        long double xl = x;
        long double silu = xl / (1.0L + expl(-xl));
        long double gelu = 0.5L * xl *
                           (1.0L + tanhl(0.7978845608028653558798921198687637L * xl *
                                         (1.0L + 0.044715L * xl * xl)));
        double es = silu != 0 ? (double)fabsl((ref_silu(x) - silu) / silu) : 0;
        /* 1 + tanh(u) cancels for negative x in fp32 (as in ggml): absolute
         * error relative to max(|x|, 1) */
        double eg = (double)(fabsl(ref_gelu_tanh(x) - gelu) / fmaxl(fabsl(xl), 1.0L));
        if (es > worst_silu)
            worst_silu = es;
        if (eg > worst_gelu)
            worst_gelu = eg;
    }
    print_message("silu max rel %.3g, gelu_tanh max abs/max(|x|,1) %.3g\n", worst_silu, worst_gelu);
    assert_true(worst_silu < 1e-6 && worst_gelu < 1e-6);
    assert_true(ref_silu(-200.0f) == 0.0f && ref_silu(200.0f) == 200.0f);
    assert_true(fabsf(ref_softcap(1000.0f, 30.0f) - 30.0f) < 1e-5f);
    assert_true(ref_softcap(0.0f, 50.0f) == 0.0f);
    float c = ref_softcap(12.0f, 30.0f), w = kvv_tanhf(12.0f * (1.0f / 30.0f)) * 30.0f;
    assert_memory_equal(&c, &w, sizeof c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_stored),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_activations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
