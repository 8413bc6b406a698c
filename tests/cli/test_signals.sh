#!/bin/sh
# Signals and a closed stdout (cli/interrupt.h, docs/isolation.md):
#   * SIGINT / SIGTERM in the middle of an isolated audit: exit 130, the
#     reports written with what finished, JSON "interrupted": true and
#     "exit_code": 130, the console says INTERRUPTED, and the check's child
#     is gone (killed and reaped by its parent);
#   * the same for a command whose whole run is one isolated body (evict);
#   * SIGKILL of the parent: its child dies with it (PR_SET_PDEATHSIG), no
#     check goes on alone under init;
#   * a closed stdout (`kvverify MODEL --json r.json | true`): the run
#     finishes, writes its files and exits with the verdict's code, not 141.
# The example plugin's fault=hang makes a check that never ends, so the
# signal always lands inside it; --timeout 60 bounds each run all the same.
# kvverify runs directly under this shell (no `timeout` between them), so
# $! is kvverify and its child is the isolated check.
. "$(dirname "$0")/lib.sh"
O=${O:-build}
P="plugin:$O/plugins/example.so"
[ -f "$O/plugins/example.so" ] || { echo "FAIL: $O/plugins/example.so not built"; exit 1; }
command -v jq >/dev/null || { echo "SKIP: jq not installed"; exit 77; }
T=${TMPDIR:-/tmp}/kvv-test-signals.$$
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT

$KVV synth --shape llama-tiny -o "$T/m.gguf" >/dev/null 2>&1 || { echo "FAIL: synth"; exit 1; }
M="$T/m.gguf"

# The child of $1 that runs the check: one that is still there 0.5 s after
# it was first seen (the audit's plan child before it ends at once), waited
# for up to 30 s.
child_of() {
    i=0
    while [ $i -lt 60 ]; do
        c=$(pgrep -P "$1" | head -n 1)
        sleep 0.5
        [ -n "$c" ] && [ "$(pgrep -P "$1" | head -n 1)" = "$c" ] && { echo "$c"; return 0; }
        i=$((i + 1))
    done
    return 1
}
# Is process $1 gone (no such process, or a zombie nobody reaps: it ran
# nothing any more)? Waits up to 5 s.
gone() {
    i=0
    while [ $i -lt 50 ]; do
        [ -e "/proc/$1" ] || return 0
        [ "$(sed 's/^[0-9]* ([^)]*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null)" = Z ] && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}

# ---- SIGINT, then SIGTERM, in the middle of an isolated audit
for sig in INT TERM; do
    rm -f "$T/r.json" "$T/r.xml"
    $KVV "$M" --engine "$P" --engine-opt fault=hang --timeout 60 --checks kv,patch \
        --json "$T/r.json" --junit "$T/r.xml" >"$T/out" 2>"$T/err" &
    pid=$!
    c=$(child_of $pid) || { fail "SIG$sig: no isolated child appeared"; kill -KILL $pid; continue; }
    kill -$sig $pid
    wait $pid
    rc=$?
    [ "$rc" -eq 130 ] && ok "audit SIG$sig: exit 130" || fail "audit SIG$sig: exit $rc"
    if [ -f "$T/r.json" ] && [ "$(jq -c '[.interrupted, .exit_code]' "$T/r.json")" = '[true,130]' ] &&
       [ "$(jq -r '.checks[0].key_figure' "$T/r.json")" = interrupted ]; then
        ok "audit SIG$sig: the JSON says interrupted, exit_code 130"
    else
        fail "audit SIG$sig: JSON $(jq -c '[.interrupted, .exit_code]' "$T/r.json" 2>&1)"
    fi
    if command -v xmllint >/dev/null; then
        xmllint --noout "$T/r.xml" 2>/dev/null && grep -q 'interrupted' "$T/r.xml" &&
            ok "audit SIG$sig: JUnit written" || fail "audit SIG$sig: no valid JUnit"
    fi
    grep -q "^INTERRUPTED by a signal" "$T/out" && grep -q "interrupted:" "$T/err" &&
        ok "audit SIG$sig: the console says so" || fail "audit SIG$sig: console silent"
    gone "$c" && ok "audit SIG$sig: the child $c is gone" ||
        { fail "audit SIG$sig: child $c still runs"; kill -KILL "$c" 2>/dev/null; }
