"""Virtual indexes: write time and size per container and layout, and read throughput through each.

    python benchmarks/virtual.py [--px 384] [--spread 1000]

Builds the demo tiles and stores in a temporary directory, then prints, from one run:
  * the tiles index: build time and bytes per tile;
  * the multi-year index and the pyramid index, each as JSON and Parquet, Zarr v2 and v3: write time
    and size (the indexes reference the stores' files, no byte copied);
  * MB/s reading one zone of one year (embeddings + scales) through each multi-year index and from the
    materialised store, in the same process;
  * the pyramid as Parquet written before (kerchunk's positional record layout, the previous writer) and
    after (the sparse record layout), on the demo pyramid and on the same pyramid with `--spread` extra
    level-0 references spread over its 98 M chunk slots (one per 98 K slots: the spread of a store that
    covers many places; they repeat one real chunk reference, so the indexes stay readable).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def du(p: Path) -> int:
    return p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def timed_write(store, out: Path, **kw) -> float:
    from builder.virtual.writer import write_tile_index
    t0 = time.perf_counter()
    write_tile_index(store, str(out), **kw)
    return time.perf_counter() - t0


def spread_pyramid(store, n: int):
    """The pyramid `store` with `n` more level-0 references, evenly spread over the level's chunk grid."""
    from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore

    from builder.virtual.parsers import SparseChunkManifest
    levels = dict(store._group.groups)
    arr = levels["0"].arrays["rgb"]
    entries = arr.manifest.dict()
    ref = next(iter(entries.values()))
    grid = arr.manifest.shape_chunk_grid
    slots = grid[0] * grid[1]
    for k in range(n):
        i = k * slots // n
        entries.setdefault(f"{i // grid[1]}.{i % grid[1]}.0", ref)
    levels["0"] = ManifestGroup(arrays={"rgb": ManifestArray(arr.metadata, SparseChunkManifest(entries, grid))})
    return ManifestStore(ManifestGroup(groups=levels, attributes=dict(store._group.metadata.attributes)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--px", type=int, default=384)
    ap.add_argument("--spread", type=int, default=1000, help="extra level-0 references for the spread pyramid")
    a = ap.parse_args()
    import numpy as np
    import zarr

    from builder.virtual.cli import tiles_store
    from builder.virtual.parsers import PyramidParser, YearsParser
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

        stores = [d / "data" / "2023.zarr", d / "data" / "2024.zarr"]
        years = YearsParser()([str(s) for s in stores])
        pyramid = PyramidParser()(str(stores[1]))
        refs = sum(du(s) for s in stores)
        print(f"\nindex write time and size (the year stores hold {refs / 1e6:.1f} MB):")
        print(f"{'index':<10} {'container':<9} {'zarr':<5} {'write ms':>9} {'size kB':>9}")
        written = {}
        for name, src in (("years", years), ("pyramid", pyramid)):
            for ext in ("json", "parquet"):
                for fmt in (2, 3):
                    out = d / f"{name}-v{fmt}.{ext}"
                    dt = timed_write(src, out, zarr_format=fmt, template_base="{{base}}")
                    written[name, ext, fmt] = out
                    print(f"{name:<10} {ext:<9} v{fmt:<4} {dt * 1000:>9.0f} {du(out) / 1e3:>9.1f}")

        z = zarr.open_group(stores[1] / "utm30", mode="r")
        h, w = z["scales"].shape
        region = (slice(0, h), slice(0, w))

        def timed(fn, reps=2):
            best, nbytes = 1e9, 0
            for _ in range(reps):
                s = time.perf_counter()
                nbytes = fn()
                best = min(best, time.perf_counter() - s)
            return nbytes / best / 1e6
        direct = timed(lambda: z["embeddings"][region].nbytes + z["scales"][region].nbytes)
        print(f"\nread utm30 2024 ({h}x{w}x128, embeddings + scales): materialised store {direct:.0f} MB/s")
        for ext in ("json", "parquet"):
            for fmt in (2, 3):
                g = open_index(str(written["years", ext, fmt]), base=str(d / "data") + "/")
                e, s = g["utm30/embeddings"], g["utm30/scales"]
                np.testing.assert_array_equal(s[1][region], z["scales"][region])
                mbs = timed(lambda: e[1][region].nbytes + s[1][region].nbytes)
                print(f"  through the {ext} v{fmt} index: {mbs:.0f} MB/s (ratio {mbs / direct:.2f})")

        print("\npyramid as Parquet, before (kerchunk positional records) and after (sparse records):")
        from kerchunk.df import refs_to_dataframe
        for label, src in (("demo pyramid", pyramid), (f"spread (+{a.spread} level-0 refs)", spread_pyramid(pyramid, a.spread))):
            write_tile_index(src, str(d / "p.json"), zarr_format=2)  # the references the old writer was given
            pref = json.loads((d / "p.json").read_text())
            t0 = time.perf_counter()
            refs_to_dataframe(pref, str(d / "before.parquet"))
            before = time.perf_counter() - t0
            after = timed_write(src, d / "after.parquet", zarr_format=2)
            n_refs = sum(1 for v in pref["refs"].values() if isinstance(v, list))
            print(f"  {label}: {n_refs} references; before {before:.2f} s, {du(d / 'before.parquet') / 1e3:.0f} kB; "
                  f"after {after:.2f} s, {du(d / 'after.parquet') / 1e3:.0f} kB ({before / after:.0f}x faster)")


if __name__ == "__main__":
    main()
