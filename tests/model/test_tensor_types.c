/*
 * test_tensor_types.c — type traits, fp16/bf16 conversions, quantize /
 * dequantize round trips, and (with ../shared) the stories260K Q8_0 file
 * against its F32 original. Hand-built blocks of every dequantizable type
 * are in test_dequant.c.
 */
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/tensor_types.h"

/* ------------------------------------------------------------- helpers */

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float fbits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static int is_nan(float f) { return (bits(f) & 0x7fffffffu) > 0x7f800000u; }

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}

/* uniform in [-scale, scale) */
static float rng_f(uint64_t *s, float scale)
{
    return scale * ((float)(rng_next(s) >> 40) / 8388608.0f - 1.0f);
}

/* ------------------------------------------------------------ traits */

static void test_traits(void **state)
{
    (void)state;
    static const struct { uint32_t id; const char *name; int64_t blck; size_t size; } want[] = {
        {0, "F32", 1, 4}, {1, "F16", 1, 2}, {2, "Q4_0", 32, 18}, {3, "Q4_1", 32, 20},
        {6, "Q5_0", 32, 22}, {7, "Q5_1", 32, 24}, {8, "Q8_0", 32, 34}, {9, "Q8_1", 32, 36},
        {10, "Q2_K", 256, 84}, {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144},
        {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292},
        {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74}, {18, "IQ3_XXS", 256, 98},
        {19, "IQ1_S", 256, 50}, {20, "IQ4_NL", 32, 18}, {21, "IQ3_S", 256, 110},
        {22, "IQ2_S", 256, 82}, {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1}, {25, "I16", 1, 2},
        {26, "I32", 1, 4}, {27, "I64", 1, 8}, {28, "F64", 1, 8}, {29, "IQ1_M", 256, 56},
        {30, "BF16", 1, 2}, {34, "TQ1_0", 256, 54}, {35, "TQ2_0", 256, 66}, {39, "MXFP4", 32, 17},
    };
    int known = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const kvv_type_traits *tt = kvv_type_traits_of(want[i].id);
        assert_non_null(tt);
        assert_string_equal(tt->name, want[i].name);
        assert_string_equal(kvv_type_name(want[i].id), want[i].name);
        assert_int_equal(tt->blck_size, want[i].blck);
        assert_int_equal(tt->type_size, want[i].size);
        kvv_type t;
        assert_true(kvv_type_from_name(want[i].name, &t));
        assert_int_equal(t, want[i].id);
        known++;
    }
    assert_int_equal(known, 32);
    /* retired ids and ids past the table are unknown */
    static const uint32_t retired[] = {4, 5, 31, 32, 33, 36, 37, 38, 40, 41, 1000, 0xffffffffu};
    for (size_t i = 0; i < sizeof retired / sizeof retired[0]; i++) {
        assert_null(kvv_type_traits_of(retired[i]));
        assert_string_equal(kvv_type_name(retired[i]), "unknown");
        assert_int_equal(kvv_type_row_size(retired[i], 32), 0);
    }
    /* dequantizable set is exactly the documented one */
    static const uint32_t deq[] = {0, 1, 30, 8, 2, 3, 6, 7, 12, 13, 14, 10, 11, 15, 20, 23, 34, 35, 39};
    int ndeq = 0;
    for (uint32_t t = 0; t < KVV_TYPE_COUNT; t++) {
        const kvv_type_traits *tt = kvv_type_traits_of(t);
        if (tt && tt->can_dequantize)
            ndeq++;
    }
    assert_int_equal(ndeq, (int)(sizeof deq / sizeof deq[0]));
    for (size_t i = 0; i < sizeof deq / sizeof deq[0]; i++)
        assert_true(kvv_type_traits_of(deq[i])->can_dequantize);
    /* names: case-insensitive, exact length */
    kvv_type t;
    assert_true(kvv_type_from_name("q8_0", &t)); assert_int_equal(t, KVV_TYPE_Q8_0);
    assert_true(kvv_type_from_name("bf16", &t)); assert_int_equal(t, KVV_TYPE_BF16);
    assert_true(kvv_type_from_name("iq2_Xxs", &t)); assert_int_equal(t, KVV_TYPE_IQ2_XXS);
    assert_false(kvv_type_from_name("q8", &t));
    assert_false(kvv_type_from_name("q8_00", &t));
    assert_false(kvv_type_from_name("", &t));
    assert_false(kvv_type_from_name(NULL, &t));
    /* row sizes */
    assert_int_equal(kvv_type_row_size(KVV_TYPE_F32, 7), 28);
    assert_int_equal(kvv_type_row_size(KVV_TYPE_Q8_0, 64), 68);
    assert_int_equal(kvv_type_row_size(KVV_TYPE_Q8_0, 33), 0);
    assert_int_equal(kvv_type_row_size(KVV_TYPE_Q4_K, 512), 288);
    assert_int_equal(kvv_type_row_size(KVV_TYPE_Q6_K, 255), 0);
    assert_int_equal(kvv_type_row_size(KVV_TYPE_F16, -2), 0);
    assert_int_equal(kvv_type_row_size(KVV_TYPE_F32, 0), 0);
    assert_int_equal(kvv_type_row_size(KVV_TYPE_F32, INT64_MAX / 2 + 1), 0); /* overflow */
}

