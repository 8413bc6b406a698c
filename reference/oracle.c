/*
 * oracle.c — see oracle.h; the definitions of "exact" are in docs/oracle.md.
 *
 * Three ways a result is made:
 *   1. One MPFR operation on exact inputs (exp, tanh, sin, cos, pow):
 *      MPFR rounds it correctly to 24 bits; binary32's exponent range is
 *      then applied with mpfr_check_range + mpfr_subnormalize, which use
 *      the ternary value so the subnormal rounding is not a double rounding.
 *   2. Exact values (dot products): products of two floats are exact in 48
 *      bits; mpfr_sum rounds their sum correctly in one step.
 *   3. Composite expressions (RMSNorm, softmax, RoPE, SiLU, GELU, soft-cap):
 *      Ziv's strategy. An evaluator computes an approximation v at working
 *      precision p and a bound k such that |v - exact| < 2^(k - p) |v|
 *      (k is generous: 8 plus the bits cancellation or an exponential's
 *      argument can cost). If mpfr_can_round says every real in that
 *      interval rounds to the same binary32 — tested against 25-bit
 *      boundaries, which contain every binary32 number and every midpoint
 *      at any binary32 exponent, subnormals included — v is rounded;
 *      otherwise p doubles, up to 8192 bits.
 */
#include "reference/oracle.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpfr.h>

#define PREC_START 128
#define PREC_MAX 8192
#define PREC_EXACT_DIFF 320 /* a - b of two floats is exact in 24 + 127 + 149 bits */
#define K_EXACT (-1)        /* evaluator result is exact */

struct kvv_oracle {
    mpfr_t r24;            /* the 24-bit result being rounded */
    mpfr_t v;              /* Ziv: the approximation */
    mpfr_t t[6];           /* scratch */
    mpfr_t *arr;           /* per-element scratch (dot products, softmax) */
    mpfr_ptr *ptrs;        /* pointers to arr for mpfr_sum */
    size_t arr_cap;
    mpfr_prec_t arr_prec;
    kvv_oracle_stats stats;
};

/* ---------------------------------------------------------------- life */

kvv_oracle *kvv_oracle_new(void)
{
    kvv_oracle *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    mpfr_init2(o->r24, 24);
    mpfr_init2(o->v, PREC_START);
    for (int i = 0; i < 6; i++)
        mpfr_init2(o->t[i], PREC_START);
    return o;
}

static void free_arr(kvv_oracle *o)
{
    for (size_t i = 0; i < o->arr_cap; i++)
        mpfr_clear(o->arr[i]);
    free(o->arr);
    free(o->ptrs);
    o->arr = NULL;
    o->ptrs = NULL;
    o->arr_cap = 0;
}

void kvv_oracle_free(kvv_oracle *o)
{
    if (o == NULL)
        return;
    free_arr(o);
    mpfr_clear(o->r24);
    mpfr_clear(o->v);
    for (int i = 0; i < 6; i++)
        mpfr_clear(o->t[i]);
    free(o);
    mpfr_free_cache(); /* MPFR's constant caches (pi) of this thread */
}

kvv_oracle_stats kvv_oracle_get_stats(const kvv_oracle *o)
{
    return o->stats;
}

/* n scratch values of precision prec (contents undefined). 0 on OOM. */
static int need_arr(kvv_oracle *o, size_t n, mpfr_prec_t prec)
{
    if (n > o->arr_cap) {
        free_arr(o);
        size_t cap = n < 64 ? 64 : n;
        o->arr = malloc(cap * sizeof *o->arr);
        o->ptrs = malloc(cap * sizeof *o->ptrs);
        if (o->arr == NULL || o->ptrs == NULL) {
            free(o->arr);
            free(o->ptrs);
            o->arr = NULL;
            o->ptrs = NULL;
            return 0;
        }
        for (size_t i = 0; i < cap; i++) {
            mpfr_init2(o->arr[i], prec);
            o->ptrs[i] = o->arr[i];
        }
        o->arr_cap = cap;
        o->arr_prec = prec;
    }
    if (o->arr_prec != prec) {
        for (size_t i = 0; i < o->arr_cap; i++)
            mpfr_set_prec(o->arr[i], prec);
        o->arr_prec = prec;
    }
    return 1;
}

/* ------------------------------------------------------------- rounding */

static float nan_f32(void)
{
    uint32_t u = 0x7fc00000u;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* r24 holds a 24-bit rounding (ternary t) of a real y in the default
 * exponent range: apply binary32's range (overflow to inf, gradual
 * underflow) and return it as a float. */
