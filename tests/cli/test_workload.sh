#!/bin/sh
# The audit's workload floor (issue 20 item 3): every report states its
# workload (console header, JSON "workload", JUnit property); the default
# exercises every kernel path the engine describes (prompt twice its largest
# switch, at least 32 greedy steps, chunkings on both sides of each switch);
# --quick says so; sizes given below the floor are marked; --jobs never
# changes a result; latency states its batch sizes and repeats; memory and
# latency refuse the prompt options they do not use; the HTML page and a
# suite's reports state it too. The models are tiny synth ones whose cpu-engine switches
# are known: F32 fast: 4 (sgemm); Q8_0 invariant: 2 (the one-token X4 GEMV).
. "$(dirname "$0")/lib.sh"
T=${TMPDIR:-/tmp}/kvv-test-workload.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT

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
grep -q '^workload prompt 32 tokens, 48 greedy steps, kv chunk 5, chunks 1,2,3,4,7, threads 1,2; batch 4 requests: A 32 tokens (sequence 2), others 35,17,39; decode 16 steps in 6 calls of 1,2,5 tokens per request; prefix 16 of 32 copied; isolation 3 steps; kernel switches at 4 tokens; floor prompt 8, 32 steps$' "$T/out" ||
    fail "fast: console workload line: $(grep workload "$T/out")"
grep -q '<property name="workload" value="prompt 32 tokens, 48 greedy steps' "$T/a.xml" ||
    fail "fast: no JUnit workload property"
expect 0 "audit Q8_0 --engine cpu" $KVV audit "$T/q.gguf" --engine cpu --json "$T/b.json" -q || true
wl "$T/b.json" 'w["kernel_switches"] == "2, 4" and w["floor"]["n_prompt"] == 8 and all(k in w["chunks"] for k in (1, 2, 3, 4))' ||
    fail "invariant Q8_0: floor not from the switches at 2 and 4"
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
# the divergent continuation is the sequential one). The divergence is the
# control's, planted (--force-fail): fast mode's products agree between
# prefill and decode on Q8_0 now (X16, docs/cpu-engine.md), so no model
# here diverges by itself.
for j in 1 3; do
    expect 1 "greedy --jobs $j" $KVV greedy "$T/q.gguf" --engine cpu --mode fast --seed 2 --random 9 \
        -n 40 --jobs $j --force-fail --json "$T/j$j.json" -q || true
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

# ---- -q keeps the workload line (the certificate's sizes, even quiet)
expect 0 "kv -q" $KVV kv "$T/f.gguf" -q || true
grep -q '^workload prompt 32 tokens, kv chunk' "$T/out" || fail "kv -q: no workload line: $(head -2 "$T/out")"

# ---- the HTML page states it: written by the command, and rendered later
# from the JSON alone (kvverify report reads the workload back)
expect 0 "audit --html" $KVV audit "$T/f.gguf" --quick --json "$T/h.json" --html "$T/h.html" -q || true
grep -q '<dt>workload</dt><dd>prompt [0-9]* tokens, [0-9]* greedy steps.*QUICK' "$T/h.html" ||
    fail "audit --html: no workload line"
expect 0 "report FILE.json --html -" $KVV report "$T/h.json" --html - || true
grep -q '<dt>workload</dt><dd>prompt [0-9]* tokens, [0-9]* greedy steps.*QUICK' "$T/out" ||
    fail "report --html: the workload is not drawn from the JSON"

# ---- latency states its own workload: batch sizes and repeats, in the
# header (printed first), JSON, JUnit and HTML
expect 0 "latency" $KVV latency "$T/f.gguf" --batches 1,4,16 --repeats 2 --json "$T/l.json" \
    --junit "$T/l.xml" --html "$T/l.html" || true
sed -n 3p "$T/out" | grep -q '^workload batches 1,4,16 tokens, 2 repeats each (median), threads 1' ||
    fail "latency: the header's third line is not its workload: $(head -4 "$T/out")"
wl "$T/l.json" 'w["batches"] == [1, 4, 16] and w["repeats"] == 2 and w["n_prompt"] == 0' ||
    fail "latency: JSON workload"
grep -q '<property name="workload" value="batches 1,4,16 tokens, 2 repeats' "$T/l.xml" ||
    fail "latency: no JUnit workload property"
grep -q '<dt>workload</dt><dd>batches 1,4,16 tokens, 2 repeats' "$T/l.html" || fail "latency: HTML workload"
expect 0 "latency default batches" $KVV latency "$T/f.gguf" --repeats 1 -q --json "$T/l2.json" || true
wl "$T/l2.json" 'w["batches"] == [1, 4, 16, 64, 256, 1024, 4096] and w["repeats"] == 1' ||
    fail "latency: default batch sizes not stated"
expect 2 "latency: more sizes than a report states" $KVV latency "$T/f.gguf" \
    --batches 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17 || true

