#!/bin/sh
# Every documented example of program output is what the program prints
# (issue 31 item 16), so the docs cannot drift from it again.
#
# In docs/*.md and README.md an example is a fenced block right after a
# marker comment:
#
#   <!-- example
#   run: kvverify ../shared/models/stories260K-f32.gguf  (repeatable: run in turn)
#   vary: [0-9]+\.[0-9]+s        (a machine-dependent figure; repeatable)
#   exit: 0                      (the last command's exit code; default 0)
#   stream: stdout               (stdout, stderr or both; default stdout)
#   format: text                 (text, or json: the block is a JSON subset)
#   -->
#
# Each `run` is a shell line run in a scratch folder where ../shared is the
# shared models folder ($KVV_SHARED) and vectors/ the repository's, with
# `kvverify` this build; files it writes (synth models) stay there. Text
# blocks are compared line by line: a line `...` stands for any lines, a
# line ending in ` ...` for any line starting with what precedes it, a line
# starting with `$ ` is the command as typed (not compared); text matching a
# `vary` pattern is compared as a placeholder (the docs say which figures
# are the machine's). JSON blocks: every key the block gives must hold the
# value it gives (arrays: the first elements; a string ending in `…` or
# `...`: a prefix; {"…": "…"}: any object); `vary` names keys not compared.
#
# A fenced block that looks like program output (a verdict table, a
# workload line, PASS/DIVERGED, an error message) must carry a marker: an
# example, or `<!-- illustration: WHY -->` for one that is not the output
# of a command on a file the tests have. Examples on ../shared are skipped
# (said) when it is absent; the others always run.
#
# Also: `kvverify help` names every check the audit runs (`kvverify checks
# --json`: in_audit).
if [ -z "$KVV" ]; then
    if [ -n "$O" ] && [ -x "$O/kvverify" ]; then KVV=$O/kvverify; else KVV=./kvverify; fi
