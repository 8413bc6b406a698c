/*
 * read_file.h — a whole file (or standard input) into memory, the one way
 * kvverify reads a file it parses as a whole (.kvv vectors, suite
 * manifests, `tokenize` input). A read error is an error, never a short
 * file parsed as if it were complete.
 *
 *   char *text; size_t n;
 *   if (kvv_read_file(path, 64u << 20, &text, &n, &err)) return err.status;
 *   ... text[n] == '\0' ...
 *   free(text);
 */
#ifndef KVV_READ_FILE_H
#define KVV_READ_FILE_H

#include <stddef.h>

#include "common/error.h"

/* Read all of path ("-": standard input) into *data (malloc'ed, caller
 * frees; a NUL follows the *len bytes, which may themselves hold NULs).
 * max: the most bytes accepted (0: no limit).
 * @return KVV_OK; KVV_ERR_IO naming the path when it cannot be opened or a
 * read fails (ferror: EISDIR, EIO, ...); KVV_ERR_FORMAT when it holds more
 * than max bytes; KVV_ERR_NOMEM. On error *data is NULL and *len 0. */
kvv_status kvv_read_file(const char *path, size_t max, char **data, size_t *len,
                         kvv_error *err);

#endif