/* ------------------------------------------------------------- fp16 */

static void test_fp16(void **state)
{
    (void)state;
    static const struct { float f; uint16_t h; } cases[] = {
        {1.0f, 0x3c00}, {-2.0f, 0xc000}, {0.0f, 0x0000}, {-0.0f, 0x8000},
        {65504.0f, 0x7bff},                     /* largest finite */
        {65519.996f, 0x7bff},                   /* just below the halfway point */
        {65520.0f, 0x7c00},                     /* halfway to 65536: ties to even = inf */
        {1e10f, 0x7c00}, {-1e10f, 0xfc00},
        {0x1p-24f, 0x0001},                     /* smallest subnormal */
        {0x1p-25f, 0x0000},                     /* tie between 0 and 2^-24: even (0) */
        {0x1.000002p-25f, 0x0001},              /* just above the tie */
        {0x1.8p-24f, 0x0002},                   /* tie 1.5 ulps: to even (2) */
        {0x1.4p-23f, 0x0002},                   /* 2.5 ulps: tie, to even (2) */
        {0x1.cp-23f, 0x0004},                   /* 3.5 ulps: tie, to even (4) */
        {0x1p-14f, 0x0400},                     /* smallest normal */
        {0x1.ffcp-15f, 0x0400},                 /* 1023.5 ulps: tie, to even = 0x0400 */
        {0x1.ff8p-15f, 0x03ff},                 /* 1023 ulps of 2^-24 */
        {0x1.fe8p-15f, 0x03fd},                 /* 1021 ulps */
        {0x1.fe9p-15f, 0x03fd},                 /* 1021.0625 ulps: down */
        {1.0f + 0x1p-11f, 0x3c00},              /* tie: to even */
        {1.0f + 0x1.8p-10f, 0x3c02},            /* 1 + 1.5 ulp: tie, to even (2) */
        {1.0f + 0x1.004p-11f, 0x3c01},           /* just above the tie */
        {0x1p-30f, 0x0000}, {0x1p-140f, 0x0000}, {-0x1p-149f, 0x8000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = kvv_fp32_to_fp16(cases[i].f);
        if (h != cases[i].h) {
            fprintf(stderr, "fp32_to_fp16(%a) = %04x, want %04x\n", cases[i].f, h, cases[i].h);
            fail();
        }
    }
    assert_int_equal(kvv_fp32_to_fp16(fbits(0x7f800000u)), 0x7c00);
    assert_int_equal(kvv_fp32_to_fp16(fbits(0xff800000u)), 0xfc00);
    /* NaN stays NaN (quiet), sign kept */
    uint16_t hn = kvv_fp32_to_fp16(fbits(0x7fc00000u));
    assert_true((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0 && !(hn & 0x8000));
    hn = kvv_fp32_to_fp16(fbits(0xff800001u)); /* signalling, payload only in low bits */
    assert_true((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0 && (hn & 0x8000));

    /* fp16 -> fp32: exact values */
    assert_true(kvv_fp16_to_fp32(0x0001) == 0x1p-24f);
    assert_true(kvv_fp16_to_fp32(0x03ff) == 1023.0f * 0x1p-24f);
    assert_true(kvv_fp16_to_fp32(0x0400) == 0x1p-14f);
    assert_true(kvv_fp16_to_fp32(0x3555) == 0x1.554p-2f);
    assert_true(kvv_fp16_to_fp32(0x7bff) == 65504.0f);
    assert_int_equal(bits(kvv_fp16_to_fp32(0x8000)), 0x80000000u);
    assert_int_equal(bits(kvv_fp16_to_fp32(0x7c00)), 0x7f800000u);
    assert_true(is_nan(kvv_fp16_to_fp32(0x7c01)));
    assert_true(is_nan(kvv_fp16_to_fp32(0xfe00)));

    /* every non-NaN half survives fp16 -> fp32 -> fp16; NaNs stay NaN */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kvv_fp16_to_fp32((uint16_t)h);
        uint16_t back = kvv_fp32_to_fp16(f);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            assert_true(is_nan(f));
            assert_true((back & 0x7c00) == 0x7c00 && (back & 0x3ff) != 0);
            assert_int_equal(back & 0x8000, h & 0x8000);
        } else if (back != h) {
            fprintf(stderr, "half %04x -> %a -> %04x\n", h, f, back);
            fail();
        }
    }

    /* round to nearest: for random finite inputs the result is no farther
     * than either neighbour, and on a tie it is the even one */
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)rng_next(&s);
        u = (u & 0x807fffffu) | ((uint32_t)(96 + (rng_next(&s) % 48)) << 23); /* 2^-31 .. 2^16 */
        float x = fbits(u);
        uint16_t h = kvv_fp32_to_fp16(x);
        if ((h & 0x7fff) >= 0x7c00)
            continue; /* overflowed: checked above */
        double y = kvv_fp16_to_fp32(h);
        double up = kvv_fp16_to_fp32((uint16_t)(h + 1));
        double dn = (h & 0x7fff) ? kvv_fp16_to_fp32((uint16_t)(h - 1)) : -y;
        double e = y - x < 0 ? x - y : y - x;
        double eu = up - x < 0 ? x - up : up - x;
        double ed = dn - x < 0 ? x - dn : dn - x;
        assert_true(e <= eu && e <= ed);
        if ((e == eu || e == ed) && e != 0)
            assert_int_equal(h & 1, 0);
    }
}

