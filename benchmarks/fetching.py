"""Robust fetching against a flaky host: the explorer's data path (app/js/tessera.js, in headless Chromium, without
Pyodide: tests/browser_util.py open_bridge) reads a scripted session from builder/serve.py on 127.0.0.1 wrapped by
the tests' fault injector (tests/test_browser_flaky.py faulty_server), which delays every store request by --rtt-ms
and fails a fraction --fail of them (503, 429 with Retry-After: 0, and dropped connections, in turn).

    python benchmarks/fetching.py [--rounds 3] [--fail 0.2] [--rtt-ms 40]

The session, on a geoemb: store written from the demo tiles by tests/geoemb_writer.py (32-px inner chunks in 256-px
shards, as published): four clicks one after another (each pixel's vectors and scales of both years, at once), then
the map and a tool over one 256x256 shard at once (the first three bands and all 128, and the scales).

Prints, per configuration, medians over --rounds (fresh page each, configurations alternating): requests sent
(failed tries included), bytes received, the session's time, and reads that failed:
  * `on`: the explorer as it is (retries, reads in flight shared, neighbouring ranges coalesced);
  * `no sharing`: window.tesseraBridgeOptions = {sharedFlights: false}, the same-run baseline;
  * `no sharing, no retries`: {sharedFlights: false, retries: false}: what the host's failures cost without retries.
Then a pixel of a store with 256x256x128 inner chunks (8.4 MB each; the same tiles) beside a pixel of the 32-px
store: requests, bytes and time of a cold pixel (its shard index too), then of a pixel in the same 256-px block
(another 32-px chunk).
"""
from __future__ import annotations

import argparse
import itertools
import logging
import random
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from browser_util import CHROMIUM, CHROMIUM_ARGS, build_test_site, open_bridge  # noqa: E402
from geoemb_writer import write_geoemb  # noqa: E402
from test_browser_flaky import FAULTS, faulty_server  # noqa: E402

CONFIGS = {"on": None, "no sharing": {"sharedFlights": False},
           "no sharing, no retries": {"sharedFlights": False, "retries": False}}

SESSION_JS = """async ([url, pixels, box]) => {
    const t = window.tesseraJS;
    t.resetStats();
    const failed = [];
    const read = async (path, sel, hint) => { const r = await t.read(url, path, sel, hint); if (!r.ok) failed.push(r.error.message); };
    const t0 = performance.now();
    for (const [r, c] of pixels) {
        await Promise.all([read("utm30/embeddings", [[0, 2], null, [r, r + 1], [c, c + 1]], "pixel"),
                           read("utm30/scales", [[0, 2], [r, r + 1], [c, c + 1]], "pixel")]);
    }
    const [r0, r1, c0, c1] = box;
    await Promise.all([read("utm30/embeddings", [[1, 2], [0, 3], [r0, r1], [c0, c1]], "pixel"),
                       read("utm30/embeddings", [[1, 2], null, [r0, r1], [c0, c1]], "pixel"),
                       read("utm30/scales", [[1, 2], [r0, r1], [c0, c1]], "pixel")]);
    return {ms: performance.now() - t0, requests: t.stats.requests + t.stats.log.filter((e) => e.status === 0).length,
            bytes: t.stats.bytes, failed: failed.length, joined: t.flightStats.joined, coalesced: t.flightStats.coalesced};
}"""

