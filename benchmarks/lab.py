"""The notebook against the explorer, in headless Chromium on the local Range server, and what the docs and the lab
add to the site.

    python benchmarks/lab.py [--rounds 2] [--network 50,40]

Builds a test site (tests/browser_util.py build_test_site), then:

* the site's bytes: all of it, the explorer's share, the documentation (`docs/`) and the notebook (`lab/`,
  besides the Pyodide packages it adds to `pyodide/`, counted apart);
* cold starts, alternating the two pages in fresh browser contexts (empty HTTP cache): the explorer to `ready`,
  and the lab's notebook page (an example notebook) to its kernel idle, each to the same kernel-free baseline the
  explorer's benchmarks use (bare Pyodide + numpy, `bare.html`), in the same run. `--network MBIT,RTT_MS`
  emulates a link (Chromium DevTools).
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

from browser import BARE_HTML, cold_boot  # noqa: E402
from browser_util import CHROMIUM, CHROMIUM_ARGS, build_test_site, static_server  # noqa: E402

KERNEL_IDLE = ("(() => { const p = window.jupyterapp && jupyterapp.shell.currentWidget;"
               " const k = p && p.sessionContext && p.sessionContext.session && p.sessionContext.session.kernel;"
               " return !!k && k.status === 'idle'; })()")
NOTEBOOK = "1-probe-pixels.ipynb"


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def size_figures(site: Path) -> str:
    total = tree_bytes(site)
    docs, lab = tree_bytes(site / "docs"), tree_bytes(site / "lab")
    data = tree_bytes(site / "data")
    lines = [f"site: {mb(total)} in all ({mb(data)} of it the demo stores)",
             f"  docs/ {mb(docs)} ({docs / (total - data):.1%} of the site without its data)",
             f"  lab/  {mb(lab)} ({lab / (total - data):.1%}), besides the Pyodide packages only the notebook loads"]
    return "\n".join(lines)


def lab_boot(browser, url: str, network: str | None) -> float:
    """Milliseconds from navigation start to the notebook's kernel idle (polled every 50 ms), in a fresh context."""
    ctx = browser.new_context(viewport={"width": 1300, "height": 950})
    page = ctx.new_page()
    if network:
        mbit, rtt = (float(x) for x in network.split(","))
        cdp = ctx.new_cdp_session(page)
        cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": rtt,
                                                      "downloadThroughput": mbit * 1e6 / 8,
                                                      "uploadThroughput": mbit * 1e6 / 8})
    page.goto(url)
    page.wait_for_function(KERNEL_IDLE, timeout=600_000, polling=50)
    t = float(page.evaluate("performance.now()"))
    ctx.close()
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--network", default=None, help="MBIT,RTT_MS: emulate a link (e.g. 50,40)")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as d:
        site = Path(d) / "site"
        build_test_site(site, Path(d))
        (site / "bare.html").write_text(BARE_HTML)
        print(size_figures(site))
        with static_server(site) as base, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            bare, explorer, lab = [], [], []
            for _ in range(a.rounds):
                bare.append(cold_boot(browser, base + "bare.html", a.network, "window.bareReady")["t"])
                explorer.append(cold_boot(browser, base + "index.html", a.network,
                                          "Object.assign({}, tesseraTimings)")["t"]["interactive"])
                lab.append(lab_boot(browser, base + f"lab/notebooks/index.html?path={NOTEBOOK}", a.network))
            browser.close()
        b, e, n = (statistics.median(x) / 1e3 for x in (bare, explorer, lab))
        net = f", network {a.network}" if a.network else ", localhost"
        print(f"cold starts (medians of {a.rounds}{net}):")
        print(f"  bare Pyodide + numpy  {b:6.2f} s  (baseline)")
        print(f"  explorer to ready     {e:6.2f} s  {e / b:5.2f}x")
        print(f"  lab kernel idle       {n:6.2f} s  {n / b:5.2f}x   {n / e:.2f}x the explorer's")


if __name__ == "__main__":
    main()
