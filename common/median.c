/* median.c — see median.h. */
#include "common/median.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Numbers ascending, NaNs last (a plain < puts them anywhere). */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    if (isnan(x) || isnan(y))
        return isnan(x) - isnan(y);
    return (x > y) - (x < y);
}

double kvv_median(const double *v, int n)
{
    if (n < 1)
        return 0;
    double small[64], *c = n <= 64 ? small : malloc(sizeof(double) * (size_t)n);
    if (!c)
        return 0;
    memcpy(c, v, sizeof(double) * (size_t)n);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    if (c != small)
        free(c);
    return m;
}

void kvv_range(const double *v, int n, double *lo, double *hi)
{
    *lo = *hi = n > 0 ? v[0] : 0;
    for (int i = 1; i < n; i++) {
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
}
