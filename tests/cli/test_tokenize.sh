#!/bin/sh
# test_tokenize.sh — `kvverify tokenize`: ids as llama.cpp gives them, --raw,
# --json, --decode, -f, and the exit codes of bad input (2) and an unsupported
# tokenizer (77). Skips (77) without ../shared.
. "$(dirname "$0")/lib.sh"
KVV=${KVV:-./kvverify}
SHARED=${KVV_SHARED:-../shared}
M=$SHARED/models/stories260K-f32.gguf
V=$SHARED/models/vocab
if [ ! -f "$M" ] || [ ! -d "$V" ]; then
    echo "SKIP: $M or $V not found (this test needs ../shared)"
    exit 77
fi
if [ ! -x "$KVV" ]; then
    echo "FAIL: $KVV not built"
    exit 1
fi
tmp=${TMPDIR:-/tmp}/kvv-tokenize-$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
check() { # name, expected, actual
    if [ "$2" = "$3" ]; then
        echo "ok   $1"
    else
        fail "$1: expected '$2', got '$3'"
    fi
}

# llama.cpp's ids for the peer prompt (BOS added per add_bos_token)
check "stories with BOS" "1 403 407 261 378" "$("$KVV" tokenize "$M" "Once upon a time")"
check "stories --raw" "403 407 261 378" "$("$KVV" tokenize "$M" "Once upon a time" --raw)"
check "options first" "403 407 261 378" "$("$KVV" tokenize --raw "$M" "Once upon a time")"
check "decode" "Once upon a time" "$("$KVV" tokenize "$M" --decode 403,407,261,378)"
check "decode spaces" "Once upon a time" "$("$KVV" tokenize "$M" --decode "403 407 261 378")"
check "decode flag after" "Once upon a time" "$("$KVV" tokenize "$M" "403,407,261,378" --decode)"
printf '403\n407\n261\n378\n' >"$tmp/ids.txt"
check "decode -f" "Once upon a time" "$("$KVV" tokenize "$M" --decode -f "$tmp/ids.txt")"
check "decode BOS keeps space" " Once upon a time" "$("$KVV" tokenize "$M" --decode 1,403,407,261,378)"

# -f FILE and stdin give the same ids as the text
printf 'Once upon a time' >"$tmp/p.txt"
check "-f FILE" "1 403 407 261 378" "$("$KVV" tokenize "$M" -f "$tmp/p.txt")"
check "-f -" "1 403 407 261 378" "$("$KVV" tokenize "$M" -f - <"$tmp/p.txt")"

# --json parses and carries tokens and pieces
"$KVV" tokenize "$M" "Once upon a time" --json >"$tmp/o.json"
check "json exit" 0 $?
if command -v python3 >/dev/null 2>&1; then
    got=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["tokens"], d["pieces"], d["tokenizer"])' "$tmp/o.json")
    check "json content" "[1, 403, 407, 261, 378] ['', ' Once', ' upon', ' a', ' time'] llama" "$got"
else
    grep -q '"tokens":\[1,403,407,261,378\]' "$tmp/o.json"
    check "json content" 0 $?
fi

# BPE and WordPiece vocabularies: the first vector of llama.cpp's files
check "gpt-2" "15496 995" "$("$KVV" tokenize "$V/ggml-vocab-gpt-2.gguf" "Hello world")"
check "bert [CLS] .. [SEP]" "101 7592 2088 102" "$("$KVV" tokenize "$V/ggml-vocab-bert-bge.gguf" "Hello world")"
check "bert --raw" "7592 2088" "$("$KVV" tokenize "$V/ggml-vocab-bert-bge.gguf" "Hello world" --raw)"
check "deepseek BOS" "32013 17535 1835" "$("$KVV" tokenize "$V/ggml-vocab-deepseek-coder.gguf" "Hello world")"
check "--special" "1 1 403" "$("$KVV" tokenize "$M" "<s>Once" --special)"

# errors: exit 2 with one line naming the culprit; unsupported: 77
"$KVV" tokenize "$M" >/dev/null 2>"$tmp/e"; check "missing text exit" 2 $?
"$KVV" tokenize "$tmp/none.gguf" hi >/dev/null 2>"$tmp/e"; check "missing model exit" 2 $?
grep -q "none.gguf" "$tmp/e"; check "missing model message" 0 $?
"$KVV" tokenize "$M" -f "$tmp/none.txt" >/dev/null 2>"$tmp/e"; check "missing file exit" 2 $?
grep -q "none.txt" "$tmp/e"; check "missing file message" 0 $?
"$KVV" tokenize "$M" --decode 1,x >/dev/null 2>"$tmp/e"; check "bad ids exit" 2 $?
grep -q "item 2" "$tmp/e"; check "bad ids message" 0 $?
"$KVV" tokenize "$M" --decode 1,512 >/dev/null 2>"$tmp/e"; check "id out of range exit" 2 $?
grep -q "512" "$tmp/e"; check "id out of range message" 0 $?
"$KVV" tokenize "$M" hi --bogus >/dev/null 2>&1; check "unknown option exit" 2 $?
"$KVV" tokenize "$M" hi -f "$tmp/p.txt" >/dev/null 2>&1; check "two sources exit" 2 $?
printf 'GGUF\003\000\000\000' >"$tmp/trunc.gguf"
"$KVV" tokenize "$tmp/trunc.gguf" hi >/dev/null 2>"$tmp/e"; check "truncated model exit" 2 $?
check "one-line message" 1 "$(wc -l <"$tmp/e" | tr -d ' ')"
"$KVV" tokenize "$V/ggml-vocab-stablelm.gguf" hi >/dev/null 2>"$tmp/e"; check "stablelm exit" 77 $?
grep -q "stablelm" "$tmp/e"; check "stablelm message" 0 $?
"$KVV" tokenize --help | grep -q "usage: kvverify tokenize"; check "--help" 0 $?

[ $fails -eq 0 ] || exit 1
exit 0
