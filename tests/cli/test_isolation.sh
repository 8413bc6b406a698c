#!/bin/sh
# test_isolation.sh — issue 18 items 1-4 (docs/isolation.md) on stories260K
# through the example plugin's faults:
#   * audit with fault=segv|abort|hang|nan|short|wrong-size|leak exits 1,
#     names the fault per check (crash / timeout / contract), runs every
#     check, and writes complete JSON (jq) and JUnit (xmllint) with
#     <error type=FAULT>; a crash at a layer names it ("layer 2");
#   * the fault plugin without faults still passes isolated (the control);
#   * built-in engines isolate with --isolate; evict, memory, latency and
#     compare isolate a plugin as the audit does (crash, hang -> fault);
#     numerics (built-in engines only) refuses --isolate with exit 2;
#   * kill -INT of a running suite leaves valid JUnit/JSON of the finished
#     cases, exit 130, and --resume completes them.
. "$(dirname "$0")/lib.sh"
KVV=${KVV:-./kvverify}
O=${O:-build}
M=../shared/models/stories260K-f32.gguf
[ -r "$M" ] || { echo "SKIP: $M not found (../shared absent)"; exit 77; }
[ -r "$O/plugins/example.so" ] || { echo "FAIL: $O/plugins/example.so not built"; exit 1; }
command -v jq >/dev/null || { echo "SKIP: jq not installed"; exit 77; }
command -v xmllint >/dev/null || { echo "SKIP: xmllint not installed"; exit 77; }
P="plugin:$O/plugins/example.so"
T="$O/tmp/test_isolation.$$"
mkdir -p "$T"
trap 'rm -rf "$T"' EXIT

# audit_fault FAULT EXPECTED-FAULT [options...]: every check fails with that fault
audit_fault() {
    f=$1; want=$2; shift 2
    rm -f "$T/a.json" "$T/a.xml"
    "$KVV" audit "$M" --engine "$P" --engine-opt "fault=$f" -q --json "$T/a.json" \
        --junit "$T/a.xml" "$@" >"$T/out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] || { fail "fault=$f $*: exit $rc, expected 1"; sed 's/^/    /' "$T/out" | head; return; }
    jq -e . "$T/a.json" >/dev/null || { fail "fault=$f: JSON does not parse"; return; }
    xmllint --noout "$T/a.xml" || { fail "fault=$f: JUnit does not parse"; return; }
    n=$(jq '.checks | length' "$T/a.json")
    [ "$n" -eq 7 ] || { fail "fault=$f: $n checks in the JSON, expected all 7"; return; }
    nf=$(jq --arg w "$want" '[.checks[] | select(.fault == $w)] | length' "$T/a.json")
    [ "$nf" -ge 1 ] || { fail "fault=$f: no check with fault $want"; jq -c '.checks[] | [.name, .fault, .key_figure]' "$T/a.json"; return; }
    ne=$(grep -c "<error [^>]*type=\"$want\"" "$T/a.xml")
    [ "$ne" -eq "$nf" ] || { fail "fault=$f: $ne JUnit <error type=$want>, $nf in the JSON"; return; }
    grep -q "<failure" "$T/a.xml" && { fail "fault=$f: a fault written as <failure>"; return; }
    grep -q "engine faults:" "$T/out" || { fail "fault=$f: console lacks the fault count"; return; }
    ok "fault=$f $*: exit 1, $nf of $n checks fault $want, JSON and JUnit whole"
}

audit_fault segv crash
audit_fault abort crash
audit_fault hang timeout --timeout 1
audit_fault nan contract
audit_fault short contract
audit_fault wrong-size contract
audit_fault leak contract
audit_fault nan contract --engine-opt fault_at=kv_from_residual --checks kv,kvdirect,patch,greedy,invariance,compare,batch
audit_fault short contract --engine-opt fault_at=kv
audit_fault wrong-size contract --no-isolate   # the guards do not need a child

