/*
 * test_gguf_drop.c — kvv_gguf_drop_pages on a mapped file (Linux: it reads
 * /proc/self/pagemap and /proc/self/maps). A GGUF of three 64 KiB F32
 * tensors, page-aligned, is written, opened (mapped) and read through; then
 * the middle tensor is dropped:
 *
 *   - its pages leave this process's page table, its neighbours' stay;
 *   - it is a mapping (VMA) of its own, so that the kernel, mapping a whole
 *     large folio or fault-around window for a neighbour's page, cannot map
 *     it back (model/gguf.h);
 *   - reading it again gives the file's bytes.
 *
 * Each check fails without its half of the call (MADV_DONTNEED, the split),
 * and both were seen to fail that way when written.
 */
#include "tests/test_util.h"

#include "model/gguf.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_FLOATS 16384 /* 64 KiB: 16 pages of 4 KiB */
#define PAGE 4096

/* Whether /proc/self/maps has a mapping that is exactly [lo, hi). */
static int own_mapping(uintptr_t lo, uintptr_t hi)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        uintmax_t a, b;
        if (sscanf(line, "%jx-%jx", &a, &b) == 2 && a == lo && b == hi)
            found = 1;
    }
    fclose(f);
    return found;
}

static float value(int t, int i)
{
    return (float)(t * N_FLOATS + i) * 0.25f;
}

static void test_drop_middle_tensor(void **state)
{
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/drop-pages.gguf", kvv_test_tmpdir());
    float *data = malloc(sizeof(float) * 3 * N_FLOATS);
    assert_non_null(data);
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < N_FLOATS; i++)
            data[t * N_FLOATS + i] = value(t, i);
    kvv_gguf_writer *w = kvv_gguf_writer_new(3, PAGE);
    assert_non_null(w);
    const char *names[3] = {"a.weight", "b.weight", "c.weight"};
    const int64_t ne[2] = {N_FLOATS / 64, 64};
    for (int t = 0; t < 3; t++)
        assert_int_equal(kvv_gguf_writer_add_tensor(w, names[t], KVV_TYPE_F32, 2, ne,
                                                    data + (size_t)t * N_FLOATS),
                         KVV_OK);
    kvv_error err = {0};
    assert_int_equal(kvv_gguf_writer_write(w, path, &err), KVV_OK);
    kvv_gguf_writer_free(w);

    kvv_gguf *g = NULL;
    assert_int_equal(kvv_gguf_open(path, &g, &err), KVV_OK);
    assert_int_equal((int)g->n_tensors, 3);
    const size_t bytes = sizeof(float) * N_FLOATS;
    volatile float sum = 0; /* read every page of every tensor */
    for (int t = 0; t < 3; t++) {
        assert_int_equal((uintptr_t)g->tensors[t].data % PAGE, 0);
        for (int i = 0; i < N_FLOATS; i += PAGE / 4)
            sum += ((const float *)g->tensors[t].data)[i];
    }
    (void)sum;
    long before = kvv_test_present_pages(g->tensors[1].data, bytes);
    if (before < 0) {
        printf("  (no /proc/self/pagemap here: skipped)\n");
        kvv_gguf_close(g);
        remove(path);
        free(data);
        skip();
        return;
    }
    assert_int_equal(before, N_FLOATS * 4 / PAGE);

    kvv_gguf_drop_pages(g, g->tensors[1].data, bytes);
    assert_int_equal(kvv_test_present_pages(g->tensors[1].data, bytes), 0);
    assert_int_equal(kvv_test_present_pages(g->tensors[0].data, bytes), N_FLOATS * 4 / PAGE);
    assert_int_equal(kvv_test_present_pages(g->tensors[2].data, bytes), N_FLOATS * 4 / PAGE);
    const uintptr_t lo = (uintptr_t)g->tensors[1].data;
    assert_true(own_mapping(lo, lo + bytes));

    /* the bytes come back from the file */
    assert_memory_equal(g->tensors[1].data, data + N_FLOATS, bytes);
    /* a range outside the map, or of another buffer, changes nothing */
    kvv_gguf_drop_pages(g, data, bytes);
    kvv_gguf_drop_pages(NULL, g->tensors[0].data, bytes);
    assert_int_equal(kvv_test_present_pages(g->tensors[0].data, bytes), N_FLOATS * 4 / PAGE);

    kvv_gguf_close(g);
    remove(path);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drop_middle_tensor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
