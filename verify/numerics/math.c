/*
 * math.c — the engines' portable scalar math (exp, tanh, sin, cos, pow) on
 * dense, evenly spaced samples of the ranges the engines use, against the
 * oracle's correctly rounded result. See numerics.h, step 4.
 */
#include "verify/numerics/numerics_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The ranges the engines use (magnitudes by sign; bit patterns sampled
 * evenly between lo and hi). */
typedef struct {
    kvv_math_fn fn;
    float lo, hi;
    const char *range;
} math_range;

static const math_range MATH_RANGES[] = {
    {KVV_MATH_EXP, -104.0f, -0x1p-24f, "[-104, -2^-24] (softmax x - max, silu)"},
    {KVV_MATH_EXP, 0x1p-24f, 89.0f, "[2^-24, 89] (silu e^-x)"},
    {KVV_MATH_TANH, -20.0f, -0x1p-24f, "[-20, -2^-24] (gelu, soft-cap)"},
    {KVV_MATH_TANH, 0x1p-24f, 20.0f, "[2^-24, 20] (gelu, soft-cap)"},
    {KVV_MATH_SIN, 0x1p-24f, 1048576.0f, "[2^-24, 2^20] (RoPE angles)"},
    {KVV_MATH_COS, 0x1p-24f, 1048576.0f, "[2^-24, 2^20] (RoPE angles)"},
    {KVV_MATH_POW, 1.0f, 1e8f, "x in [1, 1e8], y = -2/n_rot (RoPE theta_scale)"},
};
#define N_MATH_RANGES (int)(sizeof MATH_RANGES / sizeof MATH_RANGES[0])

/* pow's y: -2/n_rot as the engines round it, for common n_rot. */
static const int POW_NROT[] = {8, 16, 32, 64, 80, 96, 128, 256};
#define N_POW_NROT (int)(sizeof POW_NROT / sizeof POW_NROT[0])

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Sample i of count evenly spaced bit patterns between |lo| and |hi|. */
static float sample_at(const math_range *m, long i, long count)
{
    uint32_t a = fbits(fabsf(m->lo)), b = fbits(fabsf(m->hi));
    if (a > b) {
        uint32_t t = a;
        a = b;
        b = t;
    }
    const uint64_t steps = (uint64_t)(count > 1 ? count - 1 : 1);
    uint32_t u = a + (uint32_t)(((uint64_t)(b - a) * (uint64_t)i) / steps);
    float x = bitsf(u);
    return m->lo < 0 ? -x : x;
}

static const kvv_oracle_op MATH_ORACLE_OP[KVV_MATH_COUNT] = {
    KVV_ORACLE_EXP, KVV_ORACLE_TANH, KVV_ORACLE_SIN, KVV_ORACLE_COS, KVV_ORACLE_POW,
};

static void math_one(nrun *r, const kvv_ops *ops, const math_range *m, kvv_numerics_math *out)
{
    float (*fn)(float, float) = ops->vt->math[m->fn];
    memset(out, 0, sizeof *out);
    snprintf(out->engine, sizeof out->engine, "%s",
             ops->desc.name[0] ? ops->desc.name : ops->name);
    snprintf(out->range, sizeof out->range, "%s", m->range);
    snprintf(out->where, sizeof out->where, "%s",
             ops->math_where[m->fn] ? ops->math_where[m->fn] : "");
    out->fn = m->fn;
    const long count = r->o->math_samples;
    const kvv_oracle_op op = MATH_ORACLE_OP[m->fn];
    for (long i = 0; i < count; i++) {
        float x = sample_at(m, i, count), y = 0.0f;
        if (m->fn == KVV_MATH_POW)
            y = -2.0f / (float)POW_NROT[i % N_POW_NROT];
        float got = fn(x, y);
        float cr = kvv_oracle_eval(r->orc, op, x, y);
        double err = kvv_oracle_ulp_error(r->orc, op, x, y, got);
        uint64_t u = kvv_oracle_ulp_distance(got, cr);
        out->samples++;
        if (u != 0)
            out->n_not_rounded++;
        if (u != KVV_ULP_NAN && u > out->max_ulp)
            out->max_ulp = u;
        if (u == KVV_ULP_NAN)
            out->max_ulp = KVV_ULP_NAN;
        if (err > out->max_err || (isnan(err) && !isnan(out->max_err)) || i == 0) {
            out->max_err = err;
            out->worst_x = x;
            out->worst_y = y;
            out->worst_got = got;
            out->worst_exact = cr;
        }
    }
}

/* Every op set's math, once per distinct function (cpu fast and invariant
 * share theirs). */
kvv_status num_math(nrun *r, kvv_error *err)
{
    kvv_numerics_report *rep = r->rep;
    if (r->o->math_samples <= 0)
        return KVV_OK;
    rep->math = calloc((size_t)r->n_ops * N_MATH_RANGES, sizeof *rep->math);
    if (!rep->math)
        return kvv_error_set(err, KVV_ERR_NOMEM, "numerics: out of memory");
    for (int e = 0; e < r->n_ops; e++) {
        const kvv_ops *ops = r->ops[e];
        for (int k = 0; k < N_MATH_RANGES; k++) {
            const math_range *m = &MATH_RANGES[k];
            bool seen = !ops->vt->math[m->fn];
            for (int p = 0; p < e && !seen; p++)
                seen = r->ops[p]->vt->math[m->fn] == ops->vt->math[m->fn];
            if (!seen)
                math_one(r, ops, m, &rep->math[rep->n_math++]);
            if (r->o->progress)
                r->o->progress(r->o->progress_user, "numerics math",
                               (long)e * N_MATH_RANGES + k + 1, (long)r->n_ops * N_MATH_RANGES);
        }
    }
    return KVV_OK;
}
