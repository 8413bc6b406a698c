#!/bin/sh
# test_html.sh — every kind of HTML page kvverify writes, opened in headless
# Chromium (tests/browser/check_pages.py over the DevTools protocol): each
# figure its JSON calls for is in the rendered DOM with exactly its data
# points, titled and inside its plot; no script, no request but the page,
# no console error; the screenshot is not blank. Negative controls: a page
# with a figure removed, one with a point removed, a console error, an
# external image, a stylesheet fetch and a hidden page must each fail. Screenshots:
# $O/test-logs/html/*.png (KVV_KEEP=1 keeps the pages in $O/tmp).
#
# Chromium and python3 come from scripts/install-deps.sh: missing is a
# FAILURE, not a skip. Uses stories260K when ../shared has it, else a
# synthetic model.
. "$(dirname "$0")/lib.sh"
O=${O:-build}
SHARED=${KVV_SHARED:-../shared}
CHROMIUM=${KVV_CHROMIUM:-chromium}
T="$O/tmp/test_html.$$"
SHOTS="$O/test-logs/html"
mkdir -p "$T" "$SHOTS" || exit 1
trap '[ -n "$KVV_KEEP" ] || rm -rf "$T"' EXIT INT TERM
start=$(date +%s)

command -v "$CHROMIUM" >/dev/null 2>&1 ||
    { echo "FAIL: $CHROMIUM not found: run scripts/install-deps.sh (Debian package chromium)"; exit 1; }
command -v python3 >/dev/null 2>&1 ||
    { echo "FAIL: python3 not found: run scripts/install-deps.sh (Debian package python3)"; exit 1; }

M="$SHARED/models/stories260K-f32.gguf"
if [ ! -r "$M" ]; then
    echo "note: $M not found: pages of a synthetic model"
    M="$T/llama.gguf"
    "$KVV" synth --shape llama-tiny --seed 3 -o "$M" >/dev/null || { echo "FAIL: synth"; exit 1; }
fi

# page NAME WANT-EXIT CMD...: run CMD with --json and --html into $T/NAME.*
page() {
    name=$1; want=$2; shift 2
    "$@" --json "$T/$name.json" --html "$T/$name.html" -q >"$T/$name.out" 2>&1
    rc=$?
    if [ $rc -ne "$want" ] || [ ! -s "$T/$name.html" ]; then
        fail "$name: $* -> exit $rc (want $want), html $(wc -c < "$T/$name.html" 2>/dev/null)"
        tail -n 5 "$T/$name.out" | sed 's/^/    /'
    fi
}

page audit 0 "$KVV" audit "$M"
page kv 0 "$KVV" kv "$M"
page kv-fail 1 "$KVV" kv "$M" --force-fail
page patch 0 "$KVV" patch "$M"
page greedy 0 "$KVV" greedy "$M" -n 24
page greedy-fail 1 "$KVV" greedy "$M" -n 24 --force-fail
page invariance 0 "$KVV" invariance "$M"
page compare 0 "$KVV" compare "$M"
page evict 0 "$KVV" evict "$M" --n-prompts 3 --budgets 8,24,48 -n 16
page memory 0 "$KVV" memory "$M" --turns 6 --gen 8
page latency 0 "$KVV" latency "$M" --batches 1,16,256
page numerics 0 "$KVV" numerics "$M" --samples 2 --math-samples 2000
# the tables check (cpu engine), where this CPU runs two kernel tables or more
n_tables=$("$KVV" info --cpu --json | python3 -c 'import json,sys; print(sum(t["available"] for t in json.load(sys.stdin)["tables"]))')
[ "$n_tables" -ge 2 ] && page tables 0 "$KVV" audit "$M" --engine cpu --checks tables

# a suite of synthetic models: every check, a golden vector, a skipped case
"$KVV" synth --shape llama-tiny --seed 3 -o "$T/llama.gguf" >/dev/null &&
"$KVV" synth --shape qwen3-tiny --seed 3 -o "$T/qwen3.gguf" >/dev/null &&
"$KVV" vectors gen "$T/llama.gguf" -o "$T/llama.kvv" --random 8 --seed 2 -n 4 >/dev/null ||
    fail "suite models"
cat > "$T/nightly.txt" <<'EOF'
llama-checks model=llama.gguf checks=kv,patch,greedy,invariance,kvdirect,compare tokens=8 n=4
qwen3-bf16   model=qwen3.gguf checks=kv,patch tokens=6 n=4 cache=bf16
llama-vector model=llama.gguf vector=llama.kvv
absent       model=not-here.gguf checks=kv optional=yes
EOF
page suite 0 "$KVV" suite "$T/nightly.txt"

# nights of one audit: pass, fail, pass -> a trend page
"$KVV" audit "$M" --json "$T/night1.json" -q >/dev/null || fail "night 1"
"$KVV" audit "$M" --json "$T/night2.json" -q --force-fail --checks kv,greedy,compare >/dev/null
[ $? -eq 1 ] || fail "night 2 (force-fail) did not exit 1"
"$KVV" report "$T/night1.json" "$T/night2.json" "$T/audit.json" --html "$T/trend.html" \
    >"$T/trend.out" 2>&1 || { fail "report (trend)"; cat "$T/trend.out"; }
