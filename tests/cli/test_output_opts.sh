#!/bin/sh
# One output convention on every command (cli/output_opts.h): --json alone
# and --json - print the JSON on stdout (and nothing else there), --json FILE
# and --json=FILE write it; the same for --junit. Output paths are checked
# before anything runs: a missing folder, a folder as FILE, a model named
# after --json, two outputs on stdout or on one file (however spelt) are
# exit 2 at once, and an existing file is left as it was. A device, FIFO or
# pipe is written through and stays what it was (never read, never
# replaced; nothing hangs), a symlink is followed, /dev/stdout is stdout.
. "$(dirname "$0")/lib.sh"
T=${TMPDIR:-/tmp}/kvv-test-output.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT

# stdout is one JSON document
is_json() { python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }
is_xml() { xmllint --noout "$1" 2>/dev/null; }

$KVV synth --shape llama-tiny -o "$T/m.gguf" >/dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
M="$T/m.gguf"
$KVV vectors gen "$M" --random 6 -n 2 -o "$T/v.kvv" >/dev/null 2>&1 || fail "vectors gen"
printf '%s\n' "tiny model=m.gguf checks=kv" >"$T/suite.txt"

# ---- --json alone, --json -, --json=- : the JSON alone on stdout, every command
for cmd in "kv $M" "audit $M --checks kv" "info $M" "info --shape llama-tiny" "info --cpu" \
           "run $M --tokens 1,2,3 -n 2" "tokenize $M hello" "bench $M --prompt 4 --gen 2 --repeats 1" \
           "vectors check $M $T/v.kvv" "vectors show $T/v.kvv" "suite $T/suite.txt" \
           "memory --shape llama-tiny"; do
    for form in "--json" "--json -" "--json=-"; do
        # shellcheck disable=SC2086
        expect 0 "$cmd $form" $KVV $cmd $form || continue
        is_json "$T/out" || fail "$cmd $form: stdout is not one JSON document: $(head -c 120 "$T/out")"
    done
    # shellcheck disable=SC2086
    expect 0 "$cmd --json FILE" $KVV $cmd --json "$T/f.json" && is_json "$T/f.json" ||
        fail "$cmd --json FILE: no JSON file"
    # shellcheck disable=SC2086
    expect 0 "$cmd --json=FILE" $KVV $cmd --json="$T/g.json" && is_json "$T/g.json" ||
        fail "$cmd --json=FILE: no JSON file"
    rm -f "$T/f.json" "$T/g.json" ./-
done
[ -e ./- ] && fail "a file named '-' was created"
# numerics (slower): bare and =FILE
expect 0 "numerics --json" $KVV numerics "$M" --engine ref --random 4 --samples 1 --json &&
    is_json "$T/out" || fail "numerics --json: stdout is not one JSON document"
expect 0 "numerics --json=FILE" $KVV numerics "$M" --engine ref --random 4 --samples 1 \
    --json="$T/n.json" && is_json "$T/n.json" || fail "numerics --json=FILE: no JSON file"

# ---- --junit the same way (the check commands and suite)
for cmd in "kv $M" "suite $T/suite.txt"; do
    # shellcheck disable=SC2086
    expect 0 "$cmd --junit" $KVV $cmd --junit && is_xml "$T/out" || fail "$cmd --junit: stdout is not XML"
    # shellcheck disable=SC2086
    expect 0 "$cmd --junit - --json F" $KVV $cmd --junit - --json "$T/j.json" &&
        is_xml "$T/out" && is_json "$T/j.json" || fail "$cmd --junit - --json FILE"
done
# a document on stdout replaces the console text; -q and --json together too
expect 0 "kv -q --json" $KVV kv "$M" -q --json && is_json "$T/out" || fail "kv -q --json"

# ---- paths checked before the run: exit 2 at once, the reason on stderr
expect 2 "missing folder" $KVV kv "$M" --json "$T/no/such/dir/r.json" &&
    grep -q "folder $T/no/such/dir does not exist" "$T/err" || fail "missing folder: no reason"
