/*
 * cpu_isa.c — what this CPU can run (cpuid), KVV_CPU_MAX_ISA, and the
 * choice of the cpu engine's kernel table (cpu_isa.h).
 */
#include "engine/cpu/cpu_isa.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVV_CPU_X86 1
#include <cpuid.h>
#else
#define KVV_CPU_X86 0
#endif

static const char *const isa_names[KVV_CPU_ISA_COUNT] = {"generic", "avx2", "avx512"};
static const char *const isa_needs[KVV_CPU_ISA_COUNT] = {
    "nothing", "AVX2 (with FMA and F16C)", "AVX-512 (avx512f/bw/dq/vl)"};

const char *kvv_cpu_isa_name(kvv_cpu_isa isa)
{
    return (unsigned)isa < KVV_CPU_ISA_COUNT ? isa_names[isa] : "unknown";
}

const char *kvv_cpu_isa_needs(kvv_cpu_isa isa)
{
    return (unsigned)isa < KVV_CPU_ISA_COUNT ? isa_needs[isa] : "unknown";
}

int kvv_cpu_isa_from_name(const char *s, kvv_cpu_isa *out)
{
    for (int i = 0; s && i < KVV_CPU_ISA_COUNT; i++)
        if (strcmp(s, isa_names[i]) == 0) {
            *out = (kvv_cpu_isa)i;
            return 1;
        }
    return 0;
}

const kvv_cpu_kernels *kvv_cpu_kernels_of(kvv_cpu_isa isa)
{
    switch (isa) {
    case KVV_CPU_ISA_GENERIC: return &kvv_cpu_kernels_generic;
#if KVV_CPU_X86
    case KVV_CPU_ISA_AVX2: return &kvv_cpu_kernels_avx2;
    case KVV_CPU_ISA_AVX512: return &kvv_cpu_kernels_avx512;
#endif
    default: return NULL;
    }
}

int kvv_cpu_isa_order(kvv_cpu_isa isa, int *lanes, int *fused)
{
    const kvv_cpu_kernels *k = kvv_cpu_kernels_of(isa);
    *lanes = k ? k->lanes : 0;
    *fused = k ? k->fused : 0;
    return k != NULL;
}

/* The CPU's own answer, before KVV_CPU_MAX_ISA: has[isa], and the flags. */
static void detect(bool has[KVV_CPU_ISA_COUNT], char *features, size_t size)
{
    memset(has, 0, KVV_CPU_ISA_COUNT * sizeof has[0]);
    has[KVV_CPU_ISA_GENERIC] = true;
    features[0] = '\0';
#if KVV_CPU_X86
    /* FMA and F16C from cpuid leaf 1 (ECX bits 12 and 29): not every
     * compiler's __builtin_cpu_supports knows their names. AVX2 and AVX-512
     * through __builtin_cpu_supports, which also checks that the OS saves
     * the registers (XGETBV). */
    unsigned a, b, c = 0, d;
    int fma = 0, f16c = 0;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        fma = (int)(c >> 12 & 1u);
        f16c = (int)(c >> 29 & 1u);
    }
    __builtin_cpu_init();
    const struct {
        const char *name;
        int on;
    } f[] = {
        {"avx2", __builtin_cpu_supports("avx2")},
        {"fma", fma},
        {"f16c", f16c},
        {"avx512f", __builtin_cpu_supports("avx512f")},
        {"avx512bw", __builtin_cpu_supports("avx512bw")},
        {"avx512dq", __builtin_cpu_supports("avx512dq")},
        {"avx512vl", __builtin_cpu_supports("avx512vl")},
    };
    size_t off = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].on && off < size)
            off += (size_t)snprintf(features + off, size - off, "%s%s", off ? " " : "", f[i].name);
    has[KVV_CPU_ISA_AVX2] = f[0].on && fma && f16c;
    has[KVV_CPU_ISA_AVX512] = has[KVV_CPU_ISA_AVX2] && f[3].on && f[4].on && f[5].on && f[6].on;
#else
    (void)size;
#endif
}

kvv_status kvv_cpu_isa_probe(kvv_cpu_isa_info *out, kvv_error *err)
{
    memset(out, 0, sizeof *out);
    bool has[KVV_CPU_ISA_COUNT];
    detect(has, out->features, sizeof out->features);
    kvv_status st = KVV_OK;
    kvv_cpu_isa cap = KVV_CPU_ISA_COUNT - 1;
    const char *env = getenv("KVV_CPU_MAX_ISA");
    if (env && env[0]) {
        snprintf(out->max_isa, sizeof out->max_isa, "%s", env);
        if (!kvv_cpu_isa_from_name(env, &cap)) {
            cap = KVV_CPU_ISA_COUNT - 1;
            st = kvv_error_set(err, KVV_ERR_USAGE,
                               "KVV_CPU_MAX_ISA='%s' is not generic, avx2 or avx512", env);
        }
    }
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++) {
        out->native[i] = has[i];
        out->can_run[i] = has[i] && i <= (int)cap && kvv_cpu_kernels_of((kvv_cpu_isa)i);
        if (out->can_run[i])
            out->best = (kvv_cpu_isa)i;
    }
    return st;
}

void kvv_cpu_isa_list(const kvv_cpu_isa_info *info, char *buf, int size)
{
    int off = 0;
    buf[0] = '\0';
    for (int i = 0; i < KVV_CPU_ISA_COUNT && off < size; i++)
        if (info->can_run[i])
            off += snprintf(buf + off, (size_t)(size - off), "%s%s", off ? ", " : "",
                            isa_names[i]);
}

kvv_status kvv_cpu_isa_choose(const char *want, kvv_cpu_isa *out, kvv_error *err)
{
    kvv_cpu_isa_info ci;
    kvv_status st = kvv_cpu_isa_probe(&ci, err);
    if (st)
        return st;
    if (!want || !want[0] || strcmp(want, "auto") == 0) {
        *out = ci.best;
        return KVV_OK;
    }
    kvv_cpu_isa isa;
    if (!kvv_cpu_isa_from_name(want, &isa))
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "--isa %s: no such kernel table (generic, avx2, avx512 or auto)", want);
    if (ci.can_run[isa]) {
        *out = isa;
        return KVV_OK;
    }
    char list[64];
    kvv_cpu_isa_list(&ci, list, sizeof list);
    bool has[KVV_CPU_ISA_COUNT];
    char features[128];
    detect(has, features, sizeof features);
    if (!kvv_cpu_kernels_of(isa))
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "--isa %s: this build has no %s table (not an x86-64 build); tables "
                             "available: %s", want, want, list);
    if (has[isa])
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "--isa %s: KVV_CPU_MAX_ISA=%s hides it on this CPU; tables "
                             "available: %s", want, ci.max_isa, list);
    return kvv_error_set(err, KVV_ERR_USAGE,
                         "--isa %s: this CPU has no %s; tables available: %s", want,
                         kvv_cpu_isa_needs(isa), list);
}
