/* atomic_file.c — temp file + rename for every report writer (see atomic_file.h). */
#include "model/atomic_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int kvv_atomic_temp_name(const char *path, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s.tmp.%ld", path, (long)getpid());
    return n > 0 && (size_t)n < size;
}

/* "-": the document on standard output. */
static kvv_status write_stdout(const void *data, size_t len, kvv_error *err)
{
    if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
        return kvv_error_set(err, KVV_ERR_IO, "standard output: cannot write: %s",
                             strerror(errno));
    return KVV_OK;
}

kvv_status kvv_write_file_atomic(const char *path, const void *data, size_t len, kvv_error *err)
{
    if (strcmp(path, "-") == 0)
        return write_stdout(data, len, err);
    size_t tl = strlen(path) + 32;
    char *tmp = malloc(tl);
    if (!tmp)
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", path);
    kvv_atomic_temp_name(path, tmp, tl);
    kvv_status st = KVV_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = kvv_error_set(err, KVV_ERR_IO, "%s: cannot create the temporary file %s: %s", path,
                           tmp, strerror(errno));
        free(tmp);
        return st;
    }
    int bad = len && fwrite(data, 1, len, f) != len;
    bad |= fflush(f) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad)
        st = kvv_error_set(err, KVV_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    else if (rename(tmp, path) != 0)
        st = kvv_error_set(err, KVV_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp,
                           strerror(errno));
    if (st)
        remove(tmp); /* every error path: no temp file left behind */
    free(tmp);
    return st;
}
