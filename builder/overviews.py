"""Embedding overviews (the `tessera-ovr:` extension): coarser levels and a compact code per level.

In each zone group, the subgroup `overviews/` holds
  the code's model            fitted once per store (builder/codefit.py), in the arrays its kind names
                               (builder/core/codes.py: PCA's code_basis and code_mean, PQ's code_codebook)
  0/code, 0/code_scales        the compact code of the zone's own 10 m vectors
  k/embeddings, k/scales       level k >= 1: 2x2 means of level k-1's dequantised vectors (no-data children
                               ignored, all no-data -> no data), re-quantised by `conv.quantise`
  k/code, k/code_scales        the compact code of level k (the code's `encode`)

Level k lies on the CRS-wide lattice of level-k shards (builder.core.grid: `level_grid`), so that a level-k shard
is computed from exactly 2x2 level-(k-1) shards and a grid that grows moves every level by whole shards.

`update` recomputes the level shards above a set of changed level-0 shards, level by level (the build's one
level scheduler, builder/levels.py), each shard from the stored level below: idempotent, so a killed update is
finished by running it again over the same set (the build keeps that set in its record until the update is done).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from builder.core import codes
from builder.core import convention as conv
from builder.core import extensions as ext
from builder import levels as lv
from builder.core.grid import ZoneGrid
from builder.parallel import Runner
from builder.arrayfiles import ShardedArrayFiles, ShardSpec
from builder.sink import Sink

if TYPE_CHECKING:  # zarr is imported where a function needs it: the build's worker processes run without it
    import zarr

    from builder.store import Layout

LEVELS = 8  # level 8: one pixel per 10 m shard (2.56 km); a whole UTM zone is 2 shards wide there
DIMS = 8    # code dimensions (benchmarks/overviews.py and codes.py measure accuracy and bytes for others)
CHUNK = 32  # inner chunk edge of the overview arrays: a 1 KB shard index instead of 64 KB
QUARTER_MAGIC = b"tq-2\0\0\0\0"  # the quarter files' format (save_quarter); a file without it is not used


def mean2x2(emb: np.ndarray, scl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Re-quantised 2x2 means (int8 (h/2, w/2, B), float32 scales) of quantised vectors; no-data children
    are left out, a parent with none is no data (NaN scale, zero vector).  Only parents with data are
    computed (coarse levels are mostly empty)."""
    h, w, b = emb.shape
    ok = conv.valid_mask(scl)
    n = ok.reshape(h // 2, 2, w // 2, 2).sum(axis=(1, 3))
    has = n > 0
    q = np.zeros((h // 2, w // 2, b), dtype=np.int8)
    s = np.full((h // 2, w // 2), np.nan, dtype=np.float32)
    if has.any():
        rows, cols = np.nonzero(has)
        weights = np.where(ok, scl, np.float32(0))  # a no-data child weighs 0 * its (zero) vector
        sums = np.zeros((rows.size, b), dtype=np.float32)
        for i in (0, 1):  # the four children in turn: one (P, B) float block at a time, not (P, 2, 2, B)
            for j in (0, 1):
                r, c = 2 * rows + i, 2 * cols + j
                sums += emb[r, c] * weights[r, c][:, None]
        sums /= n[has][:, None].astype(np.float32)
        q[has], s[has] = conv.quantise(sums)
    return q, s


# ------------------------------------------------------------------ layout --
def level_path(k: int, name: str) -> str:
    return f"{ext.OVR_GROUP}/{k}/{name}"


def level_arrays(k: int) -> list[str]:
    return list(ext.OVR_LEVEL0_ARRAYS) if k == 0 else list(ext.OVR_ARRAYS)


def array_paths(levels: int) -> list[str]:
    """The paths in the zone of every overview array of levels 0..levels."""
    return [level_path(k, name) for k in range(levels + 1) for name in level_arrays(k)]


def record_shards(zone: Sink, levels: int) -> None:
    """Every overview array's record of its shards (builder/chunkrecord.py), taken from its files: the arrays are
    written by the shard tasks (level 0's code) and the level tasks (each level, and level 0's code of shards
    written before overviews), so their records are taken once all of them are done (and after a grid move)."""
    from builder import chunkrecord
    for path in array_paths(levels):
        if zone.exists(f"{path}/zarr.json"):
            chunkrecord.update(zone / path, relist=True)


def attrs(grid: ZoneGrid, levels: int, model: codes.Code) -> dict:
    return ext.ovr_attrs([(k, grid.level(k)) for k in range(levels + 1)], model.attrs())


def _shape(name: str, h: int, w: int, n_bands: int, dims: int) -> tuple[int, ...]:
    last = ext.OVR_ARRAYS[name].get("last")
    return (h, w) if last is None else (h, w, n_bands if last == "B" else dims)


def ensure(zone: zarr.Group, grid: ZoneGrid, n_bands: int, model: codes.Code, levels: int, layout: Layout) -> None:
    """Create the overview arrays of a zone, or resize them to `grid`; idempotent (a killed run redoes it).
    The model's arrays are written only when absent or different, so an unchanged store keeps its files."""
    from builder.store import _sharded
    g = zone.require_group(ext.OVR_GROUP)
    dims = model.dims
    for name, values in model.model_arrays().items():
        dims_names = model.arrays[name]
        if name in g and g[name].shape == values.shape and np.array_equal(g[name][...], values):
            continue
        arr = g.create_array(name, shape=values.shape, dtype="float32", chunks=values.shape, compressors=None,
                             filters=None, fill_value=0.0, dimension_names=dims_names, overwrite=True)
        arr[...] = values
    ovr_layout = dataclasses.replace(layout, chunk=math.gcd(layout.shard, CHUNK))
    for k in range(levels + 1):
        lg = g.require_group(str(k))
        _, _, h, w = grid.level_grid(k)
        for name in level_arrays(k):
            shape = _shape(name, h, w, n_bands, dims)
            if name in lg:
                if lg[name].shape != shape:
                    lg[name].resize(shape)
                continue
            spec = ext.ovr_array(name, model.method)
            _sharded(lg, name, shape, spec["dtype"], spec["fill"], ovr_layout, spec["dims"])


def moves(old: ZoneGrid, new: ZoneGrid, levels: int) -> list[tuple[str, int, int]]:
    """(array path in the zone, rows, cols) to move each overview array's shard files by when a grid grows."""
    out = []
    for k in range(levels + 1):
        (r_old, c_old), (r_new, c_new) = old.lattice_origin(k), new.lattice_origin(k)
        out += [(level_path(k, name), r_old - r_new, c_old - c_new) for name in level_arrays(k)]
    return out


def lattice_shards(grid: ZoneGrid, shards) -> list[list[int]]:
    """Level-0 lattice indices [R, C] of a grid's shards (what the record keeps: grids move, the lattice not)."""
    r0, c0 = grid.lattice_origin(0)
    return [[r0 + sr, c0 + sc] for sr, sc in shards]


def stored_shards(array: Sink) -> list[tuple[int, int]]:
    """(row, col) of every shard stored in an array."""
    from builder.chunkrecord import stored
    return sorted(stored(array))


# ---------------------------------------------------------------- quarters --
# The build's shard writer has each level-0 shard in memory: it writes the shard's level-0 code and saves its
# 2x2 means (the shard's quarter of a level-1 shard) as a "quarter" file in the build record; each level task
# does the same for the next level.  So a level is assembled without decoding the level below again.  A
# quarter is written after its shard and removed before the shard is rewritten, so one that exists always
# matches the shard on disk; without one, the level above reads the shard.  Quarters are named by level
# and lattice index (grids move, the lattice not) and removed once the levels are done.
# The quarters of a build live in its record (a Sink), at `{zone}/{k}/{R}_{C}` below its quarter prefix.
def quarter_key(zone: str, k: int, lattice: tuple[int, int]) -> str:
    """The key of a zone's level-k quarter at a lattice index (level 0: the shard writer's)."""
    return f"{zone}/{k}/{lattice[0]}_{lattice[1]}"


def save_quarter(sink: Sink, key: str, emb: np.ndarray, scl: np.ndarray) -> None:
    """The 2x2 means of a shard, written whole: QUARTER_MAGIC, their float32 scales, then the int8 vectors of the
    pixels with data only (coarse levels are mostly empty); an empty object when none has data."""
    q, s = mean2x2(emb, scl) if conv.valid_mask(scl).any() else (None, None)
    sink.write(key, b"" if q is None else QUARTER_MAGIC + s.tobytes() + q[conv.valid_mask(s)].tobytes())


def load_quarter(raw: bytes | Path, size: int, n_bands: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(int8 (size, size, B), float32 (size, size)) saved by `save_quarter` (its bytes, or a file holding them);
    None when it has no data.  ValueError when it is not such a quarter (one an older builder left, or a
    truncated one)."""
    where = "quarter"
    if isinstance(raw, Path):
        where, raw = str(raw), raw.read_bytes()
    if not raw:
        return None
    n, head = size * size, len(QUARTER_MAGIC)
    if raw[:head] != QUARTER_MAGIC or len(raw) < head + 4 * n:
        raise ValueError(f"{where}: not a quarter file of {size}x{size} pixels")
    scl = np.frombuffer(raw, dtype=np.float32, count=n, offset=head).reshape(size, size)
    ok = conv.valid_mask(scl)
    if len(raw) != head + 4 * n + int(ok.sum()) * n_bands:
        raise ValueError(f"{where}: {len(raw)} bytes do not hold the vectors of its {int(ok.sum())} pixels with data")
    emb = np.zeros((size, size, n_bands), dtype=np.int8)
    emb[ok] = np.frombuffer(raw, dtype=np.int8, offset=head + 4 * n).reshape(-1, n_bands)
    return emb, scl


# ------------------------------------------------------------------ update --
@dataclass(frozen=True)
class LevelTask:
    zone: Sink                # the zone group
    k: int                    # the level written (>= 1)
    shard: tuple[int, int]    # its shard in the level-k array
    children: tuple           # 4 x (row, col) shard of the level-(k-1) array, or None outside it
    code0: tuple              # 4 x bool: also write the level-0 code of that child (k == 1)
    model: dict               # the store's code's to_json() (builder/core/codes.py)
    specs: dict               # the codec settings (arrayfiles.ShardSpec) of the zone's arrays it reads or writes
    quarters: Sink | None = None   # where the quarters are (the build record's), when they are kept
    kids: tuple = (None,) * 4      # 4 x the child's quarter key, used when it exists
    quarter: str | None = None     # this shard's own quarter key (for level k + 1)


def _path(k: int, name: str) -> str:
    """The path in the zone of level k's array `name` (level 0's embeddings and scales are the zone's own)."""
    return name if k == 0 and name in ("embeddings", "scales") else level_path(k, name)


def _level_task(t: LevelTask) -> tuple[tuple[int, int], bool]:
    zone, m = t.zone, codes.from_json(t.model)

    def files(k: int, name: str) -> ShardedArrayFiles:
        return ShardedArrayFiles(zone / _path(k, name), t.specs[_path(k, name)])
    if t.quarter is not None:  # removed first: a quarter that exists matches the shard stored
        t.quarters.delete(t.quarter)
    src_e, src_s = files(t.k - 1, "embeddings"), files(t.k - 1, "scales")
    s, nb = src_s.shard_shape[0], src_e.shard_shape[2]
    emb = np.zeros((s, s, nb), dtype=np.int8)
    scl = np.full((s, s), np.nan, dtype=np.float32)
    for i, (child, code0, kid) in enumerate(zip(t.children, t.code0, t.kids)):
        if child is None:
            continue
        a, b = (i // 2) * (s // 2), (i % 2) * (s // 2)
        raw = t.quarters.get(kid) if kid is not None else None
        if raw is not None:  # the child's means (and level-0 code) are done
            try:
                means = load_quarter(raw, s // 2, nb)
            except ValueError:  # not this builder's quarter (one left by an older version): the child is read
                means = False
            if means is not False:
                if means is not None:
                    emb[a:a + s // 2, b:b + s // 2], scl[a:a + s // 2, b:b + s // 2] = means
                continue
        e, v = src_e.read(*child), src_s.read(*child)
        if code0:
            q, cs = m.encode(e, v)
            files(0, "code").write(*child, q)
            files(0, "code_scales").write(*child, cs)
        if np.isnan(v).all():
            continue
        emb[a:a + s // 2, b:b + s // 2], scl[a:a + s // 2, b:b + s // 2] = mean2x2(e, v)
    q, cs = m.encode(emb, scl)
    for name, data in (("embeddings", emb), ("scales", scl), ("code", q), ("code_scales", cs)):
        files(t.k, name).write(*t.shard, data)
    if t.quarter is not None:
        save_quarter(t.quarters, t.quarter, emb, scl)
    return t.shard, bool((~np.isnan(scl)).any())


def _level_tasks(tasks: tuple[LevelTask, ...]) -> list[tuple[tuple[int, int], bool]]:
    return [_level_task(t) for t in tasks]


def update(zones: dict[str, tuple[Sink, ZoneGrid, list]], levels: int, model: codes.Code, runner: Runner,
           checkpoint: Callable[[str], None] = lambda phase: None, quarters: Sink | None = None) -> int:
    """Recompute every overview shard above the changed level-0 shards of each zone ({name: (zone group's
    sink, grid, [[R, C] lattice shards])}), a level at a time for all zones; returns shards written.
    `model`: the store's code model (what `ensure` wrote in every zone); `quarters`: where the quarters are
    (`quarter_key`), when the build keeps them."""
    level0, specs = {}, {}
    arrays = sorted({_path(k, name) for k in range(levels + 1) for name in ("embeddings", "scales", *level_arrays(k))})
    for name, (zone, grid, pending) in zones.items():
        level0[name] = {tuple(x) for x in pending}
        specs[name] = ShardSpec.read_many(zone, arrays)  # once a zone: no task reads metadata
    model_json = model.to_json()
    dirty = dict(level0)
    by_level = []  # the tasks of each level: a level's parents follow from the level below's, not its results
    for k in range(1, levels + 1):
        tasks, parents = [], {}
        for name, (zone, grid, _) in zones.items():
            parents[name] = sorted({(r >> 1, c >> 1) for r, c in dirty[name]})
            (rk, ck), (rc, cc) = grid.lattice_origin(k), grid.lattice_origin(k - 1)
            nr, nc = grid.level_shards(k - 1)
            for r, c in parents[name]:
                kids = [(2 * r + i, 2 * c + j) for i in (0, 1) for j in (0, 1)]
                tasks.append(LevelTask(
                    zone, k, (r - rk, c - ck),
                    tuple((x - rc, y - cc) if 0 <= x - rc < nr and 0 <= y - cc < nc else None for x, y in kids),
                    tuple(k == 1 and kid in level0[name] for kid in kids), model_json, specs[name], quarters,
                    tuple(quarter_key(name, k - 1, kid) if quarters else None for kid in kids),
                    quarter_key(name, k, (r, c)) if quarters and k < levels else None))
        by_level.append(lv.Level(k, _level_tasks, tasks))
        dirty = {name: set(p) for name, p in parents.items()}
    return sum(len(done) for done in lv.run(runner, "overviews", "shards", by_level, checkpoint))
