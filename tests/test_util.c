/* test_util.c — see test_util.h. */
#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

const char *kvv_test_shared(const char *rel)
{
    static char buf[4096];
    const char *root = getenv("KVV_SHARED");
    if (!root || !*root)
        root = "../shared";
    snprintf(buf, sizeof buf, "%s/%s", root, rel);
    if (access(buf, R_OK) != 0) {
        fprintf(stderr, "SKIP: %s not found (tests that need ../shared skip without it)\n", buf);
        return NULL;
    }
    return buf;
}

const char *kvv_test_tmpdir(void)
{
    static char dir[4096];
    if (!dir[0]) {
        const char *o = getenv("O");
        snprintf(dir, sizeof dir, "%s/tmp/test-%ld", o && *o ? o : "build", (long)getpid());
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        if (system(cmd) != 0)
            return "/tmp";
    }
    return dir;
}

uint8_t *kvv_test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) { fclose(f); return NULL; }
    uint8_t *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[n] = 0; if (size) *size = (size_t)n; }
    return buf;
}

int kvv_test_slow(void)
{
    const char *s = getenv("KVV_SLOW");
    return s && *s && strcmp(s, "0") != 0;
}

long kvv_test_present_pages(const void *p, size_t n)
{
    const long ps = sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0 || ps <= 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    long count = 0;
    for (uintptr_t a = (uintptr_t)p / (uintptr_t)ps * (uintptr_t)ps; a < (uintptr_t)p + n;
         a += (uintptr_t)ps) {
        uint64_t e;
        if (pread(fd, &e, sizeof e, (off_t)(a / (uintptr_t)ps * sizeof e)) != (ssize_t)sizeof e) {
            count = -1;
            break;
        }
        count += (long)(e >> 63);
    }
    close(fd);
    return count;
}
