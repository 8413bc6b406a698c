/*
 * quantize.c — kvv_quantize_row (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1) exactly as ggml's quantize_row_*_ref (the K types and IQ4_NL:
 * quantize_k.c), and kvv_widen_to_q8_0, the
 * lossless re-encoding of Q4_0 / Q5_0 blocks as Q8_0. Layouts as in
 * dequant.c; rounding and |x| on the bits (no libm).
 */
#include "model/tensor_types.h"
#include "model/tensor_types_impl.h"

#include <stdint.h>

/* |x| by clearing the sign bit (fabsf). */
static float abs_f32(float x)
{
    return bits_f32(f32_bits(x) & 0x7fffffffu);
}

static bool is_nan_f32(float x)
{
    return (f32_bits(x) & 0x7fffffffu) > 0x7f800000u;
}

/* roundf: nearest integer, halfway cases away from zero. */
static float round_half_away(float x)
{
    float a = abs_f32(x);
    if (!(a < 8388608.0f)) /* >= 2^23 is already an integer; NaN passes through */
        return x;
    float t = (float)(int32_t)a;   /* trunc(|x|), exact */
    if (a - t >= 0.5f)             /* a - t is exact: t holds a's leading bits */
        t += 1.0f;
    return (f32_bits(x) & 0x80000000u) ? -t : t;
}

/* C's float -> integer conversion (truncation) where it is defined; values
 * outside [lo, hi] and NaN (undefined behaviour in C) saturate / give 0. */
static int trunc_sat(float x, int lo, int hi)
{
    if (is_nan_f32(x))
        return 0;
    if (x <= (float)lo)
        return lo;
    if (x >= (float)hi)
        return hi;
    return (int)x;
}

/* quantize_row_q8_0_ref: amax = max |x|; d = amax/127; id = 1/d (0 if
 * d == 0); stored d is fp16(d) but the quants use the fp32 id;
 * q = roundf(x*id). */
static void q_q8_0(const float *x, uint8_t *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK, y += 34) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) {
            const float v = abs_f32(x[j]);
            amax = amax > v ? amax : v; /* ggml's MAX(amax, fabsf(v)) */
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        wr16(y, kvv_fp32_to_fp16(d));
        for (int j = 0; j < QK; j++) {
            const int q = trunc_sat(round_half_away(x[j] * id), -128, 127);
            y[2 + j] = (uint8_t)(int8_t)q;
        }
    }
}

/* quantize_row_q4_0_ref: max = the element of largest |x| (first one on
 * ties), d = max / -8, id = 1/d; q = min(15, (int8_t)(x*id + 8.5)). */
static void q_q4_0(const float *x, uint8_t *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK, y += 18) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++) {
            const float v = x[j];
            if (amax < abs_f32(v)) {
                amax = abs_f32(v);
                max = v;
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        wr16(y, kvv_fp32_to_fp16(d));
        for (int j = 0; j < QK / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[QK / 2 + j] * id;
            int xi0 = trunc_sat(x0 + 8.5f, -128, 127);
            int xi1 = trunc_sat(x1 + 8.5f, -128, 127);
            xi0 = xi0 < 15 ? xi0 : 15;
            xi1 = xi1 < 15 ? xi1 : 15;
            y[2 + j] = (uint8_t)(((uint8_t)xi0 & 0x0F) | ((uint8_t)xi1 << 4));
        }
    }
}

/* min and max of a block as ggml's *_1 quantizers find them (NaN skipped
 * by the comparisons). */
static void block_min_max(const float *x, int n, float *min, float *max)
{
    float lo = 3.402823466e38f, hi = -3.402823466e38f;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo)
            lo = x[j];
        if (x[j] > hi)
            hi = x[j];
    }
    *min = lo;
    *max = hi;
}

/* quantize_row_q4_1_ref: d = (max - min)/15, id = 1/d; stored fp16(d),
 * fp16(min); q = min(15, (int8_t)((x - min)*id + 0.5)). */
static void q_q4_1(const float *x, uint8_t *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK, y += 20) {
        float min, max;
        block_min_max(x, QK, &min, &max);
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        wr16(y, kvv_fp32_to_fp16(d));
        wr16(y + 2, kvv_fp32_to_fp16(min));
        for (int j = 0; j < QK / 2; j++) {
            int xi0 = trunc_sat((x[j] - min) * id + 0.5f, -128, 127);
            int xi1 = trunc_sat((x[QK / 2 + j] - min) * id + 0.5f, -128, 127);
            xi0 = xi0 < 15 ? xi0 : 15;
            xi1 = xi1 < 15 ? xi1 : 15;
            y[4 + j] = (uint8_t)(((uint8_t)xi0 & 0x0F) | ((uint8_t)xi1 << 4));
        }
    }
}

