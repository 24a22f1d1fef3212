"""The map's redraw in headless Chromium: zoomed in to the zones' own previews, beside a zoomed-out redraw.

    python benchmarks/redraw.py [--px 384] [--views 8]

Builds the site and the demo stores, opens the explorer and moves the map over `--views` places in each zone
(the zones' middles and their edges and corners, where a view shows two zones). At each place it times
Explorer.redraw() in the worker (tesseraApi.view settles the view first, so the chunks and previews it needs are
read already: what is timed is the drawing) at 10 m per screen pixel, where each zone's preview is reprojected
from UTM (app/basemap.py), and at 1 km per screen pixel, where the map samples a global_rgb level alone: the
baseline, from the same page and run. Prints the medians, their ratio, and how many zones the zoomed-in views
showed.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from browser_util import CHROMIUM, CHROMIUM_ARGS, build_test_site, static_server, wait_state  # noqa: E402

TIMED = """
import gc, time
from app import render
from app.session import Explorer
state = next(o for o in gc.get_objects() if isinstance(o, Explorer))
t0 = time.perf_counter()
await state.redraw()
ms = (time.perf_counter() - t0) * 1000
v = state.render_view()
f"{ms} {sum(render.edge_window(z, v) is not None for z in state.model.zones.values())}"
"""


def places(data: Path, per_zone: int) -> tuple[list[tuple[float, float]], int]:
    """lon/lat of `per_zone` places in each zone of the 2024 store (its middle, then its edges and corners), and the
    number of its zones."""
    import asyncio
    import jsonschema

    from builder.core.reader import StoreModel
    from builder.reader.source import ZarrSource
    model = asyncio.run(StoreModel(ZarrSource(str(data / "2024.zarr")), jsonschema=jsonschema).open())
    out = []
    for zone in model.zones.values():
        h, w = zone.height, zone.width
        spots = [(h // 2, w // 2), (0, w // 2), (h - 1, w // 2), (h // 2, 0), (h // 2, w - 1), (0, 0), (h - 1, w - 1),
                 (0, w - 1), (h - 1, 0)]
        out += [zone.centre_lonlat(r, c) for r, c in spots[:per_zone]]
    return out, len(model.zones)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--px", type=int, default=384)
    ap.add_argument("--views", type=int, default=8, help="places per zone")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright
    with tempfile.TemporaryDirectory() as d:
        site = Path(d) / "site"
        build_test_site(site, Path(d), a.px)
        spots, n_zones = places(site / "data", a.views)
        times = {"in": [], "out": []}
        shown = []
        with static_server(site) as base, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(base + "index.html")
            assert wait_state(page) == "ready"
            for lon, lat in spots:
                for zoom, span in (("in", 7_600), ("out", 760_000)):  # 760 map pixels: 10 m and 1 km per pixel
                    page.evaluate("async ([lon, lat, span]) => await window.tesseraApi.view(lon, lat, span)",
                                  [lon, lat, span])
                    ms, zones = page.evaluate("async (c) => String(await window.tesseraWorker.python(c))",
                                              TIMED).split()
                    times[zoom].append(float(ms))
                    if zoom == "in":
                        shown.append(int(zones))
            browser.close()
    inn, out = statistics.median(times["in"]), statistics.median(times["out"])
    print(f"the map's redraw in Chromium ({len(spots)} places, demo --px {a.px}, chunks and previews read already; "
          f"medians):")
    print(f"  1 km per screen pixel (a global_rgb level; baseline)  {out:6.0f} ms")
    print(f"  10 m per screen pixel (the zones' previews)           {inn:6.0f} ms  {inn / out:.2f}x baseline "
          f"(max {max(times['in']):.0f} ms; of the store's {n_zones} zones, {shown.count(1)} views showed one, "
          f"{sum(n >= 2 for n in shown)} two or more)")


if __name__ == "__main__":
    main()
