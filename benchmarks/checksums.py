"""What verifying every crc32c costs the browser's reads (app/js/checksums.js), beside zarrita's own codec that
skips the checksum (the baseline), in one run of headless Chromium on the local Range server.

    python benchmarks/checksums.py [--px 384] [--pixels 64] [--rounds 5]

Builds the site and the demo stores and opens the explorer twice: `baseline` with window.tesseraBridgeOptions =
{verifyChecksums: false} (zarrita's crc32c codec: the 4 bytes dropped unread) and `verified` (every inner chunk's
and shard index's crc32c checked). In each page's worker, where Python's reads run, the bridge (tesseraJS.read)
reads, for the shard of utm30's embeddings with the most data:
  * pixels: one pixel from each of `--pixels` inner chunks ("pixel" hint: one inner chunk each), cold (the bytes
    forgotten first: one request each to localhost, the shard index kept) and warm (the chunk's bytes in the
    bridge's range cache: decoding alone, timed over all the pixels at once);
  * the whole shard (256 x 256 x 128, "region" hint: one request, every inner chunk decoded), cold and warm (the
    file in memory).
The pages take turns, `--rounds` times; prints the medians, per pixel and per shard, and verified / baseline.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from browser_util import CHROMIUM, CHROMIUM_ARGS, build_test_site, static_server, wait_state  # noqa: E402

# Run in the worker (through its Python, which awaits it): one round of timings of the bridge's reads there.
ROUND_JS = r"""async (a) => {
  const T = self.tesseraJS;
  const read = async (sel, hint) => {
    const r = await T.read(a.url, a.path, sel, hint);
    if (!r.ok) throw new Error(r.error.message);
    return r.value;
  };
  const px = (p) => [[p[0], p[0] + 1], [p[1], p[1] + 1], null];
  const out = { pixelCold: [], regionCold: [], regionWarm: [] };
  for (const p of a.pixels) {  // cold: each chunk fetched (the shard index is kept by zarrita's array)
    T.forgetBytes();
    const t0 = performance.now();
    await read(px(p), "pixel");
    out.pixelCold.push(performance.now() - t0);
  }
  for (const p of a.pixels) await read(px(p), "pixel");  // every chunk in the range cache
  const reps = 20, t0 = performance.now();
  for (let i = 0; i < reps; i++) for (const p of a.pixels) await read(px(p), "pixel");
  out.pixelWarm = (performance.now() - t0) / (reps * a.pixels.length);
  const shard = [[a.shard[0], a.shard[0] + 256], [a.shard[1], a.shard[1] + 256], null];
  for (let i = 0; i < 3; i++) {
    T.forgetBytes();
    let t = performance.now();
    await read(shard, "region");
    out.regionCold.push(performance.now() - t);
    t = performance.now();
    await read(shard, "region");  // the file in memory: decoding alone
    out.regionWarm.push(performance.now() - t);
  }
  return JSON.stringify(out);
}"""

IN_WORKER = """import js
fn = js.eval(%s)
await fn(js.JSON.parse(%s))"""


def shard_and_pixels(store: Path, n: int) -> tuple[tuple[int, int], list[tuple[int, int]], int]:
    """utm30's embeddings shard with the most valid pixels (its first row and column), one valid pixel from each
    of `n` of its inner chunks (4 x 4 px), and how many inner chunks it holds."""
    import numpy as np
    import zarr
    valid = np.isfinite(zarr.open_group(store / "utm30", mode="r")["scales"][:])
    shards = [(valid[r:r + 256, c:c + 256].sum(), r, c) for r in range(0, valid.shape[0], 256)
              for c in range(0, valid.shape[1], 256)]
    _, r0, c0 = max(shards)
    block = valid[r0:r0 + 256, c0:c0 + 256]
    h, w = block.shape
    chunks = block[: h - h % 4, : w - w % 4].reshape(h // 4, 4, w // 4, 4).any(axis=(1, 3))
    coords = np.argwhere(chunks)
    pick = coords[np.linspace(0, len(coords) - 1, min(n, len(coords))).astype(int)]
    pixels = []
    for i, j in pick:
        rr, cc = np.argwhere(block[i * 4:i * 4 + 4, j * 4:j * 4 + 4])[0]
        pixels.append((int(r0 + i * 4 + rr), int(c0 + j * 4 + cc)))
    return (r0, c0), pixels, int(chunks.sum())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--px", type=int, default=384)
    ap.add_argument("--pixels", type=int, default=64, help="pixels read, each from its own inner chunk")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright
    paths = ("baseline", "verified")
    got = {p: {"pixelCold": [], "pixelWarm": [], "regionCold": [], "regionWarm": []} for p in paths}
    with tempfile.TemporaryDirectory() as d:
        site = Path(d) / "site"
        build_test_site(site, Path(d), a.px)
        store = site / "data" / "2024.zarr"
        shard, pixels, n_chunks = shard_and_pixels(store, a.pixels)
        shard_file = store / "utm30" / "embeddings" / "c" / str(shard[0] // 256) / str(shard[1] // 256) / "0"
        shard_mb = shard_file.stat().st_size / 1e6
        with static_server(site) as base, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            pages = {}
            for path in paths:
                ctx = browser.new_context()
                if path == "baseline":
                    ctx.add_init_script("window.tesseraBridgeOptions = { verifyChecksums: false };")
                page = ctx.new_page()
                cdp = ctx.new_cdp_session(page)  # cold reads come from the server, not the HTTP cache
                cdp.send("Network.enable")
                cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
                page.goto(base + "index.html")
                assert wait_state(page) == "ready", path
                verifies = page.evaluate("async () => String(await window.tesseraWorker.python("
                                         "'import js; js.tesseraJS.options.verifyChecksums'))")
                assert verifies == str(path == "verified").lower(), (path, verifies)  # the worker's bridge's own
                pages[path] = page
            args = {"url": base + "data/2024.zarr", "path": "utm30/embeddings", "pixels": pixels, "shard": shard}
            code = IN_WORKER % (json.dumps(ROUND_JS), json.dumps(json.dumps(args)))
            for rnd in range(a.rounds):
                for path in (paths if rnd % 2 == 0 else paths[::-1]):  # neither page always first
                    r = json.loads(pages[path].evaluate("async (c) => String(await window.tesseraWorker.python(c))",
                                                        code))
                    for k in got[path]:
                        got[path][k] += r[k] if isinstance(r[k], list) else [r[k]]
            browser.close()
    med = {p: {k: statistics.median(v) for k, v in got[p].items()} for p in paths}
    print(f"crc32c verification in the browser's reads (demo --px {a.px}, utm30/embeddings shard {shard}: "
          f"{n_chunks} inner chunks, {shard_mb:.2f} MB; {a.rounds} rounds, medians; baseline: zarrita's codec, "
          "checksums unread, same run):")
    rows = [("pixel, cold (one chunk fetched from localhost)", "pixelCold", "ms per pixel"),
            ("pixel, warm (chunk bytes in memory)", "pixelWarm", "ms per pixel"),
            ("whole shard, cold (one request)", "regionCold", "ms per shard"),
            ("whole shard, warm (file in memory)", "regionWarm", "ms per shard")]
    for label, k, unit in rows:
        b, v = med["baseline"][k], med["verified"][k]
        print(f"  {label:>48}: baseline {b:8.3f}, verified {v:8.3f} {unit}: {v / b:.2f}x "
              f"({v - b:+.3f} ms)")
    extra = med["verified"]["regionWarm"] - med["baseline"]["regionWarm"]
    print(f"  whole shard: {shard_mb:.2f} MB checked in {extra:.1f} ms more "
          f"({shard_mb / (extra / 1000) if extra > 0 else float('inf'):.0f} MB/s)")


if __name__ == "__main__":
    main()
