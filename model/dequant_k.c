/*
 * dequant_k.c — dequantizers of the K-quants (Q2_K..Q6_K, Q8_K), the
 * non-linear IQ4_NL / IQ4_XS, MXFP4, TQ1_0 and TQ2_0, exactly as ggml's
 * dequantize_row_* (fp32, same order of operations; -ffp-contract=off).
 * Block layouts as OFFSET SIZE TYPE tables above each function; multi-byte
 * fields read little-endian byte by byte. See docs/tensor-types.md.
 */
#include "model/tensor_types_impl.h"

/* 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes of a
 * Q4_K / Q5_K block (ggml's get_scale_min_k4): sub-blocks 0..3 use the low
 * 6 bits of q[j] / q[j+4]; 4..7 take 4 bits from q[j+4] and their top 2
 * bits from the spare top bits of q[j-4] / q[j]. */
static void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* block_q4_K (144 bytes, 256 weights in 8 sub-blocks of 32):
 *   0    2    fp16    d     super-block scale of the scales
 *   2    2    fp16    dmin  super-block scale of the mins
 *   4    12   u8[12]  scales: 8 scales + 8 mins, 6 bits each
 *   16   128  u8[128] qs: for each 64 weights, 32 bytes; low nibbles are
 *                     sub-block 2k, high nibbles sub-block 2k+1
 * y = (d*sc) * q - (dmin*m) */
static void deq_q4_k(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 144) {
        const float d = kvv_fp16_to_fp32(rd16(x));
        const float min = kvv_fp16_to_fp32(rd16(x + 2));
        const uint8_t *scales = x + 4;
        const uint8_t *q = x + 16;
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < QK_K; j += 64) {
            scale_min_k4(is + 0, scales, &sc, &m);
            const float d1 = d * (float)sc;
            const float m1 = min * (float)m;
            scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * (float)sc;
            const float m2 = min * (float)m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)(q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

/* block_q5_K (176 bytes):
 *   0    2    fp16    d
 *   2    2    fp16    dmin
 *   4    12   u8[12]  scales (as Q4_K)
 *   16   32   u8[32]  qh: bit 2k of qh[l] is the 5th bit of weight l of
 *                     sub-block 2k, bit 2k+1 that of sub-block 2k+1
 *   48   128  u8[128] qs: low 4 bits (as Q4_K)
 * y = (d*sc) * q - (dmin*m) */
static void deq_q5_k(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 176) {
        const float d = kvv_fp16_to_fp32(rd16(x));
        const float min = kvv_fp16_to_fp32(rd16(x + 2));
        const uint8_t *scales = x + 4;
        const uint8_t *qh = x + 16;
        const uint8_t *ql = x + 48;
        int is = 0;
        uint8_t sc, m;
        unsigned u1 = 1, u2 = 2;
        for (int j = 0; j < QK_K; j += 64) {
            scale_min_k4(is + 0, scales, &sc, &m);
            const float d1 = d * (float)sc;
            const float m1 = min * (float)m;
            scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * (float)sc;
            const float m2 = min * (float)m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 <<= 2;
            u2 <<= 2;
        }
    }
}

/* block_q6_K (210 bytes, 16 sub-blocks of 16):
 *   0    128  u8[128] ql: low 4 bits
 *   128  64   u8[64]  qh: high 2 bits
 *   192  16   i8[16]  scales
 *   208  2    fp16    d
 * For each half (128 weights; ql += 64, qh += 32, sc += 8 per half) and
 * l in 0..31:  q(l)    = (ql[l]    & 0xF) | ((qh[l] >> 0 & 3) << 4)
 *              q(l+32) = (ql[l+32] & 0xF) | ((qh[l] >> 2 & 3) << 4)
 *              q(l+64) = (ql[l]    >> 4)  | ((qh[l] >> 4 & 3) << 4)
 *              q(l+96) = (ql[l+32] >> 4)  | ((qh[l] >> 6 & 3) << 4)
 * y = (d * sc[l/16 + 2k]) * (q - 32) */
