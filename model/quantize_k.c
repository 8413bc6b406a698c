/*
 * quantize_k.c — encoders of the super-block K types (Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K) and of IQ4_NL, llama-quantize's fallback for Q2_K/Q3_K rows
 * whose length is not a multiple of 256. Layouts as quant_groups.c and
 * dequant_k.c decode them (docs/tensor-types.md).
 *
 * These are kvverify's own encoders, not ports of ggml's quantize_row_*_ref
 * (whose scale searches differ): the bytes are valid blocks of the type
 * that llama.cpp and kvverify decode alike, close to what llama-quantize
 * writes in error, not equal to it. Each sub-block gets a least-squares
 * fit of its scale (and offset), the super-block scales are fp16 and the
 * sub-block scales their 4/6/8-bit multiples, and every weight is then
 * re-quantized against the stored (rounded) scales. All arithmetic is
 * plain fp32/fp64 on the bits (no libm), so the bytes are the same on
 * every machine.
 */
#include "model/tensor_types_impl.h"

#include <stdint.h>

/* Round to nearest, ties to even, for |x| < 2^22 (the magic-number add);
 * anything else, NaN included, is clamped by the caller's range. */
static int nearest(float x)
{
    if (!(x > -4194304.0f && x < 4194304.0f))
        return x > 0 ? 4194304 : (x < 0 ? -4194304 : 0);
    const float v = x + 12582912.0f;
    return (int)(f32_bits(v) & 0x007fffffu) - 0x00400000;
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static float fp16_round(float x)
{
    return kvv_fp16_to_fp32(kvv_fp32_to_fp16(x));
}

static float absf(float x)
{
    return bits_f32(f32_bits(x) & 0x7fffffffu);
}

/* ---------------------------------------------------------------- fits */

/* Affine fit of n values to levels 0..nmax: x ~ scale*L - mneg, mneg >= 0
 * (the offset never goes above zero, as in every K type with mins). Start
 * from the range, then two rounds of least squares on the chosen levels. */
static void fit_affine(const float *x, int n, int nmax, float *scale, float *mneg)
{
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    if (lo > 0.0f)
        lo = 0.0f;
    if (!(hi > lo)) {
        *scale = 0.0f;
        *mneg = -lo;
        return;
    }
    float s = (hi - lo) / (float)nmax, m = lo;
    for (int it = 0; it < 2; it++) {
        double sl = 0, sll = 0, sx = 0, slx = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(nearest((x[i] - m) / s), 0, nmax);
            sl += l;
            sll += (double)l * l;
            sx += x[i];
            slx += (double)l * x[i];
        }
        const double det = n * sll - sl * sl;
        if (!(det > 0))
            break;
        double ns = (n * slx - sl * sx) / det, nm = (sx - ns * sl) / n;
        if (nm > 0) { /* keep the offset at or below zero: refit the scale alone */
            nm = 0;
            ns = sll > 0 ? slx / sll : 0;
        }
        if (!(ns > 0))
            break;
        s = (float)ns;
        m = (float)nm;
    }
    *scale = s;
    *mneg = -m;
}

/* Symmetric fit to levels -nneg..nneg-1: the element of largest |x| (first
 * on ties) maps to -nneg, then two rounds of least squares. May be
 * negative. */
static float fit_symmetric(const float *x, int n, int nneg)
{
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++)
        if (absf(x[i]) > amax) {
            amax = absf(x[i]);
            max = x[i];
        }
    if (amax == 0.0f)
        return 0.0f;
    float s = max / (float)-nneg;
    for (int it = 0; it < 2; it++) {
        double sxl = 0, sll = 0;
        for (int i = 0; i < n; i++) {
            const int l = clampi(nearest(x[i] / s), -nneg, nneg - 1);
            sxl += (double)x[i] * l;
            sll += (double)l * l;
        }
        if (!(sll > 0) || sxl == 0)
            break;
        s = (float)(sxl / sll);
    }
    return s;
}

/* The largest |v[i]|, keeping its sign. */
static float signed_max(const float *v, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++)
        if (absf(v[i]) > amax) {
            amax = absf(v[i]);
            max = v[i];
        }
    return max;
}

