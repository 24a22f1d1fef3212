"""The analysis tools over the whole map view at several zooms, read from the embedding overviews
(tessera-ovr:), beside the capped full-vector path (budgets.OVERVIEWS = False: 10 m vectors, at most 768 px per
side around the view's centre) on the same view in the same run, in headless Chromium on the local Range server.

    python benchmarks/anyzoom.py [--px 384] [--network 50,40] [--zooms 10,40,160,1000] [--screen 1600x1000]
                                 [--tools similarity,classify,cluster,change] [--sparse]

By default the views lie in the demo's dense site (three whole 0.1 degree tiles in Sussex, the realistic demo
data), and at each zoom the screen is what data fill: 1600 x 1000 screen pixels at 10 m per pixel, and at coarser
zooms the part of it the site covers (16 km x 10 km of ground: 400 x 250 at 40 m, 100 x 62 at 160 m), so bytes
per screen pixel are those of a screen full of data.  --screen WxH sets one screen size for every zoom instead;
--sparse centres the views on the small tiles' data as before (a mostly empty screen when zoomed out).
The explorer's view grid (app/session.py MAP_W, MAP_H, which the tools' regions follow) is set to the screen size
in the page's Python (the figure on the page keeps its size).

classify is k-NN from labels on the data in view (scikit-learn loaded, and the labels' vectors read, before the
first timing); cluster is k-means (k=5); change is 2023 -> 2024 from the two year stores.  Each tool call is
timed from a cold cache (the bridge's byte cache forgotten, the HTTP cache disabled) under the emulated link
(Chromium DevTools), after the view moved there; bytes are the store bytes the bridge fetched.
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
    ap.add_argument("--sparse", action="store_true", help="the small tiles' data (no dense site) as before")
    a = ap.parse_args()

    import numpy as np
    from playwright.sync_api import sync_playwright

    fixed = tuple(int(x) for x in a.screen.lower().split("x")) if a.screen else None

    def screen(m: float) -> tuple[int, int]:
        """The screen at m metres per pixel: --screen, else what the dense site's 16 x 10 km fill (at most 1600 x 1000)."""
        if fixed or a.sparse:
            return fixed or (760, 520)
        return max(1, min(1600, round(16_000 / m))), max(1, min(1000, round(10_000 / m)))
    from builder import demo
    from tools_util import pixel_lonlat, training_pixels, zone_vectors
    tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    unknown = set(tools) - set(CALLS)
    if unknown:
        ap.error(f"unknown tools {', '.join(sorted(unknown))} (tools: {', '.join(CALLS)})")

    with tempfile.TemporaryDirectory() as d:
        site = Path(d) / "site"
        build_test_site(site, Path(d), a.px, dense=not a.sparse)
        store = site / "data" / "2024.zarr"
        if a.sparse:
            v = zone_vectors(store, "utm30")
            rows, cols = np.nonzero(np.isfinite(v[..., 0]))
            lon, lat = pixel_lonlat(store, "utm30", int(rows.mean()), int(cols.mean()))
        else:
            lon, lat = demo.DENSE[1][0] - 0.05, demo.DENSE[1][1]  # the dense site's middle: utm30, near utm31
        with static_server(site) as base, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            ctx = browser.new_context()
            page = ctx.new_page()
            page.goto(base + "index.html")
            assert wait_state(page) == "ready"
            set_screen = lambda w, h: page.evaluate(
                f"window.tesseraWorker.python('import app.session as s; s.MAP_W, s.MAP_H = {w}, {h}')")
            set_screen(*screen(10))
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
            lines = []
            for tool in tools:
                lines.append(f" {tool}:")
                for m in (float(z) for z in a.zooms.split(",")):
                    w_px, h_px = screen(m)
                    set_screen(w_px, h_px)
                    npx = w_px * h_px
                    got = {}
                    for mode, flag in (("capped", "False"), ("overviews", "True")):
                        page.evaluate(f"window.tesseraWorker.python('import app.budgets as m; m.OVERVIEWS = {flag}')")
                        page.evaluate("async ([lon, lat, s]) => await tesseraApi.view(lon, lat, s)",
                                      [lon, lat, m * w_px])
                        got[mode] = page.evaluate(TIMED, CALLS[tool])
                    o, c = got["overviews"], got["capped"]
                    w = lambda r: f"{r['window'][1] - r['window'][0]}x{r['window'][3] - r['window'][2]}"
                    read = "code" if "compact code" in o["status"] else "full vectors"
                    lines.append(
                        f"  {m:6g} m/px, screen {w_px}x{h_px}: overviews level {o['level']} ({o['pixel']:g} m, {read}) {o['zones']} zone(s), "
                        f"first {w(o)} px, {o['valid']:,} valid: {o['ms'] / 1000:5.2f} s ({o['ms'] / c['ms']:4.2f}x), "
                        f"{o['bytes'] / npx:6.2f} B/screen px ({o['bytes'] / 1e6:.2f} MB, {o['requests']} requests)  |  "
                        f"capped 10 m vectors {c['zones']} zone(s), first {w(c)} px, {c['valid']:,} valid: "
                        f"{c['ms'] / 1000:5.2f} s, {c['bytes'] / npx:6.2f} B/screen px ({c['bytes'] / 1e6:.2f} MB, "
                        f"{c['requests']} requests)")
            browser.close()
    where = "utm30's small tiles" if a.sparse else "the dense site (a screen full of data at each zoom)"
    print(f"tools over views of {where} (demo px {a.px}, {link}, cold cache; "
          f"baseline: the capped full-vector path on the same view, same run):")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
