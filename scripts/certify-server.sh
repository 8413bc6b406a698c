#!/bin/sh
# certify-server.sh — the llama-server certificate of docs/serve.md:
# `kvverify serve` against llama-server (built by scripts/install-deps.sh)
# serving stories260K-f32 with 1 and with 4 slots (continuous batching on),
# requests with cache_prompt off and on, written as markdown with each
# check's verdict and figures, the machine named.
#
#   sh scripts/certify-server.sh [-o docs/serve-certificate.md] [-k]
#
# -k keeps the work folder (the JSON report of every run). Needs a built
# kvverify, llama-server (deps/llama.cpp/build/bin/, or KVV_LLAMA_BUILD_DIR)
# and ../shared/models/stories260K-f32.gguf (KVV_SHARED). About a minute on
# two cores.
set -u
KVV=${KVV:-./kvverify}
SHARED=${KVV_SHARED:-../shared}
SERVER=${KVV_LLAMA_BUILD_DIR:-deps/llama.cpp/build}/bin/llama-server
out=docs/serve-certificate.md
keep=0
while [ $# -gt 0 ]; do
    case $1 in
        -o) out=$2; shift 2;;
        -k) keep=1; shift;;
        -h|--help) sed -n '2,14p' "$0"; exit 0;;
        *) echo "certify-server: unknown option $1" >&2; exit 2;;
    esac
done
S=$SHARED/models/stories260K-f32.gguf
for need in "$KVV" "$SERVER"; do
    [ -x "$need" ] || { echo "certify-server: $need not built (scripts/install-deps.sh, make)" >&2; exit 2; }
done
[ -r "$S" ] || { echo "certify-server: $S not found" >&2; exit 2; }
command -v jq >/dev/null || { echo "certify-server: jq not found" >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/kvv-certify-server.XXXXXX")
PID=""
stop() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; PID=""; }
trap 'stop; [ $keep -eq 1 ] || rm -rf "$W"' EXIT
trap 'exit 1' INT TERM

for np in 1 4; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$SERVER" -m "$S" --host 127.0.0.1 --port "$port" -c 2048 -cb -np "$np" -t 2 >"$W/server-$np.log" 2>&1 &
    PID=$!
    i=0
    until python3 -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "http://127.0.0.1:$port/health" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 300 ] || { echo "certify-server: llama-server -np $np did not start" >&2; exit 1; }
        sleep 0.2
    done
    for cache in off on; do
        echo "certify-server: -np $np, cache_prompt $cache"
        "$KVV" serve "http://127.0.0.1:$port" --model "$S" --parallel 4 --rounds 8 \
            --cache-prompt $cache --json "$W/np$np-$cache.json" -q >/dev/null 2>"$W/np$np-$cache.err"
        echo "$?" >"$W/np$np-$cache.rc"
    done
    stop
done

cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n 1)
build=$(jq -r '.checks[0].details.server.build_info // "unknown"' "$W/np4-off.json")
{
    echo "# llama-server certificate (generated)"
    echo
    echo "Written by \`sh scripts/certify-server.sh\` on $(date -u +%Y-%m-%d): do not edit by hand."
    echo "Machine: $cpu, $(nproc) processors; llama-server $build (scripts/llama-cpp-pins.sh,"
    echo "CPU, Release) with \`-c 2048 -cb -t 2 -np N\`; stories260K-f32; \`kvverify serve URL"
    echo "--model stories260K-f32.gguf --parallel 4 --rounds 8 --cache-prompt off|on\`"
    echo "(a random prompt of the audit's size, 16 steps, top-5 logprobs; a step of -1 means none)."
    echo
    for np in 1 4; do
        for cache in off on; do
            f=$W/np$np-$cache.json
            echo "## $np slot$( [ $np -gt 1 ] && echo s), cache_prompt $cache (exit $(cat "$W/np$np-$cache.rc"))"
            echo
            echo "| check | verdict | figures |"
            echo "|---|---|---|"
            jq -r '.checks[] | "| \(.name) | \(.verdict) | \(.key_figure | gsub("\\|"; "/")) |"' "$f"
            echo
            jq -r '.checks[] | select(.name == "serve-concurrent" and .details.modes) | .details.modes | to_entries[] |
                "- concurrent \(.key): \(.value.differ) of \(.value.rounds) rounds differ from the request alone, \(.value.distinct) distinct, first step \(.value.first_step), tokens part at \(.value.first_token_step)"' "$f"
            jq -r '.checks[] | select(.name == "serve-prefix" and .details.cases) | .details.cases[] |
                "- prefix, \(.case): \(.tokens_cached) prompt tokens from the cache, first differing step \(.first_step)"' "$f"
            jq -r '.checks[] | select(.name == "serve-reference" and .details.max_delta_logprob) |
                "- reference: first divergence \(.details.first_divergence), max |d logprob| \(.details.max_delta_logprob)"' "$f"
            echo
        done
    done
} >"$out.tmp" && mv "$out.tmp" "$out"
echo "certify-server: wrote $out"