static float finish24(kvv_oracle *o, int t)
{
    o->stats.results++;
    if (mpfr_nan_p(o->r24))
        return nan_f32();
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    /* binary32 in MPFR's convention (mantissa in [1/2, 1)): normal numbers
     * have exponents -125..128, subnormals down to 2^-149 = 0.5 * 2^-148 */
    mpfr_set_emin(-148);
    mpfr_set_emax(128);
    t = mpfr_check_range(o->r24, t, MPFR_RNDN);
    mpfr_subnormalize(o->r24, t, MPFR_RNDN);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    return mpfr_get_flt(o->r24, MPFR_RNDN); /* exact: r24 is a binary32 value */
}

/* Round v (exact, or certified by can_round) once to binary32. */
static float round_v(kvv_oracle *o, mpfr_srcptr v)
{
    int t = mpfr_set(o->r24, v, MPFR_RNDN);
    return finish24(o, t);
}

/* ------------------------------------------------------- Ziv's loop */

/* Round the approximation v (precision p; |v - exact| < 2^(k-p) |v|, or
 * k == K_EXACT) into *out if the rounding is certain, or p is the maximum
 * (counted as unresolved). A zero or inf with k < p - 32 is an MPFR under-
 * or overflow, far outside binary32's range: rounded as is.
 * @return 1 when *out was written. */
static int try_round(kvv_oracle *o, mpfr_srcptr v, mpfr_prec_t p, long k, float *out)
{
    if (k == K_EXACT || mpfr_nan_p(v) || (k < (long)p - 32 &&
        (mpfr_zero_p(v) || mpfr_inf_p(v) || mpfr_can_round(v, p - k, MPFR_RNDN, MPFR_RNDZ, 25)))) {
        *out = round_v(o, v);
        return 1;
    }
    if (p >= PREC_MAX) {
        o->stats.unresolved++;
        *out = round_v(o, v);
        return 1;
    }
    return 0;
}

typedef long (*eval_fn)(kvv_oracle *o, mpfr_prec_t p, const void *arg);

/* Ziv's loop: f leaves its approximation in o->v and returns k (bits that
 * may be wrong) or K_EXACT. */
static float ziv(kvv_oracle *o, eval_fn f, const void *arg)
{
    float out = 0.0f;
    for (mpfr_prec_t p = PREC_START;; p *= 2) {
        mpfr_set_prec(o->v, p);
        for (int i = 0; i < 6; i++)
            mpfr_set_prec(o->t[i], p);
        long k = f(o, p, arg);
        if (try_round(o, o->v, p, k, &out))
            return out;
        o->stats.escalations++;
    }
}

static long max_l(long a, long b) { return a > b ? a : b; }

/* ------------------------------------------------------ single operations */

float kvv_oracle_exp(kvv_oracle *o, float x)
{
    mpfr_set_flt(o->t[0], x, MPFR_RNDN); /* t[0] has >= 24 bits: exact */
    return finish24(o, mpfr_exp(o->r24, o->t[0], MPFR_RNDN));
}

float kvv_oracle_tanh(kvv_oracle *o, float x)
{
    mpfr_set_flt(o->t[0], x, MPFR_RNDN);
    return finish24(o, mpfr_tanh(o->r24, o->t[0], MPFR_RNDN));
}

float kvv_oracle_sin(kvv_oracle *o, float x)
{
    mpfr_set_flt(o->t[0], x, MPFR_RNDN);
    return finish24(o, mpfr_sin(o->r24, o->t[0], MPFR_RNDN));
}

float kvv_oracle_cos(kvv_oracle *o, float x)
{
    mpfr_set_flt(o->t[0], x, MPFR_RNDN);
    return finish24(o, mpfr_cos(o->r24, o->t[0], MPFR_RNDN));
}

float kvv_oracle_pow(kvv_oracle *o, float x, float y)
{
    mpfr_set_flt(o->t[0], x, MPFR_RNDN);
    mpfr_set_flt(o->t[1], y, MPFR_RNDN);
    return finish24(o, mpfr_pow(o->r24, o->t[0], o->t[1], MPFR_RNDN));
}

/* ---------------------------------------------------- composite scalars */

typedef struct { float x, y; } xy_arg;

/* True when 0 < e < 2^-41: then x / (1 + e) and x (1 - e/2) round to the
 * float x itself (they lie within |x| 2^-41 of it, under a quarter ULP). */
static int negligible(mpfr_srcptr e)
{
    return mpfr_zero_p(e) || (mpfr_regular_p(e) && mpfr_get_exp(e) <= -41);
}

