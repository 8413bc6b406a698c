#!/bin/sh
# test_serve.sh — `kvverify serve URL --model F.gguf` against the real
# llama-server (built by scripts/install-deps.sh into
# deps/llama.cpp/build/bin/; missing = FAIL naming the step) serving
# stories260K on 127.0.0.1 with 4 slots and with 1 (continuous batching
# on), and against tests/cli/serve_peer.py playing a misbehaving server:
# unreachable, reset, HTTP 4xx/5xx, not JSON, no logprobs, a hang, a server
# that dies mid-run, another model. Every fault: exit 2, a message naming
# the request, never a pass, a whole JSON report. Nothing else on the network.
KVV=${KVV:-./kvverify}
O=${O:-build}
T="$O/tmp/test_serve.$$"
mkdir -p "$T"
T=$(cd "$T" && pwd)
SERVER=${KVV_LLAMA_BUILD_DIR:-deps/llama.cpp/build}/bin/llama-server
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

command -v python3 >/dev/null || { echo "FAIL: python3 missing: run scripts/install-deps.sh"; exit 1; }
S=${KVV_SHARED:-../shared}/models/stories260K-f32.gguf
if [ ! -r "$S" ]; then
    echo "SKIP: $S not found (../shared holds the models)"
    exit 77
fi

