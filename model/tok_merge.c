/* tok_merge.c — a binary min-heap of bigrams (see tok_merge.h). */
#include "model/tok_merge.h"

#include <stdlib.h>

/* a comes out before b: lower key, then smaller left index */
static bool before(const kvv_tok_bigram *a, const kvv_tok_bigram *b)
{
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

bool kvv_tok_heap_push(kvv_tok_heap *h, kvv_tok_bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        kvv_tok_bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&b, &h->v[p]))
            break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
    return true;
}

kvv_tok_bigram kvv_tok_heap_pop(kvv_tok_heap *h)
{
    kvv_tok_bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const kvv_tok_bigram *best = &last;
        if (l < h->n && before(&h->v[l], best)) {
            m = l;
            best = &h->v[l];
        }
        if (r < h->n && before(&h->v[r], best))
            m = r;
        if (m == i)
            break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (h->n > 0)
        h->v[i] = last;
    return top;
}
