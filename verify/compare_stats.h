/*
 * compare_stats.h — bit-level comparison of two fp32 arrays, the one
 * definition of "equal" every check and report in kvverify uses
 * (DESIGN.md §3 "Comparisons report").
 *
 * Two elements are EQUAL iff their 32-bit patterns are identical and
 * finite: a NaN or an infinity is never equal to anything (not even the
 * same bits) — a run that overflowed proves nothing, whatever the other
 * side holds, so every check that compares through here fails on it (and
 * counts it: n_nan, n_inf). +0 / -0 differ (their bits differ) although
 * their ULP distance is 0.
 *
 * ULP distance is the sign-magnitude ordered integer distance: map a float's
 * bits b to  ord(b) = b                  if the sign bit is clear,
 *                      -(b & 0x7fffffff) if it is set,
 * so that consecutive floats map to consecutive integers (and +0, -0 to 0);
 * the distance is |ord(a) - ord(b)|. A pair with a NaN has distance
 * KVV_ULP_NAN (the maximum), so "max ULP" shows a NaN as a huge number rather
 * than hiding it. Infinities are ordinary ends of the ordering.
 *
 * NMSE = sum (test - ref)^2 / sum ref^2 over the pairs where both are finite
 * (0 when there is no difference, +inf when ref is all zeros and test is
 * not); max |Δ| is over finite pairs too. A pair with a NaN makes both
 * figures NaN, an infinity on one side only (or +inf against -inf) makes
 * them +inf (kvv_cmp_nmse, kvv_cmp_max_abs): a NaN or an infinite
 * difference is shown as such, never hidden behind the finite pairs' 0.
 * n_nan and n_inf count the pairs with a NaN and with an infinity.
 *
 *   kvv_cmp_stats s;
 *   kvv_cmp_init(&s);
 *   kvv_cmp_update(&s, cached_k, recomputed_k, n);   // may be called repeatedly
 *   if (s.n_diff) printf("first at %lld: %a vs %a\n", (long long)s.first,
 *                        s.first_ref, s.first_test);
 *
 * Accumulation: indices are global across update calls (the second call's
 * element 0 has index s.n before the call), so a per-layer table can feed
 * rows one at a time and still get a meaningful first-mismatch index.
 * Everything here is pure arithmetic on caller memory; no allocation.
 */
#ifndef KVV_COMPARE_STATS_H
#define KVV_COMPARE_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ulp.h"

/* KVV_ULP_NAN: common/ulp.h */

typedef struct {
    uint64_t n;           /* elements compared */
    uint64_t n_diff;      /* elements whose bit patterns differ (NaN never equal) */
    uint64_t n_nan;       /* pairs where either side is NaN */
    uint64_t n_inf;       /* pairs without a NaN where either side is +-inf */
    bool inf_diff;        /* a pair's difference is infinite (inf vs finite, +inf vs -inf) */
    uint64_t max_ulp;     /* max ULP distance (KVV_ULP_NAN if a NaN was seen) */
    double max_abs;       /* max |test - ref| over finite pairs */
    double sum_sq_diff;   /* sum (test - ref)^2 over finite pairs */
    double sum_sq_ref;    /* sum ref^2 over finite pairs */
    int64_t first;        /* global index of the first differing element, -1 if none */
    float first_ref;      /* the two values there (valid when first >= 0) */
    float first_test;
} kvv_cmp_stats;

/* Reset to "nothing compared". */
void kvv_cmp_init(kvv_cmp_stats *s);

/* Compare n elements: ref[i] against test[i]; accumulates into s.
 * @return the number of differing elements among these n. */
uint64_t kvv_cmp_update(kvv_cmp_stats *s, const float *ref, const float *test, size_t n);

/* Fold src into dst as if src's elements had been compared after dst's
 * (src's first index is shifted by dst->n). */
void kvv_cmp_merge(kvv_cmp_stats *dst, const kvv_cmp_stats *src);

/* sum_sq_diff / sum_sq_ref, with 0/0 = 0 and x/0 = +inf; NaN when a pair
 * had a NaN, +inf when a difference was infinite. */
double kvv_cmp_nmse(const kvv_cmp_stats *s);
/* max |test - ref|: NaN when a pair had a NaN, +inf when a difference was
 * infinite, else over the finite pairs. */
double kvv_cmp_max_abs(const kvv_cmp_stats *s);
/* "123", or "NaN" for KVV_ULP_NAN, into buf. @return buf. */
const char *kvv_ulp_text(uint64_t ulp, char *buf, size_t size);
/* "", or " (N NaN, M inf)" when the comparison met non-finite values, into
 * buf: what a key figure adds so a NaN is counted, not hidden. @return buf. */
const char *kvv_cmp_nonfinite(const kvv_cmp_stats *s, char *buf, size_t size);
/* A figure as the reports print it: "%.4g", or "NaN", "inf", "-inf". @return buf. */
const char *kvv_figure_text(double x, char *buf, size_t size);

/* A figure v and the bound it is judged by, as the reports print them side
 * by side: the fewest significant digits (2 to 17) at which the printed
 * values compare as v and bound do, so a value past its bound never prints
 * equal to it (0.00102 against 0.001 prints "0.00102" and "0.001", not
 * "0.001" twice); NaN and inf as kvv_figure_text. vbuf, bbuf: size bytes. */
void kvv_figure_vs_bound(double v, double bound, char *vbuf, char *bbuf, size_t size);

/* How far test is from ref as a whole: sqrt(sum (test-ref)^2 / sum ref^2)
 * over n pairs, in double (sqrt(sum d^2) when ref is all zero); NaN when a
 * pair holds a NaN, inf when a difference is infinite. */
double kvv_rel_rms(const float *ref, const float *test, size_t n);

/* True iff every element compared was bit-equal (and at least 0 compared). */
bool kvv_cmp_equal(const kvv_cmp_stats *s);

/* Bit pattern of a float (memcpy; no aliasing games). */
uint32_t kvv_f32_bits(float x);
float kvv_f32_from_bits(uint32_t b);

/* Bit-equality as defined above (NaN and inf never equal). */
bool kvv_f32_bit_equal(float a, float b);

/* ULP distance as defined above; KVV_ULP_NAN when either is NaN. */
uint64_t kvv_ulp_distance(float a, float b);


#endif
