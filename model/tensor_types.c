/*
 * tensor_types.c — GGML type traits, fp16/bf16 conversions, the
 * dequantizers of the plain and 32-element block types (the super-block
 * types are in dequant_k.c), and the quantizers.
 *
 * Every block layout below is byte-for-byte that of llama.cpp's
 * ggml-common.h, written here as OFFSET SIZE tables; every formula is that of
 * ggml's dequantize_row_* / quantize_row_*_ref, evaluated in fp32 in the same
 * order (the build has -ffp-contract=off, so nothing is fused). Multi-byte
 * fields are read as little-endian bytes, so the code does not depend on the
 * host's byte order. No libm: rounding and |x| are done on the bits.
 */
#include "model/tensor_types.h"
#include "model/tensor_types_impl.h"

#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------ trait table */

/* Indexed by ggml type id. Retired ids (4, 5: Q4_2/Q4_3; 31-33: Q4_0_4_4,
 * Q4_0_4_8, Q4_0_8_8; 36-38: IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8) have no
 * name and are unknown. Sizes as ggml.c's type_traits. */
static const kvv_type_traits TRAITS[KVV_TYPE_COUNT] = {
    [KVV_TYPE_F32]     = { "F32",     1,    4,   true,  true  },
    [KVV_TYPE_F16]     = { "F16",     1,    2,   true,  true  },
    [KVV_TYPE_Q4_0]    = { "Q4_0",    QK,   18,  true,  true  },
    [KVV_TYPE_Q4_1]    = { "Q4_1",    QK,   20,  true,  true  },
    [KVV_TYPE_Q5_0]    = { "Q5_0",    QK,   22,  true,  true  },
    [KVV_TYPE_Q5_1]    = { "Q5_1",    QK,   24,  true,  true  },
    [KVV_TYPE_Q8_0]    = { "Q8_0",    QK,   34,  true,  true  },
    [KVV_TYPE_Q8_1]    = { "Q8_1",    QK,   36,  false, false },
    [KVV_TYPE_Q2_K]    = { "Q2_K",    QK_K, 84,  true,  false },
    [KVV_TYPE_Q3_K]    = { "Q3_K",    QK_K, 110, true,  false },
    [KVV_TYPE_Q4_K]    = { "Q4_K",    QK_K, 144, true,  false },
    [KVV_TYPE_Q5_K]    = { "Q5_K",    QK_K, 176, true,  false },
    [KVV_TYPE_Q6_K]    = { "Q6_K",    QK_K, 210, true,  false },
    [KVV_TYPE_Q8_K]    = { "Q8_K",    QK_K, 292, true,  false },
    [KVV_TYPE_IQ2_XXS] = { "IQ2_XXS", QK_K, 66,  false, false },
    [KVV_TYPE_IQ2_XS]  = { "IQ2_XS",  QK_K, 74,  false, false },
    [KVV_TYPE_IQ3_XXS] = { "IQ3_XXS", QK_K, 98,  false, false },
    [KVV_TYPE_IQ1_S]   = { "IQ1_S",   QK_K, 50,  false, false },
    [KVV_TYPE_IQ4_NL]  = { "IQ4_NL",  QK,   18,  true,  false },
    [KVV_TYPE_IQ3_S]   = { "IQ3_S",   QK_K, 110, false, false },
    [KVV_TYPE_IQ2_S]   = { "IQ2_S",   QK_K, 82,  false, false },
    [KVV_TYPE_IQ4_XS]  = { "IQ4_XS",  QK_K, 136, true,  false },
    [KVV_TYPE_I8]      = { "I8",      1,    1,   false, false },
    [KVV_TYPE_I16]     = { "I16",     1,    2,   false, false },
    [KVV_TYPE_I32]     = { "I32",     1,    4,   false, false },
    [KVV_TYPE_I64]     = { "I64",     1,    8,   false, false },
    [KVV_TYPE_F64]     = { "F64",     1,    8,   false, false },
    [KVV_TYPE_IQ1_M]   = { "IQ1_M",   QK_K, 56,  false, false },
    [KVV_TYPE_BF16]    = { "BF16",    1,    2,   true,  true  },
    [KVV_TYPE_TQ1_0]   = { "TQ1_0",   QK_K, 54,  true,  false },
    [KVV_TYPE_TQ2_0]   = { "TQ2_0",   QK_K, 66,  true,  false },
    [KVV_TYPE_MXFP4]   = { "MXFP4",   QK,   17,  true,  false },
};

const kvv_type_traits *kvv_type_traits_of(uint32_t t)
{
    if (t >= KVV_TYPE_COUNT || TRAITS[t].name == NULL)
        return NULL;
    return &TRAITS[t];
}

const char *kvv_type_name(uint32_t t)
{
    const kvv_type_traits *tt = kvv_type_traits_of(t);
    return tt ? tt->name : "unknown";
}

static char ascii_upper(char c)
{
    return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
}

bool kvv_type_from_name(const char *name, kvv_type *out)
{
    if (name == NULL)
        return false;
    for (uint32_t t = 0; t < KVV_TYPE_COUNT; t++) {
        const char *n = TRAITS[t].name;
        if (n == NULL)
            continue;
        size_t i = 0;
        while (n[i] != '\0' && ascii_upper(name[i]) == n[i])
            i++;
        if (n[i] == '\0' && name[i] == '\0') {
            if (out)
                *out = (kvv_type)t;
            return true;
        }
    }
    return false;
}

