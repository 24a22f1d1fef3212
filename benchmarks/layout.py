"""The page's layout in headless Chromium at 1366x768: how tall the page is and how many controls a user can see and
reach without scrolling, for this tree's explorer beside a baseline's (another git revision, built from `git archive`
in the same run on the same data).

    python benchmarks/layout.py [--baseline main]

Controls are counted as tests/browser_util.py visible_controls does (inputs, selects, buttons, text areas, sliders
whose centre is in the window and on top: not clipped by a scrolled side bar, not covered). Both are measured once the
explorer is ready with its plots, then after a pixel is selected (the plots that answer a click shown).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from browser_util import (CHROMIUM, CHROMIUM_ARGS, build_test_site, scroll_height, static_server,  # noqa: E402
                          visible_controls, wait_state)

SIZE = {"width": 1366, "height": 768}
PLOTS = "window.tesseraTimings && window.tesseraTimings.plots"


def baseline_site(ref: str, data: Path, dest: Path, work: Path) -> Path:
    """The site of git revision `ref` (its own `builder site`, this repository's package cache) with a copy of `data`."""
    tree = work / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", ref], cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "builder", "site", "--out", str(dest), "--cache", str(REPO / ".cache"), "-q"],
                   cwd=tree, check=True, capture_output=True)
    shutil.copytree(data, dest / "data")
    return dest


def measure(browser, base: str, lonlat: tuple[float, float]) -> dict:
    ctx = browser.new_context(viewport=SIZE)
    page = ctx.new_page()
    page.goto(base + "index.html")
    assert wait_state(page) == "ready"
    page.wait_for_function(PLOTS, timeout=120_000)
    out = {"height": scroll_height(page), "controls": visible_controls(page)}
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", list(lonlat))
    page.evaluate("async () => await window.tesseraApi.redraw()")
    out.update(height_click=scroll_height(page), controls_click=visible_controls(page))
    ctx.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", default=None, help="a git revision to measure beside this tree (e.g. main)")
    a = ap.parse_args()
    import numpy as np
    import zarr
    from playwright.sync_api import sync_playwright
    from tools_util import pixel_lonlat

    with tempfile.TemporaryDirectory() as d:
        site = build_test_site(Path(d) / "site", Path(d))
        store = site / "data" / "2024.zarr"
        scales = zarr.open_group(store / "utm30", mode="r")["scales"][:]
        rows, cols = np.nonzero(np.isfinite(scales) & (scales > 0))
        lonlat = pixel_lonlat(store, "utm30", int(rows[len(rows) // 2]), int(cols[len(cols) // 2]))
        sites = {"this tree": site}
        if a.baseline:
            (Path(d) / "base").mkdir()
            sites[f"baseline {a.baseline}"] = baseline_site(a.baseline, site / "data", Path(d) / "base-site",
                                                            Path(d) / "base")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for name, root in sites.items():
                with static_server(root) as base:
                    m = measure(browser, base, lonlat)
                print(f"{name} at {SIZE['width']}x{SIZE['height']}: page height {m['height']} px "
                      f"({m['height_click']} px after a click); controls seen without scrolling: {m['controls']} "
                      f"({m['controls_click']} after a click)")
            browser.close()


if __name__ == "__main__":
    main()
