/*
 * ref_ggml.c — optional emulation of llama.cpp's CPU shortcuts (ggml-cpu),
 * selected by kvv_ref_opts.ggml (KVV_GGML_* in runtime/runtime.h). Off by
 * default: the reference's own numerics are plain fp32 on exactly
 * dequantized weights. With emulation on, the reference moves closer to
 * what llama.cpp computes (../shared/peer/README.md "Numerics"), and stays
 * deterministic: every order below depends only on the lengths.
 *
 *   GELU_FP16  ggml_vec_geglu with GGML_GELU_FP16: x <= -10 -> 0, x >= 10 ->
 *              x, else fp16(gelu_tanh(fp16(x))) (its 64K-entry table).
 *   ACT_QUANT  ggml's vec_dot_type: before a matmul with an F16 weight the
 *              activations are rounded to fp16; before one with a Q8_0
 *              weight they are quantized to Q8_0 (blocks of 32: d = amax/127,
 *              q = nearest-even(x * (1/d)), d stored as fp16) and each output
 *              is sum over blocks, ascending, of (float)(sum_j qw_j * qx_j) *
 *              (dw * dx), accumulated in fp32 (ggml_vec_dot_q8_0_q8_0).
 *   KQ_ACT     the same for the K types and Q4_1/Q5_1: activations rounded
 *              to Q8_K before a Q2_K..Q6_K matmul and to Q8_1 before a
 *              Q4_1/Q5_1 one, exactly as engine/cpu/cpu_kquant.h describes
 *              (ggml's quantize_row_q8_K_ref and x86 quantize_row_q8_1),
 *              then per super-block (block) the exact integer sums S and M
 *              of that header, accumulated here in plain fp32 without fused
 *              steps: sum = sum + (float)S * (dw * dx) - (float)M * (dmin * dx)
 *              (Q4_1/Q5_1: + (float)S * (dw * dx) + mw * s). The cpu engine's
 *              kernels (fused steps) and this differ in rounding only.
 *   Q40_ACT    the same for Q4_0/Q5_0: activations quantized to Q8_0 as for
 *              ACT_QUANT, then per block the exact integer sum of
 *              (u - 8 or 16) * q, accumulated as for Q8_0 (ggml's
 *              vec_dot_q4_0_q8_0 / q5_0_q8_0; engine/cpu/cpu_x16.h is the
 *              cpu engine's fused version).
 *   Q80_ACT    the same for Q8_0 alone (the cpu engine's X16 Q8_0, both modes).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/tensor_types.h"
#include "reference/ref_internal.h"

#define QK8 32          /* elements per Q8_0 block */

float ref_gelu_ggml(float x)
{
    if (x <= -10.0f)
        return 0.0f;
    if (x >= 10.0f)
        return x;
    const float xh = kvv_fp16_to_fp32(kvv_fp32_to_fp16(x));
    return kvv_fp16_to_fp32(kvv_fp32_to_fp16(ref_gelu_tanh(xh)));
}

/* One Q8_0 block of activations: ggml's quantize_row_q8_0 (x86 rounds to
 * nearest even). d: the fp16-rounded scale as fp32. */
static void quantize_block(const float *x, int8_t *q, float *d)
{
    float amax = 0.0f;
    for (int j = 0; j < QK8; j++) {
        const float a = fabsf(x[j]);
        if (a > amax)
            amax = a;
    }
    const float dd = amax / 127.0f;
    const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
    for (int j = 0; j < QK8; j++)
        q[j] = (int8_t)rintf(x[j] * id); /* |x * id| <= 127: in range */
    *d = kvv_fp16_to_fp32(kvv_fp32_to_fp16(dd));
}

static float le_fp16(const uint8_t *p)
{
    return kvv_fp16_to_fp32((uint16_t)(p[0] | (p[1] << 8)));
}

bool ref_ggml_scratch_alloc(ref_ggml_scratch *g, int n, int max_cols)
{
    const size_t N = (size_t)n * (size_t)max_cols;
    g->xh = malloc(sizeof(float) * (N ? N : 1));
    g->qx = malloc(N ? N : 1);
    g->dx = malloc(sizeof(float) * (N / QK8 + 1));
    g->sx = malloc(sizeof(float) * (N / QK8 + 1));
    g->bsums = malloc(sizeof(int16_t) * (N / 16 + 1));
    return g->xh && g->qx && g->dx && g->sx && g->bsums;
}

void ref_ggml_scratch_free(ref_ggml_scratch *g)
{
    free(g->xh);
    free(g->qx);
    free(g->dx);
    free(g->sx);
    free(g->bsums);
    memset(g, 0, sizeof *g);
}

/* round-to-nearest-even of v into -127..127; NaN -> 0 */
static int8_t q127(float v)
{
    if (v != v)
        return 0;
    float r = rintf(v);
    return (int8_t)(r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r));
}

