/*
 * kmath.c — portable exp, tanh, sin/cos and pow (reference/kmath.h).
 *
 * Only + - * / on doubles, integer bit manipulation and int<->double
 * conversions: all correctly rounded by IEEE 754, so every result is the same
 * on every conforming machine. Polynomials are truncated Taylor series
 * evaluated by Horner's rule, innermost (highest degree) coefficient first.
 * Coefficients are the nearest doubles to 1/n! (resp. 1/(2n+1)), written as
 * shortest round-trip decimals.
 */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "reference/kmath.h"

/* ln 2 split (fdlibm): LN2_HI has 32 significant bits, so k * LN2_HI is
 * exact for |k| < 2^21. */
static const double LN2_HI = 6.93147180369123816490e-01;
static const double LN2_LO = 1.90821492927058770002e-10;
static const double INV_LN2 = 1.44269504088896338700e+00;

/* pi/2 split (fdlibm's __ieee754_rem_pio2): P1 and P2 have 33 significant
 * bits, so k * P1 and k * P2 are exact for |k| < 2^20; P3 is the rest. */
static const double PIO2_1 = 1.57079632673412561417e+00;
static const double PIO2_2 = 6.07710050630396597660e-11;
static const double PIO2_2T = 2.02226624879595063154e-21;
static const double INV_PIO2 = 6.36619772367581382433e-01;

/* expm1(r) = r + r^2/2! + ... + r^13/13! for |r| <= 0.35: the first omitted
 * term is below 1e-17 relative. */
static const double EXPM1_C[12] = {
    0.5,                    /* 1/2! */
    0.16666666666666666,    /* 1/3! */
    0.041666666666666664,   /* 1/4! */
    0.008333333333333333,   /* 1/5! */
    0.001388888888888889,   /* 1/6! */
    0.0001984126984126984,  /* 1/7! */
    2.48015873015873e-05,   /* 1/8! */
    2.7557319223985893e-06, /* 1/9! */
    2.755731922398589e-07,  /* 1/10! */
    2.505210838544172e-08,  /* 1/11! */
    2.08767569878681e-09,   /* 1/12! */
    1.6059043836821613e-10, /* 1/13! */
};

/* sin(r) = r + r^3 * (S[0] + r^2 (S[1] + ...)) for |r| <= pi/4 + eps. */
static const double SIN_C[9] = {
    -0.16666666666666666,   /* -1/3! */
    0.008333333333333333,   /* +1/5! */
    -0.0001984126984126984, /* -1/7! */
    2.7557319223985893e-06, /* +1/9! */
    -2.505210838544172e-08, /* -1/11! */
    1.6059043836821613e-10, /* +1/13! */
    -7.647163731819816e-13, /* -1/15! */
    2.8114572543455206e-15, /* +1/17! */
    -8.22063524662433e-18,  /* -1/19! */
};

/* cos(r) = 1 + r^2 * (C[0] + r^2 (C[1] + ...)). */
static const double COS_C[9] = {
    -0.5,                    /* -1/2! */
    0.041666666666666664,    /* +1/4! */
    -0.001388888888888889,   /* -1/6! */
    2.48015873015873e-05,    /* +1/8! */
    -2.755731922398589e-07,  /* -1/10! */
    2.08767569878681e-09,    /* +1/12! */
    -1.1470745597729725e-11, /* -1/14! */
    4.779477332387385e-14,   /* +1/16! */
    -1.5619206968586225e-16, /* -1/18! */
};

/* log(m) = 2 s (1 + s^2/3 + s^4/5 + ... + s^22/23), s = (m-1)/(m+1),
 * |s| <= 0.1716 for m in [sqrt(1/2), sqrt(2)). */
static const double LOG_C[11] = {
    0.3333333333333333,   /* 1/3 */
    0.2,                  /* 1/5 */
    0.14285714285714285,  /* 1/7 */
    0.1111111111111111,   /* 1/9 */
    0.09090909090909091,  /* 1/11 */
    0.07692307692307693,  /* 1/13 */
    0.06666666666666667,  /* 1/15 */
    0.058823529411764705, /* 1/17 */
    0.05263157894736842,  /* 1/19 */
    0.047619047619047616, /* 1/21 */
    0.043478260869565216, /* 1/23 */
};

/* ------------------------------------------------------------ helpers */