/* Values of the non-negative fp16 / bf16 magnitudes 0..inf; the inf slot
 * holds the next power of two, where rounding to inf begins. */
static void fill_mag_tables(double *mag16, double *magbf)
{
    for (uint32_t m = 0; m < 0x7c00; m++)
        mag16[m] = kvv_fp16_to_fp32((uint16_t)m);
    mag16[0x7c00] = 65536.0;
    for (uint32_t m = 0; m < 0x7f80; m++)
        magbf[m] = kvv_bf16_to_fp32((uint16_t)m);
    magbf[0x7f80] = 0x1p128;
}

/* make test-slow: every fp32 input. The result must be the nearest
 * representable value (ties to even), with x's sign; NaN stays NaN. A
 * property check, independent of how the conversion is written. */
static void test_fp16_bf16_exhaustive(void **state)
{
    (void)state;
    if (!kvv_test_slow()) {
        fprintf(stderr, "SKIP: exhaustive fp16/bf16 sweep runs under make test-slow\n");
        skip();
        return;
    }
    double *mag16 = malloc(0x7c01 * sizeof(double));
    double *magbf = malloc(0x7f81 * sizeof(double));
    assert_non_null(mag16);
    assert_non_null(magbf);
    fill_mag_tables(mag16, magbf);
    for (int is_bf16 = 0; is_bf16 < 2; is_bf16++) {
        uint64_t bad = 0;
        const uint32_t inf = is_bf16 ? 0x7f80u : 0x7c00u;
        const double *mag = is_bf16 ? magbf : mag16;
        for (uint64_t u64 = 0; u64 <= 0xffffffffu; u64++) {
            const uint32_t u = (uint32_t)u64;
            const float x = fbits(u);
            const uint16_t h = is_bf16 ? kvv_fp32_to_bf16(x) : kvv_fp32_to_fp16(x);
            const uint32_t m = h & 0x7fffu;
            const int sign_ok = (h >> 15) == (u >> 31);
            if (is_nan(x)) {
                bad += !(m > inf) || !sign_ok;
                continue;
            }
            const double a = fabs((double)x);
            if (m > inf || !sign_ok) {
                bad++;
                continue;
            }
            const double y = mag[m];
            if (m == inf) {                       /* inf: x at or past the halfway point */
                const double below = mag[inf - 1];
                bad += !(a - below >= y - a);
                continue;
            }
            const double up = mag[m + 1];
            const double dn = m ? mag[m - 1] : -mag[1];
            const double e = fabs(a - y), eu = fabs(up - a), ed = fabs(a - dn);
            if (e > eu || e > ed || ((e == eu || e == ed) && e != 0 && (m & 1)))
                bad++;
        }
        if (bad) {
            fprintf(stderr, "%s: %llu of 2^32 conversions not round-to-nearest-even\n",
                    is_bf16 ? "bf16" : "fp16", (unsigned long long)bad);
            fail();
        }
    }
    free(mag16);
    free(magbf);
}

/* kvv_dequantize_row's F16 and BF16 rows (written for the vectorizer,
 * tensor_types.c) give exactly kvv_fp16_to_fp32 / kvv_bf16_to_fp32 for
 * every one of the 65536 halves, NaN payloads included, also for rows that
 * are not a multiple of its chunk and start at odd addresses. */
static void test_dequantize_row_halves(void **state)
{
    (void)state;
    uint8_t *src = malloc(2 * 65536 + 1);
    float *y = malloc(sizeof(float) * 65536);
    assert_non_null(src);
    assert_non_null(y);
    for (int odd = 0; odd < 2; odd++) {
        uint8_t *x = src + odd;
        for (uint32_t h = 0; h < 65536; h++) {
            x[2 * h] = (uint8_t)h;
            x[2 * h + 1] = (uint8_t)(h >> 8);
        }
        for (int bf = 0; bf < 2; bf++) {
            const kvv_type t = bf ? KVV_TYPE_BF16 : KVV_TYPE_F16;
            const int64_t lens[] = {65536, 65536 - 7, 5};
            for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
                assert_true(kvv_dequantize_row(t, x, y, lens[k]));
                for (uint32_t h = 0; h < (uint32_t)lens[k]; h++) {
                    const float want = bf ? kvv_bf16_to_fp32((uint16_t)h)
                                          : kvv_fp16_to_fp32((uint16_t)h);
                    if (bits(y[h]) != bits(want))
                        fail_msg("%s row: half %04x -> %08x, want %08x", bf ? "BF16" : "F16",
                                 h, bits(y[h]), bits(want));
                }
            }
        }
    }
    free(src);
    free(y);
}