/* One Q8_K block of 256 activations (cpu_kquant.h): the first element of
 * largest |x| maps to -127; d = 1/iscale; the sums of each 16 quants. */
static void quantize_q8_k(const float *x, int8_t *q, float *d, int16_t *bsums)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 256; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
    *d = amax != 0.0f ? 1.0f / iscale : 0.0f;
    for (int j = 0; j < 256; j++)
        q[j] = amax != 0.0f ? q127(iscale * x[j]) : 0;
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += q[16 * g + j];
        bsums[g] = (int16_t)s;
    }
}

/* One Q8_1 block of 32 (ggml's x86 quantize_row_q8_1): fp16 d, and
 * s = fp16(d * sum q). */
static void quantize_q8_1(const float *x, int8_t *q, float *d, float *s)
{
    float amax = 0.0f;
    for (int j = 0; j < QK8; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    const float dd = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < QK8; j++) {
        q[j] = q127(x[j] * id);
        sum += q[j];
    }
    *d = kvv_fp16_to_fp32(kvv_fp32_to_fp16(dd));
    *s = kvv_fp16_to_fp32(kvv_fp32_to_fp16(dd * (float)sum));
}

/* One output of a K-type row against Q8_K activations. */
static float dot_kq(kvv_type t, const uint8_t *row, int cols, const int8_t *q, const float *dx,
                    const int16_t *bs)
{
    const size_t bb = kvv_type_row_size(t, 256);
    float sum = 0.0f;
    kvv_kblock b;
    for (int sb = 0; sb < cols / 256; sb++) {
        kvv_kblock_unpack(t, row + (size_t)sb * bb, &b);
        int32_t S = 0, M = 0;
        for (int g = 0; g < 16; g++) {
            int32_t s = 0;
            for (int i = 16 * g; i < 16 * g + 16; i++)
                s += (int32_t)b.u[i] * q[256 * sb + i];
            S += b.sc[g] * (s - b.off * bs[16 * sb + g]);
            M += b.mn[g] * bs[16 * sb + g];
        }
        sum = sum + (float)S * (b.d * dx[sb]) - (float)M * (b.dmin * dx[sb]);
    }
    return sum;
}

/* One output of a Q4_1 / Q5_1 row against Q8_1 activations. */
static float dot_q1(bool five, const uint8_t *row, int cols, const int8_t *q, const float *dx,
                    const float *sx)
{
    const size_t bb = five ? 24 : 20;
    float sum = 0.0f;
    for (int b = 0; b < cols / QK8; b++) {
        const uint8_t *x = row + (size_t)b * bb;
        const uint32_t qh = five ? (uint32_t)x[4] | (uint32_t)x[5] << 8 | (uint32_t)x[6] << 16 |
                                       (uint32_t)x[7] << 24
                                 : 0;
        const uint8_t *qs = x + (five ? 8 : 4);
        int32_t S = 0;
        for (int j = 0; j < QK8 / 2; j++) {
            S += ((qs[j] & 0xF) | (int)(((qh >> j) << 4) & 0x10)) * q[QK8 * b + j];
            S += ((qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10)) * q[QK8 * b + j + 16];
        }
        sum = sum + (float)S * (le_fp16(x) * dx[b]) + le_fp16(x + 2) * sx[b];
    }
    return sum;
}

/* out[t][r] for the rows of a K-type or Q4_1/Q5_1 matrix W, read as stored. */
static void matmul_kq(float *out, const float *x, const ref_mat *W, const float *bias, int n,
                      ref_ggml_scratch *g)
{
    const int rows = W->rows, cols = W->cols;
    const bool k = W->type != KVV_TYPE_Q4_1 && W->type != KVV_TYPE_Q5_1;
    for (int t = 0; t < n; t++) {
        const float *xt = x + (size_t)t * cols;
        int8_t *qt = g->qx + (size_t)t * cols;
        if (k)
            for (int b = 0; b < cols / 256; b++)
                quantize_q8_k(xt + 256 * b, qt + 256 * b, g->dx + (size_t)t * (cols / 256) + b,
                              g->bsums + (size_t)t * (cols / 16) + 16 * b);
        else
            for (int b = 0; b < cols / QK8; b++)
                quantize_q8_1(xt + QK8 * b, qt + QK8 * b, g->dx + (size_t)t * (cols / QK8) + b,
                              g->sx + (size_t)t * (cols / QK8) + b);
    }
    for (int r = 0; r < rows; r++) {
        const uint8_t *wr = W->data + (size_t)r * W->row_bytes;
        for (int t = 0; t < n; t++) {
            const int8_t *qt = g->qx + (size_t)t * cols;
            const float s = k ? dot_kq(W->type, wr, cols, qt, g->dx + (size_t)t * (cols / 256),
                                       g->bsums + (size_t)t * (cols / 16))
                              : dot_q1(W->type == KVV_TYPE_Q5_1, wr, cols, qt,
                                       g->dx + (size_t)t * (cols / QK8),
                                       g->sx + (size_t)t * (cols / QK8));
            out[(size_t)t * rows + (size_t)r] = bias ? s + bias[r] : s;
        }
    }
}

