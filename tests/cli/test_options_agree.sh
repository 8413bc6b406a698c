#!/bin/sh
# Options that were ignored or disagreed (issue 31 items 10-15): an option a
# command takes is used or refused (exit 2), never dropped; a report states
# what ran; one name per concept on every command. Tiny synth models only
# (each has a tokenizer), so nothing here skips.
. "$(dirname "$0")/lib.sh"
T=${TMPDIR:-/tmp}/kvv-test-options-agree.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT

# JSON check: file, python expression over d (the document)
js() { python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2], {"d": d})
if not ok:
    print("json:", json.dumps(d)[:600])
sys.exit(0 if ok else 1)
PY
}

$KVV synth --shape llama-tiny -o "$T/m.gguf" -q || { echo "FAIL: synth"; exit 1; }
M="$T/m.gguf"

# ---- item 10: memory --shape is arithmetic: it uses --budget and --cache-type
# and refuses what it cannot use (the conversation's, the engine's, the
# checks' options); the live run's --gen default is the one it runs
expect 0 "memory --shape" $KVV memory --shape gemma3-4b && cp "$T/out" "$T/shape0" || true
grep -q "KV-Direct with 256 live tokens" "$T/shape0" || fail "memory --shape: default budget 256"
grep -q "^per token, bf16: K+V 139264 B" "$T/shape0" || fail "memory --shape: bf16 by default"
expect 0 "memory --shape --budget 7" $KVV memory --shape gemma3-4b --budget 7 --json "$T/sh.json" &&
    grep -q "KV-Direct with 7 live tokens" "$T/out" && ! cmp -s "$T/out" "$T/shape0" ||
    fail "memory --shape --budget 7: the budget is not used"
js "$T/sh.json" 'd["budget"] == 7 and d["rows"][0]["kvdirect_token"] == 7 * 139264 + (512 - 7) * 5120' ||
    fail "memory --shape --budget 7: JSON"
expect 0 "memory --shape --cache-type f32" $KVV memory --shape gemma3-4b --cache-type f32 &&
    grep -q "^per token, f32: K+V 278528 B" "$T/out" || fail "memory --shape --cache-type f32: not used"
for opt in "--turns 3" "--gen 99" "--engine cpu" "--mode fast" "--threads 2" "--seed 2"            "--force-fail" "--no-controls" "--isolate" "--junit" "--html" "-q" "--isa generic"; do
    # shellcheck disable=SC2086
    expect 2 "memory --shape $opt" $KVV memory --shape gemma3-4b $opt &&
        grep -q "option ${opt%% *}: not used by memory --shape" "$T/err" ||
        fail "memory --shape $opt: not refused: $(cat "$T/err")"
done
expect 2 "memory MODEL --shape" $KVV memory "$M" --shape gemma3-4b || true
expect 2 "memory MODEL --paper-mb" $KVV memory "$M" --paper-mb 1,2 || true
# the live run: 20 default turns of built-in text on stories260K (512
# positions) decode as many tokens a turn as fit; the help and the run say so
$KVV memory --help | grep -q -- "--gen N .*default 16, or as many as the" ||
    fail "memory --help: --gen's default"
S=${KVV_SHARED:-../shared}/models/stories260K-f32.gguf
if [ -f "$S" ]; then
    expect 0 "memory stories260K" $KVV memory "$S" --json "$T/mem.json" || true
    grep -q "^conversation: 20 turns of built-in text, 5 tokens decoded per turn (not 16: the model's context of 512 positions holds no more)$" "$T/out" ||
        fail "memory live: the cut --gen not said: $(grep '^conversation' "$T/out")"
    js "$T/mem.json" 'd["workload"]["n_gen"] == 100' || fail "memory live: workload steps"
else
    echo "SKIP: $S not found (memory's default --gen on stories260K not checked)"
fi
expect 0 "memory live, --gen given" $KVV memory "$M" --turns 2 --gen 3 &&
    grep -q "^conversation: 2 turns of built-in text, 3 tokens decoded per turn$" "$T/out" ||
    fail "memory --gen 3: $(grep '^conversation' "$T/out")"

# ---- item 11: the cpu engine has no exact mode, as ref has no fast one:
# refused (exit 2) by every command that opens an engine, never run as
# invariant under the name exact
for c in audit kv patch greedy invariance latency "memory --turns 2" \
         "evict --policies window,kvdirect-layer --budgets 8 -n 4 --n-prompts 1"; do
    # shellcheck disable=SC2086
    expect 2 "$c --engine cpu --mode exact" $KVV $c "$M" --engine cpu --mode exact -q &&
        grep -q "engine cpu has no mode 'exact' (its modes: fast, invariant)" "$T/err" ||
        fail "$c --engine cpu --mode exact: not refused as the cpu engine's: $(cat "$T/err")"
    # shellcheck disable=SC2086
    expect 2 "$c --engine ref --mode fast" $KVV $c "$M" --engine ref --mode fast -q || true
