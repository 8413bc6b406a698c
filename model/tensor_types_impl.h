/*
 * tensor_types_impl.h — private to the tensor-type files of model/
 * (tensor_types.c, dequant.c, dequant_k.c, quant_groups.c, quantize.c):
 * little-endian field access, float bits, and the two block decoders that
 * dequant.c's switch calls.
 */
#ifndef KVV_TENSOR_TYPES_IMPL_H
#define KVV_TENSOR_TYPES_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "model/tensor_types.h"

#define QK 32    /* elements per block of the *_0 / *_1 / IQ4_NL / MXFP4 types */
#define QK_K 256 /* elements per super-block of the K types */

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

static inline void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)((v >> (8 * i)) & 0xff);
}

/* Dequantize nb blocks of t (Q8_K, IQ4_NL, IQ4_XS, MXFP4, TQ1_0, TQ2_0)
 * from x into y (dequant_k.c). Returns false if t is not one of those. */
bool kvv_dequantize_blocks_ext(kvv_type t, const uint8_t *x, float *y, int64_t nb);

/* Encode nb blocks of t (Q2_K..Q6_K, IQ4_NL) from x into y
 * (quantize_k.c). Returns false for other types. */
bool kvv_quantize_blocks_k(kvv_type t, const float *x, uint8_t *y, int64_t nb);

/* nb blocks of a kvv_quant_groups_type through kvv_quant_groups
 * (quant_groups.c): y = s*q - m, exactly ggml's values. */
void kvv_dequantize_groups(kvv_type t, const uint8_t *x, float *restrict y, int64_t nb);

#endif
