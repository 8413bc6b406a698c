/* mem_limit.c — the memory limit and the pre-check of planned allocations
 * (see mem_limit.h). */
#include "runtime/mem_limit.h"

#include <cblas.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>

uint64_t kvv_mem_held(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t kib = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmData:", 7) == 0) {
            kib = strtoull(line + 7, NULL, 10);
            break;
        }
    fclose(f);
    return kvv_mem_mul(kib, 1024);
}

/* A cgroup's memory limit in bytes, UINT64_MAX if none can be read. */
static uint64_t cgroup_limit(void)
{
    static const char *const files[] = {"/sys/fs/cgroup/memory.max",
                                        "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    uint64_t best = UINT64_MAX;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        FILE *f = fopen(files[i], "r");
        if (!f)
            continue;
        char buf[64] = "";
        if (fgets(buf, sizeof buf, f) && buf[0] >= '0' && buf[0] <= '9') {
            uint64_t v = strtoull(buf, NULL, 10);
            if (v > 0 && v < best)
                best = v;
        }
        fclose(f);
    }
    return best;
}

uint64_t kvv_mem_machine(void)
{
    struct sysinfo si;
    uint64_t total = UINT64_MAX;
    if (sysinfo(&si) == 0)
        total = kvv_mem_mul(kvv_mem_add(si.totalram, si.totalswap), si.mem_unit ? si.mem_unit : 1);
    uint64_t cg = cgroup_limit();
    return cg < total ? cg : total;
}

/* OpenBLAS's server threads each map a work buffer (128 MiB of address
 * space in 0.3.21) when they start, and the calling thread one at its first
 * product; a mapping that fails makes OpenBLAS retry forever. So before a
 * limit is set, one product large enough to use every thread makes sure
 * those buffers exist (and count as held): about 1 ms per thread. */
static void blas_settle(void)
{
    int n = 64 * openblas_get_num_threads();
    if (n <= 0 || n > 64 * 1024)
        return;
    float *a = calloc((size_t)n * 64, sizeof *a), *c = calloc((size_t)n * n, sizeof *c);
    if (a && c)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, 64, 1.0f, a, 64, a, 64, 0.0f,
                    c, n);
    free(a);
    free(c);
}

kvv_status kvv_mem_limit_set(uint64_t cap, kvv_error *err)
{
    blas_settle();
    struct rlimit rl;
    if (getrlimit(RLIMIT_DATA, &rl) != 0)
        return kvv_error_set(err, KVV_ERR_IO, "--max-memory: cannot read the data limit: %s",
                             strerror(errno));
    uint64_t want = kvv_mem_add(kvv_mem_held(), cap);
    if (rl.rlim_max != RLIM_INFINITY && want > (uint64_t)rl.rlim_max) {
        char a[32], b[32], c[32];
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "--max-memory: %s is above the hard data limit of this process "
                             "(ulimit -Hd: %s, of which it holds %s)",
                             kvv_mem_format(cap, a, sizeof a),
                             kvv_mem_format((uint64_t)rl.rlim_max, b, sizeof b),
                             kvv_mem_format(kvv_mem_held(), c, sizeof c));
    }
    rl.rlim_cur = want == UINT64_MAX ? RLIM_INFINITY : (rlim_t)want;
    if (setrlimit(RLIMIT_DATA, &rl) != 0)
        return kvv_error_set(err, KVV_ERR_IO, "--max-memory: cannot set the data limit: %s",
                             strerror(errno));
    return KVV_OK;
}

uint64_t kvv_mem_available(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_DATA, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return UINT64_MAX;
    uint64_t held = kvv_mem_held();
    return held >= (uint64_t)rl.rlim_cur ? 0 : (uint64_t)rl.rlim_cur - held;
}

uint64_t kvv_mem_thread_stack(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_STACK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return (uint64_t)8 << 20;
    return (uint64_t)rl.rlim_cur;
}

char *kvv_mem_format(uint64_t bytes, char *buf, size_t size)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, size, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, unit[u]);
    return buf;
}

/* ------------------------------------------------------------ plans */

kvv_mem_plan kvv_mem_plan_new(const char *who)
{
    kvv_mem_plan p;
    memset(&p, 0, sizeof p);
    p.who = who;
    return p;
}

void kvv_mem_plan_add(kvv_mem_plan *p, uint64_t bytes, const char *fmt, ...)
{
    if (bytes == 0)
        return;
    if (p->n == KVV_MEM_PLAN_MAX) {
        p->part[p->n - 1].bytes = kvv_mem_add(p->part[p->n - 1].bytes, bytes);
        snprintf(p->part[p->n - 1].what, sizeof p->part[0].what, "the rest");
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->part[p->n].what, sizeof p->part[0].what, fmt, ap);
    va_end(ap);
    p->part[p->n++].bytes = bytes;
}

uint64_t kvv_mem_plan_total(const kvv_mem_plan *p)
{
    uint64_t t = 0;
    for (int i = 0; i < p->n; i++)
        t = kvv_mem_add(t, p->part[i].bytes);
    return t;
}

kvv_status kvv_mem_plan_check(const kvv_mem_plan *p, kvv_error *err)
{
    uint64_t total = kvv_mem_plan_total(p);
    uint64_t avail = kvv_mem_available(), machine = kvv_mem_machine();
    if (total <= avail && total <= machine)
        return KVV_OK;
    char parts[KVV_MEM_PLAN_MAX * 96] = "", a[32], b[32];
    size_t o = 0;
    for (int i = 0; i < p->n && o < sizeof parts; i++)
        o += (size_t)snprintf(parts + o, sizeof parts - o, "%s%s %s", i ? ", " : "",
                              p->part[i].what, kvv_mem_format(p->part[i].bytes, a, sizeof a));
    kvv_mem_format(total, a, sizeof a);
    if (total > avail)
        return kvv_error_set(err, KVV_ERR_NOMEM,
                             "%s: needs %s (%s) but the memory limit (--max-memory) leaves %s",
                             p->who, a, parts, kvv_mem_format(avail, b, sizeof b));
    return kvv_error_set(err, KVV_ERR_NOMEM,
                         "%s: needs %s (%s), more than this machine's %s of memory (RAM + swap)",
                         p->who, a, parts, kvv_mem_format(machine, b, sizeof b));
}