/* silu(x) = x / (1 + exp(-x)). Relative error: exp's argument is exact, so
 * each of exp, +1, / adds 2^-p: k = 8. */
static long eval_silu(kvv_oracle *o, mpfr_prec_t p, const void *arg)
{
    (void)p;
    const xy_arg *a = arg;
    mpfr_set_flt(o->t[0], a->x, MPFR_RNDN);
    if (a->x == 0.0f || mpfr_inf_p(o->t[0])) { /* silu(+-0) = +-0, silu(inf) = inf, silu(-inf) = -0 */
        if (mpfr_inf_p(o->t[0]) && a->x < 0)
            mpfr_set_zero(o->v, -1);
        else
            mpfr_set(o->v, o->t[0], MPFR_RNDN);
        return K_EXACT;
    }
    mpfr_neg(o->t[1], o->t[0], MPFR_RNDN);
    mpfr_exp(o->t[1], o->t[1], MPFR_RNDN);
    if (negligible(o->t[1])) {
        mpfr_set(o->v, o->t[0], MPFR_RNDN);
        return K_EXACT;
    }
    mpfr_add_ui(o->t[1], o->t[1], 1, MPFR_RNDN);
    mpfr_div(o->v, o->t[0], o->t[1], MPFR_RNDN);
    return 8;
}

/* gelu_tanh(x) = x / (1 + exp(-2z)), z = sqrt(2/pi) x (1 + 0.044715 x^2)
 * (0.5 (1 + tanh z) = 1 / (1 + exp(-2z)), which has no cancellation).
 * z carries relative error ~2^(4-p); exp(-2z) turns it into 2|z| times
 * that: k = 8 + exponent of z. */
static long eval_gelu_tanh(kvv_oracle *o, mpfr_prec_t p, const void *arg)
{
    (void)p;
    const xy_arg *a = arg;
    mpfr_set_flt(o->t[0], a->x, MPFR_RNDN);
    if (a->x == 0.0f || mpfr_inf_p(o->t[0])) {
        if (mpfr_inf_p(o->t[0]) && a->x < 0)
            mpfr_set_zero(o->v, -1);
        else
            mpfr_set(o->v, o->t[0], MPFR_RNDN);
        return K_EXACT;
    }
    mpfr_sqr(o->t[1], o->t[0], MPFR_RNDN);               /* x^2 (exact for p >= 48) */
    mpfr_set_str(o->t[2], "0.044715", 10, MPFR_RNDN);
    mpfr_mul(o->t[1], o->t[1], o->t[2], MPFR_RNDN);
    mpfr_add_ui(o->t[1], o->t[1], 1, MPFR_RNDN);         /* 1 + 0.044715 x^2 > 0 */
    mpfr_mul(o->t[1], o->t[1], o->t[0], MPFR_RNDN);      /* x (1 + c x^2) */
    mpfr_const_pi(o->t[2], MPFR_RNDN);
    mpfr_ui_div(o->t[2], 2, o->t[2], MPFR_RNDN);
    mpfr_sqrt(o->t[2], o->t[2], MPFR_RNDN);              /* sqrt(2/pi) */
    mpfr_mul(o->t[1], o->t[1], o->t[2], MPFR_RNDN);      /* z */
    long ez = mpfr_get_exp(o->t[1]);
    mpfr_mul_si(o->t[3], o->t[1], -2, MPFR_RNDN);
    mpfr_exp(o->t[3], o->t[3], MPFR_RNDN);               /* exp(-2z) */
    if (negligible(o->t[3])) {
        mpfr_set(o->v, o->t[0], MPFR_RNDN);
        return K_EXACT;
    }
    mpfr_add_ui(o->t[3], o->t[3], 1, MPFR_RNDN);
    mpfr_div(o->v, o->t[0], o->t[3], MPFR_RNDN);
    return 8 + max_l(0, ez + 2);
}

/* gelu_erf(x) = 0.5 x erfc(-x / sqrt 2) (1 + erf u = erfc(-u): no
 * cancellation). For x > 0, erfc(-u) = 2 - erfc(u): when erfc(u)/2 is
 * negligible the result is x. erfc(v) turns v's relative error into
 * 2 v^2 times that: k = 8 + 2 * exponent of u. */
