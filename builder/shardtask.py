"""Phase 3 of a build: one shard recomputed from the tiles over it, as a task the runner maps in parallel.

The task writes the shard's embeddings and scales, then hands the shard to the build's per-shard products
(builder/products.py: the rgb preview, the overviews' level-0 code and quarter), and journals the shard as done.
The arrays' codec settings travel in the task (`ShardSpec`, read once per zone from the arrays' zarr.json), and so
do the zone's and the record's sinks (builder/sink.py): a task reads and writes nothing but through them, so it
runs alike in a local worker process and on a Dask worker on another machine.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from builder.core import convention as conv
from builder.arrayfiles import ShardSpec
from builder.errors import BuildError
from builder.core.grid import ZoneGrid
from builder.hooks import kill_point
from builder.products import ShardData, ShardProduct
from builder.record import Journal
from builder.sink import Sink
from builder.tiles import Tile

SAMPLE_ROWS = 40  # rows sampled per tile for the RGB PCA
SAMPLE_PER_ROW = 100


@dataclass(frozen=True)
class ShardTask:
    zone: Sink  # the zone group
    grid: ZoneGrid
    shard: tuple[int, int]
    tiles: tuple[tuple[Tile, int, int], ...]  # tile with its (row, col) in the zone grid
    n_bands: int
    journal: Journal  # the shard is journalled there once its objects are in place
    specs: dict[str, ShardSpec]  # codec settings of the arrays written, by array path in the zone
    products: tuple[ShardProduct, ...] = ()


def write_shard(task: ShardTask) -> tuple[tuple[int, int], int, dict[str, bool]]:
    """(shard, valid pixels, {array path: whether the shard has a file in it now}): the arrays' records of their
    shards (builder/chunkrecord.py) are updated from the last."""
    s = task.grid.shard
    sr, sc = task.shard
    r0, c0 = sr * s, sc * s
    emb = np.zeros((s, s, task.n_bands), dtype=np.int8)
    scl = np.full((s, s), np.nan, dtype=np.float32)
    for tile, tr, tc in task.tiles:
        h, w = tile.shape
        a0, a1 = max(r0, tr), min(r0 + s, tr + h)
        b0, b1 = max(c0, tc), min(c0 + s, tc + w)
        if a0 >= a1 or b0 >= b1:
            continue
        e, v = tile.window(a0 - tr, a1 - tr, b0 - tc, b1 - tc)
        ok = ~np.isnan(v)
        sub_e = emb[a0 - r0:a1 - r0, b0 - c0:b1 - c0]
        sub_s = scl[a0 - r0:a1 - r0, b0 - c0:b1 - c0]
        sub_e[ok] = e[ok]
        sub_s[ok] = v[ok]
    n_valid = int((~np.isnan(scl)).sum())
    data = ShardData(task.zone, task.journal.zone, task.grid, task.shard, emb, scl, task.specs)
    for product in task.products:
        product.before(data)
    # A shard with no valid pixel is all fill: its objects are removed, never written.
    data.write("embeddings", emb)
    data.write("scales", scl)
    for product in task.products:
        product.write(data)
    kill_point("shard-written")
    task.journal.add(task.shard)
    return task.shard, n_valid, data.files


def sample(tiles: list[Tile]) -> np.ndarray:
    """A deterministic sample of dequantised land pixels: up to SAMPLE_ROWS rows per tile, read one row at
    a time (fits the RGB preview's PCA and the overviews' code)."""
    rng = np.random.default_rng(0)
    parts = []
    for t in tiles:
        s = t.scale_values()
        ok = ~np.isnan(s) & t.land
        rows = np.flatnonzero(ok.any(axis=1))
        for r in rng.choice(rows, size=min(SAMPLE_ROWS, rows.size), replace=False) if rows.size else []:
            cols = np.flatnonzero(ok[r])
            cols = rng.choice(cols, size=min(SAMPLE_PER_ROW, cols.size), replace=False)
            e = t.embedding_rows(int(r), int(r) + 1)[0]
            parts.append(conv.dequantise(e[cols], s[r, cols]))
    if not parts:
        raise BuildError("no valid land pixel in any tile; nothing to preview")
    return np.concatenate(parts)
