/*
 * test_dequant.c — hand-built blocks of every dequantizable type.
 *
 * Blocks are packed here from the layouts of ggml-common.h (an encoder
 * written independently of the decoder, see docs/tensor-types.md) with small
 * integer scales and quants, so every expected value is exact and computed
 * in double; a few values are also worked out by hand in the comments.
 */
#include "tests/test_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/tensor_types.h"

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

static void expect_row(const float *got, const double *want, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        if ((double)got[i] != want[i]) {
            fprintf(stderr, "%s: element %d: got %.9g want %.9g\n", what, i, got[i], want[i]);
            fail();
        }
    }
}

/* ------------------------------------------------- hand-built blocks */

static void test_plain_types(void **state)
{
    (void)state;
    const float xs[4] = {1.5f, -0x1p-140f, 65504.0f, -0.0f};
    uint8_t b[16];
    double want[4];
    float got[4];
    for (int i = 0; i < 4; i++) {
        uint32_t u = bits(xs[i]);
        for (int k = 0; k < 4; k++) b[4 * i + k] = (uint8_t)(u >> (8 * k));
        want[i] = xs[i];
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_F32, b, got, 4));
    expect_row(got, want, 4, "F32");
    assert_int_equal(bits(got[3]), 0x80000000u);

    const uint16_t h[4] = {0x3c00, 0x0001, 0xfbff, 0x3800};
    const double hw[4] = {1.0, 0x1p-24, -65504.0, 0.5};
    for (int i = 0; i < 4; i++) put16(b + 2 * i, h[i]);
    assert_true(kvv_dequantize_row(KVV_TYPE_F16, b, got, 4));
    expect_row(got, hw, 4, "F16");

    const uint16_t bf[4] = {0x3f80, 0xc049, 0x0001, 0x7f7f};
    const double bw[4] = {1.0, -3.140625, 0x1p-133, 0x1.fep127};
    for (int i = 0; i < 4; i++) put16(b + 2 * i, bf[i]);
    assert_true(kvv_dequantize_row(KVV_TYPE_BF16, b, got, 4));
    expect_row(got, bw, 4, "BF16");
}

/* Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0: two blocks each, so the row advances. */
static void test_legacy_blocks(void **state)
{
    (void)state;
    uint8_t blk[2 * 34];
    float got[64];
    double want[64];

    /* Q4_0: d = 0.5, -0.25; q_j = (7j + b) % 16; y = (q - 8) d */
    memset(blk, 0, sizeof blk);
    const uint16_t d40[2] = {0x3800, 0xb400};
    const double dd40[2] = {0.5, -0.25};
    for (int b = 0; b < 2; b++) {
        uint8_t *x = blk + 18 * b;
        put16(x, d40[b]);
        for (int j = 0; j < 32; j++) {
            int q = (7 * j + b) % 16;
            x[2 + (j % 16)] |= (uint8_t)(j < 16 ? q : q << 4);
            want[32 * b + j] = (q - 8) * dd40[b];
        }
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_Q4_0, blk, got, 64));
    expect_row(got, want, 64, "Q4_0");
    assert_true(got[0] == -4.0f && got[1] == -0.5f && got[16] == -4.0f); /* q = 0, 7, 112%16=0 */

    /* Q4_1: d = 2, m = -3 / d = 0.125, m = 1.5; y = q d + m */
    memset(blk, 0, sizeof blk);
    const uint16_t d41[2][2] = {{0x4000, 0xc200}, {0x3000, 0x3e00}};
    const double dd41[2][2] = {{2.0, -3.0}, {0.125, 1.5}};
    for (int b = 0; b < 2; b++) {
        uint8_t *x = blk + 20 * b;
        put16(x, d41[b][0]);
        put16(x + 2, d41[b][1]);
        for (int j = 0; j < 32; j++) {
            int q = (5 * j + 3 * b) % 16;
            x[4 + (j % 16)] |= (uint8_t)(j < 16 ? q : q << 4);
            want[32 * b + j] = q * dd41[b][0] + dd41[b][1];
        }
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_Q4_1, blk, got, 64));
    expect_row(got, want, 64, "Q4_1");
    assert_true(got[0] == -3.0f && got[1] == 7.0f);

    /* Q5_0: d = 0.25; 5-bit q_j = (11j + 5b) % 32, bit 4 in qh bit j; y = (q - 16) d */
    memset(blk, 0, sizeof blk);
    for (int b = 0; b < 2; b++) {
        uint8_t *x = blk + 22 * b;
        put16(x, 0x3400);
        uint32_t qh = 0;
        for (int j = 0; j < 32; j++) {
            int q = (11 * j + 5 * b) % 32;
            x[6 + (j % 16)] |= (uint8_t)(j < 16 ? (q & 15) : (q & 15) << 4);
            qh |= (uint32_t)(q >> 4) << j;
            want[32 * b + j] = (q - 16) * 0.25;
        }
        for (int k = 0; k < 4; k++) x[2 + k] = (uint8_t)(qh >> (8 * k));
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_Q5_0, blk, got, 64));
    expect_row(got, want, 64, "Q5_0");
    assert_true(got[0] == -4.0f && got[3] == -3.75f && got[20] == 3.0f); /* q=0, 33%32=1, 220%32=28 */

    /* Q5_1: d = 0.5, m = -8; y = q d + m */
    memset(blk, 0, sizeof blk);
    for (int b = 0; b < 2; b++) {
        uint8_t *x = blk + 24 * b;
        put16(x, 0x3800);
        put16(x + 2, 0xc800);
        uint32_t qh = 0;
        for (int j = 0; j < 32; j++) {
            int q = (13 * j + 7 * b + 31) % 32;
            x[8 + (j % 16)] |= (uint8_t)(j < 16 ? (q & 15) : (q & 15) << 4);
            qh |= (uint32_t)(q >> 4) << j;
            want[32 * b + j] = q * 0.5 - 8.0;
        }
        for (int k = 0; k < 4; k++) x[4 + k] = (uint8_t)(qh >> (8 * k));
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_Q5_1, blk, got, 64));
    expect_row(got, want, 64, "Q5_1");
    assert_true(got[0] == 7.5f);

    /* Q8_0: d = 2^-3 then 3.0; q covers -128..127 */
    for (int b = 0; b < 2; b++) {
        uint8_t *x = blk + 34 * b;
        put16(x, b ? 0x4200 : 0x3000);
        for (int j = 0; j < 32; j++) {
            int q = b ? 127 - 8 * j : -128 + 8 * j + (j == 31 ? 7 : 0);
            x[2 + j] = (uint8_t)(int8_t)q;
            want[32 * b + j] = q * (b ? 3.0 : 0.125);
        }
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_Q8_0, blk, got, 64));
    expect_row(got, want, 64, "Q8_0");
    assert_true(got[0] == -16.0f && got[31] == 15.875f && got[32] == 381.0f);
}

/* Pack 8 six-bit scales and 8 six-bit mins into Q4_K/Q5_K's 12 bytes. */
static void pack_k4_scales(uint8_t *s, const int *sc, const int *mn)
{
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
}

static const int KSC[2][8] = {{1, 2, 3, 4, 17, 33, 50, 63}, {63, 0, 9, 31, 32, 16, 48, 5}};
static const int KMN[2][8] = {{0, 5, 10, 63, 16, 31, 47, 62}, {1, 62, 2, 33, 15, 0, 63, 40}};

