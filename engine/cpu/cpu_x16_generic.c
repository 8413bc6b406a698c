/*
 * cpu_x16_generic.c — the X16 layout (packing, dequantization, block sums)
 * and the portable C products that define its bits (cpu_x16.h).
 */
#include "engine/cpu/cpu_x16.h"

#include <math.h>
#include <string.h>

static float le_fp16(const uint8_t *p)
{
    return kvv_fp16_to_fp32((uint16_t)(p[0] | (p[1] << 8)));
}

int kvv_cpu_x16_of(kvv_type t)
{
    switch (t) {
    case KVV_TYPE_Q4_0: return KVV_X16_Q4_0;
    case KVV_TYPE_Q5_0: return KVV_X16_Q5_0;
    case KVV_TYPE_Q4_1: return KVV_X16_Q4_1;
    case KVV_TYPE_Q5_1: return KVV_X16_Q5_1;
    case KVV_TYPE_Q8_0: return KVV_X16_Q8_0;
    case KVV_TYPE_Q4_K: return KVV_X16_Q4_K;
    default: return -1;
    }
}

static const kvv_type x16_type[KVV_X16_COUNT] = {KVV_TYPE_Q4_0, KVV_TYPE_Q5_0, KVV_TYPE_Q4_1,
                                                 KVV_TYPE_Q5_1, KVV_TYPE_Q8_0, KVV_TYPE_Q4_K};

/* Where a file block keeps m, qh and qs (d is at 0); -1: none. */
typedef struct {
    int m, qh, qs;
} file_block;

static file_block fb(kvv_x16 x)
{
    static const file_block f[KVV_X16_COUNT] = {{-1, -1, 2}, {-1, 2, 6}, {2, -1, 4}, {2, 4, 8},
                                                 {-1, -1, 2}, {-1, -1, -1}};
    return f[x];
}

size_t kvv_cpu_x16_bytes(kvv_x16 x, int n_rows, int K)
{
    const size_t groups = ((size_t)n_rows + KVV_CPU_X16 - 1) / KVV_CPU_X16;
    return groups * (size_t)(K / kvv_cpu_x16_elems(x)) * kvv_cpu_x16_block(x);
}

/* Block b of row i of group g, to and from the file's bytes. */
static void put_block(kvv_x16 x, const uint8_t *blk, int i, uint8_t *o)
{
    const file_block f = fb(x);
    memcpy(o + 2 * i, blk, 2);
    if (x == KVV_X16_Q4_K) { /* dmin, scales, qs (cpu_x16.h) */
        memcpy(o + 32 + 2 * i, blk + 2, 2);
        for (int k = 0; k < 3; k++)
            memcpy(o + 64 + 64 * k + 4 * i, blk + 4 + 4 * k, 4);
        for (int c = 0; c < 32; c++)
            memcpy(o + 256 + 64 * c + 4 * i, blk + 16 + 4 * c, 4);
        return;
    }
    if (x == KVV_X16_Q8_0) { /* int8 -> unsigned level w + 128, 4 bytes at a time */
        for (int c = 0; c < 8; c++) {
            uint32_t v;
            memcpy(&v, blk + 2 + 4 * c, 4);
            v ^= 0x80808080u;
            memcpy(o + 32 + 64 * c + 4 * i, &v, 4);
        }
        return;
    }
    if (f.m >= 0)
        memcpy(o + 32 + 2 * i, blk + f.m, 2);
    for (int c = 0; c < 4; c++)
        memcpy(o + kvv_cpu_x16_nib(x) + 64 * c + 4 * i, blk + f.qs + 4 * c, 4);
    if (f.qh >= 0)
        memcpy(o + kvv_cpu_x16_qh(x) + 4 * i, blk + f.qh, 4);
}

