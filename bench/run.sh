#!/bin/sh
# bench/run.sh — `make bench`: prompt (128 and 512 tokens) and decode (64
# tokens) throughput of the reference engine, cpu fast and cpu invariant,
# with 1 and 2 threads, on stories260K (when ../shared is present) and on
# synthetic smollm2-135m models in F32 and Q8_0 (`kvverify synth`). Prints
# the machine's measured roofline (OpenBLAS sgemm GFLOP/s, one-thread read
# GB/s), then a table with the model's roofline figures (FLOPs and weight
# bytes per token, the GFLOP/s or GB/s achieved), and writes every
# measurement as JSON.
#
# When LLAMA_BENCH names llama.cpp's llama-bench, each model is measured
# with it in the same run, just before our engines (same prompt/decode
# sizes and threads; both decode from an empty cache), and the ratios
# ours / llama.cpp are printed and its figures written to the JSON.
#
# Environment:
#   KVV            kvverify binary (default $O/kvverify, else ./kvverify)
#   O              build folder (default build): synthetic models go to $O/bench/
#   BENCH_JSON     JSON output (default $O/bench.json)
#   BENCH_REPEATS  repeats per measurement, median reported (default 3)
#   BENCH_REF_REPEATS  repeats for the (slow, scalar) reference engine (default 1)
#   BENCH_THREADS  thread counts (default "1 2")
#   BENCH_MODELS   space-separated model files to use instead of the default set
#   LLAMA_BENCH    path to llama-bench (optional)
#   KVV_SHARED     location of the shared test files (default ../shared)
set -u
O=${O:-build}
if [ -z "${KVV:-}" ]; then
    if [ -x "$O/kvverify" ]; then KVV=$O/kvverify; else KVV=./kvverify; fi
fi
[ -x "$KVV" ] || { echo "bench: $KVV not found (run make first)" >&2; exit 2; }
SHARED=${KVV_SHARED:-../shared}
JSON=${BENCH_JSON:-$O/bench.json}
REPEATS=${BENCH_REPEATS:-3}
REF_REPEATS=${BENCH_REF_REPEATS:-1}
THREADS=${BENCH_THREADS:-"1 2"}
mkdir -p "$O/bench"
tmp="$O/bench/tmp.$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT INT TERM

# ---------------------------------------------------------------- models
if [ -n "${BENCH_MODELS:-}" ]; then
    models=$BENCH_MODELS
else
    models=""
    if [ -f "$SHARED/models/stories260K-f32.gguf" ]; then
        models="$SHARED/models/stories260K-f32.gguf"
    else
        echo "bench: $SHARED/models absent: skipping stories260K"
    fi
    for t in f32 q8_0; do
        f="$O/bench/smollm2-135m-$t.gguf"
        if [ ! -f "$f" ]; then
            echo "bench: writing $f (kvverify synth --arch llama --shape smollm2-135m --type $t)"
            "$KVV" synth --arch llama --shape smollm2-135m --type "$t" -o "$f" || exit 2
        fi
        models="$models $f"
    done
fi

# field NAME FILE: a number from kvverify bench's compact JSON
field() { sed -n "s/.*\"$1\": *\([-0-9.eE+]*\).*/\1/p" "$2" | head -n 1; }

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
# llama_run MODEL: measure MODEL with llama-bench (just before our engines
# on the same model, so both see the same machine load)
llama_run() {
    [ -n "${LLAMA_BENCH:-}" ] || return 0
    tl=$(echo "$THREADS" | tr ' ' ',')
    echo "bench: llama-bench on $(basename "$1")"
    "$LLAMA_BENCH" -m "$1" -p 128,512 -n 64 -t "$tl" -r "$REPEATS" -o csv \
        >"$tmp/llama-$(basename "$1").csv" 2>"$tmp/llama.log" ||
        echo "bench: llama-bench failed on $1: $(tail -n 1 "$tmp/llama.log")"
}
if [ -n "${LLAMA_BENCH:-}" ] && [ ! -x "$LLAMA_BENCH" ]; then
    echo "bench: LLAMA_BENCH=$LLAMA_BENCH is not an executable file" >&2
    exit 2
fi

# ---------------------------------------------------------------- machine roofline
first_model=$(echo $models | cut -d' ' -f1)
for th in $THREADS; do
    "$KVV" bench "$first_model" --prompt 1 --gen 0 --repeats 1 --threads "$th" --roofline \
        2>/dev/null | grep '^machine roofline' || echo "bench: roofline measurement failed"
done