static long eval_gelu_erf(kvv_oracle *o, mpfr_prec_t p, const void *arg)
{
    (void)p;
    const xy_arg *a = arg;
    mpfr_set_flt(o->t[0], a->x, MPFR_RNDN);
    if (a->x == 0.0f || mpfr_inf_p(o->t[0])) {
        if (mpfr_inf_p(o->t[0]) && a->x < 0)
            mpfr_set_zero(o->v, -1);
        else
            mpfr_set(o->v, o->t[0], MPFR_RNDN);
        return K_EXACT;
    }
    mpfr_sqrt_ui(o->t[1], 2, MPFR_RNDN);
    mpfr_div(o->t[1], o->t[0], o->t[1], MPFR_RNDN);      /* u = x / sqrt 2 */
    long eu = mpfr_get_exp(o->t[1]);
    if (a->x > 0) {
        mpfr_erfc(o->t[2], o->t[1], MPFR_RNDN);
        mpfr_div_2ui(o->t[2], o->t[2], 1, MPFR_RNDN);
        if (negligible(o->t[2])) {
            mpfr_set(o->v, o->t[0], MPFR_RNDN);
            return K_EXACT;
        }
    }
    mpfr_neg(o->t[2], o->t[1], MPFR_RNDN);
    mpfr_erfc(o->t[2], o->t[2], MPFR_RNDN);              /* erfc(-u) = 1 + erf(u) */
    mpfr_mul(o->t[2], o->t[2], o->t[0], MPFR_RNDN);
    mpfr_div_2ui(o->v, o->t[2], 1, MPFR_RNDN);
    return 8 + max_l(0, 2 * eu + 2);
}

/* softcap(x, c) = c tanh(x / c). tanh's relative condition number is at
 * most 1: k = 8. When |x/c| > 16, 1 - |tanh| < 2^-44 and the result is c
 * with x's sign. */
static long eval_softcap(kvv_oracle *o, mpfr_prec_t p, const void *arg)
{
    (void)p;
    const xy_arg *a = arg;
    mpfr_set_flt(o->t[0], a->x, MPFR_RNDN);
    mpfr_set_flt(o->t[1], a->y, MPFR_RNDN);
    if (a->x == 0.0f || mpfr_nan_p(o->t[1]) || mpfr_nan_p(o->t[0])) {
        if (mpfr_nan_p(o->t[1]) || mpfr_nan_p(o->t[0]))
            mpfr_set_nan(o->v);
        else
            mpfr_set(o->v, o->t[0], MPFR_RNDN);
        return K_EXACT;
    }
    mpfr_div(o->t[2], o->t[0], o->t[1], MPFR_RNDN);      /* u = x / c */
    if (mpfr_cmpabs_ui(o->t[2], 16) > 0) {
        mpfr_setsign(o->v, o->t[1], mpfr_signbit(o->t[2]), MPFR_RNDN);
        return K_EXACT;
    }
    mpfr_tanh(o->t[2], o->t[2], MPFR_RNDN);
    mpfr_mul(o->v, o->t[2], o->t[1], MPFR_RNDN);
    return 8;
}

float kvv_oracle_silu(kvv_oracle *o, float x)
{
    xy_arg a = {x, 0};
    return ziv(o, eval_silu, &a);
}

float kvv_oracle_gelu_tanh(kvv_oracle *o, float x)
{
    xy_arg a = {x, 0};
    return ziv(o, eval_gelu_tanh, &a);
}

float kvv_oracle_gelu_erf(kvv_oracle *o, float x)
{
    xy_arg a = {x, 0};
    return ziv(o, eval_gelu_erf, &a);
}

float kvv_oracle_softcap(kvv_oracle *o, float x, float c)
{
    xy_arg a = {x, c};
    return ziv(o, eval_softcap, &a);
}

/* --------------------------------------------------------- by op id */

static const char *const OP_NAMES[KVV_ORACLE_OP_COUNT] = {
    "exp", "tanh", "sin", "cos", "pow", "silu", "gelu_tanh", "gelu_erf", "softcap",
};

const char *kvv_oracle_op_name(kvv_oracle_op op)
{
    return (unsigned)op < KVV_ORACLE_OP_COUNT ? OP_NAMES[op] : "unknown";
}

float kvv_oracle_eval(kvv_oracle *o, kvv_oracle_op op, float x, float y)
{
    switch (op) {
    case KVV_ORACLE_EXP:       return kvv_oracle_exp(o, x);
    case KVV_ORACLE_TANH:      return kvv_oracle_tanh(o, x);
    case KVV_ORACLE_SIN:       return kvv_oracle_sin(o, x);
    case KVV_ORACLE_COS:       return kvv_oracle_cos(o, x);
    case KVV_ORACLE_POW:       return kvv_oracle_pow(o, x, y);
    case KVV_ORACLE_SILU:      return kvv_oracle_silu(o, x);
    case KVV_ORACLE_GELU_TANH: return kvv_oracle_gelu_tanh(o, x);
    case KVV_ORACLE_GELU_ERF:  return kvv_oracle_gelu_erf(o, x);
    case KVV_ORACLE_SOFTCAP:   return kvv_oracle_softcap(o, x, y);
    default:                   return nan_f32();
    }
}

