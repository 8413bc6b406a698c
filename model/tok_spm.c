/*
 * tok_spm.c — SentencePiece-style BPE ("llama" tokenizer model), as
 * llama.cpp's llm_tokenizer_spm_session:
 *
 *   1. spaces become U+2581 ("▁"); the caller has already prepended one
 *      space when add_space_prefix asks for it;
 *   2. the text is cut into UTF-8 characters (by lead byte, so a broken
 *      sequence stays one short symbol);
 *   3. repeatedly merge the adjacent pair whose concatenation is a vocabulary
 *      token with the highest score (ties: the leftmost pair);
 *   4. each final symbol is its token, or, if it is no token, one byte token
 *      <0xXX> per byte (byte fallback).
 */
#include "model/tok_merge.h"
#include "model/tokenizer_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kvv_status kvv_tok_ids_push(kvv_tok_ids *ids, int32_t id, kvv_error *err)
{
    if (ids->n == ids->cap) {
        int cap = ids->cap ? 2 * ids->cap : 64;
        int32_t *v = realloc(ids->v, (size_t)cap * sizeof *v);
        if (!v)
            return kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory (%d ids)", cap);
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return KVV_OK;
}

static bool try_add(const kvv_tokenizer *t, const kvv_tok_symbol *sym, int left, int right,
                    kvv_tok_heap *h)
{
    if (left == -1 || right == -1)
        return true;
    size_t len = sym[left].n + sym[right].n;
    int32_t id = kvv_tok_map_get(&t->vocab, sym[left].text, len);
    if (id < 0)
        return true;
    /* highest score first: the queue takes the lowest key */
    kvv_tok_bigram b = {left, right, -(double)t->score[id], len};
    return kvv_tok_heap_push(h, b);
}

/* llama.cpp's byte_to_token for SPM: <0xXX>, else the byte itself. */
static kvv_status byte_token(const kvv_tokenizer *t, unsigned char c, int32_t *id, kvv_error *err)
{
    char buf[8];
    snprintf(buf, sizeof buf, "<0x%02X>", c);
    *id = kvv_tok_map_get(&t->vocab, buf, 6);
    if (*id < 0)
        *id = kvv_tok_map_get(&t->vocab, (const char *)&c, 1);
    if (*id < 0)
        return kvv_error_set(err, KVV_ERR_FORMAT,
                             "%s: tokenizer.ggml.tokens: no byte token <0x%02X> for byte fallback",
                             t->path, c);
    return KVV_OK;
}

kvv_status kvv_tok_spm_encode(const kvv_tokenizer *t, const char *raw, size_t raw_len,
                              kvv_tok_ids *out, kvv_error *err)
{
    kvv_status st = KVV_OK;
    size_t n_sp = 0;
    for (size_t i = 0; i < raw_len; i++)
        n_sp += raw[i] == ' ';
    size_t len = raw_len + 2 * n_sp;
    char *text = malloc(len + 1);
    kvv_tok_symbol *sym = malloc((len ? len : 1) * sizeof *sym);
    kvv_tok_heap h = {0};
    if (!text || !sym) {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory (%zu bytes)", len);
        goto done;
    }
    size_t o = 0;
    for (size_t i = 0; i < raw_len; i++) {
        if (raw[i] == ' ') {
            memcpy(text + o, "\xe2\x96\x81", 3);
            o += 3;
        } else {
            text[o++] = raw[i];
        }
    }

    int n_sym = 0;
    for (size_t off = 0; off < len;) {
        size_t cl = kvv_utf8_len((unsigned char)text[off]);
        if (cl > len - off)
            cl = len - off;
        sym[n_sym].text = text + off;
        sym[n_sym].n = cl;
        off += cl;
        sym[n_sym].prev = n_sym - 1;
        sym[n_sym].next = off == len ? -1 : n_sym + 1;
        n_sym++;
    }
    for (int i = 1; i < n_sym; i++)
        if (!try_add(t, sym, i - 1, i, &h))
            goto oom;
    while (h.n > 0) {
        kvv_tok_bigram b = kvv_tok_heap_pop(&h);
        kvv_tok_symbol *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = b.left;
        if (!try_add(t, sym, l->prev, b.left, &h) || !try_add(t, sym, b.left, l->next, &h))
            goto oom;
    }
    for (int i = n_sym ? 0 : -1; i != -1; i = sym[i].next) {
        int32_t id = kvv_tok_map_get(&t->vocab, sym[i].text, sym[i].n);
        if (id >= 0) {
            if ((st = kvv_tok_ids_push(out, id, err)))
                goto done;
            continue;
        }
        for (size_t j = 0; j < sym[i].n; j++) {
            if ((st = byte_token(t, (unsigned char)sym[i].text[j], &id, err)) ||
                (st = kvv_tok_ids_push(out, id, err)))
                goto done;
        }
    }
    goto done;
oom:
    st = kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory");
done:
    free(text);
    free(sym);
    free(h.v);
    return st;
}
