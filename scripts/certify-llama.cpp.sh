#!/bin/sh
# certify-llama.cpp.sh — the llama.cpp certificate: every check of the
# audit through the llama.cpp plugin, per device (ggml's CPU backend in the
# variant it loads here; Vulkan over Mesa's lavapipe) x cache type (f16,
# f32) x model (stories260K-f32 and a synthetic model of each of the six
# architectures, written by `kvverify synth`), written as markdown with
# each check's verdict, figures and first divergence, and what the
# invariance check found for every micro-batch size and thread count;
# then the batch table (scripts/certify-batch.sh: `kvverify batch` with
# flash attention on/off and kv_unified 0/1, beside ref and cpu; run it
# alone to regenerate only that section).
#
#   sh scripts/certify-llama.cpp.sh [-o docs/certify-llama.cpp.md]
#                                   [--devices "cpu vulkan"] [--caches "f16 f32"]
#                                   [--models "stories llama qwen2 qwen3 gemma2 gemma3 phi3"]
#                                   [-k] [--from DIR]
#
# -k keeps the work folder (the JSON report of every run); --from DIR writes
# the document again from such a folder without running anything.
#
# Needs a built kvverify and llama.cpp (scripts/install-deps.sh, make);
# stories260K from ../shared/models (KVV_SHARED) — without it that row is
# left out and the document says so. The first Vulkan run compiles
# lavapipe's shaders (Mesa caches them); the whole matrix takes tens of
# minutes on two cores, most of it on lavapipe. JSON reports of every run
# stay in the work folder (-k keeps it).
set -u
KVV=${KVV:-./kvverify}
SHARED=${KVV_SHARED:-../shared}
out=docs/certify-llama.cpp.md
devices="cpu vulkan"
caches="f16 f32"
models="stories llama qwen2 qwen3 gemma2 gemma3 phi3"
keep=0
from=""
N_PROMPT=16   # random prompt tokens (seed 1)
N_GEN=16      # greedy / kvdirect decode steps
while [ $# -gt 0 ]; do
    case $1 in
        -o) out=$2; shift 2;;
        --devices) devices=$2; shift 2;;
        --caches) caches=$2; shift 2;;
        --models) models=$2; shift 2;;
        -k) keep=1; shift;;
        --from) from=$2; shift 2;;
        -h|--help) sed -n '2,30p' "$0"; exit 0;;
        *) echo "certify-llama.cpp: unknown option $1" >&2; exit 2;;
    esac
done
command -v jq >/dev/null || { echo "certify-llama.cpp: jq not found (scripts/install-deps.sh)" >&2; exit 2; }
[ -x "$KVV" ] || { echo "certify-llama.cpp: $KVV not built (make)" >&2; exit 2; }
if [ -n "$from" ]; then
    W=$from
    [ -d "$W" ] || { echo "certify-llama.cpp: $W is not a folder" >&2; exit 2; }
else
    W=$(mktemp -d "${TMPDIR:-/tmp}/kvv-certify.XXXXXX")
    [ $keep -eq 1 ] || trap 'rm -rf "$W"' EXIT INT TERM
fi

# ---- the models ----
missing=""
model_path() { # name -> path ("" when absent)
    case $1 in
        stories) [ -r "$SHARED/models/stories260K-f32.gguf" ] && echo "$SHARED/models/stories260K-f32.gguf";;
        *) echo "$W/synth-$1-tiny-f32.gguf";;
    esac
}
for m in $models; do
    case $m in
        stories) [ -n "$(model_path stories)" ] || missing="stories260K-f32 ($SHARED/models not found)";;
        *) [ -n "$from" ] || "$KVV" synth --arch "$m" --seed 1 -o "$(model_path "$m")" >/dev/null || exit 1;;
    esac
done
model_label() { case $1 in stories) echo "stories260K-f32";; *) echo "synth $1-tiny f32";; esac; }

# ---- the runs ----
total=0
for d in $devices; do for c in $caches; do for m in $models; do
    p=$(model_path "$m"); [ -n "$p" ] || continue
    total=$((total + 1))
