/*
 * cpu_q4x16_generic.c — the X16 layout (packing, dequantization, block
 * sums) and the portable C product that defines its bits (cpu_q4x16.h).
 */
#include "engine/cpu/cpu_q4x16.h"

#include <math.h>
#include <string.h>

#include "model/tensor_types.h"

static float le_fp16(const uint8_t *p)
{
    return kvv_fp16_to_fp32((uint16_t)(p[0] | (p[1] << 8)));
}

size_t kvv_cpu_x16_bytes(int n_rows, int K)
{
    const size_t groups = ((size_t)n_rows + KVV_CPU_X16 - 1) / KVV_CPU_X16;
    return groups * (size_t)(K / 32) * KVV_CPU_X16_BLOCK;
}

void kvv_cpu_x16_pack(int K, const void *src, size_t row_bytes, int n_rows, void *dst)
{
    const int nb = K / 32;
    uint8_t *d = dst;
    memset(d, 0, kvv_cpu_x16_bytes(n_rows, K));
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = (const uint8_t *)src + (size_t)r * row_bytes;
        const int i = r % KVV_CPU_X16;
        uint8_t *g = d + (size_t)(r / KVV_CPU_X16) * nb * KVV_CPU_X16_BLOCK;
        for (int b = 0; b < nb; b++) {
            const uint8_t *blk = row + (size_t)b * 18;
            uint8_t *o = g + (size_t)b * KVV_CPU_X16_BLOCK;
            o[2 * i] = blk[0];
            o[2 * i + 1] = blk[1];
            for (int c = 0; c < 4; c++)
                memcpy(o + 32 + 64 * c + 4 * i, blk + 2 + 4 * c, 4);
        }
    }
}

/* Level of element e (0..31) of row i in block o, and its scale. */
static inline int level(const uint8_t *o, int i, int e)
{
    const int c = (e % 16) / 4, j = e % 4;
    const uint8_t byte = o[32 + 64 * c + 4 * i + j];
    return e < 16 ? byte & 15 : byte >> 4;
}

void kvv_cpu_x16_dequant_row(int K, const void *G, int r, float *dst)
{
    const int nb = K / 32, i = r % KVV_CPU_X16;
    const uint8_t *g = (const uint8_t *)G + (size_t)(r / KVV_CPU_X16) * nb * KVV_CPU_X16_BLOCK;
    for (int b = 0; b < nb; b++) {
        const uint8_t *o = g + (size_t)b * KVV_CPU_X16_BLOCK;
        const float d = le_fp16(o + 2 * i);
        for (int e = 0; e < 32; e++)
            dst[32 * b + e] = (float)(level(o, i, e) - 8) * d;
    }
}

void kvv_cpu_block_sums(int K, const int8_t *q, int n_tok, int32_t *s)
{
    const int nb = K / 32;
    for (int t = 0; t < n_tok; t++)
        for (int b = 0; b < nb; b++) {
            const int8_t *x = q + (size_t)t * K + 32 * b;
            int32_t v = 0;
            for (int e = 0; e < 32; e++)
                v += x[e];
            s[(size_t)t * nb + b] = v;
        }
}

void kvv_cpu_gemm_q4_0_x16_generic(int K, const void *G, int n_rows, const int8_t *QX,
                                   const float *DX, const int32_t *SX, int n_tok, float *Y,
                                   size_t ldy)
{
    const int nb = K / 32;
    for (int r = 0; r < n_rows; r++) {
        const int i = r % KVV_CPU_X16;
        const uint8_t *g = (const uint8_t *)G + (size_t)(r / KVV_CPU_X16) * nb * KVV_CPU_X16_BLOCK;
        for (int t = 0; t < n_tok; t++) {
            const int8_t *q = QX + (size_t)t * K;
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const uint8_t *o = g + (size_t)b * KVV_CPU_X16_BLOCK;
                int32_t S = -8 * SX[(size_t)t * nb + b];
                for (int e = 0; e < 32; e++)
                    S += level(o, i, e) * q[32 * b + e];
                const float p = le_fp16(o + 2 * i) * DX[(size_t)t * nb + b];
                acc = fmaf(p, (float)S, acc);
            }
            Y[(size_t)t * ldy + r] = acc;
        }
    }
}
