#!/bin/sh
# test_plugin_example.sh — the example plugin (plugins/example/: the
# reference engine behind the plugin ABI) through the kvverify command:
#   * kv, patch, greedy, invariance and the audit give the same JSON report
#     as --engine ref (timings and the engine's name left out), on a
#     synthetic model and on stories260K (when ../shared has it);
#   * every shipped golden vector checks through it (vectors check);
#   * the checks still fail when the plugin is wrong (fault=...) and still
#     prove their controls when the host plants them (native_controls=0);
#   * a capability the plugin leaves out makes the checks that need it
#     "unsupported" (skipped, exit 77), never passed;
#   * a plugin built for another ABI major, a missing file and options a
#     built-in engine does not take exit 2 with a message.
. "$(dirname "$0")/lib.sh"
KVV=${KVV:-./kvverify}
O=${O:-build}
export KVV
P="plugin:$O/plugins/example.so"
T="$O/tmp/test_plugin_example.$$"
mkdir -p "$T"
trap 'rm -rf "$T"' EXIT INT TERM
[ -r "$O/plugins/example.so" ] || { echo "FAIL: $O/plugins/example.so not built (make plugins)"; exit 1; }

# expect_out CODE PATTERN CMD...: exit code CODE and PATTERN (grep -E) in its output
# The figures, without what legitimately differs: timings, the engine's
# description, and the audit's compare check (with --engine ref it compares
# the reference with the cpu engine; with the plugin, the reference with the
# plugin: checked on its own below).
figures() {
    jq -S 'del(.. | .seconds?, .started?, .engine?, .engine_a?, .engine_b?)
           | if .checks then .checks |= map(select(.name != "compare")) else . end' "$1"
}

M="$T/llama.gguf"
"$KVV" synth --shape llama-tiny --seed 3 -o "$M" >/dev/null || { echo "FAIL: synth"; exit 1; }
models="$M"
S=${KVV_SHARED:-../shared}/models/stories260K-f32.gguf
if [ -r "$S" ]; then models="$models $S"; else echo "SKIP: $S not found (synthetic model only)"; fi

# (without micro-batches: the reference has none, so invariance would have
# rows the reference's report lacks; those are checked below)
for m in $models; do
    for c in kv patch greedy invariance audit; do
        "$KVV" $c "$m" --json "$T/ref.json" -q >/dev/null 2>&1; a=$?
        "$KVV" $c "$m" --engine "$P" --engine-opt without=ubatch --json "$T/plug.json" -q >/dev/null 2>&1; b=$?
        if [ $a -ne 0 ] || [ $b -ne 0 ]; then
            fail "$c ${m##*/}: exit ref $a, plugin $b"
        elif figures "$T/ref.json" > "$T/ref.fig" && figures "$T/plug.json" > "$T/plug.fig" &&
             cmp -s "$T/ref.fig" "$T/plug.fig"; then
            ok "$c ${m##*/}: plugin report = ref report ($(wc -l < "$T/ref.fig") lines)"
        else
            fail "$c ${m##*/}: reports differ"; diff "$T/ref.fig" "$T/plug.fig" | head -10
        fi
    done
done

# the audit's compare: the plugin (the reference behind the ABI) against the
# reference is bit-equal; the reference itself is compared with the cpu engine
expect_out 0 "compare +PASS .*ref vs example: logits rel 0 " "$KVV" audit "$M" --engine "$P" --checks compare
expect_out 0 "compare +PASS .*ref vs cpu: " "$KVV" audit "$M" --checks compare
# an engine with micro-batches: invariance compares 1, 2, 7 and all
"$KVV" invariance "$M" --engine "$P" --json "$T/ub.json" -q >/dev/null 2>&1; rc=$?
ub=$(jq -c '.checks[0].details.ubatch_sizes' "$T/ub.json")
[ $rc -eq 0 ] && [ "$ub" = "[1,2,7]" ] && ok "invariance over micro-batches $ub: pass" ||
    fail "invariance over micro-batches: exit $rc, sizes $ub"

# every shipped golden vector through the plugin
. vectors/golden.sh
mkdir -p "$T/golden"
check_one() { # NAME MODEL OPTIONS
    if [ -z "$2" ]; then
        echo "SKIP: $1: model not found"
        return 0
    fi
    if "$KVV" vectors check "$2" "$KVV_GOLDEN_DIR/$1.kvv" --engine "$P" > "$T/golden/$1.out" 2>&1; then
        echo "ok: golden $1 through the plugin: $(cut -c1-100 "$T/golden/$1.out")"
    else
        echo "FAIL: golden $1 through the plugin:"; sed 's/^/    /' "$T/golden/$1.out"
        return 1
    fi
}
kvv_golden_each "$T/golden" check_one || fail "a golden vector did not check through the plugin"

