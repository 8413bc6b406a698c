#!/bin/sh
# test_vectors.sh — kvverify vectors gen/check/show end to end:
#   * determinism: two runs, 1 vs 2 threads, -O0 vs -O2, gcc vs clang give
#     byte-identical files (reference engine; cpu engine in invariant mode
#     for 1 vs 2 threads when it is built in);
#   * check passes; controls: --force-fail (weight) and --force-fail=resid:L:P exit 1
#     (--perturb, the old name, still works with a deprecation note)
#     naming the first divergent layer and position;
#   * corrupt files (bit flips, truncation, unknown version, wrong model)
#     exit 2 with the record and byte offset named;
#   * every shipped vector in vectors/golden/ checks (synthetic models are
#     rebuilt with kvverify synth; ../shared models skip when absent).
# Exit 0 pass, 1 fail. Set KVV_REPRO=0 to leave out the extra -O0/clang builds.
. "$(dirname "$0")/lib.sh"
KVV=${KVV:-./kvverify}
O=${O:-build}
export KVV
T="$O/tmp/test_vectors.$$"
mkdir -p "$T"
trap 'rm -rf "$T"' EXIT INT TERM
FAIL_LOG=$T/failures

# expect_out CODE PATTERN CMD...: exit code CODE and PATTERN (grep -E) in its output
# byte BYTE FILE OFFSET: overwrite one byte
poke() { printf "$(printf '\\%03o' "$1")" | dd of="$2" bs=1 seek="$3" conv=notrunc 2>/dev/null; }
byte_at() { od -An -tu1 -j "$2" -N1 "$1" | tr -d ' '; }

M="$T/llama.gguf"
"$KVV" synth --shape llama-tiny --seed 3 -o "$M" >/dev/null || { echo "FAIL: synth"; exit 1; }
"$KVV" synth --shape llama-tiny --seed 4 -o "$T/other.gguf" >/dev/null || { echo "FAIL: synth"; exit 1; }

# ---------------------------------------------------------------- usage
expect_out 0 "usage: kvverify vectors gen" "$KVV" vectors --help
expect_out 2 "unknown subcommand" "$KVV" vectors frobnicate
expect_out 2 "needs MODEL and -o FILE" "$KVV" vectors gen "$M"
expect_out 2 "option --logits" "$KVV" vectors gen "$M" -o "$T/x.kvv" --logits maybe
expect_out 2 "option --force-fail" "$KVV" vectors check "$M" "$T/x.kvv" --force-fail=elsewhere
expect_out 2 "exclude each other" "$KVV" vectors gen "$M" -o "$T/x.kvv" --random 4 --tokens 1,2
expect_out 2 "outside the vocabulary" "$KVV" vectors gen "$M" -o "$T/x.kvv" --tokens 1,99999
[ -e "$T/x.kvv" ] && fail "a failed gen left $T/x.kvv behind"

