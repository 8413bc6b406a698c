#!/bin/sh
# findings.sh — what llama.cpp does under kvverify's kv check, as a table
# (the numbers in plugins/llama.cpp/README.md come from this script):
#
#   sh plugins/llama.cpp/findings.sh [MODEL] [--vulkan] > findings.md
#
# For each configuration (cache dtype, micro-batch size, threads, engine
# options) it runs `kvverify kv MODEL --engine llama.cpp ... --no-controls`
# on a 32-token prompt and prints, over all layers: elements where the kv
# hook (the bits llama.cpp's graph wrote) differs from llama.cpp's own state
# read-back, and where K/V recomputed from the residuals differ from the
# cache, per recompute shape (one token at a time, all 32 at once, chunks of
# 5), with the largest ULP distance. Then the first logit of a 4-token prompt
# on the CPU and, with --vulkan, on Vulkan (Mesa's lavapipe here).
KVV=${KVV:-./kvverify}
M=${1:-${KVV_SHARED:-../shared}/models/stories260K-f32.gguf}
VULKAN=0
[ "${2:-}" = "--vulkan" ] && VULKAN=1
T=$(mktemp -d "${TMPDIR:-/tmp}/kvv-findings.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM

# sum differing / max ULP over the rows whose name contains $2
agg() {
    jq -r --arg w "$2" '[.checks[0].layers[]? | select(.what | endswith($w))]
        | "\(map(.differing) | add // 0)/\(map(.compared) | add // 0) (max \(map(.max_ulp) | max // 0))"' "$1"
}

row() { # LABEL ARGS...
    label=$1; shift
    "$KVV" kv "$M" --engine llama.cpp --no-controls --json "$T/r.json" -q "$@" >/dev/null 2>"$T/err"
    rc=$?
    if [ ! -s "$T/r.json" ] || [ $rc -gt 1 ]; then
        echo "| $label | error (exit $rc): $(head -c 120 "$T/err") | | | |"
        return
    fi
    echo "| $label | $(agg "$T/r.json" hook) | $(agg "$T/r.json" token-by-token) | $(agg "$T/r.json" " all") | $(agg "$T/r.json" chunk=5) |"
    rm -f "$T/r.json"
}

"$KVV" kv "$M" --engine llama.cpp --no-controls --json "$T/d.json" -q >/dev/null 2>&1
echo "model: ${M##*/}; engine: $(jq -r '.checks[0].engine.kernels' "$T/d.json")"
echo
echo "| configuration | hook vs cache | recompute 1 token | recompute all | recompute chunks of 5 |"
echo "|---|---|---|---|---|"
for ct in f32 f16; do
    row "cpu $ct, ubatch 32 (one), 1 thread" --cache-type $ct
    row "cpu $ct, ubatch 1, 1 thread" --cache-type $ct --ubatch 1
    row "cpu $ct, ubatch 7, 1 thread" --cache-type $ct --ubatch 7
    row "cpu $ct, ubatch 32, 2 threads" --cache-type $ct --threads 2
    row "cpu $ct, ubatch 1, 2 threads" --cache-type $ct --ubatch 1 --threads 2
    row "cpu $ct, extra_bufts=0 flash_attn=off" --cache-type $ct --engine-opt extra_bufts=0 --engine-opt flash_attn=off
    row "cpu $ct, flash_attn=on" --cache-type $ct --engine-opt flash_attn=on
done
if [ $VULKAN -eq 1 ]; then
    for ct in f32 f16; do
        row "vulkan $ct, ubatch 32" --cache-type $ct --device vulkan
    done
fi
echo
first() { "$KVV" run "$M" --tokens 1,403,407,300 --teacher --json --all-logits "$@" 2>/dev/null |
          jq -r '"logit[0] \(.logits_all[3][0]), top-1 token \(.steps[3].top[0][0]) logit \(.steps[3].top[0][1])"'; }
echo "logits after the prompt 1,403,407,300 (last position):"
echo "- reference engine: $(first)"
echo "- llama.cpp cpu:    $(first --engine llama.cpp)"
[ $VULKAN -eq 1 ] && echo "- llama.cpp vulkan: $(first --engine llama.cpp --device vulkan)"
exit 0
