#!/bin/sh
# kvverify evict / memory / latency on a synthetic model (no ../shared
# needed) and, when ../shared is there, stories260K: tables printed, CSV and
# JSON written, KV-Direct bit-equal (exit 0), bad options exit 2, and the
# Gemma 3-4B arithmetic of `memory --shape`.
if [ -z "$KVV" ]; then
    if [ -n "$O" ] && [ -x "$O/kvverify" ]; then KVV=$O/kvverify; else KVV=./kvverify; fi
fi
SHARED=${KVV_SHARED:-../shared}
T=${TMPDIR:-/tmp}/kvv-test-policies.$$
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
    echo "ok: $what"
    return 0
}

$KVV synth --arch qwen3 -o "$T/m.gguf" >/dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
M="$T/m.gguf"

# evict: every policy at two budgets, both tables, CSV + JSON.
if expect 0 "evict on a synthetic qwen3" $KVV evict "$M" --random 40 -n 8 --budgets 8,16 \
        --csv "$T/e.csv" --json "$T/e.json"; then
    grep -q "At equal total bytes" "$T/out" || fail "evict: no equal-bytes table"
    for p in window streaming streaming-reindex h2o tova snapkv pyramidkv knorm quest kvdirect-layer kvdirect-token; do
        grep -q "^  $p " "$T/out" || fail "evict: no row for $p"
    done
    head -1 "$T/e.csv" | grep -q "^table,policy,budget" || fail "evict: CSV header"
    [ "$(grep -c '^by_budget,' "$T/e.csv")" -eq 22 ] || fail "evict: CSV by_budget rows"
    grep -q '"bit_equal": true' "$T/e.json" || fail "evict: JSON lacks KV-Direct rows"
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/e.json" || fail "evict: JSON parse"
fi
expect 2 "evict: unknown policy" $KVV evict "$M" --policies window,bogus
expect 2 "evict: bad budget" $KVV evict "$M" --budgets 0,8
expect 2 "evict: missing model" $KVV evict

# memory: a short conversation; arithmetic for gemma3-4b.
if expect 0 "memory on a synthetic qwen3" $KVV memory "$M" --turns 4 --gen 3; then
    grep -q "generated tokens identical to the full cache: layer mode yes, token mode yes" "$T/out" ||
        fail "memory: KV-Direct conversation differs"
fi
if expect 0 "memory --shape gemma3-4b" $KVV memory --shape gemma3-4b; then
    grep -q "136.0 KiB" "$T/out" || fail "memory --shape: 136 KiB per token"
    grep -q "5.0 KiB, 27.2x smaller" "$T/out" || fail "memory --shape: 5 KiB residual"
    grep -q "103 MB of full cache is 740 tokens" "$T/out" || fail "memory --shape: 103 MB"
    grep -q "live for 285 tokens" "$T/out" || fail "memory --shape: 42 MB reproduction"
fi
expect 2 "memory: unknown shape" $KVV memory --shape nope

# latency: two batch sizes, one repeat.
if expect 0 "latency on a synthetic qwen3" $KVV latency "$M" --batches 1,8 --repeats 1; then
    grep -q "roofline: stream copy" "$T/out" || fail "latency: roofline line"
fi
expect 2 "latency: bad batch" $KVV latency "$M" --batches 0

# stories260K: KV-Direct keeps 100% at small budgets where window does not.
S="$SHARED/models/stories260K-f32.gguf"
if [ -f "$S" ]; then
    if expect 0 "evict on stories260K" $KVV evict "$S" -n 16 --budgets 24 \
            --policies window,h2o,kvdirect-layer,kvdirect-token --no-equal-bytes; then
        grep -E "^  kvdirect-(layer|token) +24 +100.0% +16 +100.0% +0 +0 .* yes$" "$T/out" |
            wc -l | grep -q 2 || fail "stories260K: KV-Direct rows not 100% / bit-equal"
    fi
else
    echo "SKIP: $S not found (the stories260K case needs ../shared)"
fi

[ "$fails" -eq 0 ] || exit 1
exit 0
