/*
 * cpu_kernels_generic.c — portable C kernels of the cpu engine (any CPU).
 * The reduction order is the one cpu_kernels.h documents, with 8 lanes and
 * separately rounded multiply and add (-ffp-contract=off keeps the compiler
 * from fusing them).
 */
#include "engine/cpu/cpu_kernels.h"
#include "engine/cpu/cpu_q8dot.h"

#include <math.h>
#include <string.h>

#include "engine/cpu/cpu_expf.h"
#include "model/tensor_types.h"

#define LANES 8

/* The fixed 8-lane horizontal reduction. */
static float hsum8(const float *a)
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static float gen_dot(int K, const float *w, const float *x)
{
    float acc[LANES] = {0};
    int K8 = K - K % LANES;
    for (int i = 0; i < K8; i += LANES)
        for (int j = 0; j < LANES; j++)
            acc[j] = acc[j] + w[i + j] * x[i + j];
    float s = hsum8(acc);
    for (int i = K8; i < K; i++)
        s = s + w[i] * x[i];
    return s;
}

/* Two rows x two tokens at a time: four independent accumulator sets. */
static void gen_gemm_f32(int K, const float *W, size_t ldw, int n_rows, const float *X,
                         size_t ldx, int n_tok, float *Y, size_t ldy)
{
    int K8 = K - K % LANES;
    int r = 0;
    for (; r + 2 <= n_rows; r += 2) {
        const float *w0 = W + (size_t)r * ldw, *w1 = w0 + ldw;
        int t = 0;
        for (; t + 2 <= n_tok; t += 2) {
            const float *x0 = X + (size_t)t * ldx, *x1 = x0 + ldx;
            float a00[LANES] = {0}, a01[LANES] = {0}, a10[LANES] = {0}, a11[LANES] = {0};
            for (int i = 0; i < K8; i += LANES)
                for (int j = 0; j < LANES; j++) {
                    a00[j] = a00[j] + w0[i + j] * x0[i + j];
                    a01[j] = a01[j] + w0[i + j] * x1[i + j];
                    a10[j] = a10[j] + w1[i + j] * x0[i + j];
                    a11[j] = a11[j] + w1[i + j] * x1[i + j];
                }
            float s00 = hsum8(a00), s01 = hsum8(a01), s10 = hsum8(a10), s11 = hsum8(a11);
            for (int i = K8; i < K; i++) {
                s00 = s00 + w0[i] * x0[i];
                s01 = s01 + w0[i] * x1[i];
                s10 = s10 + w1[i] * x0[i];
                s11 = s11 + w1[i] * x1[i];
            }
            Y[(size_t)t * ldy + r] = s00;
            Y[(size_t)(t + 1) * ldy + r] = s01;
            Y[(size_t)t * ldy + r + 1] = s10;
            Y[(size_t)(t + 1) * ldy + r + 1] = s11;
        }
        for (; t < n_tok; t++) {
            const float *x0 = X + (size_t)t * ldx;
            Y[(size_t)t * ldy + r] = gen_dot(K, w0, x0);
            Y[(size_t)t * ldy + r + 1] = gen_dot(K, w1, x0);
        }
    }
    for (; r < n_rows; r++)
        for (int t = 0; t < n_tok; t++)
            Y[(size_t)t * ldy + r] = gen_dot(K, W + (size_t)r * ldw, X + (size_t)t * ldx);
}

static void gen_dequant_q8_0(const void *src, float *dst, int n)
{
    kvv_dequantize_row(KVV_TYPE_Q8_0, src, dst, n);
}

static void gen_dequant_q4_0(const void *src, float *dst, int n)
{
    kvv_dequantize_row(KVV_TYPE_Q4_0, src, dst, n);
}

static void gen_gemv_q8_0(int K, const void *W, size_t row_bytes, int n_rows, const float *X,
                          size_t ldx, int n_tok, float *Y, size_t ldy)
{
    float row[4096];
    const uint8_t *wb = W;
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *src = wb + (size_t)r * row_bytes;
        /* Dequantize the row in pieces of up to 4096 elements; the 8-lane
         * accumulators carry over between pieces, so the order is the one
         * of a single pass over the whole row. */
        for (int t = 0; t < n_tok; t++) {
            float acc[LANES] = {0};
            for (int k0 = 0; k0 < K; k0 += 4096) {
                int kn = K - k0 < 4096 ? K - k0 : 4096;
                gen_dequant_q8_0(src + (size_t)(k0 / 32) * 34, row, kn);
                const float *x = X + (size_t)t * ldx + k0;
                for (int i = 0; i < kn; i += LANES)
                    for (int j = 0; j < LANES; j++)
                        acc[j] = acc[j] + row[i + j] * x[i + j];
            }
            Y[(size_t)t * ldy + r] = hsum8(acc);
        }
    }
}

