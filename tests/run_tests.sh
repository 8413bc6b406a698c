#!/bin/sh
# Runs every test kind and prints one closing line "N passed, N failed, N skipped".
#   unit/integration: $O/tests/<layer>/test_*  (cmocka binaries)
#   fuzz corpus replay: $O/tests/fuzz/replay_fuzz_* over tests/fuzz/corpus/<name>/
#   CLI: tests/cli/test_*.sh (each exits 0 pass, 77 skip, else fail)
# A test that passed but skipped some of its cases (cmocka's "[  SKIPPED ]",
# a script's "SKIP" line) is counted as passed and listed, with the count of
# its skipped cases, before the closing line, which adds their total.
# KVV_SHARED naming a folder that is not there is an error: the tests that
# need it would all skip, and a run meant to use it would look green.
O=${O:-build}
export O
if [ -n "${KVV_SHARED:-}" ] && [ ! -d "$KVV_SHARED" ]; then
    echo "FAIL: KVV_SHARED=$KVV_SHARED is not a folder (unset it to run without ../shared)"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
pass=0; fail=0; skipped=0; failed_list=""
partial=0; partial_cases=0; partial_list=""
log_dir="$O/test-logs"; mkdir -p "$log_dir"

run_one() { # name, command...
    name=$1; shift
    log="$log_dir/$(echo "$name" | tr '/' '_').log"
    start=$(date +%s)
    "$@" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then
        # cmocka's summary says how many cases it skipped; a script says SKIP
        n_skip=$(sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) test(s).*/\1/p' "$log" | head -n 1)
        [ -n "$n_skip" ] || n_skip=$(grep -c '^SKIP' "$log")
        if [ "$n_skip" -gt 0 ]; then
            echo "ok    $name (${secs}s; $n_skip case(s) skipped: $(grep -m1 -e '^SKIP' -e '^\[  SKIPPED \] ' "$log"))"
            partial=$((partial+1)); partial_cases=$((partial_cases+n_skip))
            partial_list="$partial_list $name($n_skip)"
        else
            echo "ok    $name (${secs}s)"
        fi
        pass=$((pass+1))
    elif [ $rc -eq 77 ]; then
        echo "skip  $name: $(grep -m1 -i 'skip' "$log")"
        skipped=$((skipped+1))
    else
        echo "FAIL  $name (exit $rc, ${secs}s) — log: $log"
        tail -n 25 "$log" | sed 's/^/      /'
        fail=$((fail+1)); failed_list="$failed_list $name"
    fi
}

for t in $(ls "$O"/tests/*/test_* 2>/dev/null | grep -v '\.d$' | grep -v '\.o$' | sort); do
    [ -x "$t" ] || continue
    run_one "${t#$O/}" "$t"
done
for r in $(ls "$O"/tests/fuzz/replay_fuzz_* 2>/dev/null | grep -v '\.d$'); do
    n=${r##*/replay_fuzz_}
    run_one "fuzz-replay/$n" "$r" "tests/fuzz/corpus/$n"
done
# KVV_CLI_TESTS: which scripts (a glob; tests/cli/test_run_tests.sh narrows it)
for s in $(ls ${KVV_CLI_TESTS:-tests/cli/test_*.sh} 2>/dev/null | sort); do
    run_one "$s" sh "$s"
done

echo
[ -n "$partial_list" ] && echo "passed with skipped cases:$partial_list"
[ -n "$failed_list" ] && echo "failed:$failed_list"
echo "$pass passed, $fail failed, $skipped skipped; $partial_cases case(s) skipped inside $partial passed test(s)"
[ $fail -eq 0 ]
