#!/bin/sh
# `make bench`'s audit-memory script (bench/memory.sh) on a tiny synthetic
# model: one table row per engine with the file size, the audit's exit
# code, its peak RSS and the ratio to the file, and the same in JSON; a
# TIME that is not GNU time is refused with the install step named. Needs
# no ../shared; needs GNU time (scripts/install-deps.sh). Exit 0 pass, else fail.
. "$(dirname "$0")/lib.sh"
KVV=${KVV:-./kvverify}
O=${O:-build}
[ -x "$KVV" ] || { echo "SKIP: $KVV not built"; exit 77; }
case $KVV in /*) ;; *) KVV=$PWD/$KVV ;; esac
if ! /usr/bin/time -v true 2>&1 | grep -q "Maximum resident set size"; then
    echo "FAIL: /usr/bin/time is not GNU time: run scripts/install-deps.sh (Debian package 'time')"
    exit 1
fi
tmp="$O/tmp/test_bench_memory.$$"
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT

"$KVV" synth --arch llama -o "$tmp/tiny.gguf" >/dev/null 2>&1 || { fail "synth"; exit 1; }
out="$tmp/out"
BENCH_MEM_MODELS="$tmp/tiny.gguf" BENCH_MEM_JSON="$tmp/m.json" KVV="$KVV" O="$tmp" \
    sh bench/memory.sh >"$out" 2>&1 || fail "bench/memory.sh exit $?"
grep -Eq '^tiny +[0-9.]+ ref +0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+x$' "$out" || fail "no ref row: $(cat "$out")"
grep -Eq '^tiny +[0-9.]+ cpu +0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+x$' "$out" || fail "no cpu row"
grep -q '"engine": "ref", "audit_exit": 0, .*"peak_rss_bytes": [1-9]' "$tmp/m.json" ||
    fail "JSON lacks the ref measurement"
python3 -c "import json,sys; assert len(json.load(open(sys.argv[1]))) == 2" "$tmp/m.json" 2>/dev/null ||
    { command -v python3 >/dev/null && fail "memory JSON does not parse or lacks a row"; }

# a TIME that is not GNU time is an error naming the install step
TIME=/bin/true BENCH_MEM_MODELS="$tmp/tiny.gguf" KVV="$KVV" O="$tmp" sh bench/memory.sh >"$out" 2>&1
[ $? -eq 2 ] || fail "a TIME without -v should exit 2"
grep -q "install-deps" "$out" || fail "no install step named for a missing GNU time"

[ $fails -eq 0 ] || exit 1
echo "ok: bench/memory.sh table and JSON of the audit's peak RSS against the file"
