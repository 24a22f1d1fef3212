"""The explorer in headless Chromium on the local Range server: start-up, pixel reads, similarity.

    python benchmarks/browser.py [--px 384] [--queries 30] [--rounds 2] [--network 50,40]

Prints first: time to first map paint (state "map": the JS preview) and to interactive (state
"ready"), each as a ratio to booting bare Pyodide with numpy (bare.html, written into the
benchmark's site) cold in the same browser and run, alternating the two pages in fresh contexts
(empty HTTP cache); `--network MBIT,RTT_MS` emulates a link for those boots (Chromium DevTools).
Then: cold start to interactive with its breakdown (Pyodide, packages, Panel
import, store open, first render), warm start (HTTP cache), total bytes at
start, latency/requests/bytes per pixel query once the shard index is cached,
similarity over one 256x256 shard (fetch and compute), the exports, and each
analysis tool over the demo view (time, bytes fetched, the longest main-thread
task during it from the browser's long-task timing), beside similarity over
the same view in the same run; then polygon labelling, the animation export, a
label set too large for the link imported into the browser's storage, and its
restore when the link is reloaded (between the boot marks labels_restoring and
labels_restored), in the same way.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from browser_util import CHROMIUM, CHROMIUM_ARGS, build_test_site, static_server, wait_state  # noqa: E402


# The boot marks, once the worker has marked the end of its start-up (after `ready` and the plots built then).
APP_MARKED = "window.tesseraTimings && window.tesseraTimings.app && window.tesseraTimings"

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--px", type=int, default=384)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2, help="cold boots of each page for the first-paint figures")
    ap.add_argument("--network", default=None, help="MBIT,RTT_MS: emulate a link for those boots (e.g. 50,40)")
    ap.add_argument("--boot-only", action="store_true", help="print the first-paint figures only")
    a = ap.parse_args()

    import numpy as np
    import zarr
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as d:
        site = Path(d) / "site"
        build_test_site(site, Path(d), a.px)
        (site / "bare.html").write_text(BARE_HTML)
        store = site / "data" / "2024.zarr"
        scales = zarr.open_group(store / "utm31", mode="r")["scales"][:]
        shards = {(r // 256, c // 256) for r, c in np.argwhere(~np.isnan(scales))}
        sr, sc = max(shards, key=lambda s: (~np.isnan(scales[s[0] * 256:(s[0] + 1) * 256, s[1] * 256:(s[1] + 1) * 256])).sum())
        block = scales[sr * 256:(sr + 1) * 256, sc * 256:(sc + 1) * 256]
        pts = np.argwhere(~np.isnan(block)) + [sr * 256, sc * 256]
        rng = np.random.default_rng(0)
        pts = pts[rng.choice(len(pts), a.queries + 1, replace=False)]
        import jsonschema

        from builder.core.reader import StoreModel
        from builder.reader.source import ZarrSource
        import asyncio
        model = asyncio.run(StoreModel(ZarrSource(str(store)), jsonschema=jsonschema).open())
        zone = model.zones["utm31"]
        lonlats = [zone.centre_lonlat(int(r), int(c)) for r, c in pts]
        with static_server(site) as base, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            boots = boot_figures(browser, base, a.rounds, a.network)
            if a.boot_only:
                print(boots)
                return
            ctx = browser.new_context()
            ctx.add_init_script(LONG_TASKS_JS)
            page = ctx.new_page()
            t0 = time.perf_counter()
            page.goto(base + "index.html")
            assert wait_state(page) == "ready"
            cold = time.perf_counter() - t0
            t = page.wait_for_function(APP_MARKED).json_value()
            start_bytes = page.evaluate(ALL_BYTES)
            page.reload()
            t1 = time.perf_counter()
            assert wait_state(page) == "ready"
            warm = time.perf_counter() - t1
            tw = page.wait_for_function(APP_MARKED).json_value()
            page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", list(lonlats[0]))  # touch the shard
            lat_ms, reqs, nbytes = [], [], []
            for lon, lat in lonlats[1:]:
                page.evaluate("window.tesseraWorker.resetStats()")
                s = time.perf_counter()
                page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon, lat])
                lat_ms.append((time.perf_counter() - s) * 1000)
                log = [e for e in page.evaluate("window.tesseraWorker.stats().then((s) => s.log)")
                       if (e["source"] or "").endswith("/data/2024.zarr")]  # the store, not the multi-year index
                reqs.append(len(log))
                nbytes.append(sum(e["bytes"] for e in log))
            sims = [page.evaluate("(a) => window.tesseraApi.timeSimilarity(...a)",
                                  ["utm31", int(sr) * 256, (int(sr) + 1) * 256, int(sc) * 256, (int(sc) + 1) * 256]) for _ in range(3)]
            exports = export_figures(page, lonlats[0])
            tools = tool_figures(page, site / "data")
            browser.close()
    def br(tt):
        keys = ["pyodide", "packages", "panel_imported", "store_opened", "rendered", "app"]
        prev, out = tt["start"], []
        for k in keys:
            out.append(f"{k} +{(tt[k] - prev) / 1000:.2f}s")
            prev = tt[k]
        return ", ".join(out) + f"; first map paint at {(tt['map'] - tt['start']) / 1000:.2f}s"
    print(boots)
    print(f"cold start to interactive: {cold:.2f} s (goal < 8 s)  [{br(t)}]")
    print(f"warm start (HTTP cache):   {warm:.2f} s  [{br(tw)}]")
    print(f"bytes downloaded at cold start: {start_bytes / 1e6:.1f} MB")
    print(f"pixel query (index cached, {len(lat_ms)} pixels): median {statistics.median(lat_ms):.0f} ms, "
          f"p90 {sorted(lat_ms)[int(0.9 * len(lat_ms))]:.0f} ms; {statistics.mean(reqs):.2f} requests/pixel "
          f"(one per array: embeddings + scales), {statistics.median(nbytes) / 1e3:.2f} KB/pixel")
    best = min(sims, key=lambda s: s["fetch_ms"] + s["compute_ms"])
    print(f"similarity over one 256x256 shard ({best['valid']:,} valid px): fetch {best['fetch_ms']:.0f} ms "
          f"(first: {sims[0]['fetch_ms']:.0f} ms), dequantise+cosine {best['compute_ms']:.0f} ms")

    print("exports (view 4 km around a pixel, similarity on; same run): " + exports)
    print(tools)


# The baseline page: bare Pyodide (the site's own copy, the same version) with numpy imported.
BARE_HTML = """<!doctype html><meta charset="utf-8"><title>bare Pyodide + numpy</title>
<script type="module">
const { loadPyodide } = await import("./pyodide/pyodide.mjs");
const py = await loadPyodide({ indexURL: new URL("pyodide/", location.href).href });
await py.loadPackage(["numpy"]);
py.runPython("import numpy");
window.bareReady = performance.now();
document.body.dataset.state = "ready";
</script>"""


def cold_boot(browser, url: str, network: str | None, expr: str, then: str | None = None) -> dict:
    """Boot `url` in a fresh context (empty HTTP cache) until it is ready and `then` (a JS condition) holds; `expr`
    gives its times (ms since navigation start), and `tasks` the page's main-thread tasks over 50 ms until then
    ([start, duration] in ms)."""
    ctx = browser.new_context()
    ctx.add_init_script(LONG_TASKS_JS)
    page = ctx.new_page()
    if network:
        mbit, rtt = (float(x) for x in network.split(","))
        cdp = ctx.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": rtt,
                                                      "downloadThroughput": mbit * 1e6 / 8, "uploadThroughput": mbit * 1e6 / 8})
    page.goto(url)
    assert wait_state(page, 600_000) == "ready"
    if then:
        page.wait_for_function(then, timeout=600_000)
    out = {"t": page.evaluate(expr), "tasks": page.evaluate("window.__longTasks")}
    ctx.close()
    return out


def boot_figures(browser, base: str, rounds: int, network: str | None) -> str:
    """First map paint and interactive, beside bare Pyodide + numpy booted in the same browser and run."""
    runs = []
    longest = lambda tasks, t0, t1: max([d for s, d in tasks if t0 <= s < t1], default=0)
    for _ in range(rounds):
        bare = cold_boot(browser, base + "bare.html", network, "window.bareReady")
        t = cold_boot(browser, base + "index.html", network, "Object.assign({}, tesseraTimings)",
                      then="window.tesseraTimings.plots !== undefined")  # the plots, built once the map is interactive
        tt = t["t"]
        runs.append((bare["t"], tt["map"], tt["interactive"], longest(bare["tasks"], 0, bare["t"]),
                     longest(t["tasks"], 0, tt["interactive"]), tt["plots"], longest(t["tasks"], tt["interactive"], tt["plots"])))
    bare, paint, ready, bare_long, long, plots, plots_long = (statistics.median(r[i] for r in runs) for i in range(7))
    each = "; ".join(f"bare {b / 1e3:.2f} s, paint {m / 1e3:.2f} s, ready {r / 1e3:.2f} s" for b, m, r, *_ in runs)
    link = f"emulated {network.split(',')[0]} Mbit/s, {network.split(',')[1]} ms RTT" if network else "localhost, no emulation"
    return (f"boot ({link}; median of {rounds} cold boots each, alternating; {each}):\n"
            f"  bare Pyodide + numpy (baseline)  {bare / 1e3:6.2f} s\n"
            f"  first map paint (state map)      {paint / 1e3:6.2f} s  {paint / bare:4.2f}x baseline (goal <= 0.5x)\n"
            f"  interactive (state ready)        {ready / 1e3:6.2f} s  {ready / bare:4.2f}x baseline (goal <= 1.5x)\n"
            f"  longest main-thread task until ready: {long:.0f} ms (bare Pyodide on the main thread: {bare_long:.0f} ms;"
            f" goal: Python never holds it over 200 ms)\n"
            f"  the plots laid out (spectrum, years, change; built once ready): {plots / 1e3:.2f} s, {plots / bare:4.2f}x"
            f" baseline; longest main-thread task from ready to then: {plots_long:.0f} ms")


def export_figures(page, lonlat) -> str:
    """Time and size of each export through tesseraApi, beside the similarity search they export."""
    t_sim = page.evaluate("""async ([lon, lat]) => { await tesseraApi.view(lon, lat, 4000); await tesseraApi.select(lon, lat);
        const t0 = performance.now(); await tesseraApi.similarity(true); return performance.now() - t0; }""", list(lonlat))
    out = [f"similarity {t_sim:.0f} ms"]
    for label, call in (("GeoTIFF first (loads tifffile)", "exportGeoTIFF('similarity')"),
                        ("GeoTIFF", "exportGeoTIFF('similarity')"), ("PNG", "exportPNG('similarity')"),
                        ("base GeoTIFF", "exportGeoTIFF('base')"), ("region zip", "exportRegion()")):
        page.evaluate("window.tesseraWorker.resetStats()")
        ms, n = page.evaluate(f"async () => {{ const t0 = performance.now(); const b = await tesseraApi.{call};"
                              f" return [performance.now() - t0, b.length]; }}")
        fetched = page.evaluate("window.tesseraWorker.stats().then((s) => s.bytes)")
        out.append(f"{label} {ms:.0f} ms, {n / 1e3:.0f} kB ({fetched / 1e3:.0f} kB fetched)")
    return "; ".join(out)


# Every long task (> 50 ms on the main thread) the browser reports, and room for every resource entry.
LONG_TASKS_JS = """
window.__longTasks = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__longTasks.push([e.startTime, e.duration]); })
  .observe({type: 'longtask', buffered: true});