[ -s "$T/out" ] && fail "missing folder: the check ran (stdout: $(head -c 80 "$T/out"))"
expect 2 "missing folder, junit" $KVV audit "$M" --junit "$T/none/r.xml" || true
expect 2 "a folder as FILE" $KVV kv "$M" --json "$T" && grep -q "it is a folder" "$T/err" ||
    fail "a folder as FILE: no reason"
expect 2 "--csv missing folder" $KVV evict "$M" --csv "$T/none/e.csv" || true
cp "$M" "$T/keep.gguf"
expect 2 "--json MODEL" $KVV kv --json "$T/keep.gguf" "$M" &&
    grep -q "refusing to overwrite" "$T/err" || fail "--json MODEL: no refusal"
cmp -s "$M" "$T/keep.gguf" || fail "--json MODEL: the model was overwritten"
expect 2 "two on stdout" $KVV kv "$M" --json --junit || true
expect 2 "one file twice" $KVV kv "$M" --json "$T/x" --junit "$T/x" || true
expect 2 "empty name" $KVV kv "$M" --json= || true
expect 2 "junit where not taken" $KVV info "$M" --junit "$T/x.xml" &&
    grep -q "not used by info" "$T/err" || fail "info --junit: not refused"
# a failed write leaves an existing file as it was (the writer renames a temp file)
echo keep >"$T/keep.json"
expect 2 "corrupt model" $KVV kv "$T/no-such.gguf" --json "$T/keep.json" || true
[ "$(cat "$T/keep.json")" = keep ] || fail "keep.json overwritten by a run that failed"
if [ "$(id -u)" != 0 ]; then
    mkdir "$T/ro" && chmod a-w "$T/ro"
    expect 2 "read-only folder" $KVV kv "$M" --json "$T/ro/r.json" &&
        grep -q "not writable" "$T/err" || fail "read-only folder: no reason"
    chmod u+w "$T/ro"
else
    echo "SKIP: running as root, a read-only folder is writable (case not checked)"
fi

# ---- what a path names decides how it is written (common/atomic_file.h):
# a device or FIFO is written through and stays what it was, a symlink is
# followed, nothing hangs reading a stream (each run under `timeout`)
TO="timeout 60"
if mknod "$T/null" c 1 3 2>/dev/null; then # /dev/null's numbers, in the scratch folder
    expect 0 "--json DEVICE" $TO $KVV kv "$M" -q --json "$T/null" &&
        [ -c "$T/null" ] || fail "--json DEVICE: $T/null is no longer a character device"
    expect 0 "--junit DEVICE" $TO $KVV kv "$M" -q --junit "$T/null" || true
    [ -c "$T/null" ] || fail "--junit DEVICE: replaced"
    expect 0 "synth -o DEVICE" $TO $KVV synth --shape llama-tiny -o "$T/null" &&
        [ -c "$T/null" ] || fail "synth -o DEVICE: replaced"
    expect 0 "vectors gen -o DEVICE" $TO $KVV vectors gen "$M" --random 6 -n 2 -o "$T/null" &&
        [ -c "$T/null" ] || fail "vectors gen -o DEVICE: replaced"
    expect 0 "evict --csv DEVICE" $TO $KVV evict "$M" --n-prompts 1 --csv "$T/null" || true
    [ -c "$T/null" ] || fail "evict --csv DEVICE: replaced"
    rm -f "$T/null"
else
    echo "SKIP: mknod of a character device not permitted here (device case not checked)"