/* Weight j of block blk of a Q8_0, Q4_0 or Q5_0 row as an integer. */
static int32_t block_weight(kvv_type t, const uint8_t *blk, int j)
{
    if (t == KVV_TYPE_Q8_0)
        return (int8_t)blk[2 + j];
    if (t == KVV_TYPE_Q4_0)
        return (j < 16 ? blk[2 + j] & 0x0F : blk[2 + j - 16] >> 4) - 8;
    const uint32_t qh = (uint32_t)blk[2] | (uint32_t)blk[3] << 8 | (uint32_t)blk[4] << 16 |
                        (uint32_t)blk[5] << 24;
    const int u = j < 16 ? blk[6 + j] & 0x0F : blk[6 + j - 16] >> 4;
    return (u | (int)((qh >> j) & 1) << 4) - 16;
}

/* out[t][r] for the rows of the Q8_0, Q4_0 or Q5_0 matrix W, read as
 * stored. */
static void matmul_q8_0(float *out, const float *x, const ref_mat *W, const float *bias, int n,
                        ref_ggml_scratch *g)
{
    const int rows = W->rows, cols = W->cols;
    const int nb = cols / QK8;
    int8_t *qx = g->qx;                                      /* (n, cols) */
    float *dx = g->dx;                                       /* (n, nb) */
    for (int t = 0; t < n; t++)
        for (int b = 0; b < nb; b++)
            quantize_block(x + (size_t)t * cols + (size_t)b * QK8,
                           qx + (size_t)t * cols + (size_t)b * QK8, &dx[(size_t)t * nb + b]);
    const size_t bb = kvv_type_row_size(W->type, QK8);
    for (int r = 0; r < rows; r++) {
        const uint8_t *wr = W->data + (size_t)r * W->row_bytes;  /* nb blocks of bb bytes */
        for (int t = 0; t < n; t++) {
            const int8_t *qt = qx + (size_t)t * cols;
            float sum = 0.0f;
            for (int b = 0; b < nb; b++) {
                const uint8_t *blk = wr + (size_t)b * bb;
                int32_t sumi = 0;
                for (int j = 0; j < QK8; j++)
                    sumi += block_weight(W->type, blk, j) * (int32_t)qt[b * QK8 + j];
                sum = sum + (float)sumi * (le_fp16(blk) * dx[(size_t)t * nb + b]);
            }
            out[(size_t)t * rows + (size_t)r] = bias ? sum + bias[r] : sum;
        }
    }
}

static bool kq_type(kvv_type t)
{
    return t == KVV_TYPE_Q2_K || t == KVV_TYPE_Q3_K || t == KVV_TYPE_Q4_K ||
           t == KVV_TYPE_Q5_K || t == KVV_TYPE_Q6_K || t == KVV_TYPE_Q4_1 || t == KVV_TYPE_Q5_1;
}

void ref_matmul_ggml(float *out, const float *x, const ref_mat *W, const float *bias, int n,
                     bool reversed, float *wrow, ref_ggml_scratch *g, unsigned flags)
{
    if ((flags & KVV_GGML_KQ_ACT) && kq_type(W->type) && !reversed) {
        matmul_kq(out, x, W, bias, n, g);
    } else if (!reversed && W->cols % QK8 == 0 &&
               (((flags & KVV_GGML_Q40_ACT) &&
                 (W->type == KVV_TYPE_Q4_0 || W->type == KVV_TYPE_Q5_0)) ||
                ((flags & KVV_GGML_Q80_ACT) && W->type == KVV_TYPE_Q8_0))) {
        matmul_q8_0(out, x, W, bias, n, g);
    } else if (!(flags & KVV_GGML_ACT_QUANT)) {
        ref_matmul_mat(out, x, W, bias, n, reversed, wrow);
    } else if (W->type == KVV_TYPE_Q8_0 && W->cols % QK8 == 0 && !reversed) {
        matmul_q8_0(out, x, W, bias, n, g);
    } else if (W->type == KVV_TYPE_F16) {
        float *xh = g->xh;                                   /* (n, cols) */
        for (size_t i = 0; i < (size_t)n * (size_t)W->cols; i++)
            xh[i] = kvv_fp16_to_fp32(kvv_fp32_to_fp16(x[i]));
        ref_matmul_mat(out, xh, W, bias, n, reversed, wrow);
    } else {
        ref_matmul_mat(out, x, W, bias, n, reversed, wrow);
    }
}
