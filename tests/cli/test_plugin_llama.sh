#!/bin/sh
# test_plugin_llama.sh — `--engine llama.cpp` through the kvverify command,
# on the CPU and on Vulkan (Mesa's lavapipe), on every machine: llama.cpp's
# libraries and lavapipe come from scripts/install-deps.sh, and a missing
# piece fails naming it (no skip).
#
# Asserted (properties of the adapter, which hold whatever llama.cpp's
# kernels do): the kv hook's bits are llama.cpp's state read-back (for a
# split sliding-window cache, the cache tensors); K/V recomputed with the
# prefill's batch shape are the cached bits; the report names llama.cpp's
# version, CPU variant, device, flash attention and micro-batch; patching a
# whole layer is exact; every check of the audit runs to a verdict (0 or 1,
# never an error), kvdirect included; a CUDA device that is not there
# exits 77. Printed, not asserted: llama.cpp's own
# figures (1-token recompute, micro-batch and thread invariance, ref vs
# llama.cpp) — plugins/llama.cpp/README.md records them.
. "$(dirname "$0")/lib.sh"
KVV=${KVV:-./kvverify}
O=${O:-build}
T="$O/tmp/test_plugin_llama.$$"
mkdir -p "$T"
trap 'rm -rf "$T"' EXIT INT TERM
if [ ! -r "$O/plugins/llama.cpp.so" ] || [ ! -d deps/llama.cpp/linux-x64 ] ||
   [ ! -d deps/llama.cpp/linux-x64-vulkan ]; then
    echo "FAIL: llama.cpp plugin or libraries missing ($O/plugins/llama.cpp.so, deps/llama.cpp/): run scripts/install-deps.sh, then make"
    exit 1
fi

S=${KVV_SHARED:-../shared}/models/stories260K-f32.gguf
M="$T/llama.gguf"
"$KVV" synth --shape llama-tiny --seed 3 -o "$M" >/dev/null || { echo "FAIL: synth"; exit 1; }
if [ -r "$S" ]; then CPU_M=$S; else echo "SKIP: $S not found (synthetic model only)"; CPU_M=$M; fi

# rows RESULT_JSON SUFFIX: "differing/compared max-ulp" summed over layer rows ending in SUFFIX
rows() {
    jq -r --arg w "$2" '[.checks[0].layers[]? | select(.what | endswith($w))]
        | "\(map(.differing) | add // -1)/\(map(.compared) | add // 0) max-ulp \(map(.max_ulp) | max // 0)"' "$1"
}

