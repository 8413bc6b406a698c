#!/bin/sh
# Verdicts a certifier can stand behind (issue 20 items 1-6): every
# --force-fail turns its command red; a prompt too short to exercise
# anything is exit 2 (empty) or 77 (every batch shape on one kernel path),
# never a PASS; nothing verified is 77.
. "$(dirname "$0")/lib.sh"
SHARED=${KVV_SHARED:-../shared}
T=${TMPDIR:-/tmp}/kvv-test-verdicts.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT

$KVV synth --shape llama-tiny -o "$T/m.gguf" -q || { echo "FAIL: synth"; exit 1; }
$KVV synth --shape llama-tiny --type q8_0 -o "$T/q.gguf" -q || { echo "FAIL: synth q8_0"; exit 1; }
M="$T/m.gguf"

# ---- item 1: every command that lists --force-fail fails with it
for c in kv patch greedy invariance compare audit "memory --turns 2" latency \
         "evict --policies window,kvdirect-layer --budgets 8 -n 4 --n-prompts 1"; do
    # shellcheck disable=SC2086
    $KVV $c --help | grep -q -- --force-fail || { fail "$c --help does not list --force-fail"; continue; }
    # shellcheck disable=SC2086
    expect 1 "$c --force-fail" $KVV $c "$M" --force-fail -q || true
done

# ---- item 2: an empty prompt is bad input
for c in kv greedy invariance audit; do
    expect 2 "$c -p ''" $KVV $c "$M" -p "" && grep -q "prompt is empty" "$T/err" ||
        fail "$c -p '': no 'prompt is empty' on stderr"
done
# every batch shape on one kernel path: nothing could be checked (77), never PASS
for c in kv invariance; do
    for n in 2 3; do
        expect 77 "$c --engine cpu --mode fast --random $n" $KVV $c "$M" --engine cpu --mode fast --random $n -q &&
            grep -q "switch at 4 tokens" "$T/out" || fail "$c --random $n: the reason lacks the switch"
    done
    expect 77 "$c --tokens 1 (one shape)" $KVV $c "$M" --tokens 1 -q || true
done
expect 77 "greedy --tokens 1 -n 1" $KVV greedy "$M" --tokens 1 -n 1 -q || true
# the same engine at 4 tokens reaches its GEMM and finds the differences
expect 1 "kv --engine cpu --mode fast --random 4" $KVV kv "$M" --engine cpu --mode fast --random 4 -q || true
# invariant Q8_0: one token is the X4 GEMV, two are tiles: 3 tokens straddle it
expect 0 "kv q8_0 --engine cpu --random 3" $KVV kv "$T/q.gguf" --engine cpu --random 3 -q || true
# a chunk as long as the prompt would make the chunked run the whole one
expect 2 "kv --chunk 31 (>= prompt)" $KVV kv "$M" --random 8 --chunk 31 -q &&
    grep -q "option --chunk: 31 is not below" "$T/err" || fail "kv --chunk 31: no reason"
expect 2 "kv --chunk 9 = prompt" $KVV kv "$M" --random 9 --chunk 9 -q || true
expect 0 "kv --chunk 7 < prompt" $KVV kv "$M" --random 9 --chunk 7 -q || true

# ---- item 3: nothing verified is 77
expect 77 "evict without KV-Direct" $KVV evict "$M" --policies window --budgets 8 -n 4 --n-prompts 1 || true

# ---- item 4: a first mismatch names an element that really differs, in the
# console, the JSON and the JUnit failure (kvdirect on the fast engine fails)
expect 1 "audit --engine cpu --mode fast" $KVV audit "$M" --engine cpu --mode fast -q \
    --json "$T/f.json" --junit "$T/f.xml" || true
python3 - "$T/f.json" <<'PY' || fail "a JSON first mismatch shows two equal values"
import json, sys
rep = json.load(open(sys.argv[1]))
seen = 0
for c in rep["checks"]:
    m = c.get("first_mismatch")
    if not m or m["tensor"] == "token":
        continue
    seen += 1
    e, a = m["expected"]["bits"], m["actual"]["bits"]
    assert e != a, (c["name"], m["text"])