done; done; done
CHECKS="kv patch greedy invariance kvdirect compare"
i=0
[ -n "$from" ] && i=$total
[ -n "$from" ] || for d in $devices; do for c in $caches; do for m in $models; do
    p=$(model_path "$m"); [ -n "$p" ] || continue
    i=$((i + 1))
    t0=$(date +%s)
    worst=0
    # each check in its own process: a crash (a certification result) costs
    # only that check, recorded as "crash" with its signal
    for k in $CHECKS; do
        jk="$W/$d-$c-$m.$k.json"
        "$KVV" audit "$p" --engine llama.cpp --device "$d" --cache-type "$c" --checks "$k" \
            --random $N_PROMPT -n $N_GEN --json "$jk" -q >"$W/$d-$c-$m.$k.out" 2>&1
        rc=$?
        if [ $rc -gt 128 ] || [ ! -s "$jk" ]; then
            jq -n --arg k "$k" --arg rc "$rc" --arg tail "$(tail -c 300 "$W/$d-$c-$m.$k.out" | tr '\n' ' ')" \
                '{checks: [{name: $k, verdict: "crash", seconds: 0, key_figure:
                  "the process died (exit \($rc)\(if ($rc|tonumber) > 128 then ", signal \(($rc|tonumber) - 128)" else "" end))",
                  message: $tail, controls: [], layers: [], details: {}}]}' > "$jk"
        fi
        [ $rc -gt $worst ] && worst=$rc
    done
    echo "$worst $(($(date +%s) - t0))" > "$W/$d-$c-$m.rc"
    echo "[$i/$total] $d $c $m: worst exit $worst ($(($(date +%s) - t0)) s)" >&2
done; done; done

# ---- one report per run: the checks in the audit's order ----
for d in $devices; do for c in $caches; do for m in $models; do
    [ -r "$W/$d-$c-$m.kv.json" ] || continue
    files=""
    for k in $CHECKS; do files="$files $W/$d-$c-$m.$k.json"; done
    # shellcheck disable=SC2086
    jq -s '(map(select(.engine != null)) | .[0] // {}) + {checks: (map(.checks) | add)}' \
        $files > "$W/$d-$c-$m.json"
done; done; done