static void get_block(kvv_x16 x, const uint8_t *o, int i, uint8_t *blk)
{
    const file_block f = fb(x);
    memcpy(blk, o + 2 * i, 2);
    if (x == KVV_X16_Q4_K) {
        memcpy(blk + 2, o + 32 + 2 * i, 2);
        for (int k = 0; k < 3; k++)
            memcpy(blk + 4 + 4 * k, o + 64 + 64 * k + 4 * i, 4);
        for (int c = 0; c < 32; c++)
            memcpy(blk + 16 + 4 * c, o + 256 + 64 * c + 4 * i, 4);
        return;
    }
    if (x == KVV_X16_Q8_0) {
        for (int e = 0; e < 32; e++)
            blk[2 + e] = (uint8_t)(o[32 + 64 * (e / 4) + 4 * i + e % 4] ^ 0x80);
        return;
    }
    if (f.m >= 0)
        memcpy(blk + f.m, o + 32 + 2 * i, 2);
    for (int c = 0; c < 4; c++)
        memcpy(blk + f.qs + 4 * c, o + kvv_cpu_x16_nib(x) + 64 * c + 4 * i, 4);
    if (f.qh >= 0)
        memcpy(blk + f.qh, o + kvv_cpu_x16_qh(x) + 4 * i, 4);
}

void kvv_cpu_x16_pack(kvv_x16 x, int K, const void *src, size_t row_bytes, int n_rows, void *dst)
{
    const int nb = K / kvv_cpu_x16_elems(x);
    const size_t bb = kvv_cpu_x16_block(x), fbb = bb / KVV_CPU_X16;
    uint8_t *d = dst;
    memset(d, 0, kvv_cpu_x16_bytes(x, n_rows, K));
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = (const uint8_t *)src + (size_t)r * row_bytes;
        uint8_t *g = d + (size_t)(r / KVV_CPU_X16) * nb * bb;
        for (int b = 0; b < nb; b++)
            put_block(x, row + (size_t)b * fbb, r % KVV_CPU_X16, g + (size_t)b * bb);
    }
}

void kvv_cpu_x16_dequant_row(kvv_x16 x, int K, const void *G, int r, float *dst)
{
    const int e = kvv_cpu_x16_elems(x), nb = K / e;
    const size_t bb = kvv_cpu_x16_block(x);
    const uint8_t *g = (const uint8_t *)G + (size_t)(r / KVV_CPU_X16) * nb * bb;
    uint8_t blk[144];
    for (int b = 0; b < nb; b++) {
        get_block(x, g + (size_t)b * bb, r % KVV_CPU_X16, blk);
        kvv_dequantize_row(x16_type[x], blk, dst + (size_t)e * b, e);
    }
}

void kvv_cpu_block_sums(int K, const int8_t *q, int n_tok, int32_t *sum)
{
    const int nb = K / 32;
    for (int t = 0; t < n_tok; t++)
        for (int b = 0; b < nb; b++) {
            const int8_t *v = q + (size_t)t * K + 32 * b;
            int32_t s = 0;
            for (int e = 0; e < 32; e++)
                s += v[e];
            sum[(size_t)t * nb + b] = s;
        }
}

/* Level of element e (0..31) of row i in block o. */
static inline int level(kvv_x16 x, const uint8_t *o, int i, int e)
{
    if (x == KVV_X16_Q8_0)
        return o[32 + 64 * (e / 4) + 4 * i + e % 4];
    const int c = (e % 16) / 4, j = e % 4;
    const uint8_t byte = o[kvv_cpu_x16_nib(x) + 64 * c + 4 * i + j];
    int u = e < 16 ? byte & 15 : byte >> 4;
    if (kvv_cpu_x16_has_qh(x)) {
        const uint8_t *h = o + kvv_cpu_x16_qh(x) + 4 * i;
        u |= ((h[e / 8] >> (e % 8)) & 1) << 4;
    }
    return u;
}

/* Per group, per block: the 16 rows' levels and scales unpacked once, then
 * every token; Y carries each output's accumulator between blocks (from
 * +0, one fused step per block: the header's order). */
