"""The analysis tools over the whole map view at several zooms, read from the embedding overviews
(tessera-ovr:), beside the capped full-vector path (model.OVERVIEWS = False: 10 m vectors, at most 768 px per
side around the view's centre) on the same view in the same run, in headless Chromium on the local Range server.

    python benchmarks/anyzoom.py [--px 384] [--network 50,40] [--zooms 10,40,160,1000] [--screen 1600x1000]
                                 [--tools similarity,classify,cluster,change]

The view is centred on utm30's data, west of the Greenwich meridian: zoomed out it shows utm31 too, and every
tool reads both zones (the figures say how many zones and valid pixels).  classify is k-NN from labels on
both zones' data (scikit-learn loaded, and the labels' vectors read, before the first timing); cluster is
k-means (k=5); change is 2023 -> 2024 from the two year stores.

Each similarity is timed from a cold cache (the bridge's byte cache forgotten, the HTTP cache disabled) under
the emulated link (Chromium DevTools), after the view moved there; bytes are the store bytes the bridge
fetched, per pixel of the explorer's map (760 x 520), or of the screen given by --screen: the explorer's
view grid (app/session.py MAP_W, MAP_H, which the tools' regions follow) is then set to that size in the page's
Python for the run, so the tools analyse a view of that many screen pixels (the figure on the page keeps its size).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from browser_util import CHROMIUM, CHROMIUM_ARGS, build_test_site, static_server, wait_state  # noqa: E402

TIMED = """async ([name, args]) => {
    await window.tesseraWorker.forgetBytes();  // Python's reads happen in its worker (app/web/worker.js)
    await window.tesseraWorker.resetStats();
    const t0 = performance.now();
    const res = await window.tesseraApi[name](...args);
    const ms = performance.now() - t0;
    const stats = await window.tesseraWorker.stats();
    return {ms, bytes: stats.bytes, requests: stats.requests, level: res.level, pixel: res.pixel,
            window: Array.from(res.window), valid: res.valid, zones: res.zones.length, status: res.status};
}"""
CALLS = {"similarity": ["similarity", ["selection", "mean", -1.0]], "classify": ["classify", ["k-NN", {"seed": 0}]],
         "cluster": ["cluster", [5, 0]], "change": ["change", [2023, 2024]]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--px", type=int, default=384)
    ap.add_argument("--network", default="50,40", help="MBIT,RTT_MS of the emulated link ('' for none)")
    ap.add_argument("--zooms", default="10,40,160,1000", help="metres per map pixel")
    ap.add_argument("--screen", default=None, help="WxH: analyse a view of that many screen pixels (e.g. 1600x1000)")
    ap.add_argument("--tools", default="similarity", help="comma-separated: similarity, classify, cluster, change")
    a = ap.parse_args()

    import numpy as np
    from playwright.sync_api import sync_playwright

    from app.session import MAP_H, MAP_W
    if a.screen:
        MAP_W, MAP_H = (int(x) for x in a.screen.lower().split("x"))
    from builder import demo
    from tools_util import pixel_lonlat, training_pixels, zone_vectors
    tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    unknown = set(tools) - set(CALLS)
    if unknown:
        ap.error(f"unknown tools {', '.join(sorted(unknown))} (tools: {', '.join(CALLS)})")

    with tempfile.TemporaryDirectory() as d:
        site = Path(d) / "site"
        build_test_site(site, Path(d), a.px)
        store = site / "data" / "2024.zarr"
        v = zone_vectors(store, "utm30")
        rows, cols = np.nonzero(np.isfinite(v[..., 0]))
        lon, lat = pixel_lonlat(store, "utm30", int(rows.mean()), int(cols.mean()))
        with static_server(site) as base, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            ctx = browser.new_context()
            page = ctx.new_page()
            page.goto(base + "index.html")
            assert wait_state(page) == "ready"
            if a.screen:
                page.evaluate(f"window.tesseraWorker.python('import app.session as s; s.MAP_W, s.MAP_H = {MAP_W}, {MAP_H}')")
            page.evaluate("async ([lon, lat]) => { await tesseraApi.view(lon, lat, 3000); await tesseraApi.select(lon, lat); }",
                          [lon, lat])
            if "classify" in tools:  # labels on both zones' data, and scikit-learn loaded, before any timing
                for zone in ("utm30", "utm31"):
                    for r, c, k in training_pixels(store, zone, demo.World(), 2024, per_class=5):
                        page.evaluate("async ([lon, lat, cls]) => await tesseraApi.label(lon, lat, cls)",
                                      [*pixel_lonlat(store, zone, r, c), f"class {k}"])
                page.evaluate("async () => await tesseraApi.classify('k-NN', {seed: 0})")
            page.evaluate("async ([lon, lat]) => await tesseraApi.view(lon, lat, 3000)", [lon, lat])
            cdp = ctx.new_cdp_session(page)
            cdp.send("Network.enable")
            cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
            link = "localhost, no emulation"
            if a.network:
                mbit, rtt = (float(x) for x in a.network.split(","))
                cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": rtt,
                                                              "downloadThroughput": mbit * 1e6 / 8,
                                                              "uploadThroughput": mbit * 1e6 / 8})
                link = f"emulated {mbit:g} Mbit/s, {rtt:g} ms RTT"
            npx = MAP_W * MAP_H
            lines = []
            for tool in tools:
                lines.append(f" {tool}:")
                for m in (float(z) for z in a.zooms.split(",")):
                    got = {}
                    for mode, flag in (("capped", "False"), ("overviews", "True")):
                        page.evaluate(f"window.tesseraWorker.python('import app.model as m; m.OVERVIEWS = {flag}')")
                        page.evaluate("async ([lon, lat, s]) => await tesseraApi.view(lon, lat, s)",
                                      [lon, lat, m * MAP_W])
                        got[mode] = page.evaluate(TIMED, CALLS[tool])
                    o, c = got["overviews"], got["capped"]
                    w = lambda r: f"{r['window'][1] - r['window'][0]}x{r['window'][3] - r['window'][2]}"
                    read = "code" if "compact code" in o["status"] else "full vectors"
                    lines.append(
                        f"  {m:6g} m/px: overviews level {o['level']} ({o['pixel']:g} m, {read}) {o['zones']} zone(s), "
                        f"first {w(o)} px, {o['valid']:,} valid: {o['ms'] / 1000:5.2f} s ({o['ms'] / c['ms']:4.2f}x), "
                        f"{o['bytes'] / npx:6.2f} B/screen px ({o['bytes'] / 1e6:.2f} MB, {o['requests']} requests)  |  "
                        f"capped 10 m vectors {c['zones']} zone(s), first {w(c)} px, {c['valid']:,} valid: "
                        f"{c['ms'] / 1000:5.2f} s, {c['bytes'] / npx:6.2f} B/screen px ({c['bytes'] / 1e6:.2f} MB, "
                        f"{c['requests']} requests)")
            browser.close()
    print(f"tools over the {MAP_W}x{MAP_H} view around utm30's data (demo px {a.px}, {link}, cold cache; "
          f"baseline: the capped full-vector path on the same view, same run):")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