assert seen >= 2, "expected mismatches in kvdirect and greedy"
assert any(c["name"] == "kvdirect" and c.get("first_mismatch") for c in rep["checks"])
PY
grep -o 'first mismatch: [^"]*' "$T/f.xml" | while read -r line; do
    e=$(echo "$line" | sed -n 's/.*expected \(0x[0-9a-f]*\).*/\1/p')
    a=$(echo "$line" | sed -n 's/.* got \(0x[0-9a-f]*\).*/\1/p')
    [ -n "$e" ] && [ "$e" = "$a" ] && echo "FAIL: JUnit first mismatch shows equal values: $line"
done | grep -q FAIL && fail "JUnit: a first mismatch with two equal values"
grep "first mismatch" "$T/out" | while read -r line; do
    e=$(echo "$line" | sed -n 's/.*expected \(0x[0-9a-f]*\).*/\1/p')
    a=$(echo "$line" | sed -n 's/.* got \(0x[0-9a-f]*\).*/\1/p')
    [ -n "$e" ] && [ "$e" = "$a" ] && echo "FAIL: $line"
done | grep -q FAIL && fail "console: a first mismatch with two equal values"

# ---- item 5: no key figure ends inside a number: the console cuts at a word
# boundary with "…", the JSON and the JUnit system-out have all of it
$KVV vectors gen "$M" --random 6 -n 2 -o "$T/v.kvv" >/dev/null 2>&1 || fail "vectors gen"
printf 'ctl model=m.gguf vector=v.kvv control=weight\n' >"$T/s.txt"
expect 0 "suite with a detected control" $KVV suite "$T/s.txt" --json "$T/s.json" --junit "$T/s.xml" || true
grep -q "control detected" "$T/out" || fail "suite: no control line"
# every 0x pattern printed is whole (8 hex digits), and a cut line ends in …
grep -o '0x[0-9a-f]*' "$T/out" | grep -qv '^0x[0-9a-f]\{8\}$' && fail "console: a cut hex figure: $(cat "$T/out")"
grep -o 'expected 0x[0-9a-f]\{8\} ([^)]*) actual 0x[0-9a-f]\{8\} ([^)]*)' "$T/s.xml" >/dev/null ||
    fail "JUnit: the key figure is not whole"
python3 - "$T/s.json" <<'PY' || fail "JSON: the key figure is not whole"
import json, re, sys
r = json.load(open(sys.argv[1]))["results"][0]
k = r.get("key_figure") or r["result"]["key_figure"]
assert re.search(r"actual 0x[0-9a-f]{8} \(-?[0-9.e+-]+\)$", k), k
PY

# ---- item 6: NaN and inf are counted and shown as such everywhere. nan.gguf
# is the synth model with one NaN weight, blk.0.attn_norm[0] (its offset from
# kvverify info --json, the bits written in place).
python3 - "$KVV" "$M" "$T/nan.gguf" <<'PY' || fail "could not build nan.gguf"
import json, shutil, struct, subprocess, sys
kvv, src, dst = sys.argv[1:4]
info = json.loads(subprocess.check_output([kvv, "info", src, "--json"]))
t = [x for x in info["tensors"] if x["name"] == "blk.0.attn_norm.weight"][0]
assert t["type"] == "F32"
shutil.copy(src, dst)
with open(dst, "r+b") as f:
    f.seek(info["data_offset"] + t["offset"])
    f.write(struct.pack("<I", 0x7FC00000))
PY
expect 1 "kv nan.gguf" $KVV kv "$T/nan.gguf" --json "$T/n.json" || true
grep -q "18446744073709551615" "$T/out" && fail "nan.gguf: max ULP printed as an integer"
grep -q "^kv  *FAIL .*NaN), max ULP NaN" "$T/out" || fail "nan.gguf: the summary does not count the NaNs"
# the per-layer rows: NaN count, max ULP, NMSE and max |d| all say NaN (never 0)
grep -E '^  0 +K hook +1024 +1024 +1024 +NaN +NaN +NaN ' "$T/out" >/dev/null ||
    fail "nan.gguf: a per-layer row hides the NaN: $(grep 'K hook' "$T/out" | head -1)"
