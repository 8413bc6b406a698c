/*
 * test_cpu_pages.c — the map pages a cpu engine leaves in the resident set
 * (Linux: /proc/self/pagemap through kvv_test_present_pages).
 *
 * llama-tiny in F16 (every projection and the output head copied
 * to F32 by the engine, the embedding read in place: cpu_weights.c) is
 * written and opened:
 *
 *   - after kvv_model_open no whole page of the header is held (it gives
 *     the parsed header back);
 *   - after the engine opens, no whole page of the data section is held
 *     outside the embedding, the one weight read in place: not the copies,
 *     not the pages a copy shared with its neighbour, not the norms
 *     (drop_unread in cpu_weights.c);
 *   - a forward keeps it so (it reads the copies), and its embedding rows
 *     are held (the control that the pagemap is read at all);
 *   - a tied Q8_0 head repacked in invariant mode (X4) also serves the
 *     embedding's lookups, so after a forward no page of the data section
 *     is held at all.
 *
 * Without drop_unread 21 pages of the data section stayed; without the
 * header's drop 3 of its pages; with the lookups on the file's rows 12
 * pages of the tied Q8_0 model: each check was seen to fail so.
 */
#include "tests/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "model/arch.h"
#include "model/shapes.h"
#include "model/synth.h"

static uintptr_t page_up(uintptr_t a, uintptr_t ps)
{
    return (a + ps - 1) / ps * ps;
}

/* Held pages of the data section outside the tensor named keep (NULL:
 * the whole section). */
static long held_outside(const kvv_gguf *g, const char *keep)
{
    const uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE);
    /* whole pages only: a page shared with the header or the kept tensor may stay */
    uintptr_t d0 = page_up((uintptr_t)(g->base + g->data_offset), ps);
    uintptr_t end = (uintptr_t)(g->base + g->size) / ps * ps;
    const kvv_gguf_tensor *t = NULL;
    for (uint64_t i = 0; keep && i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, keep) == 0)
            t = &g->tensors[i];
    if (!t)
        return keep ? -1 : kvv_test_present_pages((const void *)d0, end - d0);
    uintptr_t k0 = (uintptr_t)t->data / ps * ps, k1 = page_up((uintptr_t)(t->data + t->nbytes), ps);
    long below = k0 > d0 ? kvv_test_present_pages((const void *)d0, k0 - d0) : 0;
    long above = end > k1 ? kvv_test_present_pages((const void *)k1, end - k1) : 0;
    assert_true(below >= 0 && above >= 0);
    return below + above;
}

static void test_engine_holds_only_in_place_pages(void **state)
{
    (void)state;
    kvv_shape sh = *kvv_shape_find("llama-tiny"); /* tensors of a few pages and less */
    sh.tied = 0;                                     /* an output head, copied too */
    kvv_synth_opts so = {.shape = &sh, .type = KVV_TYPE_F16, .seed = 9};
    char path[4200];
    snprintf(path, sizeof path, "%s/pages-f16.gguf", kvv_test_tmpdir());
    kvv_error err = {0};
    kvv_model *m = NULL;
    if (kvv_synth_write(&so, path, &err) || kvv_model_open(path, &m, &err))
        fail_msg("%s: %s", path, err.msg);
    const kvv_gguf *g = m->gguf;
    const uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t hdr = (uintptr_t)g->data_offset / ps * ps;
    assert_true(hdr >= 2 * ps); /* the vocabulary makes the header pages long */
    assert_int_equal(kvv_test_present_pages(g->base, hdr), 0);

    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = "cpu";
    o.mode = KVV_MODE_FAST;
    o.n_threads = 1;
    o.n_ctx = 16;
    kvv_engine *e = NULL;
    if (kvv_engine_open(m, &o, &e, &err))
        fail_msg("open: %s", err.msg);
    assert_int_equal(held_outside(g, "token_embd.weight"), 0);

    int32_t tok[4] = {5, 77, 130, 259}, pos[4] = {0, 1, 2, 3};
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    assert_non_null(logits);
    assert_int_equal(kvv_engine_forward(e, 4, tok, pos, NULL, KVV_LOGITS_LAST, logits, &err),
                     KVV_OK);
    assert_int_equal(held_outside(g, "token_embd.weight"), 0);
    const kvv_gguf_tensor *te = NULL;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, "token_embd.weight") == 0)
            te = &g->tensors[i];
    assert_true(kvv_test_present_pages(te->data, te->nbytes) > 0);
    free(logits);
    kvv_engine_close(e);
    kvv_model_close(m);
}

/* A tied Q8_0 head repacked (X4) in invariant mode: the lookups read the
 * copy as well, so after a forward no page of the data section is held. */
static void test_tied_copy_serves_lookups(void **state)
{
    (void)state;
    kvv_shape sh = *kvv_shape_find("llama-tiny"); /* tied */
    kvv_synth_opts so = {.shape = &sh, .type = KVV_TYPE_Q8_0, .seed = 9};
    char path[4200];
    snprintf(path, sizeof path, "%s/pages-q8_0-tied.gguf", kvv_test_tmpdir());
    kvv_error err = {0};
    kvv_model *m = NULL;
    if (kvv_synth_write(&so, path, &err) || kvv_model_open(path, &m, &err))
        fail_msg("%s: %s", path, err.msg);
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = "cpu";
    o.mode = KVV_MODE_INVARIANT;
    o.repack = true;
    o.n_threads = 1;
    o.n_ctx = 16;
    kvv_engine *e = NULL;
    if (kvv_engine_open(m, &o, &e, &err))
        fail_msg("open: %s", err.msg);
    int32_t tok[4] = {5, 77, 130, 259}, pos[4] = {0, 1, 2, 3};
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    assert_non_null(logits);
    assert_int_equal(kvv_engine_forward(e, 4, tok, pos, NULL, KVV_LOGITS_LAST, logits, &err),
                     KVV_OK);
    assert_int_equal(held_outside(m->gguf, NULL), 0);
    free(logits);
    kvv_engine_close(e);
    kvv_model_close(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_holds_only_in_place_pages),
        cmocka_unit_test(test_tied_copy_serves_lookups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
