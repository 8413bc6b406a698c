/*
 * tok_bpe.c — byte-level BPE ("gpt2" tokenizer model), as llama.cpp's
 * llm_tokenizer_bpe_session:
 *
 *   1. the pre-tokenizer (tok_pretok.c) cuts the text into words, already
 *      mapped byte by byte through GPT-2's bytes_to_unicode;
 *   2. per word: with ignore_merges (Llama 3), a word that is a token is
 *      taken whole; otherwise start from its characters and repeatedly merge
 *      the adjacent pair with the lowest rank in tokenizer.ggml.merges (ties:
 *      the leftmost pair);
 *   3. each final symbol is its token; a symbol that is no token is emitted
 *      byte by byte, each byte of its (mapped) UTF-8 looked up as a one-byte
 *      token and silently dropped when there is none — llama.cpp does the
 *      same, so ids match even for vocabularies with holes.
 */
#include "model/tok_merge.h"
#include "model/tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>

/* Rank of merging symbols left and right ("LEFT RIGHT" in the merge map). */
static bool add_bigram(const kvv_tokenizer *t, const kvv_tok_symbol *sym, int left, int right,
                       char *key,
                       kvv_tok_heap *h)
{
    if (left == -1 || right == -1)
        return true;
    const kvv_tok_symbol *l = &sym[left], *r = &sym[right];
    memcpy(key, l->text, l->n);
    key[l->n] = ' ';
    memcpy(key + l->n + 1, r->text, r->n);
    int32_t rank = kvv_tok_map_get(&t->merges, key, l->n + 1 + r->n);
    if (rank < 0)
        return true;
    kvv_tok_bigram b = {left, right, (double)rank, l->n + r->n};
    return kvv_tok_heap_push(h, b);
}

static kvv_status encode_word(const kvv_tokenizer *t, const char *w, size_t len,
                              kvv_tok_symbol *sym,
                              char *key, kvv_tok_heap *h, kvv_tok_ids *out, kvv_error *err)
{
    kvv_status st;
    int n_sym = 0;
    h->n = 0;
    if (t->ignore_merges && kvv_tok_map_get(&t->vocab, w, len) >= 0) {
        sym[0] = (kvv_tok_symbol){-1, -1, w, len};
        n_sym = 1;
    } else {
        for (size_t off = 0; off < len;) {
            size_t cl = kvv_utf8_len((unsigned char)w[off]);
            if (cl > len - off)
                cl = len - off;
            sym[n_sym] =
                (kvv_tok_symbol){n_sym - 1, off + cl == len ? -1 : n_sym + 1, w + off, cl};
            off += cl;
            n_sym++;
        }
    }
    for (int i = 1; i < n_sym; i++)
        if (!add_bigram(t, sym, i - 1, i, key, h))
            return kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory");
    while (h->n > 0) {
        kvv_tok_bigram b = kvv_tok_heap_pop(h);
        kvv_tok_symbol *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue; /* outdated: one side was merged elsewhere */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = b.left;
        if (!add_bigram(t, sym, l->prev, b.left, key, h) ||
            !add_bigram(t, sym, b.left, l->next, key, h))
            return kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory");
    }
    for (int i = n_sym ? 0 : -1; i != -1; i = sym[i].next) {
        if (sym[i].n == 0)
            continue;
        int32_t id = kvv_tok_map_get(&t->vocab, sym[i].text, sym[i].n);
        if (id >= 0) {
            if ((st = kvv_tok_ids_push(out, id, err)))
                return st;
            continue;
        }
        for (size_t j = 0; j < sym[i].n; j++) {
            id = kvv_tok_map_get(&t->vocab, sym[i].text + j, 1);
            if (id >= 0 && (st = kvv_tok_ids_push(out, id, err)))
                return st;
        }
    }
    return KVV_OK;
}

kvv_status kvv_tok_bpe_encode(const kvv_tokenizer *t, const char *text, size_t len,
                              kvv_tok_ids *out, kvv_error *err)
{
    char *words = NULL;
    size_t words_len = 0;
    int n_words = 0;
    kvv_status st = kvv_pretok_split(t->pretok, text, len, &words, &words_len, &n_words, err);
    if (st)
        return st;
    size_t longest = 0;
    for (size_t o = 0; o < words_len;) {
        size_t wl = strlen(words + o);
        if (wl > longest)
            longest = wl;
        o += wl + 1;
    }
    kvv_tok_symbol *sym = malloc((longest + 1) * sizeof *sym);
    char *key = malloc(2 * longest + 2);
    kvv_tok_heap h = {0};
    if (!sym || !key) {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory (word of %zu bytes)", longest);
        goto done;
    }
    for (size_t o = 0; o < words_len && !st;) {
        size_t wl = strlen(words + o);
        st = encode_word(t, words + o, wl, sym, key, &h, out, err);
        o += wl + 1;
    }
done:
    free(words);
    free(sym);
    free(key);
    free(h.v);
    return st;
}