# the breadcrumb: a crash inside layer 2 says so
"$KVV" audit "$M" --engine "$P" --engine-opt fault=segv --engine-opt fault_layer=2 \
    --checks kv -q --json "$T/l.json" >/dev/null 2>&1
jq -r '.checks[0].message' "$T/l.json" | grep -q "SIGSEGV in forward, layer 2" \
    && ok "crash names the signal and the layer" \
    || fail "crash message: $(jq -r '.checks[0].message' "$T/l.json")"

# a fault at one position: only the checks that reach it fail, the others pass
"$KVV" audit "$M" --engine "$P" --engine-opt fault=abort --engine-opt fault_pos=40 \
    -q --json "$T/p.json" >/dev/null 2>&1
np=$(jq '[.checks[] | select(.verdict == "pass")] | length' "$T/p.json")
nc=$(jq '[.checks[] | select(.fault == "crash")] | length' "$T/p.json")
[ "$np" -ge 1 ] && [ "$nc" -ge 1 ] && ok "fault_pos=40: $nc crashed, $np passed in the same run" \
    || fail "fault_pos=40: $np passed, $nc crashed"

# controls: the same plugin without a fault passes isolated; ref with --isolate passes
"$KVV" audit "$M" --engine "$P" -q >"$T/out" 2>&1 && ok "example plugin, isolated, no fault: exit 0" \
    || { fail "example plugin without a fault: exit $?"; sed 's/^/    /' "$T/out" | tail -8; }
"$KVV" audit "$M" --isolate --checks kv,greedy -q >"$T/out" 2>&1 && ok "ref --isolate: exit 0" \
    || { fail "ref --isolate: exit $?"; sed 's/^/    /' "$T/out" | tail -8; }
"$KVV" evict "$M" --policies window,kvdirect-layer --budgets 38 -n 8 --isolate -q >"$T/out" 2>&1 \
    && ok "evict --isolate (ref): exit 0" || fail "evict --isolate: exit $?"
"$KVV" numerics "$M" --isolate >"$T/out" 2>&1; rc=$?
[ "$rc" -eq 2 ] && grep -q "not used by numerics" "$T/out" \
    && ok "numerics --isolate refused (exit 2)" || fail "numerics --isolate: exit $rc"

# the commands outside the audit's table isolate a plugin too: a crash or a
# hang is their check's fault (exit 1, JSON fault), the same plugin without
# the fault passes (the control)
# cmd_fault CMD FAULT EXPECTED-FAULT [options...] (CONTROL=0: no control run,
# e.g. when the options hold a --timeout the whole run may not fit in)
cmd_fault() {
    cmd=$1; f=$2; want=$3; shift 3
    rm -f "$T/c.json"
    "$KVV" "$cmd" "$M" --engine "$P" --engine-opt "fault=$f" -q --json "$T/c.json" "$@" \
        >"$T/out" 2>&1
    rc=$?
    got=$(jq -r '.checks[0].fault // "none"' "$T/c.json" 2>/dev/null)
    [ "$rc" -eq 1 ] && [ "$got" = "$want" ] && ok "$cmd fault=$f: exit 1, fault $want" \
        || { fail "$cmd fault=$f $*: exit $rc, fault $got (expected 1, $want)"; sed 's/^/    /' "$T/out" | head -5; }
    [ "${CONTROL:-1}" = 0 ] && return
    "$KVV" "$cmd" "$M" --engine "$P" --engine-opt fault=none -q "$@" >"$T/out" 2>&1 \
        && ok "$cmd without the fault: exit 0" || fail "$cmd without the fault: exit $?"
}
cmd_fault evict segv crash --policies window,kvdirect-layer --budgets 38 -n 8
CONTROL=0 cmd_fault evict hang timeout --policies window,kvdirect-layer --budgets 38 -n 8 --timeout 2
cmd_fault memory abort crash --turns 2
cmd_fault latency segv crash --batches 1,4 --engine-opt fault_at=kv_from_residual
rm -f "$T/c.json"
"$KVV" compare "$M" --against "$P" --engine-opt fault=segv -q --json "$T/c.json" >"$T/out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && [ "$(jq -r '.checks[0].fault' "$T/c.json")" = crash ] \
    && ok "compare --against a crashing plugin: exit 1, fault crash" \
    || fail "compare --against fault=segv: exit $rc"
