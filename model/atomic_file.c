/* atomic_file.c — what an output path names, and temp file + rename for
 * every report writer (see atomic_file.h). */
#include "model/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Links followed before giving up, as the kernel's own limit (ELOOP). */
#define MAX_LINKS 40

int kvv_atomic_temp_name(const char *path, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s.tmp.%ld", path, (long)getpid());
    return n > 0 && (size_t)n < size;
}

/* ---------------------------------------------------------- the target */

void kvv_file_target_free(kvv_file_target *t)
{
    if (!t)
        return;
    free(t->path);
    memset(t, 0, sizeof *t);
    t->fd = -1;
}

/* The folder part of path ("." when it has none, "/" for "/x"). Owned. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    return strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

/* Is the symbolic link `link` an entry of a /proc/PID/fd folder (reached as
 * /dev/fd/N, /dev/stdout, /proc/self/fd/N)? Those are open descriptors,
 * not names: readlink says "pipe:[123]" for a pipe. @return N when the
 * folder is this process's own, -2 for another process's, -1 for no such
 * folder. */
static int descriptor_link(const char *link)
{
    char *dir = dir_of(link);
    char real[PATH_MAX];
    bool ok = dir && realpath(dir, real) != NULL;
    free(dir);
    if (!ok || strncmp(real, "/proc/", 6) != 0)
        return -1;
    char *end;
    long pid = strtol(real + 6, &end, 10);
    if (end == real + 6 || strcmp(end, "/fd") != 0)
        return -1;
    const char *name = strrchr(link, '/') + 1; /* dir_of found a slash */
    long fd = strtol(name, &end, 10);
    if (*end || end == name || fd < 0 || fd > INT_MAX)
        return -1;
    return pid == (long)getpid() ? (int)fd : -2;
}

/* Where the symbolic link `link` points: its text, relative to the link's
 * folder. Owned; NULL with errno set. */
static char *link_target(const char *link)
{
    char buf[PATH_MAX];
    ssize_t n = readlink(link, buf, sizeof buf - 1);
    if (n < 0)
        return NULL;
    if (n == (ssize_t)sizeof buf - 1) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    buf[n] = 0;
    const char *slash = strrchr(link, '/');
    if (buf[0] == '/' || !slash)
        return strdup(buf);
    size_t dl = (size_t)(slash - link) + 1;
    char *out = malloc(dl + (size_t)n + 1);
    if (out) {
        memcpy(out, link, dl);
        memcpy(out + dl, buf, (size_t)n + 1);
    }
    return out;
}

/* A descriptor of this process: stdout, or a stream written to directly. */
static void set_descriptor(kvv_file_target *t, int fd)
{
    struct stat st;
    t->kind = fd == 1 ? KVV_TARGET_STDOUT : KVV_TARGET_STREAM;
    t->fd = fd == 1 ? -1 : fd;
    t->exists = fstat(fd, &st) == 0;
    if (t->exists) {
        t->dev = st.st_dev;
        t->ino = st.st_ino;
    }
}

kvv_status kvv_file_target_resolve(const char *path, kvv_file_target *t, kvv_error *err)
{
    memset(t, 0, sizeof *t);
    t->fd = -1;
    if (strcmp(path, "-") == 0) {
        t->path = strdup(path);
        if (!t->path)
            return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", path);
        set_descriptor(t, 1);
        return KVV_OK;
    }
    char *cur = strdup(path);
    for (int hops = 0; cur; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0) {
            if (errno != ENOENT && errno != ENOTDIR) {
                int e = errno;
                free(cur);
                return kvv_error_set(err, KVV_ERR_IO, "%s: cannot look at it: %s", path,
                                     strerror(e));
            }
            t->kind = KVV_TARGET_FILE; /* nothing there yet (a dangling link's target) */
            t->path = cur;
            return KVV_OK;
        }
        if (S_ISLNK(st.st_mode)) {
            int fd = descriptor_link(cur);
            if (fd != -1) { /* an open descriptor, whatever it is open on */
                free(cur);
                t->path = strdup(path);
                if (!t->path)
                    return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", path);
                t->via_link = true;
                if (fd >= 0) {
                    set_descriptor(t, fd);
                } else { /* another process's: opened through the kernel's link */
                    t->kind = KVV_TARGET_STREAM;
                    t->exists = stat(path, &st) == 0;
                    t->dev = st.st_dev;
                    t->ino = st.st_ino;
                }
                return KVV_OK;
            }
            if (hops >= MAX_LINKS) {
                free(cur);
                return kvv_error_set(err, KVV_ERR_IO, "%s: more than %d symbolic links",
                                     path, MAX_LINKS);
            }
            char *next = link_target(cur);
            if (!next) {
                int e = errno;
                free(cur);
                return kvv_error_set(err, e == ENOMEM ? KVV_ERR_NOMEM : KVV_ERR_IO,
                                     "%s: cannot read the symbolic link: %s", path, strerror(e));
            }
            free(cur);
            cur = next;
            t->via_link = true;
            continue;
        }
        t->exists = true;
        t->dev = st.st_dev;
        t->ino = st.st_ino;
        t->is_dir = S_ISDIR(st.st_mode);
        if (S_ISREG(st.st_mode) || t->is_dir) {
            t->kind = KVV_TARGET_FILE;
            t->path = cur;
        } else { /* device, FIFO, socket: written through by its name */
            t->kind = KVV_TARGET_STREAM;
            t->path = strdup(path);
            free(cur);
            if (!t->path)
                return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", path);
        }
        return KVV_OK;
    }
    return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", path);
}

