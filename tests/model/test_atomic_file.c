/*
 * test_atomic_file.c — what an output path names (common/atomic_file.h) and
 * how each kind is written: a regular file by temp + rename, a symbolic
 * link followed to its target (the link stays a link), a device or FIFO
 * written through and still a device or FIFO afterwards, a descriptor
 * (/dev/fd/N, /dev/stdout) written to as it is; two spellings of one file
 * are the same target. The GGUF writer follows the same rules.
 * A character device is made with mknod in the scratch folder (never in
 * /dev): that case is skipped, saying so, where mknod is not permitted.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "model/gguf.h"
#include "tests/test_util.h"

/* tmpdir/name into buf (removed first, so each test starts clean). */
static const char *scratch(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", kvv_test_tmpdir(), name);
    unlink(buf);
    return buf;
}

static mode_t lmode(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_mode & S_IFMT : 0;
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

static void test_regular_and_missing(void **state)
{
    (void)state;
    char p[1024];
    kvv_file_target t;
    kvv_error err = {0};
    scratch(p, sizeof p, "new.json");
    assert_int_equal(kvv_file_target_resolve(p, &t, &err), KVV_OK);
    assert_int_equal(t.kind, KVV_TARGET_FILE);
    assert_false(t.exists);
    assert_string_equal(t.path, p);
    kvv_file_target_free(&t);
    assert_int_equal(kvv_write_file_atomic(p, "one", 3, &err), KVV_OK);
    assert_file_is(p, "one");
    assert_int_equal(kvv_file_target_resolve(p, &t, &err), KVV_OK);
    assert_int_equal(t.kind, KVV_TARGET_FILE);
    assert_true(t.exists && !t.is_dir && !t.via_link);
    kvv_file_target_free(&t);
    /* a folder: a FILE target the writer refuses, naming it */
    assert_int_equal(kvv_file_target_resolve(kvv_test_tmpdir(), &t, &err), KVV_OK);
    assert_true(t.kind == KVV_TARGET_FILE && t.is_dir);
    kvv_file_target_free(&t);
    assert_int_equal(kvv_write_file_atomic(kvv_test_tmpdir(), "x", 1, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "folder"));
}

/* A link is followed: the file it points to gets the bytes, the link stays
 * a link; a dangling link creates its target; a loop is an error. */
static void test_symlinks(void **state)
{
    (void)state;
    char real[1024], link[1024], link2[1024], tmp[1100];
    kvv_error err = {0};
    scratch(real, sizeof real, "real.json");
    scratch(link, sizeof link, "link.json");
    scratch(link2, sizeof link2, "link2.json");
    FILE *f = fopen(real, "w");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);
    assert_int_equal(symlink("real.json", link), 0);   /* relative to the link's folder */
    char *abs = realpath(kvv_test_tmpdir(), NULL);
    assert_non_null(abs);
    char abs_link[1200];
    snprintf(abs_link, sizeof abs_link, "%s/link.json", abs);
    free(abs);
    assert_int_equal(symlink(abs_link, link2), 0);     /* absolute, a chain of two */
    kvv_file_target t;
    assert_int_equal(kvv_file_target_resolve(link2, &t, &err), KVV_OK);
    assert_int_equal(t.kind, KVV_TARGET_FILE);
    assert_true(t.via_link && t.exists);
    assert_non_null(strstr(t.path, "/real.json"));
    kvv_file_target_free(&t);
    assert_int_equal(kvv_write_file_atomic(link2, "new", 3, &err), KVV_OK);
    assert_int_equal(lmode(link), S_IFLNK);
    assert_int_equal(lmode(link2), S_IFLNK);
    assert_int_equal(lmode(real), S_IFREG);
    assert_file_is(real, "new");
    kvv_atomic_temp_name(real, tmp, sizeof tmp);
    assert_int_equal(access(tmp, F_OK), -1);
    /* dangling: the target is created, the link kept */
    char dangle[1024], target[1024];
    scratch(dangle, sizeof dangle, "dangle.json");
    scratch(target, sizeof target, "target.json");
    assert_int_equal(symlink("target.json", dangle), 0);
    assert_int_equal(kvv_write_file_atomic(dangle, "t", 1, &err), KVV_OK);
    assert_int_equal(lmode(dangle), S_IFLNK);
    assert_file_is(target, "t");
    /* a loop */
    char l1[1024], l2[1024];
    scratch(l1, sizeof l1, "loop1");
    scratch(l2, sizeof l2, "loop2");
    assert_int_equal(symlink("loop2", l1), 0);
    assert_int_equal(symlink("loop1", l2), 0);
    assert_int_equal(kvv_file_target_resolve(l1, &t, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "symbolic links"));
}

/* A FIFO is a stream: deciding so never opens it (no reader or writer
 * exists here, so an open or a read would wait forever), and the bytes go
 * through it; it is still a FIFO afterwards. */
static void test_fifo(void **state)
{
    (void)state;
    char p[1024];
    kvv_error err = {0};
    scratch(p, sizeof p, "out.fifo");
    assert_int_equal(mkfifo(p, 0600), 0);
    kvv_file_target t;
    assert_int_equal(kvv_file_target_resolve(p, &t, &err), KVV_OK);
    assert_int_equal(t.kind, KVV_TARGET_STREAM);
    assert_int_equal(t.fd, -1);
    kvv_file_target_free(&t);
    int rd = open(p, O_RDWR | O_NONBLOCK); /* a reader (Linux: O_RDWR never waits) */
    assert_true(rd >= 0);
    assert_int_equal(kvv_write_file_atomic(p, "through", 7, &err), KVV_OK);
    char buf[16] = {0};
    assert_int_equal(read(rd, buf, sizeof buf), 7);
    assert_string_equal(buf, "through");
    close(rd);
    assert_int_equal(lmode(p), S_IFIFO);
}

