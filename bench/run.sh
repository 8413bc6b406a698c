#!/bin/sh
# bench/run.sh — `make bench`: prompt (128 tokens) and decode (64 tokens)
# throughput of cpu fast and cpu invariant, each measured side by side with
# llama.cpp in the same process (`kvverify bench --against llama.cpp`: the
# same file, threads, prompt and tokens, alternating repeat by repeat), on
# synthetic models kvverify writes itself (`kvverify synth`): smollm2-135m and
# qwen3-0.6b in F32, Q8_0, Q4_0, Q4_K_M, Q5_K_M and Q6_K. With every decode the
# machine's streaming read bandwidth is measured in the same run (--roofline),
# and decode's weight bytes per second are printed against it. Prints one
# table and writes every measurement as JSON.
#
# When LLAMA_BENCH names llama.cpp's llama-bench, each model is also measured
# with it, just before our engines (same sizes and threads); its figures get
# a column and go to the JSON.
#
# Environment:
#   KVV            kvverify binary (default $O/kvverify, else ./kvverify)
#   O              build folder (default build): synthetic models go to $O/bench/
#   BENCH_JSON     JSON output (default $O/bench.json)
#   BENCH_REPEATS  repeats per measurement, median reported (default 3)
#   BENCH_THREADS  thread counts (default 2)
#   BENCH_SHAPES   synth shapes (default "smollm2-135m qwen3-0.6b")
#   BENCH_TYPES    synth types (default "f32 q8_0 q4_0 q4_k_m q5_k_m q6_k")
#   BENCH_MODELS   space-separated model files to use instead of the synthesized set
#   BENCH_MODES    cpu modes (default "fast invariant")
#   BENCH_GEN      decoded tokens (default 64)
#   BENCH_AGAINST  engine measured beside ours (default llama.cpp when its plugin
#                  is built, else none; "none" to skip)
#   BENCH_REF      1: also the reference engine, one thread (slow, scalar)
#   LLAMA_BENCH    path to llama-bench (optional)
#   KVV_SHARED     location of the shared test files (default ../shared)
set -u
O=${O:-build}
if [ -z "${KVV:-}" ]; then
    if [ -x "$O/kvverify" ]; then KVV=$O/kvverify; else KVV=./kvverify; fi
fi
[ -x "$KVV" ] || { echo "bench: $KVV not found (run make first)" >&2; exit 2; }
JSON=${BENCH_JSON:-$O/bench.json}
REPEATS=${BENCH_REPEATS:-3}
THREADS=${BENCH_THREADS:-2}
SHAPES=${BENCH_SHAPES:-"smollm2-135m qwen3-0.6b"}
TYPES=${BENCH_TYPES:-"f32 q8_0 q4_0 q4_k_m q5_k_m q6_k"}
MODES=${BENCH_MODES:-"fast invariant"}
GEN=${BENCH_GEN:-64}
if [ -z "${BENCH_AGAINST:-}" ]; then
    if [ -r "$(dirname "$(readlink -f "$KVV")")/plugins/llama.cpp.so" ]; then
        BENCH_AGAINST=llama.cpp
    else
        BENCH_AGAINST=none
        echo "bench: no llama.cpp plugin beside $KVV (plugins/llama.cpp.so): our engines alone"
    fi
fi
mkdir -p "$O/bench"
tmp="$O/bench/tmp.$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT INT TERM

# ---------------------------------------------------------------- models
if [ -n "${BENCH_MODELS:-}" ]; then
    models=$BENCH_MODELS
else
    models=""
    for s in $SHAPES; do
        for t in $TYPES; do
            f="$O/bench/$s-$t.gguf"
            if [ ! -f "$f" ]; then
                echo "bench: writing $f (kvverify synth --shape $s --type $t)"
                "$KVV" synth --shape "$s" --type "$t" -o "$f" >/dev/null || exit 2
            fi
            models="$models $f"
        done
    done
fi

