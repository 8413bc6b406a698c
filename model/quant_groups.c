/*
 * quant_groups.c — the linear quantized types as scaled integers: every
 * weight of a Q4_1, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K or Q6_K row is
 *     y = s * q - m      (fp32, each operation rounded, in this order)
 * with an integer q (-32..31 or 0..31) and one (s, m) per group of 16
 * weights, s and m computed exactly as ggml's dequantize_row_* computes its
 * scale and offset. The decoder of these types (dequant.c) is built on
 * this, so the unpacking of each block layout lives here once; engines use
 * it to keep such weights as 8-bit integers instead of fp32.
 * Block layouts: the OFFSET SIZE TYPE tables below and docs/tensor-types.md.
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

/* block_q4_1 (20 bytes): 0 fp16 d; 2 fp16 m; 4 u8[16] qs.  y = q*d + m */
/* block_q5_1 (24 bytes): 0 fp16 d; 2 fp16 m; 4 u8[4] qh; 8 u8[16] qs.
 * y = q*d + m */
/* Q4_1 / Q5_1 (32 weights): y = q*d + m, i.e. s = d, m' = -m. */
static void g_q4_1_q5_1(bool five, const uint8_t *restrict x, float *s, float *m,
                        int8_t *restrict q)
{
    const float d = kvv_fp16_to_fp32(rd16(x));
    const float mn = kvv_fp16_to_fp32(rd16(x + 2));
    const uint32_t qh = five ? rd32(x + 4) : 0;
    const uint8_t *qs = x + (five ? 8 : 4);
    for (int j = 0; j < QK / 2; j++) {
        q[j] = (int8_t)((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10));
        q[j + QK / 2] = (int8_t)((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10));
    }
    s[0] = s[1] = d;
    m[0] = m[1] = -mn;
}

/* block_q4_K (144 bytes, 256 weights in 8 sub-blocks of 32):
 *   0    2    fp16    d     super-block scale of the scales
 *   2    2    fp16    dmin  super-block scale of the mins
 *   4    12   u8[12]  scales: 8 scales + 8 mins, 6 bits each
 *   16   128  u8[128] qs: for each 64 weights, 32 bytes; low nibbles are
 *                     sub-block 2k, high nibbles sub-block 2k+1
 * y = (d*sc) * q - (dmin*m) */
/* block_q5_K (176 bytes):
 *   0    2    fp16    d
 *   2    2    fp16    dmin
 *   4    12   u8[12]  scales (as Q4_K)
 *   16   32   u8[32]  qh: bit 2k of qh[l] is the 5th bit of weight l of
 *                     sub-block 2k, bit 2k+1 that of sub-block 2k+1
 *   48   128  u8[128] qs: low 4 bits (as Q4_K)
 * y = (d*sc) * q - (dmin*m) */
/* Q4_K / Q5_K (256 weights, 8 sub-blocks of 32): sc and mn of sub-block
 * g/2 for both its groups of 16; u = the 4 (5) bit level. */
