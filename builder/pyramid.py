"""The `global_rgb` preview pyramid: EPSG:4326 RGBA levels built from zone previews.

Level 0 covers the whole Earth at `res0` degrees per pixel (the convention's
0.0001 by default: a 1.8M x 3.6M array) but is sparse: only the 256x256
chunks that a zone's preview touches are ever computed or written.  A level-0
pixel takes the colour of the zone pixel under its centre (pyproj reprojects
the pixel centres into each zone's UTM CRS); where zones overlap, the zone
whose central meridian is nearest wins (least distortion).  Level k+1 is the
2x2 mean of level k, colours weighted by alpha, alpha averaged.

Levels are plain (unsharded) 256x256x4 chunks: the map reads them a tile at a
time, so one chunk is one request.  Each level array records which of its chunks
exist (builder/core/chunkruns.py), so that readers ask for no other.  The levels are computed by the build's one
level scheduler (builder/levels.py), through the store's sink (builder/sink.py).
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

import numpy as np
from pyproj import Transformer

from builder.core import convention as conv
from builder import chunkrecord
from builder import levels as lv
from builder.errors import BuildError
from builder.core.geometry import meridian_distance
from builder.core.grid import ZoneGrid
from builder.core.zone import Zone
from builder.parallel import Runner
from builder.arrayfiles import ChunkedArrayFiles, ShardedArrayFiles
from builder.sink import Sink

if TYPE_CHECKING:  # zarr is imported where a function needs it: the build's worker processes run without it
    import zarr

CHUNK = 256
TOP_MAX = 2048  # the coarsest level is the first whose width is at most this
KNOT = 16  # level-0 pixel centres are reprojected at every KNOT-th row and column, and interpolated between


def level_shapes(res0: float) -> list[tuple[int, int]]:
    h, w = round(180 / res0), round(360 / res0)
    shapes = [(h, w)]
    while shapes[-1][1] > TOP_MAX:
        h, w = shapes[-1]
        shapes.append((math.ceil(h / 2), math.ceil(w / 2)))
    return shapes


def _open_levels(store: Sink, res0: float) -> None:
    """The global_rgb group, created if needed (builder.store.write_group: its zarr.json, with the attributes,
    is written last).  A group without `multiscales` is one whose creation was interrupted, and is created again.
    (zarr's `attrs.update` writes zarr.json once per key: a kill between two of those writes had left
    `multiscales` without `proj:code`, a group the re-run kept; tests/test_kills.py.)"""
    import zarr

    from builder.store import write_group
    path = store / conv.GLOBAL_GROUP
    shapes = level_shapes(res0)
    attrs = conv.global_attrs(res0, shapes)
    if path.exists("zarr.json"):
        g = zarr.open_group(path.zarr_store(), mode="r", use_consolidated=False)
        old = g.attrs.get("multiscales", {}).get("layout", [])
        if old and old[0].get("spatial:transform") != attrs["multiscales"]["layout"][0]["spatial:transform"]:
            raise BuildError(f"global_rgb exists with another level-0 resolution "
                             f"({old[0].get('spatial:transform', [None])[0]}); remove it to rebuild", str(path))
        if old:
            return

    def fill(g: zarr.Group) -> None:
        for k, (h, w) in enumerate(shapes):
            lvl = g.create_group(str(k))
            lvl.create_array("rgb", shape=(h, w, 4), dtype="uint8", chunks=(CHUNK, CHUNK, 4), fill_value=0,
                             # crc32c after Blosc, as in the zone arrays: readers and validate --deep detect corruption
                             compressors=[zarr.codecs.BloscCodec(cname="zstd", clevel=3, shuffle="shuffle"),
                                          zarr.codecs.Crc32cCodec()],
                             dimension_names=["lat", "lon", "band"], config={"write_empty_chunks": False})
            band = lvl.create_array("band", shape=(4,), dtype="int32", chunks=(4,), compressors=None, fill_value=0,
                                    dimension_names=["band"])
            band[:] = np.arange(4, dtype=np.int32)
        g.update_attributes(attrs)  # one write (attrs.update writes zarr.json once per key: see above)
    write_group(path, fill)


def _to_lonlat(grid: ZoneGrid) -> Transformer:
    return Transformer.from_crs(conv.epsg_for_zone(grid.zone, grid.south), 4326, always_xy=True)


def _lonlat_box(grid: ZoneGrid, box: tuple[float, float, float, float],
                t: Transformer | None = None) -> tuple[float, float, float, float]:
    return (t or _to_lonlat(grid)).transform_bounds(*box, densify_pts=21)


def _zones(store: Sink) -> list[Zone]:
    # Not the consolidated metadata: it is rewritten after the pyramid, so it may still hold a
    # zone's grid from before this build grew it.
    import zarr
    root = zarr.open_group(store.zarr_store(), mode="r", use_consolidated=False)
    out = []
    for name in sorted(root.group_keys()):
        if conv.parse_zone_group_name(name) is None or "rgb" not in root[name]:
            continue
        g = root[name]
        grid = ZoneGrid.from_attrs(dict(g.attrs), g["rgb"].shards[0])
        out.append(Zone(name, grid, _lonlat_box(grid, grid.box())))
    return out


def _chunks_for(lonlat: tuple[float, float, float, float], res0: float, shape0: tuple[int, int]) -> set[tuple[int, int]]:
    return set(conv.global_chunks(lonlat, res0, shape0, CHUNK))


def _batches(chunks: list[tuple[int, int]], parts: int = 8, most: int = 32) -> list[tuple[tuple[int, int], ...]]:
    """`chunks` in runs of neighbours (sorted order), about `parts` tasks of at most `most` chunks: each task
    opens the level arrays, transformers and zone files once for all its chunks."""
    size = max(1, min(most, -(-len(chunks) // parts)))
    return [tuple(chunks[i:i + size]) for i in range(0, len(chunks), size)]


def _render_level0(chunks: tuple[tuple[int, int], ...], store: Sink, res0: float,
                   zones: list[Zone]) -> list[tuple[tuple[int, int], bool, bool]]:
    level = _level_files(store, 0)
    transformers: dict[int, Transformer] = {}
    previews: dict[str, ShardedArrayFiles] = {}
    return [_render_chunk0(chunk, store, res0, zones, level, transformers, previews) for chunk in chunks]


def _render_chunk0(chunk: tuple[int, int], store: Sink, res0: float, zones: list[Zone], level: ChunkedArrayFiles,
                   transformers: dict, previews: dict) -> tuple[tuple[int, int], bool, bool]:
    ci, cj = chunk
    lon, lat = conv.global_centres(ci * CHUNK, cj * CHUNK, CHUNK, res0)
    out = np.zeros((CHUNK, CHUNK, 4), dtype=np.uint8)
    cw, cn = lon[0], lat[0]
    ce, cs = lon[-1], lat[-1]
    cand = [z for z in zones if z.lonlat[0] <= ce and z.lonlat[2] >= cw and z.lonlat[1] <= cn and z.lonlat[3] >= cs]
    cand.sort(key=lambda z: float(meridian_distance((cw + ce) / 2, z.grid.zone)))  # stable: first listed of equals
    for z in cand:
        if z.epsg not in transformers:
            transformers[z.epsg] = Transformer.from_crs(4326, z.epsg, always_xy=True)
        e, n = projected(transformers[z.epsg], lon, lat)
        row, col = z.grid.rowcol(e, n)
        inside = z.grid.contains(row, col) & (out[..., 3] == 0)
        if not inside.any():
            continue
        ra, rb = row[inside].min(), row[inside].max() + 1
        ca, cb = col[inside].min(), col[inside].max() + 1
        if z.name not in previews:
            previews[z.name] = ShardedArrayFiles(store / f"{z.name}/rgb")
        window = previews[z.name].read_region(ra, rb, ca, cb)
        vals = window[row[inside] - ra, col[inside] - ca]
        take = vals[:, 3] > 0
        idx = np.argwhere(inside)[take]
        out[idx[:, 0], idx[:, 1]] = vals[take]
    written = _write_chunk(level, chunk, out)
    return chunk, bool(out[..., 3].any()), written


def projected(t: Transformer, lon: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(easting, northing), each (len(lat), len(lon)), of the grid of points (lon[j], lat[i]) through `t`
    (lon/lat to UTM): pyproj at every KNOT-th row and column and the last, bilinear in between.  Transverse
    Mercator is smooth at this scale: over KNOT level-0 pixels (under 180 m) the interpolation is off by
    millimetres (tests/test_pyramid.py bounds it at 1 cm), where a zone pixel is 10 m; and reprojecting one
    point in about 200 was most of a level-0 chunk's time.  A knot pyproj cannot project (far outside the
    zone) makes it project every point."""
    ri, ci = _knots(lat.size), _knots(lon.size)
    ge, gn = t.transform(*np.meshgrid(lon[ci], lat[ri]))
    if not (np.isfinite(ge).all() and np.isfinite(gn).all()):
        return t.transform(*np.meshgrid(lon, lat))
    (r0, r1, rt), (c0, c1, ct) = _lerp(lat.size), _lerp(lon.size)

    def bilinear(g: np.ndarray) -> np.ndarray:  # elementwise: a BLAS product this small spins up its threads
        rows = g[r0] * (1 - rt)[:, None] + g[r1] * rt[:, None]
        return rows[:, c0] * (1 - ct) + rows[:, c1] * ct
    return bilinear(ge), bilinear(gn)


