"""A pixel from a cold shard: the bridge's old read path and its new one, side by side in one run.

    python benchmarks/pixel.py [--px 384] [--rtt 40] [--rounds 2]

Builds the site and the demo stores (2023, 2024 and the multi-year index), then opens the explorer five times in
one headless Chromium: `baseline` with window.tesseraBridgeOptions = {sharedRanges: false} (plain zarrita reads:
every source reads its own shard indexes, the reference index sends a HEAD before each), `new` (app/js/ranges.js:
one range cache for every source, suffix reads turned into plain ranges), `rested`, the new path where the mouse
comes to rest on the pixel before the click, as a user's does (the explorer reads the pixel under a resting mouse
ahead, Explorer.hover; those bytes are printed), then a script's select; `clicked`, the same rest, then a click of
the mouse's button (down for 100 ms, as a person's; BokehJS's tap, the explorer's own click path; timed from the
moment the button goes up), and `touched`, on a touch screen: a finger taps the pixel (100 ms on the map, as a
person's tap; it reads the pixel ahead as it touches, app/web/press.js), timed from the moment it lifts, through
Bokeh's tap. On both, once the pixel is read ahead Python sends the page the spectrum a tap there shows, which the
tap's own handler then shows (app/web/press.js); `rested` is a script's select, which shows it when Python answers.
Each pixel lies in a shard no page has read a pixel from; for each, the pages in turn move the map to it at 10 m
per screen pixel (tesseraApi.view, which waits until the view settled: the new path's prefetch of the shard indexes
in view, app/js/prefetch.js, included; its bytes are printed) and then click it. For each click: the time from
tesseraApi.select (clicked, touched: from the button going up, the finger lifting) to the first frame drawn with
the pixel's vector in the spectrum plot, the page thread's long tasks (50 ms or more: BokehJS applying the patches
and painting) in that time, and the requests and bytes of its embeddings and scales reads (year store and
multi-year index). The first half of the shards is clicked on plain localhost, the second half with Chromium's
network emulation (--rtt ms round trip, 50 Mbit/s). Each round opens the five pages afresh, so every shard is cold
again (single clicks vary by a frame or two: more rounds, steadier medians). Prints medians and the new/baseline,
rested/baseline, clicked/baseline and touched/baseline ratios, and, on localhost, the new page's two chunk reads of
each click made again at once with nothing else in flight: a scripted click must wait for them where the rested one
found them read ahead.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from browser_util import (CHROMIUM, CHROMIUM_ARGS, build_test_site, map_click_point, rest_mouse,  # noqa: E402
                          static_server, wait_state)

# tap false: select, then wait for the frames that show the pixel's vectors; its figures. tap true: the same from
# the moment a finger lifts off the map (pointerup), armed now and awaited as window.__click once it has lifted.
CLICK = """async ([lon, lat, tag, tap]) => {
  const shown = (name) => { const d = Bokeh.documents[0].get_model_by_name(name).data;
                            const l = d instanceof Map ? d.get('label') : d.label; return l.some((x) => x.includes(tag)); };
  const frame = (name, t0) => new Promise((resolve, reject) => { const tick = () => shown(name)
      ? requestAnimationFrame(() => resolve(performance.now() - t0)) : requestAnimationFrame(tick); tick();
    // A plot that never shows the pixel (or frames that never come) stops the run in one line, not for ever.
    setTimeout(() => reject(new Error(`${name} did not show ${tag} within 60 s of the click`)), 60000); });
  await window.tesseraWorker.resetStats();  // Python's reads happen in its worker (app/web/worker.js)
  const long = [], watch = new PerformanceObserver((l) => long.push(...l.getEntries()));
  watch.observe({ type: 'longtask' });  // the page thread's tasks of 50 ms or more (BokehJS applying and painting)
  const began = tap ? new Promise((ok) => document.addEventListener('pointerup', (e) => ok(e.timeStamp),
                                                                    { once: true, capture: true }))
                    : Promise.resolve(performance.now());
  const run = (async () => {
    const t0 = await began, abs0 = performance.timeOrigin + t0;
    const done = tap ? null : window.tesseraApi.select(lon, lat);
    const [ms, years] = await Promise.all([frame('spectrum-source', t0), frame('years-source', t0)]);
    await done;
    long.push(...watch.takeRecords());
    watch.disconnect();
    const busy = long.filter((e) => e.startTime >= t0 && e.startTime < t0 + ms).reduce((s, e) => s + e.duration, 0);
    const all = (await window.tesseraWorker.stats()).log;
    const log = all.filter((e) => /\\/(embeddings|scales)\\//.test(e.url));
    const idx = log.filter((e) => e.bytes > 16384), chk = log.filter((e) => e.bytes <= 16384);
    const span = (l, k, f) => (l.length ? f(...l.map((e) => e[k])) - abs0 : NaN);
    return [ms, log.length, log.reduce((s, e) => s + e.bytes, 0), log.filter((e) => e.method === 'HEAD').length, years,
            span(log, 'start', Math.min), span(idx, 'end', Math.max), span(chk, 'start', Math.min), span(log, 'end', Math.max),
            all.length, busy];
  })();
  if (!tap) return await run;
  window.__click = run;
  return null;
}"""

# The two chunk reads of a click again, in the worker, at once and alone (no store code, no Python between them,
# nothing else in flight; not from the HTTP cache): what the requests themselves take there.
PAIR = """import js
again = js.eval('''async (reads) => { const t0 = performance.now();
  await Promise.all(reads.map(async ([url, range]) => {
    const resp = await fetch(url, { headers: { Range: range }, cache: "no-store" }); await resp.arrayBuffer(); }));
  return performance.now() - t0; }''')
await again(js.JSON.parse(%s))"""


def cold_pixels(data: Path) -> list[tuple[str, int, int, float, float]]:
    """One valid pixel (in both years) per shard of every zone: (zone, row, col, lon, lat)."""
    import numpy as np
    import zarr
    import jsonschema

    from builder.core.reader import StoreModel
    from builder.reader.source import ZarrSource
    model = asyncio.run(StoreModel(ZarrSource(str(data / "2024.zarr")), jsonschema=jsonschema).open())
    out = []
    for name, zone in sorted(model.zones.items()):
        ok = np.isfinite(zarr.open_group(data / "2024.zarr" / name, mode="r")["scales"][:])
        ok &= np.isfinite(zarr.open_group(data / "2023.zarr" / name, mode="r")["scales"][:])
        for sr in range(0, ok.shape[0], 256):
            for sc in range(0, ok.shape[1], 256):
                hits = np.argwhere(ok[sr:sr + 256, sc:sc + 256])
                if len(hits):
                    r, c = (int(x) for x in hits[len(hits) // 2] + [sr, sc])
                    out.append((name, r, c, *zone.centre_lonlat(r, c)))
    return out


def explorer_says(page) -> str:
    """The explorer's status line and its last five store reads (a failed click's diagnosis)."""
    status = page.evaluate("""async () => await window.tesseraWorker.python(`
import gc
from app.session import Explorer
next((str(o.status) for o in gc.get_objects() if isinstance(o, Explorer)), "(no explorer)")`)""")
    log = page.evaluate("async () => (await window.tesseraWorker.stats()).log.slice(-5)")
    reads = "; ".join(f"{e['method']} {e['url'].rsplit('/data/', 1)[-1]} {e['range']} -> {e['status']}" for e in log)
    return f"status line {status!r}; last reads: {reads or 'none'}"


def store_bytes(log) -> int:
    """Bytes of the embeddings and scales reads in a request log (the worker's stats)."""
    return sum(e["bytes"] for e in log if re.search(r"/(embeddings|scales)/", e["url"]))


def click_one(page, cdp, path, emulate, pixel, rtt, warm, rested, out, pairs, failed) -> None:
    """Move `page` to the pixel at 10 m per screen pixel, let the view settle (and on the rested and clicked pages the
    mouse rest on it), click it (clicked: the mouse's button, touched: a finger's tap) and append the CLICK figures to
    `out` (or, when a plot never shows the pixel, what went wrong to `failed`: the run goes on); `emulate`: turn on
    the emulated network first.  `pairs` (a list, or None): after the click, the time its two year-store chunk reads
    take again, alone and at once, with nothing else in flight (the requests' own share of a click)."""
    from app.geo import lonlat_to_merc
    zone, r, c, lon, lat = pixel
    tag = f"{zone} r{r} c{c}"
    x, y = (float(v) for v in lonlat_to_merc(lon, lat))
    # What a user does: the view settles zoomed in at 10 m on the pixel (the new path warms the shard indexes in
    # view then, app/js/prefetch.js), then the click.
    page.evaluate("window.tesseraWorker.resetStats()")
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 7600)", [lon, lat])
    warm[path].append(store_bytes(page.evaluate("window.tesseraWorker.stats()")["log"]))
    if path in ("rested", "clicked"):  # the mouse comes to rest on the pixel before the click, as a user's does
        page.mouse.move(2, 2)
        page.evaluate("window.tesseraWorker.resetStats()")
        rest_mouse(page, x, y, [lon, lat, 7600])
        if path == "rested":
            rested.append(store_bytes(page.evaluate("window.tesseraWorker.stats()")["log"]))
    if emulate:
        cdp.send("Network.enable")
        cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": rtt,
                 "downloadThroughput": 50e6 / 8, "uploadThroughput": 50e6 / 8})
    if path == "touched":
        px, py = map_click_point(page, x, y)
        press = lambda: cdp.send("Input.dispatchTouchEvent",
                                 {"type": "touchStart", "touchPoints": [{"x": px, "y": py}]})
        release = lambda: cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    else:  # clicked: the mouse's button where the mouse rests
        press, release = page.mouse.down, page.mouse.up
    try:
        if path in ("clicked", "touched"):  # down for TAP_MS, timed from the moment it goes up (Bokeh's tap)
            page.evaluate(CLICK, [lon, lat, tag, True])  # armed: its requests count from here
            press()
            page.wait_for_timeout(TAP_MS)  # a person's finger on the button or the glass, not a wait for the page
            release()
            out.append(page.evaluate("window.__click"))
        else:
            out.append(page.evaluate(CLICK, [lon, lat, tag, False]))
    except Exception as e:  # a plot that never showed the pixel: said, with the explorer's status line and reads
        failed.append(f"{path} page, {tag}: {str(e).splitlines()[0]}; {explorer_says(page)}")
        print(failed[-1], file=sys.stderr)
        return
    if pairs is not None:
        reads = [[e["url"], e["range"]] for e in page.evaluate("window.tesseraWorker.stats()")["log"]
                 if "/2024.zarr/" in e["url"] and re.search(r"/(embeddings|scales)/", e["url"])]
        if len(reads) == 2:  # once the explorer has settled (the click's later drawing done: the worker is idle)
            page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 7600)", [lon, lat])
            code = PAIR % json.dumps(json.dumps(reads))
            pairs.append(float(page.evaluate("async (c) => String(await window.tesseraWorker.python(c))", code)))


