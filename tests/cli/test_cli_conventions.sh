#!/bin/sh
# One command line (issue 20 items 7, 8, 10; issue 16 item 5): errors on
# stderr only and once, before anything runs; an unknown command is one
# (did you mean ...?); `kvverify help CMD`; `--` ends the options; progress
# on stderr only (--progress, never with -q); -q on suite; `run -n 0` and
# `-n -5` alike; `tokenize --decode` ends its line.
. "$(dirname "$0")/lib.sh"
T=${TMPDIR:-/tmp}/kvv-test-conventions.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT

# the error is on stderr (one line naming $2) and stdout is empty
stderr_only() { # description, pattern
    grep -q -- "$2" "$T/err" || fail "$1: stderr lacks '$2': $(head -c 200 "$T/err")"
    [ -s "$T/out" ] && fail "$1: something on stdout: $(head -c 120 "$T/out")"
    [ "$(grep -c -- "$2" "$T/err")" -eq 1 ] || fail "$1: '$2' said $(grep -c -- "$2" "$T/err") times"
}

$KVV synth --shape llama-tiny -o "$T/m.gguf" -q || { echo "FAIL: synth"; exit 1; }
M="$T/m.gguf"

# ---- item 7: errors to stderr, once, before the run
expect 2 "--threads 300" $KVV kv "$M" --engine cpu --threads 300 && stderr_only "--threads 300" "outside 1..256"
expect 2 "unknown engine (audit)" $KVV "$M" --engine gpu && stderr_only "audit --engine gpu" "unknown engine 'gpu'"
expect 2 "unknown engine (kv)" $KVV kv "$M" --engine gpu && stderr_only "kv --engine gpu" "unknown engine 'gpu'"
expect 2 "compare --against gpu" $KVV compare "$M" --against gpu && stderr_only "--against gpu" "unknown engine 'gpu'"
expect 2 "plugin file missing" $KVV kv "$M" --engine plugin:"$T/none.so" && stderr_only "plugin:none" "cannot load plugin file"
expect 2 "greedy -n past the context" $KVV greedy "$M" -n 65536 && stderr_only "greedy -n 65536" "option -n"
expect 2 "token outside the vocabulary" $KVV kv "$M" --tokens 1,99999 && stderr_only "--tokens 1,99999" "99999"
expect 0 "ref --threads 4" $KVV kv "$M" --threads 4 -q &&
    grep -q "ref engine runs one thread" "$T/err" || fail "ref --threads 4: no note on stderr"
grep -q "1 thread" "$T/out" || true
expect 0 "cpu --threads 2: no note" $KVV kv "$M" --engine cpu --threads 2 -q &&
    grep -q "runs one thread" "$T/err" && fail "cpu --threads 2: the ref note was printed"

# ---- item 8: unknown commands, help CMD
expect 2 "inof" $KVV inof "$M" && grep -q "unknown command 'inof' (did you mean info?)" "$T/err" ||
    fail "inof: no did-you-mean: $(cat "$T/err")"
expect 2 "a word that is no command" $KVV nothere && grep -q "unknown command 'nothere'" "$T/err" ||
    fail "nothere: not an unknown command"
expect 2 "a missing model" $KVV "$T/none.gguf" && grep -q "none.gguf" "$T/err" ||
    fail "missing model: the file is not named"
expect 0 "help kv" $KVV help kv && grep -q "^usage: kvverify kv MODEL" "$T/out" || fail "help kv: not kv's help"
expect 2 "help inof" $KVV help inof && grep -q "did you mean info" "$T/err" || fail "help inof"
# `help` and `help help` list every command (help among them); `help CMD` is CMD --help
for form in "help" "help help" "--help"; do
    # shellcheck disable=SC2086
    expect 0 "$form" $KVV $form || continue
    for c in audit kv memory latency suite report engines checks help; do
        grep -q "^  $c  " "$T/out" || fail "$form: command $c not listed"
    done
done
for c in kv audit memory latency suite report info run vectors tokenize numerics; do
    $KVV help $c >"$T/h1" 2>&1 && $KVV $c --help >"$T/h2" 2>&1 && cmp -s "$T/h1" "$T/h2" ||
        fail "help $c is not $c --help"
    # every usage line naming an output takes FILE or - (stdout)
    sed -n '/^usage/,/^$/p' "$T/h1" | grep -o -- '--\(json\|junit\|html\)[^]]*]*' |
        grep -v -- '\[FILE|-\]\|\[OUT|-\]' | sed "s/^/FAIL: $c usage: /" | grep . && fails=$((fails+1))
done
expect 2 "hlep" $KVV hlep && grep -q "unknown command 'hlep' (did you mean help?)" "$T/err" ||
    fail "hlep: no did-you-mean help: $(cat "$T/err")"
expect 2 "help kv extra" $KVV help kv extra && grep -q "unexpected argument 'extra'" "$T/err" ||
    fail "help kv extra: not refused"

