/*
 * tok_wpm.c — WordPiece ("bert" tokenizer model), as llama.cpp's
 * llm_tokenizer_wpm_session:
 *
 *   1. normalize: with strip_accents, each code point is replaced by the first
 *      code point of its canonical decomposition and accent marks (\p{M}) are
 *      dropped; NUL, U+FFFD and control characters are dropped; with
 *      lowercase, simple lowercase mapping;
 *   2. split on whitespace; punctuation, ASCII symbols and CJK ideographs are
 *      single-character words;
 *   3. per word, prepend "▁" (the GGUF converter stores word-initial pieces
 *      as "▁piece" and continuation pieces "##piece" as "piece"), then take
 *      the longest vocabulary token at each position; if some position has
 *      no token, the whole word is the unknown token.
 */
#include "model/tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>

static bool is_chinese(uint32_t c)
{
    return (c >= 0x04E00 && c <= 0x09FFF) || (c >= 0x03400 && c <= 0x04DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0x0F900 && c <= 0x0FAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Encode one word (already prefixed with ▁) greedily, longest match first. */
static kvv_status encode_word(const kvv_tokenizer *t, const char *w, int n, kvv_tok_ids *out,
                              kvv_error *err)
{
    kvv_status st;
    int start = out->n;
    for (int i = 0; i < n; i++) {
        bool match = false;
        int jmax = n < i + t->max_token_len + 1 ? n : i + t->max_token_len + 1;
        for (int j = jmax; j > i; j--) {
            int32_t id = kvv_tok_map_get(&t->vocab, w + i, (size_t)(j - i));
            if (id >= 0) {
                if ((st = kvv_tok_ids_push(out, id, err)))
                    return st;
                match = true;
                i = j - 1;
                break;
            }
        }
        if (!match) {
            out->n = start; /* discard the whole word */
            break;
        }
    }
    if (out->n == start) {
        if (t->unk < 0)
            return kvv_error_set(err, KVV_ERR_FORMAT,
                                 "%s: tokenizer.ggml.unknown_token_id: word '%.*s' has no "
                                 "WordPiece tokenization and the vocabulary has no unknown token",
                                 t->path, n - 3, w + 3);
        return kvv_tok_ids_push(out, t->unk, err);
    }
    return KVV_OK;
}

kvv_status kvv_tok_wpm_encode(const kvv_tokenizer *t, const char *text, size_t len,
                              kvv_tok_ids *out, kvv_error *err)
{
    uint32_t *cpts = NULL;
    size_t n = 0;
    kvv_status st = kvv_utf8_decode(text, len, &cpts, &n, err);
    if (st)
        return st;
    /* each word: "▁" + at most 4 bytes per code point */
    char *word = malloc(4 * n + 4);
    if (!word) {
        free(cpts);
        return kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory");
    }
    memcpy(word, "\xe2\x96\x81", 3);
    int wl = 3;
#define FLUSH()                                                           \
    do {                                                                  \
        if (wl > 3 && (st = encode_word(t, word, wl, out, err)))          \
            goto done;                                                    \
        wl = 3;                                                           \
    } while (0)
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cpts[i];
        if (t->strip_accents)
            c = kvv_cpt_nfd_first(c);
        uint16_t f = kvv_cpt_flags(c);
        if (f & KVV_CPT_WHITESPACE) {
            FLUSH();
            continue;
        }
        if (c == 0 || c == 0xFFFD || (f & KVV_CPT_CONTROL))
            continue;
        if (t->strip_accents && (f & KVV_CPT_MARK))
            continue;
        char u8[4];
        int k = kvv_utf8_encode(t->lowercase ? kvv_cpt_tolower(c) : c, u8);
        if ((f & KVV_CPT_PUNCTUATION) || (c < 0x7F && (f & KVV_CPT_SYMBOL)) || is_chinese(c)) {
            FLUSH();
            memcpy(word + 3, u8, (size_t)k);
            wl = 3 + k;
            FLUSH();
        } else {
            memcpy(word + wl, u8, (size_t)k);
            wl += k;
        }
    }
    FLUSH();
#undef FLUSH
done:
    free(word);
    free(cpts);
    return st;
}