"$KVV" audit "$M" --no-isolate --timeout 3 >"$T/out" 2>&1; rc=$?
[ "$rc" -eq 2 ] && ok "--no-isolate --timeout: exit 2" || fail "--no-isolate --timeout: exit $rc"

# suite: interrupted, then resumed
MAN="$T/m.txt"
AM=$(cd "$(dirname "$M")" && pwd)/$(basename "$M")
AP="plugin:$(pwd)/$O/plugins/example.so"
cat >"$MAN" <<EOT
first model=$AM engine=$AP checks=kv,patch tokens=8 n=4
stuck model=$AM engine=$AP checks=kv tokens=8 n=4 engine-opt=fault=hang
last model=$AM checks=kv,greedy tokens=8 n=4
EOT
"$KVV" suite "$MAN" --junit "$T/r.xml" --json "$T/r.json" -q >"$T/s.out" 2>&1 &
pid=$!
i=0
while [ $i -lt 300 ] && ! jq -e '.results | length == 2' "$T/r.json" >/dev/null 2>&1; do
    sleep 0.1; i=$((i + 1))
done
sleep 0.5 # now inside the hanging case
kill -INT $pid
wait $pid
rc=$?
[ "$rc" -eq 130 ] && ok "suite: kill -INT -> exit 130" || fail "suite: kill -INT -> exit $rc"
xmllint --noout "$T/r.xml" && [ "$(grep -c '<testcase' "$T/r.xml")" -eq 2 ] \
    && ok "suite: JUnit valid with the 2 finished testcases" || fail "suite: JUnit after INT"
[ "$(jq '.results | length' "$T/r.json")" -eq 2 ] && ok "suite: JSON holds the finished case" \
    || fail "suite: JSON after INT"
[ "$(jq -c '[.interrupted, .exit_code]' "$T/r.json")" = '[true,130]' ] \
    && ok "suite: the JSON says interrupted and exit_code 130, as the process exits" \
    || fail "suite: JSON after INT says $(jq -c '[.interrupted, .exit_code]' "$T/r.json")"
ls "$T" | grep -q '\.tmp\.' && fail "a temp file was left behind"
"$KVV" suite "$MAN" --junit "$T/r.xml" --json "$T/r.json" -q --resume --timeout 1 >"$T/s.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && ok "suite --resume: exit 1 (the stuck case times out)" || fail "suite --resume: exit $rc"
[ "$(jq '.resumed_cases' "$T/r.json")" -eq 1 ] && [ "$(jq '.results | length' "$T/r.json")" -eq 5 ] \
    && [ "$(jq '.summary.timeout' "$T/r.json")" -eq 1 ] \
    && ok "suite --resume: 1 case kept, 5 testcases, 1 timeout" \
    || fail "suite --resume: $(jq -c '[.resumed_cases, (.results | length), .summary]' "$T/r.json")"
xmllint --noout "$T/r.xml" && [ "$(grep -c '<testcase' "$T/r.xml")" -eq 5 ] \
    && grep -q 'type="timeout"' "$T/r.xml" && ok "suite --resume: JUnit complete" \
    || fail "suite --resume: JUnit"
# the kept case states its workload as the first run did (read back from the JSON)
[ "$(grep -c 'workload prompt' "$T/r.xml")" -eq 5 ] && ok "suite --resume: every testcase states its workload" \
    || fail "suite --resume: workload lines $(grep -c 'workload prompt' "$T/r.xml") of 5"
"$KVV" suite "$MAN" --resume >"$T/out" 2>&1; rc=$?
[ "$rc" -eq 2 ] && ok "suite --resume without --json: exit 2" || fail "--resume without --json: exit $rc"

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all isolation checks passed"
