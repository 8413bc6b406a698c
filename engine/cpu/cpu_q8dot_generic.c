/*
 * cpu_q8dot_generic.c — portable C versions of the Q8_0-activation products
 * (order and layout: cpu_q8dot.h). The AVX2 file computes the same integer
 * sums; its float accumulation is fused, this one's is not.
 */
#include "engine/cpu/cpu_q8dot.h"

#include <math.h>

#include "model/tensor_types.h"

#define LANES 8

void kvv_cpu_quantize_act_generic(int K, const float *x, int8_t *q, float *d)
{
    for (int b = 0; b < K / KVV_Q8_BLOCK; b++) {
        const float *xb = x + (size_t)b * KVV_Q8_BLOCK;
        float amax = 0.0f;
        for (int j = 0; j < KVV_Q8_BLOCK; j++)
            amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        const float dd = amax / 127.0f;
        const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
        for (int j = 0; j < KVV_Q8_BLOCK; j++) {
            float v = rintf(xb[j] * id);
            /* NaN (or an infinite amax) leaves the range: 0, never UB */
            q[(size_t)b * KVV_Q8_BLOCK + j] = (int8_t)(v >= -127.0f && v <= 127.0f ? v : 0.0f);
        }
        d[b] = kvv_fp16_to_fp32(kvv_fp32_to_fp16(dd));
    }
}

static float le_fp16(const uint8_t *p)
{
    return kvv_fp16_to_fp32((uint16_t)(p[0] | (p[1] << 8)));
}

/* Weight block b of a row as 32 int8 values and its scale. */
typedef void (*unpack_fn)(const uint8_t *row, int b, int8_t *w, float *dw);

static void unpack_q8_0(const uint8_t *row, int b, int8_t *w, float *dw)
{
    const uint8_t *blk = row + (size_t)b * 34;
    *dw = le_fp16(blk);
    for (int j = 0; j < 32; j++)
        w[j] = (int8_t)blk[2 + j];
}

static void unpack_q4_0(const uint8_t *row, int b, int8_t *w, float *dw)
{
    const uint8_t *blk = row + (size_t)b * 18;
    *dw = le_fp16(blk);
    for (int j = 0; j < 16; j++) {
        w[j] = (int8_t)((blk[2 + j] & 0x0F) - 8);
        w[j + 16] = (int8_t)((blk[2 + j] >> 4) - 8);
    }
}

static void gemm_q8(unpack_fn unpack, int K, const void *W, size_t row_bytes, int n_rows,
                    const int8_t *QX, const float *DX, int n_tok, float *Y, size_t ldy)
{
    const int nb = K / KVV_Q8_BLOCK;
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = (const uint8_t *)W + (size_t)r * row_bytes;
        for (int t = 0; t < n_tok; t++) {
            const int8_t *qx = QX + (size_t)t * K;
            const float *dx = DX + (size_t)t * nb;
            float acc[LANES] = {0};
            for (int b = 0; b < nb; b++) {
                int8_t w[32];
                float dw;
                unpack(row, b, w, &dw);
                const float d = dw * dx[b];
                for (int j = 0; j < LANES; j++) {
                    int32_t s = 0;
                    for (int i = 4 * j; i < 4 * j + 4; i++)
                        s += (int32_t)w[i] * (int32_t)qx[b * KVV_Q8_BLOCK + i];
                    acc[j] = acc[j] + d * (float)s;
                }
            }
            Y[(size_t)t * ldy + r] =
                ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
        }
    }
}

void kvv_cpu_gemm_q8_0_q8_generic(int K, const void *W, size_t row_bytes, int n_rows,
                                  const int8_t *QX, const float *DX, int n_tok, float *Y,
                                  size_t ldy)
{
    gemm_q8(unpack_q8_0, K, W, row_bytes, n_rows, QX, DX, n_tok, Y, ldy);
}

void kvv_cpu_gemm_q4_0_q8_generic(int K, const void *W, size_t row_bytes, int n_rows,
                                  const int8_t *QX, const float *DX, int n_tok, float *Y,
                                  size_t ldy)
{
    gemm_q8(unpack_q4_0, K, W, row_bytes, n_rows, QX, DX, n_tok, Y, ldy);
}
