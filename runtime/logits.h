/*
 * logits.h — choosing tokens from a row of logits: the one argmax every
 * greedy path uses (engine/greedy.h, `kvverify run`, the checks, the golden
 * vectors), and the top-K and top-2 views of the same order.
 *
 * The order, fixed here once so that two commands never disagree on a row:
 *   - larger value first (+inf is the largest; -0.0 and +0.0 are equal);
 *   - equal values: the lower id first (llama.cpp's greedy sampler and the
 *     peer dumps break ties the same way);
 *   - NaN never wins: a NaN ranks after every number, whatever its index
 *     (a NaN at id 0 does not block the rest of the row);
 *   - a row of NaNs only (or n <= 0): the argmax is 0.
 *
 *   int32_t tok = kvv_logits_argmax(row, n_vocab);
 *   int ids[5];
 *   kvv_logits_top_k(row, n_vocab, 5, ids);   // ids[0] == tok
 */
#ifndef KVV_LOGITS_H
#define KVV_LOGITS_H

#include <stdint.h>

/* @return the id of the largest logit of x[0..n) in the order above;
 * 0 when n <= 0 or every value is NaN. */
int32_t kvv_logits_argmax(const float *x, int n);

/* The k largest of x[0..n) in the order above into ids[0..k) (NaNs last,
 * among themselves by ascending id), so ids[0] == kvv_logits_argmax(x, n).
 * k must be <= n. O(n k): meant for the few ids a report shows. */
void kvv_logits_top_k(const float *x, int n, int k, int *ids);

/* The two largest values and their ids in the order above, NaNs skipped:
 * i1 (0 and v1 NaN when there is no number), i2 (-1 and v2 NaN when there
 * is no second number). */
void kvv_logits_top2(const float *x, int n, int *i1, float *v1, int *i2, float *v2);

#endif
