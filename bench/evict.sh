#!/bin/sh
# bench/evict.sh — part of `make bench`: wall and CPU (user + sys) seconds of
# the default `kvverify evict` on stories260K, the figure docs/policies.md
# states (target: under 15 s wall on the shared 2-core machine). Median of
# BENCH_REPEATS runs (default 3); each run's figures are printed too, since
# the machine's load moves the wall time (CPU seconds move much less).
#
# Environment: KVV (default $O/kvverify, else ./kvverify), O, KVV_SHARED,
# BENCH_REPEATS, EVICT_ARGS (extra options, e.g. "--jobs 1").
set -u
O=${O:-build}
if [ -z "${KVV:-}" ]; then
    if [ -x "$O/kvverify" ]; then KVV=$O/kvverify; else KVV=./kvverify; fi
fi
S=${KVV_SHARED:-../shared}/models/stories260K-f32.gguf
[ -f "$S" ] || { echo "bench/evict: $S absent: skipped"; exit 0; }
python3 - "$KVV" "$S" "${BENCH_REPEATS:-3}" "${EVICT_ARGS:-}" <<'PY'
import os, resource, statistics, subprocess, sys, time
kvv, model, repeats, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
walls, cpus = [], []
for i in range(repeats):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    rc = subprocess.run([kvv, "evict", model, "-q"] + extra, stdout=subprocess.DEVNULL).returncode
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"evict stories260K run {i + 1}: exit {rc}, wall {wall:.2f} s, cpu {cpu:.2f} s")
    walls.append(wall)
    cpus.append(cpu)
print(f"evict stories260K (default run, {os.cpu_count()} cpus): median wall "
      f"{statistics.median(walls):.2f} s, median cpu {statistics.median(cpus):.2f} s "
      f"(target: wall < 15 s)")
PY
