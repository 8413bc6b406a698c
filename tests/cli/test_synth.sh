#!/bin/sh
# kvverify synth: same arguments give the same bytes, another seed other
# bytes; every architecture is written and read back by `info` with its
# architecture; bad --arch/--shape/--type/--vocab give exit 2 and the list of
# valid names; a failed write leaves an existing file untouched.
. "$(dirname "$0")/lib.sh"
KVV=${KVV:-./kvverify}
T=${TMPDIR:-/tmp}/kvv-test-synth.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT

# ---- determinism
$KVV synth --arch qwen3 --type q8_0 --seed 11 -o "$T/a.gguf" >/dev/null || fail "synth a: exit $?"
$KVV synth --arch qwen3 --type q8_0 --seed 11 -o "$T/b.gguf" >/dev/null || fail "synth b: exit $?"
$KVV synth --arch qwen3 --type q8_0 --seed 12 -o "$T/c.gguf" >/dev/null || fail "synth c: exit $?"
cmp -s "$T/a.gguf" "$T/b.gguf" || fail "same arguments, different bytes"
cmp -s "$T/a.gguf" "$T/c.gguf" && fail "different seeds, same bytes"
[ "$(wc -c <"$T/a.gguf")" -eq "$(wc -c <"$T/c.gguf")" ] || fail "seed changed the file size"

# ---- every architecture and type, read back
for a in llama qwen2 qwen3 gemma2 gemma3 phi3; do
    for t in f32 bf16 q4_0; do
        $KVV synth --arch $a --type $t -o "$T/$a-$t.gguf" >/dev/null 2>"$T/err" || fail "synth $a $t: $(cat "$T/err")"
        $KVV info "$T/$a-$t.gguf" >"$T/out" 2>"$T/err" || fail "info $a $t: $(cat "$T/err")"
        grep -q "^architecture: $a\$" "$T/out" || fail "$a $t: architecture not read back"
    done