# one saved report renders the very page its command wrote
"$KVV" report "$T/audit.json" --html "$T/report1.html" >/dev/null 2>&1 &&
    cmp -s "$T/audit.html" "$T/report1.html" || fail "report audit.json differs from audit --html"
# a suite's nights -> a trend too
cp "$T/suite.json" "$T/suite-night1.json"
"$KVV" report "$T/suite-night1.json" "$T/suite.json" --html "$T/suite-trend.html" >/dev/null 2>&1 ||
    fail "report (suite trend)"

# --html - : the page alone on stdout
"$KVV" report "$T/audit.json" --html - > "$T/stdout.html" 2>/dev/null &&
    head -c 15 "$T/stdout.html" | grep -q '<!DOCTYPE html>' && cmp -s "$T/stdout.html" "$T/audit.html" ||
    fail "report --html - is not the page alone"
"$KVV" kv "$M" --html > "$T/kv-stdout.html" 2>/dev/null &&
    head -c 15 "$T/kv-stdout.html" | grep -q '<!DOCTYPE html>' || fail "kv --html (stdout)"

# report: bad input is exit 2 with a message naming the file
expect2() { # PATTERN ARGS...: kvverify report ARGS exits 2 saying PATTERN
    pat=$1; shift
    "$KVV" report "$@" >"$T/r.out" 2>&1; rc=$?
    [ $rc -eq 2 ] && grep -q "$pat" "$T/r.out" ||
        { fail "report $*: exit $rc, want 2 with /$pat/"; sed 's/^/    /' "$T/r.out"; }
}
echo '{"checks": [' > "$T/broken.json"
echo '{"hello": 1}' > "$T/other.json"
expect2 "nope.json" "$T/nope.json" --html "$T/x.html"
expect2 "broken.json: line 2" "$T/broken.json" --html "$T/x.html"
expect2 "other.json: not a kvverify report" "$T/other.json" --html "$T/x.html"
expect2 "numerics.json: a trend is of check reports" "$T/audit.json" "$T/numerics.json" --html "$T/x.html"
expect2 "suite.json: a suite, but .*audit.json is a report" "$T/audit.json" "$T/suite.json" --html "$T/x.html"
expect2 "needs at least one FILE" --html "$T/x.html"
"$KVV" report "$T/audit.json" > "$T/r.out" 2>&1 && grep -q "audit.json: report pass, 7 checks" "$T/r.out" ||
    { fail "report without --html: a summary"; cat "$T/r.out"; }

# negative controls: doctored pages the checker must reject
sed '/<figure class="fig" id="kv-ulp"/,/<\/figure>/d' "$T/audit.html" > "$T/no-figure.html"
awk '/class="pt"/ && !done { done = 1; next } { print }' "$T/greedy.html" > "$T/no-point.html"
sed 's|</body>|<script>console.error("planted error")</script></body>|' "$T/patch.html" \
    > "$T/console.html"
sed 's|</main>|<img src="http://127.0.0.1:9/planted.png" alt=""></main>|' "$T/memory.html" \
    > "$T/fetch.html"
sed 's|</head>|<style>body{background-image:url(http://127.0.0.1:9/bg.png)}</style></head>|' \
    "$T/kv.html" > "$T/css-fetch.html"
sed 's|</head>|<style>main{visibility:hidden}</style></head>|' "$T/latency.html" > "$T/blank.html"

cat > "$T/pages.txt" <<EOF
# name        page                     JSON                                          expect
audit         $T/audit.html            $T/audit.json                                 ok
kv            $T/kv.html               $T/kv.json                                    ok
kv-fail       $T/kv-fail.html          $T/kv-fail.json                               ok
patch         $T/patch.html            $T/patch.json                                 ok
greedy        $T/greedy.html           $T/greedy.json                                ok
greedy-fail   $T/greedy-fail.html      $T/greedy-fail.json                           ok
invariance    $T/invariance.html       $T/invariance.json                            ok
compare       $T/compare.html          $T/compare.json                               ok
evict         $T/evict.html            $T/evict.json                                 ok
memory        $T/memory.html           $T/memory.json                                ok
latency       $T/latency.html          $T/latency.json                               ok
numerics      $T/numerics.html         $T/numerics.json                              ok
suite         $T/suite.html            $T/suite.json                                 ok
trend         $T/trend.html            $T/night1.json,$T/night2.json,$T/audit.json   ok
suite-trend   $T/suite-trend.html      $T/suite-night1.json,$T/suite.json            ok
no-figure     $T/no-figure.html        $T/audit.json                                 fail=kv-ulp missing
no-point      $T/no-point.html         $T/greedy.json                                fail=greedy-margin:
console       $T/console.html          $T/patch.json                                 fail=console errors
fetch         $T/fetch.html            $T/memory.json                                fail=external references
css-fetch     $T/css-fetch.html        $T/kv.json                                    fail=network requests
blank         $T/blank.html            $T/latency.json                               fail=screenshot blank
EOF
[ "$n_tables" -ge 2 ] && echo "tables        $T/tables.html           $T/tables.json                                ok" >> "$T/pages.txt"
python3 tests/browser/check_pages.py "$T/pages.txt" --shots "$SHOTS" --chromium "$CHROMIUM" ||
    fail "browser check (above)"

echo "test_html: $(( $(date +%s) - start )) s in all"
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all ok"