# kv_adapter LABEL ARGS...: the kv check's adapter properties
kv_adapter() {
    label=$1; shift
    "$KVV" kv "$@" --engine llama.cpp --json "$T/kv.json" -q >"$T/out" 2>&1
    rc=$?
    if [ $rc -gt 1 ]; then fail "$label: kv exit $rc"; sed 's/^/    /' "$T/out" | head -5; return; fi
    hook=$(rows "$T/kv.json" hook); all=$(rows "$T/kv.json" " all")
    case "$hook $all" in
        0/*" max-ulp 0 "0/*" max-ulp 0") ok "$label: hook = cache ($hook), same-shape recompute = cache ($all)";;
        *) fail "$label: hook vs cache $hook, recompute all $all";;
    esac
    echo "    llama.cpp: recompute 1 token $(rows "$T/kv.json" token-by-token), chunks $(rows "$T/kv.json" "chunk=5"); $(jq -r '.checks[0].key_figure' "$T/kv.json")"
    jq -r '.checks[0].engine | "\(.version); \(.device); \(.variant); flash attention \(.flash_attn); n_ubatch \(.n_ubatch); \(.kernels)"' "$T/kv.json" | sed 's/^/    engine: /'
}

kv_adapter "cpu f32" "$CPU_M"
jq -e '.checks[0].engine | (.version | test("llama.cpp v0.5.0")) and (.variant | startswith("ggml-cpu-"))
       and (.device | startswith("CPU")) and .flash_attn != "" and .n_ubatch > 0' \
    "$T/kv.json" >/dev/null && ok "report names llama.cpp's version, CPU variant, device, flash attention, n_ubatch" ||
    fail "report lacks version/variant/device: $(jq -c '.checks[0].engine' "$T/kv.json")"
kv_adapter "cpu f16, ubatch 7" "$CPU_M" --cache-type f16 --ubatch 7
kv_adapter "cpu bf16, flash_attn=off, extra_bufts=0" "$M" --cache-type bf16 --engine-opt flash_attn=off --engine-opt extra_bufts=0

"$KVV" patch "$CPU_M" --engine llama.cpp -q >"$T/out" 2>&1 && ok "patch: exact ($(grep '^patch' "$T/out"))" ||
    { fail "patch on llama.cpp"; sed 's/^/    /' "$T/out" | head -5; }
for c in "greedy" "invariance --thread-counts 1" "compare --against llama.cpp"; do
    # shellcheck disable=SC2086
    "$KVV" $c "$CPU_M" --engine $( [ "${c%% *}" = compare ] && echo ref || echo llama.cpp) -q >"$T/out" 2>&1
    rc=$?
    if [ $rc -le 1 ]; then ok "$c: verdict (exit $rc): $(grep -E '^(greedy|invariance|compare) ' "$T/out")"
    else fail "$c: exit $rc"; sed 's/^/    /' "$T/out" | head -5; fi
done
"$KVV" vectors gen "$M" -o "$T/ref.kvv" --random 6 -n 4 >/dev/null 2>&1 || fail "vectors gen"
"$KVV" vectors check "$M" "$T/ref.kvv" --engine llama.cpp >"$T/out" 2>&1
rc=$?
[ $rc -le 1 ] && ok "vectors check through llama.cpp (exit $rc): $(head -c 150 "$T/out")" ||
    { fail "vectors check through llama.cpp: exit $rc"; head -5 "$T/out"; }

# the audit on llama.cpp: every check reaches a verdict (never an error);
# kvdirect runs its per-layer configurations (cache rows written back into
# llama.cpp) and lists the one llama.cpp cannot run; invariance compares
# micro-batches of 1, 2 and 7; the controls kvverify planted are named
"$KVV" audit "$CPU_M" --engine llama.cpp --random 12 -n 6 --json "$T/a.json" -q >"$T/out" 2>&1
rc=$?
if [ $rc -le 1 ] &&
   jq -e '[.checks[].verdict] | all(. == "pass" or . == "fail")' "$T/a.json" >/dev/null &&
   jq -e '.checks[] | select(.name == "kvdirect") | (.details.runs | length) == 2
          and (.details.unsupported_runs | map(.policy)) == ["kvdirect-token"]' "$T/a.json" >/dev/null &&
   jq -e '.checks[] | select(.name == "invariance") | .details.ubatch_sizes == [1, 2, 7]' "$T/a.json" >/dev/null &&
   jq -e '[.checks[].controls[].name] | any(test("^cached decode with host-residual"))
          and any(test("^host-kv-ulp"))' "$T/a.json" >/dev/null; then
    ok "audit (exit $rc): $(jq -r '[.checks[] | "\(.name) \(.verdict)"] | join(", ")' "$T/a.json")"
else
    fail "audit on llama.cpp (exit $rc)"; sed 's/^/    /' "$T/out" | head -12
fi

# evict and memory on llama.cpp: KV-Direct verified on it (kvdirect-layer:
# rows recomputed and written back into llama.cpp's cache), kvdirect-token
# listed as unsupported with the reason, never counted
"$KVV" evict "$CPU_M" --engine llama.cpp --random 12 -n 6 --budgets 6 --json "$T/e.json" -q >"$T/out" 2>&1
rc=$?
if [ $rc -le 1 ] && jq -e '.checks[0].details.unsupported_policies | has("kvdirect-token")' "$T/e.json" >/dev/null &&
   jq -e '[.checks[0].details.kvdirect_verified.runs[]? | select(.policy == "kvdirect-layer" and (.unsupported | not))] | length > 0' "$T/e.json" >/dev/null; then
    ok "evict (exit $rc): $(jq -r '.checks[0].key_figure' "$T/e.json")"
else
    fail "evict on llama.cpp (exit $rc)"; sed 's/^/    /' "$T/out" | head -8
fi
"$KVV" memory "$CPU_M" --engine llama.cpp --turns 2 --json "$T/m.json" -q >"$T/out" 2>&1
rc=$?
if [ $rc -le 1 ] && jq -e '.checks[0].details | (.kvdirect_token_unsupported | length > 0)
        and .kvdirect_layer_unsupported == "" and .recomputed_rows_layer > 0' "$T/m.json" >/dev/null; then
    ok "memory (exit $rc): $(jq -r '.checks[0].key_figure' "$T/m.json")"
else
    fail "memory on llama.cpp (exit $rc)"; sed 's/^/    /' "$T/out" | head -8
fi
# the console of a command that prints its header before the run (latency)
# still names what only the run learns: llama.cpp's version, variant, device
"$KVV" latency "$CPU_M" --engine llama.cpp --batches 1 --repeats 1 >"$T/out" 2>&1
rc=$?
if [ $rc -le 1 ] && grep -q '^engine  llama.cpp (native)' "$T/out" &&
   grep -q '^        llama.cpp v.*device CPU' "$T/out" && ! grep -q 'llama.cpp (invariant)' "$T/out"; then
    ok "latency (exit $rc) names $(grep -m1 '^        llama.cpp v' "$T/out" | cut -c9-60)..."
else
    fail "latency on llama.cpp: engine line"; sed 's/^/    /' "$T/out" | head -12
fi

# a split sliding-window cache (gemma2: 24 positions, window 16) reads back
# every stored row through the command too
G="$T/gemma2.gguf"
"$KVV" synth --arch gemma2 --seed 2 -o "$G" >/dev/null || fail "synth gemma2"
kv_adapter "gemma2 (split cache) f16" "$G" --cache-type f16 --random 24 --no-controls

# devices
"$KVV" kv "$M" --engine llama.cpp --device cuda -q >"$T/out" 2>&1
rc=$?
[ $rc -eq 77 ] && grep -q "no CUDA device" "$T/out" && ok "--device cuda without a GPU: exit 77, no CUDA device" ||
    { fail "--device cuda: exit $rc"; head -5 "$T/out"; }
start=$(date +%s)
kv_adapter "vulkan f16" "$M" --device vulkan --cache-type f16 --no-controls
jq -e '.checks[0].engine.device | startswith("Vulkan")' "$T/kv.json" >/dev/null &&
    ok "vulkan: the report names the Vulkan device ($(($(date +%s) - start))s)" || fail "vulkan device not named"

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "llama.cpp plugin: adapter properties hold on cpu and vulkan"
