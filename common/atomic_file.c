/* atomic_file.c — what an output path names, and the one writer every
 * output goes through: temp file + fsync + rename + folder fsync, or
 * written through (see atomic_file.h). */
#include "common/atomic_file.h"

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

/* ---------------------------------------------------------- the writer */

struct kvv_atomic_writer {
    kvv_file_target t;
    char *path;    /* as the caller gave it, for messages */
    char *tmp;     /* FILE: TARGET.tmp.PID; NULL otherwise */
    FILE *f;       /* the temp file, the stream, or stdout */
    int err;       /* first errno of a failed write; 0 */
};

static void writer_free(kvv_atomic_writer *w)
{
    kvv_file_target_free(&w->t);
    free(w->path);
    free(w->tmp);
    free(w);
}

void kvv_atomic_writer_abort(kvv_atomic_writer *w)
{
    if (!w)
        return;
    if (w->f && w->f != stdout)
        fclose(w->f);
    if (w->tmp)
        unlink(w->tmp); /* every error path: no temp file left behind */
    writer_free(w);
}

kvv_status kvv_atomic_writer_open(const char *path, kvv_atomic_writer **out, kvv_error *err)
{
    *out = NULL;
    kvv_atomic_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", path);
    }
    kvv_status st = kvv_file_target_resolve(path, &w->t, err);
    if (st) {
        free(w->path);
        free(w);
        return st;
    }
    if (w->t.kind == KVV_TARGET_STDOUT) {
        char *name = strdup("standard output"); /* what the messages call "-" */
        if (!name) {
            writer_free(w);
            return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", path);
        }
        free(w->path);
        w->path = name;
        w->f = stdout;
    } else if (w->t.kind == KVV_TARGET_STREAM) {
        int fd = kvv_file_target_open_stream(&w->t, err);
        if (fd < 0) {
            writer_free(w);
            return KVV_ERR_IO;
        }
        if (!(w->f = fdopen(fd, "wb"))) {
            close(fd);
            writer_free(w);
            return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", path);
        }
    } else if (w->t.is_dir) {
        writer_free(w);
        return kvv_error_set(err, KVV_ERR_IO, "%s: cannot write: it is a folder", path);
    } else {
        size_t tl = strlen(w->t.path) + 32;
        if (!(w->tmp = malloc(tl))) {
            writer_free(w);
            return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", path);
        }
        kvv_atomic_temp_name(w->t.path, w->tmp, tl);
        /* O_NOFOLLOW: a link planted at the temp name is refused, not followed */
        int fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 || !(w->f = fdopen(fd, "wb"))) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            st = kvv_error_set(err, KVV_ERR_IO, "%s: cannot create the temporary file %s: %s",
                               path, w->tmp, strerror(e));
            kvv_atomic_writer_abort(w);
            return st;
        }
    }
    *out = w;
    return KVV_OK;
}

kvv_status kvv_atomic_writer_write(kvv_atomic_writer *w, const void *data, size_t len,
                                   kvv_error *err)
{
    if (!w->err && len && fwrite(data, 1, len, w->f) != len)
        w->err = errno ? errno : EIO;
    if (w->err)
        return kvv_error_set(err, KVV_ERR_IO, "%s: cannot write: %s", w->path, strerror(w->err));
    return KVV_OK;
}

/* fsync the folder that holds path, so the rename itself survives a crash.
 * A file system that cannot sync a folder (EINVAL) has nothing to sync. */
static int sync_folder(const char *path)
{
    char *dir = dir_of(path);
    if (!dir)
        return ENOMEM;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0)
        return errno;
    int e = fsync(fd) != 0 && errno != EINVAL ? errno : 0;
    close(fd);
    return e;
}

kvv_status kvv_atomic_writer_commit(kvv_atomic_writer *w, kvv_error *err)
{
    int e = w->err;
    if (!e && fflush(w->f) != 0)
        e = errno;
    if (w->tmp) { /* FILE: the bytes on disk before the name points at them */
        if (!e && fsync(fileno(w->f)) != 0)
            e = errno;
        if (fclose(w->f) != 0 && !e)
            e = errno;
        w->f = NULL;
        if (e) {
            kvv_error_set(err, KVV_ERR_IO, "%s: cannot write: %s", w->path, strerror(e));
            kvv_atomic_writer_abort(w);
            return KVV_ERR_IO;
        }
        if (rename(w->tmp, w->t.path) != 0) {
            e = errno;
            kvv_error_set(err, KVV_ERR_IO, "%s: cannot rename %s over it: %s", w->path, w->tmp,
                          strerror(e));
            kvv_atomic_writer_abort(w);
            return KVV_ERR_IO;
        }
        free(w->tmp);
        w->tmp = NULL;
        if ((e = sync_folder(w->t.path)) != 0) {
            kvv_error_set(err, KVV_ERR_IO, "%s: written, but its folder cannot be synced: %s",
                          w->path, strerror(e));
            writer_free(w);
            return KVV_ERR_IO;
        }
    } else if (w->f != stdout) { /* STREAM: a pipe or device has nothing to sync */
        if (fclose(w->f) != 0 && !e && errno != EINTR)
            e = errno;
        w->f = NULL;
    }
    if (e) {
        kvv_error_set(err, KVV_ERR_IO, "%s: cannot write: %s", w->path, strerror(e));
        kvv_atomic_writer_abort(w);
        return KVV_ERR_IO;
    }
    writer_free(w);
    return KVV_OK;
}

kvv_status kvv_write_file_atomic(const char *path, const void *data, size_t len, kvv_error *err)
{
    kvv_atomic_writer *w;
    kvv_status st = kvv_atomic_writer_open(path, &w, err);
    if (st)
        return st;
    if ((st = kvv_atomic_writer_write(w, data, len, err))) {
        kvv_atomic_writer_abort(w);
        return st;
    }
    return kvv_atomic_writer_commit(w, err);
}