/* ------------------------------------------------------------- bf16 */

static void test_bf16(void **state)
{
    (void)state;
    static const struct { uint32_t f; uint16_t h; } cases[] = {
        {0x3f800000u, 0x3f80},  /* 1.0 */
        {0x3f808000u, 0x3f80},  /* 1 + 2^-8: tie, to even */
        {0x3f818000u, 0x3f82},  /* 1 + 3*2^-8: tie, to even */
        {0x3f808001u, 0x3f81},  /* just above the tie */
        {0x3f80ffffu, 0x3f81},
        {0x7f7fffffu, 0x7f80},  /* FLT_MAX rounds up to inf */
        {0x7f7f7fffu, 0x7f7f},
        {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80},
        {0x00000001u, 0x0000},  /* smallest subnormal: rounds to 0 (not flushed, rounded) */
        {0x00008000u, 0x0000},  /* tie: to even */
        {0x00018000u, 0x0002},  /* tie: to even */
        {0x00008001u, 0x0001},  /* subnormal bf16 kept */
        {0x80000000u, 0x8000},
        {0xc0490fdbu, 0xc049},  /* -pi */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = kvv_fp32_to_bf16(fbits(cases[i].f));
        if (h != cases[i].h) {
            fprintf(stderr, "fp32_to_bf16(%08x) = %04x, want %04x\n", cases[i].f, h, cases[i].h);
            fail();
        }
    }
    uint16_t hn = kvv_fp32_to_bf16(fbits(0x7f800001u)); /* payload only in low bits */
    assert_true((hn & 0x7f80) == 0x7f80 && (hn & 0x7f) != 0);
    hn = kvv_fp32_to_bf16(fbits(0xffc00000u));
    assert_true((hn & 0x7f80) == 0x7f80 && (hn & 0x7f) != 0 && (hn & 0x8000));
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kvv_bf16_to_fp32((uint16_t)h);
        assert_int_equal(bits(f), h << 16);
        if (!is_nan(f))
            assert_int_equal(kvv_fp32_to_bf16(f), h);
    }
}

static void test_bad_calls(void **state)
{
    (void)state;
    uint8_t blk[300] = {0};
    float out[256];
    assert_false(kvv_dequantize_row(KVV_TYPE_Q8_0, blk, out, 31));
    assert_false(kvv_dequantize_row(KVV_TYPE_Q6_K, blk, out, 32));
    assert_false(kvv_dequantize_row(KVV_TYPE_F16, blk, out, -1));
    assert_false(kvv_dequantize_row(KVV_TYPE_IQ2_XXS, blk, out, 256));
    assert_false(kvv_dequantize_row(KVV_TYPE_IQ1_M, blk, out, 256));
    assert_false(kvv_dequantize_row(KVV_TYPE_I32, blk, out, 4));
    assert_false(kvv_dequantize_row((kvv_type)4, blk, out, 32));
    assert_false(kvv_quantize_row(KVV_TYPE_IQ4_XS, out, blk, 256));
    assert_false(kvv_quantize_row(KVV_TYPE_Q4_K, out, blk, 255));
    assert_false(kvv_quantize_row(KVV_TYPE_Q5_1, out, blk, 40));
    assert_false(kvv_quantize_row(KVV_TYPE_Q8_0, out, blk, 48));
    assert_false(kvv_quantize_row((kvv_type)77, out, blk, 32));
    assert_true(kvv_dequantize_row(KVV_TYPE_Q8_0, blk, out, 0));
}

/* -------------------------------------------------------- quantizers */

static void test_quantize_plain(void **state)
{
    (void)state;
    uint64_t s = 12345;
    float x[256], y[256];
    uint8_t q[1024];
    for (int i = 0; i < 256; i++)
        x[i] = rng_f(&s, 100.0f);
    assert_true(kvv_quantize_row(KVV_TYPE_F32, x, q, 256));
    assert_true(kvv_dequantize_row(KVV_TYPE_F32, q, y, 256));
    assert_memory_equal(x, y, sizeof x);
    assert_true(kvv_quantize_row(KVV_TYPE_F16, x, q, 256));
    assert_true(kvv_dequantize_row(KVV_TYPE_F16, q, y, 256));
    for (int i = 0; i < 256; i++) {
        assert_int_equal(q[2 * i] | (q[2 * i + 1] << 8), kvv_fp32_to_fp16(x[i]));
        double e = (double)y[i] - x[i];
        assert_true((e < 0 ? -e : e) <= (x[i] < 0 ? -x[i] : x[i]) * 0x1p-11);
    }
    assert_true(kvv_quantize_row(KVV_TYPE_BF16, x, q, 256));
    assert_true(kvv_dequantize_row(KVV_TYPE_BF16, q, y, 256));
    for (int i = 0; i < 256; i++) {
        assert_int_equal(q[2 * i] | (q[2 * i + 1] << 8), kvv_fp32_to_bf16(x[i]));
        double e = (double)y[i] - x[i];
        assert_true((e < 0 ? -e : e) <= (x[i] < 0 ? -x[i] : x[i]) * 0x1p-8);
    }
}

