"""Phase 3 of a build: one shard recomputed from the tiles over it, as a task the runner maps in parallel.

The arrays' codec settings travel in the task (`ShardSpec`, read once per zone from the arrays' zarr.json),
so no task re-reads or re-parses metadata.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from builder import convention as conv
from builder import overviews as ovr
from builder.errors import BuildError
from builder.grid import ZoneGrid
from builder.hooks import kill_point
from builder.record import journal_done
from builder.rgb import RGBModel
from builder.arrayfiles import ShardedArrayFiles, ShardSpec
from builder.tiles import Tile

SAMPLE_ROWS = 40  # rows sampled per tile for the RGB PCA
SAMPLE_PER_ROW = 100


@dataclass(frozen=True)
class ShardTask:
    zone_dir: str
    grid: ZoneGrid
    shard: tuple[int, int]
    tiles: tuple[tuple[Tile, int, int], ...]  # tile with its (row, col) in the zone grid
    n_bands: int
    rgb: dict | None
    journal: str  # the zone's done file: "row,col" is appended once the shard's files are in place
    specs: dict[str, ShardSpec]  # codec settings of the zone's sharded arrays, by array path in the zone
    code: dict | None = None  # the overviews' CodeModel.to_json(): also write the level-0 code and the quarter
    quarters: str | None = None  # the zone's quarter files (builder.overviews), by lattice index


def write_shard(task: ShardTask) -> tuple[tuple[int, int], int]:
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
    zone = Path(task.zone_dir)
    quarter = None
    if task.quarters is not None:  # removed first: a quarter that exists matches the shard on disk
        r, c = task.grid.lattice_origin(0)
        quarter = ovr.quarter_path(Path(task.quarters), (r + sr, c + sc))
        quarter.unlink(missing_ok=True)
    # A shard with no valid pixel is all fill: its files are removed, never written.
    ShardedArrayFiles(zone / "embeddings", task.specs["embeddings"]).write(sr, sc, emb)
    ShardedArrayFiles(zone / "scales", task.specs["scales"]).write(sr, sc, scl)
    # once, for the preview and the code; a build with neither (--no-rgb --no-overviews) needs none
    ints = emb[conv.valid_mask(scl)].astype(np.float32) if task.rgb is not None or task.code is not None else None
    if task.rgb is not None:
        rgb = RGBModel.from_json(task.rgb).apply(emb, scl, ints)
        ShardedArrayFiles(zone / "rgb", task.specs["rgb"]).write(sr, sc, rgb)
    if task.code is not None:  # the level-0 code and the level-1 quarter while the shard is in memory
        code, code_scales = ovr.CodeModel.from_json(task.code).encode(emb, scl, ints)
        for name, data in (("code", code), ("code_scales", code_scales)):
            path = ovr.level_path(0, name)
            ShardedArrayFiles(zone / path, task.specs[path]).write(sr, sc, data)
        ovr.save_quarter(quarter, emb, scl)
    kill_point("shard-written")
    journal_done(task.journal, (sr, sc))
    return task.shard, n_valid


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
