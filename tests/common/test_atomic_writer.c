/*
 * test_atomic_writer.c — the one output writer's rule (common/atomic_file.h):
 * a regular file is fsynced before the rename and its folder after it; a
 * failed fsync leaves the old file and no temp file; a stream (FIFO,
 * /dev/null) is written through, never synced or renamed; a symbolic link
 * is followed and stays a link; a folder, or a link planted at the temp
 * name, is refused. fsync is wrapped (-Wl,--wrap=fsync, Makefile) to see each call
 * and to plant a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "tests/test_util.h"

int __real_fsync(int fd);
int __wrap_fsync(int fd);

static int n_file_syncs, n_dir_syncs, fail_file_sync;

int __wrap_fsync(int fd)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        n_dir_syncs++;
    } else {
        n_file_syncs++;
        if (fail_file_sync) {
            errno = EIO;
            return -1;
        }
    }
    return __real_fsync(fd);
}

static void reset(void)
{
    n_file_syncs = n_dir_syncs = fail_file_sync = 0;
}

static const char *scratch(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", kvv_test_tmpdir(), name);
    unlink(buf);
    return buf;
}

static void assert_file_is(const char *path, const char *text)
{
    size_t n;
    char *b = (char *)kvv_test_read_file(path, &n);
    assert_non_null(b);
    assert_int_equal(n, strlen(text));
    assert_memory_equal(b, text, n);
    free(b);
}

static void assert_no_temp(const char *target)
{
    char tmp[4096];
    assert_true(kvv_atomic_temp_name(target, tmp, sizeof tmp));
    assert_int_equal(access(tmp, F_OK), -1);
}

/* A regular file: the temp file and the folder are both synced. */
static void test_file_synced(void **state)
{
    (void)state;
    char p[4096];
    kvv_error err = {0};
    scratch(p, sizeof p, "synced.txt");
    reset();
    assert_int_equal(kvv_write_file_atomic(p, "one", 3, &err), KVV_OK);
    assert_int_equal(n_file_syncs, 1);
    assert_int_equal(n_dir_syncs, 1);
    assert_file_is(p, "one");
    assert_no_temp(p);
}

/* In pieces through the writer: the same rule; abort leaves nothing. */
static void test_pieces_and_abort(void **state)
{
    (void)state;
    char p[4096];
    kvv_error err = {0};
    scratch(p, sizeof p, "pieces.txt");
    assert_int_equal(kvv_write_file_atomic(p, "old", 3, &err), KVV_OK);
    kvv_atomic_writer *w;
    reset();
    assert_int_equal(kvv_atomic_writer_open(p, &w, &err), KVV_OK);
    assert_int_equal(kvv_atomic_writer_write(w, "ne", 2, &err), KVV_OK);
    assert_int_equal(kvv_atomic_writer_write(w, "w!", 2, &err), KVV_OK);
    assert_file_is(p, "old"); /* nothing shows before the commit */
    assert_int_equal(kvv_atomic_writer_commit(w, &err), KVV_OK);
    assert_file_is(p, "new!");
    assert_int_equal(n_file_syncs, 1);
    assert_int_equal(n_dir_syncs, 1);
    assert_int_equal(kvv_atomic_writer_open(p, &w, &err), KVV_OK);
    assert_int_equal(kvv_atomic_writer_write(w, "xx", 2, &err), KVV_OK);
    kvv_atomic_writer_abort(w);
    assert_file_is(p, "new!");
    assert_no_temp(p);
    kvv_atomic_writer_abort(NULL);
}

/* fsync fails: an error naming the file, the old file intact, no temp. */
static void test_fsync_failure(void **state)
{
    (void)state;
    char p[4096];
    kvv_error err = {0};
    scratch(p, sizeof p, "fsync_fails.txt");
    assert_int_equal(kvv_write_file_atomic(p, "kept", 4, &err), KVV_OK);
    reset();
    fail_file_sync = 1;
    assert_int_equal(kvv_write_file_atomic(p, "lost", 4, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, p));
    assert_non_null(strstr(err.msg, strerror(EIO)));
    assert_int_equal(n_dir_syncs, 0); /* never renamed */
    assert_file_is(p, "kept");
    assert_no_temp(p);
    fail_file_sync = 0;
}

/* Streams are written through: no fsync, no rename, still a FIFO. */
static void test_stream_not_synced(void **state)
{
    (void)state;
    char p[4096];
    kvv_error err = {0};
    reset();
    assert_int_equal(kvv_write_file_atomic("/dev/null", "x", 1, &err), KVV_OK);
    scratch(p, sizeof p, "fifo");
    assert_int_equal(mkfifo(p, 0600), 0);
    int rd = open(p, O_RDONLY | O_NONBLOCK); /* a reader, so the writer's open does not wait */
    assert_true(rd >= 0);
    assert_int_equal(kvv_write_file_atomic(p, "piped", 5, &err), KVV_OK);
    char buf[16] = {0};
    assert_int_equal(read(rd, buf, sizeof buf), 5);
    assert_memory_equal(buf, "piped", 5);
    close(rd);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(n_file_syncs + n_dir_syncs, 0);
    unlink(p);
}

/* A link is followed: its target replaced (and synced), the link kept. */
static void test_symlink_followed(void **state)
{
    (void)state;
    char real[4096], link[4096];
    kvv_error err = {0};
    scratch(real, sizeof real, "link_target.txt");
    scratch(link, sizeof link, "link.txt");
    assert_int_equal(kvv_write_file_atomic(real, "old", 3, &err), KVV_OK);
    assert_int_equal(symlink("link_target.txt", link), 0);
    reset();
    assert_int_equal(kvv_write_file_atomic(link, "new", 3, &err), KVV_OK);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_file_is(real, "new");
    assert_int_equal(n_file_syncs, 1);
    assert_int_equal(n_dir_syncs, 1);
    assert_no_temp(real);
}

/* A folder is refused, and a link planted at the temp name is not followed. */
static void test_refusals(void **state)
{
    (void)state;
    kvv_error err = {0};
    assert_int_equal(kvv_write_file_atomic(kvv_test_tmpdir(), "x", 1, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "folder"));
    char p[4096], tmp[4096], victim[4096];
    scratch(p, sizeof p, "planted.txt");
    scratch(victim, sizeof victim, "victim.txt");
    assert_int_equal(kvv_write_file_atomic(victim, "safe", 4, &err), KVV_OK);
    assert_true(kvv_atomic_temp_name(p, tmp, sizeof tmp));
    unlink(tmp);
    assert_int_equal(symlink(victim, tmp), 0);
    assert_int_equal(kvv_write_file_atomic(p, "evil", 4, &err), KVV_ERR_IO);
    assert_file_is(victim, "safe");
    unlink(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_synced),       cmocka_unit_test(test_pieces_and_abort),
        cmocka_unit_test(test_fsync_failure),     cmocka_unit_test(test_stream_not_synced),
        cmocka_unit_test(test_symlink_followed),  cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