# field NAME FILE: the first number called NAME in kvverify bench's compact JSON
field() { grep -o "\"$1\": *[-0-9.eE+]*" "$2" | head -n 1 | sed 's/.*: *//'; }
# against NAME FILE: the field NAME of the --against engine ("against" object)
against() { sed -n "s/.*\"against\": *{\(.*\)/\1/p" "$2" | grep -o "\"$1\": *[-0-9.eE+]*" | head -n 1 |
    sed 's/.*: *//'; }

# spread NAME FILE 1|$: the smallest (1) or largest ($) number of the array NAME
spread() {
    sed -n "s/.*\"$1\": *\[\([^]]*\)\].*/\1/p" "$2" | tr ',' '\n' | sed 's/ //g' | grep . |
        sort -g | sed -n "$3p"
}

# ---------------------------------------------------------------- llama-bench
# llama_ts MODEL N_PROMPT N_GEN THREADS -> avg tokens/s or "" (from its CSV)
llama_ts() {
    csv="$tmp/llama-$(basename "$1").csv"
    [ -f "$csv" ] || return 0
    awk -F, -v p="$2" -v g="$3" -v t="$4" '
        NR == 1 { for (i = 1; i <= NF; i++) { h = $i; gsub(/"/, "", h); col[h] = i }; next }
        { np = $col["n_prompt"]; ng = $col["n_gen"]; th = $col["n_threads"]; ts = $col["avg_ts"]
          gsub(/"/, "", np); gsub(/"/, "", ng); gsub(/"/, "", th); gsub(/"/, "", ts)
          if (np == p && ng == g && th == t) { print ts; exit } }' "$csv"
}
llama_run() {
    [ -n "${LLAMA_BENCH:-}" ] || return 0
    tl=$(echo "$THREADS" | tr ' ' ',')
    echo "bench: llama-bench on $(basename "$1")"
    "$LLAMA_BENCH" -m "$1" -p 128 -n "$GEN" -t "$tl" -r "$REPEATS" -o csv \
        >"$tmp/llama-$(basename "$1").csv" 2>"$tmp/llama.log" ||
        echo "bench: llama-bench failed on $1: $(tail -n 1 "$tmp/llama.log")"
}
if [ -n "${LLAMA_BENCH:-}" ] && [ ! -x "$LLAMA_BENCH" ]; then
    echo "bench: LLAMA_BENCH=$LLAMA_BENCH is not an executable file" >&2
    exit 2
fi

# ---------------------------------------------------------------- the runs
echo "[" >"$tmp/all.json"
first=1
add_json() { [ $first -eq 1 ] || echo "," >>"$tmp/all.json"; first=0; cat "$1" >>"$tmp/all.json"; }
printf '\n%-22s %-13s %3s %6s %9s %5s %9s %9s %7s %11s %8s %7s\n' model engine thr test tok/s cpu \
    "$BENCH_AGAINST" ratio "spread" llama-bench "GB/s" "of read"
line() { # model label threads test ours theirs ratio lo hi util lbench gbs read-fraction
    ratio=$7
    [ -n "$ratio" ] && ratio=$(awk -v r="$ratio" 'BEGIN { printf "%.2fx", r }')
    spread=""
    [ -n "$8" ] && spread=$(awk -v a="$8" -v b="$9" 'BEGIN { printf "%.2f-%.2f", a, b }')
    th6=$(awk -v a="$6" 'BEGIN { if (a != "") printf "%.1f", a }')
    lb=${11}
    [ -n "$lb" ] && lb=$(awk -v a="$lb" -v b="$5" 'BEGIN { printf "%.1f %.2fx", a, b / a }')
    gbs=${12}
    pct=""
    [ -n "$gbs" ] && [ -n "${13}" ] &&
        pct=$(awk -v f="${13}" 'BEGIN { printf "%.0f%%", 100 * f }')
    [ -n "$gbs" ] && gbs=$(awk -v g="$gbs" 'BEGIN { printf "%.1f", g }')
    printf '%-22s %-13s %3s %6s %9.1f %5.2f %9s %9s %7s %11s %8s %7s\n' \
        "$(basename "$1" .gguf)" "$2" "$3" "$4" "$5" "${10}" "${th6:--}" "${ratio:--}" \
        "${spread:--}" "${lb:--}" "${gbs:--}" "${pct:--}"
}
for m in $models; do
    llama_run "$m"
    for th in $THREADS; do
        for kind in pp tg; do
            set -- $([ $kind = pp ] && echo "128 0" || echo "0 $GEN")
            lts=$(llama_ts "$m" "$1" "$2" "$th")
            [ -n "$lts" ] || continue
            [ $first -eq 1 ] || echo "," >>"$tmp/all.json"
            first=0
            printf '{"engine": "llama-bench", "model": "%s", "threads": %s, "n_prompt": %s, "n_gen": %s, "tok_s": %s}\n' \
                "$m" "$th" "$1" "$2" "$lts" >>"$tmp/all.json"
        done
    done
    cfgs=""
    for mode in $MODES; do cfgs="$cfgs cpu-$mode"; done
    [ "${BENCH_REF:-0}" = 1 ] && cfgs="ref $cfgs"
    for cfg in $cfgs; do
        case $cfg in
        ref) eng=ref mode=exact thr_list=1 ag="" ;;
        cpu-*) eng=cpu mode=${cfg#cpu-} thr_list=$THREADS ag=$BENCH_AGAINST ;;
        esac
        for th in $thr_list; do
            out="$tmp/r.json"
            set -- --against "$ag"
            [ -n "$ag" ] && [ "$ag" != none ] || set --
            # OPENBLAS_NUM_THREADS=1: the cpu engine runs sgemm inside its own pool, and
            # OpenBLAS's idle threads would otherwise spin at process start
            if ! OPENBLAS_NUM_THREADS=1 "$KVV" bench "$m" --engine $eng --mode $mode --threads "$th" \
                --prompt 128 --gen "$GEN" --repeats "$REPEATS" --roofline "$@" --json \
                >"$out" 2>"$tmp/err"; then
                echo "bench: $cfg threads $th on $m failed: $(grep -v '^kvverify bench: \[' "$tmp/err" | head -n 1)"
                continue
            fi
            add_json "$out"
            pp=$(field prompt_tok_s "$out"); tg=$(field decode_tok_s "$out")
            pu=$(field prompt_cpu_util "$out"); tu=$(field decode_cpu_util "$out")
            gb=$(field decode_gb_s "$out"); rf=$(field decode_read_fraction "$out")
            app=$(against prompt_tok_s "$out"); atg=$(against decode_tok_s "$out")
            rp=$(field ratio_prompt "$out"); rt=$(field ratio_decode "$out")
            # the range of the per-repeat ratios
            rp_lo=$(spread ratio_prompt_all "$out" 1); rp_hi=$(spread ratio_prompt_all "$out" '$')
            rt_lo=$(spread ratio_decode_all "$out" 1); rt_hi=$(spread ratio_decode_all "$out" '$')
            line "$m" "$cfg" "$th" pp128 "$pp" "$app" "$rp" "$rp_lo" "$rp_hi" "$pu" \
                "$(llama_ts "$m" 128 0 "$th")" "" ""
            line "$m" "$cfg" "$th" "tg$GEN" "$tg" "$atg" "$rt" "$rt_lo" "$rt_hi" "$tu" \
                "$(llama_ts "$m" 0 "$GEN" "$th")" "$gb" "$rf"
        done
    done
done
echo "]" >>"$tmp/all.json"
mv "$tmp/all.json" "$JSON"
echo
echo "pp128 = prompt (one forward call, logits of the last row), tg$GEN = decode (one call"
echo "per token, from an empty cache); tok/s: median of $REPEATS repeats. $BENCH_AGAINST: the same"
echo "measurement of that engine in the same process, alternating with ours; ratio = ours /"
echo "its (medians), spread = the range of the per-repeat ratios. cpu = process CPU time /"
echo "wall time (below the thread count when other processes held the cores). GB/s = weight"
echo "bytes per decoded token x tok/s; of read = that against a streaming read loop run with"
echo "the same threads beside each repeat (best of 3 passes), repeat by repeat, median."
echo "JSON: $JSON"
