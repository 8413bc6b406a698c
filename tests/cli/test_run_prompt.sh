#!/bin/sh
# kvverify run takes the checks' prompt options (cli/prompt_opts.h): --random N
# --seed S gives the same prompt as the checks build (first token BOS, the
# same ids for the same seed), -p/--tokens/--random exclude each other; and
# run decodes through the one greedy loop: its generated tokens are the argmax
# of the teacher-forced logits over prompt + generated (engine/greedy.h,
# runtime/logits.h), so `run` and a teacher-forced pass never disagree on a
# row. Synthetic model only: needs no ../shared.
KVV=${KVV:-./kvverify}
T=${TMPDIR:-/tmp}/kvv-test-run-prompt.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails+1)); }

SYN=$T/llama.gguf
$KVV synth --shape llama-tiny --seed 5 -o "$SYN" >/dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }

$KVV run "$SYN" --random 6 --seed 5 -n 5 --json >"$T/a.json" 2>"$T/err" ||
    fail "run --random: exit $? $(cat "$T/err")"
$KVV run "$SYN" --random 6 --seed 5 -n 5 --json >"$T/b.json" || fail "run --random again: exit $?"
$KVV run "$SYN" --random 6 --seed 6 -n 5 --json >"$T/c.json" || fail "run --seed 6: exit $?"
python3 - "$T/a.json" "$T/b.json" "$T/c.json" <<'PY' || fail "run --random: prompts"
import json, sys
a, b, c = (json.load(open(p)) for p in sys.argv[1:4])
assert len(a["prompt_tokens"]) == 6, a["prompt_tokens"]
assert a["prompt_tokens"] == b["prompt_tokens"] and a["generated_tokens"] == b["generated_tokens"]
assert a["prompt_tokens"] != c["prompt_tokens"]
PY

# greedy tokens = argmax of the teacher-forced rows over prompt + generated
ids=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(','.join(map(str, d['prompt_tokens'] + d['generated_tokens'])))" "$T/a.json")
$KVV run "$SYN" --tokens "$ids" --teacher --json >"$T/tf.json" || fail "run --teacher: exit $?"
python3 - "$T/a.json" "$T/tf.json" <<'PY' || fail "run greedy and teacher-forced disagree on a row"
import json, sys
g, tf = (json.load(open(p)) for p in sys.argv[1:3])
n = len(g["prompt_tokens"])
want = [s["argmax"] for s in tf["steps"][n - 1:n - 1 + len(g["generated_tokens"])]]
assert want == g["generated_tokens"], (want, g["generated_tokens"])
assert [s["argmax"] for s in g["steps"]] == g["generated_tokens"]
PY

$KVV run "$SYN" --random 4 --tokens 1,2 >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] || fail "--random with --tokens: exit $rc"
grep -q 'exclude each other' "$T/err" || fail "--random with --tokens: $(cat "$T/err")"
$KVV run "$SYN" --random 4 --raw >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] || fail "--raw without -p: exit $rc"
$KVV run "$SYN" --seed 3 >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] || fail "no prompt: exit $rc"
grep -q 'give a prompt' "$T/err" || fail "no prompt: $(cat "$T/err")"

[ $fails -eq 0 ] || exit 1
echo "all run prompt tests passed"
