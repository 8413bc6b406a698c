/*
 * cpu_kquant_generic.c — the portable C K-quant and Q4_1/Q5_1 products and
 * activation rounding: the definition of the bits every table gives
 * (cpu_kquant.h). Written plainly: a K-type row's super-blocks in order,
 * each unpacked once for every token with the model layer's decoders
 * (kvv_kblock_unpack, the one reader of each K layout); Q4_1/Q5_1 one
 * output at a time.
 */
#include "engine/cpu/cpu_kquant.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

int kvv_cpu_kq_of(kvv_type t)
{
    switch (t) {
    case KVV_TYPE_Q2_K: return KVV_KQ_Q2_K;
    case KVV_TYPE_Q3_K: return KVV_KQ_Q3_K;
    case KVV_TYPE_Q4_K: return KVV_KQ_Q4_K;
    case KVV_TYPE_Q5_K: return KVV_KQ_Q5_K;
    case KVV_TYPE_Q6_K: return KVV_KQ_Q6_K;
    case KVV_TYPE_Q4_1: return KVV_KQ_Q4_1;
    case KVV_TYPE_Q5_1: return KVV_KQ_Q5_1;
    default:            return -1;
    }
}

/* round-to-nearest-even of v into -127..127; NaN -> 0 */
static int8_t q127(float v)
{
    if (v != v)
        return 0;
    float r = rintf(v);
    r = r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
    return (int8_t)r;
}

void kvv_cpu_quantize_q8_k_generic(int K, const float *x, int8_t *q, float *d, int16_t *bsums)
{
    for (int b = 0; b < K / 256; b++, x += 256, q += 256) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 256; j++)
            if (fabsf(x[j]) > amax) { /* NaN compares false: skipped */
                amax = fabsf(x[j]);
                max = x[j];
            }
        if (amax == 0.0f) {
            d[b] = 0.0f;
            memset(q, 0, 256);
        } else {
            const float iscale = -127.0f / max;
            d[b] = 1.0f / iscale;
            for (int j = 0; j < 256; j++)
                q[j] = q127(iscale * x[j]);
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += q[16 * g + j];
            bsums[16 * b + g] = (int16_t)s;
        }
    }
}

void kvv_cpu_quantize_q8_1_generic(int K, const float *x, int8_t *q, float *d, float *s)
{
    for (int b = 0; b < K / 32; b++, x += 32, q += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        const float dd = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            q[j] = q127(x[j] * id);
            sum += q[j];
        }
        d[b] = kvv_fp16_to_fp32(kvv_fp32_to_fp16(dd));
        s[b] = kvv_fp16_to_fp32(kvv_fp32_to_fp16(dd * (float)sum));
    }
}

/* Super-block sb of one row (unpacked in b) against every token: each
 * output (Y[tk*ldy]) takes its two float steps of cpu_kquant.h's order
 * for this super-block, its running sum kept in Y between super-blocks (a
 * float stored and read back: the same bits as a local). */
static void sb_step(const kvv_kblock *b, bool mins, int K, int sb, const kvv_cpu_qact *A,
                    int n_tok, float *Y, size_t ldy)
{
    for (int tk = 0; tk < n_tok; tk++) {
        const int8_t *q = A->q + (size_t)tk * K + 256 * sb;
        const int16_t *bs = A->bsums + (size_t)tk * (K / 16) + 16 * sb;
        const float dx = A->d[(size_t)tk * (K / 256) + sb];
        int32_t S = 0, M = 0;
        for (int g = 0; g < 16; g++) {
            const uint8_t *u = b->u + 16 * g;
            const int8_t *x = q + 16 * g;
            int32_t s = 0;
            for (int i = 0; i < 16; i++)
                s += (int32_t)u[i] * x[i];
            S += b->sc[g] * (s - b->off * bs[g]);
            M += b->mn[g] * bs[g];
        }
        float *y = Y + (size_t)tk * ldy;
        float acc = sb == 0 ? 0.0f : *y;
        acc = fmaf(b->d * dx, (float)S, acc);
        if (mins)
            acc = fmaf(-(b->dmin * dx), (float)M, acc);
        *y = acc;
    }
}

