/*
 * mem_limit.h — how much memory a run may take, and the check every large
 * allocation makes before it is attempted (`--max-memory BYTES`).
 *
 * Two halves, both reading the same state, the process's data limit
 * (RLIMIT_DATA, which since Linux 4.7 counts the heap and every private
 * writable mapping, i.e. everything malloc hands out):
 *
 *   1. kvv_mem_limit_set(cap): the hard cap. The limit becomes what the
 *      process holds now plus cap, so an allocation nobody foresaw fails
 *      (malloc returns NULL -> KVV_ERR_NOMEM -> a message and exit 2)
 *      instead of the kernel's OOM killer ending the run. "What the process
 *      holds now" is counted because libraries (OpenBLAS's thread stacks,
 *      a sanitizer's shadow memory) map memory before main runs.
 *   2. kvv_mem_plan_check(plan): the pre-check. An engine (its weights and
 *      KV cache), a check (its captures) adds up what it is about to
 *      allocate and asks first; a plan that does not fit is KVV_ERR_NOMEM
 *      with a message naming each part and its size, e.g.
 *        "reference engine: needs 1.31 GiB (weights as fp32 1.25 GiB, KV
 *         cache of 4096 positions 64.0 MiB) but the memory limit
 *         (--max-memory) leaves 512 MiB"
 *      Without a limit a plan is still checked against the machine's memory
 *      (RAM + swap, or a cgroup's memory.max when lower): a file that
 *      declares a terabyte KV cache is refused, not attempted.
 *
 * Sizes are uint64_t; kvv_mem_mul saturates instead of wrapping, so a plan
 * built from hostile dimensions overflows to "too big", never to small.
 *
 *   kvv_mem_plan p = kvv_mem_plan_new("reference engine");
 *   kvv_mem_plan_add(&p, wbytes, "weights as fp32");
 *   kvv_mem_plan_add(&p, cbytes, "KV cache of %d positions", n_ctx);
 *   if (kvv_mem_plan_check(&p, err)) return err->status;   // before any malloc
 */
#ifndef KVV_MEM_LIMIT_H
#define KVV_MEM_LIMIT_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* a * b, or UINT64_MAX when the product does not fit. */
static inline uint64_t kvv_mem_mul(uint64_t a, uint64_t b)
{
    return (a != 0 && b > UINT64_MAX / a) ? UINT64_MAX : a * b;
}

/* a + b, or UINT64_MAX when the sum does not fit. */
static inline uint64_t kvv_mem_add(uint64_t a, uint64_t b)
{
    return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

/* Bytes of private writable memory the process holds now (VmData of
 * /proc/self/status: what RLIMIT_DATA is compared against); 0 when /proc
 * cannot be read. */
uint64_t kvv_mem_held(void);

/* The machine's memory: RAM + swap, or the cgroup's memory.max when that is
 * lower. UINT64_MAX when it cannot be read. */
uint64_t kvv_mem_machine(void);

/* Cap what the process may still allocate at cap bytes: RLIMIT_DATA's soft
 * limit becomes kvv_mem_held() + cap (the hard limit is kept; a cap above
 * it is KVV_ERR_USAGE). @return KVV_OK, or KVV_ERR_USAGE / KVV_ERR_IO with
 * a message. */
kvv_status kvv_mem_limit_set(uint64_t cap, kvv_error *err);

/* Bytes the process may still allocate under its data limit (the limit
 * minus what it holds; 0 when it already holds more), UINT64_MAX with no
 * limit. */
uint64_t kvv_mem_available(void);

/* Address space one more thread takes: its stack (RLIMIT_STACK, the
 * glibc default; 8 MiB when unlimited). */
uint64_t kvv_mem_thread_stack(void);

/* Address space OpenBLAS maps as a work buffer for each thread that runs a
 * product (measured: 128 MiB + a page in OpenBLAS 0.3.21 on x86-64). */
#define KVV_MEM_BLAS_BUFFER ((uint64_t)128 << 20)

/* "512 B", "1.50 KiB", "12.0 MiB", "1.31 GiB"; @return buf. */
char *kvv_mem_format(uint64_t bytes, char *buf, size_t size);

/* ------------------------------------------------------------ plans */

#define KVV_MEM_PLAN_MAX 8

/* What one component is about to allocate, part by part. */
typedef struct {
    const char *who;                 /* "reference engine", "kv: captures" (static) */
    int n;                           /* parts used */
    struct {
        char what[64];               /* "weights as fp32", "KV cache of 4096 positions" */
        uint64_t bytes;
    } part[KVV_MEM_PLAN_MAX];
} kvv_mem_plan;

kvv_mem_plan kvv_mem_plan_new(const char *who);
/* Add a part (printf-style name); parts past KVV_MEM_PLAN_MAX are added to
 * the last one. Zero-byte parts are dropped. */
void kvv_mem_plan_add(kvv_mem_plan *p, uint64_t bytes, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sum of the parts (saturating). */
uint64_t kvv_mem_plan_total(const kvv_mem_plan *p);

/* Does the plan fit what the process may still allocate
 * (kvv_mem_available) and the machine (kvv_mem_machine)?
 * @return KVV_OK, or KVV_ERR_NOMEM with the message above. */
kvv_status kvv_mem_plan_check(const kvv_mem_plan *p, kvv_error *err);

#endif