static void gemm(kvv_x16 x, int K, const void *G, int n_rows, const kvv_cpu_x16_act *A,
                 int n_tok, float *Y, size_t ldy)
{
    const int nb = K / 32;
    const size_t bb = kvv_cpu_x16_block(x);
    const int off = kvv_cpu_x16_offset(x), min = kvv_cpu_x16_has_min(x);
    for (int g0 = 0; g0 < n_rows; g0 += KVV_CPU_X16) {
        const int ng = n_rows - g0 < KVV_CPU_X16 ? n_rows - g0 : KVV_CPU_X16;
        const uint8_t *g = (const uint8_t *)G + (size_t)(g0 / KVV_CPU_X16) * nb * bb;
        for (int t = 0; t < n_tok; t++)
            for (int i = 0; i < ng; i++)
                Y[(size_t)t * ldy + g0 + i] = 0.0f;
        for (int b = 0; b < nb; b++) {
            const uint8_t *o = g + (size_t)b * bb;
            int u[KVV_CPU_X16][32];
            float dw[KVV_CPU_X16], mw[KVV_CPU_X16];
            for (int i = 0; i < ng; i++) {
                if (x == KVV_X16_Q8_0) /* the common case, without level()'s branches */
                    for (int e = 0; e < 32; e++)
                        u[i][e] = o[32 + 64 * (e / 4) + 4 * i + e % 4];
                else
                    for (int e = 0; e < 32; e++)
                        u[i][e] = level(x, o, i, e);
                dw[i] = le_fp16(o + 2 * i);
                mw[i] = min ? le_fp16(o + 32 + 2 * i) : 0.0f;
            }
            for (int t = 0; t < n_tok; t++) {
                const int8_t *q = A->q + (size_t)t * K + 32 * b;
                const size_t tb = (size_t)t * nb + b;
                for (int i = 0; i < ng; i++) {
                    int32_t S = min ? 0 : -off * A->sum[tb];
                    for (int e = 0; e < 32; e++)
                        S += u[i][e] * q[e];
                    float *y = &Y[(size_t)t * ldy + g0 + i];
                    float acc = fmaf(dw[i] * A->d[tb], (float)S, *y);
                    if (min)
                        acc = fmaf(mw[i], A->s[tb], acc);
                    *y = acc;
                }
            }
        }
    }
}

#define X16_FN(name, x)                                                                           \
    static void name(int K, const void *G, int nr, const kvv_cpu_x16_act *A, int nt, float *Y,   \
                     size_t ldy)                                                                  \
    {                                                                                             \
        gemm(x, K, G, nr, A, nt, Y, ldy);                                                         \
    }
X16_FN(gemm_q4_0, KVV_X16_Q4_0)
X16_FN(gemm_q5_0, KVV_X16_Q5_0)
X16_FN(gemm_q4_1, KVV_X16_Q4_1)
X16_FN(gemm_q5_1, KVV_X16_Q5_1)
X16_FN(gemm_q8_0, KVV_X16_Q8_0)

const kvv_cpu_x16_fn kvv_cpu_x16_generic[KVV_X16_COUNT] = {gemm_q4_0, gemm_q5_0, gemm_q4_1,
                                                           gemm_q5_1, gemm_q8_0, NULL};

const kvv_cpu_x16_pack_fn kvv_cpu_x16_pack_none[KVV_X16_COUNT] = {NULL};
/* Q8_0 rows in the file's layout, one token: the header's order with
 * S = sum w*q (= sum u*q - 128*sum q). */
static void rows_q8_0(int K, const void *W, size_t row_bytes, int n_rows,
                      const kvv_cpu_x16_act *A, float *Y)
{
    const int nb = K / 32;
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = (const uint8_t *)W + (size_t)r * row_bytes;
        float acc = 0.0f;
        for (int b = 0; b < nb; b++) {
            const uint8_t *blk = row + (size_t)b * 34;
            int32_t S = 0;
            for (int e = 0; e < 32; e++)
                S += (int8_t)blk[2 + e] * A->q[32 * b + e];
            acc = fmaf(le_fp16(blk) * A->d[b], (float)S, acc);
        }
        Y[r] = acc;
    }
}

const kvv_cpu_x16_rows_fn kvv_cpu_x16_rows_generic[KVV_X16_COUNT] = {
    [KVV_X16_Q8_0] = rows_q8_0,
};
