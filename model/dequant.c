/*
 * dequant.c — kvv_dequantize_row: the one switch over every type kvverify
 * decodes, and the decoders of the plain (F32, F16, BF16) and 32-element
 * block types (Q4_0, Q5_0, Q8_0). The grouped linear types (Q4_1, Q5_1,
 * Q2_K..Q6_K) are decoded through quant_groups.c, the other super-block and
 * non-linear types by dequant_k.c. Layouts and formulas: tensor_types.c's
 * header comment and docs/tensor-types.md.
 */
#include "model/tensor_types.h"
#include "model/tensor_types_impl.h"

#include <stdint.h>

/* The dequantizers below are written so that GCC and clang vectorize them
 * at -O2 (engines dequantize rows as they use them, so this is on the
 * reference's decode path): source and destination are restrict, and long
 * rows run in chunks of a fixed length, which the compilers' cheap cost
 * model wants. Every operation is exact or a single fp32 rounding, so
 * vector and scalar code give the same values. */
#define CHUNK 32

/* fp16 -> fp32 without branches, exactly kvv_fp16_to_fp32 (tested on all
 * 65536 halves): the half's exponent and mantissa shifted into fp32
 * position and multiplied by 2^112, which is exact (it moves the exponent
 * bias from 15 to 127; subnormal halves come out normal). For infinity and
 * NaN (exponent 31) the product keeps the mantissa bits; the fp32 exponent
 * is then set to all ones, and a NaN quieted. */
static inline float fp16_to_fp32_flat(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t em = h & 0x7fffu;
    const uint32_t scaled = f32_bits(bits_f32(em << 13) * 0x1p112f);
    const uint32_t inf_nan = 0u - (uint32_t)(em >= 0x7c00u); /* all ones or zero */
    const uint32_t nan = 0u - (uint32_t)(em > 0x7c00u);
    return bits_f32(sign | scaled | (inf_nan & 0x7f800000u) | (nan & 0x400000u));
}

/* n (<= CHUNK) little-endian 16-bit fields from x into h, in host order:
 * one block copy on a little-endian host (which the vectorizer can follow,
 * where it cannot follow rd16's byte assembly). */
static void rd16_chunk(const uint8_t *restrict x, uint16_t *restrict h, int n)
{
    const uint16_t one = 1;
    uint8_t low;
    memcpy(&low, &one, 1);
    if (low == 1) {
        memcpy(h, x, 2 * (size_t)n);
    } else {
        for (int j = 0; j < n; j++)
            h[j] = rd16(x + 2 * j);
    }
}

/* F32 / F16 / BF16: little-endian elements. */
static void deq_f32(const uint8_t *restrict x, float *restrict y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = bits_f32(rd32(x + 4 * i));
}

static void deq_f16(const uint8_t *restrict x, float *restrict y, int64_t n)
{
    uint16_t h[CHUNK];
    for (int64_t i = 0; i < n; i += CHUNK) {
        const int c = n - i < CHUNK ? (int)(n - i) : CHUNK;
        rd16_chunk(x + 2 * i, h, c);
        if (c == CHUNK)
            for (int j = 0; j < CHUNK; j++)
                y[i + j] = fp16_to_fp32_flat(h[j]);
        else
            for (int j = 0; j < c; j++)
                y[i + j] = fp16_to_fp32_flat(h[j]);
    }
}

static void deq_bf16(const uint8_t *restrict x, float *restrict y, int64_t n)
{
    uint16_t h[CHUNK];
    for (int64_t i = 0; i < n; i += CHUNK) {
        const int c = n - i < CHUNK ? (int)(n - i) : CHUNK;
        rd16_chunk(x + 2 * i, h, c);
        if (c == CHUNK)
            for (int j = 0; j < CHUNK; j++)
                y[i + j] = kvv_bf16_to_fp32(h[j]);
        else
            for (int j = 0; j < c; j++)
                y[i + j] = kvv_bf16_to_fp32(h[j]);
    }
}

/* block_q4_0 (18 bytes, 32 weights):
 *   OFFSET SIZE TYPE    DESCRIPTION
 *   0      2    fp16    d
 *   2      16   u8[16]  qs: weight j in low nibble of qs[j], j+16 in high
 * y = (q - 8) * d */
static void deq_q4_0(const uint8_t *restrict x, float *restrict y, int64_t nb)
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
static void deq_q5_0(const uint8_t *restrict x, float *restrict y, int64_t nb)
{
    /* bit j of qh as a mask (a table, not a shift by j: vectorizable) */
    static const uint32_t BIT[QK] = {
        1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,
        1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15,
        1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
        1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31,
    };
    for (int64_t i = 0; i < nb; i++, x += 22, y += QK) {
        const float d = kvv_fp16_to_fp32(rd16(x));
        const uint32_t qh = rd32(x + 2);
        const uint8_t *qs = x + 6;
        for (int j = 0; j < QK / 2; j++) {
            const uint8_t xh0 = (qh & BIT[j]) ? 0x10 : 0;
            const uint8_t xh1 = (qh & BIT[j + QK / 2]) ? 0x10 : 0;
            const int32_t x0 = ((qs[j] & 0x0F) | xh0) - 16;
            const int32_t x1 = ((qs[j] >> 4) | xh1) - 16;
            y[j] = (float)x0 * d;
            y[j + QK / 2] = (float)x1 * d;
        }
    }
}


/* block_q8_0 (34 bytes): 0 fp16 d; 2 i8[32] qs.  y = q * d */
static void deq_q8_0(const uint8_t *restrict x, float *restrict y, int64_t nb)
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
    case KVV_TYPE_Q5_0: deq_q5_0(x, dst, nb); break;
    case KVV_TYPE_Q8_0: deq_q8_0(x, dst, nb); break;
    case KVV_TYPE_Q4_1:
    case KVV_TYPE_Q5_1:
    case KVV_TYPE_Q2_K:
    case KVV_TYPE_Q3_K:
    case KVV_TYPE_Q4_K:
    case KVV_TYPE_Q5_K:
    case KVV_TYPE_Q6_K: kvv_dequantize_groups(t, x, dst, nb); break;
    default: return kvv_dequantize_blocks_ext(t, x, dst, nb);
    }
    return true;
}