python3 - "$T/n.json" <<'PY' || fail "nan.gguf: the JSON hides the NaN"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
row = c["layers"][0]["stats"] if "stats" in c["layers"][0] else c["layers"][0]
assert row["nan_pairs"] > 0 and row["nmse"] == "nan" and row["max_abs"] == "nan", row
assert "NaN" in c["key_figure"]
PY
expect 1 "audit nan.gguf" $KVV audit "$T/nan.gguf" -q || true
grep -q "KL mean 0 max 0" "$T/out" && fail "nan.gguf: compare shows KL 0"
grep -q "max KL = NaN" "$T/out" || fail "nan.gguf: patch does not show KL NaN"
expect 1 "run nan.gguf" $KVV run "$T/nan.gguf" -p Once -n 4 &&
    grep -q "logits are not finite" "$T/err" || fail "run nan.gguf: no warning on stderr"
expect 0 "run a finite model" $KVV run "$M" -p Once -n 4 || true

# ---- issue 31 item 6: a non-finite output fails every check that compares
# it, whatever the other side holds: output_norm[0] = inf makes every logit
# inf or NaN on both sides alike (it passed as "logits bit-equal" before)
python3 - "$KVV" "$M" "$T/inf.gguf" <<'PY' || fail "could not build inf.gguf"
import json, shutil, struct, subprocess, sys
kvv, src, dst = sys.argv[1:4]
info = json.loads(subprocess.check_output([kvv, "info", src, "--json"]))
t = [x for x in info["tensors"] if x["name"] == "output_norm.weight"][0]
assert t["type"] == "F32"
shutil.copy(src, dst)
with open(dst, "r+b") as f:
    f.seek(info["data_offset"] + t["offset"])
    f.write(struct.pack("<I", 0x7F800000))
PY
for c in greedy invariance; do
    expect 1 "$c inf.gguf" $KVV $c "$T/inf.gguf" -q --json "$T/i.json" || true
    grep -Eq "^$c +FAIL .*[0-9]+ compared values not finite \([0-9]+ NaN, [0-9]+ inf\)" "$T/out" ||
        fail "$c inf.gguf: the key figure does not lead with the non-finite count: $(grep "^$c" "$T/out")"
    python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["checks"][0]; assert c["verdict"]=="fail" and "not finite" in c["key_figure"], c["key_figure"]' "$T/i.json" ||
        fail "$c inf.gguf: the JSON verdict"
done
expect 1 "audit inf.gguf" $KVV "$T/inf.gguf" -q || true
grep -q "all checks passed" "$T/out" && fail "audit inf.gguf: passed"
for c in greedy invariance patch kvdirect compare; do
    grep -Eq "^$c +FAIL +[0-9.]+s +([a-z]+ vs [a-z]+: )?[0-9]+ (compared values|logits of the full-cache run) not finite" "$T/out" ||
        fail "audit inf.gguf: $c does not lead with the non-finite count: $(grep "^$c " "$T/out")"
done

# ---- issue 31 item 5: compare's control tests the verdict with the tolerance
# in force; a tolerance no planted difference can exceed is exit 2, and so is
# an engine compared with itself
expect 2 "compare --tol inf" $KVV compare "$M" --tol inf -q &&
    grep -q "no planted difference can exceed it" "$T/err" || fail "compare --tol inf: no reason"
expect 2 "compare --tol 1e38" $KVV compare "$M" --tol 1e38 -q &&
    grep -q "no planted logit difference can exceed it" "$T/err" || fail "compare --tol 1e38: no reason"
expect 2 "compare --engine ref --against ref" $KVV compare "$M" --engine ref --against ref -q &&
    grep -q "same engine with the same options" "$T/err" || fail "compare ref vs ref: no reason"
