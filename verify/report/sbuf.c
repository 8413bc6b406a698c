/* sbuf.c — string buffer, XML escaping, atomic file writes (see sbuf.h). */
#include "verify/report/sbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and a NUL. */
static bool reserve(kvv_sbuf *b, size_t n)
{
    if (b->oom)
        return false;
    if (b->n + n + 1 <= b->cap)
        return true;
    size_t nc = b->cap ? b->cap * 2 : 4096;
    while (nc < b->n + n + 1)
        nc *= 2;
    char *q = realloc(b->p, nc);
    if (!q) {
        b->oom = true;
        return false;
    }
    b->p = q;
    b->cap = nc;
    return true;
}

void kvv_sbuf_put(kvv_sbuf *b, const char *s, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void kvv_sbuf_str(kvv_sbuf *b, const char *s)
{
    kvv_sbuf_put(b, s, strlen(s));
}

void kvv_sbuf_fmt(kvv_sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void kvv_sbuf_xml(kvv_sbuf *b, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': kvv_sbuf_str(b, "&amp;"); break;
        case '<': kvv_sbuf_str(b, "&lt;"); break;
        case '>': kvv_sbuf_str(b, "&gt;"); break;
        case '"': kvv_sbuf_str(b, "&quot;"); break;
        case '\'': kvv_sbuf_str(b, "&apos;"); break;
        case '\n': kvv_sbuf_str(b, "&#10;"); break;
        case '\t': kvv_sbuf_str(b, "&#9;"); break;
        default:
            if (c < 0x20)
                kvv_sbuf_put(b, "?", 1);
            else
                kvv_sbuf_put(b, (const char *)&c, 1);
        }
    }
}

void kvv_sbuf_free(kvv_sbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

kvv_status kvv_sbuf_write_file(kvv_sbuf *b, const char *path, kvv_error *err)
{
    kvv_status st = b->oom ? kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory building it", path)
                           : kvv_write_file_atomic(path, b->p ? b->p : "", b->n, err);
    kvv_sbuf_free(b);
    return st;
}
