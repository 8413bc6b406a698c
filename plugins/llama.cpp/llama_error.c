/*
 * llama_error.c — the plugin's one error helper (llama_impl.h), in a file of
 * its own so that the files which report errors (llama_eval.c,
 * llama_cells.c, ...) depend on it and not on each other.
 */
#include <stdarg.h>
#include <stdio.h>

#include "plugins/llama.cpp/llama_impl.h"

int lp_fail(kvv_plugin_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}
