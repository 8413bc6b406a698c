/*
 * synth_vocab.c — the synthetic SentencePiece vocabulary (see synth.h).
 *
 * Layout of n tokens:
 *   0          <unk>                 type 2 (unknown)
 *   1, 2       <s>, </s>             type 3 (control)
 *   3..258     <0x00>..<0xFF>        type 6 (byte fallback)
 *   259        "▁"                   type 1 (normal), then
 *              the 94 printable ASCII characters '!'..'~',
 *              "▁" + each of them,
 *              lowercase words of length 2, 3, ... in lexicographic order,
 *              each as "▁word" then "word",
 * until n tokens. Every piece is unique by construction.
 */
#include "model/synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPACE "\xe2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space */

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_BYTE = 6 };

void kvv_synth_vocab_free(kvv_synth_vocab *v)
{
    if (!v)
        return;
    if (v->tokens)
        for (int i = 0; i < v->n; i++)
            free(v->tokens[i]);
    free(v->tokens);
    free(v->scores);
    free(v->types);
    memset(v, 0, sizeof *v);
}

/* The k-th lowercase word in length-then-lexicographic order, starting at
 * length 2: k = 0 -> "aa", 675 -> "zz", 676 -> "aaa", ... */
static void nth_word(long k, char *out)
{
    int len = 2;
    long count = 26 * 26;
    while (k >= count) {
        k -= count;
        len++;
        count *= 26;
    }
    for (int i = len - 1; i >= 0; i--) {
        out[i] = (char)('a' + k % 26);
        k /= 26;
    }
    out[len] = '\0';
}

kvv_status kvv_synth_vocab_build(int n, kvv_synth_vocab *v, kvv_error *err)
{
    memset(v, 0, sizeof *v);
    if (n < KVV_SYNTH_MIN_VOCAB || n > KVV_SYNTH_MAX_VOCAB)
        return kvv_error_set(err, KVV_ERR_USAGE, "vocabulary size %d is out of range (%d..%d)", n,
                             KVV_SYNTH_MIN_VOCAB, KVV_SYNTH_MAX_VOCAB);
    v->tokens = calloc((size_t)n, sizeof *v->tokens);
    v->scores = calloc((size_t)n, sizeof *v->scores);
    v->types = calloc((size_t)n, sizeof *v->types);
    if (!v->tokens || !v->scores || !v->types) {
        free(v->tokens);
        free(v->scores);
        free(v->types);
        memset(v, 0, sizeof *v);
        return kvv_error_set(err, KVV_ERR_NOMEM, "out of memory for a %d-token vocabulary", n);
    }
    v->n = n;
    char piece[32];
    long word = 0;
    int normal = 0;
    for (int i = 0; i < n; i++) {
        int type = TT_NORMAL;
        if (i == 0) {
            strcpy(piece, "<unk>");
            type = TT_UNKNOWN;
        } else if (i == 1 || i == 2) {
            strcpy(piece, i == 1 ? "<s>" : "</s>");
            type = TT_CONTROL;
        } else if (i < 259) {
            snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
            type = TT_BYTE;
        } else if (i == 259) {
            strcpy(piece, SPACE);
        } else if (i < 260 + 94) {
            piece[0] = (char)('!' + (i - 260));
            piece[1] = '\0';
        } else if (i < 260 + 2 * 94) {
            snprintf(piece, sizeof piece, SPACE "%c", '!' + (i - 260 - 94));
        } else {
            int k = i - (260 + 2 * 94);
            char w[16];
            nth_word(word, w);
            if (k % 2 == 0) {
                snprintf(piece, sizeof piece, SPACE "%s", w);
            } else {
                snprintf(piece, sizeof piece, "%s", w);
                word++;
            }
        }
        v->tokens[i] = strdup(piece);
        if (!v->tokens[i]) {
            kvv_synth_vocab_free(v);
            return kvv_error_set(err, KVV_ERR_NOMEM, "out of memory for a %d-token vocabulary", n);
        }
        v->types[i] = type;
        v->scores[i] = type == TT_NORMAL ? (float)-(normal++) : 0.0f;
    }
    return KVV_OK;
}
