/* compare_stats.c — see compare_stats.h. */
#include "verify/compare_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t kvv_f32_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

float kvv_f32_from_bits(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

static bool is_nan_bits(uint32_t b)
{
    return (b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0;
}

bool kvv_f32_bit_equal(float a, float b)
{
    uint32_t x = kvv_f32_bits(a), y = kvv_f32_bits(b);
    return x == y && (x & 0x7f800000u) != 0x7f800000u; /* NaN and inf never equal */
}

/* Sign-magnitude bits -> ordered integer (+0 and -0 both 0). */
static int64_t ordered(uint32_t b)
{
    int64_t mag = (int64_t)(b & 0x7fffffffu);
    return (b & 0x80000000u) ? -mag : mag;
}

uint64_t kvv_ulp_distance(float a, float b)
{
    uint32_t x = kvv_f32_bits(a), y = kvv_f32_bits(b);
    if (is_nan_bits(x) || is_nan_bits(y))
        return KVV_ULP_NAN;
    int64_t d = ordered(x) - ordered(y);
    return (uint64_t)(d < 0 ? -d : d);
}

void kvv_cmp_init(kvv_cmp_stats *s)
{
    memset(s, 0, sizeof *s);
    s->first = -1;
}

uint64_t kvv_cmp_update(kvv_cmp_stats *s, const float *ref, const float *test, size_t n)
{
    uint64_t diff = 0;
    for (size_t i = 0; i < n; i++) {
        float r = ref[i], t = test[i];
        uint32_t rb = kvv_f32_bits(r), tb = kvv_f32_bits(t);
        bool nan = is_nan_bits(rb) || is_nan_bits(tb);
        if (nan)
            s->n_nan++;
        else if (isinf(r) || isinf(t)) {
            s->n_inf++;
            s->inf_diff |= rb != tb;
        }
        if (rb != tb || nan || isinf(r)) { /* non-finite: never equal */
            diff++;
            if (s->first < 0) {
                s->first = (int64_t)(s->n + i);
                s->first_ref = r;
                s->first_test = t;
            }
            uint64_t u = kvv_ulp_distance(r, t);
            if (u > s->max_ulp)
                s->max_ulp = u;
        }
        if (!nan && isfinite(r) && isfinite(t)) {
            double d = (double)t - (double)r;
            double ad = fabs(d);
            if (ad > s->max_abs)
                s->max_abs = ad;
            s->sum_sq_diff += d * d;
            s->sum_sq_ref += (double)r * (double)r;
        }
    }
    s->n += n;
    s->n_diff += diff;
    return diff;
}

void kvv_cmp_merge(kvv_cmp_stats *dst, const kvv_cmp_stats *src)
{
    if (dst->first < 0 && src->first >= 0) {
        dst->first = (int64_t)dst->n + src->first;
        dst->first_ref = src->first_ref;
        dst->first_test = src->first_test;
    }
    dst->n += src->n;
    dst->n_diff += src->n_diff;
    dst->n_nan += src->n_nan;
    dst->n_inf += src->n_inf;
    dst->inf_diff |= src->inf_diff;
    if (src->max_ulp > dst->max_ulp)
        dst->max_ulp = src->max_ulp;
    if (src->max_abs > dst->max_abs)
        dst->max_abs = src->max_abs;
    dst->sum_sq_diff += src->sum_sq_diff;
    dst->sum_sq_ref += src->sum_sq_ref;
}

double kvv_cmp_nmse(const kvv_cmp_stats *s)
{
    if (s->n_nan)
        return NAN;
    if (s->inf_diff)
        return INFINITY;
    if (s->sum_sq_diff == 0.0)
        return 0.0;
    if (s->sum_sq_ref == 0.0)
        return INFINITY;
    return s->sum_sq_diff / s->sum_sq_ref;
}

double kvv_cmp_max_abs(const kvv_cmp_stats *s)
{
    return s->n_nan ? NAN : s->inf_diff ? INFINITY : s->max_abs;
}

const char *kvv_ulp_text(uint64_t ulp, char *buf, size_t size)
{
    if (ulp == KVV_ULP_NAN)
        snprintf(buf, size, "NaN");
    else
        snprintf(buf, size, "%llu", (unsigned long long)ulp);
    return buf;
}

const char *kvv_cmp_nonfinite(const kvv_cmp_stats *s, char *buf, size_t size)
{
    if (!s->n_nan && !s->n_inf)
        snprintf(buf, size, "%s", "");
    else if (!s->n_inf)
        snprintf(buf, size, " (%llu NaN)", (unsigned long long)s->n_nan);
    else if (!s->n_nan)
        snprintf(buf, size, " (%llu inf)", (unsigned long long)s->n_inf);
    else
        snprintf(buf, size, " (%llu NaN, %llu inf)", (unsigned long long)s->n_nan,
                 (unsigned long long)s->n_inf);
    return buf;
}

const char *kvv_figure_text(double x, char *buf, size_t size)
{
    if (isnan(x))
        snprintf(buf, size, "NaN");
    else if (isinf(x))
        snprintf(buf, size, "%s", x > 0 ? "inf" : "-inf");
    else
        snprintf(buf, size, "%.4g", x);
    return buf;
}

double kvv_rel_rms(const float *ref, const float *test, size_t n)
{
    double dd = 0, aa = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)test[i] - (double)ref[i];
        dd += d * d;
        aa += (double)ref[i] * (double)ref[i];
    }
    return aa > 0 ? sqrt(dd / aa) : sqrt(dd);
}

static int order_of(double a, double b)
{
    return (a > b) - (a < b);
}

void kvv_figure_vs_bound(double v, double bound, char *vbuf, char *bbuf, size_t size)
{
    if (!isfinite(v) || !isfinite(bound)) {
        kvv_figure_text(v, vbuf, size);
        kvv_figure_text(bound, bbuf, size);
        if (isfinite(v))
            snprintf(vbuf, size, "%.2g", v);
        if (isfinite(bound))
            snprintf(bbuf, size, "%.2g", bound);
        return;
    }
    for (int p = 2; p <= 17; p++) {
        snprintf(vbuf, size, "%.*g", p, v);
        snprintf(bbuf, size, "%.*g", p, bound);
        if (order_of(strtod(vbuf, NULL), strtod(bbuf, NULL)) == order_of(v, bound))
            return;
    }
}

bool kvv_cmp_equal(const kvv_cmp_stats *s)
{
    return s->n_diff == 0;
}

