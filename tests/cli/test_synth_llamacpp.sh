#!/bin/sh
# Every synthetic architecture loads in llama.cpp: synthesize each
# architecture in each type, load it with the llama.cpp that the npm package
# node-llama-cpp carries (CPU build, prebuilt), evaluate 4 prompt tokens and
# generate 8 greedily. Needs node and NODE_LLAMA_CPP_DIR = a folder where
# `npm install node-llama-cpp` was run; skips (77) otherwise.
KVV=${KVV:-./kvverify}
DIR=${NODE_LLAMA_CPP_DIR:-}
if [ -z "$DIR" ] || [ ! -f "$DIR/node_modules/node-llama-cpp/package.json" ]; then
    echo "SKIP: node-llama-cpp not found (set NODE_LLAMA_CPP_DIR to a folder with node_modules/node-llama-cpp)"
    exit 77
fi
if ! command -v node >/dev/null 2>&1; then
    echo "SKIP: node not found"
    exit 77
fi
T=${TMPDIR:-/tmp}/kvv-test-synth-llamacpp.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT

cat >"$T/load.mjs" <<'JS'
// node load.mjs NLC_DIR MODEL...: one line per model, "ok" or "FAIL".
import {pathToFileURL} from "node:url";
const nlc = await import(pathToFileURL(process.argv[2] + "/node_modules/node-llama-cpp/dist/index.js").href);
const llama = await nlc.getLlama({gpu: false, build: "never", logLevel: nlc.LlamaLogLevel.error});
let failed = 0;
for (const path of process.argv.slice(3)) {
    try {
        const model = await llama.loadModel({modelPath: path});
        const ctx = await model.createContext({contextSize: 128, threads: 1});
        const seq = ctx.getSequence();
        const out = [];
        for await (const tok of seq.evaluate([1, 98, 105, 339], {temperature: 0})) {
            out.push(tok);
            if (out.length >= 8) break;
        }
        console.log(`ok   ${path}: ${out.join(" ")}`);
        await ctx.dispose();
        await model.dispose();
    } catch (e) {
        failed++;
        console.log(`FAIL ${path}: ${String(e.message || e).split("\n")[0]}`);
    }
}
process.exit(failed ? 1 : 0);
JS

set -- 
for a in llama qwen2 qwen3 gemma2 gemma3 phi3; do
    for t in f32 f16 bf16 q8_0 q4_0; do
        $KVV synth --arch "$a" --type "$t" -o "$T/$a-$t.gguf" >/dev/null || { echo "FAIL: synth $a $t"; exit 1; }
        set -- "$@" "$T/$a-$t.gguf"
    done
done
$KVV synth --shape llama3-tiny -o "$T/llama3-rope.gguf" >/dev/null || { echo "FAIL: synth llama3-tiny"; exit 1; }
set -- "$@" "$T/llama3-rope.gguf"
node "$T/load.mjs" "$DIR" "$@" >"$T/log" 2>&1
rc=$?
cat "$T/log"
n_ok=$(grep -c '^ok ' "$T/log")
if [ $rc -ne 0 ] || [ "$n_ok" -ne $# ]; then
    echo "FAIL: $n_ok of $# synthetic models loaded in llama.cpp"
    exit 1
fi
echo "all $# synthetic models load and generate in llama.cpp (node-llama-cpp $(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$DIR/node_modules/node-llama-cpp/package.json" | head -1))"