static void test_q4_k(void **state)
{
    (void)state;
    uint8_t blk[2 * 144];
    float got[512];
    double want[512];
    memset(blk, 0, sizeof blk);
    const uint16_t dh[2][2] = {{0x3c00, 0x3800}, {0x3400, 0x4000}}; /* d, dmin */
    const double dd[2][2] = {{1.0, 0.5}, {0.25, 2.0}};
    for (int b = 0; b < 2; b++) {
        uint8_t *x = blk + 144 * b;
        put16(x, dh[b][0]);
        put16(x + 2, dh[b][1]);
        pack_k4_scales(x + 4, KSC[b], KMN[b]);
        for (int e = 0; e < 256; e++) {
            int s = e / 32, l = e % 32;           /* sub-block, index in it */
            int q = (s * 7 + l * 3 + b) % 16;
            uint8_t *byte = x + 16 + 32 * (s / 2) + l;
            *byte |= (uint8_t)(s % 2 ? q << 4 : q);
            want[256 * b + e] = dd[b][0] * KSC[b][s] * q - dd[b][1] * KMN[b][s];
        }
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_Q4_K, blk, got, 512));
    expect_row(got, want, 512, "Q4_K");
    /* spot values by hand: e=0: q=0, sc=1, m=0 -> 0; e=32+1: s=1, q=(7+3)%16=10,
     * 1*2*10 - 0.5*5 = 17.5; e=7*32+2: s=7, q=(49+6)%16=7, 63*7 - 0.5*62 = 410 */
    assert_true(got[0] == 0.0f && got[33] == 17.5f && got[226] == 410.0f);
    assert_false(kvv_dequantize_row(KVV_TYPE_Q4_K, blk, got, 128));
}

static void test_q5_k(void **state)
{
    (void)state;
    uint8_t blk[2 * 176];
    float got[512];
    double want[512];
    memset(blk, 0, sizeof blk);
    const uint16_t dh[2][2] = {{0x3800, 0x3c00}, {0x4400, 0x3000}};
    const double dd[2][2] = {{0.5, 1.0}, {4.0, 0.125}};
    for (int b = 0; b < 2; b++) {
        uint8_t *x = blk + 176 * b;
        put16(x, dh[b][0]);
        put16(x + 2, dh[b][1]);
        pack_k4_scales(x + 4, KSC[b], KMN[b]);
        for (int e = 0; e < 256; e++) {
            int s = e / 32, l = e % 32;
            int q = (s * 11 + l * 5 + 3 * b) % 32;
            x[48 + 32 * (s / 2) + l] |= (uint8_t)(s % 2 ? (q & 15) << 4 : (q & 15));
            x[16 + l] |= (uint8_t)((q >> 4) << s);  /* bit s of qh[l] */
            want[256 * b + e] = dd[b][0] * KSC[b][s] * q - dd[b][1] * KMN[b][s];
        }
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_Q5_K, blk, got, 512));
    expect_row(got, want, 512, "Q5_K");
    /* e = 5*32+4: s=5, q=(55+20)%32=11, 0.5*33*11 - 1*31 = 150.5;
     * e = 3*32+1: s=3, q=(33+5)%32=6, 0.5*4*6 - 63 = -51 */
    assert_true(got[164] == 150.5f && got[97] == -51.0f);
}

static void test_q6_k(void **state)
{
    (void)state;
    uint8_t blk[2 * 210];
    float got[512];
    double want[512];
    memset(blk, 0, sizeof blk);
    static const int8_t sc[2][16] = {
        {1, -1, 2, -2, 3, -3, 127, -128, 5, 6, 7, 8, -9, -10, 11, 64},
        {-128, 127, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}};
    const uint16_t dh[2] = {0x3400, 0xbc00};
    const double dd[2] = {0.25, -1.0};
    for (int b = 0; b < 2; b++) {
        uint8_t *x = blk + 210 * b;
        for (int k = 0; k < 16; k++) x[192 + k] = (uint8_t)sc[b][k];
        put16(x + 208, dh[b]);
        for (int e = 0; e < 256; e++) {
            int q = (e * 37 + 11 * b) % 64;
            int half = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
            /* quarters 0,1 use the low nibbles of ql[l], ql[l+32]; 2,3 the
             * high ones; the 2 high bits go to bits 2*quarter of qh[l] */
            uint8_t *ql = x + 64 * half + l + (quarter % 2) * 32;
            *ql |= (uint8_t)(quarter < 2 ? (q & 15) : (q & 15) << 4);
            x[128 + 32 * half + l] |= (uint8_t)((q >> 4) << (2 * quarter));
            want[256 * b + e] = dd[b] * sc[b][e / 16] * (q - 32);
        }
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_Q6_K, blk, got, 512));
    expect_row(got, want, 512, "Q6_K");
    /* e=0: q=0 -> 0.25*1*(-32) = -8; e=112: q=(4144)%64=48, sc[7]=-128 ->
     * 0.25*-128*16 = -512 */
    assert_true(got[0] == -8.0f && got[112] == -512.0f);
}

