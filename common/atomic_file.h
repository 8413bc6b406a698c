/*
 * atomic_file.h — the one way kvverify writes an output file (JSON, JUnit,
 * HTML, .kvv, GGUF), and what an output path names.
 *
 * A path names one of three targets (kvv_file_target_resolve), decided by
 * lstat/stat alone — the target is never opened or read to find out, so a
 * FIFO nobody writes to cannot hang the decision:
 *
 *   - a regular FILE, or nothing yet: the bytes go to TARGET.tmp.PID beside
 *     it, are flushed, fsynced and closed, the temp file is renamed over
 *     TARGET, and TARGET's folder is fsynced (so after a crash the name
 *     points at the whole new file or the whole old one, never at blocks
 *     not yet on disk).
 *     A reader therefore sees either the old file or the whole new one,
 *     never half a report; a run killed mid-write leaves at most a
 *     TARGET.tmp.PID behind, never a truncated TARGET. On every error path
 *     the temp file is removed and an existing TARGET is left untouched.
 *     A symbolic link is followed, link by link (a dangling one too): TARGET
 *     is the file it points to, so the temp file and the rename happen in
 *     that file's folder and the link stays a link;
 *   - a STREAM: a device (/dev/null), a FIFO, a socket, or a name of an open
 *     file descriptor (/dev/fd/N, /dev/stderr, /proc/self/fd/N, a shell's
 *     >(cmd)): written through as it is, never renamed over, never
 *     truncated. A descriptor of this process is written to directly (at
 *     its offset, with its flags: `2>>log` stays an append); any other
 *     stream is opened for writing, which waits for a reader on a FIFO as
 *     any writer does;
 *   - STDOUT: "-" (the command line's convention, cli/output_opts.h), or a
 *     name of this process's descriptor 1 (/dev/stdout): written and
 *     flushed through stdio's stdout.
 *
 *   if (kvv_write_file_atomic("r.json", text, strlen(text), &err)) ...
 */
#ifndef KVV_ATOMIC_FILE_H
#define KVV_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

/* What an output path names (see above). */
typedef enum {
    KVV_TARGET_FILE = 0,   /* a regular file, a folder (refused by the writer), or
                              nothing yet: temp file + rename */
    KVV_TARGET_STREAM,     /* device, FIFO, socket, or another open descriptor */
    KVV_TARGET_STDOUT      /* "-" or this process's descriptor 1 */
} kvv_target_kind;

typedef struct {
    kvv_target_kind kind;
    char *path;            /* FILE: the target, symlinks followed (the rename goes
                              here); STREAM, STDOUT: the path as given. Owned. */
    int fd;                /* STREAM: this process's descriptor the path names, to
                              write to directly; -1: open path */
    bool exists;           /* something is there now: dev and ino say what */
    bool is_dir;           /* FILE: the target is a folder */
    bool via_link;         /* path went through at least one symbolic link */
    dev_t dev;
    ino_t ino;
} kvv_file_target;

/* Decide what path names (see above) without opening it. t is filled
 * (kvv_file_target_free it) on KVV_OK. @return KVV_OK; KVV_ERR_IO naming
 * the path for a loop of links or a stat that fails for another reason
 * than "no such file"; KVV_ERR_NOMEM. */
kvv_status kvv_file_target_resolve(const char *path, kvv_file_target *t, kvv_error *err);
void kvv_file_target_free(kvv_file_target *t); /* accepts NULL; t reusable */

/* Do a and b name the same thing: both stdout, the same device and inode
 * where both exist, else the same canonical folder and name? */
bool kvv_file_target_same(const kvv_file_target *a, const kvv_file_target *b);

/* A STREAM or STDOUT target opened for writing: a duplicate of its
 * descriptor, or t->path opened write-only (never created, never
 * truncated). stdout is flushed first. The caller closes it. @return the
 * descriptor, or -1 with err set (KVV_ERR_IO naming the path and the
 * reason). */
int kvv_file_target_open_stream(const kvv_file_target *t, kvv_error *err);

/* A write in progress to one path, in pieces (the GGUF writer streams its
 * tensors through it):
 *
 *   kvv_atomic_writer *w;
 *   if (kvv_atomic_writer_open(path, &w, &err)) return err.status;
 *   kvv_atomic_writer_write(w, head, n, &err);   // any number of times
 *   return kvv_atomic_writer_commit(w, &err);    // or _abort(w) to give up
 */
typedef struct kvv_atomic_writer kvv_atomic_writer;

/* Resolve path (kvv_file_target_resolve) and start: FILE creates
 * TARGET.tmp.PID (0666 less the umask; a link at that name is refused),
 * STREAM opens it for writing, STDOUT uses stdout. A folder is refused.
 * @return KVV_OK with *w owned by the caller until _commit or _abort;
 * KVV_ERR_IO naming the path and the reason; KVV_ERR_NOMEM. */
kvv_status kvv_atomic_writer_open(const char *path, kvv_atomic_writer **w, kvv_error *err);

/* Append len bytes. @return KVV_OK, or KVV_ERR_IO (the first failure
 * sticks: every later write and the commit report it). */
kvv_status kvv_atomic_writer_write(kvv_atomic_writer *w, const void *data, size_t len,
                                   kvv_error *err);

/* Finish and free w. FILE: flush, fsync, close, rename over the target,
 * fsync the folder; STREAM: flush and close (nothing to sync); STDOUT:
 * flush. @return KVV_OK or KVV_ERR_IO naming the path: then the temp file
 * is gone and an existing target untouched (unless only the folder's
 * fsync failed, after the rename: the message says so). */
kvv_status kvv_atomic_writer_commit(kvv_atomic_writer *w, kvv_error *err);

/* Give up: close, remove the temp file, free w; the target is untouched.
 * Accepts NULL. */
void kvv_atomic_writer_abort(kvv_atomic_writer *w);

/* The whole of data through one writer: open, write, commit.
 * @return as kvv_atomic_writer_open and _commit. */
kvv_status kvv_write_file_atomic(const char *path, const void *data, size_t len,
                                 kvv_error *err);

/* The temp name kvv_write_file_atomic uses for a FILE target (the path
 * after symlinks): "TARGET.tmp.PID" into buf[size]. @return false when it
 * does not fit. */
int kvv_atomic_temp_name(const char *path, char *buf, size_t size);

#endif