# ---------------------------------------------------------------- our engines
echo "[" >"$tmp/all.json"
first=1
printf '\n%-20s %-13s %3s %6s %9s %5s %9s %9s %10s %9s %9s %9s' model engine thr test tok/s \
    cpu tok/cpu-s llama "ours/llama" FLOP/tok bytes/tok achieved
echo
line() { # model label threads test tok/s flop bytes achieved llama-prompt llama-gen util
    lts=$(llama_ts "$1" "$9" "${10}" "$3")
    [ -n "$lts" ] && lts=$(awk -v a="$lts" 'BEGIN { printf "%.1f", a }')
    ratio=""
    [ -n "$lts" ] && ratio=$(awk -v a="$5" -v b="$lts" 'BEGIN { if (b > 0) printf "%.2fx", a / b }')
    per=$(awk -v a="$5" -v u="${11}" 'BEGIN { if (u > 0) printf "%.1f", a / u; else print "-" }')
    printf '%-20s %-13s %3s %6s %9.1f %5.2f %9s %9s %10s %9.3g %9.3g %9s\n' \
        "$(basename "$1" .gguf)" "$2" "$3" "$4" "$5" "${11}" "$per" "${lts:--}" "${ratio:--}" \
        "$6" "$7" "$8"
}
for m in $models; do
    llama_run "$m"
    for th in $THREADS; do # llama-bench's figures into the JSON as well
        for run in "128 0" "512 0" "0 64"; do
            set -- $run
            lts=$(llama_ts "$m" "$1" "$2" "$th")
            [ -n "$lts" ] || continue
            [ $first -eq 1 ] || echo "," >>"$tmp/all.json"
            first=0
            printf '{"engine": "llama-bench", "model": "%s", "threads": %s, "n_prompt": %s, "n_gen": %s, "tok_s": %s}\n' \
                "$m" "$th" "$1" "$2" "$lts" >>"$tmp/all.json"
        done
    done
    for cfg in ref cpu-fast cpu-invariant; do
        case $cfg in
        ref) eng=ref mode=exact rep=$REF_REPEATS thr_list=1 ;;
        cpu-fast) eng=cpu mode=fast rep=$REPEATS thr_list=$THREADS ;;
        cpu-invariant) eng=cpu mode=invariant rep=$REPEATS thr_list=$THREADS ;;
        esac
        for th in $thr_list; do
            for run in "128 64" "512 0"; do
                set -- $run
                out="$tmp/r.json"
                # OPENBLAS_NUM_THREADS=1: the cpu engine runs sgemm inside its own pool, and
                # OpenBLAS's idle threads would otherwise spin at process start
                if ! OPENBLAS_NUM_THREADS=1 "$KVV" bench "$m" --engine $eng --mode $mode --threads "$th" --prompt "$1" \
                    --gen "$2" --repeats "$rep" --json >"$out" 2>"$tmp/err"; then
                    echo "bench: $cfg threads $th on $m failed: $(head -n 1 "$tmp/err")"
                    continue
                fi
                [ $first -eq 1 ] || echo "," >>"$tmp/all.json"
                first=0
                cat "$out" >>"$tmp/all.json"
                pp=$(field prompt_tok_s "$out"); tg=$(field decode_tok_s "$out")
                fp=$(field flops_per_prompt_token "$out"); ft=$(field flops_per_decode_token "$out")
                bp=$(field weight_bytes_per_prompt_token "$out")
                bt=$(field weight_bytes_per_decode_token "$out")
                gf=$(field prompt_gflop_s "$out"); gb=$(field decode_gb_s "$out")
                pu=$(field prompt_cpu_util "$out"); tu=$(field decode_cpu_util "$out")
                line "$m" "$cfg" "$th" "pp$1" "$pp" "$fp" "$bp" "$(printf '%.1fGF/s' "$gf")" "$1" 0 "$pu"
                [ "$2" -gt 0 ] &&
                    line "$m" "$cfg" "$th" "tg$2" "$tg" "$ft" "$bt" "$(printf '%.1fGB/s' "$gb")" 0 "$2" "$tu"
            done
        done
    done
done
echo "]" >>"$tmp/all.json"
mv "$tmp/all.json" "$JSON"
echo
echo "pp = prompt (one forward call, logits of the last row), tg = decode (one call per"
echo "token); tok/s is the median of the repeats; FLOP/tok and bytes/tok are the model's"
echo "projections and weight bytes per token (the roofline: prompt is compute-bound,"
echo "decode reads every weight once per token). cpu = process CPU time / wall time"
echo "(below the thread count when other processes held the cores); tok/cpu-s = tok/s / cpu,"
echo "the rate per CPU-second. JSON: $JSON"