/* The exact op(x, y) to 256 bits into o->v (the result of an evaluator at
 * 256 bits: relative error below 2^-150 for every op here, which is all an
 * error in ULPs needs). */
static void exact_256(kvv_oracle *o, kvv_oracle_op op, float x, float y)
{
    const mpfr_prec_t p = 256;
    mpfr_set_prec(o->v, p);
    for (int i = 0; i < 6; i++)
        mpfr_set_prec(o->t[i], p);
    xy_arg a = {x, y};
    mpfr_set_flt(o->t[4], x, MPFR_RNDN);
    mpfr_set_flt(o->t[5], y, MPFR_RNDN);
    switch (op) {
    case KVV_ORACLE_EXP:  mpfr_exp(o->v, o->t[4], MPFR_RNDN); break;
    case KVV_ORACLE_TANH: mpfr_tanh(o->v, o->t[4], MPFR_RNDN); break;
    case KVV_ORACLE_SIN:  mpfr_sin(o->v, o->t[4], MPFR_RNDN); break;
    case KVV_ORACLE_COS:  mpfr_cos(o->v, o->t[4], MPFR_RNDN); break;
    case KVV_ORACLE_POW:  mpfr_pow(o->v, o->t[4], o->t[5], MPFR_RNDN); break;
    case KVV_ORACLE_SILU: eval_silu(o, p, &a); break;
    case KVV_ORACLE_GELU_TANH: eval_gelu_tanh(o, p, &a); break;
    case KVV_ORACLE_GELU_ERF:  eval_gelu_erf(o, p, &a); break;
    case KVV_ORACLE_SOFTCAP:   eval_softcap(o, p, &a); break;
    default: mpfr_set_nan(o->v); break;
    }
}

double kvv_oracle_ulp_error(kvv_oracle *o, kvv_oracle_op op, float x, float y, float got)
{
    const float cr = kvv_oracle_eval(o, op, x, y);
    const int got_nan = got != got, cr_nan = cr != cr;
    if (got_nan || cr_nan)
        return got_nan && cr_nan ? 0.0 : (double)INFINITY;
    const int got_inf = got - got != 0, cr_inf = cr - cr != 0;
    if (got_inf || cr_inf)
        return got == cr ? 0.0 : (double)INFINITY;
    exact_256(o, op, x, y);
    /* ulp of binary32 at the exact value: 2^(E-24) for |v| in [2^(E-1), 2^E),
     * at least 2^-149 */
    long e = mpfr_zero_p(o->v) ? -125 : max_l(mpfr_get_exp(o->v), -125);
    mpfr_set_flt(o->t[0], got, MPFR_RNDN);
    mpfr_sub(o->t[0], o->t[0], o->v, MPFR_RNDN);
    mpfr_abs(o->t[0], o->t[0], MPFR_RNDN);
    mpfr_mul_2si(o->t[0], o->t[0], 24 - e, MPFR_RNDN);
    return mpfr_get_d(o->t[0], MPFR_RNDN);
}

/* ---------------------------------------------------------------- dot */

float kvv_oracle_dot(kvv_oracle *o, const float *a, const float *b, int64_t n)
{
    if (n <= 0) {
        mpfr_set_zero(o->r24, 1);
        return finish24(o, 0);
    }
    if (!need_arr(o, (size_t)n, 48)) {
        /* no memory for n products: accumulate exactly in one wide value */
        mpfr_set_prec(o->t[0], 48);
        mpfr_set_prec(o->v, 1400);
        mpfr_set_zero(o->v, 1);
        for (int64_t i = 0; i < n; i++) {
            mpfr_set_flt(o->t[1], a[i], MPFR_RNDN);
            mpfr_set_flt(o->t[2], b[i], MPFR_RNDN);
            mpfr_mul(o->t[0], o->t[1], o->t[2], MPFR_RNDN);
            mpfr_add(o->v, o->v, o->t[0], MPFR_RNDN); /* exact: |sum| < 2^300, ulp >= 2^-298 */
        }
        return round_v(o, o->v);
    }
    for (int64_t i = 0; i < n; i++) {
        mpfr_set_flt(o->t[1], a[i], MPFR_RNDN);
        mpfr_set_flt(o->t[2], b[i], MPFR_RNDN);
        mpfr_mul(o->arr[i], o->t[1], o->t[2], MPFR_RNDN); /* 24 x 24 bits: exact in 48 */
    }
    int t = mpfr_sum(o->r24, o->ptrs, (unsigned long)n, MPFR_RNDN);
    return finish24(o, t);
}

