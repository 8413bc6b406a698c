#!/bin/sh
# kvverify info: tensors and types of stories260K-q8_0, --json, the per-token
# memory table of the gemma3-4b shape, malformed files (exit 2, one line),
# unsupported architectures (shown, exit 0), bad options.
. "$(dirname "$0")/lib.sh"
KVV=${KVV:-./kvverify}
SHARED=${KVV_SHARED:-../shared}
T=${TMPDIR:-/tmp}/kvv-test-info.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT

# ---- shapes (no file needed)
$KVV info --shape gemma3-4b >"$T/out" 2>"$T/err" || fail "info --shape gemma3-4b exit $?"
grep -q 'K+V, all 34 layers:.*bf16 136 KiB' "$T/out" || fail "gemma3-4b: 136 KiB bf16 K/V per token not shown"
grep -q 'one residual vector:.*bf16 5 KiB' "$T/out" || fail "gemma3-4b: 5 KiB residual not shown"
grep -q '27.2x' "$T/out" || fail "gemma3-4b: ratio 27.2x not shown"
grep -q 'a residual per layer:.*bf16 170 KiB' "$T/out" || fail "gemma3-4b: 170 KiB per-layer residuals not shown"
$KVV info --shape gemma3-4b --json >"$T/json" || fail "info --shape --json exit $?"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
m = d["token_memory"]
assert m["kv_bf16"] == 136 * 1024 and m["resid_bf16"] == 5 * 1024, m
assert m["resid_layers_bf16"] == 170 * 1024, m
assert abs(m["kv_over_resid"] - 27.2) < 1e-9, m
assert d["architecture"]["n_layer"] == 34 and d["architecture"]["head_dim"] == 256
' "$T/json" || fail "info --shape gemma3-4b --json: wrong or unparsable"
$KVV info --shape nope >"$T/out" 2>"$T/err"; rc=$?
[ $rc -eq 2 ] || fail "unknown shape: exit $rc, want 2"
grep -q 'smollm2-135m' "$T/err" || fail "unknown shape: valid names not listed"

# ---- --cpu: the kernel tables; KVV_CPU_MAX_ISA caps them (so every CPU can show the
# "lacks it" answer); the JSON agrees with the text
$KVV info --cpu >"$T/out" 2>"$T/err" || fail "info --cpu exit $?"
grep -q '^  generic  yes ' "$T/out" || fail "info --cpu: generic not runnable"
grep -q '^  default: ' "$T/out" || fail "info --cpu: no default"
KVV_CPU_MAX_ISA=generic $KVV info --cpu >"$T/out" 2>"$T/err" || fail "info --cpu (capped) exit $?"
grep -q '^  avx2     no ' "$T/out" && grep -q '^  avx512   no ' "$T/out" ||
    fail "info --cpu: KVV_CPU_MAX_ISA=generic does not hide avx2/avx512"
grep -q '^  default: generic' "$T/out" || fail "info --cpu: capped default is not generic"
grep -q 'KVV_CPU_MAX_ISA=generic' "$T/out" || fail "info --cpu: cap not shown"
for cap in "" generic avx2; do
    KVV_CPU_MAX_ISA=$cap $KVV info --cpu --json >"$T/json" || fail "info --cpu --json ($cap) exit $?"
    KVV_CPU_MAX_ISA=$cap $KVV info --cpu >"$T/out"
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
names = [t["name"] for t in d["tables"]]
assert names == ["generic", "avx2", "avx512"], names
runs = [t["name"] for t in d["tables"] if t["available"]]
assert runs[0] == "generic" and d["default"] == runs[-1], d
assert ("  default: %s " % d["default"]) in text
lanes = {t["name"]: (t["lanes"], t["fused"]) for t in d["tables"] if t["built"]}
assert lanes["generic"] == (8, False), lanes
assert lanes.get("avx512", (16, True)) == (16, True), lanes
cap = sys.argv[3]
if cap:  # nothing wider than the cap runs
    assert d["max_isa"] == cap and names.index(d["default"]) <= names.index(cap), d
' "$T/json" "$T/out" "$cap" || fail "info --cpu --json (KVV_CPU_MAX_ISA=$cap) wrong or unparsable"
done
KVV_CPU_MAX_ISA=avx9000 $KVV info --cpu >"$T/out" 2>"$T/err"; rc=$?
[ $rc -eq 2 ] || fail "KVV_CPU_MAX_ISA=avx9000: exit $rc, want 2"
grep -q "KVV_CPU_MAX_ISA='avx9000'" "$T/err" || fail "KVV_CPU_MAX_ISA=avx9000: no message"
$KVV info --cpu --shape smollm2-135m >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "info --cpu --shape: exit $rc, want 2"

