/*
 * ref_ggml.c — optional emulation of llama.cpp's CPU shortcuts (ggml-cpu),
 * selected by kvv_ref_opts.ggml (KVV_GGML_* in reference/ref.h). Off by
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
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/tensor_types.h"
#include "reference/ref_internal.h"

#define QK8 32          /* elements per Q8_0 block */
#define Q8_BYTES 34     /* fp16 d + 32 x int8 */

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
    return g->xh && g->qx && g->dx;
}

void ref_ggml_scratch_free(ref_ggml_scratch *g)
{
    free(g->xh);
    free(g->qx);
    free(g->dx);
    memset(g, 0, sizeof *g);
}

/* out[t][r] for the rows of the Q8_0 matrix W, read as stored. */
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
    for (int r = 0; r < rows; r++) {
        const uint8_t *wr = W->data + (size_t)r * W->row_bytes;  /* nb blocks of Q8_BYTES */
        for (int t = 0; t < n; t++) {
            const int8_t *qt = qx + (size_t)t * cols;
            float sum = 0.0f;
            for (int b = 0; b < nb; b++) {
                const uint8_t *blk = wr + (size_t)b * Q8_BYTES;
                const int8_t *qw = (const int8_t *)(blk + 2);
                int32_t sumi = 0;
                for (int j = 0; j < QK8; j++)
                    sumi += (int32_t)qw[j] * (int32_t)qt[b * QK8 + j];
                sum = sum + (float)sumi * (le_fp16(blk) * dx[(size_t)t * nb + b]);
            }
            out[(size_t)t * rows + (size_t)r] = bias ? sum + bias[r] : sum;
        }
    }
}

void ref_matmul_ggml(float *out, const float *x, const ref_mat *W, const float *bias, int n,
                     bool reversed, float *wrow, ref_ggml_scratch *g)
{
    if (W->type == KVV_TYPE_Q8_0 && W->cols % QK8 == 0 && !reversed) {
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