# an installed plugin is an engine name: --engine example, suite manifests
expect_out 0 "all checks passed" "$KVV" kv "$M" --engine example -q
printf 'by-name model=llama.gguf engine=example checks=kv,patch,greedy,invariance tokens=8\n' > "$T/m.txt" # beside the model
expect_out 0 "4 passed, 0 failed" "$KVV" suite "$T/m.txt"

# manifest keys for plugins: a plugin path of any length relative to the
# manifest, its options (a fault the check must find), device, micro-batches
mkdir -p "$T/a-plugin-folder-with-a-long-name"
cp "$O/plugins/example.so" "$T/a-plugin-folder-with-a-long-name/example-plugin.so"
cat > "$T/p.txt" <<EOF
path   model=llama.gguf engine=plugin:a-plugin-folder-with-a-long-name/example-plugin.so device=cpu ubatch=3 checks=kv,invariance tokens=8
fault  model=llama.gguf engine=example engine-opt=native_controls=0 engine-opt=fault=recompute checks=kv tokens=8
EOF
"$KVV" suite "$T/p.txt" --json "$T/p.json" >/dev/null 2>&1
if [ "$(jq -c '[.results[] | [.case, .result.verdict, .result.engine.n_ubatch]]' "$T/p.json")" = \
     '[["path","pass",3],["path","pass",3],["fault","fail",0]]' ] &&
   jq -e '.results[2].engine_opts == ["native_controls=0", "fault=recompute"]' "$T/p.json" >/dev/null; then
    ok "suite: plugin path, device, ubatch and engine options reach the plugin"
else
    fail "suite with plugin keys: $(jq -c '[.results[] | [.case, .result.verdict, .result.engine.n_ubatch, .engine_opts]]' "$T/p.json")"
fi

# a wrong plugin is caught; host-planted controls still fire
expect_out 1 "recomputed K/V elements differ" "$KVV" kv "$M" --engine "$P" --engine-opt fault=recompute -q
expect_out 1 "kv hook != cache" "$KVV" kv "$M" --engine "$P" --engine-opt fault=kv-read -q
expect_out 1 "FAIL" "$KVV" greedy "$M" --engine "$P" --engine-opt fault=decode -q
for c in kv patch greedy invariance; do
    "$KVV" $c "$M" --engine "$P" --engine-opt native_controls=0 --json "$T/h.json" -q >/dev/null 2>&1
    rc=$?
    n=$(jq '[.checks[].controls[]?] | length' "$T/h.json")
    miss=$(jq '[.checks[].controls[]? | select(.detected != true)] | length' "$T/h.json")
    if [ $rc -eq 0 ] && [ "$n" -gt 0 ] && [ "$miss" -eq 0 ]; then
        ok "$c with host-planted controls: $n controls detected"
    else
        fail "$c with host-planted controls: exit $rc, $miss of $n controls missed"
    fi
done

# a capability left out: unsupported, not passed
expect_out 77 "does not offer kv-from-residual" "$KVV" kv "$M" --engine "$P" --engine-opt without=kv-from-residual
expect_out 77 "does not offer residual-write" "$KVV" patch "$M" --engine "$P" --engine-opt without=residual-write

# the audit: exit 0 when every check that could run passed, the others
# listed as unsupported (console, JSON, JUnit <skipped message>); 77 when none could
expect_out 0 "every check that could run passed \(1 unsupported by this engine\)" \
    "$KVV" audit "$M" --engine "$P" --engine-opt without=kv-read --checks kv,patch --junit "$T/u.xml" --json "$T/u.json"
grep -q '<skipped message="engine plugin:[^"]* does not offer kv-read (needed by kv)"' "$T/u.xml" &&
    jq -e '.exit_code == 0 and .checks[0].unsupported and .checks[0].verdict == "skipped"
           and .checks[1].verdict == "pass"' "$T/u.json" >/dev/null &&
    ok "unsupported: JUnit <skipped message>, JSON unsupported" || fail "unsupported in JUnit/JSON"
expect_out 77 "nothing could be checked" "$KVV" audit "$M" --engine "$P" \
    --engine-opt without=kv-read,residual-write --checks kv,patch

# refused
expect_out 2 "speaks plugin ABI 2.0, this kvverify speaks 1.1" "$KVV" kv "$M" --engine "plugin:$O/tests/plugins/bad_abi.so"
expect_out 2 "cannot load" "$KVV" kv "$M" --engine "plugin:$T/none.so"
expect_out 2 "engine ref does not take --engine-opt a=b" "$KVV" kv "$M" --engine-opt a=b
expect_out 2 "not KEY=VALUE" "$KVV" kv "$M" --engine "$P" --engine-opt novalue
expect_out 2 "unknown engine option 'x=1'" "$KVV" kv "$M" --engine "$P" --engine-opt x=1
expect_out 2 "unknown device 'tpu'" "$KVV" kv "$M" --engine "$P" --device tpu
expect_out 2 "engine ref does not take --device vulkan" "$KVV" kv "$M" --device vulkan

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "example plugin: all checks agree with the reference engine"
