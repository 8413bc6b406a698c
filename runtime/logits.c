/* logits.c — the argmax and top-K order of logits.h. */
#include "runtime/logits.h"

#include <math.h>
#include <stdbool.h>

/* a ranks before b (a and b ids into x) in logits.h's order. */
static bool before(const float *x, int a, int b)
{
    if (isnan(x[b]))
        return !isnan(x[a]) || a < b;
    if (isnan(x[a]))
        return false;
    return x[a] > x[b] || (x[a] == x[b] && a < b);
}

int32_t kvv_logits_argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (before(x, i, best))
            best = i;
    return best;
}

void kvv_logits_top_k(const float *x, int n, int k, int *ids)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int q = 0; q < j && !taken; q++)
                taken = ids[q] == i;
            if (!taken && (best < 0 || before(x, i, best)))
                best = i;
        }
        ids[j] = best;
    }
}

void kvv_logits_top2(const float *x, int n, int *i1, float *v1, int *i2, float *v2)
{
    int a = -1, b = -1;
    for (int i = 0; i < n; i++) {
        if (isnan(x[i]))
            continue;
        if (a < 0 || before(x, i, a)) {
            b = a;
            a = i;
        } else if (b < 0 || before(x, i, b)) {
            b = i;
        }
    }
    *i1 = a < 0 ? 0 : a;
    *v1 = a < 0 ? NAN : x[a];
    *i2 = b;
    *v2 = b < 0 ? NAN : x[b];
}
