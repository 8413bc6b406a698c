/*
 * bench_machine.h — what this machine delivers, for `kvverify bench`'s
 * roofline: OpenBLAS sgemm GFLOP/s and the streaming read bandwidth, both
 * with the thread count the engines get, measured in the same run as them.
 *
 *   double gbs = kvv_bench_read_gbs(2, &sink);   // one pass over 256 MiB
 *
 * The read loop is the decode's competitor: decode reads every weight once
 * per token, so bytes of weights per token x tokens/s over this figure is
 * the fraction of the memory bandwidth decode uses.
 */
#ifndef KVV_BENCH_MACHINE_H
#define KVV_BENCH_MACHINE_H

/* Bytes the read loop streams per pass (larger than any L3). */
#define KVV_BENCH_READ_BYTES ((size_t)256 << 20)
/* Passes per measurement of the read bandwidth; the best one counts. One
 * pass lasts a few milliseconds, and on a shared machine a single pass
 * could read a third of the bandwidth when the scheduler took a core. */
#define KVV_BENCH_READ_PASSES 3

/* Best of 10: a plain sgemm of a prompt-sized product (128 x 1536 x 576,
 * OpenBLAS with `threads` threads; set back to 1 after), in GFLOP/s. 0 on
 * allocation failure. */
double kvv_bench_sgemm_gflops(int threads);

/* One pass of `threads` threads each summing its share of a
 * KVV_BENCH_READ_BYTES buffer (allocated and filled on the first call,
 * kept until kvv_bench_read_free), in GB/s (1e9 bytes/s); *sink collects
 * the sums so they are not optimised away. 0 on allocation failure. */
double kvv_bench_read_gbs(int threads, double *sink);
void kvv_bench_read_free(void);

#endif