size_t kvv_type_row_size(uint32_t t, int64_t n)
{
    const kvv_type_traits *tt = kvv_type_traits_of(t);
    if (tt == NULL || n < 0 || n % tt->blck_size != 0)
        return 0;
    uint64_t blocks = (uint64_t)(n / tt->blck_size);
    if (blocks > SIZE_MAX / tt->type_size)
        return 0;
    return (size_t)blocks * tt->type_size;
}

/* ------------------------------------------------------ bits and scalars */

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

float kvv_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {                 /* inf, or NaN: payload kept, quieted */
        u = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u);
    } else if (exp == 0) {
        if (mant == 0) {
            u = sign;                  /* +-0 */
        } else {                       /* subnormal: mant * 2^-24, normalise */
            uint32_t e = 113;          /* 127 - 15 + 1 */
            while (!(mant & 0x400u)) {
                mant <<= 1;
                e--;
            }
            u = sign | (e << 23) | ((mant & 0x3ffu) << 13);
        }
    } else {
        u = sign | ((exp + 112) << 23) | (mant << 13);
    }
    return bits_f32(u);
}

uint16_t kvv_fp32_to_fp16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)               /* NaN: quiet, top payload bits kept */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u)              /* >= 65520 rounds to inf (tie: even) */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {             /* below 2^-14: fp16 subnormal or 0 */
        uint32_t e = a >> 23;
        if (e < 102)                   /* < 2^-25: rounds to 0 */
            return sign;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;      /* result = m * 2^(e-126), 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;                       /* may carry into the smallest normal */
        return (uint16_t)(sign | q);
    }
    /* normal: rebias, round the 13 dropped bits to nearest even */
    uint32_t r = (a - 0x38000000u) + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

float kvv_bf16_to_fp32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t kvv_fp32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN: force quiet */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* ---------------------------------------------------------- dequantizers */

/* F32 / F16 / BF16: little-endian elements. */
static void deq_f32(const uint8_t *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = bits_f32(rd32(x + 4 * i));
}

static void deq_f16(const uint8_t *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = kvv_fp16_to_fp32(rd16(x + 2 * i));
}

static void deq_bf16(const uint8_t *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = kvv_bf16_to_fp32(rd16(x + 2 * i));
}

/* block_q4_0 (18 bytes, 32 weights):
 *   OFFSET SIZE TYPE    DESCRIPTION
 *   0      2    fp16    d
 *   2      16   u8[16]  qs: weight j in low nibble of qs[j], j+16 in high
 * y = (q - 8) * d */
static void deq_q4_0(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 18, y += QK) {
        const float d = kvv_fp16_to_fp32(rd16(x));
        const uint8_t *qs = x + 2;
        for (int j = 0; j < QK / 2; j++) {
            const int x0 = (qs[j] & 0x0F) - 8;
            const int x1 = (qs[j] >> 4) - 8;
            y[j] = (float)x0 * d;
            y[j + QK / 2] = (float)x1 * d;
        }
    }
}


/* block_q5_0 (22 bytes): 0 fp16 d; 2 u8[4] qh (bit j = 5th bit of weight j,
 * little-endian u32); 6 u8[16] qs.  y = (q - 16) * d */
static void deq_q5_0(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 22, y += QK) {
        const float d = kvv_fp16_to_fp32(rd16(x));
        const uint32_t qh = rd32(x + 2);
        const uint8_t *qs = x + 6;
        for (int j = 0; j < QK / 2; j++) {
            const uint8_t xh0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh1 = (uint8_t)((qh >> (j + 12)) & 0x10);
            const int32_t x0 = ((qs[j] & 0x0F) | xh0) - 16;
            const int32_t x1 = ((qs[j] >> 4) | xh1) - 16;
            y[j] = (float)x0 * d;
            y[j + QK / 2] = (float)x1 * d;
        }
    }
}


/* block_q8_0 (34 bytes): 0 fp16 d; 2 i8[32] qs.  y = q * d */
static void deq_q8_0(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 34, y += QK) {
        const float d = kvv_fp16_to_fp32(rd16(x));
        for (int j = 0; j < QK; j++)
            y[j] = (float)(int8_t)x[2 + j] * d;
    }
}

bool kvv_dequantize_row(kvv_type t, const void *src, float *dst, int64_t n)
{
    const kvv_type_traits *tt = kvv_type_traits_of((uint32_t)t);
    if (tt == NULL || !tt->can_dequantize || n < 0 || n % tt->blck_size != 0)
        return false;
    const uint8_t *x = src;
    const int64_t nb = n / tt->blck_size;
    switch (t) {
    case KVV_TYPE_F32:  deq_f32(x, dst, n); break;
    case KVV_TYPE_F16:  deq_f16(x, dst, n); break;
    case KVV_TYPE_BF16: deq_bf16(x, dst, n); break;
    case KVV_TYPE_Q4_0: deq_q4_0(x, dst, nb); break;
    case KVV_TYPE_Q4_1: kvv_dequantize_groups(t, x, dst, nb); break;
    case KVV_TYPE_Q5_0: deq_q5_0(x, dst, nb); break;
    case KVV_TYPE_Q5_1: kvv_dequantize_groups(t, x, dst, nb); break;
    case KVV_TYPE_Q8_0: deq_q8_0(x, dst, nb); break;
    default: return kvv_dequantize_blocks_ext(t, x, dst, nb);
    }
    return true;
}

/* ------------------------------------------------------------ quantizers */

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
    default: return false;
    }
    return true;
}
