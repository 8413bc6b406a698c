/*
 * kernel_runs.h — the kernel tables a kernel test runs (test-only): generic
 * natively, avx2 and avx512 natively where this CPU (capped by
 * KVV_CPU_MAX_ISA) runs them, and always as the same source compiled
 * against SIMDe (tests/engine/simde_x86.h; the Makefile links EMU_OBJ).
 *
 *   kernel_runs_setup     the cmocka group setup that fills `runs`;
 *   FOR_EACH_RUN(r)       loops over them, naming each in the output;
 *   assert_bits           bit-for-bit equality, naming the run on failure.
 */
#ifndef KVV_TESTS_KERNEL_RUNS_H
#define KVV_TESTS_KERNEL_RUNS_H

#include <stdio.h>
#include <string.h>

#include "engine/cpu/cpu_kernels.h"
#include "tests/test_util.h"

extern const kvv_cpu_kernels kvv_cpu_kernels_avx2_emu;
extern const kvv_cpu_kernels kvv_cpu_kernels_avx512_emu;

typedef struct {
    const kvv_cpu_kernels *k;
    const char *name, *how;
    int emulated;
} table_run;

static table_run runs[2 * KVV_CPU_ISA_COUNT];
static int n_runs;
static kvv_cpu_isa_info run_cpu;

static int kernel_runs_setup(void **state)
{
    (void)state;
    kvv_error err = {0};
    if (kvv_cpu_isa_probe(&run_cpu, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    const kvv_cpu_kernels *emu[KVV_CPU_ISA_COUNT] = {NULL, &kvv_cpu_kernels_avx2_emu,
                                                     &kvv_cpu_kernels_avx512_emu};
    n_runs = 0;
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++) {
        if (run_cpu.can_run[i])
            runs[n_runs++] = (table_run){kvv_cpu_kernels_of((kvv_cpu_isa)i),
                                         kvv_cpu_isa_name((kvv_cpu_isa)i), "native", 0};
        if (emu[i])
            runs[n_runs++] = (table_run){emu[i], kvv_cpu_isa_name((kvv_cpu_isa)i), "emulated", 1};
    }
    return 0;
}

static const table_run *cur;
#define FOR_EACH_RUN(r)                                                                           \
    for (const table_run *r = runs;                                                               \
         r < runs + n_runs && (cur = r, print_message("  %s (%s)\n", r->name, r->how), 1); r++)

static inline void assert_bits(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s (%s): %s: element %zu is %a, expected %a", cur ? cur->name : "?",
                     cur ? cur->how : "?", what, i, (double)got[i], (double)want[i]);
}

#endif
