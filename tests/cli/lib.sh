# tests/cli/lib.sh — what the CLI tests share; each test sources it first:
#
#   . "$(dirname "$0")/lib.sh"
#   T=...; mkdir -p "$T"                    # the test's scratch folder
#   expect 0 "kv passes" $KVV kv "$M"       # exit code; stdout in $T/out, stderr in $T/err
#   expect_out 2 'bad option' $KVV kv --x   # exit code and a grep -E pattern over both
#   fail "what went wrong"                  # counted in $fails; the test ends with
#   [ $fails -eq 0 ]                        #   its own summary
#
# Sets, unless the caller did: O (build folder, default build), KVV (the
# binary of $O when built, else ./kvverify, a symlink other builds may
# repoint meanwhile), SHARED ($KVV_SHARED, default ../shared).
O=${O:-build}
if [ -z "$KVV" ]; then
    if [ -x "$O/kvverify" ]; then KVV=$O/kvverify; else KVV=./kvverify; fi
fi
SHARED=${KVV_SHARED:-../shared}
fails=0

# fail MESSAGE: say it and count it (also appended to $FAIL_LOG when the
# test sets one, for a list at its end).
fail() {
    echo "FAIL: $*"; fails=$((fails + 1))
    [ -z "${FAIL_LOG:-}" ] || echo "FAIL: $*" >>"$FAIL_LOG"
}
ok() { echo "ok: $*"; }

# expect WANT-EXIT DESCRIPTION COMMAND...: run it (stdout to $T/out, stderr
# to $T/err); a different exit code is a failure, shown with the output's
# tail. An empty DESCRIPTION names the command. @return 0 when it matched.
expect() {
    want=$1; what=${2:-}; shift 2
    [ -n "$what" ] || what="$*"
    "$@" >"$T/out" 2>"$T/err"; rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$what: exit $rc, want $want"
        sed 's/^/    /' "$T/out" "$T/err" | tail -n 12
        return 1
    fi
    return 0
}

# expect_out WANT-EXIT PATTERN COMMAND...: run it (stdout and stderr both
# to $T/out); the exit code must match and, unless PATTERN is empty, the
# output must hold PATTERN (grep -E). Says "ok" when both do.
expect_out() {
    code=$1; pat=$2; shift 2
    "$@" >"$T/out" 2>&1; rc=$?
    if [ "$rc" -ne "$code" ]; then
        fail "$* -> exit $rc, expected $code"; sed 's/^/    /' "$T/out" | tail -n 8; return 1
    fi
    if [ -n "$pat" ] && ! grep -Eq "$pat" "$T/out"; then
        fail "$* -> output lacks /$pat/"; sed 's/^/    /' "$T/out" | tail -n 8; return 1
    fi
    ok "$* -> $code"
}
