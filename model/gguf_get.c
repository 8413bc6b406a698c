/*
 * gguf_get.c — typed access to a parsed GGUF file (see gguf.h): numeric
 * array elements, and the getters that coerce an integer or float kv to the
 * type a caller wants only when no information is lost. Lookups by key go
 * through gguf_read.c's index (kvv_gguf_find_kv).
 */
#include "model/gguf.h"
#include "model/gguf_internal.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Element i of a numeric array, widened. */
static bool arr_elem(const kvv_gguf_kv *kv, uint64_t i, int64_t *iv, double *fv)
{
    const uint8_t *p = (const uint8_t *)kv->arr_data + i * kvv_gguf_scalar_size(kv->arr_type);
    int64_t x = 0;
    double f;
    switch (kv->arr_type) {
    case KVV_GGUF_UINT8: case KVV_GGUF_BOOL: x = p[0]; break;
    case KVV_GGUF_INT8:   x = (int8_t)p[0]; break;
    case KVV_GGUF_UINT16: x = kvv_gguf_ld16(p); break;
    case KVV_GGUF_INT16:  x = (int16_t)kvv_gguf_ld16(p); break;
    case KVV_GGUF_UINT32: x = kvv_gguf_ld32(p); break;
    case KVV_GGUF_INT32:  x = (int32_t)kvv_gguf_ld32(p); break;
    case KVV_GGUF_INT64:  x = (int64_t)kvv_gguf_ld64(p); break;
    case KVV_GGUF_UINT64: {
        uint64_t u = kvv_gguf_ld64(p);
        *fv = (double)u;
        *iv = u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
        return true;
    }
    case KVV_GGUF_FLOAT32: {
        uint32_t b = kvv_gguf_ld32(p);
        float ff;
        memcpy(&ff, &b, sizeof ff);
        *fv = ff;
        *iv = (int64_t)0;
        return false;
    }
    case KVV_GGUF_FLOAT64: {
        uint64_t b = kvv_gguf_ld64(p);
        memcpy(&f, &b, sizeof f);
        *fv = f;
        *iv = 0;
        return false;
    }
    default:
        *fv = 0;
        *iv = 0;
        return false;
    }
    *iv = x;
    *fv = (double)x;
    return true;
}

double kvv_gguf_arr_f64(const kvv_gguf_kv *kv, uint64_t i)
{
    int64_t iv;
    double fv;
    arr_elem(kv, i, &iv, &fv);
    return fv;
}

int64_t kvv_gguf_arr_i64(const kvv_gguf_kv *kv, uint64_t i)
{
    int64_t iv;
    double fv;
    if (arr_elem(kv, i, &iv, &fv))
        return iv;
    /* float elements: truncated toward zero when in range, else clamped */
    if (fv != fv)
        return 0;
    if (fv >= 9223372036854775807.0)
        return INT64_MAX;
    if (fv <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)fv;
}

/* -------------------------------------------------------- typed getters */

/* Finds key; *st is KVV_OK with NULL for an absent optional key. */
static const kvv_gguf_kv *get_kv(const kvv_gguf *g, const char *key, bool required,
                                 kvv_error *err, kvv_status *st)
{
    const kvv_gguf_kv *kv = kvv_gguf_find_kv(g, key);
    *st = KVV_OK;
    if (!kv && required)
        *st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: key '%s' missing", g->path, key);
    return kv;
}

