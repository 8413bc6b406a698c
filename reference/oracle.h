/*
 * oracle.h — correctly rounded fp32 results of the operations engines
 * perform, computed with MPFR; ULP distances and histograms.
 *
 * Bit-equality between two engines says they agree, not that either is
 * right. The oracle gives, for each operation on real fp32 data, the exact
 * mathematical result rounded once to binary32 (round to nearest, ties to
 * even, with binary32's exponent range: gradual underflow to subnormals and
 * overflow to inf), so each engine's error can be measured in ULPs.
 *
 * What "exact" means (docs/oracle.md has the full table): every fp32 input
 * (activations, weights, eps, base, pos, caps) is taken as the exact real
 * number it represents; decimal constants of a formula (GELU's 0.044715) are
 * the exact decimal; sqrt(2/pi), pi, exp, erf are the real functions. The
 * whole expression is evaluated as a real number and rounded once per output
 * element. Dot products and sums of squares are exact (no rounding at all
 * until the final one); other expressions are evaluated with MPFR at
 * increasing precision (128 bits, doubling up to 8192) until the rounding to
 * binary32 is certain (Ziv's strategy with a conservative error bound).
 *
 *   kvv_oracle *o = kvv_oracle_new();
 *   float d = kvv_oracle_dot(o, a, b, n);          // correctly rounded sum a[i]*b[i]
 *   kvv_oracle_softmax(o, logits, n, p);           // p[i] = exp(x[i]) / sum exp(x[j])
 *   uint64_t u = kvv_oracle_ulp_distance(got, d);  // 0 = bit-equal
 *   kvv_oracle_free(o);
 *
 * Threads: a kvv_oracle is used by one thread at a time; separate contexts
 * may run in parallel. Each call temporarily narrows MPFR's (thread-local)
 * exponent range to binary32's for the final rounding and restores it.
 */
#ifndef KVV_ORACLE_H
#define KVV_ORACLE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/ulp.h"

typedef struct kvv_oracle kvv_oracle;

/* New context (holds MPFR scratch values and counters).
 * @return NULL on allocation failure. Free with kvv_oracle_free. */
kvv_oracle *kvv_oracle_new(void);
void kvv_oracle_free(kvv_oracle *o); /* accepts NULL */

/* Counters since kvv_oracle_new: results computed, precision escalations
 * of the Ziv loop, and results still not certain at the maximum precision
 * (rounded from the 8192-bit value; expected to stay 0). */
typedef struct {
    uint64_t results;
    uint64_t escalations;
    uint64_t unresolved;
} kvv_oracle_stats;
kvv_oracle_stats kvv_oracle_get_stats(const kvv_oracle *o);

/* ------------------------------------------------------------ scalars
 * Correctly rounded f(x). NaN in gives NaN out. */
float kvv_oracle_exp(kvv_oracle *o, float x);
float kvv_oracle_tanh(kvv_oracle *o, float x);
float kvv_oracle_sin(kvv_oracle *o, float x);
float kvv_oracle_cos(kvv_oracle *o, float x);
float kvv_oracle_pow(kvv_oracle *o, float x, float y);   /* IEEE/C99 special cases */
float kvv_oracle_silu(kvv_oracle *o, float x);           /* x / (1 + exp(-x)) */
/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
float kvv_oracle_gelu_tanh(kvv_oracle *o, float x);
float kvv_oracle_gelu_erf(kvv_oracle *o, float x);       /* 0.5 x (1 + erf(x / sqrt 2)) */
float kvv_oracle_softcap(kvv_oracle *o, float x, float c); /* c tanh(x / c), c > 0 */

/* The same functions by id, for tables and sweeps. */
typedef enum {
    KVV_ORACLE_EXP = 0,
    KVV_ORACLE_TANH,
    KVV_ORACLE_SIN,
    KVV_ORACLE_COS,
    KVV_ORACLE_POW,       /* f(x, y) = x^y */
    KVV_ORACLE_SILU,
    KVV_ORACLE_GELU_TANH,
    KVV_ORACLE_GELU_ERF,
    KVV_ORACLE_SOFTCAP,   /* f(x, y) = y tanh(x / y) */
    KVV_ORACLE_OP_COUNT
} kvv_oracle_op;

const char *kvv_oracle_op_name(kvv_oracle_op op); /* "exp", ...; "unknown" */

/* Correctly rounded op(x[, y]); y is ignored by unary ops. */
float kvv_oracle_eval(kvv_oracle *o, kvv_oracle_op op, float x, float y);

