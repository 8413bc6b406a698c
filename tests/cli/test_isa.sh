#!/bin/sh
# test_isa.sh — the cpu engine's kernel tables from the command line
# (issue 14 items 3 and 4):
#  - info --cpu lists the tables (runs here, native, the engine's choice),
#    as text and JSON, and KVV_CPU_MAX_ISA hides the wider ones;
#  - every command that opens the cpu engine takes --isa generic|avx2 (and
#    avx512 where this CPU runs it) and its report records the table that
#    ran: console, JSON engine.isa, JUnit engine_isa, .kvv engine.isa (cpu
#    vectors only; ref vectors have none), suite isa=;
#  - a table this CPU lacks (KVV_CPU_MAX_ISA=avx2 hides avx512 on any CPU),
#    a bad name, or --isa with another engine is exit 2 with a message;
#  - the audit's `tables` check: PASS with every table here, SKIPPED (exit
#    77) with one table or another engine, and FAIL for avx2 with the
#    planted build $O/tests/plant/kvverify_gemm_tile (KVV_CPU_PLANT_GEMM_TILE:
#    the avx2 invariant GEMM made batch-dependent; built by make test).
# Uses ../shared/models/stories260K-f32.gguf (skips without it). Exit 0 pass.
. "$(dirname "$0")/lib.sh"
O=${O:-build}
SHARED=${KVV_SHARED:-../shared}
PLANT=$O/tests/plant/kvverify_gemm_tile
M="$SHARED/models/stories260K-f32.gguf"
[ -r "$M" ] && M="$(cd "$(dirname "$M")" && pwd)/$(basename "$M")" # absolute: suite manifests
T="$O/tmp/test_isa.$$"
mkdir -p "$T" || exit 1
trap 'rm -rf "$T"' EXIT INT TERM
unset KVV_CPU_MAX_ISA

# ---- info --cpu: text and JSON agree; the JSON says which tables run here
"$KVV" info --cpu >"$T/info.txt" 2>&1 || fail "info --cpu exit $?"
grep -q '^  table    runs here  native' "$T/info.txt" || fail "info --cpu: no native column"
grep -q '^  default: [a-z0-9]* (what the engine chooses' "$T/info.txt" || fail "info --cpu: no choice line"
"$KVV" info --cpu --json >"$T/info.json" || fail "info --cpu --json exit $?"
python3 - "$T/info.json" "$T/info.txt" <<'EOF' || fail "info --cpu --json wrong"
import json, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
chosen = [t["name"] for t in d["tables"] if t["chosen"]]
assert chosen == [d["default"]] == [d["chosen"]], d
for t in d["tables"]:
    assert t["available"] <= t["native"] or not t["built"], t   # runs here => the CPU has it
    row = [l for l in text.splitlines() if l.startswith("  %-8s " % t["name"])][0]
    assert row.split()[1:3] == ["yes" if t["available"] else "no", "yes" if t["native"] else "no"], row
EOF
runs() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(t["name"] for t in d["tables"] if t["available"]))' "$T/info.json"; }
TABLES=$(runs)
echo "tables here: $TABLES"
KVV_CPU_MAX_ISA=avx2 "$KVV" info --cpu --json >"$T/capped.json" || fail "info --cpu (capped) exit $?"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
t = {x["name"]: x for x in d["tables"]}
assert not t["avx512"]["available"] and d["max_isa"] == "avx2", d' "$T/capped.json" ||
    fail "KVV_CPU_MAX_ISA=avx2 does not hide avx512 in info --cpu --json"

if [ ! -r "$M" ]; then
    echo "SKIP: $M not found (../shared absent): the per-command --isa runs are not checked"
    [ $fails -eq 0 ] || exit 1
    exit 77
fi
has() { case " $TABLES " in *" $1 "*) return 0 ;; esac; return 1; }

# ---- usage: exit 2 with a message naming the option / table
expect2() { # PATTERN CMD...
    pat=$1; shift
    "$@" >"$T/e.out" 2>&1; rc=$?
    [ $rc -eq 2 ] && grep -q -- "$pat" "$T/e.out" ||
        { fail "$*: exit $rc, want 2 with /$pat/"; sed 's/^/    /' "$T/e.out"; }
}
expect2 "option --isa avx9: no such kernel table" "$KVV" kv "$M" --engine cpu --isa avx9
expect2 "option --isa-a avx9: no such kernel table" "$KVV" compare "$M" --engine cpu --isa-a avx9
expect2 "applies to the cpu engine" "$KVV" kv "$M" --isa generic
expect2 "applies to the cpu engine" "$KVV" run "$M" --tokens 1,2 --isa generic
expect2 "applies to the cpu engine" "$KVV" bench "$M" --engine ref --isa generic --prompt 4 --gen 0
expect2 "option --isa-a: engine ref does not take --isa avx2" "$KVV" compare "$M" --isa-a avx2
expect2 "option --isa: engine ref does not take --isa avx2" "$KVV" compare "$M" --engine cpu --against ref --isa avx2
expect2 "applies to the cpu engine" "$KVV" numerics "$M" --engine ref --isa generic
# a table the CPU cannot run: KVV_CPU_MAX_ISA=avx2 hides avx512 on any CPU
KVV_CPU_MAX_ISA=avx2 "$KVV" kv "$M" --engine cpu --isa avx512 >"$T/e.out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q 'option --isa avx512: .*tables available: generic' "$T/e.out" ||
    { fail "--isa avx512 hidden: exit $rc, want 2 naming avx512 and the tables here"; cat "$T/e.out"; }