static void test_quantize_q8_0(void **state)
{
    (void)state;
    /* known block: x_j = j - 16: amax 16, d = 16/127, id = 127/16 exactly */
    float x[32 * 64], y[32 * 64];
    uint8_t q[34 * 64];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    assert_true(kvv_quantize_row(KVV_TYPE_Q8_0, x, q, 32));
    assert_int_equal(q[0] | (q[1] << 8), kvv_fp32_to_fp16(16.0f / 127.0f));
    for (int j = 0; j < 32; j++) {
        /* (j-16)*7.9375 rounded half away from zero: exact products */
        double v = (j - 16) * 7.9375;
        int want = (int)(v < 0 ? v - 0.5 : v + 0.5);
        assert_int_equal((int8_t)q[2 + j], want);
    }
    assert_int_equal((int8_t)q[2], -127);
    assert_int_equal((int8_t)q[2 + 15], -8);   /* -7.9375 */
    /* a tie: x = 0.5 * d with d = 1 (amax 127): roundf goes away from zero */
    for (int j = 0; j < 32; j++) x[j] = 0.0f;
    x[0] = 127.0f; x[1] = 2.5f; x[2] = -2.5f; x[3] = 3.5f;
    assert_true(kvv_quantize_row(KVV_TYPE_Q8_0, x, q, 32));
    assert_int_equal(q[0] | (q[1] << 8), 0x3c00);
    assert_int_equal((int8_t)q[3], 3);
    assert_int_equal((int8_t)q[4], -3);
    assert_int_equal((int8_t)q[5], 4);
    /* all-zero block: d = 0, q = 0 */
    memset(x, 0, 32 * sizeof(float));
    assert_true(kvv_quantize_row(KVV_TYPE_Q8_0, x, q, 32));
    for (int j = 0; j < 34; j++) assert_int_equal(q[j], 0);

    /* random blocks of many magnitudes: within Q8_0 rounding */
    uint64_t s = 777;
    for (int i = 0; i < 32 * 64; i++)
        x[i] = rng_f(&s, (float)(1 << (i / 32 % 20)) * 0x1p-10f);
    assert_true(kvv_quantize_row(KVV_TYPE_Q8_0, x, q, 32 * 64));
    assert_true(kvv_dequantize_row(KVV_TYPE_Q8_0, q, y, 32 * 64));
    for (int b = 0; b < 64; b++) {
        double amax = 0;
        for (int j = 0; j < 32; j++) {
            double a = x[32 * b + j] < 0 ? -x[32 * b + j] : x[32 * b + j];
            if (a > amax) amax = a;
        }
        double d = amax / 127, dh = kvv_fp16_to_fp32((uint16_t)(q[34 * b] | (q[34 * b + 1] << 8)));
        double bound = d / 2 + 127 * (d > dh ? d - dh : dh - d) + amax * 0x1p-20;
        for (int j = 0; j < 32; j++) {
            double e = (double)y[32 * b + j] - x[32 * b + j];
            assert_true((e < 0 ? -e : e) <= bound);
        }
    }
}

static void test_quantize_q4_0(void **state)
{
    (void)state;
    /* known block: x_j = j - 16: max = -16 (first |x| max), d = 2, id = 0.5,
     * q = min(15, trunc(x/2 + 8.5)) */
    float x[32 * 32], y[32 * 32];
    uint8_t q[18 * 32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    assert_true(kvv_quantize_row(KVV_TYPE_Q4_0, x, q, 32));
    assert_int_equal(q[0] | (q[1] << 8), 0x4000);
    assert_true(kvv_dequantize_row(KVV_TYPE_Q4_0, q, y, 32));
    for (int j = 0; j < 32; j++) {
        int qq = (int)((j - 16) * 0.5 + 8.5);
        if (qq > 15) qq = 15;
        assert_true(y[j] == (float)((qq - 8) * 2));
    }
    assert_true(y[0] == -16.0f && y[1] == -14.0f && y[31] == 14.0f && y[30] == 14.0f);

    uint64_t s = 4242;
    for (int i = 0; i < 32 * 32; i++)
        x[i] = rng_f(&s, (float)(1 << (i / 32 % 16)) * 0x1p-6f);
    assert_true(kvv_quantize_row(KVV_TYPE_Q4_0, x, q, 32 * 32));
    assert_true(kvv_dequantize_row(KVV_TYPE_Q4_0, q, y, 32 * 32));
    for (int b = 0; b < 32; b++) {
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++) {
            float v = x[32 * b + j], a = v < 0 ? -v : v;
            if (amax < a) { amax = a; max = v; }
        }
        double d = max / -8.0;
        double dh = kvv_fp16_to_fp32((uint16_t)(q[18 * b] | (q[18 * b + 1] << 8)));
        double dd = (d > dh ? d - dh : dh - d);
        double ad = d < 0 ? -d : d;
        for (int j = 0; j < 32; j++) {
            double v = x[32 * b + j] / d;
            /* clamped at q = 15 (v >= 7.5): error up to one step */
            double bound = (v >= 7.5 ? ad : ad / 2) + 8 * dd + amax * 0x1p-20;
            double e = (double)y[32 * b + j] - x[32 * b + j];
            assert_true((e < 0 ? -e : e) <= bound);
        }
    }
}

