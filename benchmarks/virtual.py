"""Virtual indexes: build time and size per tile, and read throughput through an index vs the store.

    python benchmarks/virtual.py [--px 384]

Builds the demo tiles and stores in a temporary directory, then prints:
index build time per tile and index bytes per tile (tiles index, JSON v3);
the multi-year index's build time and size against the stores it references;
and MB/s reading the same region (one zone, both years) through the
multi-year index and from the materialised stores, in the same process.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def du(p: Path) -> int:
    return p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--px", type=int, default=384)
    a = ap.parse_args()
    import numpy as np
    import zarr

    from builder.cli import write_years_index
    from builder.virtual.cli import tiles_store
    from builder.virtual.writer import open_index, write_tile_index
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        subprocess.run([sys.executable, "-m", "builder", "demo", "--tiles", str(d / "tiles"), "--out", str(d / "data"),
                        "--record", str(d / "rec"), "--px", str(a.px), "--scheduler", "threads", "-q"], cwd=REPO,
                       check=True, capture_output=True)
        t0 = time.perf_counter()
        store = tiles_store(str(d / "tiles"), 2024)
        write_tile_index(store, str(d / "tiles.json"))
        dt = time.perf_counter() - t0
        n = len(store._group.groups)
        print(f"tiles index: {n} tiles in {dt * 1000:.0f} ms ({dt / n * 1000:.1f} ms/tile), "
              f"{du(d / 'tiles.json') / n / 1e3:.1f} kB/tile (JSON, Zarr v3)")
        t0 = time.perf_counter()
        write_tile_index(store, str(d / "tiles.parquet"), zarr_format=2)
        dt = time.perf_counter() - t0
        print(f"tiles index as Parquet (Zarr v2): {dt / n * 1000:.1f} ms/tile, {du(d / 'tiles.parquet') / n / 1e3:.1f} kB/tile")
        stores = [d / "data" / "2023.zarr", d / "data" / "2024.zarr"]
        t0 = time.perf_counter()
        out = write_years_index(d / "data", stores)
        dt = time.perf_counter() - t0
        refs = sum(du(s) for s in stores)
        print(f"multi-year index: {dt * 1000:.0f} ms, {du(out) / 1e3:.1f} kB referencing {refs / 1e6:.1f} MB of shards "
              f"({du(out) / refs * 100:.3f}% of the data)")
        g = open_index(str(out), base=str(d / "data") + "/")
        z = [zarr.open_group(s / "utm30", mode="r") for s in stores]
        h, w = z[1]["scales"].shape
        region = (slice(0, h), slice(0, w))

        def timed(fn, reps=3):
            best = 1e9
            for _ in range(reps):
                s = time.perf_counter()
                nbytes = fn()
                best = min(best, time.perf_counter() - s)
            return nbytes / best / 1e6
        via_index = timed(lambda: g["utm30/embeddings"][1][region].nbytes + g["utm30/scales"][1][region].nbytes)
        direct = timed(lambda: z[1]["embeddings"][region].nbytes + z[1]["scales"][region].nbytes)
        np.testing.assert_array_equal(g["utm30/scales"][1], z[1]["scales"][:])
        print(f"read utm30 2024 ({h}x{w}x128): through the index {via_index:.0f} MB/s, materialised store "
              f"{direct:.0f} MB/s (ratio {via_index / direct:.2f})")


if __name__ == "__main__":
    main()