# ---- the document ----
first_json=$(ls "$W"/*-*-*.json 2>/dev/null | head -1)
[ -n "$first_json" ] || { echo "certify-llama.cpp: no run produced a report" >&2; exit 1; }
engine_of() { # device -> "version | device | variant"
    for f in "$W/$1"-*-*.json; do
        [ -r "$f" ] && jq -e '.engine.version' "$f" >/dev/null 2>&1 || continue
        jq -r '.engine | "\(.version) | \(.device) | \(.variant) | flash attention \(.flash_attn) | \(.kernels)"' "$f"
        return
    done
}
{
cat <<EOF
# Certificate: llama.cpp through kvverify

*Generated by \`sh scripts/certify-llama.cpp.sh\` on $(date -u +%Y-%m-%d) — do not edit by hand;
run the script again. kvverify $(git rev-parse --short HEAD 2>/dev/null || echo "?"),
machine: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) cores.*

What was run: \`kvverify audit MODEL --engine llama.cpp --device D --cache-type C --random
$N_PROMPT -n $N_GEN\` — every check of the audit (docs/checks.md) on llama.cpp with
llama.cpp's defaults (flash attention auto, weight repacking on, micro-batch = the whole
prompt, 1 thread; invariance also with 2 threads and micro-batches of 1, 2 and 7), a
random prompt of $N_PROMPT tokens (seed 1) and $N_GEN greedy steps. Negative controls
llama.cpp cannot plant are planted by kvverify and named in each control line
(host-kv-ulp, host-residual).

| device | llama.cpp | device as ggml names it | CPU variant loaded | flash attention | build |
|---|---|---|---|---|---|
EOF
for d in $devices; do
    e=$(engine_of "$d")
    [ -n "$e" ] && echo "$e" | awk -F' [|] ' -v d="$d" '{printf "| %s | %s | %s | %s | %s | %s |\n", d, $1, $2, $3, $4, $5}'
done
[ -n "$missing" ] && printf '\nNot run: %s.\n' "$missing"
cat <<EOF

CUDA: \`sh scripts/fetch-llama-cpp.sh --cuda\` (ggml's CUDA backend, ~143 MB, and its CUDA
runtime package) then \`kvverify audit MODEL --engine llama.cpp --device cuda\`, or this
script with \`--devices "cpu vulkan cuda"\`. Not run here: this machine has no NVIDIA GPU
(\`--device cuda\` exits 77, "no CUDA device"); no CUDA result is claimed.

Verdicts: PASS = bit-exact (every comparison equal, every control detected); FAIL = a
difference (the figure says how many elements and the largest ULP distance; 1 ULP of
f16 = 8192 f32 ULPs); SKIPPED = unsupported by this engine (the reason is listed
below the run); CRASH = the process died (each check runs in a process of its own, so a
crash costs only that check; issue 18 brings crash isolation to kvverify itself). compare
is ref vs llama.cpp with the default tolerance 1e-3 (max
|dlogit|/max|logit|); tests/cli/test_compare_llama_peer.sh holds llama.cpp with flash
attention off to the conformance tolerances on the 13 peer models.

## Verdicts

| device | cache | model | kv | patch | greedy | invariance | kvdirect | compare | worst exit | time |
|---|---|---|---|---|---|---|---|---|---|---|
EOF
for d in $devices; do for c in $caches; do for m in $models; do
    j="$W/$d-$c-$m.json"; [ -r "$W/$d-$c-$m.rc" ] || continue
    read -r rc secs < "$W/$d-$c-$m.rc"
    if [ -r "$j" ]; then
        cells=$(jq -r '[.checks[] | (.verdict | ascii_upcase)] | join(" | ")' "$j")
    else
        cells="no report: $(head -c 120 "$W/$d-$c-$m.out" | tr '\n|' '  ') | | | | |"
    fi
    echo "| $d | $c | $(model_label "$m") | $cells | $rc | ${secs} s |"
done; done; done
cat <<EOF

## Batch shape and threads: what breaks, by how much

Each cell: elements differing from the whole prompt in one call (K, V, residuals
entering every layer, logits, summed) and the largest ULP distance; **0** = bit-equal.
chunk=N = the prompt fed N tokens per call; ubatch=N = one call, llama.cpp splitting it
into micro-batches of N; prefill+decode = the first half as one call, then one token
per call; threads=2 all / chunk=1 = one call / token by token with 2 threads (compared
with the 1-thread one-call baseline too, so threads=2 chunk=1 equal to chunk=1 means the
threads add nothing).

EOF
for d in $devices; do for c in $caches; do
    ls "$W/$d-$c-"*.invariance.json >/dev/null 2>&1 || continue
    echo "### $d, $c cache"
    echo
    hdr="| variant |"; sep="|---|"
    for m in $models; do [ -r "$W/$d-$c-$m.json" ] && { hdr="$hdr $(model_label "$m") |"; sep="$sep---|"; }; done
    echo "$hdr"; echo "$sep"
    first=$(ls "$W/$d-$c-"*.invariance.json | head -1)
    jq -r '.checks[] | select(.name == "invariance") | .layers[] | .what
           | sub("^(K|V|residual|logits) "; "")' "$first" | awk '!seen[$0]++' > "$W/variants"
    while IFS= read -r v; do
        row="| $v |"
        for m in $models; do
            j="$W/$d-$c-$m.json"; [ -r "$j" ] || continue
            cell=$(jq -r --arg v "$v" '[.checks[] | select(.name == "invariance") | .layers[]
                    | select((.what | sub("^(K|V|residual|logits) "; "")) == $v)]
                    | if length == 0 then "—" else
                      (map(.differing) | add) as $n | (map(.compared) | add) as $t
                      | (map(.max_ulp // 0) | max) as $u
                      | if $n == 0 then "**0**" else "\($n)/\($t) (max \($u))" end end' "$j")
            row="$row $cell |"
        done
        echo "$row"
    done < "$W/variants"
    echo
done; done
cat <<EOF
## Every run: figures, first divergence, controls

EOF
for d in $devices; do for c in $caches; do for m in $models; do
    j="$W/$d-$c-$m.json"; [ -r "$W/$d-$c-$m.rc" ] || continue
    echo "### $d, $c, $(model_label "$m")"
    echo
    if [ ! -r "$j" ]; then
        echo "No report (exit $(cut -d' ' -f1 "$W/$d-$c-$m.rc")):"; echo; echo '```'; head -20 "$W/$d-$c-$m.out"; echo '```'; echo
        continue
    fi
    jq -r '.checks[] |
        "- **\(.name)** \(.verdict | ascii_upcase) (\(.seconds * 100 | round / 100) s): \(.key_figure)"
        + (if .verdict == "crash" then "\n  - output: `\(.message)`" else "" end)
        + (if .first_mismatch then "\n  - first divergence: `\(.first_mismatch.text)`" else "" end)
        + (if .message != "" and .verdict != "pass" and .verdict != "crash" then "\n  - \(.message)" else "" end)
        + ([.details.unsupported_runs[]? | "\n  - unsupported here: \(.policy) budget \(.budget): \(.reason)"] | join(""))
        + ([.controls[] | "\n  - control: \(.name) — \(if .detected then "detected" else "NOT DETECTED" end) (\(.detail))"] | join(""))' "$j"
    echo
done; done; done
} > "$out"
echo "wrote $out ($i runs; reports in $W)" >&2
# the batch table (issue 33): its own runs, appended between its markers
[ -n "$from" ] || KVV="$KVV" KVV_SHARED="$SHARED" sh "$(dirname "$0")/certify-batch.sh" -o "$out" \
    --devices "$devices"
