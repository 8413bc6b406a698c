/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader (model/gguf.h).
 *
 *   make fuzz                                   # clang + libFuzzer, FUZZ_SECONDS each
 *   build/tests/fuzz/replay_fuzz_gguf tests/fuzz/corpus/gguf   # inside make test
 *
 * Any input must give KVV_OK or a clean KVV_ERR_FORMAT whose message names
 * the field and the byte offset (never a crash, leak or undefined behaviour).
 * An accepted file is then used in full: every string and tensor byte is
 * read, every key and tensor looked up again, and the file is copied through
 * the writer and read back, which must succeed with the same tensors.
 * A broken invariant calls abort(), which libFuzzer and the replay driver
 * report as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

/* Touch every byte the reader handed out. */
static uint64_t touch(const kvv_gguf *g)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const kvv_gguf_kv *kv = &g->kv[i];
        check(kvv_gguf_find_kv(g, kv->key) == kv);
        if (kv->type == KVV_GGUF_STRING)
            for (uint64_t j = 0; j < kv->v.str.len; j++)
                sum += (uint8_t)kv->v.str.ptr[j];
        if (kv->type == KVV_GGUF_ARRAY && kv->arr_type == KVV_GGUF_STRING)
            for (uint64_t k = 0; k < kv->arr_n; k++)
                for (uint64_t j = 0; j < kv->arr_str[k].len; j++)
                    sum += (uint8_t)kv->arr_str[k].ptr[j];
        else if (kv->type == KVV_GGUF_ARRAY)
            for (uint64_t k = 0; k < kv->arr_n; k++)
                sum += (uint64_t)kvv_gguf_arr_i64(kv, k);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kvv_gguf_tensor *t = &g->tensors[i];
        check(kvv_gguf_find_tensor(g, t->name) == t);
        check(t->data >= g->base + g->data_offset && t->nbytes <= g->size);
        check((uint64_t)(t->data - g->base) + t->nbytes <= g->size);
        for (uint64_t j = 0; j < t->nbytes; j++)
            sum += t->data[j];
    }
    return sum;
}

/* Writer copy of g; NULL when g holds something the writer deliberately
 * refuses (a 64-byte tensor name: llama.cpp keeps names under 64). */
static uint8_t *rewrite(const kvv_gguf *g, size_t *n)
{
    kvv_gguf_writer *w = kvv_gguf_writer_new(g->version, KVV_GGUF_DEFAULT_ALIGNMENT);
    check(w != NULL);
    for (uint64_t i = 0; i < g->n_kv; i++)
        check(kvv_gguf_writer_copy_kv(w, &g->kv[i]) == KVV_OK);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kvv_gguf_tensor *t = &g->tensors[i];
        kvv_status st = kvv_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
        if (st != KVV_OK && strlen(t->name) == 64) {
            kvv_gguf_writer_free(w);
            return NULL;
        }
        check(st == KVV_OK);
    }
    uint8_t *buf = NULL;
    kvv_error err = {0};
    check(kvv_gguf_writer_to_buffer(w, &buf, n, &err) == KVV_OK);
    kvv_gguf_writer_free(w);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kvv_gguf *g = NULL, *h = NULL;
    kvv_error err = {0};
    kvv_status st = kvv_gguf_open_memory(data, size, "fuzz.gguf", &g, &err);
    if (st != KVV_OK) {
        check(g == NULL);
        check(st == KVV_ERR_FORMAT || st == KVV_ERR_NOMEM);
        check(st != KVV_ERR_FORMAT || strstr(err.msg, " at byte ") != NULL);
        return 0;
    }
    uint64_t sum = touch(g);
    size_t n = 0;
    uint8_t *copy = rewrite(g, &n);
    if (copy) {
        check(kvv_gguf_open_memory(copy, n, "fuzz-copy.gguf", &h, &err) == KVV_OK);
        check(h->n_kv == g->n_kv && h->n_tensors == g->n_tensors && h->alignment == g->alignment);
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const kvv_gguf_tensor *a = &g->tensors[i], *b = &h->tensors[i];
            check(strcmp(a->name, b->name) == 0 && a->type == b->type && a->nbytes == b->nbytes);
            check(memcmp(a->ne, b->ne, sizeof a->ne) == 0);
            check(a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
        }
        kvv_gguf_close(h);
        free(copy);
    }
    kvv_gguf_close(g);
    return (int)(sum & 0);
}
