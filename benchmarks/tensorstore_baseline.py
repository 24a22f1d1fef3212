"""The build benchmark's baseline: tensorstore writing the same sharded arrays as the builder.

For one zone: every tile's int8 embeddings and float32 scales (water from the tile's landmask set
to NaN, as the builder does) placed on one 10 m grid, written as two Zarr v3 arrays with exactly
the builder's codecs (256-px shards of 4x4x128 inner chunks, Blosc zstd 3, bitshuffle for int8,
byte shuffle for float32, crc32c on chunks and index), read back from the builder's own zarr.json
so both sides encode the same thing. One tensorstore transaction per array, so each shard is
encoded once however the tiles cut it. No RGB preview, no pyramid, no overviews: those are the
builder's extras and are reported separately.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import tensorstore as ts
import tifffile


def _spec(path: Path, builder_meta: dict, shape: tuple[int, ...]) -> dict:
    meta = {k: builder_meta[k] for k in ("data_type", "chunk_grid", "codecs", "fill_value", "dimension_names")}
    meta["shape"] = list(shape)
    return {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}, "metadata": meta,
            "create": True, "delete_existing": True}


def write_zone(tiles: list[tuple[Path, float, float]], out: Path, builder_zone: Path) -> None:
    """`tiles`: (tile directory, west, north) in metres of the zone's CRS; `builder_zone`: a zone group
    the builder wrote, whose arrays' metadata (codecs) are copied."""
    rows_cols = []
    for d, _, _ in tiles:
        q = np.load(d / f"{d.name}.npy", mmap_mode="r")
        rows_cols.append(q.shape[:2])
    west = min(w for _, w, _ in tiles)
    north = max(n for _, _, n in tiles)
    h = max(int(round((north - n) / 10)) + r for (_, _, n), (r, _) in zip(tiles, rows_cols))
    w = max(int(round((e - west) / 10)) + c for (_, e, _), (_, c) in zip(tiles, rows_cols))
    emb_meta = json.loads((builder_zone / "embeddings" / "zarr.json").read_text())
    sc_meta = json.loads((builder_zone / "scales" / "zarr.json").read_text())
    emb = ts.open(_spec(out / "embeddings", emb_meta, (h, w, 128))).result()
    sc = ts.open(_spec(out / "scales", sc_meta, (h, w))).result()
    with ts.Transaction() as txn:
        e_t, s_t = emb.with_transaction(txn), sc.with_transaction(txn)
        for (d, e0, n0), (r, c) in zip(tiles, rows_cols):
            r0, c0 = int(round((north - n0) / 10)), int(round((e0 - west) / 10))
            q = np.load(d / f"{d.name}.npy")
            s = np.load(d / f"{d.name}_scales.npy")
            land = tifffile.imread(d.parent.parent.parent / "global_0.1_degree_tiff_all" / f"{d.name}.tiff")
            s = np.where(land > 0, s, np.float32(np.nan)).astype(np.float32)
            e_t[r0:r0 + r, c0:c0 + c, :].write(q).result()
            s_t[r0:r0 + r, c0:c0 + c].write(s).result()