# How long the clicked page's button stays down, and the touched page's finger on the map: a person's click or tap
# lasts about 100 ms (BokehJS makes a press of one over 300 ms, not a tap). The finger's read-ahead starts as it
# touches (app/web/press.js), and may not be done when it lifts: the tap then joins its reads.
TAP_MS = 100


# baseline: the old read path (plain zarrita); new: the bridge's read path, the click on a pixel the mouse did not
# rest on first (a script's select); rested: the same, the click after the mouse rested on the pixel (as a user's
# does), which reads it ahead (Explorer.hover), and then a script's select; clicked: the same rest, then a click of
# the mouse's button, the user's own (Bokeh's tap), timed from the moment the button goes up; touched: a tap on a
# touch screen, the finger read the pixel ahead as it touched the map (app/web/press.js), timed from the moment it
# lifts.
PATHS = ("baseline", "new", "rested", "clicked", "touched")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--px", type=int, default=384)
    ap.add_argument("--rtt", type=float, default=40.0)
    ap.add_argument("--rounds", type=int, default=2, help="each on fresh pages: every shard cold again")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright
    with tempfile.TemporaryDirectory() as d:
        site = Path(d) / "site"
        build_test_site(site, Path(d), a.px)
        pixels = cold_pixels(site / "data")
        half = len(pixels) // 2
        warm = {path: [] for path in PATHS}
        failed = []  # clicks whose plots never showed their pixel (left out of the medians)
        pairs = []  # the new page's two chunk reads of each localhost click again, alone (ms)
        rested = []  # the bytes the rested page read ahead while the mouse rested on each pixel
        results = {(path, net): [] for path in PATHS for net in ("localhost", "emulated")}
        with static_server(site) as base, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for rnd in range(a.rounds):  # each round on fresh pages: every shard cold again
                pages = {}
                for path in PATHS:
                    ctx = browser.new_context(has_touch=path == "touched")
                    if path == "baseline":
                        ctx.add_init_script("window.tesseraBridgeOptions = { sharedRanges: false };")
                    page = ctx.new_page()
                    page.goto(base + "index.html")
                    assert wait_state(page) == "ready", path
                    page.evaluate("async () => await window.tesseraApi.redraw()")
                    pages[path] = (page, ctx.new_cdp_session(page))
                for i, (zone, r, c, lon, lat) in enumerate(pixels):
                    net = "localhost" if i < half else "emulated"
                    # The pages take turns in a different order from round to round (none always first after a view).
                    for path, (page, cdp) in (list(pages.items()) if rnd % 2 == 0 else list(pages.items())[::-1]):
                        click_one(page, cdp, path, i == half, (zone, r, c, lon, lat), a.rtt, warm, rested,
                                  results[(path, net)], pairs if path == "new" and net == "localhost" else None,
                                  failed)
                for page, _ in pages.values():
                    page.context.close()
            browser.close()
    print(f"a pixel from a cold shard ({half} + {len(pixels) - half} shards x {a.rounds} rounds, demo --px {a.px}; medians; "
          "requests and bytes of the embeddings and scales reads, year store + multi-year index):")
    if failed:
        print(f"  {len(failed)} clicks left out, a plot never showed their pixel:")
        for line in failed:
            print(f"    {line}")
    for path in PATHS:
        print(f"  view settled at 10 m per screen pixel (760 px, 7.6 km), embeddings and scales bytes read then: "
              f"{path} median {statistics.median(warm[path]) / 1e3:.0f} kB, max {max(warm[path]) / 1e3:.0f} kB")
    print(f"  the mouse at rest on the pixel (rested), embeddings and scales bytes read ahead then: median "
          f"{statistics.median(rested) / 1e3:.1f} kB, max {max(rested) / 1e3:.1f} kB")
    for net in ("localhost", "emulated"):
        label = net if net == "localhost" else f"{a.rtt:.0f} ms RTT, 50 Mbit/s"
        med = {path: [statistics.median(x[k] for x in results[(path, net)]) for k in range(11)] for path in PATHS}
        for path in PATHS:
            ms, n, b, heads, yms, first, idx_end, chk_start, last, nall, busy = med[path]
            print(f"  {label:>24} {path:>8}: click to plotted vector {ms:6.0f} ms, to the years plot {yms:6.0f} ms, "
                  f"{n:4.1f} requests ({heads:.0f} HEAD), {b / 1e3:6.1f} kB")
            print(f"  {'':>24} {'':>8}  first read starts {first:5.0f} ms, indexes in {idx_end:5.0f} ms, first chunk read "
                  f"{chk_start:5.0f} ms, last byte {last:5.0f} ms, all requests {nall:.0f}; page long tasks before the "
                  f"plotted frame {busy:4.0f} ms")
        mb, nb, bb, _, yb = med["baseline"][:5]
        for path in PATHS[1:]:
            mn, nn, bn, _, yn = med[path][:5]
            print(f"  {label:>24} {path:>8} / baseline: latency {mn / mb:.2f}x (years plot {yn / yb:.2f}x), requests "
                  f"{nn / nb:.2f}x, bytes {bn / bb:.2f}x")
        if net == "localhost" and pairs:
            # A scripted click must make the two reads the rested one found read ahead: its latency is at least the
            # rested click's plus theirs, when nothing else delays them.
            pm, rm = statistics.median(pairs), med["rested"][0]
            print(f"  {label:>24} the new page's two chunk reads again, at once and alone in the worker: {pm:.1f} ms "
                  f"median; rested + that: {rm + pm:.0f} ms, {(rm + pm) / mb:.2f}x of the baseline")


if __name__ == "__main__":
    main()