/* One K-type row's outputs for every token (Y: the row's first output,
 * tokens ldy apart), super-block by super-block: each block is unpacked
 * once for all the tokens. */
static void row_k(kvv_type t, const uint8_t *row, int K, const kvv_cpu_qact *A, int n_tok,
                  float *Y, size_t ldy)
{
    kvv_kblock b;
    const size_t bb = kvv_type_row_size(t, 256);
    const bool mins = t == KVV_TYPE_Q2_K || t == KVV_TYPE_Q4_K || t == KVV_TYPE_Q5_K;
    for (int sb = 0; sb < K / 256; sb++) {
        kvv_kblock_unpack(t, row + (size_t)sb * bb, &b);
        sb_step(&b, mins, K, sb, A, n_tok, Y, ldy);
    }
}

static float le_fp16(const uint8_t *p)
{
    return kvv_fp16_to_fp32((uint16_t)(p[0] | (p[1] << 8)));
}

/* One output of a Q4_1 / Q5_1 row (y = d*u + m per 32). */
static float dot_1(bool five, const uint8_t *row, int K, const int8_t *q, const float *dx,
                   const float *sx)
{
    float acc = 0.0f;
    const size_t bb = five ? 24 : 20;
    for (int b = 0; b < K / 32; b++) {
        const uint8_t *x = row + (size_t)b * bb;
        const uint32_t qh = five ? (uint32_t)x[4] | (uint32_t)x[5] << 8 | (uint32_t)x[6] << 16 |
                                       (uint32_t)x[7] << 24
                                 : 0;
        const uint8_t *qs = x + (five ? 8 : 4);
        int32_t S = 0;
        for (int j = 0; j < 16; j++) {
            const int u0 = (qs[j] & 0xF) | (int)(((qh >> j) << 4) & 0x10);
            const int u1 = (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
            S += u0 * q[32 * b + j] + u1 * q[32 * b + j + 16];
        }
        acc = fmaf(le_fp16(x) * dx[b], (float)S, acc);
        acc = fmaf(le_fp16(x + 2), sx[b], acc);
    }
    return acc;
}

static void gemm(kvv_type t, int K, const void *W, size_t row_bytes, int n_rows,
                 const kvv_cpu_qact *A, int n_tok, float *Y, size_t ldy)
{
    const int k = kvv_cpu_kq_is_k((kvv_kq)kvv_cpu_kq_of(t));
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = (const uint8_t *)W + (size_t)r * row_bytes;
        if (k) {
            row_k(t, row, K, A, n_tok, Y + r, ldy);
            continue;
        }
        for (int tk = 0; tk < n_tok; tk++)
            Y[(size_t)tk * ldy + r] =
                dot_1(t == KVV_TYPE_Q5_1, row, K, A->q + (size_t)tk * K,
                      A->d + (size_t)tk * (K / 32), A->s + (size_t)tk * (K / 32));
    }
}

#define KQ_FN(name, type)                                                                         \
    static void name(int K, const void *W, size_t rb, int nr, const kvv_cpu_qact *A, int nt,      \
                     float *Y, size_t ldy)                                                        \
    {                                                                                             \
        gemm(type, K, W, rb, nr, A, nt, Y, ldy);                                                  \
    }
KQ_FN(gemm_q2_k, KVV_TYPE_Q2_K)
KQ_FN(gemm_q3_k, KVV_TYPE_Q3_K)
KQ_FN(gemm_q4_k, KVV_TYPE_Q4_K)
KQ_FN(gemm_q5_k, KVV_TYPE_Q5_K)
KQ_FN(gemm_q6_k, KVV_TYPE_Q6_K)
KQ_FN(gemm_q4_1, KVV_TYPE_Q4_1)
KQ_FN(gemm_q5_1, KVV_TYPE_Q5_1)

const kvv_cpu_kq_fn kvv_cpu_kq_generic[KVV_KQ_COUNT] = {
    gemm_q2_k, gemm_q3_k, gemm_q4_k, gemm_q5_k, gemm_q6_k, gemm_q4_1, gemm_q5_1,
};