expect 0 "compare" $KVV compare "$M" -q --json "$T/c.json" || true
python3 - "$T/c.json" <<'PY' || fail "compare: the control does not show the verdict flip"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
assert c["controls"] and all(k["detected"] and "verdict FAIL" in k["detail"] for k in c["controls"]), c["controls"]
PY
# ---- issue 31 item 8: a FAIL's key figure begins with its reason, and a value
# past its tolerance never prints equal to it (tol one part in 10^4 below it)
rel=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checks"][0]["details"]["logits_max_rel"])' "$T/c.json")
tol=$(python3 -c "print(repr($rel * 0.9999))")
expect 1 "compare --tol just below" $KVV compare "$M" --tol "$tol" -q || true
line=$(grep "^compare " "$T/out")
v=$(echo "$line" | sed -n 's/.*: logits rel \([^ ]*\) > tol \([^ ]*\) at position.*/\1/p')
t=$(echo "$line" | sed -n 's/.*: logits rel \([^ ]*\) > tol \([^ ]*\) at position.*/\2/p')
{ [ -n "$v" ] && [ "$v" != "$t" ] && echo "$line" | grep -Eq "^compare +FAIL +[0-9.]+s +ref vs cpu: logits rel "; } ||
    fail "compare --tol $tol: the key figure does not lead with the reason, or prints the value as its tolerance: $line"
# the key figure of a check whose control is not detected begins with that
# (kvv_check_conclude, tests/verify/test_checks.c), not with its clean figure

# ---- issue 31 item 7: a run without its controls is unproven in every
# format, and never says "passed" (the exit code stays 0: docs/checks.md)
expect 0 "audit --no-controls" $KVV "$M" --no-controls --json "$T/nc.json" --junit "$T/nc.xml" \
    --html "$T/nc.html" || true
grep -qi "passed" "$T/out" && fail "--no-controls: the console says passed: $(grep -i passed "$T/out")"
grep -q "^no check failed; controls off: unproven (" "$T/out" || fail "--no-controls: no unproven line"
grep -Eq "^kv +UNPROVEN " "$T/out" || fail "--no-controls: the kv row does not say UNPROVEN"
python3 - "$T/nc.json" <<'PY' || fail "--no-controls: the JSON does not say unproven"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verdict"] == "unproven" and d["controls"] == "off" and d["exit_code"] == 0, d["verdict"]
assert d["checks"] and all(c["unproven"] and not c["controls"] for c in d["checks"] if c["verdict"] == "pass")
PY
n_tc=$(grep -c "<testcase " "$T/nc.xml"); n_up=$(grep -c '<skipped message="controls off: unproven: ' "$T/nc.xml")
[ "$n_tc" -gt 0 ] && [ "$n_tc" = "$n_up" ] || fail "--no-controls: JUnit: $n_up of $n_tc testcases unproven"
grep -q '<property name="controls" value="off: unproven"/>' "$T/nc.xml" || fail "--no-controls: JUnit property"
grep -q 'badge pass' "$T/nc.html" && fail "--no-controls: the HTML shows a PASS badge"
grep -q 'controls off: unproven' "$T/nc.html" && grep -q 'badge unproven' "$T/nc.html" ||
    fail "--no-controls: the HTML does not say unproven"
# with controls, the same run passes (and says so)
expect 0 "audit" $KVV "$M" -q --json "$T/c2.json" && grep -q "all checks passed" "$T/out" ||
    fail "audit with controls: not passed"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["verdict"]=="pass" and d["controls"]=="on" and not any(c["unproven"] for c in d["checks"])' "$T/c2.json" ||
    fail "audit with controls: JSON"
# a failing check without controls is still a failure
expect 1 "kv --no-controls --engine cpu --mode fast" $KVV kv "$M" --no-controls --engine cpu --mode fast -q || true
grep -q "FAILED (controls off)" "$T/out" || fail "--no-controls FAIL: $(tail -1 "$T/out")"

[ $fails -eq 0 ] && echo "verdicts: all cases passed"
[ $fails -eq 0 ]
