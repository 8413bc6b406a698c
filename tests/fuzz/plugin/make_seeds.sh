#!/bin/sh
# make_seeds.sh — writes the seed corpus of fuzz_plugin (tests/fuzz/corpus/plugin/).
# Each seed is byte 0 (fuzz_plugin.c: the engine options) and the plugin's
# script (fuzzed_plugin.c): one byte per decision, in the order the host calls
# the plugin — the table, open, describe, the first forward, kv_read of each
# of the 3 layers, the next forward... (a misbehaviour may read more bytes
# for its details). 0 and the end of the script mean "behave".
#   sh tests/fuzz/plugin/make_seeds.sh [DIR]
set -eu
dir=${1:-tests/fuzz/corpus/plugin}
mkdir -p "$dir"
seed() { # name byte...
    name=$1; shift
    : > "$dir/$name"
    for b in "$@"; do printf "\\$(printf %03o "$b")" >> "$dir/$name"; done
}
wild() { # name kind layer n n_keys: a forward calling hook KIND with these arguments
    name=$1 kind=$2 layer=$3 n=$4 keys=$5
    : > "$dir/$name"
    for b in 0 0 0 0 3 "$layer" "$n" "$keys" "$kind"; do
        printf "\\$(printf %03o "$b")" >> "$dir/$name"
    done
    i=0; while [ $i -lt 128 ]; do printf '\003' >> "$dir/$name"; i=$((i + 1)); done
    printf '\000' >> "$dir/$name"
}
seed good-all-caps 0
seed regress-logits-null 0 0 0 0 0 0 0 0 0 0
seed good-host-controls 3
seed good-ubatch-threads 56
seed residual-write-refused 4 0 8 251 127 0
seed table-null 0 1
seed table-abi-major-2 0 2 2
seed table-short-struct 0 4 1 10
seed table-long-struct 0 4 0 200
seed regress-table-size-mid-slot 0 4 1 21 8 207 113 0
seed table-bad-name 0 8 2
seed table-no-devices 0 16 1
seed table-no-forward 0 32 4
seed table-no-kv-read 0 64 4
seed open-fail-no-nul 0 0 1 1 99 1
seed open-fail-no-message 0 0 1 0 250 2
seed open-no-engine 0 0 2
seed open-caps-arbitrary 0 0 8 255 127 129
seed open-caps-no-kv-read 0 0 8 239 127 0
seed open-caps-forward-only 0 0 8 0 0 0
seed open-caps-no-evict 0 0 8 255 5 0
seed open-dims-wrong 0 0 16 3 1
seed open-info-arbitrary 0 0 96 252 9 2 255 7
seed regress-open-ubatch-negative 0 0 32 0 0 251 250
seed open-log-null 0 0 4 1 1
seed describe-no-nul 0 0 0 1
seed describe-bytes 0 0 0 2 65 66 67
seed forward-fail-no-nul 0 0 0 0 1 153 1
seed forward-nothing-written 0 0 0 0 2
seed forward-skip-hooks 0 0 0 0 4 0
seed regress-forward-none-writes-logits 0 0 0 0 0 0 0 0 5
seed forward-short-logits 0 0 0 0 6 5
seed forward-nan-logits 0 0 0 0 7 3
seed forward-inf-logits 0 0 0 0 7 2
seed forward-past-end 0 0 0 0 8 63
seed forward-stale-logits 0 0 0 0 9 0 17
seed forward-late-failure 0 0 0 0 10 6 0
wild hook-residual-layer 0 127 5 0
wild regress-hook-residual-rows 0 0 100 0
wild regress-hook-residual-negative 0 1 255 0
wild hook-kv-layer 1 3 1 0
wild regress-hook-attn-keys 2 0 1 100
wild hook-attn-out-rows 3 0 50 0
wild hook-select-head 4 0 100 1
seed regress-kv-read-fail 0 0 0 0 0 1 7 0
seed kv-read-short 0 0 0 0 0 2 1
seed kv-read-past-end 0 0 0 0 0 4 255
seed kv-read-stale 0 0 0 0 0 0 0 5 0 9
seed kv-read-flags-unwritten 0 0 0 0 0 6 3
seed kv-read-flags-odd 0 0 0 0 0 6 6
seed kv-read-flags-past-end 0 0 0 0 0 7 200
seed kv-read-nan 0 0 0 0 0 3 2
seed from-residual-short 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 2 4