fi
mkfifo "$T/fifo" || fail "mkfifo"
$TO cat "$T/fifo" >"$T/fifo.out" &
reader=$!
expect 0 "--json FIFO" $TO $KVV kv "$M" -q --json "$T/fifo" || true
wait $reader
is_json "$T/fifo.out" || fail "--json FIFO: the reader got no JSON"
[ -p "$T/fifo" ] || fail "--json FIFO: no longer a FIFO"
# Descriptor names: /dev/fd/N and /dev/stdout are links to /proc/self/fd/N.
# The cases use links of their own to the same place, in the scratch folder:
# a kvverify that renamed over its target (the bug this guards against)
# then replaces only the scratch link, never the machine's /dev/stdout.
# A pipe by its descriptor name (what bash's --json >(cmd) passes):
ln -s /proc/self/fd/3 "$T/fd3"
{ $TO $KVV kv "$M" -q --json "$T/fd3" 3>&1 >/dev/null 2>"$T/err"; echo $? >"$T/rc"; } |
    cat >"$T/pipe.out"
[ "$(cat "$T/rc")" = 0 ] && is_json "$T/pipe.out" || fail "--json /dev/fd/3 (a pipe): exit $(cat "$T/rc")"
[ -L "$T/fd3" ] || fail "--json /dev/fd/3: the link was replaced"
# /dev/stdout is stdout: the document alone there, as with -
ln -s /proc/self/fd/1 "$T/stdout"
expect 0 "--json /dev/stdout" $KVV kv "$M" --json "$T/stdout" && is_json "$T/out" ||
    fail "--json /dev/stdout: stdout is not one JSON document"
expect 2 "--json /dev/stdout --junit -" $KVV kv "$M" --json "$T/stdout" --junit - &&
    grep -q "only one of" "$T/err" || fail "/dev/stdout and - both taken: not refused"
[ -L "$T/stdout" ] || fail "--json /dev/stdout: the link was replaced"
# a symlink is followed: its target gets the report, the link stays a link
echo old >"$T/real.json"
ln -s real.json "$T/link.json"
expect 0 "--json LINK" $KVV kv "$M" -q --json "$T/link.json" || true
[ -L "$T/link.json" ] || fail "--json LINK: the link was replaced"
is_json "$T/real.json" || fail "--json LINK: the link's target holds no JSON"
ln -s made.json "$T/dangling.json"
expect 0 "--json DANGLING-LINK" $KVV kv "$M" -q --json "$T/dangling.json" || true
[ -L "$T/dangling.json" ] && is_json "$T/made.json" || fail "--json DANGLING-LINK: target not made"
cp "$M" "$T/keep2.gguf" && ln -s keep2.gguf "$T/model-link"
expect 2 "--json LINK-TO-MODEL" $KVV kv "$M" --json "$T/model-link" &&
    grep -q "refusing to overwrite" "$T/err" || fail "--json LINK-TO-MODEL: not refused"
cmp -s "$M" "$T/keep2.gguf" || fail "--json LINK-TO-MODEL: the model was overwritten"
ls "$T" | grep -q '\.tmp\.' && fail "a temp file was left behind"

# ---- one file under two spellings is refused, naming both options
mkdir -p "$T/sub"
for pair in "$T/same.out $T/./same.out" "$T/same.out $T/sub/../same.out" \
            "$T/link.json $T/real.json"; do
    set -- $pair
    for pre in absent present; do
        [ $pre = present ] && echo x >"$1"
        expect 2 "--json $1 --junit $2 ($pre)" $KVV kv "$M" --json "$1" --junit "$2" &&
            grep -q "options --json and --junit both write" "$T/err" ||
            fail "--json $1 --junit $2 ($pre): not refused by name"
    done
done
case $KVV in /*) AK=$KVV ;; *) AK=$(pwd)/$KVV ;; esac
expect 2 "--json X --html ./X (relative)" sh -c "cd '$T' && '$AK' kv '$M' --json r.out --html ./r.out" &&
    grep -q "both write r.out and ./r.out" "$T/err" || fail "--json X --html ./X: no message naming both"

# ---- help says the convention once, in the same words everywhere
for c in kv info run bench tokenize suite "vectors check"; do
    # shellcheck disable=SC2086
    $KVV $c --help | grep -q -- '--json \[FILE|-\]' || fail "$c --help: no --json [FILE|-] line"
done

[ $fails -eq 0 ] && echo "output options: all cases passed"
[ $fails -eq 0 ]
