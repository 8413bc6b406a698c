/*
 * ref_ops.c — the reference engine's scalar kernels (declared in
 * reference/ref_internal.h). Each reduction's order is fixed here and depends
 * only on its length; docs/reference-engine.md lists them all.
 *
 * Everything is fp32 except the accumulators that ggml itself keeps in
 * double (the RMSNorm sum of squares and the softmax denominator), which
 * keeps the reference close to llama.cpp without costing determinism.
 */
#include <math.h>
#include <string.h>

#include "reference/kmath.h"
#include "reference/ref_internal.h"

/* ------------------------------------------------------------ dot products */

/* Order: 8 lanes s[0..7]; lane j accumulates a[i]*b[i] for i = j, j+8, ...
 * over the first 8*floor(n/8) elements, in ascending i (each lane starts at
 * +0). Then t = ((s0+s1)+(s2+s3)) + ((s4+s5)+(s6+s7)), then the n % 8 tail
 * elements are added to t in ascending order. Every product is rounded to
 * fp32 before it is added (-ffp-contract=off: no FMA). The lanes are
 * independent, so a compiler may vectorize this loop without changing any
 * result bit. */
float ref_dot(const float *a, const float *b, int n)
{
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += a[i + j] * b[i + j];
    float t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++)
        t += a[i] * b[i];
    return t;
}

float ref_dot_reversed(const float *a, const float *b, int n)
{
    float t = 0.0f;
    for (int i = n - 1; i >= 0; i--)
        t += a[i] * b[i];
    return t;
}

/* Four dot products of one weight row w with four token rows, each in
 * exactly ref_dot's order (the same 8 lanes, the same combination, the same
 * tail), so out[k] is bit-identical to ref_dot(w, x_k, n). Sharing the loads
 * of w is only a speed-up. */