static double bits_to_double(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static uint64_t double_to_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* 2^k for -1022 <= k <= 1023, built from its bits (exact). */
static double pow2i(int k)
{
    return bits_to_double((uint64_t)(k + 1023) << 52);
}

/* Nearest integer of t (ties away from zero); |t| < 2^30. */
static int nearest_int(double t)
{
    return (int)(t < 0 ? t - 0.5 : t + 0.5);
}

static float float_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float float_nan(void)
{
    return float_bits(0x7fc00000u);
}

/* Round a finite double to float once; beyond the float range: +-inf, as
 * round-to-nearest gives (and without relying on an out-of-range cast). */
static float to_float(double v)
{
    static const double OVER = 0x1.ffffffp127; /* midpoint FLT_MAX .. 2^128 */
    if (v >= OVER)
        return float_bits(0x7f800000u);
    if (v <= -OVER)
        return float_bits(0xff800000u);
    if (v > FLT_MAX)
        return FLT_MAX;
    if (v < -FLT_MAX)
        return -FLT_MAX;
    return (float)v;
}


/* expm1(r) for |r| <= 0.35 by Horner, highest degree first. */
static double expm1_poly(double r)
{
    double p = EXPM1_C[11];
    for (int i = 10; i >= 0; i--)
        p = EXPM1_C[i] + r * p;
    return r + r * (r * p);
}

/* ------------------------------------------------------------ double kernels */

double kvv_exp_d(double x)
{
    /* x = k ln2 + r, |r| <= ln2/2 (+ rounding), exp(x) = 2^k (1 + expm1(r)). */
    int k = nearest_int(x * INV_LN2);
    double r = (x - (double)k * LN2_HI) - (double)k * LN2_LO;
    double s = pow2i(k);
    return s + s * expm1_poly(r);
}

double kvv_expm1_d(double x)
{
    if (x < 0.34)
        return expm1_poly(x);
    int k = nearest_int(x * INV_LN2);
    double r = (x - (double)k * LN2_HI) - (double)k * LN2_LO;
    double s = pow2i(k);
    return (s - 1.0) + s * expm1_poly(r); /* s - 1 exact; both terms >= 0.29 s */
}

double kvv_log_d(double x)
{
    uint64_t u = double_to_bits(x);
    int e = (int)((u >> 52) & 0x7ff) - 1023;
    double m = bits_to_double((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull); /* [1,2) */
    if (m > 1.4142135623730951) { /* sqrt(2) */
        m = m * 0.5;
        e = e + 1;
    }
    double s = (m - 1.0) / (m + 1.0);
    double s2 = s * s;
    double p = LOG_C[10];
    for (int i = 9; i >= 0; i--)
        p = LOG_C[i] + s2 * p;
    double logm = 2.0 * s + 2.0 * s * (s2 * p);
    return (double)e * LN2_HI + ((double)e * LN2_LO + logm);
}

/* ------------------------------------------------------------ float functions */

float kvv_expf(float x)
{
    if (x != x)
        return x + x;
    if (x > 100.0f)
        return to_float(0x1p200);
    if (x < -110.0f)
        return 0.0f;
    return to_float(kvv_exp_d((double)x));
}

float kvv_tanhf(float x)
{
    if (x != x)
        return x + x;
    double a = x < 0 ? -(double)x : (double)x;
    double t;
    if (a > 20.0) {
        t = 1.0;
    } else {
        /* tanh(a) = expm1(2a) / (expm1(2a) + 2): no cancellation near 0. */
        double em = kvv_expm1_d(2.0 * a);
        t = em / (em + 2.0);
    }
    float f = (float)t;
    return x < 0 || (x == 0 && 1.0f / x < 0) ? -f : f; /* tanh(-0) = -0 */
}

void kvv_sincosf(float x, float *s, float *c)
{
    double xd = (double)x;
    if (!(xd <= 1048576.0 && xd >= -1048576.0)) { /* also NaN */
        *s = *c = float_nan();
        return;
    }
    /* x = k pi/2 + r, |r| <= pi/4 (+ rounding). */
    int k = nearest_int(xd * INV_PIO2);
    double r = ((xd - (double)k * PIO2_1) - (double)k * PIO2_2) - (double)k * PIO2_2T;
    double r2 = r * r;
    double ps = SIN_C[8];
    for (int i = 7; i >= 0; i--)
        ps = SIN_C[i] + r2 * ps;
    double sn = r + r * (r2 * ps);
    double pc = COS_C[8];
    for (int i = 7; i >= 0; i--)
        pc = COS_C[i] + r2 * pc;
    double cs = 1.0 + r2 * pc;
    switch (k & 3) {
    case 0: *s = (float)sn; *c = (float)cs; break;
    case 1: *s = (float)cs; *c = (float)-sn; break;
    case 2: *s = (float)-sn; *c = (float)-cs; break;
    default: *s = (float)-cs; *c = (float)sn; break;
    }
}

float kvv_sinf(float x)
{
    float s, c;
    kvv_sincosf(x, &s, &c);
    return s;
}

float kvv_cosf(float x)
{
    float s, c;
    kvv_sincosf(x, &s, &c);
    return c;
}

float kvv_powf(float x, float y)
{
    if (y == 0.0f)
        return 1.0f;
    if (!(x > 0.0f) || x > FLT_MAX || y != y || y > FLT_MAX || y < -FLT_MAX)
        return float_nan();
    double z = (double)y * kvv_log_d((double)x);
    if (z > 100.0)
        return to_float(0x1p200);
    if (z < -110.0)
        return 0.0f;
    return to_float(kvv_exp_d(z));
}
