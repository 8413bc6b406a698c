#!/bin/sh
# Discoverable (issue 20 item 11): `kvverify engines` lists the built-in
# engines and the plugins found with modes, kernel tables and (on a MODEL)
# capabilities and kernel switches; `kvverify checks` lists every check with
# what it proves and its control; compare says A vs B and which is under
# test; the README's check line is a command, not a pipeline.
. "$(dirname "$0")/lib.sh"
T=${TMPDIR:-/tmp}/kvv-test-discover.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT

$KVV synth --shape llama-tiny -o "$T/m.gguf" -q || { echo "FAIL: synth"; exit 1; }

# ---- engines
expect 0 "engines" $KVV engines || true
for e in ref cpu llama.cpp example; do
    grep -q "^  $e " "$T/out" || fail "engines: $e not listed"
done
grep -q "kernel tables (--isa): generic (runs here)" "$T/out" || fail "engines: no cpu kernel tables"
grep -q "example.so" "$T/out" || fail "engines: the example plugin's file not shown"
expect 0 "engines MODEL --json" $KVV engines "$T/m.gguf" --json "$T/e.json" || true
python3 - "$T/e.json" <<'PY' || fail "engines MODEL --json: wrong"
import json, sys
d = {e["name"]: e for e in json.load(open(sys.argv[1]))["engines"]}
cpu = {m["mode"]: m for m in d["cpu"]["on_model"]}
assert [s["at"] for s in cpu["fast"]["kernel_switches"]] == [4], cpu["fast"]
assert cpu["invariant"]["kernel_switches"] == [], cpu["invariant"]   # F32: one route
assert not d["ref"]["on_model"][0]["switches_known"]
assert "kv-from-residual" in d["ref"]["on_model"][0]["capabilities"]
assert any(t["name"] == "generic" and t["runs_here"] for t in d["cpu"]["kernel_tables"])
assert d["example"]["plugin"] and d["example"]["on_model"][0]["capabilities"]
PY
expect 2 "engines with two models" $KVV engines "$T/m.gguf" "$T/m.gguf" || true

# ---- checks
expect 0 "checks" $KVV checks --json "$T/c.json" || true
for c in kv patch greedy invariance kvdirect compare tables evict memory latency numerics vectors; do
    grep -q "^$c" "$T/out" || fail "checks: $c not listed"
done
python3 - "$T/c.json" <<'PY' || fail "checks --json: a check without what it proves or its control"
import json, sys
cs = json.load(open(sys.argv[1]))["checks"]
for c in cs:
    assert len(c["proves"]) > 20 and len(c["control"]) > 10, c["name"]
audit = [c["name"] for c in cs if c["in_audit"]]
assert audit == ["kv", "patch", "greedy", "invariance", "kvdirect", "compare", "batch", "tables"], audit
PY
$KVV --help | grep -q "^  engines " || fail "--help: no engines"
$KVV --help | grep -q "^  checks " || fail "--help: no checks"

# ---- compare: A vs B, B under test
$KVV compare --help >"$T/h"
grep -q "A vs B" "$T/h" && grep -q "engine B, the engine under test" "$T/h" &&
    grep -q "engine A, the reference side" "$T/h" || fail "compare --help: A/B roles unclear"
expect 0 "compare" $KVV compare "$T/m.gguf" --mode fast --json "$T/k.json" || true
grep -q "^engine  cpu (fast)" "$T/out" && grep -q "^vs      ref (exact) = engine A" "$T/out" ||
    fail "compare header: not 'cpu (fast)' under test vs 'ref (exact)'"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["compared_against"]=="ref (exact)" and d["engine"]["name"]=="cpu"' \
    "$T/k.json" || fail "compare JSON: roles"

# ---- the README's check line pastes as one command
grep -q 'kvverify {kv,patch,greedy,invariance} MODEL' README.md || fail "README: no {kv,patch,...} line"
grep -q 'kvverify kv | patch' README.md && fail "README: the pipeline line is still there"

[ $fails -eq 0 ] && echo "discoverable: all cases passed"
[ $fails -eq 0 ]
