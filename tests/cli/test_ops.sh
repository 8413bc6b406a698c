#!/bin/sh
# test_ops.sh — `kvverify compare --ops` (docs/ops.md, issue 36): the local
# error of every op of engine B against the exact op on B's own inputs.
#
# Asserted: llama.cpp (installed on every machine: never skipped) on a
# synthetic gemma2 with flash attention off names ffn_act of layer 0 as the
# first op beyond budget, explained by the fp16 lookup table, and on f16
# weights names q of layer 0, explained by inputs rounded to f16; the
# example plugin's planted fault (fault=op:NAME:LN) is named exactly and is
# the only op beyond budget, and without it no op is; ref against cpu
# (invariant and fast) has no op beyond budget on every architecture; an
# engine without op taps is SKIPPED (unsupported); a malformed fault is
# exit 2 naming the option; JSON, JUnit and HTML carry the table.
KVV=${KVV:-./kvverify}
O=${O:-build}
T="$O/tmp/test_ops.$$"
mkdir -p "$T"
trap 'rm -rf "$T"' EXIT INT TERM
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
if [ ! -r "$O/plugins/llama.cpp.so" ] || [ ! -d deps/llama.cpp/linux-x64 ]; then
    echo "FAIL: llama.cpp plugin or libraries missing: run scripts/install-deps.sh, then make"
    exit 1
fi
EX="plugin:$O/plugins/example.so"

# first JSON: "verdict op layer n_beyond explained..."
first() {
    jq -r '.checks[] | select(.name=="ops") | "\(.verdict) \(.details.ops.first.op // "-") \(.details.ops.first.layer // "-") \(.details.ops.n_beyond // "-") \(.details.ops.explanation.explained // [] | join(";"))"' "$1"
}

for shape in gemma2-tiny llama-tiny qwen3-tiny phi3-tiny; do
    "$KVV" synth --shape "$shape" --seed 3 -o "$T/$shape.gguf" >/dev/null || fail "synth $shape"
done
"$KVV" synth --shape qwen3-tiny --type f16 --seed 3 -o "$T/qwen3-f16.gguf" >/dev/null || fail "synth f16"
LL="--against llama.cpp --engine-opt flash_attn=off --engine-opt extra_bufts=0 --cache-type f32"

# llama.cpp: the op in layer 0's FFN, and why
"$KVV" compare "$T/gemma2-tiny.gguf" --engine ref $LL --ops --json "$T/g.json" \
    --junit "$T/g.xml" >"$T/out" 2>&1
rc=$?
got=$(first "$T/g.json")
case "$rc $got" in
    "1 fail ffn_act 0 "*"function from a 16-bit lookup table"*) ok "gemma2 vs llama.cpp: $got";;
    *) fail "gemma2 vs llama.cpp: exit $rc, '$got'"; sed 's/^/    /' "$T/out" | head -20;;
esac
grep -q 'ops' "$T/g.xml" && grep -q 'ffn_act' "$T/g.xml" || fail "JUnit does not carry the ops check"
n=$(jq '[.checks[] | select(.name=="ops") | .details.ops.table[] | select(.op=="ffn_up")] | length' "$T/g.json")
[ "$n" = 4 ] && ok "table: ffn_up of 4 layers" || fail "table: $n ffn_up rows"
"$KVV" compare "$T/qwen3-f16.gguf" --engine ref $LL --ops --json "$T/f.json" >"$T/out" 2>&1
got=$(first "$T/f.json")
case "$got" in
    "fail q 0 "*"inputs rounded to f16"*) ok "qwen3 f16 vs llama.cpp: $got";;
    *) fail "qwen3 f16 vs llama.cpp: '$got'"; sed 's/^/    /' "$T/out" | head -20;;
esac
# phi3's fused projections are not ops: listed, not tapped, and no contract breach
"$KVV" compare "$T/phi3-tiny.gguf" --engine ref $LL --ops --json "$T/p.json" >"$T/out" 2>&1
v=$(jq -r '.checks[] | select(.name=="ops") | .verdict' "$T/p.json")
grep -q "not found: q,k,v" "$T/out" && [ "$v" != error ] && [ "$v" != fail ] &&
    ok "phi3: fused projections named as not found, verdict $v" || { fail "phi3: $v"; head -20 "$T/out"; }

# the planted op fault: named exactly, alone; none without it
for spec in "gemma2-tiny ffn_up 1" "llama-tiny attn_norm 0" "qwen3-tiny k_norm 1" "llama-tiny head 3"; do
    set -- $spec
    "$KVV" compare "$T/$1.gguf" --engine ref --against "$EX" --engine-opt "fault=op:$2:L$3" --ops \
        --json "$T/x.json" >"$T/out" 2>&1
    got=$(first "$T/x.json")
    case "$got" in
        "fail $2 $3 1 ") ok "planted $2 L$3 on $1: named exactly, alone";;
        *) fail "planted $2 L$3 on $1: '$got'"; head -20 "$T/out";;
    esac
done
"$KVV" compare "$T/llama-tiny.gguf" --engine ref --against "$EX" --ops --json "$T/x.json" >"$T/out" 2>&1
[ "$(first "$T/x.json")" = "pass - - 0 " ] && ok "example without a fault: none beyond" ||
    fail "example without a fault: $(first "$T/x.json")"

# ref vs cpu: none beyond budget, every architecture, both modes
for shape in gemma2-tiny llama-tiny qwen3-tiny phi3-tiny; do
    for mode in invariant fast; do
        "$KVV" compare "$T/$shape.gguf" --against cpu --mode $mode --ops --json "$T/c.json" >"$T/out" 2>&1
        got=$(first "$T/c.json")
        [ "$got" = "pass - - 0 " ] && ok "ref vs cpu $mode on $shape: none beyond" ||
            { fail "ref vs cpu $mode on $shape: '$got'"; head -20 "$T/out"; }
    done
done

# no op taps: unsupported; a malformed fault: exit 2 naming it
"$KVV" compare "$T/llama-tiny.gguf" --against "$EX" --engine-opt without=op-taps --ops --json "$T/u.json" >"$T/out" 2>&1
jq -e '.checks[] | select(.name=="ops") | select(.verdict=="skipped" and .unsupported == true)' "$T/u.json" >/dev/null &&
    ok "without op taps: skipped, unsupported" || { fail "without op taps"; jq '.checks[1]' "$T/u.json" | head; }
"$KVV" compare "$T/llama-tiny.gguf" --against "$EX" --engine-opt fault=op:nope:L1 --ops >"$T/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "fault=op:nope:L1" "$T/out" && ok "malformed fault: exit 2, named" ||
    { fail "malformed fault: exit $rc"; cat "$T/out"; }

# the HTML report draws the layer x op heat map
"$KVV" report "$T/g.json" --html "$T/g.html" >/dev/null 2>&1 &&
    grep -q 'ops-heat' "$T/g.html" && ok "HTML: heat map" || fail "HTML: no ops heat map"

[ $fails -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "all ok"
