#!/usr/bin/env python3
"""check_pages.py -- open kvverify's HTML reports in headless Chromium and check
what a reader would see.

    check_pages.py [--shots DIR] [--chromium PATH] SPEC

SPEC is a text file, one page a line:  NAME PAGE.html JSON[,JSON...] EXPECT
  JSON    the report(s) the page was drawn from (several: a trend page)
  EXPECT  ok, or fail=TEXT: a negative control, which must fail with a
          message containing TEXT

For every page, from the rendered DOM (Chrome DevTools protocol, cdp.py):
  * each figure the JSON calls for is there (figure[data-figure], by id), no
    other, and it has exactly the JSON's number of data points (.pt), each
    with a <title>, drawn inside its plot; kv-ulp, greedy-margin and
    memory-turns titles carry the JSON's own values;
  * every plot has a size, every figure a caption;
  * no <script>, no external src/href, no request but the page itself, no
    console error or exception;
  * the screenshot is not blank (ink and colours beyond the background).
Screenshots (whole pages, --shot-scale) go to --shots DIR as NAME.png. Exit 0 when every page behaves
as expected (ok pages pass, fail= pages fail as said), else 1.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser, CdpError, decode_png  # noqa: E402


def finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def num(v):
    """A JSON number or the schema's number strings, as a float (NaN otherwise)."""
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return math.nan
    return float(v) if finite(v) else math.nan


def count_finite(values):
    return sum(1 for v in values or [] if finite(v))


# ------------------------------------------------------------ what the JSON calls for

def check_figures(c):
    """{figure kind: points} of one check object."""
    d, name, out = c.get("details") or {}, c.get("name"), {}
    if name == "kv" and d.get("ulp_by_position"):
        k = d["ulp_by_position"]["K"]
        out["kv-ulp"] = 2 * len(k) * len(k[0])
    elif name == "patch" and d.get("layers") and "kl_by_position" in d["layers"][0]:
        n = sum(count_finite(l["kl_by_position"]) for l in d["layers"])
        out["patch-kl"] = (n + count_finite(d.get("kl_unpatched_by_position"))
                           + count_finite(d.get("control_kl_by_position")))
    elif name == "greedy" and d.get("margins_cached"):
        out["greedy-margin"] = (count_finite(d["margins_cached"])
                                + count_finite(d["margins_nocache"]))
    elif name == "invariance" and d.get("ulp_by_layer"):
        out["invariance-ulp"] = sum(count_finite(v[t]) for v in d["ulp_by_layer"]
                                    for t in ("K", "V", "residual"))
    elif name == "batch" and d.get("ulp_by_layer"):
        out["batch-ulp"] = (sum(count_finite(v[t]) for v in d["ulp_by_layer"][:12]
                                for t in ("K", "V"))
                            + sum(1 for v in d["ulp_by_layer"][:12] if finite(v.get("logits"))))
    elif name == "compare":
        rows = [r for r in c.get("layers", []) if r["layer"] >= 0]
        if rows:
            out["compare-layer-nmse"] = sum(1 for r in rows if math.isfinite(num(r["nmse"])))
        if d.get("kl_by_position"):
            out["compare-position"] = (sum(1 for v in d["kl_by_position"] if math.isfinite(num(v)))
                                       + sum(1 for v in d["logits_nmse_by_position"]
                                             if math.isfinite(num(v))))
        m = d.get("residual_nmse_by_position")
        if m:
            out["compare-residual-map"] = len(m) * len(m[0])
    elif name == "kvdirect" and d.get("runs"):
        out["kvdirect-runs"] = len(d["runs"])
    elif name == "evict":
        for key, kind in (("by_budget_summary", "evict-tokens"),
                          ("equal_bytes_summary", "evict-bytes")):
            if d.get(key):
                out[kind] = 2 * sum(1 for r in d[key] if r.get("n_prompts", 0) > 0)
    elif name == "memory" and d.get("turns"):
        out["memory-turns"] = 3 * len(d["turns"])
    elif name == "tables" and d.get("cross_table"):
        out["tables-ulp"] = sum(1 for p in d["cross_table"] for t in ("K", "V", "logits")
                                if p[t]["max_ulp"] is not None)
    elif name == "latency" and d.get("rows"):
        out["latency-batch"] = 2 * sum(1 for r in d["rows"] if r["layer"] == -1)
    return out


def doc_figures(doc, prefix=""):
    """{figure id: points} of one document."""
    out = {}
    if "checks" in doc:
        for c in doc["checks"]:
            for kind, n in check_figures(c).items():
                out[prefix + kind] = n
    elif "results" in doc:
        for i, r in enumerate(doc["results"]):
            for kind, n in check_figures(r["result"]).items():
                out["%sr%d-%s" % (prefix, i, kind)] = n
    elif doc.get("command") == "numerics":
        engines = doc["engines"]
        out[prefix + "numerics-hist"] = sum(
            1 for op in engines[0]["ops"] for e in engines
            for v in e["ops"].get(op, {}).get("total", {}).get("histogram", {}).values() if v > 0)
    return out