performance.setResourceTimingBufferSize(100000);
"""

# Bytes the page and Python's worker (app/web/worker.js: the store reads, the packages) have downloaded.
ALL_BYTES = """(async () => performance.getEntriesByType('resource').reduce((s, e) => s + e.transferSize, 0)
    + await window.tesseraWorker.resourceBytes())()"""

TIMED_JS = """async ([cmd, args]) => {
    await window.tesseraWorker.resetStats();
    const all = () => """ + ALL_BYTES + """;
    const n0 = await all();
    const t0 = performance.now();
    const r = await window.tesseraApi[cmd](...args);
    const t1 = performance.now();
    await new Promise((ok) => setTimeout(ok, 100));  // long-task entries are reported after the task
    const n1 = await all();
    const longest = Math.max(0, ...window.__longTasks.filter(([s, d]) => s < t1 && s + d > t0).map(([s, d]) => d));
    const stats = await window.tesseraWorker.stats();
    const answer = r instanceof Uint8Array ? {bytes: r.length} : (r !== null && typeof r === 'object')
        ? {valid: r.valid, labelled: r.labelled, inside: r.inside} : {value: r};
    return {ms: t1 - t0, store_bytes: stats.bytes, all_bytes: n1 - n0, longest, answer};
}"""

# A reload's restore of the link's label set, between the boot marks around it (app/main.py start): its time, the data
# path's bytes requested then (the worker's fetch log; the page's own resources added for "all"), the longest task.
RESTORE_JS = """async () => {
    await new Promise((ok) => setTimeout(ok, 100));  // long-task entries are reported after the task
    const t = window.tesseraTimings, t0 = t.labels_restoring, t1 = t.labels_restored;
    const within = (start) => start >= t0 && start < t1;
    const log = (await window.tesseraWorker.stats()).log;
    const store = log.filter((e) => within(e.start - performance.timeOrigin)).reduce((s, e) => s + e.bytes, 0);
    const pageBytes = performance.getEntriesByType('resource').filter((e) => within(e.startTime))
        .reduce((s, e) => s + e.transferSize, 0);
    const longest = Math.max(0, ...window.__longTasks.filter(([s, d]) => s < t1 && s + d > t0).map(([s, d]) => d));
    return {ms: t1 - t0, store_bytes: store, all_bytes: store + pageBytes, longest};
}"""

# The stored label set's id the link holds (labels=stored:<id>, app/tools/stored.py), or null.
STORED_REF_JS = """() => { const m = /[#&]labels=stored(?::|%3A)([0-9a-f]{16})(&|$)/.exec(location.hash); return m && m[1]; }"""


NEW_REF_JS = "(old) => { const r = (" + STORED_REF_JS + ")(); return r !== null && r !== old; }"


def stored_ref(page) -> str | None:
    return page.evaluate(STORED_REF_JS)


def polygon_around(lon: float, lat: float, radius_m: float, corners: int = 7) -> list[list[float]]:
    """A regular polygon of `corners` vertices `radius_m` from lon/lat (a field drawn on the map)."""
    import math
    m_lat = 111_320.0  # metres per degree of latitude; per degree of longitude times cos(lat)
    return [[lon + radius_m * math.sin(a) / (m_lat * math.cos(math.radians(lat))), lat + radius_m * math.cos(a) / m_lat]
            for a in (2 * math.pi * k / corners for k in range(corners))]


class Figures:
    """The tools' lines: each run's time beside the baseline's (the first run given as `base`), bytes, longest task."""

    def __init__(self):
        self.base, self.lines = None, []

    def add(self, label: str, r: dict, what: str, base: bool = False) -> None:
        self.base = r["ms"] if base else self.base
        ratio = f"({r['ms'] / self.base:4.1f}x similarity)" if self.base else " " * 19
        self.lines.append(f"  {label:72s} {r['ms']:7.0f} ms {ratio}  store "
                          f"{r['store_bytes'] / 1e6:6.2f} MB, all {r['all_bytes'] / 1e6:6.2f} MB fetched; longest "
                          f"main-thread task {r['longest']:5.0f} ms; {what}")


def timed(page, cmd: str, args: list) -> dict:
    return page.evaluate(TIMED_JS, [cmd, args])


def tool_figures(page, data: Path) -> str:
    """Each analysis tool over the demo view (30 km around the centre of utm30's data: overview level 2's compact
    code since tool regions read overviews; benchmarks/anyzoom.py compares that with the capped 10 m path),
    through tesseraApi: time, store bytes fetched, all bytes fetched (scikit-learn's wheels on first use) and the
    longest main-thread task, beside similarity over the same view.  Every tool of the tools' panel runs: the five
    classifiers, one trained on one year and applied to the other, the search by examples, k-means, change, the PCA
    and UMAP scatters, the three regressions (on the same pixels labelled with numbers), then label_figures' runs and,
    last, restore_figure's reload."""
    import numpy as np

    from builder import demo
    from tools_util import pixel_lonlat, training_pixels, zone_vectors
    store = data / "2024.zarr"
    v = zone_vectors(store, "utm30")
    rows, cols = np.nonzero(np.isfinite(v[..., 0]))
    centre = pixel_lonlat(store, "utm30", int(rows.mean()), int(cols.mean()))
    page.evaluate("async ([lon, lat]) => { await tesseraApi.view(lon, lat, 30000); await tesseraApi.select(lon, lat); }",
                  list(centre))
    figs = Figures()
    similarity = ["selection", "mean", -1.0]
    r = timed(page, "similarity", similarity)
    figs.add("similarity, first over the view", r, f"{r['answer']['valid']} valid px")
    pixels = training_pixels(store, "utm30", demo.World(), 2024, per_class=6)
    for r, c, k in pixels:
        page.evaluate("async ([lon, lat, k]) => await tesseraApi.label(lon, lat, k)",
                      [*pixel_lonlat(store, "utm30", r, c), f"class {k}"])
    crossyear = {"seed": 0, "train_year": 2024, "test_year": 2023}
    runs = [("similarity (selection)", "similarity", similarity),
            ("classify k-NN, first (scikit-learn loading since the first label)", "classify", ["k-NN", {"seed": 0}]),
            ("classify k-NN", "classify", ["k-NN", {"seed": 0}]),
            ("classify logistic regression", "classify", ["logistic regression", {"seed": 0}]),
            ("classify random forest", "classify", ["random forest", {"seed": 0}]),
            ("classify MLP", "classify", ["MLP", {"seed": 0}]),
            ("classify gradient boosting", "classify", ["gradient boosting", {"seed": 0}]),
            ("classify k-NN trained on 2024, applied to 2023", "classify", ["k-NN", crossyear]),
            ("examples: class 1 against the other classes", "examples", ["class 1", "all other classes"]),
            ("cluster k-means k=5", "cluster", [5, 0]),
            ("change 2023->2024", "change", [2023, 2024]),
            ("scatter PCA (20,000 points)", "scatter", ["PCA", {}]),
            ("scatter UMAP (5,000 points)", "scatter", ["UMAP", {"max_points": 5000, "seed": 0}]),
            ("clear the labels, then label the same pixels with numbers", None, None),
            ("regression ridge", "regress", ["ridge", {"seed": 0}]),
            ("regression random forest", "regress", ["random forest", {"seed": 0}]),
            ("regression gradient boosting", "regress", ["gradient boosting", {"seed": 0}])]
    for i, (label, cmd, args) in enumerate(runs):
        if cmd is None:  # regression needs labels whose class names are numbers
            page.evaluate("async () => await tesseraApi.clearLabels()")
            for r, c, k in pixels:
                page.evaluate("async ([lon, lat, k]) => await tesseraApi.label(lon, lat, k)",
                              [*pixel_lonlat(store, "utm30", r, c), f"{k * 10 + 5}"])
            continue
        r = timed(page, cmd, args)
        figs.add(label, r, f"{r['answer']['valid']} valid px", base=i == 0)
    imported = label_figures(page, centre, figs)
    r = timed(page, "similarity", similarity)
    figs.add("similarity again (same run)", r, f"{r['answer']['valid']} valid px")
    restore_figure(page, imported, figs)
    return "tools over the demo view (same run; baseline: similarity once the view was read, the second line):\n" + \
        "\n".join(figs.lines)


def label_figures(page, centre, figs: Figures) -> int:
    """A polygon labelled around `centre` (a seeded sample of at most 2,000 of the pixels inside, added to the labels),
    the preview's animation across the years over the view, and the labels then (over the link's budget, renamed:
    a set not stored yet) imported as GeoJSON, which keeps them in the browser's storage; the number imported."""
    r = timed(page, "labelPolygon", [polygon_around(*centre, 350), "field", 0])
    figs.add("label a polygon (a field 700 m across; at most 2,000 labels)", r,
             f"{r['answer']['labelled']:,} of the {r['answer']['inside']:,} valid px inside labelled")
    r = timed(page, "exportAnimation", [])
    figs.add("export the preview across the years (APNG zip)", r, f"zip of {r['answer']['bytes'] / 1e6:.2f} MB")
    doc = json.loads(page.evaluate("tesseraApi.exportLabels()"))
    for f in doc["features"]:
        f["properties"]["class"] = "imported " + f["properties"]["class"]
    page.evaluate("async () => await tesseraApi.clearLabels()")
    before = stored_ref(page)
    r = timed(page, "importLabels", [json.dumps(doc)])
    page.wait_for_function(NEW_REF_JS, arg=before)  # the link is written after the next paint
    ref = stored_ref(page)
    text = page.evaluate("(k) => localStorage.getItem(k)", "tessera-labels-" + ref)
    assert '"imported field"' in text, text[:200]
    n = r["answer"]["value"]
    figs.add("import the labels as GeoJSON (kept in storage: over the link's budget)", r,
             f"{n:,} labels, {len(text):,} characters in storage; the link holds stored:{ref}")
    return n


def restore_figure(page, imported: int, figs: Figures) -> None:
    """The page reloaded on the link of the stored label set: its restore as the explorer boots (RESTORE_JS)."""
    t0 = time.perf_counter()
    page.reload()
    assert wait_state(page) == "ready"
    reload_s = time.perf_counter() - t0
    restored = len(json.loads(page.evaluate("window.tesseraApi.labels()"))["points"])
    assert restored == imported, (restored, imported)
    figs.add("reload: the link's stored label set restored as the explorer boots", page.evaluate(RESTORE_JS),
             f"{restored:,} labels; the whole reload to interactive {reload_s:.2f} s (the link's view, selection, "
             "similarity and tool restored too)")


if __name__ == "__main__":
    main()