KVV_CPU_MAX_ISA=generic "$KVV" audit "$M" --engine cpu --isa avx2 >"$T/e.out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q 'option --isa avx2: .*tables available: generic' "$T/e.out" ||
    { fail "audit --isa avx2 hidden: exit $rc, want 2"; cat "$T/e.out"; }
if has avx512; then
    "$KVV" kv "$M" --engine cpu --isa avx512 --random 8 -q --json "$T/k5.json" >/dev/null ||
        fail "--isa avx512 on a CPU that runs it: exit $?"
    grep -q '"isa": "avx512"' "$T/k5.json" || fail "--isa avx512: the report does not say avx512"
fi

# ---- each command that opens the cpu engine takes --isa and records the table
isa_json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); e=d.get("engine") or d["checks"][0]["engine"]; print(e.get("isa"))' "$1"; }
for isa in generic avx2; do
    has $isa || { echo "note: this CPU does not run $isa: its commands are not run"; continue; }
    E="--engine cpu --isa $isa"
    # the check commands: JSON engine.isa, JUnit engine_isa, console header
    for c in "kv" "patch" "greedy -n 4" "invariance" "audit --checks kv" "evict --budgets 8 -n 4" \
             "memory --turns 2 --gen 4" "latency --batches 1,4"; do
        name=${c%% *}
        P="--random 8" # memory and latency take no prompt (issue 20: refused)
        case $name in memory|latency) P="";; esac
        # shellcheck disable=SC2086
        "$KVV" $c "$M" $E $P --json "$T/$name.json" --junit "$T/$name.xml" >"$T/$name.out" 2>&1 ||
            { fail "$c $E: exit $?"; tail -n 5 "$T/$name.out"; continue; }
        [ "$(isa_json "$T/$name.json")" = "$isa" ] || fail "$c $E: JSON engine.isa is not $isa"
        grep -q "<property name=\"engine_isa\" value=\"$isa\"/>" "$T/$name.xml" ||
            fail "$c $E: JUnit has no engine_isa $isa"
        grep -q "^engine  cpu (invariant), .*kernel table $isa" "$T/$name.out" ||
            fail "$c $E: console header does not name the table"
    done
    # compare: --isa is engine B's (cpu), --isa-a engine A's (cpu too here; fast
    # mode, so A is never B itself, which compare refuses)
    "$KVV" compare "$M" --engine cpu --against cpu $E --isa-a generic --mode-a fast --random 8 --json "$T/cmp.json" \
        >"$T/cmp.out" 2>&1 || { fail "compare $E --isa-a generic: exit $?"; tail -n 5 "$T/cmp.out"; }
    [ "$(isa_json "$T/cmp.json")" = "$isa" ] || fail "compare $E: engine B's isa is not $isa"
    # run, numerics, bench: the JSON names the table
    "$KVV" run "$M" --tokens 1,2,3 -n 2 $E --json "$T/run.json" >/dev/null 2>&1 || fail "run $E: exit $?"
    [ "$(isa_json "$T/run.json")" = "$isa" ] || fail "run $E: JSON engine.isa is not $isa"
    "$KVV" run "$M" --tokens 1,2,3 -n 2 $E 2>/dev/null | grep -q "kernel table $isa" ||
        fail "run $E: the text output does not name the table"
    "$KVV" numerics "$M" --engine cpu --mode invariant --isa $isa --samples 1 --math-samples 200 \
        --json "$T/num.json" >/dev/null 2>&1 || fail "numerics $E: exit $?"
    grep -q "\"isa\": \"$isa\"" "$T/num.json" || fail "numerics $E: the JSON does not name $isa"
    "$KVV" bench "$M" $E --prompt 8 --gen 4 --repeats 1 --json "$T/bench.json" >/dev/null 2>&1 ||
        fail "bench $E: exit $?"
    grep -q "\"isa\": *\"$isa\"" "$T/bench.json" || fail "bench $E: the JSON does not name $isa"
    # vectors: gen records engine.isa; check recomputes with the recorded table
    "$KVV" vectors gen "$M" -o "$T/$isa.kvv" $E -n 2 >/dev/null 2>&1 || fail "vectors gen $E: exit $?"
    "$KVV" vectors show "$T/$isa.kvv" --json >"$T/show.json" 2>/dev/null || fail "vectors show: exit $?"
    python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["meta"]["engine"]["isa"] == sys.argv[2]' \
        "$T/show.json" $isa || fail "vectors gen $E: meta engine.isa is not $isa"
    "$KVV" vectors check "$M" "$T/$isa.kvv" --json "$T/vc.json" >/dev/null 2>&1 ||
        fail "vectors check of a $isa vector (recorded table): exit $?"
    [ "$(isa_json "$T/vc.json")" = "$isa" ] || fail "vectors check: did not recompute with $isa"
    "$KVV" vectors check "$M" "$T/$isa.kvv" --isa $isa >/dev/null 2>&1 || fail "vectors check --isa $isa: exit $?"
