#!/bin/sh
# update.sh — regenerate vectors/golden/*.kvv (make vectors-update).
# Review the result with `git diff --stat vectors/golden`: a changed vector
# means the engine computes different bits than before.
set -e
# the binary `make vectors-update` just built ($O/kvverify), else ./kvverify
if [ -z "${KVV:-}" ]; then
    KVV=${O:-build}/kvverify
    [ -x "$KVV" ] || KVV=./kvverify
fi
export KVV
. vectors/golden.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvv-golden.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

gen_one() { # NAME MODEL OPTIONS
    if [ -z "$2" ]; then
        echo "skip  $1 (model not found under ${KVV_SHARED:-../shared}; kept as is)"
        return 0
    fi
    # shellcheck disable=SC2086
    "$KVV" vectors gen "$2" -o "$KVV_GOLDEN_DIR/$1.kvv" $3 >/dev/null
    printf '%-22s %8s bytes\n' "$1.kvv" "$(wc -c < "$KVV_GOLDEN_DIR/$1.kvv" | tr -d ' ')"
}
kvv_golden_each "$tmp" gen_one