/* Error of `got` against the exact op(x[, y]), in ULPs of binary32 at the
 * exact value (2^-149 below 2^-126): |got - exact| / ulp, computed from a
 * 256-bit value of the exact result. A correctly rounded result has error
 * <= 0.5. Returns 0 when got is the same inf as the correctly rounded
 * result, or both are NaN; +inf when exactly one of them is inf or NaN. */
double kvv_oracle_ulp_error(kvv_oracle *o, kvv_oracle_op op, float x, float y, float got);

/* ------------------------------------------------------------ vectors */

/* sum_{i<n} a[i]*b[i]: products exact, exact sum, rounded once. */
float kvv_oracle_dot(kvv_oracle *o, const float *a, const float *b, int64_t n);

/* out[i] = x[i] * w[i] / sqrt(sum_j x[j]^2 / n + eps), each rounded once
 * (w NULL: w[i] = 1). out may alias x. */
void kvv_oracle_rmsnorm(kvv_oracle *o, const float *x, const float *w, int64_t n, float eps,
                        float *out);

/* out[i] = exp(x[i]) / sum_j exp(x[j]), each rounded once. x may hold -inf
 * (masked: out 0); all -inf gives NaN; a NaN makes every output NaN.
 * out may alias x. */
void kvv_oracle_softmax(kvv_oracle *o, const float *x, int64_t n, float *out);

/* RoPE rotation of one pair (x0, x1) for pair index i of n_dims:
 *   theta = pos * freq_scale * base^(-2i / n_dims) / freq_factor
 *   y0 = x0 cos(theta) - x1 sin(theta),  y1 = x0 sin(theta) + x1 cos(theta)
 * theta exact (never rounded), each of y0, y1 rounded once. */
void kvv_oracle_rope_pair(kvv_oracle *o, float x0, float x1, int64_t pos, int i, int n_dims,
                          float base, float freq_scale, float freq_factor, float *y0, float *y1);

/* RoPE of one head vector x[head_dim] into out (may alias x): the first
 * n_dims elements rotated in pairs — (2i, 2i+1) when !neox (llama), (i,
 * i + n_dims/2) when neox — the rest copied. freq_factors: n_dims/2 values
 * (rope_freqs) or NULL for 1. */
void kvv_oracle_rope(kvv_oracle *o, const float *x, int head_dim, int n_dims, bool neox,
                     int64_t pos, float base, float freq_scale, const float *freq_factors,
                     float *out);

/* ------------------------------------------------------- ULP distance */

/* KVV_ULP_NAN: common/ulp.h */

/* Distance between a and b counted in representable floats: the bits
 * mapped to a sign-magnitude ordered integer (+0 and -0 both 0), then
 * |ka - kb|. 0 = equal values; 1 = neighbours; +inf to FLT_MAX is 1.
 * KVV_ULP_NAN if either is NaN (NaN never equals anything). */
uint64_t kvv_oracle_ulp_distance(float a, float b);

/* Histogram of ULP distances: bin 0 = 0 ULP, bin 1 = 1, bin 2 = 2, bin k
 * (3 <= k < LAST) = (2^(k-2), 2^(k-1)], bin LAST = more than 2^(LAST-2)
 * (NaN mismatches are counted apart). */
#define KVV_ULP_HIST_BINS 20

typedef struct {
    uint64_t bins[KVV_ULP_HIST_BINS];
    uint64_t n;          /* values added, NaN mismatches included */
    uint64_t nan;        /* distances equal to KVV_ULP_NAN */
    uint64_t max;        /* largest finite distance */
    double sum;          /* sum of finite distances (for the mean) */
} kvv_oracle_hist;

void kvv_oracle_hist_init(kvv_oracle_hist *h);
void kvv_oracle_hist_add(kvv_oracle_hist *h, uint64_t ulp);
void kvv_oracle_hist_merge(kvv_oracle_hist *into, const kvv_oracle_hist *from);
/* Mean of the finite distances (0 if none). */
double kvv_oracle_hist_mean(const kvv_oracle_hist *h);
/* Bin of a distance (0..KVV_ULP_HIST_BINS-1). */
int kvv_oracle_hist_bin(uint64_t ulp);
/* Label of bin k ("0", "1", "2", "3-4", "5-8", ..., ">131072") into buf.
 * @return buf. */
const char *kvv_oracle_hist_label(int k, char *buf, unsigned size);

#endif