static void test_q2_k_q3_k(void **state)
{
    (void)state;
    uint8_t blk[2 * 110];
    float got[512];
    double want[512];

    /* Q2_K: scale byte s = (s%16) | (15-s)<<4; y = d*(sc&15)*q - dmin*(sc>>4) */
    memset(blk, 0, sizeof blk);
    const uint16_t dh[2][2] = {{0x3800, 0x3400}, {0x4000, 0x3c00}};
    const double dd[2][2] = {{0.5, 0.25}, {2.0, 1.0}};
    for (int b = 0; b < 2; b++) {
        uint8_t *x = blk + 84 * b;
        for (int s = 0; s < 16; s++)
            x[s] = (uint8_t)(((s + 3 * b) % 16) | ((15 - s) << 4));
        put16(x + 80, dh[b][0]);
        put16(x + 82, dh[b][1]);
        for (int e = 0; e < 256; e++) {
            int q = (e * 5 + b) % 4;
            int h = e / 128, r = e % 128;
            x[16 + 32 * h + r % 32] |= (uint8_t)(q << (2 * (r / 32)));
            int sc = x[e / 16];
            want[256 * b + e] = dd[b][0] * (sc & 15) * q - dd[b][1] * (sc >> 4);
        }
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_Q2_K, blk, got, 512));
    expect_row(got, want, 512, "Q2_K");
    /* e = 0: q 0, sc 0xf0 -> -0.25*15; e = 17: q = 85%4 = 1, sc = 1 | 14<<4 -> 0.5 - 3.5 */
    assert_true(got[0] == -3.75f && got[17] == -3.0f);

    /* Q3_K: 6-bit scales v_j, sc = v - 32; 3-bit q3, y = d*(v-32)*(q3-4) */
    memset(blk, 0, sizeof blk);
    static const int v[2][16] = {{0, 1, 31, 32, 33, 63, 2, 40, 17, 48, 5, 60, 12, 24, 36, 50},
                                 {63, 62, 61, 60, 0, 1, 2, 3, 32, 32, 16, 48, 8, 56, 20, 44}};
    for (int b = 0; b < 2; b++) {
        uint8_t *x = blk + 110 * b;
        for (int j = 0; j < 16; j++) {
            x[96 + j % 8] |= (uint8_t)((v[b][j] & 15) << (4 * (j / 8)));
            x[96 + 8 + j % 4] |= (uint8_t)((v[b][j] >> 4) << (2 * (j / 4)));
        }
        put16(x + 108, b ? 0xb800 : 0x3400); /* -0.5, 0.25 */
        for (int e = 0; e < 256; e++) {
            int q3 = (e * 3 + 2 * b) % 8;
            int h = e / 128, r = e % 128;
            x[32 + 32 * h + r % 32] |= (uint8_t)((q3 & 3) << (2 * (r / 32)));
            x[e % 32] |= (uint8_t)((q3 >> 2) << (e / 32));
            want[256 * b + e] = (b ? -0.5 : 0.25) * (v[b][e / 16] - 32) * (q3 - 4);
        }
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_Q3_K, blk, got, 512));
    expect_row(got, want, 512, "Q3_K");
    /* e = 0: v 0 -> sc -32, q3 0 -> 0.25 * -32 * -4 = 32; e = 85: v[5] = 63,
     * q3 = 255%8 = 7 -> 0.25*31*3 = 23.25 */
    assert_true(got[0] == 32.0f && got[85] == 23.25f);
}