# free_port: a port nothing listens on now
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# start_server NAME ARGS...: llama-server on a free port; sets URL
start_server() {
    name=$1; shift
    port=$(free_port)
    "$SERVER" -m "$S" --host 127.0.0.1 --port "$port" -c 2048 -cb -t 2 "$@" \
        >"$T/$name.log" 2>&1 &
    PIDS="$PIDS $!"
    URL=http://127.0.0.1:$port
    i=0
    while [ $i -lt 300 ]; do
        if python3 -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1]+"/health", timeout=1)' "$URL" 2>/dev/null; then
            return 0
        fi
        sleep 0.2; i=$((i + 1))
    done
    echo "FAIL: llama-server ($name) did not come up in 60 s:"; tail -n 20 "$T/$name.log"
    exit 1
}
# start_peer NAME MODE [ARGS...]: serve_peer.py on a free port; sets PEER
start_peer() {
    name=$1; mode=$2; shift 2
    rm -f "$T/$name.port"
    python3 tests/cli/serve_peer.py --mode "$mode" --port-file "$T/$name.port" "$@" \
        >"$T/$name.peer.log" 2>&1 &
    PIDS="$PIDS $!"
    i=0
    while [ ! -s "$T/$name.port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    [ -s "$T/$name.port" ] || { echo "FAIL: serve_peer.py $mode did not start"; cat "$T/$name.peer.log"; exit 1; }
    PEER=http://127.0.0.1:$(cat "$T/$name.port")
}
# verdict FILE CHECK
verdict() { jq -r --arg c "$2" '.checks[] | select(.name == $c) | .verdict' "$1"; }
# no_pass FILE: the report parses and no check passed
no_pass() { jq -e '[.checks[].verdict] | index("pass") == null' "$1" >/dev/null 2>&1; }

# ---- usage and an unreachable URL: exit 2 at once, naming it
"$KVV" serve http://127.0.0.1:1 >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--model" "$T/e" && ok "no --model: exit 2" || fail "no --model: exit $rc: $(cat "$T/e")"
"$KVV" serve http://127.0.0.1:1 --model "$S" --api grpc >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--api" "$T/e" && ok "--api grpc: exit 2" || fail "--api grpc: exit $rc"
"$KVV" serve ftp://127.0.0.1:1 --model "$S" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q "ftp://" "$T/e" && ok "ftp URL: exit 2 naming it" || fail "ftp URL: exit $rc: $(cat "$T/e")"
t0=$(date +%s)
"$KVV" serve http://127.0.0.1:1 --model "$S" --json "$T/u.json" >"$T/o" 2>"$T/e"; rc=$?
t1=$(date +%s)
if [ $rc -eq 2 ] && grep -q "http://127.0.0.1:1/v1/models" "$T/e" && [ $((t1 - t0)) -le 5 ] && [ ! -e "$T/u.json" ]; then
    ok "unreachable URL: exit 2 in $((t1 - t0)) s naming it, no report: $(cat "$T/e")"
else
    fail "unreachable URL: exit $rc after $((t1 - t0)) s: $(cat "$T/e")"
fi

# ---- the misbehaving peer: every fault exit 2, the request named, no pass
for mode in reset http500 http404 notjson nologprobs hang; do
    start_peer "$mode" "$mode"
    "$KVV" serve "$PEER" --model "$S" --timeout 2 --json "$T/$mode.json" >"$T/o" 2>"$T/e"; rc=$?
    if [ $rc -eq 2 ] && grep -q "POST $PEER/completion (serve-model: first step of the prompt)" "$T/e" &&
       no_pass "$T/$mode.json"; then
        ok "$mode: exit 2, $(head -n 1 "$T/e" | cut -c1-160)"
    else
        fail "$mode: exit $rc (want 2, the request named, no pass): $(head -n 2 "$T/e")"
    fi
done

# ---- a server that is the reference (kvverify run behind HTTP): every
# check passes but the prefix one, which has no cache to exercise
start_peer ref ref --model "$S" --kvverify "$KVV"
"$KVV" serve "$PEER" --model "$S" --parallel 2 --rounds 1 --repeats 2 -n 8 --json "$T/ref.json" >"$T/o" 2>"$T/e"; rc=$?
if [ $rc -eq 0 ] && [ "$(jq -r '[.checks[].verdict] | join(" ")' "$T/ref.json")" = "pass pass pass skipped pass" ]; then
    ok "the reference behind HTTP: exit 0, $(jq -r '.checks[4].key_figure' "$T/ref.json")"
else
    fail "the reference behind HTTP: exit $rc: $(jq -c '[.checks[] | [.name, .verdict, .key_figure]]' "$T/ref.json" 2>/dev/null) $(cat "$T/e")"
fi

# ---- a server that dies mid-run: the request named, exit 2, no pass after it
start_peer die ref --model "$S" --kvverify "$KVV" --die-after 3
"$KVV" serve "$PEER" --model "$S" --json "$T/die.json" >/dev/null 2>"$T/e"; rc=$?
if [ $rc -eq 2 ] && grep -q "serve-repeat request 3 of 4" "$T/e" &&
   [ "$(verdict "$T/die.json" serve-repeat)" = error ] && [ "$(verdict "$T/die.json" serve-reference)" = error ]; then
    ok "the server dies mid-run: exit 2, $(grep -m1 "request 3 of 4" "$T/e" | cut -c1-150)"
else
    fail "the server dies mid-run: exit $rc: $(cat "$T/e")"
fi

if [ ! -x "$SERVER" ]; then
    fail "$SERVER missing: run scripts/install-deps.sh (it builds llama-server with scripts/build-llama-tools.sh)"
    echo "test_serve: $fails failed"
    exit 1
fi

# ---- the real llama-server, 4 slots
start_server np4 -np 4
SRV4=$URL
"$KVV" serve "$SRV4" --model "$S" --json "$T/s4.json" --junit "$T/s4.xml" --html "$T/s4.html" >"$T/s4.out" 2>"$T/s4.err"; rc=$?
cat "$T/s4.out"
if [ $rc -eq 0 ] || [ $rc -eq 1 ]; then
    ok "llama-server -np 4: exit $rc"
else
    fail "llama-server -np 4: exit $rc: $(cat "$T/s4.err")"
fi
for c in serve-model serve-repeat serve-concurrent serve-prefix serve-reference; do
    v=$(verdict "$T/s4.json" $c)
    case $v in pass|fail) ok "-np 4 $c: $v" ;; *) fail "-np 4 $c: verdict '$v' (want pass or fail)" ;; esac
done
[ "$(verdict "$T/s4.json" serve-model)" = pass ] || fail "-np 4: serve-model does not pass on the right model"
[ "$(verdict "$T/s4.json" serve-repeat)" = pass ] || fail "-np 4: serve-repeat does not pass (one request at a time)"
jq -e '[.checks[].controls[]?.detected] | all and length >= 5' "$T/s4.json" >/dev/null &&
    ok "-np 4: every control detected" || fail "-np 4: a control missed"
jq -e '.checks[] | select(.name == "serve-concurrent") | .details.modes.single.distinct >= 1 and .details.modes.mixed.rounds >= 1 and .details.others == 3' "$T/s4.json" >/dev/null &&
    ok "-np 4: concurrent per mode: $(jq -c '.checks[] | select(.name == "serve-concurrent") | .details.modes' "$T/s4.json")" ||
    fail "-np 4: concurrent figures missing"
