#!/bin/sh
# Runs every test kind and prints one closing line "N passed, N failed, N skipped".
#   unit/integration: $O/tests/<layer>/test_*  (cmocka binaries)
#   fuzz corpus replay: $O/tests/fuzz/replay_fuzz_* over tests/fuzz/corpus/<name>/
#   CLI: tests/cli/test_*.sh (each exits 0 pass, 77 skip, else fail)
O=${O:-build}
export O
pass=0; fail=0; skipped=0; failed_list=""
log_dir="$O/test-logs"; mkdir -p "$log_dir"

run_one() { # name, command...
    name=$1; shift
    log="$log_dir/$(echo "$name" | tr '/' '_').log"
    start=$(date +%s)
    "$@" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then
        if grep -q '^\[  SKIPPED \]' "$log" || grep -q '^SKIP' "$log"; then
            echo "ok    $name (${secs}s; some cases skipped: $(grep -m1 '^SKIP' "$log"))"
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
for s in $(ls tests/cli/test_*.sh 2>/dev/null | sort); do
    run_one "$s" sh "$s"
done

echo
[ -n "$failed_list" ] && echo "failed:$failed_list"
echo "$pass passed, $fail failed, $skipped skipped"
[ $fail -eq 0 ]
