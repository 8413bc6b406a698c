/* select.c — see select.h. Sorting is a stable insertion-free selection:
 * O(n * keep) worst case is fine for contexts of a few thousand tokens, and
 * it keeps the tie rule obvious. */
#include "engine/policy/select.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    double score;
    int idx;
} scored;

/* Higher score first; equal scores: lower index first. */
static int cmp_scored(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score > y->score) return -1;
    if (x->score < y->score) return 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

void kvv_select_topk(const double *score, const uint8_t *forced, int n, int keep, uint8_t *out)
{
    memset(out, 0, (size_t)(n > 0 ? n : 0));
    if (n <= 0 || keep <= 0)
        return;
    if (keep >= n) {
        memset(out, 1, (size_t)n);
        return;
    }
    int kept = 0;
    /* Forced survivors, highest positions first if they alone exceed keep. */
    if (forced) {
        for (int i = n - 1; i >= 0 && kept < keep; i--)
            if (forced[i]) {
                out[i] = 1;
                kept++;
            }
    }
    if (kept >= keep)
        return;
    scored *s = malloc((size_t)n * sizeof *s);
    if (!s) {
        /* Fall back to the window rule rather than fail: still deterministic. */
        for (int i = n - 1; i >= 0 && kept < keep; i--)
            if (!out[i]) { out[i] = 1; kept++; }
        return;
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!out[i]) {
            s[m].score = score[i];
            s[m].idx = i;
            m++;
        }
    qsort(s, (size_t)m, sizeof *s, cmp_scored);
    for (int j = 0; j < m && kept < keep; j++) {
        out[s[j].idx] = 1;
        kept++;
    }
    free(s);
}

void kvv_select_window(int n, int keep, uint8_t *out)
{
    for (int i = 0; i < n; i++)
        out[i] = i >= n - keep;
}

void kvv_select_streaming(int n, int sinks, int keep, uint8_t *out)
{
    if (keep <= sinks) {
        for (int i = 0; i < n; i++)
            out[i] = i < keep;
        return;
    }
    int recent = keep - sinks;
    for (int i = 0; i < n; i++)
        out[i] = i < sinks || i >= n - recent;
}

void kvv_select_pool(const double *s, int n, int kernel, double *out)
{
    int h = kernel / 2;
    for (int i = 0; i < n; i++) {
        double acc = 0.0;
        for (int j = i - h; j <= i + h; j++)  /* ascending: a fixed order */
            if (j >= 0 && j < n)
                acc += s[j];
        out[i] = acc / (double)kernel;
    }
}

int kvv_select_pyramid_budget(int budget, int n_layer, int layer)
{
    if (n_layer <= 1)
        return budget;
    int b_min = budget / 2;
    int b_max = 2 * budget - b_min;
    return b_max - layer * (b_max - b_min) / (n_layer - 1);
}
