"""builder.reader against zarr-python used directly, on the demo stores over HTTP (python -m builder serve).

    python benchmarks/reader.py [--px 384] [--points 200]

Builds the demo tiles (one year) and the tessera: v1 store, writes a geoemb: store of the same tiles
(tests/geoemb_writer.py: inner chunks 32 as published, shards 1024 instead of 4096 to fit the demo), then:

* sampling: requests and bytes per point on the wire (a logging proxy), cold (shard indexes fetched)
  and warm (indexes cached), next to the ideal (one inner chunk per point per array, each touched
  shard index once) and to zarr-python reading the same pixels one by one (`arr[row, col]`);
* read_region: MB/s of dequantised float32 for one whole zone window, next to zarr-python reading
  the same window directly and dequantising it, over HTTP and from local files.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
warnings.filterwarnings("ignore", message="Consolidated metadata")


def ideal(store_dir: Path, zone: str, df) -> tuple[int, int, int, int]:
    """(index requests, index bytes, chunk requests, chunk bytes) of the ideal read of the sampled pixels:
    each touched shard index once, each touched inner chunk once; from the shard files themselves."""
    import json

    import numpy as np
    i_req = i_bytes = c_req = c_bytes = 0
    for array in ("embeddings", "scales"):
        meta = json.loads((store_dir / zone / array / "zarr.json").read_text())
        dims = meta["dimension_names"]
        ya, xa = (dims.index(d) for d in (("y", "x") if "y" in dims else ("northing", "easting")))
        shard = meta["chunk_grid"]["configuration"]["chunk_shape"]
        inner = meta["codecs"][0]["configuration"]["chunk_shape"]
        n = int(np.prod([a // b for a, b in zip(shard, inner)]))
        shards, chunks = set(), set()
        for r, c in zip(df["row"], df["col"]):
            parts = [0] * len(shard)
            parts[ya], parts[xa] = r // shard[ya], c // shard[xa]
            f = store_dir / zone / array / "c" / "/".join(map(str, parts))
            buf = f.read_bytes()
            table = np.frombuffer(buf[len(buf) - 16 * n - 4:len(buf) - 4], dtype="<u8").reshape(n, 2)
            k = (r % shard[ya]) // inner[ya] * (shard[xa] // inner[xa]) + (c % shard[xa]) // inner[xa]
            if str(f) not in shards:
                shards.add(str(f))
                i_bytes += 16 * n + 4
            if (str(f), k) not in chunks:
                chunks.add((str(f), k))
                c_bytes += int(table[k, 1])
        i_req, c_req = i_req + len(shards), c_req + len(chunks)
    return i_req, i_bytes, c_req, c_bytes


def sampling(base: str, log: list, rel: str, store_dir: Path, lonlat, year: int) -> None:
    import numpy as np
    import zarr

    from builder.reader import open_store
    from builder.reader.cache import base_store
    s = open_store(base + rel)
    s.zones(year)
    log.clear()
    t0 = time.perf_counter()
    df = s.sample_points(lonlat, year)
    cold = time.perf_counter() - t0
    n = len(df)
    c_req, c_bytes = len(log), sum(b for *_, b in log)
    log.clear()
    t0 = time.perf_counter()
    s.sample_points(lonlat, year)
    warm = time.perf_counter() - t0
    w_req, w_bytes = len(log), sum(b for *_, b in log)
    zone = df["zone"].iloc[0]
    i_req, i_bytes, c_req_ideal, c_bytes_ideal = ideal(store_dir, zone, df)
    g = zarr.open_group(base_store(base + rel), mode="r")[zone]
    t = s.view(zone, year).t
    log.clear()
    t0 = time.perf_counter()
    for r, c in zip(df["row"], df["col"]):
        if t is None:
            np.asarray(g["embeddings"][r, c]), float(g["scales"][r, c])
        else:
            np.asarray(g["embeddings"][t, :, r, c]), float(g["scales"][t, r, c])
    loop = time.perf_counter() - t0
    b_req, b_bytes = len(log), sum(b for *_, b in log)
    print(f"  sample_points, {n} points in {zone}: cold {c_req / n:.2f} req, {c_bytes / n / 1e3:.1f} kB per point "
          f"({cold / n * 1e3:.1f} ms); warm {w_req / n:.2f} req, {w_bytes / n / 1e3:.1f} kB ({warm / n * 1e3:.1f} ms)")
    print(f"    ideal (each touched inner chunk once, 2 per point at most, + each shard index once): cold "
          f"{(i_req + c_req_ideal) / n:.2f} req, {(i_bytes + c_bytes_ideal) / n / 1e3:.1f} kB; warm "
          f"{c_req_ideal / n:.2f} req, {c_bytes_ideal / n / 1e3:.1f} kB per point")
    print(f"    baseline zarr-python arr[row, col] per point: {b_req / n:.2f} req, {b_bytes / n / 1e3:.1f} kB "
          f"per point ({loop / n * 1e3:.1f} ms)")


def region(url: str, label: str, bbox, year: int, zone: str) -> None:
    import numpy as np
    import zarr

    from builder.core import convention as conv
    from builder.reader import open_store
    from builder.reader.cache import base_store
    s = open_store(url)
    t0 = time.perf_counter()
    ds = s.read_region(bbox, year, zone)
    total = float(ds.embeddings.data.map_blocks(lambda b: np.isfinite(b).sum(keepdims=True), dtype=np.int64,
                                                 chunks=(1, 1, 1)).sum().compute())
    ours = time.perf_counter() - t0
    mb = ds.embeddings.size * 4 / 1e6
    tr = s.zones(year)[ds.attrs["zone"]].transform
    r0, c0 = round((tr[5] - ds.attrs["spatial:transform"][5]) / 10), round((ds.attrs["spatial:transform"][2] - tr[2]) / 10)
    r1, c1 = r0 + ds.sizes["y"], c0 + ds.sizes["x"]
    t0 = time.perf_counter()
    g = zarr.open_group(base_store(url), mode="r")[ds.attrs["zone"]]
    v = s.view(ds.attrs["zone"], year)
    if v.t is None:
        q, sc = g["embeddings"][r0:r1, c0:c1], g["scales"][r0:r1, c0:c1]
    else:
        q, sc = np.moveaxis(g["embeddings"][v.t, :, r0:r1, c0:c1], 0, -1), g["scales"][v.t, r0:r1, c0:c1]
    with np.errstate(invalid="ignore"):
        base = int(np.isfinite(np.where(v.layout.valid(sc)[..., None], conv.dequantise(q, sc), np.nan)).sum())
    direct = time.perf_counter() - t0
    assert base == int(total), (base, total)
    print(f"  read_region {label} {ds.sizes['y']}x{ds.sizes['x']} px ({mb:.0f} MB float32): {mb / ours:.0f} MB/s "
          f"(dask blocks {ds.embeddings.data.chunksize[:2]}); baseline zarr-python window read + dequantise: "
          f"{mb / direct:.0f} MB/s (whole window in memory)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--px", type=int, default=384)
    ap.add_argument("--points", type=int, default=200)
    a = ap.parse_args()
    import numpy as np
    from pyproj import Transformer

    from browser_util import static_server
    from geoemb_writer import read_tiles, write_geoemb
    from test_reader import counting_proxy
    year = 2024
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        subprocess.run([sys.executable, "-m", "builder", "demo", "--tiles", str(d / "tiles"), "--out", str(d / "data"),
                        "--record", str(d / "rec"), "--px", str(a.px), "--years", str(year), "--scheduler", "threads",
                        "-q"], cwd=REPO, check=True, capture_output=True)
        write_geoemb(d / "tiles", [year], d / "data" / "geoemb.zarr", shard=1024)
        (d / "data" / "index.html").write_text("benchmark")
        # random land pixels of the tile with the most land
        t = max(read_tiles(d / "tiles", year), key=lambda t: int((t["land"] & np.isfinite(t["scales"])).sum()))
        rng = np.random.default_rng(1)
        ij = np.argwhere(t["land"] & np.isfinite(t["scales"]))
        ij = ij[rng.choice(len(ij), a.points, replace=False)]
        lonlat = list(zip(*Transformer.from_crs(t["epsg"], 4326, always_xy=True).transform(
            t["e0"] + (ij[:, 1] + 0.5) * 10, t["n0"] - (ij[:, 0] + 0.5) * 10)))
        to_ll = Transformer.from_crs(t["epsg"], 4326, always_xy=True)
        w, s = to_ll.transform(t["e0"], t["n0"] - a.px * 10)
        e, n = to_ll.transform(t["e0"] + a.px * 10, t["n0"])
        with static_server(d / "data") as base, counting_proxy(base) as (proxy, log):
            for rel, label in ((f"{year}.zarr", "tessera: v1 (shard 256, inner 4)"),
                               ("geoemb.zarr", "geoemb: (shard 1024, inner 32)")):
                print(label)
                sampling(proxy, log, rel, d / "data" / rel, lonlat, year)
                zone = f"utm{t['epsg'] % 100:02d}"
                region(base + rel, "over HTTP", (w, s, e, n), year, zone)
                region(str(d / "data" / rel), "local files", (w, s, e, n), year, zone)


if __name__ == "__main__":
    main()
