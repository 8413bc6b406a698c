/*
 * cpu_isa.h — which kernel table (instruction set) the cpu engine runs.
 *
 * The cpu engine has one kernel table per instruction set (cpu_kernels.h):
 * generic (portable C, any CPU), avx2 (AVX2 + FMA + F16C) and avx512
 * (AVX-512 F/BW/DQ/VL + FMA + F16C). Each table has its own reduction
 * order, so the table that ran is part of every result: the engine records
 * it in kvv_engine_desc.isa.
 *
 *   kvv_cpu_isa_info ci;
 *   if (kvv_cpu_isa_probe(&ci, &err)) ...          // what this CPU can run
 *   printf("default %s\n", kvv_cpu_isa_name(ci.best));
 *
 * The engine takes kvv_engine_opts.isa ("generic", "avx2", "avx512"; NULL,
 * "" or "auto" = ci.best) and refuses a table the CPU cannot run
 * (kvv_cpu_isa_choose).
 *
 * KVV_CPU_MAX_ISA=generic|avx2|avx512 in the environment caps what the
 * probe reports, as if the CPU had nothing wider (like OPENBLAS_CORETYPE):
 * it lets a machine with AVX-512 run the engine, `kvverify info --cpu` and
 * the tests as a machine without it would. An unknown value is an error
 * (KVV_ERR_USAGE), never silently ignored.
 */
#ifndef KVV_CPU_ISA_H
#define KVV_CPU_ISA_H

#include <stdbool.h>

#include "common/error.h"

typedef enum {
    KVV_CPU_ISA_GENERIC = 0,
    KVV_CPU_ISA_AVX2 = 1,
    KVV_CPU_ISA_AVX512 = 2,
    KVV_CPU_ISA_COUNT
} kvv_cpu_isa;

/* "generic", "avx2", "avx512"; "unknown" out of range. Static. */
const char *kvv_cpu_isa_name(kvv_cpu_isa isa);
/* What a table needs from the CPU, for messages: "AVX2, FMA and F16C",
 * "AVX-512 (avx512f/bw/dq/vl)" ... Static. */
const char *kvv_cpu_isa_needs(kvv_cpu_isa isa);
/* Parse a table name. @return 1 on success (sets *out), 0 otherwise. */
int kvv_cpu_isa_from_name(const char *s, kvv_cpu_isa *out);

typedef struct {
    bool can_run[KVV_CPU_ISA_COUNT]; /* the CPU has the instructions (and the OS saves
                                      * their registers), the build has the table, and
                                      * KVV_CPU_MAX_ISA allows it; generic always */
    bool native[KVV_CPU_ISA_COUNT];  /* the CPU itself has the instructions (before
                                      * KVV_CPU_MAX_ISA): a table native but not
                                      * can_run is hidden by the cap */
    kvv_cpu_isa best;                /* what the engine runs by default: the widest of those */
    char features[128];              /* the CPU's relevant cpuid flags, space-separated
                                      * ("avx2 fma f16c avx512f avx512bw avx512dq avx512vl"),
                                      * before any cap; "" on non-x86 builds */
    char max_isa[16];                /* KVV_CPU_MAX_ISA as set, "" when unset */
} kvv_cpu_isa_info;

/* Probe the CPU (cpuid, cheap; the same answer every call) and apply
 * KVV_CPU_MAX_ISA. @return KVV_OK, or KVV_ERR_USAGE when KVV_CPU_MAX_ISA
 * names no table (*out is then filled as if it were unset). */
kvv_status kvv_cpu_isa_probe(kvv_cpu_isa_info *out, kvv_error *err);

/* The table the engine runs for `want` (NULL, "" or "auto": the best this
 * CPU can run). @return KVV_OK and *out, or KVV_ERR_USAGE with a message
 * naming the table, what it needs and the tables available, e.g.
 * "--isa avx512: this CPU has no AVX-512 (avx512f/bw/dq/vl); tables
 * available: generic, avx2". */
kvv_status kvv_cpu_isa_choose(const char *want, kvv_cpu_isa *out, kvv_error *err);

/* The table's reduction order (cpu_kernels.h): *lanes accumulators (8 or
 * 16), *fused 1 if each step is one fused multiply-add. @return 0 when this
 * build has no such table. */
int kvv_cpu_isa_order(kvv_cpu_isa isa, int *lanes, int *fused);

/* "generic, avx2, avx512": the tables in info->can_run, narrowest first. */
void kvv_cpu_isa_list(const kvv_cpu_isa_info *info, char *buf, int size);

#endif
