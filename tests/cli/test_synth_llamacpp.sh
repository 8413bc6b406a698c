#!/bin/sh
# Every synthetic architecture loads in llama.cpp: synthesize each
# architecture in each type (the K types and mixes as below), load it with llama.cpp through the llama.cpp
# plugin (node-llama-cpp's prebuilt CPU libraries, fetched into
# deps/llama.cpp/ by scripts/install-deps.sh), evaluate 4 prompt tokens and
# generate 8 greedily. A missing llama.cpp is a failure naming the install
# step, not a skip. Also prints whether llama.cpp's 8 tokens equal the
# reference engine's (information: llama.cpp is a tolerance peer, not a bit
# reference).
KVV=${KVV:-./kvverify}
O=${O:-build}
T="$O/tmp/test_synth_llamacpp.$$"
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT INT TERM

if [ ! -r "$O/plugins/llama.cpp.so" ] || [ ! -d deps/llama.cpp/linux-x64 ]; then
    echo "FAIL: llama.cpp plugin or libraries missing ($O/plugins/llama.cpp.so, deps/llama.cpp/): run scripts/install-deps.sh, then make"
    exit 1
fi
n=0; failed=0; same=0
for a in llama qwen2 qwen3 gemma2 gemma3 phi3; do
    for t in f32 f16 bf16 q8_0 q4_0; do
        $KVV synth --arch "$a" --type "$t" -o "$T/$a-$t.gguf" >/dev/null || { echo "FAIL: synth $a $t"; exit 1; }
        set -- "$@" "$T/$a-$t.gguf"
    done
done
$KVV synth --shape llama3-tiny -o "$T/llama3-rope.gguf" >/dev/null || { echo "FAIL: synth llama3-tiny"; exit 1; }
set -- "$@" "$T/llama3-rope.gguf"
# the K types: on every architecture's tiny shape (64..128-wide rows, so
# llama-quantize's fallbacks: Q5_0, Q5_1, Q8_0, IQ4_NL) and on llama-k256,
# whose 256-wide rows take every K type itself
for a in llama qwen2 qwen3 gemma2 gemma3 phi3; do
    for t in q2_k q4_k_m; do
        $KVV synth --arch "$a" --type "$t" -o "$T/$a-$t.gguf" >/dev/null || { echo "FAIL: synth $a $t"; exit 1; }
        set -- "$@" "$T/$a-$t.gguf"
    done
done
for t in q2_k q3_k q4_k q5_k q6_k q4_k_m q5_k_m; do
    $KVV synth --shape llama-k256 --type "$t" -o "$T/k256-$t.gguf" >/dev/null || { echo "FAIL: synth llama-k256 $t"; exit 1; }
    set -- "$@" "$T/k256-$t.gguf"
done
for m in "$@"; do
    n=$((n + 1))
    if $KVV run "$m" --engine llama.cpp --tokens 1,98,105,339 -n 8 >"$T/out" 2>&1 &&
        got=$(sed -n 's/^generated: //p' "$T/out") && [ "$(echo "$got" | wc -w)" -eq 8 ]; then
        ref=$($KVV run "$m" --tokens 1,98,105,339 -n 8 2>/dev/null | sed -n 's/^generated: //p')
        [ "$got" = "$ref" ] && { same=$((same + 1)); note="= ref"; } || note="ref: $ref"
        echo "ok   ${m##*/}: $got ($note)"
    else
        failed=$((failed + 1))
        echo "FAIL ${m##*/}: $(head -3 "$T/out")"
    fi
done
if [ $failed -ne 0 ]; then
    echo "FAIL: $failed of $n synthetic models did not load and generate in llama.cpp"
    exit 1
fi
echo "all $n synthetic models load and generate in llama.cpp ($(sed -n 's/^stamp=//p' deps/llama.cpp/versions)); $same of $n generate the reference engine's 8 tokens"