/* Store 32 five-bit quants as Q5_0/Q5_1's qh (bit j = 5th bit of weight j)
 * and qs (low nibbles as Q4_0). */
static void put_q5(uint8_t *qh4, uint8_t *qs, const int *q)
{
    uint32_t qh = 0;
    for (int j = 0; j < QK / 2; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0F) | ((q[j + QK / 2] & 0x0F) << 4));
        qh |= (((uint32_t)q[j] & 0x10u) >> 4) << j;
        qh |= (((uint32_t)q[j + QK / 2] & 0x10u) >> 4) << (j + QK / 2);
    }
    wr32(qh4, qh);
}

/* quantize_row_q5_0_ref: as Q4_0 with d = max / -16 and
 * q = min(31, (int8_t)(x*id + 16.5)). */
static void q_q5_0(const float *x, uint8_t *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK, y += 22) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++) {
            if (amax < abs_f32(x[j])) {
                amax = abs_f32(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        wr16(y, kvv_fp32_to_fp16(d));
        int q[QK];
        for (int j = 0; j < QK; j++) {
            const int v = trunc_sat(x[j] * id + 16.5f, -128, 127);
            q[j] = (uint8_t)(v < 31 ? v : 31);
        }
        put_q5(y + 2, y + 6, q);
    }
}

/* quantize_row_q5_1_ref: d = (max - min)/31, stored fp16(d), fp16(min);
 * q = (uint8_t)((x - min)*id + 0.5) (no clamp in ggml; at most 31). */
static void q_q5_1(const float *x, uint8_t *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += QK, y += 24) {
        float min, max;
        block_min_max(x, QK, &min, &max);
        const float d = (max - min) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        wr16(y, kvv_fp32_to_fp16(d));
        wr16(y + 2, kvv_fp32_to_fp16(min));
        int q[QK];
        for (int j = 0; j < QK; j++)
            q[j] = trunc_sat((x[j] - min) * id + 0.5f, 0, 255);
        put_q5(y + 4, y + 8, q);
    }
}

bool kvv_widen_to_q8_0(kvv_type t, const void *src, void *dst, int64_t n)
{
    if ((t != KVV_TYPE_Q4_0 && t != KVV_TYPE_Q5_0) || n % QK != 0)
        return false;
    const uint8_t *x = src;
    uint8_t *y = dst;
    const size_t in = t == KVV_TYPE_Q4_0 ? 18 : 22;
    for (int64_t b = 0; b < n / QK; b++, x += in, y += 34) {
        y[0] = x[0]; /* fp16 d, unchanged */
        y[1] = x[1];
        const uint32_t qh = t == KVV_TYPE_Q5_0 ? rd32(x + 2) : 0;
        const uint8_t *qs = x + (t == KVV_TYPE_Q5_0 ? 6 : 2);
        const int bias = t == KVV_TYPE_Q5_0 ? 16 : 8;
        for (int j = 0; j < QK / 2; j++) {
            const int xh0 = (int)(((qh >> j) << 4) & 0x10);
            const int xh1 = (int)((qh >> (j + 12)) & 0x10);
            y[2 + j] = (uint8_t)(int8_t)(((qs[j] & 0x0F) | xh0) - bias);
            y[2 + j + QK / 2] = (uint8_t)(int8_t)(((qs[j] >> 4) | xh1) - bias);
        }
    }
    return true;
}

bool kvv_quantize_row(kvv_type t, const float *src, void *dst, int64_t n)
{
    const kvv_type_traits *tt = kvv_type_traits_of((uint32_t)t);
    if (tt == NULL || !tt->can_quantize || n < 0 || n % tt->blck_size != 0)
        return false;
    uint8_t *y = dst;
    const int64_t nb = n / tt->blck_size;
    switch (t) {
    case KVV_TYPE_F32:
        for (int64_t i = 0; i < n; i++)
            wr32(y + 4 * i, f32_bits(src[i]));
        break;
    case KVV_TYPE_F16:
        for (int64_t i = 0; i < n; i++)
            wr16(y + 2 * i, kvv_fp32_to_fp16(src[i]));
        break;
    case KVV_TYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            wr16(y + 2 * i, kvv_fp32_to_bf16(src[i]));
        break;
    case KVV_TYPE_Q8_0: q_q8_0(src, y, nb); break;
    case KVV_TYPE_Q4_0: q_q4_0(src, y, nb); break;
    case KVV_TYPE_Q4_1: q_q4_1(src, y, nb); break;
    case KVV_TYPE_Q5_0: q_q5_0(src, y, nb); break;
    case KVV_TYPE_Q5_1: q_q5_1(src, y, nb); break;
    default: return kvv_quantize_blocks_k(t, src, y, nb); /* Q2_K..Q6_K, IQ4_NL */
    }
    return true;
}
