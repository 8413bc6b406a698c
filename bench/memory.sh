#!/bin/sh
# bench/memory.sh — `make bench`, second part: the one-shot audit's peak
# resident memory (GNU time's "Maximum resident set size") against the size
# of the model file, on synthetic models of growing shape (`kvverify synth
# --shape S --type q8_0`, written to $O/bench/ on first use), with the
# reference engine (the audit's default) and the cpu engine. The model file
# is mapped, so the pages of weights an engine reads count once, in the
# file's own size; what an engine copies counts on top.
#
# Environment:
#   KVV                kvverify binary (default $O/kvverify, else ./kvverify)
#   O                  build folder (default build): models go to $O/bench/
#   BENCH_MEM_SHAPES   synth shapes (default "smollm2-135m qwen3-0.6b"; the
#                      table in docs/reference-engine.md adds llama-3.2-1b and
#                      gemma3-4b: 1.1 and 3.5 GB files, and the gemma3-4b audit
#                      takes about 20 minutes on this 2-core machine)
#   BENCH_MEM_TYPE     synth type (default q8_0)
#   BENCH_MEM_MODELS   model files to use instead of synthesized shapes
#   BENCH_MEM_ENGINES  engines to audit with (default "ref cpu")
#   BENCH_MEM_ARGS     extra audit options (default none)
#   BENCH_MEM_JSON     JSON output (default $O/bench-memory.json)
#   TIME               GNU time (default /usr/bin/time: Debian package `time`,
#                      installed by scripts/install-deps.sh)
set -u
O=${O:-build}
if [ -z "${KVV:-}" ]; then
    if [ -x "$O/kvverify" ]; then KVV=$O/kvverify; else KVV=./kvverify; fi
fi
[ -x "$KVV" ] || { echo "bench/memory: $KVV not found (run make first)" >&2; exit 2; }
TIME=${TIME:-/usr/bin/time}
if ! "$TIME" -v true 2>&1 | grep -q "Maximum resident set size"; then
    echo "bench/memory: $TIME is not GNU time (install the Debian package 'time':" \
        "scripts/install-deps.sh)" >&2
    exit 2
fi
SHAPES=${BENCH_MEM_SHAPES:-"smollm2-135m qwen3-0.6b"}
TYPE=${BENCH_MEM_TYPE:-q8_0}
ENGINES=${BENCH_MEM_ENGINES:-"ref cpu"}
JSON=${BENCH_MEM_JSON:-$O/bench-memory.json}
mkdir -p "$O/bench"
tmp="$O/bench/mem.$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT INT TERM

if [ -n "${BENCH_MEM_MODELS:-}" ]; then
    models=$BENCH_MEM_MODELS
else
    models=""
    for s in $SHAPES; do
        f="$O/bench/$s-$TYPE.gguf"
        if [ ! -f "$f" ]; then
            echo "bench/memory: writing $f (kvverify synth --shape $s --type $TYPE)"
            "$KVV" synth --shape "$s" --type "$TYPE" -o "$f" >/dev/null || exit 2
        fi
        models="$models $f"
    done
fi

echo "[" >"$tmp/all.json"
first=1
printf '\n%-24s %9s %-6s %5s %8s %8s %11s %9s\n' model "file MB" engine exit "wall s" "cpu s" "peak RSS MB" \
    "RSS/file"
for m in $models; do
    bytes=$(wc -c <"$m")
    for eng in $ENGINES; do
        echo "bench/memory: $TIME -v $KVV audit $m --engine $eng -q ${BENCH_MEM_ARGS:-}" >&2
        # word splitting of BENCH_MEM_ARGS is wanted: it holds options
        # shellcheck disable=SC2086
        "$TIME" -v "$KVV" audit "$m" --engine "$eng" -q ${BENCH_MEM_ARGS:-} \
            >"$tmp/audit.out" 2>"$tmp/time.err"
        code=$?
        kb=$(sed -n 's/.*Maximum resident set size (kbytes): *\([0-9]*\).*/\1/p' "$tmp/time.err")
        wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): *//p' "$tmp/time.err" |
            awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.1f", s }')
        cpu=$(sed -n 's/.*\(User\|System\) time (seconds): *//p' "$tmp/time.err" |
            awk '{ s += $1 } END { printf "%.1f", s }')
        if [ -z "$kb" ]; then
            echo "bench/memory: no measurement for $m ($eng): $(tail -n 1 "$tmp/time.err")"
            continue
        fi
        [ "$code" -eq 0 ] || echo "bench/memory: audit of $m with $eng exited $code:" \
            "$(tail -n 2 "$tmp/audit.out" | head -n 1)"
        ratio=$(awk -v k="$kb" -v b="$bytes" 'BEGIN { printf "%.2f", k * 1024 / b }')
        printf '%-24s %9.1f %-6s %5s %8s %8s %11.1f %8sx\n' "$(basename "$m" .gguf)" \
            "$(awk -v b="$bytes" 'BEGIN { print b / 1e6 }')" "$eng" "$code" "$wall" "$cpu" \
            "$(awk -v k="$kb" 'BEGIN { print k * 1024 / 1e6 }')" "$ratio"
        [ $first -eq 1 ] || echo "," >>"$tmp/all.json"
        first=0
        printf '{"model": "%s", "file_bytes": %s, "engine": "%s", "audit_exit": %s, "audit_seconds": %s, "audit_cpu_seconds": %s, "peak_rss_bytes": %s, "rss_per_file_byte": %s}\n' \
            "$m" "$bytes" "$eng" "$code" "$wall" "$cpu" "$((kb * 1024))" "$ratio" >>"$tmp/all.json"
    done
done
echo "]" >>"$tmp/all.json"
mv "$tmp/all.json" "$JSON"
echo
echo "peak RSS = GNU time's maximum resident set size of the whole audit (every check,"
echo "controls included); the mapped model file counts once, as its pages are read."
echo "wall s / cpu s: the audit's elapsed and user + system seconds (cpu is the steadier"
echo "figure on a shared machine)."
echo "Target (issue 17): <= 1.3x the file for the audit of a gemma3-4b Q8_0 model. JSON: $JSON"
