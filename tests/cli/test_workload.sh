#!/bin/sh
# The audit's workload floor (issue 20 item 3): every report states its
# workload (console header, JSON "workload", JUnit property); the default
# exercises every kernel path the engine describes (prompt twice its largest
# switch, at least 32 greedy steps, chunkings on both sides of each switch);
# --quick says so; sizes given below the floor are marked; --jobs never
# changes a result. The models are tiny synth ones whose cpu-engine switches
# are known: F32 fast: 4 (sgemm); Q8_0 invariant: 2 (the one-token X4 GEMV).
if [ -z "$KVV" ]; then
    if [ -n "$O" ] && [ -x "$O/kvverify" ]; then KVV=$O/kvverify; else KVV=./kvverify; fi
fi
T=${TMPDIR:-/tmp}/kvv-test-workload.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails+1)); }

expect() { # want-exit, description, command...
    want=$1; what=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"; rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$what: exit $rc, want $want"
        sed 's/^/    /' "$T/out" "$T/err" | tail -n 12
        return 1
    fi
    return 0
}
# workload JSON field check: file, python expression over w (the workload)
wl() { python3 - "$1" "$2" <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))["workload"]
ok = eval(sys.argv[2], {"w": w})
if not ok:
    print("workload", json.dumps(w))
sys.exit(0 if ok else 1)
PY
}

$KVV synth --shape llama-tiny -o "$T/f.gguf" -q || { echo "FAIL: synth"; exit 1; }
$KVV synth --shape qwen3-tiny --type q8_0 -o "$T/q.gguf" -q || { echo "FAIL: synth q8_0"; exit 1; }

# ---- the floor follows the engine's switches
expect 1 "audit F32 --engine cpu --mode fast" $KVV audit "$T/f.gguf" --engine cpu --mode fast \
    --json "$T/a.json" --junit "$T/a.xml" || true
wl "$T/a.json" 'w["kernel_switches"] == "4" and w["floor"]["n_prompt"] == 8 and w["n_gen"] >= 32' ||
    fail "fast: floor not from the switch at 4"
wl "$T/a.json" '3 in w["chunks"] and 4 in w["chunks"] and w["kv_chunk"] >= 4' ||
    fail "fast: chunkings do not straddle 4"
wl "$T/a.json" 'not w["quick"] and not w["below_floor"] and w["threads"][0] == 1' || fail "fast: flags"
grep -q '^workload prompt 32 tokens, 48 greedy steps, kv chunk 5, chunks 1,2,3,4,7, threads 1,2; kernel switches at 4 tokens; floor prompt 8, 32 steps$' "$T/out" ||
    fail "fast: console workload line: $(grep workload "$T/out")"
grep -q '<property name="workload" value="prompt 32 tokens, 48 greedy steps' "$T/a.xml" ||
    fail "fast: no JUnit workload property"
expect 0 "audit Q8_0 --engine cpu" $KVV audit "$T/q.gguf" --engine cpu --json "$T/b.json" -q || true
wl "$T/b.json" 'w["kernel_switches"] == "2" and w["floor"]["n_prompt"] == 8 and 1 in w["chunks"] and 2 in w["chunks"]' ||
    fail "invariant Q8_0: floor not from the switch at 2"
expect 0 "audit --engine ref" $KVV audit "$T/f.gguf" --json "$T/c.json" -q || true
wl "$T/c.json" 'w["kernel_switches"] == "unknown" and w["floor"] == {"n_prompt": 8, "n_gen": 32}' ||
    fail "ref: switches not unknown"

# ---- single checks state what they use
expect 0 "kv" $KVV kv "$T/f.gguf" --json "$T/k.json" -q || true
wl "$T/k.json" 'w["n_gen"] == 0 and w["kv_chunk"] > 0 and w["chunks"] == []' || fail "kv: workload not trimmed"
expect 0 "greedy" $KVV greedy "$T/f.gguf" --json "$T/g.json" -q || true
wl "$T/g.json" 'w["n_gen"] >= 32 and w["kv_chunk"] == 0' || fail "greedy: workload"

# ---- --quick and sizes below the floor say so
expect 0 "audit --quick" $KVV audit "$T/f.gguf" --quick --json "$T/d.json" || true
wl "$T/d.json" 'w["quick"]' || fail "--quick: not in the JSON"
grep -q "QUICK" "$T/out" || fail "--quick: not in the console"
expect 0 "audit --random 4 -n 8" $KVV audit "$T/f.gguf" --random 4 -n 8 --json "$T/e.json" || true
wl "$T/e.json" 'w["below_floor"] and not w["quick"] and w["n_prompt"] == 4' || fail "below the floor: not marked"
grep -q "below the floor" "$T/out" || fail "below the floor: not in the console"

# ---- --jobs never changes a result (cache-free steps run in parallel, and
# the divergent continuation is the sequential one)
for j in 1 3; do
    expect 1 "greedy --jobs $j" $KVV greedy "$T/q.gguf" --engine cpu --mode fast --seed 2 --random 9 \
        -n 40 --jobs $j --json "$T/j$j.json" -q || true
done
python3 - "$T/j1.json" "$T/j3.json" <<'PY' || fail "greedy --jobs 1 and 3 differ"
import json, sys
a, b = (json.load(open(p))["checks"][0] for p in sys.argv[1:])
for k in ("seconds",):
    a.pop(k); b.pop(k)
assert a == b, "results differ"
assert a["details"]["first_token_divergence"] >= 0, "no divergence: the continuation is untested"
PY
expect 1 "audit --jobs 1" $KVV audit "$T/f.gguf" --engine cpu --mode fast --jobs 1 --json "$T/s1.json" -q || true
python3 - "$T/a.json" "$T/s1.json" <<'PY' || fail "audit --jobs 1 and the default differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
strip = lambda r: [{k: v for k, v in c.items() if k != "seconds"} for c in r["checks"]]
assert strip(a) == strip(b)
PY

[ $fails -eq 0 ] && echo "workload: all cases passed"
[ $fails -eq 0 ]
