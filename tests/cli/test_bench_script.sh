#!/bin/sh
# `make bench`'s script (bench/run.sh) on a tiny synthetic model: llama.cpp
# through its plugin beside our engines (kvverify bench --against), and a
# stand-in llama-bench that prints llama-bench's CSV (its real header and
# quoting): the table carries llama.cpp's tok/s, the ratio and its spread,
# the read-bandwidth fraction and llama-bench's figures; the JSON holds our
# runs, the ratios and llama-bench's; a LLAMA_BENCH that is not executable
# is refused. Needs no ../shared. Exit 0 pass, 77 skip, else fail.
. "$(dirname "$0")/lib.sh"
KVV=${KVV:-./kvverify}
O=${O:-build}
[ -x "$KVV" ] || { echo "SKIP: $KVV not built"; exit 77; }
case $KVV in /*) ;; *) KVV=$PWD/$KVV ;; esac
tmp="$O/tmp/test_bench_script.$$"
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT

"$KVV" synth --arch llama -o "$tmp/tiny.gguf" >/dev/null 2>&1 || { fail "synth"; exit 1; }

# stand-in llama-bench: one row per (prompt size, thread) and the tg row
cat >"$tmp/llama-bench" <<'SH'
#!/bin/sh
h='build_commit,build_number,cpu_info,gpu_info,backends,model_filename,model_type,model_size,model_n_params,n_batch,n_ubatch,n_threads,cpu_mask,cpu_strict,poll,type_k,type_v,n_gpu_layers,n_cpu_moe,split_mode,main_gpu,no_kv_offload,flash_attn,devices,tensor_split,tensor_buft_overrides,load_mode,lazy_mode,embeddings,no_op_offload,no_host,fit_target,fit_min_ctx,n_prompt,n_gen,n_depth,test_time,avg_ns,stddev_ns,avg_ts,stddev_ts'
echo "$h"
row() { echo "\"x\",\"1\",\"cpu\",\"\",\"CPU\",\"m\",\"t\",\"1\",\"1\",\"2048\",\"512\",\"$1\",\"0x0\",\"0\",\"50\",\"f16\",\"f16\",\"-1\",\"0\",\"layer\",\"0\",\"0\",\"-1\",\"auto\",\"0.00\",\"none\",\"auto\",\"auto\",\"0\",\"0\",\"0\",\"0\",\"0\",\"$2\",\"$3\",\"0\",\"2026-01-01T00:00:00Z\",\"1\",\"0\",\"$4\",\"0.0\""; }
row 1 128 0 1000.5

row 1 0 64 400.125
SH
chmod +x "$tmp/llama-bench"

out="$tmp/out"
BENCH_MODELS="$tmp/tiny.gguf" BENCH_THREADS=1 BENCH_REPEATS=1 BENCH_JSON="$tmp/b.json" \
    LLAMA_BENCH="$tmp/llama-bench" KVV="$KVV" O="$tmp" sh bench/run.sh >"$out" 2>&1 ||
    fail "bench/run.sh exit $?"
# llama.cpp through the plugin beside our engines: its tok/s, the ratio and its spread
grep -q "^tiny *cpu-fast *1 *pp128 *[0-9.]* *[0-9.]* *[0-9.][0-9.]* *[0-9.]*x *[0-9.]*-[0-9.]* " "$out" ||
    fail "no llama.cpp pp128 figure, ratio and spread in the table"
grep -q "^tiny *cpu-invariant *1 *tg64 .*%" "$out" || fail "no read-bandwidth fraction for tg64"
# llama-bench's figures in their column
grep -q "^tiny *cpu-fast *1 *pp128 .* 1000.5 " "$out" || fail "no llama-bench pp128 figure in the table"
grep -q "^tiny *cpu-invariant *1 *tg64 .* 400.1 " "$out" || fail "no llama-bench tg64 figure in the table"
grep -q '"engine": "llama-bench".*"n_gen": 64.*"tok_s": 400.125' "$tmp/b.json" ||
    fail "JSON lacks llama-bench's tg64 entry"
grep -q '"decode_tok_s"' "$tmp/b.json" || fail "JSON lacks our runs"
grep -q '"ratio_decode"' "$tmp/b.json" || fail "JSON lacks the ratio to llama.cpp"
grep -q '"machine_read_gb_s"' "$tmp/b.json" || fail "JSON lacks the read bandwidth"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$tmp/b.json" 2>/dev/null ||
    { command -v python3 >/dev/null && fail "bench JSON does not parse"; }

# a LLAMA_BENCH that cannot run is an error, not a silent skip
BENCH_MODELS="$tmp/tiny.gguf" BENCH_THREADS=1 LLAMA_BENCH="$tmp/missing" KVV="$KVV" O="$tmp" \
    sh bench/run.sh >"$out" 2>&1
[ $? -eq 2 ] || fail "a missing LLAMA_BENCH should exit 2"
grep -q "not an executable" "$out" || fail "no message for a missing LLAMA_BENCH"

[ $fails -eq 0 ] || exit 1
echo "ok: bench/run.sh table, ratios and JSON with a stand-in llama-bench"
