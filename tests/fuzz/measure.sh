#!/bin/sh
# measure.sh — the fuzzing measurement of docs/fuzzing.md: each libFuzzer
# target (clang, ASan + UBSan) runs until FUZZ_MEASURE_RUNS executions or
# FUZZ_MEASURE_SECONDS, whichever comes first, on FUZZ_JOBS cores (that
# many libFuzzer jobs sharing one corpus, each with its share of the runs),
# from its seed corpus; then one pass over the seeds and everything the run
# added (-runs=0) counts the edges they cover and the inputs that matter. One row per target of the results table
# (target | executions | edges covered | corpus | command | findings) goes
# to FUZZ_MEASURE_OUT.
#
#   make fuzz-measure                                # the long run: 10M or 1 h, 2 cores each
#   FUZZ_MEASURE_SECONDS=90 FUZZ_JOBS=1 sh tests/fuzz/measure.sh   # a short one
#   FUZZ_TARGETS="fuzz_gguf fuzz_kvv" sh tests/fuzz/measure.sh
#   FUZZ_UNIT_TIMEOUT=60 (default): seconds one input may take before it is a finding
#
# A finding (crash, leak, UB, timeout, out-of-memory) ends the job that met
# it; it is saved under build-fuzz/artifacts-TARGET/ and counted in the
# row. Replay it with build-fuzz/TARGET FILE, fix the bug, and copy the file
# into tests/fuzz/corpus/NAME/ so `make test` replays it from then on.
# (libFuzzer's -fork mode would go on past findings, but ran ten times fewer
# executions per second here.) Exit status: 0 when every target ran without
# findings, 1 when any had findings, 2 when a target did not build or run.
set -u
RUNS=${FUZZ_MEASURE_RUNS:-10000000}
SECS=${FUZZ_MEASURE_SECONDS:-3600}
JOBS=${FUZZ_JOBS:-2}
OUT=${FUZZ_MEASURE_OUT:-build-fuzz/results.md}
# One input slower than this (wall seconds) is a finding (a hang). Not 10:
# on a shared two-core machine a nice 19 job starved by a build once took
# 11 s over a tokenizer input that runs in under a second alone.
UNIT=${FUZZ_UNIT_TIMEOUT:-60}
TARGETS=${FUZZ_TARGETS:-$(ls tests/fuzz/fuzz_*.c | sed 's|.*/||; s|\.c$||')}
mkdir -p build-fuzz
status=0
{
    echo "<!-- tests/fuzz/measure.sh on $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -m), $(nproc) cores," \
         "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(${FUZZ_CC:-clang} --version | head -n 1) -->"
    echo "| target | executions | edges covered (cov) | corpus size | exact command | findings |"
    echo "|---|---|---|---|---|---|"
} > "$OUT"
for t in $TARGETS; do
    n=${t#fuzz_}
    work=build-fuzz/measure-$t      # the jobs' logs (fuzz-J.log) and the grown corpus
    art=$work/artifacts
    if ! make --no-print-directory fuzz-build FUZZ_TARGET="$t" > "build-fuzz/build-$t.log" 2>&1; then
        echo "measure.sh: $t does not build (build-fuzz/build-$t.log)" >&2
        echo "| $t | — | — | — | — | did not build |" >> "$OUT"
        status=2
        continue
    fi
    rm -rf "$work"
    mkdir -p "$work/corpus" "$art"
    per_job=$(( (RUNS + JOBS - 1) / JOBS ))
    flags="-runs=$per_job -max_total_time=$SECS -timeout=$UNIT -report_slow_units=$UNIT -rss_limit_mb=2048 -print_final_stats=1"
    cmd="cd $work && ../$t -jobs=$JOBS -workers=$JOBS $flags corpus ../../tests/fuzz/corpus/$n"
    echo "measure.sh: $cmd" >&2
    start=$(date +%s)
    # shellcheck disable=SC2086
    (cd "$work" && nice -n 19 ../$t -jobs=$JOBS -workers=$JOBS $flags -artifact_prefix=artifacts/ \
        corpus ../../tests/fuzz/corpus/$n > jobs.log 2>&1)
    rc=$?
    secs=$(( $(date +%s) - start ))
    execs=$(cat "$work"/fuzz-*.log 2>/dev/null | sed -n 's/^stat::number_of_executed_units: *//p' |
            awk '{s += $1} END {print s + 0}')
    # edges the final corpus (seeds and what the run added) covers:
    # "#N INITED cov: C ft: F corp: K/B"
    (cd "$work" && ../$t -runs=0 corpus ../../tests/fuzz/corpus/$n > cov.log 2>&1)
    init=$(grep -E 'INITED cov: ' "$work/cov.log" | tail -n 1)
    cov=$(echo "$init" | sed -n 's/.* cov: \([0-9]*\) .*/\1/p')
    corp=$(echo "$init" | sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p')
    # crash-, leak-, timeout-, oom- files are findings; a slow-unit- file is
    # libFuzzer's note of an input that took long, not a failure
    found=$(ls "$art" | grep -vc '^slow-unit-')
    if [ "$execs" -eq 0 ] || [ -z "$cov" ]; then
        echo "measure.sh: $t ran no executions (exit $rc; $work/jobs.log)" >&2
        echo "| $t | — | — | — | \`$cmd\` | did not run (exit $rc) |" >> "$OUT"
        status=2
        continue
    fi
    if [ "$found" -gt 0 ]; then
        findings="$found: $(ls "$art" | grep -v '^slow-unit-' | sed 's/-.*//' | sort | uniq -c |
                            awk '{printf "%s%d %s", NR>1?", ":"", $1, $2}')"
        [ $status -eq 0 ] && status=1
    else
        findings="none"
    fi
    echo "| $t | $execs in $secs s | $cov | $corp (inputs/bytes) | \`$cmd\` | $findings |" >> "$OUT"
done
cat "$OUT"
exit $status
