/* error.c — see error.h. */
#include "common/error.h"

#include <stdio.h>

kvv_status kvv_error_setv(kvv_error *err, kvv_status status, const char *fmt, va_list ap)
{
    if (err) {
        err->status = status;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return status;
}

kvv_status kvv_error_set(kvv_error *err, kvv_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kvv_error_setv(err, status, fmt, ap);
    va_end(ap);
    return status;
}

const char *kvv_strerror(kvv_status status)
{
    switch (status) {
    case KVV_OK:              return "ok";
    case KVV_ERR_IO:          return "i/o error";
    case KVV_ERR_FORMAT:      return "format error";
    case KVV_ERR_USAGE:       return "usage error";
    case KVV_ERR_UNSUPPORTED: return "unsupported";
    case KVV_ERR_NOMEM:       return "out of memory";
    case KVV_ERR_INTERNAL:    return "internal error";
    case KVV_ERR_ENGINE:      return "engine fault";
    }
    return "unknown status";
}

int kvv_exit_code(kvv_status status)
{
    switch (status) {
    case KVV_OK:              return KVV_EXIT_PASS;
    case KVV_ERR_UNSUPPORTED: return KVV_EXIT_NOTHING;
    case KVV_ERR_ENGINE:      return KVV_EXIT_FAIL;
    default:                  return KVV_EXIT_BAD_INPUT;
    }
}
