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