# ---------------------------------------------------------------- determinism
G="--random 10 --seed 9 -n 6 --full"
expect_out 0 "wrote" "$KVV" vectors gen "$M" -o "$T/a.kvv" $G
expect_out 0 "wrote" "$KVV" vectors gen "$M" -o "$T/b.kvv" $G
cmp -s "$T/a.kvv" "$T/b.kvv" && ok "two runs: identical bytes" || fail "two runs differ"
expect_out 0 "wrote" "$KVV" vectors gen "$M" -o "$T/t2.kvv" $G --threads 2
cmp -s "$T/a.kvv" "$T/t2.kvv" && ok "1 vs 2 threads (ref): identical" || fail "1 vs 2 threads differ (ref)"
ls "$T"/*.tmp.* >/dev/null 2>&1 && fail "temp files left behind"

have_cpu=0
if "$KVV" vectors gen "$M" -o "$T/c1.kvv" $G --engine cpu --mode invariant --threads 1 >"$T/out" 2>&1; then
    have_cpu=1
    expect_out 0 "wrote" "$KVV" vectors gen "$M" -o "$T/c2.kvv" $G --engine cpu --mode invariant --threads 2
    cmp -s "$T/c1.kvv" "$T/c2.kvv" && ok "cpu invariant 1 vs 2 threads: identical" \
        || fail "cpu invariant: 1 and 2 threads give different files"
    expect_out 0 "^PASS" "$KVV" vectors check "$M" "$T/c1.kvv" --threads 2
else
    echo "SKIP: cpu engine not available: $(head -1 "$T/out")"
fi

if [ "${KVV_REPRO:-1}" != 0 ]; then
    # the reference engineer's reproducibility test builds the same folders
    for b in "build-repro-O0 OPT=-O0" "build-repro-clang CC=clang"; do
        dir=${b%% *}; var=${b#* }
        if [ "$var" = "CC=clang" ] && ! command -v clang >/dev/null; then
            echo "SKIP: clang not installed: gcc vs clang not compared"; continue
        fi
        # a clean make: no OPT/SAN/O leaking in from a `make test-asan` parent
        if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -j2 O="$dir" "$var" "$dir/kvverify" \
            >"$T/make.log" 2>&1; then
            "./$dir/kvverify" vectors gen "$M" -o "$T/$dir.kvv" $G >/dev/null 2>&1
            cmp -s "$T/a.kvv" "$T/$dir.kvv" && ok "$dir ($var): identical bytes" \
                || fail "$dir ($var) writes a different vector"
            if [ $have_cpu = 1 ]; then
                "./$dir/kvverify" vectors gen "$M" -o "$T/$dir-cpu.kvv" $G --engine cpu \
                    --mode invariant --threads 2 >/dev/null 2>&1
                cmp -s "$T/c1.kvv" "$T/$dir-cpu.kvv" && ok "$dir ($var): cpu invariant identical" \
                    || fail "$dir ($var): the cpu engine (invariant) writes a different vector"
            fi
        else
            fail "make O=$dir $var failed"; tail -5 "$T/make.log"
        fi
    done
fi

# ---------------------------------------------------------------- check and controls
expect_out 0 "^PASS .* bit-identical" "$KVV" vectors check "$M" "$T/a.kvv"
expect_out 0 '"verdict": "pass"' "$KVV" vectors check "$M" "$T/a.kvv" --json
expect_out 1 "first divergence: logits step 0 \(output layer\) position 9 index" \
    "$KVV" vectors check "$M" "$T/a.kvv" --force-fail
expect_out 1 "first divergence: full.resid layer 1 position 4 index 0: expected 0x" \
    "$KVV" vectors check "$M" "$T/a.kvv" --force-fail=resid:1:4
grep -Eq "^[0-9]+ divergences: .*full.k" "$T/out" && ok "count of all divergences" \
    || fail "no divergence count line"
expect_out 1 '"record": "full.resid"' "$KVV" vectors check "$M" "$T/a.kvv" --force-fail=resid:1:4 --json
# the old name: the same control, and a note saying the new one
expect_out 1 "first divergence: full.resid layer 1 position 4" "$KVV" vectors check "$M" "$T/a.kvv" --perturb resid:1:4
grep -q "note: --perturb is deprecated: use --force-fail=resid:1:4" "$T/out" && ok "--perturb: deprecation note" \
    || fail "--perturb: no deprecation note"
expect_out 2 "outside layers" "$KVV" vectors check "$M" "$T/a.kvv" --force-fail=resid:99:0
# hashes only: the divergence names layer and position
"$KVV" vectors gen "$M" -o "$T/h.kvv" --random 10 --seed 9 -n 6 --logits hash >/dev/null
expect_out 1 "first divergence: hash.resid layer 2 position 7: expected 0x" \
    "$KVV" vectors check "$M" "$T/h.kvv" --force-fail=resid:2:7

# ---------------------------------------------------------------- show
expect_out 0 "record +type +shape" "$KVV" vectors show "$T/a.kvv"
expect_out 0 '"compressed_size"' "$KVV" vectors show "$T/a.kvv" --json
if command -v python3 >/dev/null; then
    "$KVV" vectors show "$T/a.kvv" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["meta"]["model"]["arch"]=="llama"; assert d["records"][0]["name"]=="meta"' \
        && ok "show --json parses" || fail "show --json is not the documented JSON"
fi

# ---------------------------------------------------------------- corrupt and mismatched files
expect_out 2 "wrong model" "$KVV" vectors check "$T/other.gguf" "$T/a.kvv"
expect_out 2 '"verdict": "error"' "$KVV" vectors check "$T/other.gguf" "$T/a.kvv" --json
size=$(wc -c < "$T/a.kvv" | tr -d ' ')
for off in 0 4 9 12 20 40 $((size / 3)) $((size / 2)) $((size - 1)); do
    cp "$T/a.kvv" "$T/f.kvv"
    poke $(( $(byte_at "$T/f.kvv" "$off") ^ 16 )) "$T/f.kvv" "$off"
    expect_out 2 "f.kvv: record [a-z0-9_.#]+ at byte [0-9]+" "$KVV" vectors check "$M" "$T/f.kvv"
done
cp "$T/a.kvv" "$T/f.kvv"; poke 2 "$T/f.kvv" 4
expect_out 2 "record header at byte 4: unknown format version 2" "$KVV" vectors check "$M" "$T/f.kvv"
for n in 0 10 16 100 $((size / 2)) $((size - 1)); do
    head -c "$n" "$T/a.kvv" > "$T/t.kvv"
    expect_out 2 "t.kvv: record .* at byte [0-9]+: .*truncated" "$KVV" vectors check "$M" "$T/t.kvv"
done
expect_out 2 "cannot open" "$KVV" vectors check "$M" "$T/missing.kvv"
cp "$T/a.kvv" "$T/f.kvv"; poke $(( $(byte_at "$T/f.kvv" $((size - 2))) ^ 1 )) "$T/f.kvv" $((size - 2))
expect_out 2 "f.kvv: record patch at byte [0-9]+: CRC-32 mismatch" "$KVV" vectors show "$T/f.kvv"
cp "$T/a.kvv" "$T/keep.kvv"
"$KVV" vectors gen "$T/missing.gguf" -o "$T/keep.kvv" >/dev/null 2>&1
cmp -s "$T/a.kvv" "$T/keep.kvv" && ok "failed gen leaves the existing file untouched" \
    || fail "failed gen overwrote the output"

# ---------------------------------------------------------------- text prompt
expect_out 0 "wrote .* \(" "$KVV" vectors gen "$M" -o "$T/p.kvv" -p "once upon a time" -n 3
expect_out 0 "prompt +text, [0-9]+ tokens \"once upon a time\"" "$KVV" vectors show "$T/p.kvv"
expect_out 0 "^PASS" "$KVV" vectors check "$M" "$T/p.kvv"

# ---------------------------------------------------------------- stories260K (the issue's demo)
S="${KVV_SHARED:-../shared}/models/stories260K-f32.gguf"
if [ -r "$S" ]; then
    expect_out 0 "wrote" "$KVV" vectors gen "$S" -o "$T/s1.kvv" -p "Once upon a time" -n 16
    expect_out 0 "wrote" "$KVV" vectors gen "$S" -o "$T/s2.kvv" -p "Once upon a time" -n 16
    cmp -s "$T/s1.kvv" "$T/s2.kvv" && ok "stories260K: two gens, identical bytes" || fail "stories260K gens differ"
    expect_out 0 "^PASS" "$KVV" vectors check "$S" "$T/s1.kvv"
    cp "$T/s1.kvv" "$T/s3.kvv"; poke $(( $(byte_at "$T/s3.kvv" 2000) ^ 1 )) "$T/s3.kvv" 2000
    expect_out 2 "s3.kvv: record logits at byte [0-9]+: CRC-32 mismatch" "$KVV" vectors check "$S" "$T/s3.kvv"
    expect_out 1 "first divergence: hash.resid layer 3 position 2" "$KVV" vectors check "$S" "$T/s1.kvv" --force-fail=resid:3:2
    expect_out 1 "first divergence: logits step 0 \(output layer\) position 4" "$KVV" vectors check "$S" "$T/s1.kvv" --force-fail
else
    echo "SKIP: $S not found (the stories260K demo needs ../shared)"
fi

# ---------------------------------------------------------------- shipped vectors
. vectors/golden.sh
mkdir -p "$T/golden"
check_one() { # NAME MODEL OPTIONS
    if [ -z "$2" ]; then
        echo "SKIP: $1: model not found under ${KVV_SHARED:-../shared}"
        return 0
    fi
    if [ ! -f "$KVV_GOLDEN_DIR/$1.kvv" ]; then
        echo "FAIL: $KVV_GOLDEN_DIR/$1.kvv missing (make vectors-update)"
        return 1
    fi
    if "$KVV" vectors check "$2" "$KVV_GOLDEN_DIR/$1.kvv" > "$T/golden/$1.out" 2>&1; then
        echo "ok: golden $1: $(cut -c1-120 "$T/golden/$1.out")"
    else
        echo "FAIL: golden $1:"; sed 's/^/    /' "$T/golden/$1.out"
        return 1
    fi
}
kvv_golden_each "$T/golden" check_one || fail "a shipped golden vector did not check"
# make vectors-update (vectors/update.sh) regenerates the shipped files byte for byte
mkdir -p "$T/regen"
cp vectors/golden/list.txt "$T/regen/"
if KVV_GOLDEN_DIR="$T/regen" sh vectors/update.sh > "$T/regen.log" 2>&1; then
    same=1
    for f in "$T"/regen/*.kvv; do
        cmp -s "$f" "vectors/golden/${f##*/}" || { same=0; fail "update.sh: ${f##*/} differs from the shipped file"; }
    done
    [ $same = 1 ] && ok "vectors/update.sh regenerates $(ls "$T"/regen/*.kvv | wc -l) shipped vectors byte for byte"
else
    fail "vectors/update.sh failed"; tail -3 "$T/regen.log"
fi
n_listed=$(grep -v '^[[:space:]]*#' vectors/golden/list.txt | grep -c '|')
n_files=$(ls vectors/golden/*.kvv | wc -l)
[ "$n_listed" -eq "$n_files" ] && ok "$n_files golden files, one per list entry" \
    || fail "vectors/golden has $n_files .kvv files for $n_listed list entries"

[ -s "$T/failures" ] && { echo "failures:"; cat "$T/failures"; }
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