jq -e '.checks[] | select(.name == "serve-prefix") | .details.cases[1].tokens_cached > 0' "$T/s4.json" >/dev/null &&
    ok "-np 4: prefix exercised the cache: $(jq -c '[.checks[] | select(.name == "serve-prefix") | .details.cases[].tokens_cached]' "$T/s4.json")" ||
    fail "-np 4: the prompt cache was not exercised"
xmllint --noout "$T/s4.xml" 2>/dev/null && grep -q "serve-reference" "$T/s4.xml" && ok "-np 4: JUnit" || fail "-np 4: JUnit"
grep -q "serve-concurrent" "$T/s4.html" && ok "-np 4: HTML" || fail "-np 4: HTML"

# the reference check agrees with compare on where greedy parts (none or a step)
div=$(jq -r '.checks[] | select(.name == "serve-reference") | .details.first_divergence' "$T/s4.json")
ok "serve-reference first divergence: $div ($(jq -r '.checks[] | select(.name == "serve-reference") | .key_figure' "$T/s4.json"))"

# the OpenAI-compatible endpoint of the same server
"$KVV" serve "$SRV4" --model "$S" --api openai --checks serve-repeat --json "$T/oa.json" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 0 ] && [ "$(verdict "$T/oa.json" serve-model)" = pass ] && ok "--api openai (/v1/completions): pass" ||
    fail "--api openai: exit $rc: $(cat "$T/e")"
# the legacy OpenAI logprobs form (vLLM's token_id:N), through the peer
start_peer legacy legacy --upstream "$SRV4"
"$KVV" serve "$PEER" --model "$S" --api openai --checks serve-repeat --json "$T/lg.json" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 0 ] && [ "$(verdict "$T/lg.json" serve-repeat)" = pass ] && ok "legacy OpenAI logprobs: pass" ||
    fail "legacy OpenAI logprobs: exit $rc: $(cat "$T/e")"

# --force-fail: every check that runs must FAIL
"$KVV" serve "$SRV4" --model "$S" --force-fail --json "$T/ff.json" >/dev/null 2>&1; rc=$?
[ $rc -eq 1 ] && jq -e '[.checks[].verdict] | all(. == "fail" or . == "skipped")' "$T/ff.json" >/dev/null &&
    ok "--force-fail: exit 1, no pass" || fail "--force-fail: exit $rc: $(jq -c '[.checks[].verdict]' "$T/ff.json")"

# ---- a wrong model is caught first
"$KVV" synth --shape llama-tiny --vocab 512 --seed 5 -o "$T/other.gguf" >/dev/null || fail "synth"
"$KVV" serve "$SRV4" --model "$T/other.gguf" --json "$T/wm.json" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 1 ] && [ "$(verdict "$T/wm.json" serve-model)" = fail ] && [ "$(verdict "$T/wm.json" serve-repeat)" = skipped ] &&
    ok "another model, same vocabulary size: serve-model fails, the rest skipped" ||
    fail "another model: exit $rc $(jq -c '[.checks[] | [.name, .verdict]]' "$T/wm.json" 2>/dev/null)"
L=${KVV_SHARED:-../shared}/models/llama-2-tiny-random.gguf
"$KVV" serve "$SRV4" --model "$L" --json "$T/wv.json" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 1 ] && jq -r '.checks[0].key_figure' "$T/wv.json" | grep -q "vocabulary" &&
    ok "another vocabulary: $(jq -r '.checks[0].key_figure' "$T/wv.json")" || fail "another vocabulary: exit $rc"
start_peer shift shiftids --upstream "$SRV4"
"$KVV" serve "$PEER" --model "$S" --json "$T/sh.json" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 1 ] && [ "$(verdict "$T/sh.json" serve-model)" = fail ] && ok "ids moved by one: serve-model fails" ||
    fail "ids moved by one: exit $rc"

# ---- 1 slot: concurrent requests are queued, and the report says so
start_server np1 -np 1
"$KVV" serve "$URL" --model "$S" --parallel 4 --checks serve-concurrent --json "$T/s1.json" >"$T/s1.out" 2>&1; rc=$?
cat "$T/s1.out"
if { [ $rc -eq 0 ] || [ $rc -eq 1 ]; } && jq -r '.checks[] | select(.name == "serve-concurrent") | .key_figure' "$T/s1.json" | grep -q "1 slot"; then
    ok "llama-server -np 1: the report says the requests were queued"
else
    fail "llama-server -np 1: exit $rc, no word of the single slot"
fi

echo "test_serve: $fails failed"
[ $fails -eq 0 ]
