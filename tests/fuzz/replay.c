/*
 * replay.c — runs a libFuzzer target's LLVMFuzzerTestOneInput without
 * libFuzzer, over every regular file in the directories (or files) given as
 * arguments, in sorted order, so `make test` replays the seed corpora with an
 * ordinary compiler (and `make test-asan` under the sanitizers).
 *
 *   build/tests/fuzz/replay_fuzz_gguf tests/fuzz/corpus/gguf
 *   -> "replay: 12 inputs from tests/fuzz/corpus/gguf"
 *
 * Each input is copied into a heap buffer of exactly its size, so reads past
 * the end are caught by AddressSanitizer. Exit status: 0 when at least one
 * input ran (a target that crashes never returns), 2 for an unreadable
 * argument or when there was nothing to run.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs the target on one file; returns 1 if it ran, 0 on a read error. */
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: cannot open\n", path);
        return 0;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || sb.st_size < 0) {
        fclose(f);
        fprintf(stderr, "replay: %s: cannot stat\n", path);
        return 0;
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf || (n && fread(buf, 1, n, f) != n)) {
        free(buf);
        fclose(f);
        fprintf(stderr, "replay: %s: cannot read\n", path);
        return 0;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 1;
}

/* Runs every regular file in dir; returns how many ran, -1 on error. */
static long run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: %s: cannot open directory\n", dir);
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    long ran = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(names, cap * sizeof *names);
            if (!p) {
                ran = -1;
                break;
            }
            names = p;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            ran = -1;
            break;
        }
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (names)
        qsort(names, n, sizeof *names, cmp_name);
    for (size_t i = 0; i < n; i++) {
        struct stat sb;
        if (ran >= 0 && stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode)) {
            if (!run_file(names[i]))
                ran = -1;
            else
                ran++;
        }
        free(names[i]);
    }
    free(names);
    return ran;
}

int main(int argc, char **argv)
{
    long total = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        long ran;
        if (stat(argv[i], &sb) == 0 && S_ISREG(sb.st_mode))
            ran = run_file(argv[i]) ? 1 : -1;
        else
            ran = run_dir(argv[i]);
        if (ran < 0)
            return 2;
        printf("replay: %ld inputs from %s\n", ran, argv[i]);
        total += ran;
    }
    if (total == 0) {
        fprintf(stderr, "replay: no inputs to run\n");
        return 2;
    }
    return 0;
}
