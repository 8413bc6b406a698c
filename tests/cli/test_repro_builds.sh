#!/bin/sh
# test_repro_builds.sh — the reference engine gives the same bits from every
# build: `kvverify run --hash` (sha256 over all logits, K, V and residuals)
# is identical for the default build ($KVV), an -O0 build and, when clang is
# installed, a clang build:
#   make O=build-repro-O0 OPT=-O0 build-repro-O0/kvverify
#   make O=build-repro-clang CC=clang build-repro-clang/kvverify
# (the golden-vector tests reuse these build folders); with KVV_SLOW=1 (make
# test-slow) also an -O3 -march=native build (FMA and wide vectors enabled:
# -ffp-contract=off must still keep every bit). With ../shared the
# model is stories260K-f32 and the teacher-forced hash must also equal the
# committed expectation of tests/reference/test_ref_repro.c; without it, a
# synthetic gemma2 model from `kvverify synth` (soft-caps, sliding window,
# GELU: every kmath function on the path).
set -u
KVV=${KVV:-./kvverify}
SHARED=${KVV_SHARED:-../shared}
JOBS=${JOBS:-2}
[ -x "$KVV" ] || { echo "SKIP: $KVV not built"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

EXPECTED_TF=081d1f39d9f98cf5906937d74777dfe2eb87f992c852d0198caa990b8c27eea9
TOKENS=1,403,407,261,378,432,383,286,261,376,298,315,421,395,317,426,338,401,396,267,337,410,408,419,292,411,322,265,262,379,426,385
if [ -r "$SHARED/models/stories260K-f32.gguf" ]; then
    MODEL=$SHARED/models/stories260K-f32.gguf
else
    echo "note: $SHARED/models absent: using a synthetic gemma2 model"
    MODEL=$tmp/synth-gemma2.gguf
    EXPECTED_TF=
    "$KVV" synth --shape gemma2-tiny --seed 3 -o "$MODEL" >/dev/null || {
        echo "FAIL: kvverify synth could not write $MODEL"; exit 1; }
fi

fail=0
hash_of() { # binary, extra args...
    bin=$1; shift
    "$bin" run "$MODEL" --tokens "$TOKENS" --hash "$@" | sed -n 's/^sha256: //p'
}

# A clean make environment: inside `make test` (or test-asan) MAKEFLAGS would
# pass the outer O=, OPT=, SAN= down to these builds.
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -j"$JOBS" SAN= "$@"; }

bins="$KVV"
echo "building -O0 (build-repro-O0)"
mk O=build-repro-O0 OPT=-O0 build-repro-O0/kvverify >"$tmp/make-O0.log" 2>&1 || {
    echo "FAIL: -O0 build"; tail -20 "$tmp/make-O0.log"; exit 1; }
bins="$bins build-repro-O0/kvverify"
if command -v clang >/dev/null 2>&1; then
    echo "building with clang (build-repro-clang)"
    mk O=build-repro-clang CC=clang build-repro-clang/kvverify \
        >"$tmp/make-clang.log" 2>&1 || { echo "FAIL: clang build"; tail -20 "$tmp/make-clang.log"; exit 1; }
    bins="$bins build-repro-clang/kvverify"
else
    echo "note: no clang: comparing gcc -O2 with gcc -O0 only"
fi

if [ -n "${KVV_SLOW:-}" ] && [ "${KVV_SLOW:-}" != 0 ]; then
    echo "building -O3 -march=native (build-repro-native)"
    mk O=build-repro-native OPT="-O3 -march=native" build-repro-native/kvverify \
        >"$tmp/make-native.log" 2>&1 || { echo "FAIL: native build"; tail -20 "$tmp/make-native.log"; exit 1; }
    bins="$bins build-repro-native/kvverify"
fi

for mode in teacher greedy greedy-f16; do
    case $mode in
        teacher) args="--teacher" ;;
        greedy) args="-n 12" ;;
        greedy-f16) args="-n 12 --cache-type f16" ;;
    esac
    first=
    for b in $bins; do
        # shellcheck disable=SC2086
        h=$(hash_of "$b" $args)
        echo "$mode  $b  $h"
        if [ -z "$h" ]; then
            echo "FAIL: $b printed no hash"; fail=1
        elif [ -z "$first" ]; then
            first=$h
        elif [ "$h" != "$first" ]; then
            echo "FAIL: $b gives $h, $KVV gives $first"; fail=1
        fi
    done
    if [ "$mode" = teacher ] && [ -n "$EXPECTED_TF" ] && [ "$first" != "$EXPECTED_TF" ]; then
        echo "FAIL: teacher-forced hash $first differs from the committed $EXPECTED_TF"; fail=1
    fi
done
[ $fail -eq 0 ] && echo "all builds agree"
exit $fail