/* A character device (made here, /dev/null's numbers) is written through,
 * never replaced by a regular file. */
static void test_device(void **state)
{
    (void)state;
    char p[1024];
    kvv_error err = {0};
    scratch(p, sizeof p, "null.dev");
    if (mknod(p, S_IFCHR | 0666, makedev(1, 3)) != 0) {
        printf("SKIP: mknod of a character device not permitted here (%s): device case "
               "not checked\n", strerror(errno));
        skip();
        return;
    }
    kvv_file_target t;
    assert_int_equal(kvv_file_target_resolve(p, &t, &err), KVV_OK);
    assert_int_equal(t.kind, KVV_TARGET_STREAM);
    kvv_file_target_free(&t);
    assert_int_equal(kvv_write_file_atomic(p, "{}\n", 3, &err), KVV_OK);
    assert_int_equal(lmode(p), S_IFCHR);
    /* the GGUF writer too */
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    assert_non_null(w);
    assert_int_equal(kvv_gguf_writer_set_str(w, "general.architecture", "llama"), KVV_OK);
    assert_int_equal(kvv_gguf_writer_write(w, p, &err), KVV_OK);
    kvv_gguf_writer_free(w);
    assert_int_equal(lmode(p), S_IFCHR);
    unlink(p);
}

/* /dev/fd/N of this process: its descriptor, written to directly; fd 1
 * (/dev/stdout, /proc/self/fd/1) is stdout; "-" is stdout. Only resolved
 * here, never written, are the names in /dev. */
static void test_descriptors(void **state)
{
    (void)state;
    kvv_error err = {0};
    kvv_file_target t;
    assert_int_equal(kvv_file_target_resolve("-", &t, &err), KVV_OK);
    assert_int_equal(t.kind, KVV_TARGET_STDOUT);
    kvv_file_target_free(&t);
    if (access("/dev/fd", F_OK) != 0 || access("/proc/self/fd", F_OK) != 0) {
        printf("SKIP: no /dev/fd or /proc: descriptor names not checked\n");
        skip();
        return;
    }
    assert_int_equal(kvv_file_target_resolve("/dev/stdout", &t, &err), KVV_OK);
    assert_int_equal(t.kind, KVV_TARGET_STDOUT);
    kvv_file_target_free(&t);
    assert_int_equal(kvv_file_target_resolve("/proc/self/fd/1", &t, &err), KVV_OK);
    assert_int_equal(t.kind, KVV_TARGET_STDOUT);
    kvv_file_target_free(&t);
    /* written through a link of the scratch folder to /proc/self/fd/N (as
     * /dev/fd/N is): a writer that renamed over its target would replace
     * only that link, never the machine's /dev */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    char p[1024], fdp[64];
    scratch(p, sizeof p, "fd-link");
    snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", fds[1]);
    assert_int_equal(symlink(fdp, p), 0);
    assert_int_equal(kvv_file_target_resolve(p, &t, &err), KVV_OK);
    assert_int_equal(t.kind, KVV_TARGET_STREAM);
    assert_int_equal(t.fd, fds[1]);
    kvv_file_target_free(&t);
    assert_int_equal(kvv_write_file_atomic(p, "pipe", 4, &err), KVV_OK);
    char buf[8] = {0};
    assert_int_equal(read(fds[0], buf, sizeof buf), 4);
    assert_string_equal(buf, "pipe");
    /* a .gguf through the same pipe: its magic arrives first */
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
    assert_non_null(w);
    assert_int_equal(kvv_gguf_writer_write(w, p, &err), KVV_OK);
    kvv_gguf_writer_free(w);
    assert_int_equal(read(fds[0], buf, 4), 4);
    assert_memory_equal(buf, "GGUF", 4);
    close(fds[0]);
    close(fds[1]);
    assert_int_equal(lmode(p), S_IFLNK);
    unlink(p);
}

/* One file under two spellings is one target; two files are two. */
static void test_same(void **state)
{
    (void)state;
    char a[1024], b[1200], c[1024], sub[1024], via[1300];
    kvv_error err = {0};
    scratch(a, sizeof a, "same.out");
    snprintf(b, sizeof b, "%s/./same.out", kvv_test_tmpdir());
    scratch(c, sizeof c, "other.out");
    scratch(sub, sizeof sub, "sub");
    rmdir(sub);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(via, sizeof via, "%s/../same.out", sub);
    kvv_file_target ta, tb, tc, tv;
    for (int round = 0; round < 2; round++) { /* missing, then existing */
        assert_int_equal(kvv_file_target_resolve(a, &ta, &err), KVV_OK);
        assert_int_equal(kvv_file_target_resolve(b, &tb, &err), KVV_OK);
        assert_int_equal(kvv_file_target_resolve(c, &tc, &err), KVV_OK);
        assert_int_equal(kvv_file_target_resolve(via, &tv, &err), KVV_OK);
        assert_true(kvv_file_target_same(&ta, &tb));
        assert_true(kvv_file_target_same(&ta, &tv));
        assert_false(kvv_file_target_same(&ta, &tc));
        kvv_file_target_free(&ta);
        kvv_file_target_free(&tb);
        kvv_file_target_free(&tc);
        kvv_file_target_free(&tv);
        assert_int_equal(kvv_write_file_atomic(a, "x", 1, &err), KVV_OK);
        assert_int_equal(kvv_write_file_atomic(c, "y", 1, &err), KVV_OK);
    }
    rmdir(sub);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regular_and_missing), cmocka_unit_test(test_symlinks),
        cmocka_unit_test(test_fifo),                cmocka_unit_test(test_device),
        cmocka_unit_test(test_descriptors),         cmocka_unit_test(test_same),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