# ---- bad usage
$KVV info >/dev/null 2>&1; rc=$?; [ $rc -eq 2 ] || fail "no argument: exit $rc, want 2"
$KVV info --frobnicate x.gguf >/dev/null 2>&1; rc=$?; [ $rc -eq 2 ] || fail "bad option: exit $rc"
$KVV info "$T/missing.gguf" >"$T/out" 2>"$T/err"; rc=$?
[ $rc -eq 2 ] || fail "missing file: exit $rc, want 2"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "missing file: want one line on stderr"
$KVV info --help | grep -q 'per-token memory' || fail "--help"

if [ ! -d "$SHARED/models" ]; then
    echo "SKIP: $SHARED/models not found (file checks need ../shared)"
    [ $fails -eq 0 ] && exit 0 || exit 1
fi

# ---- stories260K-q8_0: 48 tensors, 32 Q8_0, 5 F16, 11 F32
M="$SHARED/models/stories260K-q8_0.gguf"
$KVV info "$M" >"$T/out" 2>"$T/err" || fail "info stories260K-q8_0 exit $?"
grep -q '^tensors (48):' "$T/out" || fail "stories: 48 tensors not listed"
[ "$(grep -c '^  blk\.\|^  token_embd\|^  output' "$T/out")" -eq 48 ] || fail "stories: want 48 tensor lines"
grep -q '11 F32 (.*5 F16 (.*32 Q8_0 (' "$T/out" || fail "stories: type totals wrong"
grep -q 'blk.0.ffn_down.weight *F16 *{172, 64} *22016' "$T/out" || fail "stories: ffn_down line"
grep -q 'tokenizer.ggml.tokens *array\[string\] x 512: "<unk>", "<s>"' "$T/out" || fail "stories: array summary"
grep -q '^architecture: llama$' "$T/out" || fail "stories: architecture"
$KVV info "$M" --json >"$T/json" || fail "info --json exit $?"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["n_tensors"] == 48 and len(d["tensors"]) == 48
c = {k: v["count"] for k, v in d["type_counts"].items()}
assert c == {"Q8_0": 32, "F16": 5, "F32": 11}, c
assert d["metadata"]["general.architecture"] == "llama"
assert d["metadata"]["tokenizer.ggml.tokens"]["count"] == 512
assert d["architecture"]["n_layer"] == 5 and d["architecture"]["supported"]
' "$T/json" || fail "stories --json: wrong or unparsable"

# ---- malformed: exit 2 and one line, except the valid v2 file
for f in "$SHARED"/models/malformed/*.gguf; do
    $KVV info "$f" >"$T/out" 2>"$T/err"; rc=$?
    case "$f" in
    *v2-*) [ $rc -eq 0 ] || fail "$f (v2): exit $rc, want 0"
           grep -q 'GGUF v2' "$T/out" || fail "$f: v2 not shown"
           grep -q "architecture: not supported: .*'falcon' is not supported" "$T/out" || fail "$f: falcon not noted as unsupported" ;;
    *)     [ $rc -eq 2 ] || fail "$f: exit $rc, want 2"
           [ "$(wc -l <"$T/err")" -eq 1 ] || fail "$f: want exactly one line on stderr, got: $(cat "$T/err")"
           [ -s "$T/out" ] && fail "$f: wrote to stdout" ;;
    esac
done
# truncated file
head -c 5000 "$M" >"$T/trunc.gguf"
$KVV info "$T/trunc.gguf" >"$T/out" 2>"$T/err"; rc=$?
[ $rc -eq 2 ] || fail "truncated: exit $rc, want 2"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "truncated: want one line"

# ---- unsupported architecture and vocabulary-only files are shown
$KVV info "$SHARED/models/vocab/ggml-vocab-bert-bge.gguf" >"$T/out" 2>"$T/err"; rc=$?
[ $rc -eq 0 ] || fail "bert vocab: exit $rc, want 0"
grep -q "general.architecture 'bert' is not supported" "$T/out" || fail "bert: not noted as unsupported"
$KVV info "$SHARED/models/vocab/ggml-vocab-bert-bge.gguf" --json >"$T/json" || fail "bert --json"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["architecture"]["supported"] is False and d["vocab_only"] is True
' "$T/json" || fail "bert --json content"

[ $fails -eq 0 ] && echo "all info checks passed" || exit 1
