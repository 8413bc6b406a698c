/* read_file.c — see read_file.h. */
#include "common/read_file.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kvv_status kvv_read_file(const char *path, size_t max, char **data, size_t *len,
                         kvv_error *err)
{
    *data = NULL;
    *len = 0;
    const bool is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return kvv_error_set(err, KVV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0, n = 0;
    kvv_status st = KVV_OK;
    for (;;) {
        if (n + 1 >= cap) { /* room for one more byte and the NUL */
            size_t nc = cap ? cap * 2 : 1 << 16;
            char *nb = realloc(buf, nc);
            if (!nb) {
                st = kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory reading it", path);
                break;
            }
            buf = nb;
            cap = nc;
        }
        size_t want = cap - 1 - n;
        size_t k = fread(buf + n, 1, want, f);
        n += k;
        if (max && n > max) {
            st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: larger than %zu bytes", path, max);
            break;
        }
        if (k < want) {
            if (ferror(f))
                st = kvv_error_set(err, KVV_ERR_IO, "%s: read error: %s", path,
                                   strerror(errno ? errno : EIO));
            break;
        }
    }
    if (!is_stdin)
        fclose(f);
    else
        clearerr(f);
    if (st) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return KVV_OK;
}