# ---- `--` ends the options
expect 0 "tokenize -- --x" $KVV tokenize "$M" -- --x && [ -s "$T/out" ] || fail "tokenize -- --x"
expect 0 "tokenize -- --help" $KVV tokenize "$M" -- --help && ! grep -q usage "$T/out" ||
    fail "tokenize -- --help printed the help"
expect 0 "kv -q -- MODEL" $KVV kv -q -- "$M" || true
expect 2 "-- then an option is positional" $KVV kv "$M" -- -q && grep -q "unexpected argument '-q'" "$T/err" ||
    fail "kv MODEL -- -q: -q was taken as an option"

# ---- progress: stderr only, with --progress; never with -q, never on stdout
expect 0 "--progress" $KVV kv "$M" --progress --json && grep -q '\[kv\] 3/5' "$T/err" ||
    fail "--progress: no [kv] progress on stderr"
grep -q '\[kv\]' "$T/out" && fail "--progress: progress on stdout"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/out" || fail "--progress --json: stdout not JSON"
expect 0 "--progress -q" $KVV kv "$M" --progress -q && grep -q '\[kv\]' "$T/err" && fail "-q: progress shown"
KVV_PROGRESS=1 $KVV greedy "$M" >/dev/null 2>"$T/err" && grep -q '\[greedy\]' "$T/err" ||
    fail "KVV_PROGRESS=1: no progress"
expect 2 "--progress where nothing runs long" $KVV info "$M" --progress || true
# every command that can run long has it
for c in "compare $M" "vectors gen $M --random 4 -n 2 -o $T/p.kvv" "bench $M --prompt 4 --gen 2 --repeats 1" \
         "run $M --tokens 1,2 -n 3" "synth --shape llama-tiny -o $T/s.gguf"; do
    # shellcheck disable=SC2086
    $KVV $c --progress >/dev/null 2>"$T/err" || fail "$c --progress: exit $?"
    grep -q '\[[a-z]*\] [0-9]*/[0-9]*' "$T/err" || fail "$c --progress: no progress on stderr"
done
$KVV vectors check "$M" "$T/p.kvv" --progress >/dev/null 2>"$T/err" && grep -q '\[vectors\]' "$T/err" ||
    fail "vectors check --progress"

# ---- item 10: suite -q, run -n, tokenize --decode
printf 'tiny model=m.gguf checks=kv\n' >"$T/s.txt"
expect 0 "suite -q" $KVV suite "$T/s.txt" -q && ! grep -q "^pass" "$T/out" && grep -q "1 passed" "$T/out" ||
    fail "suite -q: per-testcase lines or no summary"
expect 2 "run -n 0" $KVV run "$M" --tokens 1,2 -n 0 && cp "$T/err" "$T/n0"
expect 2 "run -n -5" $KVV run "$M" --tokens 1,2 -n -5 && cp "$T/err" "$T/n5"
sed 's/-5/N/; s/ 0 / N /' "$T/n0" >"$T/a"; sed 's/-5/N/; s/ 0 / N /' "$T/n5" >"$T/b"
cmp -s "$T/a" "$T/b" || fail "run -n 0 and -n -5 differ in kind: $(cat "$T/n0") / $(cat "$T/n5")"
$KVV tokenize "$M" --decode 1,20,30 >"$T/d" || fail "tokenize --decode"
[ "$(tail -c 1 "$T/d" | od -An -c | tr -d ' ')" = '\n' ] || fail "tokenize --decode: no final newline"

# bench counts the CPU of the engine's threads: the reference engine runs one
$KVV bench "$M" --engine ref --prompt 8 --gen 2 --repeats 2 --json >"$T/b.json" || fail "bench --engine ref"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["prompt_cpu_util"] <= 1.1 and d["decode_cpu_util"] <= 1.1, d' \
    "$T/b.json" || fail "bench --engine ref: more than one thread's CPU"

# ---- item 12: vectors check takes the model from the vector; swapped args
$KVV vectors gen "$M" --random 6 -n 2 -o "$T/v.kvv" >/dev/null 2>&1 || fail "vectors gen"
expect 0 "vectors check FILE (model beside it)" $KVV vectors check "$T/v.kvv" &&
    grep -q "^PASS" "$T/out" || fail "vectors check FILE: no PASS"
expect 2 "vectors check FILE MODEL" $KVV vectors check "$T/v.kvv" "$M" &&
    grep -q "arguments are swapped.*the order is MODEL FILE" "$T/err" || fail "swapped: order not said"
mkdir -p "$T/alone" && cp "$T/v.kvv" "$T/alone/"
KABS=$(cd "$(dirname "$KVV")" && pwd)/$(basename "$KVV")
(cd "$T/alone" && "$KABS" vectors check v.kvv >"$T/out" 2>"$T/err"); rc=$?
[ $rc -eq 2 ] && grep -q "recorded on m.gguf" "$T/err" || fail "vector without its model: exit $rc, $(cat "$T/err")"

[ $fails -eq 0 ] && echo "command-line conventions: all cases passed"
[ $fails -eq 0 ]
