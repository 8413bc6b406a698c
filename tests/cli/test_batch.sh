#!/bin/sh
# test_batch.sh — `kvverify batch` (issue 33 item 3, verify/batch.h) on
# stories260K: the reference passes every mode (exit 0) with the workload
# printed and every report format written (JSON modes and workload, JUnit,
# HTML with the figure); --force-fail exits 1 naming the mode; without
# controls a pass is "unproven"; an engine without sequences (the example
# plugin without=seqs) is unsupported, exit 77; the example plugin passes,
# and with fault=seq-leak (attention sees another sequence) isolation FAILS,
# exit 1; the audit lists and runs batch; bad options exit 2.
KVV=${KVV:-./kvverify}
O=${O:-build}
M=../shared/models/stories260K-f32.gguf
[ -r "$M" ] || { echo "SKIP: $M not found (../shared absent)"; exit 77; }
[ -r "$O/plugins/example.so" ] || { echo "FAIL: $O/plugins/example.so not built"; exit 1; }
command -v jq >/dev/null || { echo "SKIP: jq not installed"; exit 77; }
command -v xmllint >/dev/null || { echo "SKIP: xmllint not installed"; exit 77; }
P="plugin:$O/plugins/example.so"
T="$O/tmp/test_batch.$$"
mkdir -p "$T"
trap 'rm -rf "$T"' EXIT INT TERM
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# expect CODE PATTERN CMD...: exit code CODE and PATTERN (grep -E) in its output
expect() {
    code=$1; pat=$2; shift 2
    "$@" >"$T/out" 2>&1
    rc=$?
    if [ "$rc" -ne "$code" ]; then
        fail "$* -> exit $rc, expected $code"; sed 's/^/    /' "$T/out" | head -12; return 1
    fi
    if [ -n "$pat" ] && ! grep -Eq "$pat" "$T/out"; then
        fail "$* -> output lacks /$pat/"; sed 's/^/    /' "$T/out" | head -12; return 1
    fi
    ok "$* -> $code"
}

# the reference: every mode bit-equal, the workload stated, every format
expect 0 "batch +PASS .*5 of 5 modes bit-equal, 4 requests" \
    "$KVV" batch "$M" --json "$T/r.json" --junit "$T/r.xml" --html "$T/r.html"
grep -q "workload .*batch 4 requests: A 32 tokens" "$T/out" || fail "console lacks the batch workload"
grep -q "control: A's last prompt token changed in the shared call — detected" "$T/out" ||
    fail "console lacks the detected control"
jq -e '.exit_code == 0 and (.checks | length) == 1 and .checks[0].name == "batch"
       and .checks[0].verdict == "pass" and (.checks[0].details.modes | length) == 6
       and all(.checks[0].details.modes[]; .verdict == "pass" and .differ == 0 and .values > 0)
       and (.workload.requests | test("4 requests"))
       and .checks[0].details.workload.n_requests == 4
       and (.checks[0].controls[0].detected)' "$T/r.json" >/dev/null &&
    ok "JSON: 6 comparisons pass, workload, control" || fail "JSON content: $(jq -c '.checks[0].details.modes' "$T/r.json" | head -c 400)"
xmllint --noout "$T/r.xml" && grep -q '<testcase[^>]*name="batch"' "$T/r.xml" &&
    grep -q 'name="workload" value="[^"]*batch 4 requests' "$T/r.xml" &&
    ok "JUnit: batch testcase and workload" || fail "JUnit"
grep -q 'id="[^"]*batch-ulp"' "$T/r.html" && [ "$(grep -o 'class="pt"' "$T/r.html" | wc -l)" -gt 10 ] &&
    grep -q "each mode" "$T/r.html" && ok "HTML: the figure and the modes table" || fail "HTML lacks the batch figure"

expect 0 "2 of 2 modes bit-equal, 8 requests" "$KVV" batch "$M" --requests 8 --modes prefix,isolation -q
expect 1 "A differs among other requests in single" "$KVV" batch "$M" --force-fail -q
grep -q "single: 6 of 192 rows differ, first logits position 31" "$T/out" ||
    fail "force-fail message: $(grep fail "$T/out")"
expect 0 "unproven" "$KVV" batch "$M" --no-controls --modes single -q

# an engine without sequences: unsupported, never passed
expect 77 "serves one sequence" "$KVV" batch "$M" --engine "$P" --engine-opt without=seqs
# a plugin built against ABI 1.0 (the stub of tests/engine/plugin_bad.c, told
# stories260K's dimensions): loads, and batch is unsupported
[ -r "$O/tests/plugins/bad_v10.so" ] || { echo "FAIL: $O/tests/plugins/bad_v10.so not built"; exit 1; }
expect 77 "unsupported by this engine" "$KVV" batch "$M" --engine "plugin:$O/tests/plugins/bad_v10.so" \
    --engine-opt l=5 --engine-opt e=64 --engine-opt h=8 --engine-opt kv=4 --engine-opt d=8 \
    --engine-opt dv=8 --engine-opt v=512

# the example plugin: passes; its planted leak fails isolation
expect 0 "5 of 5 modes bit-equal" "$KVV" batch "$M" --engine "$P" -q
expect 1 "A differs among other requests in .*isolation" "$KVV" batch "$M" --engine "$P" \
    --engine-opt fault=seq-leak -q --json "$T/leak.json"
jq -e '[.checks[0].details.modes[] | select(.mode == "isolation")][0].verdict == "fail"' \
    "$T/leak.json" >/dev/null && ok "seq-leak: isolation fails" || fail "seq-leak: isolation did not fail"

# the cpu engine's planted leak (seq_leak=1) fails isolation in both modes;
# isolation has the same shapes, so fast mode passes it without the leak
for mode in invariant fast; do
    expect 0 "" "$KVV" batch "$M" --engine cpu --mode $mode --modes isolation -q
    expect 1 "A differs among other requests in isolation" "$KVV" batch "$M" --engine cpu \
        --mode $mode --modes isolation --engine-opt seq_leak=1 -q
done
expect 2 "seq_leak" "$KVV" batch "$M" --engine cpu --engine-opt seq_leak=2

# the audit runs it; the catalog lists it
expect 0 "batch +PASS" "$KVV" audit "$M" --checks batch,kv -q
"$KVV" checks --json | jq -e '[.checks[] | select(.name == "batch" and .in_audit)] | length == 1' \
    >/dev/null && ok "checks: batch in the audit" || fail "checks: batch missing"

# bad options
expect 2 "requests: 1 is outside 2..64" "$KVV" batch "$M" --requests 1
expect 2 "unknown mode 'bogus'" "$KVV" batch "$M" --modes single,bogus
expect 0 "usage: kvverify batch MODEL" "$KVV" batch --help

[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