done
expect 2 "compare --mode-a exact" $KVV compare "$M" --engine cpu --mode-a exact -q || true
expect 2 "compare --against cpu --mode exact" $KVV compare "$M" --against cpu --mode exact -q || true
expect 2 "run --engine cpu --mode exact" $KVV run "$M" --engine cpu --mode exact -p hi -n 2 || true
expect 2 "bench --mode exact" $KVV bench "$M" --mode exact --prompt 4 --gen 2 --repeats 1 || true
expect 2 "vectors gen --engine cpu --mode exact" \
    $KVV vectors gen "$M" -o "$T/x.kvv" --engine cpu --mode exact || true
[ -e "$T/x.kvv" ] && fail "vectors gen --mode exact wrote a vector"
expect 2 "numerics --engine cpu --mode exact" $KVV numerics "$M" --engine cpu --mode exact -q || true
expect 0 "kv --engine cpu --mode invariant" $KVV kv "$M" --engine cpu --mode invariant -q || true

# ---- item 12: one name per concept: the planted failure is --force-fail on
# every command that has one (vectors check's --perturb and numerics'
# --control are old names, taken with a note); every command with a verdict
# takes -q and --junit
for c in audit kv patch greedy invariance compare evict memory latency numerics "vectors check" suite; do
    # shellcheck disable=SC2086
    $KVV $c --help >"$T/h" 2>&1
    grep -q -- '^  -q, --quiet' "$T/h" || fail "$c --help: no -q"
    grep -q -- '^  --junit \[FILE|-\]' "$T/h" || fail "$c --help: no --junit"
    grep -Eq -- '^  --(perturb|control)\b' "$T/h" && fail "$c --help: the planted failure has another name"
    case $c in suite) ;; *) grep -q -- '^  --force-fail' "$T/h" || fail "$c --help: no --force-fail";; esac
done
$KVV vectors gen "$M" --random 6 -n 2 -o "$T/v.kvv" >/dev/null 2>&1 || fail "vectors gen"
expect 0 "vectors check -q --junit" $KVV vectors check "$M" "$T/v.kvv" -q --junit "$T/v.xml" &&
    grep -q '<testcase [^>]*name="vector"' "$T/v.xml" && ! grep -q '<failure' "$T/v.xml" ||
    fail "vectors check --junit: no passing testcase"
for ff in --force-fail --force-fail=weight --force-fail=resid:1:2; do
    expect 1 "vectors check $ff" $KVV vectors check "$M" "$T/v.kvv" $ff --junit "$T/vf.xml" &&
        grep -q 'negative control detected' "$T/out" && grep -q '<failure' "$T/vf.xml" ||
        fail "vectors check $ff: not planted, or the JUnit does not fail"
done
expect 1 "vectors check --perturb (old name)" $KVV vectors check "$M" "$T/v.kvv" --perturb weight &&
    grep -q 'note: --perturb is deprecated: use --force-fail=weight' "$T/err" ||
    fail "vectors check --perturb: no deprecation note"
expect 2 "vectors check --force-fail=bogus" $KVV vectors check "$M" "$T/v.kvv" --force-fail=bogus || true
NUM="numerics $M --engine ref --random 6 --samples 1 --math-samples 0 -q"
# shellcheck disable=SC2086
expect 0 "numerics --junit" $KVV $NUM --junit "$T/n.xml" --json "$T/n.json" &&
    grep -q 'control  planted +1 ULP measured as exactly 1 ULP on every value: detected' "$T/out" &&
    grep -q '<testcase [^>]*name="numerics"' "$T/n.xml" && ! grep -q '<failure' "$T/n.xml" ||
    fail "numerics: the control is not on by default, or no JUnit"
js "$T/n.json" 'd["verdict"] == "pass" and d["controls"][0]["detected"] and not d["force_fail"]' ||
    fail "numerics: JSON verdict"
# shellcheck disable=SC2086
expect 1 "numerics --force-fail" $KVV $NUM --force-fail --junit "$T/nf.xml" &&
    grep -q '^FAIL: 1 of [0-9]* rebuilt inputs differ from the forward pass; first: planted: ' "$T/out" &&
    grep -q '<failure' "$T/nf.xml" || fail "numerics --force-fail: not planted, or the JUnit does not fail"
# shellcheck disable=SC2086
expect 0 "numerics --no-controls" $KVV $NUM --no-controls &&
    grep -q 'control  off (--no-controls): the measurement itself is unproven' "$T/out" &&
    ! grep -q 'oracle+1ulp' "$T/out" || fail "numerics --no-controls: not said"
# shellcheck disable=SC2086
expect 0 "numerics --control (old name)" $KVV $NUM --control &&
    grep -q 'note: --control is deprecated' "$T/err" || fail "numerics --control: no note"

# ---- item 14: the workload's thread counts are those that ran, in every
# format: ref runs no thread variant (invariance's thread_counts is []), so
# it states the engine's one thread; the cpu engine compared 1 and 2
expect 0 "audit ref" $KVV audit "$M" --json "$T/a.json" --junit "$T/a.xml" --html "$T/a.html" || true
grep -q '^workload prompt .*, threads 1; ' "$T/out" ||
    fail "ref: console workload: $(grep '^workload' "$T/out")"