PIXEL_JS = """async ([url, r, c]) => {
    const t = window.tesseraJS;
    t.resetStats();
    const t0 = performance.now();
    const out = await t.read(url, "utm30/embeddings", [[1, 2], null, [r, r + 1], [c, c + 1]], "pixel");
    if (!out.ok) throw new Error(out.error.message);
    return {ms: performance.now() - t0, requests: t.stats.requests, bytes: t.stats.bytes};
}"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fail", type=float, default=0.2, help="fraction of store requests that fail")
    ap.add_argument("--rtt-ms", type=float, default=40.0, help="delay of every store request")
    a = ap.parse_args()
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)  # each dropped connection would print a traceback

    import numpy as np
    import zarr
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as d:
        site = Path(d) / "site"
        build_test_site(site, Path(d))
        store = write_geoemb(Path(d) / "tiles", [2023, 2024], site / "data" / "flaky" / "geoemb.zarr")
        write_geoemb(Path(d) / "tiles", [2023, 2024], site / "data" / "flaky" / "geoemb256.zarr", shard=256, chunk=256)
        s = zarr.open_group(str(store / "utm30"), mode="r")["scales"][:]
        ok = np.isfinite(s).all(axis=0)
        blocks = {}
        for r, c in np.argwhere(ok):
            blocks.setdefault((r // 256, c // 256), []).append((int(r), int(c)))
        ranked = sorted(blocks, key=lambda b: -len(blocks[b]))
        br, bc = ranked[0]
        box = [int(br * 256), int(min(br * 256 + 256, s.shape[1])), int(bc * 256), int(min(bc * 256 + 256, s.shape[2]))]
        rng = np.random.default_rng(0)
        pool = blocks[ranked[1]] if len(ranked) > 1 else blocks[ranked[0]]
        pixels = [list(pool[int(i)]) for i in rng.choice(len(pool), 4, replace=False)]
        first = blocks[ranked[0]][0]  # a pixel, and another of its 256-px block but not of its 32-px chunk
        second = next(q for q in reversed(blocks[ranked[0]]) if (q[0] // 32, q[1] // 32) != (first[0] // 32, first[1] // 32))
        faults = itertools.cycle(FAULTS)
        rand = random.Random(35)
        fail = lambda key: next(faults) if rand.random() < a.fail else None
        results = {k: [] for k in CONFIGS}
        with faulty_server(site, fail, paths=("/flaky/",), delay_s=a.rtt_ms / 1000) as (base, log), \
                sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            url = base + "data/flaky/geoemb.zarr"
            for _ in range(a.rounds):
                for name, options in CONFIGS.items():
                    ctx = browser.new_context()
                    page = ctx.new_page()
                    open_bridge(page, base, options)
                    results[name].append(page.evaluate(SESSION_JS, [url, pixels, box]))
                    ctx.close()
            print(f"session: 4 pixels, then a 256x256 region (3 bands, 128 bands, scales) at once; {a.fail:.0%} of "
                  f"requests fail (503/429/dropped), {a.rtt_ms:.0f} ms added to each; medians of {a.rounds}")
            print(f"{'configuration':24} {'requests':>9} {'bytes':>12} {'time ms':>9} {'failed reads':>13}")
            med = lambda name, k: statistics.median(r[k] for r in results[name])
            for name in CONFIGS:
                print(f"{name:24} {med(name, 'requests'):9.0f} {med(name, 'bytes'):12,.0f} {med(name, 'ms'):9.0f} "
                      f"{med(name, 'failed'):13.0f}")
            print(f"(on: {med('on', 'joined'):.0f} reads joined a request in flight, {med('on', 'coalesced'):.0f} "
                  "ranges coalesced into another's request, per session)")

            a.fail = 0.0  # the pixel figures without failures
            print(f"\none pixel (128 bands of one year), {a.rtt_ms:.0f} ms per request, no failures; medians of {a.rounds}")
            print(f"{'store, read':58} {'requests':>9} {'bytes':>12} {'time ms':>9}")
            rows = {}
            for label, name in (("32-px inner chunks", "geoemb.zarr"), ("256-px inner chunks (8.4 MB)", "geoemb256.zarr")):
                for _ in range(a.rounds):
                    ctx = browser.new_context()
                    page = ctx.new_page()
                    open_bridge(page, base)
                    u = base + "data/flaky/" + name
                    page.evaluate("async (u) => { await window.tesseraJS.openSource(u); }", u)
                    rows.setdefault((label, "cold pixel"), []).append(page.evaluate(PIXEL_JS, [u, *first]))
                    rows.setdefault((label, "same 256-px block, next pixel"), []).append(page.evaluate(PIXEL_JS, [u, *second]))
                    ctx.close()
            for (label, which), rs in rows.items():
                m = lambda k: statistics.median(r[k] for r in rs)
                print(f"{label + ', ' + which:58} {m('requests'):9.0f} {m('bytes'):12,.0f} {m('ms'):9.0f}")
            browser.close()


if __name__ == "__main__":
    main()
