/*
 * tok_merge.h — the merge queue SPM and BPE share (private to model/tok_*.c).
 *
 * Both tokenizers start from one symbol per character (or byte) in a doubly
 * linked list and repeatedly merge the adjacent pair that comes first: SPM by
 * the merged token's highest score, BPE by the lowest merge rank, ties by the
 * leftmost pair, as llama.cpp does. The queue orders pairs by `key` (lower
 * first; SPM passes -score, BPE the rank: both exact in a double) and then by
 * the left symbol's index.
 */
#ifndef KVV_TOK_MERGE_H
#define KVV_TOK_MERGE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int prev, next;      /* neighbours in the list, -1 at the ends */
    const char *text;    /* bytes of the symbol (into the input) */
    size_t n;            /* 0 once merged into its left neighbour */
} kvv_tok_symbol;

typedef struct {
    int left, right;     /* symbol indices */
    double key;          /* lower merges first */
    size_t size;         /* bytes of the merged text when queued (stale check) */
} kvv_tok_bigram;

typedef struct {
    kvv_tok_bigram *v;
    size_t n, cap;
} kvv_tok_heap;

/* @return false on allocation failure (the heap is unchanged). */
bool kvv_tok_heap_push(kvv_tok_heap *h, kvv_tok_bigram b);
/* The first pair; h->n must be > 0. */
kvv_tok_bigram kvv_tok_heap_pop(kvv_tok_heap *h);

#endif