js "$T/a.json" 'd["workload"]["threads"] == [1] and [c for c in d["checks"] if c["name"] == "invariance"][0]["details"]["thread_counts"] == []' ||
    fail "ref: JSON workload threads is not what ran"
grep -q '<property name="workload" value="[^"]*, threads 1; ' "$T/a.xml" || fail "ref: JUnit workload"
grep -q '<dt>workload</dt><dd>[^<]*, threads 1; ' "$T/a.html" || fail "ref: HTML workload"
expect 0 "report a.json" $KVV report "$T/a.json" &&
    grep -q 'workload .*, threads 1; ' "$T/out" || fail "ref: kvverify report's workload"
expect 0 "invariance ref --threads 2" $KVV invariance "$M" --threads 2 -q &&
    grep -q ', threads 1; kernel' "$T/out" || fail "ref --threads 2: $(grep '^workload' "$T/out")"
expect 0 "invariance cpu" $KVV invariance "$M" --engine cpu --thread-counts 1,3 --json "$T/i.json" -q &&
    grep -q ', threads 1,3; kernel' "$T/out" || fail "cpu: $(grep '^workload' "$T/out")"
js "$T/i.json" 'd["workload"]["threads"] == [1, 3]' || fail "cpu: JSON threads"
printf '%s\n' "r model=m.gguf checks=invariance" "c model=m.gguf engine=cpu checks=invariance" >"$T/s.txt"
expect 0 "suite" $KVV suite "$T/s.txt" --json "$T/s.json" --junit "$T/s.xml" || true
grep -q '^workload r: .*, threads 1; kernel' "$T/out" || fail "suite ref: $(grep '^workload r' "$T/out")"
grep -q '^workload c: .*, threads 1,2; kernel' "$T/out" || fail "suite cpu: $(grep '^workload c' "$T/out")"
js "$T/s.json" '[r["workload"]["threads"] for r in d["results"]] == [[1], [1, 2]]' ||
    fail "suite: JSON workloads' threads"
grep -c 'workload prompt [^&]*, threads 1; kernel' "$T/s.xml" | grep -q '^1$' || fail "suite: JUnit workload"

# ---- item 15: evict never runs fewer prompts than asked; a policy over the
# byte budget is marked, not ranked, at equal bytes; greedy's key figure says
# "before divergence" only when a token diverged
expect 2 "evict --n-prompts 9" $KVV evict "$M" --n-prompts 9 -q &&
    grep -q "option --n-prompts: 9 prompts asked, the built-in texts are 8" "$T/err" ||
    fail "evict --n-prompts 9: $(cat "$T/err")"
expect 2 "evict --n-prompts with -p" $KVV evict "$M" --n-prompts 2 -p "once upon" -q || true
printf 'one prompt\nanother one\n' >"$T/p.txt"
expect 2 "evict --n-prompts with --prompts" $KVV evict "$M" --n-prompts 2 --prompts "$T/p.txt" -q || true
expect 0 "evict equal bytes" $KVV evict "$M" --policies window,snapkv,quest,kvdirect-token \
    --budgets 8 -n 8 --n-prompts 2 --json "$T/e.json" || true
sed -n '/^At equal total bytes/,/^$/p' "$T/out" >"$T/eq"
grep -q '^  quest  *-  *8  (over the byte budget: holds up to [0-9]* B against [0-9]* B on 2 of 2 prompts; not ranked)' "$T/eq" ||
    fail "evict: quest not marked over the byte budget: $(cat "$T/eq")"
grep -q '^  window  *8  *8  ' "$T/eq" || fail "evict: window (within its bytes) not ranked"
js "$T/e.json" '(
all((s["n_over_budget"] > 0) == (s["policy"] in ("snapkv", "quest")) for s in d["checks"][0]["details"]["equal_bytes_summary"]) and
all(s["n_prompts"] == 0 and s["over_budget_peak"] > s["byte_budget"] for s in d["checks"][0]["details"]["equal_bytes_summary"] if s["n_over_budget"]) and
all(not r["fits"] for r in d["checks"][0]["details"]["equal_bytes"] if r["engine"] and r["bytes_peak"] > r["byte_budget"]))' ||
    fail "evict: JSON equal_bytes does not mark the policies over the byte budget"
expect 1 "greedy cpu fast" $KVV greedy "$M" --engine cpu --mode fast --json "$T/g.json" -q || true
js "$T/g.json" 'd["checks"][0]["details"]["first_token_divergence"] < 0' &&
    { grep -q 'tokens identical; logits differ from step' "$T/out" && ! grep -q 'before divergence' "$T/out"; } ||
    fail "greedy: no token diverged, yet: $(grep '^greedy' "$T/out")"

[ $fails -eq 0 ] && echo "options agree: all cases passed"
[ $fails -eq 0 ]