static float max_of(const float *v, int n)
{
    float m = 0.0f;
    for (int i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* Levels of n values against the stored scale dl and offset ml:
 * L = clamp(nearest((x + ml) / dl), lo, hi); 0 where dl is 0. */
static void requant(const float *x, int n, float dl, float ml, int lo, int hi, int *L)
{
    for (int i = 0; i < n; i++)
        L[i] = dl != 0.0f ? clampi(nearest((x[i] + ml) / dl), lo, hi) : clampi(0, lo, hi);
}

/* ---------------------------------------------------------------- Q4_K / Q5_K */

/* 8 sub-blocks of 32, 6-bit scales and mins packed as ggml's
 * get_scale_min_k4 reads them (quant_groups.c, scale_min_k4). */
static void pack_scale_min_k4(const int *sc, const int *mn, uint8_t *q)
{
    for (int j = 0; j < 12; j++)
        q[j] = 0;
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            q[j] |= (uint8_t)sc[j];
            q[j + 4] |= (uint8_t)mn[j];
        } else {
            q[j + 4] = (uint8_t)((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
            q[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            q[j] |= (uint8_t)((mn[j] >> 4) << 6);
        }
    }
}

static void q_q45_k(bool five, const float *x, uint8_t *y)
{
    const int nmax = five ? 31 : 15;
    float scale[8], mneg[8];
    for (int j = 0; j < 8; j++)
        fit_affine(x + 32 * j, 32, nmax, &scale[j], &mneg[j]);
    const float d = fp16_round(max_of(scale, 8) / 63.0f);
    const float dmin = fp16_round(max_of(mneg, 8) / 63.0f);
    int sc[8], mn[8], L[256];
    for (int j = 0; j < 8; j++) {
        sc[j] = d > 0 ? clampi(nearest(scale[j] / d), 0, 63) : 0;
        mn[j] = dmin > 0 ? clampi(nearest(mneg[j] / dmin), 0, 63) : 0;
        requant(x + 32 * j, 32, d * (float)sc[j], dmin * (float)mn[j], 0, nmax, L + 32 * j);
    }
    wr16(y, kvv_fp32_to_fp16(d));
    wr16(y + 2, kvv_fp32_to_fp16(dmin));
    pack_scale_min_k4(sc, mn, y + 4);
    uint8_t *qh = y + 16, *ql = y + (five ? 48 : 16);
    if (five)
        for (int l = 0; l < 32; l++) {
            qh[l] = 0;
            for (int j = 0; j < 8; j++)
                qh[l] |= (uint8_t)(((L[32 * j + l] >> 4) & 1) << j);
        }
    for (int k = 0; k < 4; k++) /* sub-block 2k in the low nibbles, 2k+1 in the high */
        for (int l = 0; l < 32; l++)
            ql[32 * k + l] = (uint8_t)((L[64 * k + l] & 0xF) | ((L[64 * k + 32 + l] & 0xF) << 4));
}

/* ---------------------------------------------------------------- Q6_K */

static void q_q6_k(const float *x, uint8_t *y)
{
    float scale[16];
    for (int g = 0; g < 16; g++)
        scale[g] = fit_symmetric(x + 16 * g, 16, 32);
    const float smax = signed_max(scale, 16);
    /* the largest scale maps to -128, as ggml's quantize_row_q6_K */
    const float d = smax != 0.0f ? fp16_round(smax / -128.0f) : 0.0f;
    int L[256];
    int8_t *sc = (int8_t *)(y + 192);
    for (int g = 0; g < 16; g++) {
        const int s = d != 0.0f ? clampi(nearest(scale[g] / d), -128, 127) : 0;
        sc[g] = (int8_t)s;
        requant(x + 16 * g, 16, d * (float)s, 0.0f, -32, 31, L + 16 * g);
    }
    for (int h = 0; h < 2; h++) { /* halves of 128 (quant_groups.c, g_q6_k) */
        uint8_t *ql = y + 64 * h, *qh = y + 128 + 32 * h;
        const int *u = L + 128 * h;
        for (int l = 0; l < 32; l++) {
            const int a = u[l] + 32, b = u[l + 32] + 32, c = u[l + 64] + 32, e = u[l + 96] + 32;
            ql[l] = (uint8_t)((a & 0xF) | ((c & 0xF) << 4));
            ql[l + 32] = (uint8_t)((b & 0xF) | ((e & 0xF) << 4));
            qh[l] = (uint8_t)((a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6));
        }
    }
    wr16(y + 208, kvv_fp32_to_fp16(d));
}

/* ---------------------------------------------------------------- Q3_K */

static void q_q3_k(const float *x, uint8_t *y)
{
    float scale[16];
    for (int g = 0; g < 16; g++)
        scale[g] = fit_symmetric(x + 16 * g, 16, 4);
    const float smax = signed_max(scale, 16);
    const float d = smax != 0.0f ? fp16_round(smax / -32.0f) : 0.0f;
    int L[256];
    uint8_t *sb = y + 96;
    for (int j = 0; j < 12; j++)
        sb[j] = 0;
    for (int g = 0; g < 16; g++) {
        const int s = d != 0.0f ? clampi(nearest(scale[g] / d), -32, 31) : 0;
        const int u = s + 32; /* stored 6 bits: low 4 in a nibble, high 2 in bytes 8..11 */
        sb[g % 8] |= (uint8_t)((u & 0xF) << (4 * (g / 8)));
        sb[8 + g % 4] |= (uint8_t)((u >> 4) << (2 * (g / 4)));
        requant(x + 16 * g, 16, d * (float)s, 0.0f, -4, 3, L + 16 * g);
    }
    uint8_t *hm = y, *qs = y + 32;
    for (int i = 0; i < 32; i++)
        hm[i] = 0;
    for (int i = 0; i < 64; i++)
        qs[i] = 0;
    for (int h = 0; h < 2; h++) /* weight 128h + 32k + l (quant_groups.c, g_q3_k) */
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                const int u = L[128 * h + 32 * k + l] + 4; /* 0..7 */
                qs[32 * h + l] |= (uint8_t)((u & 3) << (2 * k));
                hm[l] |= (uint8_t)((u >> 2) << (4 * h + k));
            }
    wr16(y + 108, kvv_fp32_to_fp16(d));
}

/* ---------------------------------------------------------------- Q2_K */

static void q_q2_k(const float *x, uint8_t *y)
{
    float scale[16], mneg[16];
    for (int g = 0; g < 16; g++)
        fit_affine(x + 16 * g, 16, 3, &scale[g], &mneg[g]);
    const float d = fp16_round(max_of(scale, 16) / 15.0f);
    const float dmin = fp16_round(max_of(mneg, 16) / 15.0f);
    int L[256];
    for (int g = 0; g < 16; g++) {
        const int s = d > 0 ? clampi(nearest(scale[g] / d), 0, 15) : 0;
        const int m = dmin > 0 ? clampi(nearest(mneg[g] / dmin), 0, 15) : 0;
        y[g] = (uint8_t)(s | (m << 4));
        requant(x + 16 * g, 16, d * (float)s, dmin * (float)m, 0, 3, L + 16 * g);
    }
    uint8_t *qs = y + 16;
    for (int i = 0; i < 64; i++)
        qs[i] = 0;
    for (int h = 0; h < 2; h++) /* weight 128h + 32k + l: bits 2k of qs[32h + l] */
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                qs[32 * h + l] |= (uint8_t)(L[128 * h + 32 * k + l] << (2 * k));
    wr16(y + 80, kvv_fp32_to_fp16(d));
    wr16(y + 82, kvv_fp32_to_fp16(dmin));
}

/* ---------------------------------------------------------------- IQ4_NL */

/* ggml's kvalues_iq4nl (dequant_k.c has the same table). */
static const int8_t IQ4NL[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

static int nearest_level(float v)
{
    int best = 0;
    float bd = absf(v - (float)IQ4NL[0]);
    for (int k = 1; k < 16; k++) {
        const float dk = absf(v - (float)IQ4NL[k]);
        if (dk < bd) {
            bd = dk;
            best = k;
        }
    }
    return best;
}

/* 32 weights: the largest |x| maps to -127, then one least-squares round. */
static void q_iq4_nl(const float *x, uint8_t *y)
{
    float d = signed_max(x, 32) / -127.0f;
    int L[32];
    for (int it = 0; it < 2; it++) {
        for (int i = 0; i < 32; i++)
            L[i] = d != 0.0f ? nearest_level(x[i] / d) : 8;
        if (it == 1 || d == 0.0f)
            break;
        double sxv = 0, svv = 0;
        for (int i = 0; i < 32; i++) {
            sxv += (double)x[i] * IQ4NL[L[i]];
            svv += (double)IQ4NL[L[i]] * IQ4NL[L[i]];
        }
        if (svv > 0 && sxv != 0)
            d = (float)(sxv / svv);
    }
    d = fp16_round(d);
    for (int i = 0; i < 32; i++)
        L[i] = d != 0.0f ? nearest_level(x[i] / d) : 8;
    wr16(y, kvv_fp32_to_fp16(d));
    for (int j = 0; j < 16; j++)
        y[2 + j] = (uint8_t)(L[j] | (L[j + 16] << 4));
}

bool kvv_quantize_blocks_k(kvv_type t, const float *x, uint8_t *y, int64_t nb)
{
    const kvv_type_traits *tt = kvv_type_traits_of((uint32_t)t);
    for (int64_t i = 0; i < nb; i++, x += tt->blck_size, y += tt->type_size) {
        switch (t) {
        case KVV_TYPE_Q2_K:   q_q2_k(x, y); break;
        case KVV_TYPE_Q3_K:   q_q3_k(x, y); break;
        case KVV_TYPE_Q4_K:   q_q45_k(false, x, y); break;
        case KVV_TYPE_Q5_K:   q_q45_k(true, x, y); break;
        case KVV_TYPE_Q6_K:   q_q6_k(x, y); break;
        case KVV_TYPE_IQ4_NL: q_iq4_nl(x, y); break;
        default:              return false;
        }
    }
    return true;
}