def _knots(n: int) -> np.ndarray:
    return np.unique(np.r_[np.arange(0, n, KNOT), n - 1])


@lru_cache(maxsize=8)
def _lerp(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of 0..n-1: the index of the knot (`_knots(n)`) at or before it, of the knot after it, and
    its fraction of the way between them."""
    knots = _knots(n)
    i = np.arange(n)
    k = np.clip(np.searchsorted(knots, i, side="right") - 1, 0, max(knots.size - 2, 0))
    k1 = np.minimum(k + 1, knots.size - 1)
    out = k, k1, (i - knots[k]) / np.maximum(knots[k1] - knots[k], 1)
    for a in out:  # cached: shared by every call
        a.flags.writeable = False
    return out


def _write_chunk(level: ChunkedArrayFiles, chunk: tuple[int, int], out: np.ndarray) -> bool:
    """Chunk `chunk` of a level as a whole; the part of an edge chunk outside the level is fill (zero).  True when
    it has a file: not all zero (which a chunk without a visible pixel may be: colour under an alpha rounded to 0)."""
    ci, cj = chunk
    out[max(0, level.shape[0] - ci * CHUNK):] = 0
    out[:, max(0, level.shape[1] - cj * CHUNK):] = 0
    return level.write(out, ci, cj)


def reduce2x2(block: np.ndarray) -> np.ndarray:
    """Alpha-weighted 2x2 mean of an RGBA block (H, W, 4) with even H and W: each colour the sum of the four
    alpha-weighted colours over the sum of the alphas, rounded half to even; alpha the mean alpha, rounded
    the same way.  The sums are integers (exact in uint32), so only the division is floating point."""
    h, w = block.shape[0] // 2, block.shape[1] // 2
    out = np.zeros((h, w, 4), dtype=np.uint8)
    if not block[..., 3].any():
        return out
    a = block[..., 3:4].astype(np.uint32)
    rgb = block[..., :3] * a

    def pool(x):
        return x[0::2, 0::2] + x[0::2, 1::2] + x[1::2, 0::2] + x[1::2, 1::2]

    asum = pool(a)[..., 0]
    has = asum > 0
    out[has, :3] = np.round(pool(rgb)[has] / asum[has, None].astype(np.float64)).astype(np.uint8)
    out[..., 3] = np.round(asum / 4).astype(np.uint8)
    return out


def _level_files(store: Sink, k: int) -> ChunkedArrayFiles:
    return ChunkedArrayFiles(store / f"{conv.GLOBAL_GROUP}/{k}/rgb")


def _render_level(chunks: tuple[tuple[int, int], ...], store: Sink, k: int) -> list[tuple[tuple[int, int], bool, bool]]:
    src, dst = _level_files(store, k - 1), _level_files(store, k)
    return [_render_chunk(chunk, src, dst) for chunk in chunks]


def _render_chunk(chunk: tuple[int, int], src: ChunkedArrayFiles,
                  dst: ChunkedArrayFiles) -> tuple[tuple[int, int], bool, bool]:
    """A chunk of level k from the 2x2 chunks under it in level k - 1 (absent ones, and the parts of edge
    chunks outside the level, are zero): (chunk, has a visible pixel, has a file)."""
    ci, cj = chunk
    block = np.empty((2 * CHUNK, 2 * CHUNK, 4), dtype=np.uint8)
    for i in (0, 1):
        for j in (0, 1):
            block[i * CHUNK:(i + 1) * CHUNK, j * CHUNK:(j + 1) * CHUNK] = src.read(2 * ci + i, 2 * cj + j)
    out = reduce2x2(block)
    written = _write_chunk(dst, chunk, out)
    return chunk, bool(out[..., 3].any()), written


def update_pyramid(store: Sink, changed: dict[str, list], res0: float, runner: Runner,
                   checkpoint: Callable[[str], None] = lambda phase: None) -> int:
    """Recompute the pyramid chunks over the shards in `changed` ({zone: [record.PyramidPending]}).  Returns chunks
    written with data.

    Idempotent: every chunk is computed from the zones and the level below, so an interrupted update
    is finished by running it again over the same `changed`."""
    _open_levels(store, res0)
    shapes = level_shapes(res0)
    zones = _zones(store)
    dirty: set[tuple[int, int]] = set()
    for entries in changed.values():
        for entry in entries:
            grid = entry.grid
            s, t = grid.step, _to_lonlat(grid)
            for sr, sc in entry.shards:
                box = (grid.origin_e + sc * s, grid.origin_n - (sr + 1) * s, grid.origin_e + (sc + 1) * s,
                       grid.origin_n - sr * s)
                dirty |= _chunks_for(_lonlat_box(grid, box, t), res0, shapes[0])
    if not dirty:
        return 0
    # level 0 (reprojecting every chunk from the zones) is never run in one task with the levels above it
    levels = [lv.Level(0, _render_level0, sorted(dirty), {"store": store, "res0": res0, "zones": zones}, small=0,
                       batches=_batches)]
    for k in range(1, len(shapes)):
        dirty = {(ci // 2, cj // 2) for ci, cj in dirty}
        levels.append(lv.Level(k, _render_level, sorted(dirty), {"store": store, "k": k}, batches=_batches))
    results = lv.run(runner, "global_rgb", "chunks", levels, checkpoint, phase="pyramid")
    for k, level in enumerate(results):
        _record(store, k, level)
    return sum(visible for level in results for _, visible, _ in level)


def _record(store: Sink, k: int, results: list[tuple[tuple[int, int], bool, bool]]) -> None:
    """Level k's record of its chunks (builder/chunkrecord.py): the chunks just computed in or out as they have a
    file."""
    chunkrecord.update(store / f"{conv.GLOBAL_GROUP}/{k}/rgb", [(c, written) for c, _, written in results])