# ---- memory and latency refuse the options they do not use (never ignored)
for c in "memory --turns 2" "latency --batches 1 --repeats 1"; do
    name=${c%% *}
    for opt in "-p hello" "--prompt=hello" "--tokens 1,2,3" "--random 4" "--quick" "--jobs 2"; do
        # shellcheck disable=SC2086
        expect 2 "$name $opt" $KVV $c "$T/f.gguf" $opt &&
            grep -q -- "option ${opt%%[ =]*}: not used by $name" "$T/err" ||
            fail "$name $opt: not refused as 'not used by $name': $(cat "$T/err")"
    done
    # shellcheck disable=SC2086
    expect 0 "$name --seed 3" $KVV $c "$T/f.gguf" --seed 3 -q || true
    $KVV $name --help >"$T/h" || fail "$name --help"
    grep -q -- '--random N' "$T/h" && fail "$name --help lists --random"
    grep -q -- '--seed N' "$T/h" || fail "$name --help lacks --seed"
done
expect 2 "memory --layers" $KVV memory "$T/f.gguf" --layers && grep -q "not used by memory" "$T/err" ||
    fail "memory --layers: not refused"
for opt in --quick --layers; do # evict sizes its own prompt set and has no per-layer table
    expect 2 "evict $opt" $KVV evict "$T/f.gguf" $opt && grep -q -- "option $opt: not used by evict" "$T/err" ||
        fail "evict $opt: not refused"
done
expect 0 "latency --layers" $KVV latency "$T/f.gguf" --batches 1 --repeats 1 --layers -q || true

# ---- a suite states each case's workload everywhere, and its defaults keep
# the floor: at least 32 greedy steps and twice the engine's switch (the
# F32 fast engine switches at 4: 8 tokens, raised to the suite's 16);
# --quick goes lower and says so; sizes given below it are marked
printf '%s\n' "dflt model=f.gguf checks=kv,greedy,invariance" \
    "fast model=f.gguf engine=cpu mode=fast checks=invariance" \
    "small model=f.gguf checks=greedy tokens=4 n=4" >"$T/s.txt"
expect 1 "suite" $KVV suite "$T/s.txt" --json "$T/s.json" --junit "$T/s.xml" --html "$T/s.html" || true
grep -q '^workload dflt: prompt 16 tokens, 32 greedy steps, kv chunk 5, chunks 1,2,7, threads 1; kernel switches unknown; floor prompt 16, 32 steps$' "$T/out" ||
    fail "suite: console workload of dflt: $(grep '^workload' "$T/out")"
grep -q '^workload fast: prompt 16 tokens, chunks 1,2,3,4,7, threads 1,2; kernel switches at 4 tokens' "$T/out" ||
    fail "suite: the chunkings do not straddle the fast engine's switch"
grep -q '^workload small: prompt 4 tokens, 4 greedy steps.*below the floor' "$T/out" ||
    fail "suite: given sizes below the floor not marked"
python3 - "$T/s.json" <<'PY' || fail "suite: JSON workloads"
import json, sys
res = json.load(open(sys.argv[1]))["results"]
w = {(r["case"], r["result"]["name"]): r["workload"] for r in res}
assert len(w) == 5, list(w)
g = w[("dflt", "greedy")]
assert g["n_gen"] >= 32 and g["n_prompt"] >= 16 and not g["quick"] and not g["below_floor"], g
assert w[("small", "greedy")]["below_floor"] and w[("small", "greedy")]["n_gen"] == 4
assert w[("fast", "invariance")]["kernel_switches"] == "4"
PY
grep -q 'workload prompt 16 tokens, 32 greedy steps' "$T/s.xml" || fail "suite: JUnit workload"
grep -q 'workload prompt 16 tokens, 32 greedy steps' "$T/s.html" || fail "suite: HTML workload"
expect 0 "report suite.json" $KVV report "$T/s.json" &&
    grep -q '^  workload dflt: prompt 16 tokens, 32 greedy steps' "$T/out" || fail "report: a suite case's workload"
expect 0 "report audit.json" $KVV report "$T/h.json" &&
    grep -q '^  workload prompt [0-9]* tokens, [0-9]* greedy steps' "$T/out" || fail "report: the audit's workload"
expect 1 "suite --quick" $KVV suite "$T/s.txt" --quick --junit "$T/q.xml" || true
grep -q '^workload dflt: prompt 16 tokens, 16 greedy steps.*QUICK' "$T/out" ||
    fail "suite --quick: not said: $(grep '^workload dflt' "$T/out")"
grep -q '16 greedy steps.*QUICK' "$T/q.xml" || fail "suite --quick: not in the JUnit"
expect 1 "suite -q" $KVV suite "$T/s.txt" --quick -q && grep -q '^workload' "$T/out" &&
    fail "suite -q: per-case lines printed"

[ $fails -eq 0 ] && echo "workload: all cases passed"
[ $fails -eq 0 ]
