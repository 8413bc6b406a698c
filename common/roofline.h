/*
 * roofline.h — what this machine delivers, the one probe `latency` and
 * `bench` put their figures beside: OpenBLAS sgemm GFLOP/s and the
 * streaming read bandwidth, with a given thread count.
 *
 *   kvv_roofline r;
 *   kvv_roofline_probe(2, &r);        // about a second
 *   double floor_s = bytes / (r.read_gbs * 1e9);
 *
 * The read loop is what decode and a cache read compete with: they read
 * every byte once, so bytes / read_gbs is the fastest either can be.
 */
#ifndef KVV_ROOFLINE_H
#define KVV_ROOFLINE_H

#include <stddef.h>

/* Bytes the read loop streams per pass (larger than any L3). */
#define KVV_ROOFLINE_READ_BYTES ((size_t)256 << 20)
/* Passes per measurement of the read bandwidth; the best one counts. One
 * pass lasts a few milliseconds, and on a shared machine a single pass
 * could read a third of the bandwidth when the scheduler took a core. */
#define KVV_ROOFLINE_READ_PASSES 3

typedef struct {
    double read_gbs;       /* streaming read, bytes / s / 1e9, best of READ_PASSES */
    double sgemm_gflops;   /* OpenBLAS sgemm 128 x 1536 x 576, best of 10 */
    int threads;           /* threads both ran with */
} kvv_roofline;

/* Both figures with `threads` threads (clamped to 1..64). A figure is 0
 * when its buffers cannot be allocated. Never fails; the read buffer is
 * kept for later passes until kvv_roofline_free. */
void kvv_roofline_probe(int threads, kvv_roofline *out);

/* Best of 10: a plain sgemm of a prompt-sized product (128 x 1536 x 576,
 * OpenBLAS with `threads` threads; set back to 1 after), in GFLOP/s. 0 on
 * allocation failure. */
double kvv_roofline_sgemm_gflops(int threads);

/* One pass of `threads` threads each summing its share of a
 * KVV_ROOFLINE_READ_BYTES buffer (allocated and filled on the first call,
 * kept until kvv_roofline_free), in GB/s (1e9 bytes/s); *sink collects the
 * sums so they are not optimised away. 0 on allocation failure. */
double kvv_roofline_read_gbs(int threads, double *sink);
void kvv_roofline_free(void);

#endif