/* ------------------------------------------------------------ rmsnorm */

/* out[i] = x[i] w[i] / r, r = sqrt(S/n + eps), S = sum x^2 computed by
 * mpfr_sum (correctly rounded at p); every term and step is positive, so
 * the relative error of each out[i] is below 2^(4-p): k = 8. One pass per
 * precision computes r; elements not yet certain are retried at 2p. */
void kvv_oracle_rmsnorm(kvv_oracle *o, const float *x, const float *w, int64_t n, float eps,
                        float *out)
{
    if (n <= 0)
        return;
    float *res = malloc((size_t)n * sizeof *res);
    unsigned char *done = calloc((size_t)n, 1);
    if (res == NULL || done == NULL) {
        free(res);
        free(done);
        for (int64_t i = 0; i < n; i++) /* no memory: NaN, never a wrong value */
            out[i] = nan_f32();
        return;
    }
    int64_t left = n;
    for (mpfr_prec_t p = PREC_START; left > 0; p *= 2) {
        if (!need_arr(o, (size_t)n, p)) {
            for (int64_t i = 0; i < n; i++)
                if (!done[i])
                    res[i] = nan_f32();
            break;
        }
        for (int i = 0; i < 6; i++)
            mpfr_set_prec(o->t[i], p);
        mpfr_set_prec(o->v, p);
        for (int64_t j = 0; j < n; j++) {
            mpfr_set_flt(o->t[0], x[j], MPFR_RNDN);
            mpfr_sqr(o->arr[j], o->t[0], MPFR_RNDN);
        }
        mpfr_sum(o->t[1], o->ptrs, (unsigned long)n, MPFR_RNDN);
        mpfr_div_si(o->t[1], o->t[1], (long)n, MPFR_RNDN);
        mpfr_set_flt(o->t[2], eps, MPFR_RNDN);
        mpfr_add(o->t[1], o->t[1], o->t[2], MPFR_RNDN);
        mpfr_sqrt(o->t[1], o->t[1], MPFR_RNDN);          /* r */
        for (int64_t i = 0; i < n; i++) {
            if (done[i])
                continue;
            mpfr_set_flt(o->t[0], x[i], MPFR_RNDN);
            if (w) {
                mpfr_set_flt(o->t[2], w[i], MPFR_RNDN);
                mpfr_mul(o->t[0], o->t[0], o->t[2], MPFR_RNDN); /* exact */
            }
            mpfr_div(o->v, o->t[0], o->t[1], MPFR_RNDN);
            long k = (mpfr_zero_p(o->t[0]) && mpfr_regular_p(o->t[1])) ? K_EXACT : 8;
            if (try_round(o, o->v, p, k, &res[i])) {
                done[i] = 1;
                left--;
            }
        }
        if (left > 0)
            o->stats.escalations++;
    }
    memcpy(out, res, (size_t)n * sizeof *res);
    free(res);
    free(done);
}

/* ------------------------------------------------------------ softmax */

/* out[i] = e_i / S, e_j = exp(x_j - max) with the differences exact,
 * S = sum e_j correctly rounded at p; every term is positive: k = 8. */