fi
case $KVV in /*) ;; *) KVV=$(pwd)/$KVV ;; esac
SHARED=${KVV_SHARED:-../shared}
case $SHARED in /*) ;; *) SHARED=$(pwd)/$SHARED ;; esac
T=${TMPDIR:-/tmp}/kvv-test-doc-examples.$$
mkdir -p "$T/bin" "$T/work/ex" || exit 1
trap 'rm -rf "$T"' EXIT
printf '#!/bin/sh\nexec "%s" "$@"\n' "$KVV" >"$T/bin/kvverify" && chmod +x "$T/bin/kvverify"
[ -d "$SHARED" ] && ln -s "$SHARED" "$T/work/shared"
ln -s "$(pwd)/vectors" "$T/work/ex/vectors"

PATH="$T/bin:$PATH" WORK="$T/work/ex" HAVE_SHARED=$([ -d "$SHARED" ] && echo 1 || echo 0) \
    python3 - README.md docs/*.md <<'PY'
import json, os, re, subprocess, sys

work = os.environ["WORK"]
have_shared = os.environ["HAVE_SHARED"] == "1"
fails = 0
ran = 0

def fail(msg):
    global fails
    fails += 1
    print("FAIL: " + msg)

OUTPUT_SIGNS = re.compile(r"^(check +verdict|workload |model +\S+\.gguf|PASS |DIVERGED |"
                          r"first divergence: |kvverify: |  policy +budget|op +engine)")

def blocks(path):
    """(marker text or None, marker kind, block lines, first line number) per fenced block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i, out = 0, []
    while i < len(lines):
        if lines[i].startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            # the marker: the comment ending on the line before the fence
            k, marker, kind = i - 1, None, None
            if k >= 0 and lines[k].rstrip().endswith("-->"):
                m = k
                while m >= 0 and "<!--" not in lines[m]:
                    m -= 1
                text = "\n".join(lines[m:k + 1])
                if re.match(r"\s*<!--\s*example", text):
                    kind, marker = "example", text
                elif re.match(r"\s*<!--\s*illustration", text):
                    kind, marker = "illustration", text
            out.append((marker, kind, lines[i + 1:j], i + 1))
            i = j + 1
        else:
            i += 1
    return out

def parse_marker(text):
    keys = {"run": None, "vary": [], "exit": 0, "stream": "stdout", "format": "text"}
    for ln in text.split("\n"):
        m = re.match(r"\s*(run|vary|exit|stream|format):\s*(.*?)\s*$", ln)
        if not m:
            continue
        k, v = m.group(1), m.group(2)
        if k == "vary":
            keys["vary"].append(v)
        elif k == "run" and keys["run"]:
            keys["run"] += "; " + v
        elif k == "exit":
            keys["exit"] = int(v)
        else:
            keys[k] = v
    return keys

def norm(line, vary):
    line = line.rstrip()
    for v in vary:
        line = re.sub(v, "<vary>", line)
    return line

def match_text(doc, out, vary):
    """Greedy-with-backtracking match of doc lines (with ... and `X ...`) to out."""
    doc = [norm(d, vary) for d in doc if not d.startswith("$ ")]
    out = [norm(o, vary) for o in out]
    memo = {}
    def one(d, o):
        if d.endswith(" ..."):
            return o.startswith(d[:-4].rstrip())
        return d == o
    def m(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(doc):
            r = j == len(out)
        elif doc[i].strip() == "...":
            r = any(m(i + 1, k) for k in range(j, len(out) + 1))
        else:
            r = j < len(out) and one(doc[i], out[j]) and m(i + 1, j + 1)
        memo[key] = r
        return r
    if m(0, 0):
        return None
    # where it first goes wrong, for the message
    j = 0
    for d in doc:
        if d.strip() == "...":
            continue
        hits = [k for k in range(j, len(out)) if one(d, out[k])]
        if not hits:
            return "documented line not printed: %r" % d
        j = hits[0] + 1
    return "extra output lines after the documented ones"

def match_json(doc, act, vary, path="$"):
    if isinstance(doc, dict):
        if list(doc.keys()) == ["…"]:
            return None if isinstance(act, dict) else "%s: not an object" % path
        if not isinstance(act, dict):
            return "%s: not an object" % path
        for k, v in doc.items():
            if k in vary:
                continue
            if k not in act:
                return "%s.%s: not in the output" % (path, k)
            e = match_json(v, act[k], vary, path + "." + k)
            if e:
                return e
        return None
    if isinstance(doc, list):
        if not isinstance(act, list) or len(act) < len(doc):
            return "%s: fewer elements than documented" % path
        for i, v in enumerate(doc):
            e = match_json(v, act[i], vary, "%s[%d]" % (path, i))
            if e:
                return e
        return None
    if isinstance(doc, str) and (doc.endswith("…") or doc.endswith("...")):
        p = doc.rstrip("…").rstrip(".")
        return None if isinstance(act, str) and act.startswith(p) else \
            "%s: %r does not start with %r" % (path, act, p)
    if doc != act:
        return "%s: documented %r, printed %r" % (path, doc, act)
    return None

for path in sys.argv[1:]:
    for marker, kind, body, line in blocks(path):
        where = "%s:%d" % (path, line)
        if kind is None:
            if any(OUTPUT_SIGNS.match(b) for b in body):
                fail("%s: looks like program output but has no example or illustration marker"
                     % where)
            continue
        if kind == "illustration":
            continue
        k = parse_marker(marker)
        if not k["run"]:
            fail("%s: example without run:" % where)
            continue
        if "../shared" in k["run"] and not have_shared:
            print("SKIP: %s (needs ../shared)" % where)
            continue
        ran += 1
        p = subprocess.run(k["run"], shell=True, cwd=work, capture_output=True, text=True)
        if p.returncode != k["exit"]:
            fail("%s: `%s` exited %d, documented %d: %s" % (where, k["run"], p.returncode,
                                                            k["exit"], p.stderr.strip()[-300:]))
            continue
        text = {"stdout": p.stdout, "stderr": p.stderr,
                "both": p.stdout + p.stderr}[k["stream"]]
        if k["format"] == "json":
            try:
                err = match_json(json.loads("\n".join(body)), json.loads(text), k["vary"])
            except ValueError as e:
                err = "not JSON: %s" % e
        else:
            out = text.split("\n")
            if out and out[-1] == "":
                out.pop()
            err = match_text(body, out, k["vary"])
        if err:
            fail("%s: `%s`: %s" % (where, k["run"], err))
        else:
            print("ok: %s `%s`" % (where, k["run"]))

print("%d examples run" % ran)
sys.exit(1 if fails else 0)
PY
rc=$?

# `kvverify help` names every check the audit runs
"$KVV" checks --json >"$T/c.json" && "$KVV" help >"$T/help" || { echo "FAIL: kvverify checks/help"; exit 1; }
python3 - "$T/c.json" "$T/help" <<'PY' || rc=1
import json, re, sys
checks = [c["name"] for c in json.load(open(sys.argv[1]))["checks"] if c["in_audit"]]
line = [l for l in open(sys.argv[2]) if re.match(r"\s+audit\s", l)]
listed = re.findall(r"[a-z]+", line[0].split(":", 1)[1].split("(")[0]) if line else []
if listed != checks:
    print("FAIL: kvverify help lists the audit's checks as %s; the audit runs %s" % (listed, checks))
    sys.exit(1)
print("ok: kvverify help lists the audit's checks:", ", ".join(checks))
PY
[ $rc -eq 0 ] && echo "doc examples: all cases passed"
exit $rc
