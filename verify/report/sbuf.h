/*
 * sbuf.h — the one way a report becomes text and then a file: a growable
 * string buffer, XML escaping for the markup writers (JUnit now, HTML
 * later), and atomic file writes (temp file + rename, so a reader never sees
 * half a report and an existing file is untouched on failure).
 *
 *   kvv_sbuf b = {0};
 *   kvv_sbuf_str(&b, "<a title=\"");
 *   kvv_sbuf_xml(&b, untrusted);           // &, <, >, ", ' and control bytes
 *   kvv_sbuf_fmt(&b, "\">%d</a>\n", n);
 *   if (kvv_sbuf_write_file(&b, "r.xml", &err)) ...   // frees b either way
 *
 * Out of memory is sticky: the first failed growth sets b.oom, later appends
 * do nothing, and kvv_sbuf_write_file reports KVV_ERR_NOMEM naming the file.
 */
#ifndef KVV_SBUF_H
#define KVV_SBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "common/atomic_file.h"
#include "common/error.h"

typedef struct {
    char *p;      /* NUL-terminated text (NULL while empty); owned */
    size_t n;     /* bytes used, without the NUL */
    size_t cap;
    bool oom;     /* an append failed: the text is incomplete */
} kvv_sbuf;

/* Append n bytes / a C string / printf-style text (never truncated). */
void kvv_sbuf_put(kvv_sbuf *b, const char *s, size_t n);
void kvv_sbuf_str(kvv_sbuf *b, const char *s);
void kvv_sbuf_fmt(kvv_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Append s XML-escaped, safe in attributes and text: & < > " ' as entities,
 * tab and newline as character references, other control bytes (not
 * allowed in XML 1.0) as '?'. */
void kvv_sbuf_xml(kvv_sbuf *b, const char *s);

void kvv_sbuf_free(kvv_sbuf *b); /* b is empty and reusable afterwards */

/* Write b's text to path atomically and free b (also on failure). The path
 * "-" is standard output (the command line's convention for every output,
 * cli/output_opts.h), written and flushed there.
 * KVV_ERR_NOMEM if an append ran out of memory, KVV_ERR_IO naming the file. */
kvv_status kvv_sbuf_write_file(kvv_sbuf *b, const char *path, kvv_error *err);

/* kvv_write_file_atomic (path.tmp.PID + rename; "-": stdout) lives in
 * common/atomic_file.h, shared with the .kvv writer. */

#endif
