/*
 * cpu_expf.h — the cpu engine's scalar exp, shared by cpu_math.c and the
 * kernel files (private). The AVX2/AVX-512 kernels vectorise exactly these
 * operations (separately rounded, no FMA: -ffp-contract=off), so a value's
 * result never depends on whether it fell in a vector body or a scalar tail.
 *
 * exp(x): x = k ln2 + r with |r| <= ln2/2 (two-part ln2), a degree-7 Taylor
 * polynomial for e^r (truncation < 2e-9 relative), scaled by 2^k with one
 * exact power-of-two multiply (the float 2^k built from its bits; the same
 * correctly rounded product ldexpf would give). NaN stays NaN; below
 * ln(FLT_MIN) the result is 0, above ln(FLT_MAX) +inf.
 */
#ifndef KVV_CPU_EXPF_H
#define KVV_CPU_EXPF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define KVV_CPU_EXP_LO (-87.33654f)
#define KVV_CPU_EXP_HI 88.72283f
#define KVV_CPU_LOG2E 1.44269504f
#define KVV_CPU_LN2_HI 0.693145751953125f
#define KVV_CPU_LN2_LO 1.428606765330187e-06f

static inline float kvv_cpu_expf_inline(float x)
{
    if (x != x)
        return x;
    if (x < KVV_CPU_EXP_LO)
        return 0.0f;
    if (x > KVV_CPU_EXP_HI)
        return INFINITY;
    float kf = x * KVV_CPU_LOG2E;
    int k = (int)(kf >= 0.0f ? kf + 0.5f : kf + -0.5f);
    float fk = (float)k;
    float r = (x - fk * KVV_CPU_LN2_HI) - fk * KVV_CPU_LN2_LO;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    if (k > 127) { /* only k = 128: 2^128 is not a float */
        p = p * 2.0f;
        k -= 1;
    }
    uint32_t bits = (uint32_t)(k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* SiLU times the up projection: (x / (1 + exp(-x))) * u. */
static inline float kvv_cpu_silu_mul_inline(float x, float u)
{
    return (x / (1.0f + kvv_cpu_expf_inline(-x))) * u;
}

#endif