void kvv_oracle_softmax(kvv_oracle *o, const float *x, int64_t n, float *out)
{
    if (n <= 0)
        return;
    float max = x[0];
    int has_nan = 0, has_posinf = 0;
    for (int64_t j = 0; j < n; j++) {
        if (x[j] != x[j])
            has_nan = 1;
        else if (x[j] > 0 && x[j] - x[j] != 0)
            has_posinf = 1;
        if (x[j] > max || max != max)
            max = x[j];
    }
    int all_masked = max < 0 && max - max != 0; /* max is -inf */
    float *res = malloc((size_t)n * sizeof *res);
    unsigned char *done = calloc((size_t)n, 1);
    if (has_nan || has_posinf || all_masked || res == NULL || done == NULL) {
        /* NaN: NaN; +inf: inf/inf; all -inf: 0/0 — all NaN as in fp32.
         * No memory: NaN, never a wrong value. */
        free(res);
        free(done);
        for (int64_t j = 0; j < n; j++)
            out[j] = nan_f32();
        return;
    }
    int64_t left = n;
    for (mpfr_prec_t p = PREC_START; left > 0; p *= 2) {
        if (!need_arr(o, (size_t)n, p)) {
            for (int64_t i = 0; i < n; i++)
                if (!done[i])
                    res[i] = nan_f32();
            break;
        }
        for (int i = 0; i < 6; i++)
            mpfr_set_prec(o->t[i], p);
        mpfr_set_prec(o->v, p);
        mpfr_set_prec(o->t[3], PREC_EXACT_DIFF);
        mpfr_set_flt(o->t[1], max, MPFR_RNDN);
        for (int64_t j = 0; j < n; j++) {
            mpfr_set_flt(o->t[0], x[j], MPFR_RNDN);
            mpfr_sub(o->t[3], o->t[0], o->t[1], MPFR_RNDN); /* exact; -inf if masked */
            mpfr_exp(o->arr[j], o->t[3], MPFR_RNDN);
        }
        mpfr_sum(o->t[2], o->ptrs, (unsigned long)n, MPFR_RNDN);
        for (int64_t i = 0; i < n; i++) {
            if (done[i])
                continue;
            mpfr_div(o->v, o->arr[i], o->t[2], MPFR_RNDN);
            long k = (x[i] < 0 && x[i] - x[i] != 0) ? K_EXACT : 8; /* -inf: exactly 0 */
            if (try_round(o, o->v, p, k, &res[i])) {
                done[i] = 1;
                left--;
            }
        }
        if (left > 0)
            o->stats.escalations++;
    }
    memcpy(out, res, (size_t)n * sizeof *res);
    free(res);
    free(done);
}

/* --------------------------------------------------------------- rope */

typedef struct {
    float x0, x1, base, fs, ff;
    int64_t pos;
    int i, n_dims, which; /* which: 0 -> y0, 1 -> y1 */
} rope_arg;

/* theta = pos fs base^(-2i/n) / ff with relative error ~2^(6-p);
 * sin/cos then carry absolute error (|theta| + 1) 2^(6-p), and
 * y = x0 c -+ x1 s absolute error (|x0| + |x1|)(|theta| + 1) 2^(7-p):
 * k = 8 + exponent of that bound - exponent of y (the cancellation). */
static long eval_rope(kvv_oracle *o, mpfr_prec_t p, const void *arg)
{
    const rope_arg *a = arg;
    mpfr_set_flt(o->t[0], a->x0, MPFR_RNDN);
    mpfr_set_flt(o->t[1], a->x1, MPFR_RNDN);
    if (a->pos == 0 || a->fs == 0.0f) {                   /* theta = 0: y = x */
        mpfr_set(o->v, a->which ? o->t[1] : o->t[0], MPFR_RNDN);
        return K_EXACT;
    }
    if (a->x0 == 0.0f && a->x1 == 0.0f) {
        mpfr_set_zero(o->v, 1);
        return K_EXACT;
    }
    mpfr_set_si(o->t[2], -2 * (long)a->i, MPFR_RNDN);
    mpfr_div_si(o->t[2], o->t[2], a->n_dims, MPFR_RNDN);   /* -2i/n */
    mpfr_set_flt(o->t[3], a->base, MPFR_RNDN);
    mpfr_pow(o->t[2], o->t[3], o->t[2], MPFR_RNDN);       /* base^(-2i/n) */
    mpfr_set_flt(o->t[3], a->fs, MPFR_RNDN);
    mpfr_mul(o->t[2], o->t[2], o->t[3], MPFR_RNDN);
    mpfr_mul_si(o->t[2], o->t[2], (long)a->pos, MPFR_RNDN);
    mpfr_set_flt(o->t[3], a->ff, MPFR_RNDN);
    mpfr_div(o->t[2], o->t[2], o->t[3], MPFR_RNDN);       /* theta */
    if (!mpfr_number_p(o->t[2]) || mpfr_nan_p(o->t[0]) || mpfr_nan_p(o->t[1]) ||
        mpfr_inf_p(o->t[0]) || mpfr_inf_p(o->t[1])) {
        mpfr_set_nan(o->v);                               /* inf/NaN inputs or base <= 0 */
        return K_EXACT;
    }
    long eth = mpfr_zero_p(o->t[2]) ? 0 : mpfr_get_exp(o->t[2]);
    mpfr_sin_cos(o->t[3], o->t[4], o->t[2], MPFR_RNDN);   /* s, c */
    if (a->which == 0) {
        mpfr_mul(o->t[5], o->t[0], o->t[4], MPFR_RNDN);   /* x0 c */
        mpfr_mul(o->t[2], o->t[1], o->t[3], MPFR_RNDN);   /* x1 s */
        mpfr_sub(o->v, o->t[5], o->t[2], MPFR_RNDN);
    } else {
        mpfr_mul(o->t[5], o->t[0], o->t[3], MPFR_RNDN);   /* x0 s */
        mpfr_mul(o->t[2], o->t[1], o->t[4], MPFR_RNDN);   /* x1 c */
        mpfr_add(o->v, o->t[5], o->t[2], MPFR_RNDN);
    }
    if (mpfr_zero_p(o->v))
        return (long)p;                                   /* cancelled: more precision */
    long ex = max_l(a->x0 != 0.0f ? mpfr_get_exp(o->t[0]) : LONG_MIN / 2,
                    a->x1 != 0.0f ? mpfr_get_exp(o->t[1]) : LONG_MIN / 2);
    return max_l(8, 8 + ex + 1 + max_l(eth, 1) - mpfr_get_exp(o->v));
}

