#!/bin/sh
# kvverify evict / memory / latency on a synthetic model (no ../shared
# needed) and, when ../shared is there, stories260K: tables printed, CSV and
# JSON written, KV-Direct bit-equal (exit 0), bad options exit 2, and the
# Gemma 3-4B arithmetic of `memory --shape`; the header first, --force-fail
# exit 1 on each command, exit 77 when nothing was verified, prompt sets.
. "$(dirname "$0")/lib.sh"
SHARED=${KVV_SHARED:-../shared}
T=${TMPDIR:-/tmp}/kvv-test-policies.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT

$KVV synth --arch qwen3 -o "$T/m.gguf" >/dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
M="$T/m.gguf"

# evict: every policy at two budgets, both tables, CSV + JSON.
if expect 0 "evict on a synthetic qwen3" $KVV evict "$M" --random 40 -n 8 --budgets 8,16 \
        --csv "$T/e.csv" --json "$T/e.json"; then
    grep -q "At equal total bytes" "$T/out" || fail "evict: no equal-bytes table"
    for p in window streaming streaming-reindex h2o tova snapkv pyramidkv knorm quest kvdirect-layer kvdirect-token; do
        grep -q "^  $p " "$T/out" || fail "evict: no row for $p"
    done
    head -1 "$T/e.csv" | grep -q "^table,policy,budget" || fail "evict: CSV header"
    [ "$(grep -c '^by_budget,' "$T/e.csv")" -eq 22 ] || fail "evict: CSV by_budget rows"
    grep -q '"bit_equal": true' "$T/e.json" || fail "evict: JSON lacks KV-Direct rows"
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/e.json" || fail "evict: JSON parse"
fi
expect 2 "evict: unknown policy" $KVV evict "$M" --policies window,bogus
expect 2 "evict: bad budget" $KVV evict "$M" --budgets 0,8
expect 2 "evict: missing model" $KVV evict

# memory: a short conversation; arithmetic for gemma3-4b.
if expect 0 "memory on a synthetic qwen3" $KVV memory "$M" --turns 4 --gen 3; then
    grep -q "generated tokens identical to the full cache: layer mode yes, token mode yes" "$T/out" ||
        fail "memory: KV-Direct conversation differs"
fi
if expect 0 "memory --shape gemma3-4b" $KVV memory --shape gemma3-4b; then
    grep -q "136.0 KiB" "$T/out" || fail "memory --shape: 136 KiB per token"
    grep -q "5.0 KiB, 27.2x smaller" "$T/out" || fail "memory --shape: 5 KiB residual"
    grep -q "103 MB of full cache is 740 tokens" "$T/out" || fail "memory --shape: 103 MB"
    grep -q "live for 285 tokens" "$T/out" || fail "memory --shape: 42 MB reproduction"
fi
expect 2 "memory: unknown shape" $KVV memory --shape nope

# latency: two batch sizes, one repeat.
if expect 0 "latency on a synthetic qwen3" $KVV latency "$M" --batches 1,8 --repeats 1; then
    grep -q "roofline: stream read" "$T/out" || fail "latency: roofline line"
fi
expect 2 "latency: bad batch" $KVV latency "$M" --batches 0

# Header first: model, engine, prompt come before the tables (issue 20).
for cmd in "evict $M --random 20 -n 4 --budgets 8 --policies window,kvdirect-layer" \
           "memory $M --turns 2 --gen 2" "latency $M --batches 1 --repeats 1"; do
    # shellcheck disable=SC2086
    $KVV $cmd >"$T/out" 2>&1
    head -1 "$T/out" | grep -q '^model ' || fail "${cmd%% *}: header not first"
done

# --force-fail turns every command that lists it red (exit 1).
expect 1 "evict --force-fail" $KVV evict "$M" --random 20 -n 4 --budgets 8 \
    --policies window,kvdirect-layer --force-fail
expect 1 "evict --force-fail, kvdirect-token only" $KVV evict "$M" --random 20 -n 4 --budgets 8 \
    --policies kvdirect-token --force-fail
expect 1 "memory --force-fail" $KVV memory "$M" --turns 2 --gen 2 --force-fail
expect 1 "latency --force-fail" $KVV latency "$M" --batches 1,4 --repeats 1 --force-fail
expect 2 "memory --shape --force-fail (arithmetic verifies nothing)" \
    $KVV memory --shape gemma3-4b --force-fail

