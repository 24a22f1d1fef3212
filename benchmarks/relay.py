"""Re-laying a region of each store kind (`build --from-store`) beside a build from tiles of the same area, and
bytes + latency per pixel of each kind over HTTP Range requests, all in one run.

    python benchmarks/relay.py [--points 20]

Writes the test fixtures of tests/distributions.py (a geoemb: v2 store with depth arrays, 512 x 512 px;
the dClimate plain copy, two zones of 512 x 512 px, 256-px inner chunks), then:

* re-lay: wall time of `python -m builder build --from-store` for the geoemb: zone and for one dClimate
  zone, each beside `python -m builder build TILES` of the tiles that re-lay wrote (the same area, the
  same build path: the difference is the reading and the tile writing);
* per pixel: one `probe` at a time of random valid pixels through a warm store (shard indexes cached) over
  `python -m builder serve` with Range, each request logged by a proxy: bytes on the wire and milliseconds
  per pixel for the v1 store the re-lay built, the geoemb: store (full vectors and depth 16) and the
  dClimate store.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore")


def cli(*args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, check=True, capture_output=True)
    return time.perf_counter() - t0


def bbox_of(z) -> str:
    from pyproj import Transformer
    num, south = int(z.name[3:]), z.y1 <= 0
    to = Transformer.from_crs((32700 if south else 32600) + num, 4326, always_xy=True)
    off = 10_000_000 if south else 0
    (e0, n1), (e1, n0) = z.pixel_centre(100, 100), z.pixel_centre(400, 400)
    w, s = to.transform(e0, n0 + off)
    e, n = to.transform(e1, n1 + off)
    return f"{w:.5f},{s:.5f},{e:.5f},{n:.5f}"


def relay(tmp: Path, label: str, src: Path, z, year: int) -> Path:
    out, cache = tmp / f"out-{label}", tmp / f"cache-{label}"
    t_relay = cli("build", "--from-store", str(src), "--bbox", bbox_of(z), "--year", str(year), "--out", str(out),
                  "--cache", str(cache), "--scheduler", "threads", "-q")
    view = next((cache).glob("*/views/*"))
    t_tiles = cli("build", str(view), "--year", str(year), "--out", str(tmp / f"tiles-{label}"), "--record",
                  str(tmp / f"rec-{label}"), "--scheduler", "threads", "-q")
    print(f"re-lay {label:9s} 512 x 512 px: build --from-store {t_relay:6.2f} s   build TILES (same area) "
          f"{t_tiles:6.2f} s   ratio {t_relay / t_tiles:4.2f}")
    return out / f"{year}.zarr"


def per_pixel(url: str, label: str, log: list, year: int, points: int, depth=None) -> None:
    import numpy as np

    from builder.reader import open_store
    s = open_store(url)
    rng = np.random.default_rng(0)
    names = sorted(s.zones(year))
    views = [s.view(n, year) for n in names]
    done = 0
    n0, t_total, warm = None, 0.0, False
    while done < points:
        v = views[done % len(views)]
        r, c = (int(x) for x in rng.integers(64, 448, 2))  # away from the water and no-data corners
        if not warm:  # one read per zone first: the shard indexes, kept by the store
            for w in views:
                w.pixels([r], [c], depth)
            warm = True
            n0 = len(log)
        t0 = time.perf_counter()
        q, sc = v.pixels([r], [c], depth)
        t_total += time.perf_counter() - t0
        done += 1
    reqs = log[n0:]
    nbytes = sum(b for *_, b in reqs)
    print(f"per pixel {label:22s} {nbytes / points / 1024:9.1f} KiB  {len(reqs) / points:4.1f} requests  "
          f"{t_total / points * 1000:7.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=20)
    a = ap.parse_args()
    from browser_util import static_server
    from distributions import write_dclimate, write_geoemb_v2
    from test_reader import counting_proxy
    tmp = Path(tempfile.mkdtemp(prefix="bench-relay-"))
    try:
        site = tmp / "site"
        site.mkdir()
        (site / "index.html").write_text("benchmarks/relay.py")
        g = write_geoemb_v2(site / "geoemb-v2.zarr")
        dc = write_dclimate(site / "dclimate.zarr")
        v1 = relay(tmp, "geoemb", g.path, g.zones["utm30"], 2024)
        relay(tmp, "dclimate", dc.path, dc.zones["utm31"], 2024)
        shutil.copytree(v1, site / "v1" / "2024.zarr")
        with static_server(site) as base, counting_proxy(base) as (url, log):
            per_pixel(url + "v1/2024.zarr", "tessera:v1 (re-laid)", log, 2024, a.points)
            per_pixel(url + "geoemb-v2.zarr", "geoemb: full", log, 2024, a.points)
            per_pixel(url + "geoemb-v2.zarr", "geoemb: depth 16", log, 2024, a.points, depth=16)
            per_pixel(url + "dclimate.zarr", "dClimate (256-px chunks)", log, 2024, a.points)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