__attribute__((format(printf, 4, 5)))
static kvv_status get_fail(const kvv_gguf *g, const kvv_gguf_kv *kv, kvv_error *err,
                           const char *fmt, ...)
{
    char reason[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return kvv_error_set(err, KVV_ERR_FORMAT, "%s: kv[%" PRIu64 "] '%.64s' at byte %" PRIu64
                         ": %s", g->path, (uint64_t)(kv - g->kv), kv->key, kv->offset, reason);
}

static bool is_unsigned(kvv_gguf_type t)
{
    return t == KVV_GGUF_UINT8 || t == KVV_GGUF_UINT16 || t == KVV_GGUF_UINT32 ||
           t == KVV_GGUF_UINT64;
}

static bool is_signed(kvv_gguf_type t)
{
    return t == KVV_GGUF_INT8 || t == KVV_GGUF_INT16 || t == KVV_GGUF_INT32 ||
           t == KVV_GGUF_INT64;
}

kvv_status kvv_gguf_get_u32(const kvv_gguf *g, const char *key, bool required, uint32_t *out,
                            kvv_error *err)
{
    kvv_status st;
    const kvv_gguf_kv *kv = get_kv(g, key, required, err, &st);
    if (!kv)
        return st;
    if (is_unsigned(kv->type)) {
        if (kv->v.u64 > UINT32_MAX)
            return get_fail(g, kv, err, "value %" PRIu64 " does not fit in uint32", kv->v.u64);
        *out = (uint32_t)kv->v.u64;
        return KVV_OK;
    }
    if (is_signed(kv->type)) {
        if (kv->v.i64 < 0 || kv->v.i64 > (int64_t)UINT32_MAX)
            return get_fail(g, kv, err, "value %" PRId64 " does not fit in uint32", kv->v.i64);
        *out = (uint32_t)kv->v.i64;
        return KVV_OK;
    }
    return get_fail(g, kv, err, "expected an integer, found %s", kvv_gguf_type_name(kv->type));
}

kvv_status kvv_gguf_get_f32(const kvv_gguf *g, const char *key, bool required, float *out,
                            kvv_error *err)
{
    kvv_status st;
    const kvv_gguf_kv *kv = get_kv(g, key, required, err, &st);
    if (!kv)
        return st;
    double d;
    if (kv->type == KVV_GGUF_FLOAT32 || kv->type == KVV_GGUF_FLOAT64)
        d = kv->v.f64;
    else if (is_unsigned(kv->type))
        d = (double)kv->v.u64;
    else if (is_signed(kv->type))
        d = (double)kv->v.i64;
    else
        return get_fail(g, kv, err, "expected a number, found %s", kvv_gguf_type_name(kv->type));
    /* out of float range (but finite): never exact; checked before any cast */
    bool exact = d != d || d == HUGE_VAL || d == -HUGE_VAL || (d <= FLT_MAX && d >= -FLT_MAX);
    float f = exact ? (float)d : 0.0f;
    exact = exact && ((double)f == d || d != d);
    if (is_unsigned(kv->type))  /* the widening itself may have rounded */
        exact = exact && d < 18446744073709551616.0 && (uint64_t)d == kv->v.u64;
    else if (is_signed(kv->type))
        exact = exact && d < 9223372036854775808.0 && (int64_t)d == kv->v.i64;
    if (!exact)
        return get_fail(g, kv, err, "%s value %.17g is not exactly representable as float32",
                        kvv_gguf_type_name(kv->type), d);
    *out = f;
    return KVV_OK;
}

kvv_status kvv_gguf_get_bool(const kvv_gguf *g, const char *key, bool required, bool *out,
                             kvv_error *err)
{
    kvv_status st;
    const kvv_gguf_kv *kv = get_kv(g, key, required, err, &st);
    if (!kv)
        return st;
    if (kv->type != KVV_GGUF_BOOL)
        return get_fail(g, kv, err, "expected bool, found %s", kvv_gguf_type_name(kv->type));
    *out = kv->v.u64 != 0;
    return KVV_OK;
}

kvv_status kvv_gguf_get_str(const kvv_gguf *g, const char *key, bool required, char *buf,
                            size_t bufsize, kvv_error *err)
{
    kvv_status st;
    const kvv_gguf_kv *kv = get_kv(g, key, required, err, &st);
    if (!kv)
        return st;
    if (kv->type != KVV_GGUF_STRING)
        return get_fail(g, kv, err, "expected string, found %s", kvv_gguf_type_name(kv->type));
    if (memchr(kv->v.str.ptr, 0, kv->v.str.len))
        return get_fail(g, kv, err, "string contains a NUL byte");
    if (kv->v.str.len >= bufsize)
        return get_fail(g, kv, err, "string of %" PRIu64 " bytes is longer than %zu",
                        kv->v.str.len, bufsize ? bufsize - 1 : 0);
    memcpy(buf, kv->v.str.ptr, kv->v.str.len);
    buf[kv->v.str.len] = '\0';
    return KVV_OK;
}