static void dot4(const float *w, const float *x0, const float *x1, const float *x2,
                 const float *x3, int n, float out[4])
{
    float s0[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s1[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float s2[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s3[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const float *wi = w + i;
        for (int j = 0; j < 8; j++)
            s0[j] += wi[j] * x0[i + j];
        for (int j = 0; j < 8; j++)
            s1[j] += wi[j] * x1[i + j];
        for (int j = 0; j < 8; j++)
            s2[j] += wi[j] * x2[i + j];
        for (int j = 0; j < 8; j++)
            s3[j] += wi[j] * x3[i + j];
    }
    float t0 = ((s0[0] + s0[1]) + (s0[2] + s0[3])) + ((s0[4] + s0[5]) + (s0[6] + s0[7]));
    float t1 = ((s1[0] + s1[1]) + (s1[2] + s1[3])) + ((s1[4] + s1[5]) + (s1[6] + s1[7]));
    float t2 = ((s2[0] + s2[1]) + (s2[2] + s2[3])) + ((s2[4] + s2[5]) + (s2[6] + s2[7]));
    float t3 = ((s3[0] + s3[1]) + (s3[2] + s3[3])) + ((s3[4] + s3[5]) + (s3[6] + s3[7]));
    for (; i < n; i++) {
        t0 += w[i] * x0[i];
        t1 += w[i] * x1[i];
        t2 += w[i] * x2[i];
        t3 += w[i] * x3[i];
    }
    out[0] = t0;
    out[1] = t1;
    out[2] = t2;
    out[3] = t3;
}

/* ------------------------------------------------------------ weight rows and matmul */

ref_mat ref_mat_f32(const float *W, int rows, int cols)
{
    ref_mat m;
    m.data = (const uint8_t *)W;
    m.row_bytes = (size_t)cols * sizeof(float);
    m.type = KVV_TYPE_F32;
    m.rows = rows;
    m.cols = cols;
    return m;
}

/* A stored F32 row is the fp32 array itself on a little-endian host. */
static bool host_little_endian(void)
{
    const uint32_t one = 1;
    uint8_t low;
    memcpy(&low, &one, 1);
    return low == 1;
}

/* The weights stay as the file stores them; a row is widened to fp32 when
 * it is used. kvv_dequantize_row is exact per element (each weight is
 * q * d or an exact format conversion, rounded once), so a dot product
 * with this row sees the values a full fp32 copy would hold. */
const float *ref_mat_row(const ref_mat *W, int r, float *buf)
{
    const uint8_t *src = W->data + (size_t)r * W->row_bytes;
    if (W->type == KVV_TYPE_F32 && (uintptr_t)src % sizeof(float) == 0 && host_little_endian())
        return (const float *)(const void *)src;
    if (!kvv_dequantize_row(W->type, src, buf, W->cols))
        for (int i = 0; i < W->cols; i++)
            buf[i] = NAN; /* unreachable for a W checked at open */
    return buf;
}

/* Rows outer, tokens inner: one weight row is dequantized once and reused
 * for all n tokens while it is in cache (four tokens at a time share its
 * loads). Each output element is exactly one ref_dot (or
 * ref_dot_reversed), so a token's result does not depend on the other
 * tokens of the batch or on how they group. */
void ref_matmul_mat(float *out, const float *x, const ref_mat *W, const float *bias, int n,
                    bool reversed, float *wrow)
{
    const int cols = W->cols;
    const size_t C = (size_t)cols, R = (size_t)W->rows;
    for (int r = 0; r < W->rows; r++) {
        const float *w = ref_mat_row(W, r, wrow);                 /* (cols) */
        int t = 0;
        if (!reversed)
            for (; t + 4 <= n; t += 4) {
                float d[4];
                dot4(w, x + (size_t)t * C, x + (size_t)(t + 1) * C, x + (size_t)(t + 2) * C,
                     x + (size_t)(t + 3) * C, cols, d);
                for (int k = 0; k < 4; k++)
                    out[(size_t)(t + k) * R + (size_t)r] = bias ? d[k] + bias[r] : d[k];
            }
        for (; t < n; t++) {
            const float *xt = x + (size_t)t * C;                  /* (cols) */
            float d = reversed ? ref_dot_reversed(w, xt, cols) : ref_dot(w, xt, cols);
            if (bias)
                d = d + bias[r];
            out[(size_t)t * R + (size_t)r] = d;
        }
    }
}

void ref_matmul(float *out, const float *x, const float *W, const float *bias, int n, int rows,
                int cols, bool reversed)
{
    const ref_mat m = ref_mat_f32(W, rows, cols);
    ref_matmul_mat(out, x, &m, bias, n, reversed, NULL);
}

/* ------------------------------------------------------------ normalization */

void ref_rmsnorm(float *y, const float *x, const float *w, int n, int d, float eps)
{
    for (int t = 0; t < n; t++) {
        const float *xt = x + (size_t)t * (size_t)d;   /* (d) */
        float *yt = y + (size_t)t * (size_t)d;         /* (d) */
        double sum = 0.0;
        for (int i = 0; i < d; i++)
            sum += (double)(xt[i] * xt[i]);
        float mean = (float)(sum / (double)d);
        float scale = 1.0f / sqrtf(mean + eps);        /* IEEE sqrt: correctly rounded */
        for (int i = 0; i < d; i++)
            yt[i] = (xt[i] * scale) * w[i];
    }
}

/* ------------------------------------------------------------ RoPE */

/* cs[2i] = cos(theta_i), cs[2i+1] = sin(theta_i), i < n_rot/2, as ggml's
 * rope cache: theta_0 = pos, theta_{i+1} = theta_i * theta_scale (fp32),
 * angle = theta_i / ff_i. */
void ref_rope_angles(float *cs, int pos, int n_rot, float theta_scale, const float *freq_factors)
{
    float theta = (float)pos;
    for (int i = 0; i < n_rot / 2; i++) {
        float angle = freq_factors ? theta / freq_factors[i] : theta;
        kvv_sincosf(angle, &cs[2 * i + 1], &cs[2 * i]);
        theta = theta * theta_scale;
    }
}

/* y0 = x0*c - x1*s, y1 = x0*s + x1*c with every product rounded to fp32
 * before the add. The four products go through a small array first: GCC's
 * vectorizer recognizes the in-register form as a complex multiplication
 * and, with FMA enabled (seen with -march=native on x86-64), emits a fused
 * vfmaddsub even under -ffp-contract=off, which would change bits. */
#define ROPE_CHUNK 32
void ref_rope_apply(float *x, const float *cs, int n_rot, kvv_rope_type type)
{
    const int half = n_rot / 2;
    float p[4][ROPE_CHUNK];   /* x0*c, x1*s, x0*s, x1*c of up to 32 pairs */
    for (int base = 0; base < half; base += ROPE_CHUNK) {
        const int m = half - base < ROPE_CHUNK ? half - base : ROPE_CHUNK;
        for (int k = 0; k < m; k++) {
            const int i = base + k;
            /* NORM rotates (x[2i], x[2i+1]); NEOX rotates (x[i], x[i + n_rot/2]). */
            const float x0 = type == KVV_ROPE_NORM ? x[2 * i] : x[i];
            const float x1 = type == KVV_ROPE_NORM ? x[2 * i + 1] : x[i + half];
            const float c = cs[2 * i], s = cs[2 * i + 1];
            p[0][k] = x0 * c;
            p[1][k] = x1 * s;
            p[2][k] = x0 * s;
            p[3][k] = x1 * c;
        }
        for (int k = 0; k < m; k++) {
            const int i = base + k;
            const int i0 = type == KVV_ROPE_NORM ? 2 * i : i;
            const int i1 = type == KVV_ROPE_NORM ? 2 * i + 1 : i + half;
            x[i0] = p[0][k] - p[1][k];
            x[i1] = p[2][k] + p[3][k];
        }
    }
}

/* ------------------------------------------------------------ softmax, activations */

void ref_softmax(float *s, int n)
{
    if (n <= 0)
        return;
    float m = s[0];
    for (int j = 1; j < n; j++)
        if (s[j] > m)
            m = s[j];
    double sum = 0.0;
    for (int j = 0; j < n; j++) {
        float e = kvv_expf(s[j] - m);
        sum += (double)e;
        s[j] = e;
    }
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; j++)
        s[j] = s[j] * inv;
}

float ref_silu(float x)
{
    return x / (1.0f + kvv_expf(-x));
}

float ref_gelu_tanh(float x)
{
    const float SQRT_2_OVER_PI = 0.79788456080286535587989211986876f;
    const float GELU_COEF_A = 0.044715f;
    return (0.5f * x) * (1.0f + kvv_tanhf((SQRT_2_OVER_PI * x) * (1.0f + (GELU_COEF_A * x) * x)));
}

float ref_softcap(float x, float cap)
{
    return kvv_tanhf(x * (1.0f / cap)) * cap;
}