void kvv_oracle_rope_pair(kvv_oracle *o, float x0, float x1, int64_t pos, int i, int n_dims,
                          float base, float freq_scale, float freq_factor, float *y0, float *y1)
{
    rope_arg a = {x0, x1, base, freq_scale, freq_factor, pos, i, n_dims, 0};
    float r0 = ziv(o, eval_rope, &a);
    a.which = 1;
    float r1 = ziv(o, eval_rope, &a);
    *y0 = r0;
    *y1 = r1;
}

void kvv_oracle_rope(kvv_oracle *o, const float *x, int head_dim, int n_dims, bool neox,
                     int64_t pos, float base, float freq_scale, const float *freq_factors,
                     float *out)
{
    const int half = n_dims / 2;
    for (int i = 0; i < half; i++) {
        const int j0 = neox ? i : 2 * i;
        const int j1 = neox ? i + half : 2 * i + 1;
        float y0, y1;
        kvv_oracle_rope_pair(o, x[j0], x[j1], pos, i, n_dims, base, freq_scale,
                             freq_factors ? freq_factors[i] : 1.0f, &y0, &y1);
        out[j0] = y0;
        out[j1] = y1;
    }
    for (int j = 2 * half; j < head_dim; j++)
        out[j] = x[j];
}

/* ------------------------------------------------------ ULP distance */

static int64_t ordered(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    int64_t mag = (int64_t)(u & 0x7fffffffu);
    return (u & 0x80000000u) ? -mag : mag;
}

uint64_t kvv_oracle_ulp_distance(float a, float b)
{
    if (a != a || b != b)
        return KVV_ULP_NAN;
    int64_t d = ordered(a) - ordered(b);
    return (uint64_t)(d < 0 ? -d : d);
}

void kvv_oracle_hist_init(kvv_oracle_hist *h)
{
    memset(h, 0, sizeof *h);
}

int kvv_oracle_hist_bin(uint64_t ulp)
{
    if (ulp <= 2)
        return (int)ulp;
    int k = 3;
    uint64_t hi = 4; /* bin k holds (2^(k-2), 2^(k-1)] */
    while (ulp > hi && k < KVV_ULP_HIST_BINS - 1) {
        hi <<= 1;
        k++;
    }
    return k;
}

void kvv_oracle_hist_add(kvv_oracle_hist *h, uint64_t ulp)
{
    h->n++;
    if (ulp == KVV_ULP_NAN) {
        h->nan++;
        return;
    }
    h->bins[kvv_oracle_hist_bin(ulp)]++;
    if (ulp > h->max)
        h->max = ulp;
    h->sum += (double)ulp;
}

void kvv_oracle_hist_merge(kvv_oracle_hist *into, const kvv_oracle_hist *from)
{
    for (int k = 0; k < KVV_ULP_HIST_BINS; k++)
        into->bins[k] += from->bins[k];
    into->n += from->n;
    into->nan += from->nan;
    into->sum += from->sum;
    if (from->max > into->max)
        into->max = from->max;
}

double kvv_oracle_hist_mean(const kvv_oracle_hist *h)
{
    uint64_t finite = h->n - h->nan;
    return finite ? h->sum / (double)finite : 0.0;
}

const char *kvv_oracle_hist_label(int k, char *buf, unsigned size)
{
    if (k <= 2)
        snprintf(buf, size, "%d", k < 0 ? 0 : k);
    else if (k >= KVV_ULP_HIST_BINS - 1)
        snprintf(buf, size, ">%llu", 1ull << (KVV_ULP_HIST_BINS - 3));
    else
        snprintf(buf, size, "%llu-%llu", (1ull << (k - 2)) + 1, 1ull << (k - 1));
    return buf;
}