/* Q4_1 / Q5_1 (min + scale) and Q5_0 (symmetric): random blocks of many
 * magnitudes, offsets and signs dequantize within the type's rounding. */
static void test_quantize_q4_1_q5(void **state)
{
    (void)state;
    enum { NB = 48 };
    float x[32 * NB], y[32 * NB];
    uint8_t q[24 * NB];
    uint64_t s = 31337;
    for (int i = 0; i < 32 * NB; i++) {
        const int b = i / 32;
        x[i] = rng_f(&s, (float)(1 << (b % 12)) * 0x1p-6f) + (b % 3 == 0 ? 0.0f : (float)(b % 7) - 3.0f);
    }
    static const kvv_type types[3] = {KVV_TYPE_Q4_1, KVV_TYPE_Q5_1, KVV_TYPE_Q5_0};
    for (int t = 0; t < 3; t++) {
        const kvv_type ty = types[t];
        const size_t bs = kvv_type_traits_of(ty)->type_size;
        assert_true(kvv_quantize_row(ty, x, q, 32 * NB));
        assert_true(kvv_dequantize_row(ty, q, y, 32 * NB));
        for (int b = 0; b < NB; b++) {
            const float *xb = x + 32 * b;
            const uint8_t *qb = q + bs * b;
            const double dh = kvv_fp16_to_fp32((uint16_t)(qb[0] | (qb[1] << 8)));
            double bound_base, d;
            float lo = xb[0], hi = xb[0], amax = 0, max = 0;
            for (int j = 0; j < 32; j++) {
                if (xb[j] < lo) lo = xb[j];
                if (xb[j] > hi) hi = xb[j];
                float a = xb[j] < 0 ? -xb[j] : xb[j];
                if (amax < a) { amax = a; max = xb[j]; }
            }
            const double tiny = (double)(amax > -lo ? amax : -lo) * 0x1p-20;
            if (ty == KVV_TYPE_Q5_0) {
                d = max / -16.0;
                bound_base = 16 * (d > dh ? d - dh : dh - d) + tiny;
            } else {
                const int levels = ty == KVV_TYPE_Q4_1 ? 15 : 31;
                const double mh = kvv_fp16_to_fp32((uint16_t)(qb[2] | (qb[3] << 8)));
                d = ((double)hi - lo) / levels;
                bound_base = levels * (d > dh ? d - dh : dh - d) + (mh > lo ? mh - lo : lo - mh) + tiny;
            }
            const double ad = d < 0 ? -d : d;
            for (int j = 0; j < 32; j++) {
                double v = ty == KVV_TYPE_Q5_0 ? xb[j] / d : 0.0;
                double bound = bound_base + ((ty == KVV_TYPE_Q5_0 && v >= 15.5) ? ad : ad / 2);
                double e = (double)y[32 * b + j] - xb[j];
                if ((e < 0 ? -e : e) > bound) {
                    fprintf(stderr, "%s block %d elem %d: x %.9g y %.9g bound %.9g\n",
                            kvv_type_name(ty), b, j, xb[j], y[32 * b + j], bound);
                    fail();
                }
            }
        }
    }
    /* a known block: x_j = j. Q4_1: min 0, d = 31/15; q_j = (int)(j*15/31 + 0.5) */
    for (int j = 0; j < 32; j++) x[j] = (float)j;
    assert_true(kvv_quantize_row(KVV_TYPE_Q4_1, x, q, 32));
    assert_int_equal(q[2] | (q[3] << 8), 0);                        /* min 0 */
    assert_int_equal(q[0] | (q[1] << 8), kvv_fp32_to_fp16(31.0f / 15.0f));
    assert_int_equal(q[4] & 15, 0);                                  /* x0 = 0 */
    assert_int_equal(q[4 + 15] >> 4, 15);                            /* x31 */
    assert_int_equal(q[4 + 1] & 15, 0);                              /* 15/31 + .5 < 1 */
    assert_int_equal(q[4 + 2] & 15, 1);                              /* 30/31 + .5 */
    /* Q5_1 of the same: d = 1, every q_j = j exactly */
    assert_true(kvv_quantize_row(KVV_TYPE_Q5_1, x, q, 32));
    assert_true(kvv_dequantize_row(KVV_TYPE_Q5_1, q, y, 32));
    for (int j = 0; j < 32; j++) assert_true(y[j] == (float)j);
    /* Q5_0: max = 31 -> d = -31/16; x = 0 -> q = 16 (y = 0) */
    assert_true(kvv_quantize_row(KVV_TYPE_Q5_0, x, q, 32));
    assert_true(kvv_dequantize_row(KVV_TYPE_Q5_0, q, y, 32));
    assert_true(y[0] == 0.0f);
    assert_true(y[31] == (float)(-16.0 * kvv_fp16_to_fp32(kvv_fp32_to_fp16(31.0f / -16.0f))));
}

