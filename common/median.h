/*
 * median.h — the median and range of repeated measurements (timings of
 * `bench` and `latency`: a median resists the one repeat the scheduler
 * slowed down).
 *
 *   double t[5] = {...};
 *   double m = kvv_median(t, 5);   // t is left as it was
 */
#ifndef KVV_MEDIAN_H
#define KVV_MEDIAN_H

/* Median of v[0..n): the middle value, or the mean of the two middle ones
 * when n is even; v is not changed. NaNs sort after every number.
 * @return 0 when n < 1, or when n > 64 and the copy cannot be allocated. */
double kvv_median(const double *v, int n);

/* Smallest and largest of v[0..n) into *lo, *hi (both 0 when n < 1). */
void kvv_range(const double *v, int n, double *lo, double *hi);

#endif
