/*
 * cpu_math.c — element-wise math of the cpu engine: exp, tanh, SiLU,
 * GELU-tanh, RMSNorm and RoPE.
 *
 * Element-wise functions are scalar C with separately rounded operations
 * (-ffp-contract=off) and no libm transcendental, so a value's result never
 * depends on where it sits in a batch (even if the compiler vectorises a
 * loop, each lane does the same rounded operations). The RoPE tables are
 * built once at open in double precision and rounded to float.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_expf.h"
#include "engine/cpu/cpu_impl.h"

float kvv_cpu_expf(float x)
{
    return kvv_cpu_expf_inline(x);
}

/* e^y - 1 without cancellation for small |y| (Taylor to y^9 below 0.35). */
static float expm1_small(float y)
{
    if (y > 0.35f || y < -0.35f)
        return kvv_cpu_expf(y) - 1.0f;
    float p = 1.0f / 362880.0f;
    p = p * y + 1.0f / 40320.0f;
    p = p * y + 1.0f / 5040.0f;
    p = p * y + 1.0f / 720.0f;
    p = p * y + 1.0f / 120.0f;
    p = p * y + 1.0f / 24.0f;
    p = p * y + 1.0f / 6.0f;
    p = p * y + 0.5f;
    p = p * y + 1.0f;
    return p * y;
}

/* tanh(x) = e/(e+2) with e = expm1(2|x|), sign restored; saturates at 1. */
float kvv_cpu_tanhf(float x)
{
    if (x != x)
        return x;
    float a = fabsf(x);
    if (a > 9.0f)
        return x > 0 ? 1.0f : -1.0f;
    float e = expm1_small(2.0f * a);
    float t = e / (e + 2.0f);
    return x < 0 ? -t : t;
}

float kvv_cpu_silu(float x)
{
    return x / (1.0f + kvv_cpu_expf_inline(-x));
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
float kvv_cpu_gelu_tanh(float x)
{
    float inner = 0.7978845608f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + kvv_cpu_tanhf(inner));
}

void kvv_cpu_rmsnorm(const kvv_cpu *c, int n, int len, const float *x, size_t ldx,
                     const float *w, float eps, float *y, size_t ldy)
{
    for (int t = 0; t < n; t++) {
        const float *xt = x + (size_t)t * ldx;
        float *yt = y + (size_t)t * ldy;
        float ss = c->k->dot(len, xt, xt);
        float scale = 1.0f / sqrtf(ss / (float)len + eps);
        for (int i = 0; i < len; i++)
            yt[i] = (xt[i] * scale) * w[i];
    }
}

bool kvv_cpu_rope_init(kvv_cpu *c)
{
    const kvv_hparams *hp = c->hp;
    int half = hp->n_rot / 2;
    if (half <= 0)
        return true;
    for (int b = 0; b < 2; b++) {
        double base = b == 0 ? hp->rope_base : hp->rope_base_swa;
        if (b == 1 && hp->rope_base_swa == hp->rope_base) {
            c->rope_cos[1] = c->rope_cos[0];
            c->rope_sin[1] = c->rope_sin[0];
            break;
        }
        size_t n = (size_t)c->n_ctx * (size_t)half;
        c->rope_cos[b] = malloc(n * sizeof(float));
        c->rope_sin[b] = malloc(n * sizeof(float));
        if (!c->rope_cos[b] || !c->rope_sin[b])
            return false;
        double *inv = malloc((size_t)half * sizeof(double));
        if (!inv)
            return false;
        for (int i = 0; i < half; i++) {
            inv[i] = pow(base, -2.0 * i / (double)hp->n_rot);
            if (hp->rope_freqs)
                inv[i] /= (double)hp->rope_freqs[i];
        }
        for (int p = 0; p < c->n_ctx; p++)
            for (int i = 0; i < half; i++) {
                double th = (double)p * inv[i];
                c->rope_cos[b][(size_t)p * half + i] = (float)cos(th);
                c->rope_sin[b][(size_t)p * half + i] = (float)sin(th);
            }
        free(inv);
    }
    return true;
}

void kvv_cpu_rope(const kvv_cpu *c, int layer, int n_heads, int head_dim, int pos, float *row)
{
    const kvv_hparams *hp = c->hp;
    int half = hp->n_rot / 2;
    if (half <= 0)
        return;
    int b = hp->swa_layer[layer] ? 1 : 0;
    const float *cs = c->rope_cos[b] + (size_t)pos * half;
    const float *sn = c->rope_sin[b] + (size_t)pos * half;
    for (int h = 0; h < n_heads; h++) {
        float *x = row + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            int i0, i1;
            if (hp->rope_type == KVV_ROPE_NORM) {
                i0 = 2 * i;
                i1 = 2 * i + 1;
            } else {
                i0 = i;
                i1 = i + half;
            }
            float x0 = x[i0], x1 = x[i1];
            x[i0] = x0 * cs[i] - x1 * sn[i];
            x[i1] = x0 * sn[i] + x1 * cs[i];
        }
    }
}