static const int IQ4NL_LEVELS[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1, 13, 25, 38, 53, 69, 89, 113};

static void test_other_types(void **state)
{
    (void)state;
    uint8_t blk[2 * 292];
    float got[512];
    double want[512];

    /* Q8_K: f32 d = 0.375 */
    memset(blk, 0, sizeof blk);
    const uint32_t d8 = bits(0.375f);
    for (int k = 0; k < 4; k++) blk[k] = (uint8_t)(d8 >> (8 * k));
    for (int j = 0; j < 256; j++) {
        int q = (j * 7) % 256 - 128;
        blk[4 + j] = (uint8_t)(int8_t)q;
        want[j] = 0.375 * q;
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_Q8_K, blk, got, 256));
    expect_row(got, want, 256, "Q8_K");

    /* IQ4_NL: d = 0.5, -2; y = d * level[q] */
    memset(blk, 0, sizeof blk);
    for (int b = 0; b < 2; b++) {
        uint8_t *x = blk + 18 * b;
        put16(x, b ? 0xc000 : 0x3800);
        for (int j = 0; j < 32; j++) {
            int q = (j * 9 + b) % 16;
            x[2 + j % 16] |= (uint8_t)(j < 16 ? q : q << 4);
            want[32 * b + j] = (b ? -2.0 : 0.5) * IQ4NL_LEVELS[q];
        }
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_IQ4_NL, blk, got, 64));
    expect_row(got, want, 64, "IQ4_NL");
    assert_true(got[0] == -63.5f && got[32] == 208.0f); /* 0.5*-127; -2*-104 */

    /* IQ4_XS: d = 0.25, scale ls_b (6 bits) split over scales_l / scales_h */
    memset(blk, 0, sizeof blk);
    static const int ls[8] = {0, 63, 32, 31, 33, 16, 48, 5};
    put16(blk, 0x3400);
    uint16_t sh = 0;
    for (int ib = 0; ib < 8; ib++) {
        blk[4 + ib / 2] |= (uint8_t)((ls[ib] & 15) << (4 * (ib % 2)));
        sh |= (uint16_t)((ls[ib] >> 4) << (2 * ib));
    }
    put16(blk + 2, sh);
    for (int e = 0; e < 256; e++) {
        int ib = e / 32, r = e % 32, q = (e * 11) % 16;
        blk[8 + 16 * ib + r % 16] |= (uint8_t)(r < 16 ? q : q << 4);
        want[e] = 0.25 * (ls[ib] - 32) * IQ4NL_LEVELS[q];
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_IQ4_XS, blk, got, 256));
    expect_row(got, want, 256, "IQ4_XS");

    /* MXFP4: d = 2^(e-128); e2m1 levels doubled */
    static const int mx[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    static const uint8_t es[4] = {130, 0, 1, 252};
    static const double ds[4] = {4.0, 0x1p-128, 0x1p-127, 0x1p124};
    memset(blk, 0, sizeof blk);
    for (int b = 0; b < 4; b++) {
        uint8_t *x = blk + 17 * b;
        x[0] = es[b];
        for (int j = 0; j < 32; j++) {
            int q = (j * 5 + b) % 16;
            x[1 + j % 16] |= (uint8_t)(j < 16 ? q : q << 4);
            want[32 * b + j] = mx[q] * ds[b];
        }
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_MXFP4, blk, got, 128));
    expect_row(got, want, 128, "MXFP4");
    assert_true(got[1] == 24.0f && got[32 + 1] == 0x1p-125f); /* 6*4; q = 6: 8 * 2^-128 */
    /* e = 255: d = 2^127; level 1 -> 2^127, 2 -> inf, -12 -> -inf (fp32 products) */
    memset(blk, 0, 17);
    blk[0] = 255;
    blk[1] = 0x01 | (0x02 << 4);
    blk[2] = 0x0F;
    assert_true(kvv_dequantize_row(KVV_TYPE_MXFP4, blk, got, 32));
    assert_true(got[0] == 0x1p127f && got[16] == INFINITY && got[1] == -INFINITY && got[2] == 0.0f);

    /* TQ2_0: d = 1.5; weight 128h + 32l + m in bits 2l of qs[32h + m] */
    memset(blk, 0, sizeof blk);
    put16(blk + 64, 0x3e00);
    for (int e = 0; e < 256; e++) {
        int q = (e * 7 + e / 64) % 4;
        int h = e / 128, l = (e % 128) / 32, m = e % 32;
        blk[32 * h + m] |= (uint8_t)(q << (2 * l));
        want[e] = (q - 1) * 1.5;
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_TQ2_0, blk, got, 256));
    expect_row(got, want, 256, "TQ2_0");
}