# Nothing verified is not a pass (exit 77, with the reason).
if expect 77 "evict without a KV-Direct policy" $KVV evict "$M" --random 20 -n 4 --budgets 8 \
        --policies window; then
    grep -q "nothing verified" "$T/out" || fail "evict 77: no reason given"
fi
expect 77 "evict: every budget holds the context" $KVV evict "$M" --random 20 -n 4 \
    --budgets 1000 --policies window,kvdirect-layer
expect 77 "memory: the budget holds the conversation" $KVV memory "$M" --turns 2 --gen 2 \
    --budget 100000

# A prompt set from a file: per-prompt rows and the aggregates in the JSON.
printf 'Once upon a time there was a cat.\n\nThe dog ran to the big park.\r\nA bird sang.\n' \
    >"$T/prompts.txt"
if expect 0 "evict --prompts FILE" $KVV evict "$M" --prompts "$T/prompts.txt" -n 4 \
        --budgets 4,8 --policies window,kvdirect-layer --json "$T/p.json"; then
    grep -q "^prompts 3 prompts from the file" "$T/out" || fail "evict --prompts: prompts line"
    python3 - "$T/p.json" <<'PY' || fail "evict --prompts: JSON rows"
import json, sys
d = json.load(open(sys.argv[1]))["checks"][0]["details"]
assert d["n_prompts"] == 3 and [p["name"] for p in d["prompts"]] == ["line 1", "line 3", "line 4"]
# window on the figures engine for every prompt, KV-Direct on the engine
# under test for the first (--verify-prompts 1)
assert len(d["by_budget"]) == 2 * 3 + 2 * 1, len(d["by_budget"])
assert {r["engine"] for r in d["by_budget"] if r["policy"] == "window"} == {"figures"}
assert {r["engine"] for r in d["by_budget"] if r["policy"] != "window"} == {"under_test"}
assert len(d["by_budget_summary"]) == 4
assert all(b["bytes"] == b["tokens"] * d["kv_bytes_per_token"] for b in d["budgets"])
s = d["by_budget_summary"][0]
rows = [r for r in d["by_budget"] if r["policy"] == s["policy"] and r["budget"] == s["budget"]]
m = [r["greedy_match"] for r in rows]
assert abs(s["greedy_match"]["mean"] - sum(m) / 3) < 1e-12
assert s["greedy_match"]["min"] == min(m) and s["greedy_match"]["max"] == max(m)
assert d["kvdirect_verified"]["runs"] and d["kvdirect_verified"]["control"]["bit_equal"] is False
PY
fi
expect 2 "evict --prompts with -p" $KVV evict "$M" --prompts "$T/prompts.txt" -p hi
expect 2 "evict --prompts missing file" $KVV evict "$M" --prompts "$T/nope.txt"
: >"$T/empty.txt"
expect 2 "evict --prompts empty file" $KVV evict "$M" --prompts "$T/empty.txt"
expect 2 "evict --figures-engine bogus" $KVV evict "$M" --figures-engine gpu

# stories260K: over the built-in prompt set, KV-Direct keeps 100% on every
# prompt at a budget where window falls away.
S="$SHARED/models/stories260K-f32.gguf"
if [ -f "$S" ]; then
    if expect 0 "evict on stories260K, 8 prompts" $KVV evict "$S" -n 16 --budgets 24 \
            --policies window,h2o,kvdirect-layer,kvdirect-token --no-equal-bytes \
            --verify-prompts 2 --json "$T/s.json"; then
        grep -E "^  kvdirect-(layer|token) +24 +[0-9]+ +100.0% \[100.0, 100.0\] +16.0 \[16, 16\] .* 2/2$" \
            "$T/out" | wc -l | grep -q 2 || fail "stories260K: KV-Direct rows not 100% / 2 of 2"
        grep -E "^  window +24 .* 0/8$" "$T/out" >/dev/null ||
            fail "stories260K: window bit-equal somewhere at budget 24"
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["checks"][0]["details"]; assert len(d["by_budget"]) == 2 * 8 + 2 * 2 and d["n_prompts"] == 8' \
            "$T/s.json" || fail "stories260K: JSON per-prompt rows"
    fi
else
    echo "SKIP: $S not found (the stories260K case needs ../shared)"
fi

[ "$fails" -eq 0 ] || exit 1
exit 0
