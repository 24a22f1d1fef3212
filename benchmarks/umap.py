"""UMAP (umap-js in a Web Worker) in headless Chromium, beside the PCA scatter of the same seeded sample, same run.

    python benchmarks/umap.py [--px 384] [--points 5000,20000] [--seed 0] [--neighbours 15] [--min-dist 0.1]

The site is the realistic demo's dense one (builder/demo.py DENSE: whole 0.1 degree tiles in Sussex); the view is
3 km wide in its middle (10 m vectors). For each number of points, tesseraApi.scatter('PCA', ...) then
tesseraApi.scatter('UMAP', ...) on the same view, the same seed and so the same sample, each timed from the call to
its answer on the page (the region read, the fit and the points drawn included; the region's bytes are in the
bridge's cache for both, read once before the first timing). Also: the longest task of the page's thread while each
ran (PerformanceObserver 'longtask'; none over 50 ms prints 0), and the trustworthiness of each layout (scikit-learn,
15 neighbours) against the sampled vectors read back by zarr-python.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from browser_util import CHROMIUM, CHROMIUM_ARGS, build_test_site, static_server, wait_state  # noqa: E402

TIMED = """async ([method, settings]) => {
    window.__longTasks = [];
    const t0 = performance.now();
    const res = await window.tesseraApi.scatter(method, settings);
    const ms = performance.now() - t0;
    await new Promise((ok) => setTimeout(ok, 100));  // the observer's last entries are delivered
    return {ms, res, longest: Math.max(0, ...window.__longTasks), pts: await window.tesseraApi.scatterPoints()};
}"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--px", type=int, default=384)
    ap.add_argument("--points", default="5000,20000")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--neighbours", type=int, default=15)
    ap.add_argument("--min-dist", type=float, default=0.1)
    a = ap.parse_args()

    import numpy as np
    from playwright.sync_api import sync_playwright
    from sklearn.manifold import trustworthiness

    from builder import demo
    from tools_util import zone_vectors

    lines = []
    with tempfile.TemporaryDirectory() as d:
        site = Path(d) / "site"
        build_test_site(site, Path(d), a.px, dense=True)
        store = site / "data" / "2024.zarr"
        lon, lat = demo.DENSE[1][0] - 0.05, demo.DENSE[1][1]  # the dense site's middle: utm30
        vectors = {}
        with static_server(site) as base, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1300, "height": 950})
            page.goto(base + "index.html")
            assert wait_state(page) == "ready"
            page.evaluate("""() => { window.__longTasks = []; new PerformanceObserver((list) => {
                for (const e of list.getEntries()) window.__longTasks.push(e.duration); })
                .observe({type: 'longtask'}); }""")
            page.evaluate("async ([lon, lat]) => await tesseraApi.view(lon, lat, 3000)", [lon, lat])
            page.locator(".bk-tab", has_text="Scatter").click()  # the plot drawn on the page, as a user sees it
            page.evaluate("async () => await tesseraApi.scatter('PCA', {max_points: 100, seed: 0})")  # region read once
            for n in (int(x) for x in a.points.split(",")):
                settings = {"max_points": n, "seed": a.seed, "n_neighbors": a.neighbours, "min_dist": a.min_dist}
                got = {m: page.evaluate(TIMED, [m, settings]) for m in ("PCA", "UMAP")}
                pts = {m: json.loads(g["pts"]) for m, g in got.items()}
                assert (pts["PCA"]["rows"], pts["PCA"]["cols"]) == (pts["UMAP"]["rows"], pts["UMAP"]["cols"])
                zone = pts["PCA"]["zone"]
                if zone not in vectors:
                    vectors[zone] = zone_vectors(store, zone)
                X = vectors[zone][pts["PCA"]["rows"], pts["PCA"]["cols"]].astype(np.float64)
                trust = {m: trustworthiness(X, np.stack([q["x"], q["y"]], axis=1), n_neighbors=15)
                         for m, q in pts.items()}
                pca, um = got["PCA"], got["UMAP"]
                lines.append(
                    f"  {len(pts['UMAP']['x']):6,} points of {um['res']['valid']:,} valid: "
                    f"UMAP {um['ms'] / 1000:7.2f} s "
                    f"(x{um['ms'] / pca['ms']:.0f} the PCA scatter's {pca['ms'] / 1000:.2f} s), longest page task "
                    f"{um['longest']:.0f} ms (PCA {pca['longest']:.0f} ms), trustworthiness {trust['UMAP']:.3f} "
                    f"(PCA {trust['PCA']:.3f})")
                print(lines[-1], file=sys.stderr, flush=True)
            browser.close()
    print(f"UMAP (umap-js {a.neighbours} neighbours, minimum distance {a.min_dist:g}, seed {a.seed}) against the PCA "
          f"scatter of the same sample, same run (dense demo, px {a.px}, a 3 km view, region bytes cached):")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