/* "canonical folder/name" of path (the folder as given when it has no
 * canonical form). Owned; NULL on OOM. */
static char *canonical_name(const char *path)
{
    char *dir = dir_of(path);
    if (!dir)
        return NULL;
    char real[PATH_MAX];
    const char *d = realpath(dir, real) ? real : dir;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t n = strlen(d) + strlen(base) + 2;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%s/%s", d, base);
    free(dir);
    return out;
}

bool kvv_file_target_same(const kvv_file_target *a, const kvv_file_target *b)
{
    if (a->kind == KVV_TARGET_STDOUT && b->kind == KVV_TARGET_STDOUT)
        return true;
    if (a->exists || b->exists)
        return a->exists && b->exists && a->dev == b->dev && a->ino == b->ino;
    char *ca = canonical_name(a->path), *cb = canonical_name(b->path);
    bool same = ca && cb ? strcmp(ca, cb) == 0 : strcmp(a->path, b->path) == 0;
    free(ca);
    free(cb);
    return same;
}

int kvv_file_target_open_stream(const kvv_file_target *t, kvv_error *err)
{
    int fd;
    if (t->kind == KVV_TARGET_STDOUT) {
        fflush(stdout);
        fd = fcntl(1, F_DUPFD_CLOEXEC, 0);
    } else if (t->fd >= 0) {
        fd = fcntl(t->fd, F_DUPFD_CLOEXEC, 0);
    } else {
        do /* a FIFO's open waits for a reader; a signal may cut the wait */
            fd = open(t->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        while (fd < 0 && errno == EINTR);
    }
    if (fd < 0)
        kvv_error_set(err, KVV_ERR_IO, "%s: cannot open it for writing: %s",
                      t->kind == KVV_TARGET_STDOUT ? "standard output" : t->path, strerror(errno));
    return fd;
}

/* ---------------------------------------------------------- the writers */

/* Standard output, through stdio (the console text shares its buffer). */
static kvv_status write_stdout(const void *data, size_t len, kvv_error *err)
{
    if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
        return kvv_error_set(err, KVV_ERR_IO, "standard output: cannot write: %s",
                             strerror(errno));
    return KVV_OK;
}

/* A stream: every byte, through its own descriptor. */
static kvv_status write_stream(const kvv_file_target *t, const void *data, size_t len,
                               kvv_error *err)
{
    int fd = kvv_file_target_open_stream(t, err);
    if (fd < 0)
        return KVV_ERR_IO;
    const unsigned char *p = data;
    int e = 0;
    while (len && !e) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno != EINTR)
            e = errno;
        else if (w == 0)
            e = EIO;
        else if (w > 0) {
            p += w;
            len -= (size_t)w;
        }
    }
    if (close(fd) != 0 && !e && errno != EINTR)
        e = errno;
    if (e)
        return kvv_error_set(err, KVV_ERR_IO, "%s: cannot write: %s", t->path, strerror(e));
    return KVV_OK;
}

/* A regular file: temp beside the target, then rename. */
static kvv_status write_file(const char *path, const char *target, const void *data, size_t len,
                             kvv_error *err)
{
    size_t tl = strlen(target) + 32;
    char *tmp = malloc(tl);
    if (!tmp)
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", path);
    kvv_atomic_temp_name(target, tmp, tl);
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
    else if (rename(tmp, target) != 0)
        st = kvv_error_set(err, KVV_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp,
                           strerror(errno));
    if (st)
        remove(tmp); /* every error path: no temp file left behind */
    free(tmp);
    return st;
}

kvv_status kvv_write_file_atomic(const char *path, const void *data, size_t len, kvv_error *err)
{
    kvv_file_target t;
    kvv_status st = kvv_file_target_resolve(path, &t, err);
    if (st)
        return st;
    if (t.kind == KVV_TARGET_STDOUT)
        st = write_stdout(data, len, err);
    else if (t.kind == KVV_TARGET_STREAM)
        st = write_stream(&t, data, len, err);
    else if (t.is_dir)
        st = kvv_error_set(err, KVV_ERR_IO, "%s: cannot write: it is a folder", path);
    else
        st = write_file(path, t.path, data, len, err);
    kvv_file_target_free(&t);
    return st;
}
