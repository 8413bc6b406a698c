#!/bin/sh
# tests/run_tests.sh itself, on a fake build folder: a binary that passes
# with skipped cases is counted as passed and its skips are reported (the
# closing line and the list), a script's SKIP lines too; KVV_SHARED naming a
# missing folder fails the run before anything runs.
. "$(dirname "$0")/lib.sh"
T=${TMPDIR:-/tmp}/kvv-test-run-tests.$$
mkdir -p "$T/o/tests/fake" || exit 1
trap 'rm -rf "$T"' EXIT

cat >"$T/o/tests/fake/test_partial" <<'SH'
#!/bin/sh
echo "[ RUN      ] a"; echo "[  SKIPPED ] a"; echo "[ RUN      ] b"; echo "[  SKIPPED ] b"
echo "[==========] 3 test(s) run."; echo "[  PASSED  ] 1 test(s)."
echo "[  SKIPPED ] 2 test(s), listed below:"; echo "[  SKIPPED ] a"; echo "[  SKIPPED ] b"
SH
printf '#!/bin/sh\necho "[  PASSED  ] 1 test(s)."\n' >"$T/o/tests/fake/test_whole"
printf 'echo "SKIP: part of it"\nexit 0\n' >"$T/script_partial.sh"
chmod +x "$T/o/tests/fake/test_partial" "$T/o/tests/fake/test_whole"

env -u KVV_SHARED O="$T/o" KVV_CLI_TESTS="$T/script_*.sh" sh tests/run_tests.sh >"$T/out" 2>&1 ||
    fail "run_tests.sh on passing tests: exit $?"
tail -n 1 "$T/out" | grep -qx '3 passed, 0 failed, 0 skipped; 3 case(s) skipped inside 2 passed test(s)' ||
    fail "closing line: $(tail -n 1 "$T/out")"
grep -q '^passed with skipped cases: tests/fake/test_partial(2) .*script_partial.sh(1)$' "$T/out" ||
    fail "no list of the passed tests with skipped cases: $(cat "$T/out")"
grep -q '^ok    tests/fake/test_whole ([0-9]*s)$' "$T/out" || fail "a whole pass is reported with skips"

KVV_SHARED="$T/no-such-folder" O="$T/o" KVV_CLI_TESTS="$T/script_*.sh" sh tests/run_tests.sh >"$T/out" 2>&1 &&
    fail "KVV_SHARED naming a missing folder: exit 0"
grep -q "KVV_SHARED=$T/no-such-folder is not a folder" "$T/out" || fail "no message naming KVV_SHARED: $(cat "$T/out")"
grep -q 'tests/fake' "$T/out" && fail "tests ran although KVV_SHARED is missing"

[ $fails -eq 0 ] && echo "test_run_tests: all passed"
[ $fails -eq 0 ]
