#!/bin/sh
# Resource claims and --max-memory through the command line:
#   - a GGUF declaring a 2^40-element tensor, a 2^31 vocabulary (declared or
#     as a token count) or a context of 2^40 (or 2^32-1) is exit 2 with a
#     message naming the field and its byte offset, from `kv` and `run`
#     (the files are written by tests/model/test_resource_claims --write,
#     with kvverify's own GGUF writer);
#   - --max-memory: an engine whose planned weights and KV cache do not fit
#     is exit 2 naming each part; a cap that fits runs; a bad value is a
#     usage error; an allocation nobody planned for (synth's weights) fails
#     cleanly under the hard cap (exit 2, not a kill, no file left); every
#     command's --help lists the option.
. "$(dirname "$0")/lib.sh"
KVV=${KVV:-./kvverify}
O=${O:-build}
T=${TMPDIR:-/tmp}/kvv-test-hostile.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT
# A sanitizer build reports an allocation that fails instead of returning NULL.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1
export ASAN_OPTIONS

# ---- declared sizes
GEN=$O/tests/model/test_resource_claims
[ -x "$GEN" ] || { echo "FAIL: $GEN not built (make $GEN)"; exit 1; }
"$GEN" --write "$T" >"$T/cases" || fail "test_resource_claims --write"
[ "$(wc -l <"$T/cases")" -ge 4 ] || fail "fewer than 4 hostile files written"
while IFS="$(printf '\t')" read -r file field what; do
    for cmd in "kv" "run --tokens 1,2"; do
        # shellcheck disable=SC2086
        $KVV $cmd "$T/$file" >"$T/out" 2>&1; rc=$?
        [ $rc -eq 2 ] || fail "$cmd $file: exit $rc, want 2: $(head -c 300 "$T/out")"
        grep -qF "$field" "$T/out" || fail "$cmd $file: message does not name '$field': $(cat "$T/out")"
        grep -qF "$what" "$T/out" || fail "$cmd $file: message lacks '$what': $(cat "$T/out")"
    done
done <"$T/cases"

# ---- --max-memory
SYN=$T/llama.gguf
$KVV synth --shape llama-tiny --seed 2 -o "$SYN" >/dev/null 2>&1 || fail "synth llama-tiny"
# (caps of a few MiB work too, but not in a sanitizer build, whose allocator
# and leak checker map megabytes of their own)
$KVV run "$SYN" --tokens 1,2 -n 2 --n-ctx 1048576 --max-memory 256M >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "run --n-ctx 1048576 --max-memory 256M: exit $rc, want 2"
grep -q "reference engine: needs .*vectors as fp32 .*KV cache of 1048576 positions (f32) .* but the memory limit (--max-memory) leaves" \
    "$T/out" || fail "run --n-ctx 1048576 --max-memory 256M: no plan message: $(cat "$T/out")"
$KVV run "$SYN" --tokens 1,2 -n 2 --n-ctx 1024 --max-memory 256M >"$T/out" 2>&1 ||
    fail "run --n-ctx 1024 --max-memory 256M: exit $?: $(cat "$T/out")"
$KVV kv "$SYN" -q --max-memory 256M >"$T/out" 2>&1 || fail "kv --max-memory 256M: exit $?: $(cat "$T/out")"
$KVV kv "$SYN" -q --engine cpu --mode fast --threads 2 --max-memory=100M >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "cpu engine: needs .*OpenBLAS buffers of 1 pool threads" "$T/out" ||
    fail "cpu fast --threads 2 --max-memory 100M: exit $rc: $(cat "$T/out")"
$KVV kv "$SYN" --max-memory 12Q >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "option --max-memory: '12Q' is not a byte count" "$T/out" ||
    fail "--max-memory 12Q: exit $rc: $(cat "$T/out")"
$KVV kv "$SYN" --max-memory >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "--max-memory without a value: exit $rc"
# the hard cap: synth allocates its weights without a plan
$KVV synth --shape llama-3.2-1b -o "$T/big.gguf" --max-memory 200M >"$T/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "out of memory" "$T/out" ||
    fail "synth llama-3.2-1b --max-memory 200M: exit $rc (want 2, out of memory): $(cat "$T/out")"
[ ! -e "$T/big.gguf" ] || fail "synth under the cap left a file behind"

# every command's --help lists it
cmds=$($KVV --help | sed -n '/^commands:/,/^$/p' | awk 'NF > 1 {print $1}')
[ -n "$cmds" ] || fail "no commands in kvverify --help"
$KVV --help | grep -q -- "--max-memory BYTES" || fail "kvverify --help: no --max-memory"
for c in $cmds; do
    $KVV "$c" --help 2>&1 | grep -q -- "--max-memory BYTES" || fail "kvverify $c --help: no --max-memory"
done
for c in gen check show; do
    $KVV vectors "$c" --help 2>&1 | grep -q -- "--max-memory BYTES" || fail "vectors $c --help: no --max-memory"
done

[ $fails -eq 0 ] || exit 1
echo "hostile claims and --max-memory: ok"