done
# a vector of one table checked with another diverges: the tables differ by design
if has avx2; then
    "$KVV" vectors check "$M" "$T/avx2.kvv" --isa generic >"$T/vc.out" 2>&1; rc=$?
    [ $rc -eq 1 ] && grep -q '^DIVERGED' "$T/vc.out" ||
        fail "an avx2 vector checked with --isa generic: exit $rc, want 1 (DIVERGED)"
    # where the recorded table does not run: exit 2 saying so
    KVV_CPU_MAX_ISA=generic "$KVV" vectors check "$M" "$T/avx2.kvv" >"$T/vc.out" 2>&1; rc=$?
    [ $rc -eq 2 ] && grep -q "made with the cpu engine's avx2 kernel table, which does not run here" "$T/vc.out" ||
        { fail "an avx2 vector where avx2 is hidden: exit $rc, want 2"; cat "$T/vc.out"; }
fi
# ref vectors carry no engine.isa (the shipped golden vectors stay byte-identical)
"$KVV" vectors gen "$M" -o "$T/ref.kvv" -n 2 >/dev/null 2>&1 || fail "vectors gen (ref): exit $?"
"$KVV" vectors show "$T/ref.kvv" --json >"$T/show.json" 2>/dev/null &&
    python3 -c 'import json,sys; assert "isa" not in json.load(open(sys.argv[1]))["meta"]["engine"]' \
        "$T/show.json" || fail "a ref vector records engine.isa"

# ---- suite: isa= key; the results name the table; isa= with another engine is refused
has avx2 && {
    cat >"$T/suite.txt" <<EOF
cpu-avx2 model=$M engine=cpu isa=avx2 checks=kv tokens=8
EOF
    "$KVV" suite "$T/suite.txt" --json "$T/suite.json" --junit "$T/suite.xml" >/dev/null 2>&1 ||
        fail "suite isa=avx2: exit $?"
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"][0]
assert r["isa"] == "avx2" and r["result"]["engine"]["isa"] == "avx2", r' "$T/suite.json" ||
        fail "suite isa=avx2: JSON does not name the table"
    grep -q 'engine=cpu mode=invariant cache=f32 threads=1 isa=avx2' "$T/suite.xml" ||
        fail "suite isa=avx2: JUnit context does not name the table"
}
echo "bad model=$M isa=avx2 checks=kv" >"$T/bad.txt"
expect2 "key isa: engine ref does not take --isa" "$KVV" suite "$T/bad.txt"
echo "bad model=$M engine=cpu isa=avx9 checks=kv" >"$T/bad.txt"
expect2 "key isa: 'avx9' is not generic" "$KVV" suite "$T/bad.txt"

# ---- the tables check
"$KVV" audit "$M" --checks tables --random 8 >"$T/t.out" 2>&1; rc=$?
[ $rc -eq 77 ] && grep -q 'tables *SKIPPED .*unsupported by this engine' "$T/t.out" ||
    { fail "tables on the ref engine: exit $rc, want 77 (unsupported)"; cat "$T/t.out"; }
KVV_CPU_MAX_ISA=generic "$KVV" audit "$M" --engine cpu --checks tables --random 8 >"$T/t.out" 2>&1; rc=$?
[ $rc -eq 77 ] && grep -q 'one kernel table runs here (generic)' "$T/t.out" ||
    { fail "tables with one table: exit $rc, want 77 (skipped)"; cat "$T/t.out"; }
