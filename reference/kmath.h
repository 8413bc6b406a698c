/*
 * kmath.h — kvverify's portable transcendental functions.
 *
 * libm's expf, tanhf, sinf/cosf and powf differ in the last bit between libm
 * versions and CPUs, which would make the reference engine's output depend on
 * the machine. These functions use only IEEE-754 + - * / (correctly rounded
 * everywhere), integer bit manipulation and conversions, in one fixed order,
 * so they give the same bits on every x86-64 / aarch64 machine, compiler and
 * -O level (the build uses -ffp-contract=off, so no operation is fused).
 *
 * Method: each float function widens its argument to double, reduces the
 * range (Cody–Waite with multi-part constants), evaluates a Taylor
 * polynomial by Horner's rule in double, and rounds the double result to
 * float once. The double intermediate is accurate to a few 1e-16 relative,
 * so the float result is the correctly rounded one except when the exact
 * value lies within ~1e-16 relative of a rounding boundary.
 *
 * Error bound (documented in docs/reference-engine.md, measured against MPFR
 * by tests/reference/test_kmath.c over dense samples of every range below):
 * at most 0.5 ULP + 2^-40 ULP, i.e. < 0.501 ULP; the test asserts < 0.501.
 *
 * Domains (the engine uses only these):
 *   kvv_expf    all floats (overflow to +inf above 88.72, 0 below -103.98;
 *               subnormal results rounded once, correctly)
 *   kvv_tanhf   all floats
 *   kvv_sincosf |x| <= 2^20 (about 1.05e6 rad; RoPE angles are pos * theta
 *               with pos < n_ctx <= 2^20); outside: NaN for both
 *   kvv_powf    x > 0 finite, |y * log(x)| < 700: result may over/underflow to
 *               inf/0 like powf; x == 0, x < 0, non-finite: NaN (the engine
 *               never calls it so)
 * NaN in gives NaN out.
 *
 *   float c, s; kvv_sincosf(theta, &s, &c);
 *   float e = kvv_expf(-x);
 */
#ifndef KVV_KMATH_H
#define KVV_KMATH_H

float kvv_expf(float x);
float kvv_tanhf(float x);
float kvv_sinf(float x);
float kvv_cosf(float x);
void kvv_sincosf(float x, float *s, float *c);
float kvv_powf(float x, float y);

/* The double-precision kernels the float functions are built from, exposed
 * for tests. Accurate to a few ulp of double over the domains above. */
double kvv_exp_d(double x);   /* |x| <= 700 */
double kvv_expm1_d(double x); /* 0 <= x <= 700 */
double kvv_log_d(double x);   /* x > 0 finite, normal */

#endif