static void deq_q6_k(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 210) {
        const float d = kvv_fp16_to_fp32(rd16(x + 208));
        const uint8_t *ql = x;
        const uint8_t *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        for (int n = 0; n < QK_K; n += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * (float)sc[is + 0] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

/* block_q2_K (84 bytes, 16 sub-blocks of 16):
 *   0    16   u8[16]  scales: low nibble scale, high nibble min
 *   16   64   u8[64]  qs: 2-bit quants; weight e of half h = e/128 is
 *                     bits 2s..2s+1 of qs[32h + e%32], s = (e%128)/32
 *   80   2    fp16    d
 *   82   2    fp16    dmin
 * y = (d * (sc & 15)) * q - (dmin * (sc >> 4)), sc = scales[e/16] */
static void deq_q2_k(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 84) {
        const float d = kvv_fp16_to_fp32(rd16(x + 80));
        const float min = kvv_fp16_to_fp32(rd16(x + 82));
        const uint8_t *scales = x;
        const uint8_t *q = x + 16;
        int is = 0;
        for (int n = 0; n < QK_K; n += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = scales[is++];
                    const float dl = d * (float)(sc & 0xF);
                    const float ml = min * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
                }
            }
            q += 32;
        }
    }
}

/* block_q3_K (110 bytes, 16 sub-blocks of 16):
 *   0    32   u8[32]  hmask: bit e/32 of hmask[e%32] set = high bit 1
 *   32   64   u8[64]  qs: low 2 bits, packed as Q2_K
 *   96   12   u8[12]  scales: 16 six-bit values; low 4 bits of scale j in
 *                     nibble j/8 of byte j%8, high 2 bits in bits 2(j/4)
 *                     of byte 8 + j%4
 *   108  2    fp16    d
 * y = (d * (sc - 32)) * (q - (high bit ? 0 : 4)) */
static void deq_q3_k(const uint8_t *x, float *y, int64_t nb)
{
    for (int64_t i = 0; i < nb; i++, x += 110) {
        const float d_all = kvv_fp16_to_fp32(rd16(x + 108));
        const uint8_t *hm = x;
        const uint8_t *q = x + 32;
        const uint8_t *s = x + 96;
        int sc[16];
        for (int j = 0; j < 16; j++) {
            const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
            const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
            sc[j] = (lo | (hi << 4)) - 32;
        }
        int is = 0;
        unsigned m = 1;
        for (int n = 0; n < QK_K; n += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * (float)sc[is++];
                    for (int l = 16 * half; l < 16 * half + 16; l++) {
                        const int qv = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
                        *y++ = dl * (float)qv;
                    }
                }
                m <<= 1;
            }
            q += 32;
        }
    }
}

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
    case KVV_TYPE_Q2_K:   deq_q2_k(x, y, nb); return true;
    case KVV_TYPE_Q3_K:   deq_q3_k(x, y, nb); return true;
    case KVV_TYPE_Q4_K:   deq_q4_k(x, y, nb); return true;
    case KVV_TYPE_Q5_K:   deq_q5_k(x, y, nb); return true;
    case KVV_TYPE_Q6_K:   deq_q6_k(x, y, nb); return true;
    case KVV_TYPE_Q8_K:   deq_q8_k(x, y, nb); return true;
    case KVV_TYPE_IQ4_NL: deq_iq4_nl(x, y, nb); return true;
    case KVV_TYPE_IQ4_XS: deq_iq4_xs(x, y, nb); return true;
    case KVV_TYPE_MXFP4:  deq_mxfp4(x, y, nb); return true;
    case KVV_TYPE_TQ1_0:  deq_tq1_0(x, y, nb); return true;
    case KVV_TYPE_TQ2_0:  deq_tq2_0(x, y, nb); return true;
    default:              return false;
    }
}