def trend_figures(docs):
    """Figures of a trend page: the verdict grid, one trend per check (counted
    by kind), then the latest night in full."""
    suite = "results" in docs[0]
    order = sorted(range(len(docs)), key=lambda i: docs[i].get("started", ""))
    keys = {}
    for night in order:
        items = docs[night]["results"] if suite else docs[night]["checks"]
        for it in items:
            c = it["result"] if suite else it
            key = (it["case"] + " / " if suite else "") + c["name"]
            keys.setdefault(key, {})[night] = c
    cells = sum(len(v) for v in keys.values())
    points = 0
    for nights in keys.values():
        for c in nights.values():
            tot = c.get("totals")
            points += 1 if tot and tot["compared"] > 0 else 0
            points += 1 if math.isfinite(num(c.get("seconds"))) else 0
    out = {"trend-verdicts": cells}
    out.update(doc_figures(docs[order[-1]], "latest-"))
    return out, {"trend-check": (len(keys), points)}


# ------------------------------------------------------------ what the page shows

DOM_QUERY = r"""
(() => {
  const inside = (p, box) => { const r = p.getBoundingClientRect();
    const x = r.left + r.width / 2, y = r.top + r.height / 2;
    return x >= box.left - 2 && x <= box.right + 2 && y >= box.top - 2 && y <= box.bottom + 2; };
  const figs = [...document.querySelectorAll('figure[data-figure]')].map(f => {
    const svgs = [...f.querySelectorAll('svg.plot')];
    let pts = 0, titled = 0, inplot = 0; const titles = [];
    for (const s of svgs) {
      const box = s.getBoundingClientRect();
      for (const p of s.querySelectorAll('.pt')) {
        pts++;
        const t = p.querySelector('title');
        if (t && t.textContent.trim()) { titled++; titles.push(t.textContent); }
        if (inside(p, box)) inplot++;
      }
    }
    const cap = f.querySelector('figcaption');
    return {id: f.id, kind: f.dataset.figure, declared: Number(f.dataset.points), pts, titled,
            inplot, titles, caption: cap ? cap.textContent.trim() : '',
            sizes: svgs.map(s => { const r = s.getBoundingClientRect(); return [r.width, r.height]; })};
  });
  const ext = [...document.querySelectorAll('[src],[href]')]
      .map(e => e.getAttribute('src') || e.getAttribute('href'))
      .filter(u => !u.startsWith('#'));
  return {title: document.title, figs, scripts: document.scripts.length, external: ext,
          resources: performance.getEntriesByType('resource').map(e => e.name)};
})()
"""

BACKGROUND = (0xf6, 0xf8, 0xfa)


def blank_reasons(png):
    """Why the screenshot looks blank (empty list: it does not)."""
    w, h, rows, bpp = decode_png(png)
    ink, colours = 0, set()
    for row in rows:
        for i in range(0, w * bpp, bpp):
            px = row[i:i + 3]
            if max(abs(px[k] - BACKGROUND[k]) for k in range(3)) > 40:
                ink += 1
            colours.add((px[0] >> 4, px[1] >> 4, px[2] >> 4))
    frac = ink / float(w * h)
    out = []
    if frac < 0.02:
        out.append("screenshot blank: %.2f%% of pixels differ from the background" % (100 * frac))
    if len(colours) < 8:
        out.append("screenshot blank: %d colours" % len(colours))
    return out


def value_titles(fig, docs):
    """Titles that must appear for the figures whose points carry JSON values."""
    want = []
    for doc in docs:
        for c in doc.get("checks", []):
            d = c.get("details") or {}
            if fig["kind"] == "greedy-margin" and c["name"] == "greedy":
                for run, key, tok in (("cached", "margins_cached", "tokens_cached"),
                                      ("no-cache", "margins_nocache", "tokens_nocache")):
                    for i, m in enumerate(d.get(key, [])):
                        if finite(m):
                            want.append("%s, step %d: token %d, margin %.9g"
                                        % (run, i, d[tok][i], m))
            if fig["kind"] == "kv-ulp" and c["name"] == "kv":
                for t_name, grid in d["ulp_by_position"].items():
                    for l, row in enumerate(grid):
                        for t, u in enumerate(row):
                            if u is not None:
                                want.append("%s layer %d, position %d: max %d ULP"
                                            % (t_name, l, t, u))
            if fig["kind"] == "memory-turns" and c["name"] == "memory":
                # (how the title starts, how it ends): the series name sits between
                for row in d["turns"]:
                    for key in ("full_bytes", "kvdirect_layer_bytes", "kvdirect_token_bytes"):
                        want.append(("turn %d (%d positions): " % (row["turn"], row["positions"]),
                                     " %d B" % row[key]))
    return want