/* --------------------------------------------- real file: stories260K */

/* Every Q8_0 tensor of stories260K-q8_0.gguf: quantizing the F32 file's
 * tensor gives the same bytes (the file was made by llama.cpp), and every
 * dequantized weight is within Q8_0 rounding of the original; every F16
 * tensor is the F32 one rounded to nearest even, byte for byte. */
/* Q4_0 and Q5_0 widened to Q8_0 dequantize to the same floats, for every
 * quant value (random bytes, so every nibble and high bit occurs) and for
 * scales that are subnormal, negative, zero or infinite; other types are
 * refused. */
static void test_widen_to_q8_0(void **state)
{
    (void)state;
    const int n = 32 * 64;
    uint8_t src[22 * 64], dst[34 * 64];
    float a[32 * 64], b[32 * 64];
    const uint16_t scales[] = {0x3C00, 0x0001, 0x8400, 0x0000, 0x7C00, 0x2E66};
    uint32_t r = 12345;
    for (int ti = 0; ti < 2; ti++) {
        kvv_type t = ti ? KVV_TYPE_Q5_0 : KVV_TYPE_Q4_0;
        size_t bs = ti ? 22 : 18;
        for (size_t i = 0; i < sizeof src; i++) {
            r = r * 1103515245u + 12345u;
            src[i] = (uint8_t)(r >> 16);
        }
        for (int blk = 0; blk < 64; blk++) {
            uint16_t d = scales[blk % 6];
            src[blk * bs] = (uint8_t)d;
            src[blk * bs + 1] = (uint8_t)(d >> 8);
        }
        assert_true(kvv_widen_to_q8_0(t, src, dst, n));
        assert_true(kvv_dequantize_row(t, src, a, n));
        assert_true(kvv_dequantize_row(KVV_TYPE_Q8_0, dst, b, n));
        assert_memory_equal(a, b, sizeof a);
    }
    assert_false(kvv_widen_to_q8_0(KVV_TYPE_Q4_1, src, dst, n));
    assert_false(kvv_widen_to_q8_0(KVV_TYPE_Q4_0, src, dst, 31));
}

/* kvv_quant_groups: one (s, m) per 16 weights and the integers, such that
 * s*q - m is exactly the dequantized value (random blocks of every type it
 * takes); other types and partial blocks are refused. */
static void test_quant_groups(void **state)
{
    (void)state;
    const kvv_type ts[] = {KVV_TYPE_Q4_1, KVV_TYPE_Q5_1, KVV_TYPE_Q2_K, KVV_TYPE_Q3_K,
                           KVV_TYPE_Q4_K, KVV_TYPE_Q5_K, KVV_TYPE_Q6_K};
    static uint8_t src[210 * 4];
    static float y[1024], s[64], m[64];
    static int8_t q[1024];
    uint32_t r = 99;
    for (size_t i = 0; i < sizeof src; i++) {
        r = r * 1664525u + 1013904223u;
        src[i] = (uint8_t)(r >> 24);
    }
    for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++) {
        const int64_t n = ts[ti] == KVV_TYPE_Q4_1 || ts[ti] == KVV_TYPE_Q5_1 ? 128 : 512;
        assert_true(kvv_quant_groups_type(ts[ti]));
        assert_true(kvv_quant_groups(ts[ti], src, n, s, m, q));
        assert_true(kvv_dequantize_row(ts[ti], src, y, n));
        for (int64_t i = 0; i < n; i++) {
            float v = s[i / 16] * (float)q[i] - m[i / 16];
            assert_memory_equal(&v, &y[i], sizeof v);
        }
    }
    assert_false(kvv_quant_groups_type(KVV_TYPE_Q8_0));
    assert_false(kvv_quant_groups(KVV_TYPE_Q8_0, src, 32, s, m, q));
    assert_false(kvv_quant_groups(KVV_TYPE_Q4_K, src, 255, s, m, q));
}

