#!/bin/sh
# kvverify kv / patch / greedy / invariance on the reference engine: each
# passes on a synthetic model (and on stories260K when ../shared is there)
# with f32, f16 and bf16 caches, prints its controls as detected, fails with
# exit 1 under --force-fail, and rejects bad input with exit 2.
. "$(dirname "$0")/lib.sh"
SHARED=${KVV_SHARED:-../shared}
T=${TMPDIR:-/tmp}/kvv-test-checks.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT

$KVV synth --arch qwen3 -o "$T/m.gguf" >/dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
M="$T/m.gguf"

for c in kv patch greedy invariance audit; do
    expect 0 "$c --help" $KVV $c --help && grep -q '^usage: kvverify' "$T/out" ||
        fail "$c --help: no usage line"
    grep -q -- '--force-fail' "$T/out" || fail "$c --help: --force-fail not documented"
done

# ---- passing checks, every cache dtype, controls visible
for ct in f32 f16 bf16; do
    expect 0 "kv --cache-type $ct" $KVV kv "$M" --random 9 --cache-type $ct &&
        grep -q '^kv  *PASS' "$T/out" || fail "kv $ct: no PASS row"
    grep -q 'kv control: flipped bit in K\[l=2,t=5\] — detected' "$T/out" ||
        fail "kv $ct: bit-flip control not shown as detected"
    grep -q 'reversed summation order.* — detected' "$T/out" ||
        fail "kv $ct: reversed-sum control not shown as detected"
    grep -q '^  2 *K token-by-token' "$T/out" || fail "kv $ct: per-layer table missing"
done
expect 0 "patch" $KVV patch "$M" --random 7 &&
    grep -q 'KL = 0 (0x0p+0)' "$T/out" || fail "patch: KL = 0 with hex float not printed"
grep -q 'patch control: patch only the last position.* — detected (KL at the last position = ' \
    "$T/out" || fail "patch: control not shown"
expect 0 "greedy -n 5" $KVV greedy "$M" -n 5 --random 4 --cache-type bf16 &&
    grep -q '5 of 5 tokens identical' "$T/out" || fail "greedy: 5 of 5 tokens not shown"
expect 0 "invariance" $KVV invariance "$M" --random 10 --cache-type f16 &&
    grep -q 'invariance control: flipped bit in residual.* — detected' "$T/out" ||
    fail "invariance: control not shown"
expect 0 "kv --tokens" $KVV kv "$M" --tokens 1,5,9,200,3 --chunk 3 || true
expect 0 "kv -p TEXT" $KVV kv "$M" -p "Once upon a time there was" || true
expect 0 "patch --tokens-b" $KVV patch "$M" --tokens 1,2,3,4 --tokens-b 1,7,8,4 || true
expect 0 "kv --no-controls" $KVV kv "$M" --no-controls && grep -q 'control:' "$T/out" &&
    fail "kv --no-controls still ran controls"

# ---- --force-fail: every check must FAIL with exit 1 and name the mismatch
for c in kv patch greedy invariance; do
    expect 1 "$c --force-fail" $KVV $c "$M" --random 6 -q --force-fail &&
        grep -q "first mismatch" "$T/out" || fail "$c --force-fail: no first mismatch line"
done

# ---- bad input: exit 2, one line naming the option or file
expect 2 "bad cache type" $KVV kv "$M" --cache-type f64 && grep -q -- '--cache-type' "$T/err" ||
    fail "bad cache type: message does not name the option"
expect 2 "even chunk" $KVV kv "$M" --chunk 4 || true
expect 2 "missing model" $KVV kv || true
expect 2 "no such file" $KVV greedy "$T/nope.gguf" && grep -q "nope.gguf" "$T/err" ||
    fail "no such file: message does not name it"
expect 2 "token outside vocabulary" $KVV kv "$M" --tokens 1,99999999 || true
expect 2 "tokens-b length" $KVV patch "$M" --tokens 1,2,3 --tokens-b 1,2 || true
expect 2 "two prompts" $KVV kv "$M" --tokens 1,2 --random 3 || true
expect 2 "unknown option" $KVV invariance "$M" --frobnicate || true
expect 2 "unknown engine" $KVV kv "$M" --engine nope || true
expect 2 "bad mode" $KVV kv "$M" --mode sloppy || true
expect 2 "greedy -n 0" $KVV greedy "$M" -n 0 || true
expect 2 "patch one token" $KVV patch "$M" --tokens 5 || true

# ---- the trained model, when ../shared is there
S="$SHARED/models/stories260K-f32.gguf"
if [ -r "$S" ]; then
    for c in kv patch invariance; do
        expect 0 "stories $c" $KVV $c "$S" -q || true
    done
    expect 0 "stories greedy" $KVV greedy "$S" -n 16 -p "Once upon a time" -q || true
else
    echo "SKIP: $S not found (stories260K part skipped)"
fi

[ $fails -eq 0 ] && echo "test_checks: all passed"
[ $fails -eq 0 ]