n=$(echo "$TABLES" | wc -w)
if [ "$n" -ge 2 ]; then
    "$KVV" audit "$M" --engine cpu --checks tables --json "$T/t.json" --junit "$T/t.xml" >"$T/t.out" 2>&1 ||
        { fail "tables on $n tables: exit $?"; cat "$T/t.out"; }
    grep "^tables " "$T/t.out"
    python3 - "$T/t.json" "$n" <<'EOF' || fail "tables: JSON details wrong"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
n = int(sys.argv[2])
d = c["details"]
assert c["verdict"] == "pass" and d["mode"] == "invariant", c["verdict"]
assert len(d["tables"]) == n and all(t["verdict"] == "pass" and t["differing"] == 0 for t in d["tables"])
assert len(d["cross_table"]) == n * (n - 1) // 2
for p in d["cross_table"]:   # different tables, different bits (by design)
    assert p["logits"]["differing"] > 0 and p["logits"]["max_ulp"] > 0, p
# each table's invariance control, and the two controls of the cross-table bound
assert len(c["controls"]) == n + 2 and all(k["detected"] for k in c["controls"]), c["controls"]
assert "by design" in d["note"]
# "differ by design" is earned: each pair, layer by layer, within the contract's bound,
# printed beside it (issue 31 item 4)
b = d["bounds"]
assert b["layers"]["kind"] in ("order", "quantum") and b["layers"]["bound"] > 0, b
for p in d["cross_table"]:
    lw = p["layer_by_layer"]
    assert lw["within_bounds"] and lw["residual_rel_rms"] <= b["layers"]["bound"], p
    assert lw["logits_rel"] <= b["head"]["bound"], p
assert "(bound " in c["key_figure"], c["key_figure"]
EOF
else
    echo "note: one table here: the tables check's PASS is not shown"
fi
# the planted avx2 GEMM: the check must FAIL and name avx2 (needs avx2 and another table)
if has avx2 && [ "$n" -ge 2 ]; then
    [ -x "$PLANT" ] || { echo "FAIL: $PLANT not built (make test builds it)"; exit 1; }
    "$PLANT" audit "$M" --engine cpu --checks tables --json "$T/p.json" >"$T/p.out" 2>&1; rc=$?
    [ $rc -eq 1 ] && grep -q 'invariance fails with table avx2;' "$T/p.out" ||
        { fail "planted avx2 GEMM: exit $rc, want 1 naming avx2"; cat "$T/p.out"; }
    grep -m1 'first mismatch' "$T/p.out"
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["checks"][0]["details"]["tables"]
v = {t["table"]: t["verdict"] for t in d}
assert v.pop("avx2") == "fail" and set(v.values()) == {"pass"}, v' "$T/p.json" ||
        fail "planted avx2 GEMM: the other tables should pass, avx2 fail"
    # the planted binary is otherwise the real one: generic alone passes there
    "$PLANT" invariance "$M" --engine cpu --isa generic -q >/dev/null 2>&1 ||
        fail "planted build: the generic table's invariance fails"
fi

# ---- issue 31 item 4: two tables of the cpu engine on a Q2_K model. compare
# runs two 8-bit-activation engines layer by layer (end to end they once
# differed by 0.014 and failed), and the tables check prints each figure
# beside the bound the contract allows for Q2_K
if has avx2; then
    "$KVV" synth --shape llama-k256 --type q2_k -o "$T/q2.gguf" -q || fail "synth q2_k"
    "$KVV" compare "$T/q2.gguf" --engine cpu --isa-a generic --against cpu --isa avx2 -q \
        --json "$T/q2c.json" >"$T/q2.out" 2>&1 ||
        { fail "compare q2_k cpu generic vs cpu avx2: exit $?"; cat "$T/q2.out"; }
    grep -q "layer by layer: residual rms rel" "$T/q2.out" ||
        fail "compare q2_k generic vs avx2: not layer by layer: $(grep '^compare' "$T/q2.out")"
    if [ "$n" -ge 2 ]; then
        "$KVV" audit "$T/q2.gguf" --engine cpu --checks tables -q --json "$T/q2t.json" >"$T/q2.out" 2>&1 ||
            { fail "tables q2_k: exit $?"; cat "$T/q2.out"; }
        grep -Eq "^tables +PASS .*residual [0-9.e+-]+ \(bound 0\.01\), logits [0-9.e+-]+ \(bound 0\.001\)" "$T/q2.out" ||
            fail "tables q2_k: no bound beside the figures: $(grep '^tables' "$T/q2.out")"
        python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["checks"][0]["details"]["bounds"]; assert b["layers"]["kind"]=="quantum" and b["layers"]["type"]=="Q2_K", b' "$T/q2t.json" ||
            fail "tables q2_k: the bound is not Q2_K's"
    fi
fi

[ $fails -eq 0 ] || exit 1
echo "ok"