/* TQ1_0, encoded as ggml's quantize_row_tq1_0_ref packs it: five base-3
 * codes per byte, most significant first, stored as ceil(raw*256/243);
 * the qh bytes hold four codes shifted up one digit. */
static uint8_t tq1_pack(const int *codes, int count)
{
    unsigned raw = 0;
    for (int k = 0; k < count; k++)
        raw = raw * 3 + (unsigned)codes[k];
    if (count == 4)
        raw *= 3;
    return (uint8_t)((raw * 256 + 242) / 243);
}

static void test_tq1_0(void **state)
{
    (void)state;
    uint8_t blk[2 * 54];
    float got[512];
    double want[512];
    int code[256];
    memset(blk, 0, sizeof blk);
    for (int b = 0; b < 2; b++) {
        uint8_t *x = blk + 54 * b;
        for (int e = 0; e < 256; e++) {
            code[e] = (e * 7 + e / 5 + b) % 3;
            want[256 * b + e] = (code[e] - 1) * (b ? -0.5 : 2.0);
        }
        int c[5];
        for (int m = 0; m < 32; m++) {
            for (int n = 0; n < 5; n++) c[n] = code[n * 32 + m];
            x[m] = tq1_pack(c, 5);
        }
        for (int m = 0; m < 16; m++) {
            for (int n = 0; n < 5; n++) c[n] = code[160 + n * 16 + m];
            x[32 + m] = tq1_pack(c, 5);
        }
        for (int j = 0; j < 4; j++) {
            for (int n = 0; n < 4; n++) c[n] = code[240 + n * 4 + j];
            x[48 + j] = tq1_pack(c, 4);
        }
        put16(x + 52, b ? 0xb800 : 0x4000);
    }
    assert_true(kvv_dequantize_row(KVV_TYPE_TQ1_0, blk, got, 512));
    expect_row(got, want, 512, "TQ1_0");
    /* all 243 raw values decode back to their five digits */
    for (int raw = 0; raw < 243; raw++) {
        uint8_t one[54] = {0};
        int c[5] = {raw / 81, raw / 27 % 3, raw / 9 % 3, raw / 3 % 3, raw % 3};
        one[0] = tq1_pack(c, 5);
        put16(one + 52, 0x3c00);
        float y[256];
        assert_true(kvv_dequantize_row(KVV_TYPE_TQ1_0, one, y, 256));
        for (int n = 0; n < 5; n++)
            assert_true(y[n * 32] == (float)(c[n] - 1));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_types),
        cmocka_unit_test(test_legacy_blocks),
        cmocka_unit_test(test_q4_k),
        cmocka_unit_test(test_q5_k),
        cmocka_unit_test(test_q6_k),
        cmocka_unit_test(test_q2_k_q3_k),
        cmocka_unit_test(test_other_types),
        cmocka_unit_test(test_tq1_0),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