done
ls "$T" | grep -q '\.tmp\.' && fail "a temp file was left behind"

# ---- a command whose whole run is one isolated body
rm -f "$T/e.json"
$KVV evict "$M" --engine "$P" --engine-opt fault=hang --timeout 60 --n-prompts 1 \
    --json "$T/e.json" >"$T/out" 2>"$T/err" &
pid=$!
if c=$(child_of $pid); then
    kill -INT $pid
    wait $pid
    rc=$?
    [ "$rc" -eq 130 ] && [ "$(jq -c '[.interrupted, .exit_code]' "$T/e.json" 2>/dev/null)" = '[true,130]' ] &&
        ok "evict SIGINT: exit 130, JSON interrupted" || fail "evict SIGINT: exit $rc, $(cat "$T/err")"
    gone "$c" && ok "evict SIGINT: the child is gone" || { fail "evict: child $c runs"; kill -KILL "$c"; }
else
    fail "evict: no isolated child appeared"; kill -KILL $pid
fi

# ---- SIGKILL of the parent: the child dies with it
$KVV "$M" --engine "$P" --engine-opt fault=hang --timeout 60 --checks kv >/dev/null 2>&1 &
pid=$!
if c=$(child_of $pid); then
    kill -KILL $pid
    wait $pid 2>/dev/null
    gone "$c" && ok "SIGKILL of the parent: its child $c died with it" ||
        { fail "SIGKILL of the parent: child $c lives on"; kill -KILL "$c"; }
else
    fail "SIGKILL case: no isolated child appeared"; kill -KILL $pid
fi

# ---- a closed stdout: the run goes on, writes its files, exits as usual.
# (python closes the pipe's reading end before kvverify starts, so every
# write to stdout meets a closed pipe; its child gets SIGPIPE's default.)
closed_stdout() { # want-exit, json-file, args...
    want=$1; file=$2; shift 2
    rm -f "$file"
    python3 - "$KVV" "$@" >"$T/rc" 2>"$T/err" <<'EOF'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.run(sys.argv[1:], stdout=w, timeout=300)
print(p.returncode)
EOF
    rc=$(cat "$T/rc")
    [ "$rc" = "$want" ] && [ -s "$file" ] && jq -e . "$file" >/dev/null &&
        ok "closed stdout: $* -> exit $rc, JSON written" ||
        fail "closed stdout: $*: exit $rc (want $want), $(ls -l "$file" 2>&1) $(tail -c 300 "$T/err")"
}
closed_stdout 0 "$T/j.json" "$M" --json "$T/j.json"
closed_stdout 0 "$T/k.json" kv "$M" --engine "$P" --json "$T/k.json"
closed_stdout 0 "$T/e2.json" evict "$M" --engine "$P" --n-prompts 1 --json "$T/e2.json"
closed_stdout 1 "$T/f.json" kv "$M" --force-fail --json "$T/f.json"
# a document asked for on the closed stdout cannot be written: exit 2, said
python3 - "$KVV" kv "$M" --json >"$T/rc" 2>"$T/err" <<'EOF'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
print(subprocess.run(sys.argv[1:], stdout=w, timeout=300).returncode)
EOF
[ "$(cat "$T/rc")" = 2 ] && grep -q "standard output: cannot write" "$T/err" &&
    ok "closed stdout, --json -: exit 2 with the reason" ||
    fail "closed stdout, --json -: exit $(cat "$T/rc"), $(cat "$T/err")"

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all signal checks passed"