static void k_q4_k_q5_k(bool five, const uint8_t *restrict x, kvv_kblock *restrict b)
{
    b->d = kvv_fp16_to_fp32(rd16(x));
    b->dmin = kvv_fp16_to_fp32(rd16(x + 2));
    b->off = 0;
    const uint8_t *scales = x + 4;
    const uint8_t *qh = x + 16;
    const uint8_t *ql = x + (five ? 48 : 16);
    for (int j = 0; j < 8; j++) { /* sub-block j: nibble j%2 of ql[32*(j/2) + l] */
        uint8_t sc, mn;
        scale_min_k4(j, scales, &sc, &mn);
        b->sc[2 * j] = b->sc[2 * j + 1] = sc;
        b->mn[2 * j] = b->mn[2 * j + 1] = mn;
        const uint8_t *q = ql + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        const int bit5 = five ? 16 : 0; /* Q5_K: bit j of qh[l] adds 16 */
        for (int l = 0; l < 32; l++) /* branch-free, so it vectorizes */
            b->u[32 * j + l] = (uint8_t)(((q[l] >> shift) & 0xF) | (((qh[l] >> j) & 1) * bit5));
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
/* Q6_K (256 weights, 16 sub-blocks of 16): u = the 6-bit level, off 32. */
static void k_q6_k(const uint8_t *restrict x, kvv_kblock *restrict b)
{
    b->d = kvv_fp16_to_fp32(rd16(x + 208));
    b->dmin = 0.0f;
    b->off = 32;
    const int8_t *sc = (const int8_t *)(x + 192);
    for (int g = 0; g < 16; g++) {
        b->sc[g] = sc[g];
        b->mn[g] = 0;
    }
    for (int h = 0; h < 2; h++) { /* halves of 128 */
        const uint8_t *ql = x + 64 * h, *qh = x + 128 + 32 * h;
        uint8_t *o = b->u + 128 * h;
        for (int l = 0; l < 32; l++) {
            o[l + 0] = (uint8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4));
            o[l + 32] = (uint8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
            o[l + 64] = (uint8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4));
            o[l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
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
static void k_q2_k(const uint8_t *restrict x, kvv_kblock *restrict b)
{
    b->d = kvv_fp16_to_fp32(rd16(x + 80));
    b->dmin = kvv_fp16_to_fp32(rd16(x + 82));
    b->off = 0;
    for (int g = 0; g < 16; g++) {
        b->sc[g] = x[g] & 0xF;
        b->mn[g] = x[g] >> 4;
    }
    /* weight e = 128h + 32k + l is bits 2k..2k+1 of qs[32h + l] */
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                b->u[128 * h + 32 * k + l] = (uint8_t)((x[16 + 32 * h + l] >> (2 * k)) & 3);
}

/* block_q3_K (110 bytes, 16 sub-blocks of 16):
 *   0    32   u8[32]  hmask: bit e/32 of hmask[e%32] set = high bit 1
 *   32   64   u8[64]  qs: low 2 bits, packed as Q2_K
 *   96   12   u8[12]  scales: 16 six-bit values; low 4 bits of scale j in
 *                     nibble j/8 of byte j%8, high 2 bits in bits 2(j/4)
 *                     of byte 8 + j%4
 *   108  2    fp16    d
 * y = (d * (sc - 32)) * (q - (high bit ? 0 : 4)) */
/* Q3_K: u = low 2 bits + 4 * high bit (0..7), off 4, sc - 32 signed. */
static void k_q3_k(const uint8_t *restrict x, kvv_kblock *restrict b)
{
    b->d = kvv_fp16_to_fp32(rd16(x + 108));
    b->dmin = 0.0f;
    b->off = 4;
    const uint8_t *hm = x, *qs = x + 32, *sb = x + 96;
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? (sb[j] & 0xF) : (sb[j - 8] >> 4);
        const int hi = (sb[8 + j % 4] >> (2 * (j / 4))) & 3;
        b->sc[j] = (int16_t)((lo | (hi << 4)) - 32);
        b->mn[j] = 0;
    }
    /* weight e = 128h + 32k + l: bits 2k..2k+1 of qs[32h + l], high bit
     * 4h + k of hm[l] */
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                const int hbit = (hm[l] >> (4 * h + k)) & 1;
                b->u[128 * h + 32 * k + l] =
                    (uint8_t)(((qs[32 * h + l] >> (2 * k)) & 3) | (hbit << 2));
            }
}

bool kvv_kblock_unpack(kvv_type t, const void *block, kvv_kblock *b)
{
    const uint8_t *x = block;
    switch (t) {
    case KVV_TYPE_Q2_K: k_q2_k(x, b); return true;
    case KVV_TYPE_Q3_K: k_q3_k(x, b); return true;
    case KVV_TYPE_Q4_K: k_q4_k_q5_k(false, x, b); return true;
    case KVV_TYPE_Q5_K: k_q4_k_q5_k(true, x, b); return true;
    case KVV_TYPE_Q6_K: k_q6_k(x, b); return true;
    default:            return false;
    }
}

/* The K types as groups: s = d*sc, m = dmin*mn, q = u - off (exactly
 * ggml's products: d*sc and dmin*mn are exact in fp32). */
static void g_k(kvv_type t, const uint8_t *restrict x, float *s, float *m, int8_t *restrict q)
{
    kvv_kblock b;
    kvv_kblock_unpack(t, x, &b);
    for (int g = 0; g < 16; g++) {
        s[g] = b.d * (float)b.sc[g];
        m[g] = b.dmin * (float)b.mn[g];
    }
    for (int i = 0; i < QK_K; i++)
        q[i] = (int8_t)(b.u[i] - b.off);
}

bool kvv_quant_groups_type(kvv_type t)
{
    return t == KVV_TYPE_Q4_1 || t == KVV_TYPE_Q5_1 || t == KVV_TYPE_Q2_K || t == KVV_TYPE_Q3_K ||
           t == KVV_TYPE_Q4_K || t == KVV_TYPE_Q5_K || t == KVV_TYPE_Q6_K;
}

bool kvv_quant_groups(kvv_type t, const void *src, int64_t n, float *s, float *m, int8_t *q)
{
    const kvv_type_traits *tt = kvv_type_traits_of((uint32_t)t);
    if (!kvv_quant_groups_type(t) || tt == NULL || n < 0 || n % tt->blck_size != 0)
        return false;
    const uint8_t *x = src;
    const int64_t bs = tt->blck_size, nb = n / bs;
    for (int64_t b = 0; b < nb; b++, x += tt->type_size, s += bs / 16, m += bs / 16, q += bs) {
        switch (t) {
        case KVV_TYPE_Q4_1: g_q4_1_q5_1(false, x, s, m, q); break;
        case KVV_TYPE_Q5_1: g_q4_1_q5_1(true, x, s, m, q); break;
        default: g_k(t, x, s, m, q); break;
        }
    }
    return true;
}

void kvv_dequantize_groups(kvv_type t, const uint8_t *x, float *restrict y, int64_t nb)
{
    const kvv_type_traits *tt = kvv_type_traits_of((uint32_t)t);
    float s[QK_K / 16], m[QK_K / 16];
    int8_t q[QK_K];
    for (int64_t i = 0; i < nb; i++, x += tt->type_size, y += tt->blck_size) {
        kvv_quant_groups(t, x, tt->blck_size, s, m, q);
        /* group by group, so the inner loop (16 weights) vectorizes */
        for (int g = 0; g < tt->blck_size / 16; g++) {
            const float sg = s[g], mg = m[g];
            for (int k = 0; k < 16; k++)
                y[16 * g + k] = sg * (float)q[16 * g + k] - mg;
        }
    }
}