def check_page(page, html, docs, shot_path, shot_scale):
    reasons = []
    url = "file://" + os.path.abspath(html)
    page.load(url)
    dom = page.eval(DOM_QUERY)
    if len(docs) > 1:
        expected, by_kind = trend_figures(docs)
        order = sorted(range(len(docs)), key=lambda i: docs[i].get("started", ""))
        shown = [docs[order[-1]]]  # the latest (the last given among equal times), in full
    else:
        expected, by_kind = doc_figures(docs[0]), {}
        shown = docs
    got = {f["id"]: f for f in dom["figs"]}
    for fid, n in sorted(expected.items()):
        f = got.get(fid)
        if not f:
            reasons.append("figure %s missing" % fid)
        elif f["pts"] != n or f["declared"] != n:
            reasons.append("figure %s: %d points drawn, %d declared, the JSON has %d"
                           % (fid, f["pts"], f["declared"], n))
    for kind, (count, points) in by_kind.items():
        figs = [f for f in dom["figs"] if f["kind"] == kind]
        drawn = sum(f["pts"] for f in figs)
        if len(figs) != count or drawn != points:
            reasons.append("%s: %d figures with %d points, the JSON has %d with %d"
                           % (kind, len(figs), drawn, count, points))
    for f in dom["figs"]:
        if f["id"] not in expected and f["kind"] not in by_kind:
            reasons.append("figure %s not called for by the JSON" % f["id"])
        if f["titled"] != f["pts"]:
            reasons.append("figure %s: %d of %d points lack a <title>"
                           % (f["id"], f["pts"] - f["titled"], f["pts"]))
        if f["inplot"] != f["pts"]:
            reasons.append("figure %s: %d of %d points outside their plot"
                           % (f["id"], f["pts"] - f["inplot"], f["pts"]))
        if len(f["caption"]) < 20:
            reasons.append("figure %s: no caption" % f["id"])
        if not f["sizes"] or any(w < 200 or h < 100 for w, h in f["sizes"]):
            reasons.append("figure %s: a plot has no size (%s)" % (f["id"], f["sizes"]))
        titles = f["titles"]
        for want in value_titles(f, shown):
            if isinstance(want, tuple):
                ok = any(t.startswith(want[0]) and t.endswith(want[1]) for t in titles)
            else:
                ok = any(t.startswith(want) for t in titles)
            if not ok:
                reasons.append("figure %s: no point titled %r" % (f["id"], want))
                break
    if dom["scripts"]:
        reasons.append("%d <script> elements" % dom["scripts"])
    if dom["external"]:
        reasons.append("external references: %s" % dom["external"][:3])
    others = [u for u in page.requests if u != url] + dom["resources"]
    if others:
        reasons.append("network requests: %s" % others[:3])
    if page.console_errors:
        reasons.append("console errors: %s" % page.console_errors[:3])
    if shot_path:
        with open(shot_path, "wb") as fh:
            fh.write(page.screenshot(scale=shot_scale))
    reasons += blank_reasons(page.screenshot(scale=0.125))
    return reasons, len(dom["figs"]), sum(f["pts"] for f in dom["figs"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("spec")
    ap.add_argument("--shots", help="folder for the screenshots")
    ap.add_argument("--shot-scale", type=float, default=0.5,
                    help="scale of the saved screenshots (default 0.5: whole pages, quickly)")
    ap.add_argument("--chromium", default="chromium")
    a = ap.parse_args()
    if a.shots:
        os.makedirs(a.shots, exist_ok=True)
    specs = []
    with open(a.spec) as fh:
        for line in fh:
            f = line.split("#", 1)[0].split(None, 3)
            if f:
                specs.append([x.strip() for x in f])
    bad = 0
    t0 = time.monotonic()
    with Browser(a.chromium) as browser:
        page = browser.new_page(width=1200, height=900)
        print("chromium started in %.1f s" % (time.monotonic() - t0))
        for name, html, jsons, expect in specs:
            t = time.monotonic()
            docs = [json.load(open(j)) for j in jsons.split(",")]
            shot = os.path.join(a.shots, name + ".png") if a.shots and expect == "ok" else None
            try:
                reasons, nfig, npts = check_page(page, html, docs, shot, a.shot_scale)
            except CdpError as e:
                reasons, nfig, npts = ["browser: %s" % e], 0, 0
            secs = time.monotonic() - t
            if expect == "ok":
                if reasons:
                    bad += 1
                    print("FAIL  %s (%s):" % (name, html))
                    for r in reasons:
                        print("      " + r)
                else:
                    print("ok    %s: %d figures, %d points, not blank, no errors (%.1f s)%s"
                          % (name, nfig, npts, secs, " -> " + shot if shot else ""))
            else:
                text = expect.split("=", 1)[1]
                if any(text in r for r in reasons):
                    print("ok    %s: control detected: %s (%.1f s)"
                          % (name, [r for r in reasons if text in r][0], secs))
                else:
                    bad += 1
                    print("FAIL  %s: control NOT detected (wanted a failure about %r; got %s)"
                          % (name, text, reasons or "none"))
    print("%d of %d pages as expected in %.1f s" % (len(specs) - bad, len(specs),
                                                    time.monotonic() - t0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
