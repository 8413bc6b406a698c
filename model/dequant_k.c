/*
 * dequant_k.c — dequantizers of the super-block and non-linear types that
 * are not scaled-integer groups: Q8_K, IQ4_NL / IQ4_XS, MXFP4, TQ1_0 and
 * TQ2_0, exactly as ggml's dequantize_row_* (fp32, same order of
 * operations; -ffp-contract=off). Block layouts as OFFSET SIZE TYPE tables;
 * multi-byte fields read little-endian byte by byte. See
 * docs/tensor-types.md. Q2_K..Q6_K are decoded through quant_groups.c (one
 * place for each layout); dequant.c's switch sends them there.
 */
#include "model/tensor_types_impl.h"

/* block_q8_K (292 bytes): 0 f32 d; 4 i8[256] qs; 260 i16[16] bsums
 * (sums of 16 quants, unused here).  y = d * q */
static void deq_q8_k(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 292, y += QK_K) {
        const float d = bits_f32(rd32(x));
        for (int j = 0; j < QK_K; j++)
            y[j] = d * (float)(int8_t)x[4 + j];
    }
}

/* Non-linear 4-bit levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl). */
static const int8_t KVALUES_IQ4NL[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* block_iq4_nl (18 bytes): 0 fp16 d; 2 u8[16] qs (nibbles as Q4_0).
 * y = d * kvalues[q] */
static void deq_iq4_nl(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 18, y += QK) {
        const float d = kvv_fp16_to_fp32(rd16(x));
        for (int j = 0; j < QK / 2; j++) {
            y[j] = d * (float)KVALUES_IQ4NL[x[2 + j] & 0xF];
            y[j + QK / 2] = d * (float)KVALUES_IQ4NL[x[2 + j] >> 4];
        }
    }
}

/* block_iq4_xs (136 bytes, 8 sub-blocks of 32):
 *   0    2    fp16    d
 *   2    2    u16     scales_h: bits 2b..2b+1 = high bits of scale b
 *   4    4    u8[4]   scales_l: nibble b%2 of byte b/2 = low bits of scale b
 *   8    128  u8[128] qs: 16 bytes per sub-block, nibbles as IQ4_NL
 * y = (d * (ls - 32)) * kvalues[q] */
static void deq_iq4_xs(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 136) {
        const float d = kvv_fp16_to_fp32(rd16(x));
        const uint16_t scales_h = rd16(x + 2);
        const uint8_t *scales_l = x + 4;
        const uint8_t *qs = x + 8;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                           (((scales_h >> (2 * ib)) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)KVALUES_IQ4NL[qs[j] & 0xF];
                y[j + 16] = dl * (float)KVALUES_IQ4NL[qs[j] >> 4];
            }
            y += 32;
            qs += 16;
        }
    }
}

/* E2M1 values doubled (ggml's kvalues_mxfp4); the scale is halved. */
static const int8_t KVALUES_MXFP4[16] = {
    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};

/* block_mxfp4 (17 bytes): 0 u8 e (E8M0 exponent); 1 u8[16] qs (nibbles
 * as Q4_0).  y = kvalues[q] * 2^(e - 128)  (ggml's E8M0_TO_FP32_HALF) */
static void deq_mxfp4(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 17, y += QK) {
        const uint32_t e = x[0];
        /* 2^(e-128): subnormal for e < 2 (0x00200000 << e), else exponent e-1 */
        const float d = bits_f32(e < 2 ? 0x00200000u << e : (e - 1) << 23);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = (float)KVALUES_MXFP4[x[1 + j] & 0xF] * d;
            y[j + QK / 2] = (float)KVALUES_MXFP4[x[1 + j] >> 4] * d;
        }
    }
}

/* block_tq2_0 (66 bytes): 0 u8[64] qs; 64 fp16 d. Weight 128h + 32l + m is
 * bits 2l..2l+1 of qs[32h + m].  y = (q - 1) * d */
static void deq_tq2_0(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 66) {
        const float d = kvv_fp16_to_fp32(rd16(x + 64));
        for (int j = 0; j < 64; j += 32)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++)
                    *y++ = (float)(((x[j + m] >> (2 * l)) & 3) - 1) * d;
    }
}

/* One base-3 digit of a TQ1_0 byte: the byte holds ceil(raw * 256 / 243)
 * for a 5-digit base-3 raw; multiplying by 3^n (mod 256) brings digit n
 * (0 = most significant) to the top, and (q * 3) >> 8 reads it. */
static float tq1_digit(uint8_t byte, int n, float d)
{
    static const uint8_t POW3[5] = {1, 3, 9, 27, 81};
    const uint8_t q = (uint8_t)(byte * POW3[n]);
    const int xi = ((uint16_t)q * 3) >> 8;
    return (float)(xi - 1) * d;
}

/* block_tq1_0 (54 bytes): 0 u8[48] qs (5 ternary digits per byte);
 * 48 u8[4] qh (4 digits per byte); 52 fp16 d. Order: weights 0..159 are
 * digit n of qs[m] at n*32 + m (m < 32); 160..239 digit n of qs[32 + m] at
 * 160 + n*16 + m (m < 16); 240..255 digit n of qh[j] at 240 + n*4 + j.
 * y = (digit - 1) * d */
static void deq_tq1_0(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 54) {
        const float d = kvv_fp16_to_fp32(rd16(x + 52));
        for (int n = 0; n < 5; n++)
            for (int m = 0; m < 32; m++)
                *y++ = tq1_digit(x[m], n, d);
        for (int n = 0; n < 5; n++)
            for (int m = 0; m < 16; m++)
                *y++ = tq1_digit(x[32 + m], n, d);
        for (int n = 0; n < 4; n++)
            for (int j = 0; j < 4; j++)
                *y++ = tq1_digit(x[48 + j], n, d);
    }
}

bool kvv_dequantize_blocks_ext(kvv_type t, const uint8_t *x, float *y, int64_t nb)
{
    switch (t) {
    case KVV_TYPE_Q8_K:   deq_q8_k(x, y, nb); return true;
    case KVV_TYPE_IQ4_NL: deq_iq4_nl(x, y, nb); return true;
    case KVV_TYPE_IQ4_XS: deq_iq4_xs(x, y, nb); return true;
    case KVV_TYPE_MXFP4:  deq_mxfp4(x, y, nb); return true;
    case KVV_TYPE_TQ1_0:  deq_tq1_0(x, y, nb); return true;
    case KVV_TYPE_TQ2_0:  deq_tq2_0(x, y, nb); return true;
    default:              return false;
    }
}