static void gen_gemv_q8_0_x4(int K, const void *G, int n_groups, const float *x, float *y)
{
    const int nb = K / 32;
    for (int g = 0; g < n_groups; g++)
        for (int i = 0; i < 4; i++) {
            float acc[LANES] = {0};
            for (int b = 0; b < nb; b++) {
                float w[32];
                gen_dequant_q8_0((const uint8_t *)G + ((size_t)(g * nb + b) * 4 + i) * 34, w, 32);
                for (int k = 0; k < 32; k += LANES)
                    for (int j = 0; j < LANES; j++)
                        acc[j] = acc[j] + w[k + j] * x[b * 32 + k + j];
            }
            y[4 * g + i] = hsum8(acc);
        }
}

static void gen_axpy(int n, float a, const float *x, float *y)
{
    for (int i = 0; i < n; i++)
        y[i] = y[i] + a * x[i];
}

static void gen_wsum(int n, int D, int nh, const float *w, size_t ldw, const float *V,
                     size_t ldv, float *o, size_t ldo)
{
    for (int h = 0; h < nh; h++) {
        const float *wh = w + (size_t)h * ldw;
        float *oh = o + (size_t)h * ldo;
        for (int i = 0; i < D; i++)
            oh[i] = 0.0f;
        for (int p = 0; p < n; p++)
            if (wh[p] != 0.0f)
                gen_axpy(D, wh[p], V + (size_t)p * ldv, oh);
    }
}

static float gen_sum(int n, const float *x)
{
    float acc[LANES] = {0};
    int n8 = n - n % LANES;
    for (int i = 0; i < n8; i += LANES)
        for (int j = 0; j < LANES; j++)
            acc[j] = acc[j] + x[i + j];
    float s = hsum8(acc);
    for (int i = n8; i < n; i++)
        s = s + x[i];
    return s;
}

static void gen_scale(int n, float *x, float a)
{
    for (int i = 0; i < n; i++)
        x[i] = x[i] * a;
}

static void gen_silu_mul(int n, float *g, const float *u)
{
    for (int i = 0; i < n; i++)
        g[i] = kvv_cpu_silu_mul_inline(g[i], u[i]);
}

static void gen_exp_shift(int n, const float *s, float m, float *e)
{
    for (int i = 0; i < n; i++)
        e[i] = s[i] == -INFINITY ? 0.0f : kvv_cpu_expf_inline(s[i] - m);
}

static void gen_widen_f16(int n, const uint16_t *src, float *dst)
{
    for (int i = 0; i < n; i++)
        dst[i] = kvv_fp16_to_fp32(src[i]);
}

static void gen_widen_bf16(int n, const uint16_t *src, float *dst)
{
    for (int i = 0; i < n; i++)
        dst[i] = kvv_bf16_to_fp32(src[i]);
}

const kvv_cpu_kernels kvv_cpu_kernels_generic = {
    .name = "generic",
    .lanes = LANES,
    .fused = 0,
    .gemm_f32 = gen_gemm_f32,
    .gemv_q8_0 = gen_gemv_q8_0,
    .gemv_q8_0_x4 = gen_gemv_q8_0_x4,
    .dot = gen_dot,
    .axpy = gen_axpy,
    .wsum = gen_wsum,
    .sum = gen_sum,
    .scale = gen_scale,
    .widen_f16 = gen_widen_f16,
    .widen_bf16 = gen_widen_bf16,
    .dequant_q8_0 = gen_dequant_q8_0,
    .dequant_q4_0 = gen_dequant_q4_0,
    .silu_mul = gen_silu_mul,
    .exp_shift = gen_exp_shift,
    .quantize_act = kvv_cpu_quantize_act_generic,
    .gemm_q8_0_q8 = kvv_cpu_gemm_q8_0_q8_generic,
    .gemm_q4_0_q8 = kvv_cpu_gemm_q4_0_q8_generic,
    .quantize_q8_k = kvv_cpu_quantize_q8_k_generic,
    .quantize_q8_1 = kvv_cpu_quantize_q8_1_generic,
    .gemm_kq = kvv_cpu_kq_generic,
    .pack_x16 = kvv_cpu_x16_pack_none,
    .rows_x16 = kvv_cpu_x16_rows_generic,
    .gemm_x16 = kvv_cpu_x16_generic,
};