static void test_stories_q8_0(void **state)
{
    (void)state;
    char f32path[4096], q8path[4096];
    KVV_NEED_SHARED(p1, "models/stories260K-f32.gguf");
    snprintf(f32path, sizeof f32path, "%s", p1);
    KVV_NEED_SHARED(p2, "models/stories260K-q8_0.gguf");
    snprintf(q8path, sizeof q8path, "%s", p2);
    kvv_gguf *gf = NULL, *gq = NULL;
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_open(f32path, &gf, &err), KVV_OK);
    assert_int_equal(kvv_gguf_open(q8path, &gq, &err), KVV_OK);
    int n_q8 = 0;
    long blocks = 0, weights = 0;
    double worst = 0;
    for (uint64_t i = 0; i < gq->n_tensors; i++) {
        const kvv_gguf_tensor *tq = &gq->tensors[i];
        if (tq->type != KVV_TYPE_Q8_0)
            continue;
        const kvv_gguf_tensor *tf = kvv_gguf_find_tensor(gf, tq->name);
        assert_non_null(tf);
        assert_int_equal(tf->type, KVV_TYPE_F32);
        int64_t n = (int64_t)(tf->nbytes / 4);
        assert_int_equal(kvv_type_row_size(KVV_TYPE_Q8_0, n), tq->nbytes);
        float *x = malloc((size_t)n * sizeof(float));
        float *y = malloc((size_t)n * sizeof(float));
        uint8_t *q = malloc(tq->nbytes);
        assert_non_null(x); assert_non_null(y); assert_non_null(q);
        assert_true(kvv_dequantize_row(KVV_TYPE_F32, tf->data, x, n));
        assert_true(kvv_dequantize_row(KVV_TYPE_Q8_0, tq->data, y, n));
        assert_true(kvv_quantize_row(KVV_TYPE_Q8_0, x, q, n));
        if (memcmp(q, tq->data, tq->nbytes) != 0) {
            fprintf(stderr, "%s: Q8_0 bytes differ from llama.cpp's\n", tq->name);
            fail();
        }
        for (int64_t b = 0; b < n / 32; b++) {
            double amax = 0;
            for (int j = 0; j < 32; j++) {
                double a = x[32 * b + j] < 0 ? -x[32 * b + j] : x[32 * b + j];
                if (a > amax) amax = a;
            }
            const uint8_t *blk = tq->data + 34 * b;
            double d = amax / 127, dh = kvv_fp16_to_fp32((uint16_t)(blk[0] | (blk[1] << 8)));
            double bound = d / 2 + 127 * (d > dh ? d - dh : dh - d) + amax * 0x1p-20;
            for (int j = 0; j < 32; j++) {
                double e = (double)y[32 * b + j] - x[32 * b + j];
                e = e < 0 ? -e : e;
                if (e > bound) {
                    fprintf(stderr, "%s block %lld elem %d: |%.9g - %.9g| > %.9g\n", tq->name,
                            (long long)b, j, x[32 * b + j], y[32 * b + j], bound);
                    fail();
                }
                if (d > 0 && e / d > worst)
                    worst = e / d;
            }
            blocks++;
        }
        weights += n;
        n_q8++;
        free(x); free(y); free(q);
    }
    assert_int_equal(n_q8, 32);
    /* the F16 tensors (ffn_down: rows of 172 are not a multiple of 32) are
     * llama.cpp's round-to-nearest-even of the F32 weights: same bytes */
    int n_f16 = 0;
    for (uint64_t i = 0; i < gq->n_tensors; i++) {
        const kvv_gguf_tensor *tq = &gq->tensors[i];
        if (tq->type != KVV_TYPE_F16)
            continue;
        const kvv_gguf_tensor *tf = kvv_gguf_find_tensor(gf, tq->name);
        assert_non_null(tf);
        int64_t n = (int64_t)(tf->nbytes / 4);
        float *x = malloc((size_t)n * sizeof(float));
        uint8_t *h = malloc((size_t)n * 2);
        assert_non_null(x); assert_non_null(h);
        assert_true(kvv_dequantize_row(KVV_TYPE_F32, tf->data, x, n));
        assert_true(kvv_quantize_row(KVV_TYPE_F16, x, h, n));
        assert_int_equal(tq->nbytes, (uint64_t)n * 2);
        assert_memory_equal(h, tq->data, (size_t)n * 2);
        free(x); free(h);
        n_f16++;
    }
    assert_int_equal(n_f16, 5);
    fprintf(stderr, "stories260K: %d Q8_0 tensors, %ld blocks, %ld weights byte-identical "
            "when requantized; max |x - q*d| / d = %.6f\n", n_q8, blocks, weights, worst);
    kvv_gguf_close(gf);
    kvv_gguf_close(gq);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traits),
        cmocka_unit_test(test_fp16),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_fp16_bf16_exhaustive),
        cmocka_unit_test(test_dequantize_row_halves),
        cmocka_unit_test(test_bad_calls),
        cmocka_unit_test(test_quantize_plain),
        cmocka_unit_test(test_quantize_q8_0),
        cmocka_unit_test(test_quantize_q4_0),
        cmocka_unit_test(test_quantize_q4_1_q5),
        cmocka_unit_test(test_widen_to_q8_0),
        cmocka_unit_test(test_quant_groups),
        cmocka_unit_test(test_stories_q8_0),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