done
grep -q 'general.name *string "kvverify-synth-fused-qkv-tiny"' "$T/out" || fail "phi3 name"
# q4_1 / q5_1 (what the cpu engine holds like the K-quants): projections of that type,
# llama_ftype 3 / 9, and the cpu engine's invariant audit passes on q4_1
for t in q4_1:3 q5_1:9; do
    ty=${t%:*}; ft=${t#*:}
    $KVV synth --arch qwen3 --type $ty -o "$T/$ty.gguf" >/dev/null 2>"$T/err" || fail "synth $ty: $(cat "$T/err")"
    $KVV info "$T/$ty.gguf" >"$T/out" 2>"$T/err" || fail "info $ty: $(cat "$T/err")"
    grep -q "general.file_type *uint32 $ft\$" "$T/out" || fail "$ty: general.file_type is not $ft"
    grep -q "blk.0.attn_q.weight *$(echo $ty | tr a-z A-Z) " "$T/out" || fail "$ty: attn_q not $ty"
    [ $ty = q4_1 ] || continue
    $KVV "$T/$ty.gguf" --engine cpu --threads 2 --random 12 -n 6 >"$T/out" 2>&1 ||
        fail "cpu invariant audit on $ty: $(tail -n 5 "$T/out")"
done
# the K types and llama-quantize's mixes on llama-k256 (256-wide rows):
# llama_ftype, the tensor types, and the cpu engine's invariant audit
# (integer K-quant products) passes on q4_k_m
for t in q2_k:10:Q2_K:Q2_K q3_k:11:Q3_K:Q3_K q4_k:14:Q4_K:Q4_K q5_k:16:Q5_K:Q5_K \
         q6_k:18:Q6_K:Q6_K q4_k_m:15:Q4_K:Q6_K q5_k_m:17:Q5_K:Q6_K; do
    ty=${t%%:*}; rest=${t#*:}; ft=${rest%%:*}; rest=${rest#*:}; tq=${rest%%:*}; tv=${rest#*:}
    $KVV synth --shape llama-k256 --type $ty -o "$T/$ty.gguf" >"$T/out" 2>"$T/err" ||
        fail "synth $ty: $(cat "$T/err")"
    grep -q "$(echo $ty | tr a-z A-Z)" "$T/out" || fail "$ty: not named in synth's line"
    $KVV info "$T/$ty.gguf" >"$T/out" 2>"$T/err" || fail "info $ty: $(cat "$T/err")"
    grep -q "general.file_type *uint32 $ft\$" "$T/out" || fail "$ty: general.file_type is not $ft"
    grep -q "blk.0.attn_q.weight *$tq " "$T/out" || fail "$ty: attn_q not $tq"
    grep -q "blk.1.attn_v.weight *$tv " "$T/out" || fail "$ty: blk.1.attn_v not $tv"
    grep -q "output.weight *$tv " "$T/out" || fail "$ty: output not $tv"
done
$KVV "$T/q4_k_m.gguf" --engine cpu --threads 2 --random 12 -n 6 >"$T/out" 2>&1 ||
    fail "cpu invariant audit on q4_k_m: $(tail -n 5 "$T/out")"
$KVV synth --shape llama3-tiny --vocab 1000 -o "$T/v.gguf" >/dev/null || fail "--vocab 1000"
$KVV info "$T/v.gguf" --json >"$T/json" || fail "info v.gguf"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
a = d["architecture"]
assert a["n_vocab"] == 1000 and a["rope_freqs"][5] > 1.99 and a["rope_freqs"][15] == 8.0, a
assert d["metadata"]["tokenizer.ggml.tokens"]["count"] == 1000
assert d["metadata"]["llama.vocab_size"] == 1000
' "$T/json" || fail "--vocab / rope_freqs not as expected"

# ---- bad arguments: exit 2, one line naming the valid values, no file
bad() { # expected-substring, args...
    want=$1; shift
    $KVV synth "$@" >"$T/out" 2>"$T/err"; rc=$?
    [ $rc -eq 2 ] || fail "synth $*: exit $rc, want 2"
    grep -q -- "$want" "$T/err" || fail "synth $*: message lacks '$want': $(cat "$T/err")"
    [ "$(wc -l <"$T/err")" -eq 1 ] || fail "synth $*: want one line"
}
bad 'llama, qwen2, qwen3, gemma2, gemma3, phi3' --arch bert -o "$T/x.gguf"
bad 'gemma3-4b' --shape gpt-5 -o "$T/x.gguf"
bad 'f32, f16, bf16, q8_0, q4_0, q5_0, q4_1, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, q4_k_m, q5_k_m' --arch llama --type q8_k -o "$T/x.gguf"
bad 'is a qwen3 model, not llama' --arch llama --shape qwen3-tiny -o "$T/x.gguf"
bad 'missing -o' --arch llama
bad '--vocab' --arch llama --vocab 12 -o "$T/x.gguf"
bad '--seed' --arch llama --seed -1 -o "$T/x.gguf"
bad 'unknown option' --arch llama --frob -o "$T/x.gguf"
[ -e "$T/x.gguf" ] && fail "a refused command wrote a file"

# ---- a failed write leaves the existing file alone and nothing behind
cp "$T/a.gguf" "$T/keep.gguf"
$KVV synth --arch llama -o "$T/no/such/dir/m.gguf" >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] || fail "unwritable path: exit $rc, want 2"
$KVV synth --arch llama --type q9 -o "$T/keep.gguf" >/dev/null 2>&1
cmp -s "$T/a.gguf" "$T/keep.gguf" || fail "a refused command changed an existing file"
ls "$T" | grep -q 'tmp' && fail "temporary file left behind: $(ls "$T")"

# ---- help and the shape list
$KVV synth --help >"$T/out" || fail "--help exit $?"
grep -q 'vocabulary' "$T/out" && grep -q '32000' "$T/out" || fail "--help does not explain the vocabulary cap"
$KVV synth --list-shapes >"$T/out" || fail "--list-shapes exit $?"
for s in smollm2-135m qwen2.5-0.5b qwen3-0.6b llama-3.2-1b gemma3-1b gemma3-4b; do
    grep -q "^$s " "$T/out" || fail "--list-shapes lacks $s"
done

[ $fails -eq 0 ] && echo "all synth checks passed" || exit 1
