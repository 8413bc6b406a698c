/*
 * fuzz_vocab.c — libFuzzer target for building a tokenizer from hostile
 * vocabulary metadata (kvv_tokenizer_open over tokenizer.ggml.*: tokens,
 * types, scores, merges, special ids, pre-tokenizer name) and using it.
 *
 *   make fuzz-one FUZZ_TARGET=fuzz_vocab
 *   build/tests/fuzz/replay_fuzz_vocab tests/fuzz/corpus/vocab   # inside make test
 *
 * The input is a whole GGUF file (the seeds are the vocabulary-only files
 * fuzz_tokenizer.c builds: KVV_FUZZ_DUMP_SEEDS=DIR writes them). An
 * accepted vocabulary encodes a fixed sample text under each combination
 * of add_special and parse_special, and decodes the result.
 *
 * Properties (a broken one calls abort()): opening gives a tokenizer or an
 * error with a message (never both, never a crash); every id an accepted
 * tokenizer produces is inside its vocabulary and decodes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "model/gguf.h"
#include "model/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char sample[] = "Hello world, it's 2024!\n  <s> <|endoftext|> <tool> [CLS] "
                                 "\xc3\xa9t\xc3\xa9 \xe4\xb8\x80 \xf0\x9f\x98\x81 12345 \xff";
    kvv_gguf *g = NULL;
    kvv_error err = {0};
    if (kvv_gguf_open_memory(data, size, "fuzz-vocab.gguf", &g, &err) != KVV_OK)
        return 0;
    kvv_tokenizer *t = NULL;
    kvv_status st = kvv_tokenizer_open(g, &t, &err);
    kvv_gguf_close(g); /* the tokenizer copies what it needs */
    if (st != KVV_OK) {
        check(t == NULL && err.msg[0] != '\0');
        return 0;
    }
    const int nv = kvv_tokenizer_n_vocab(t);
    check(nv > 0);
    for (int flags = 0; flags < 4; flags++) {
        int32_t *ids = NULL;
        int n = 0;
        if (kvv_tokenize_ex(t, sample, sizeof sample - 1, flags & 1, flags & 2, &ids, &n, &err) ==
            KVV_OK) {
            for (int i = 0; i < n; i++)
                check(ids[i] >= 0 && ids[i] < nv);
            char *back = NULL;
            size_t bl = 0;
            check(kvv_detokenize(t, ids, n, &back, &bl, &err) == KVV_OK);
            check(back != NULL && back[bl] == '\0');
            free(back);
        }
        free(ids);
    }
    kvv_tokenizer_free(t);
    return 0;
}
