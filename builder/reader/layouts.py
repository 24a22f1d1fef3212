"""The layouts the reader understands (their rules: builder/core/layout.py, the pure core the explorer shares),
the geometry of their zones for pyproj, and one zone of one year read in (y, x, band) order.

Everything above this module (points, regions, the xarray backend) works on a `ZoneView`: one zone of
one year whose arrays read in (y, x, band) order whatever the layout.
"""
from __future__ import annotations

from functools import lru_cache

import jsonschema
import numpy as np
from pyproj import Transformer

from builder.core import convention as conv
from builder.core.bounds import BANDS_MAX, CHUNK_BYTES_MAX, COORD_VALUES_MAX, mib
from builder.core.grid import ZoneGrid
from builder.core.describe import StoreError, StoreInfo, describe
from builder.core.zone import Zone
from builder.core.layout import (GEOEMB, NODATA, OUTSIDE, V1, VALID, WATER, Layout, depth_arrays, depth_fault,
                                 nested_depths)

__all__ = ["GEOEMB", "V1", "Layout", "VALID", "WATER", "NODATA", "OUTSIDE", "Zone", "ZoneView", "NoDataView", "zone_of_group", "detect", "read_root"]
# Edge (pixels) of the blocks regions are read in: one v1 shard (256), or 8x8 inner chunks of a geoemb:
# shard (a whole 4096 x 4096 x 128 geoemb shard would be 8 GiB as float32).
BLOCK = 256


@lru_cache(maxsize=None)
def to_crs(crs: str) -> Transformer:
    return Transformer.from_crs("EPSG:4326", crs, always_xy=True)


def detect(attrs: dict, url: str) -> Layout:
    """The layout of a store from its root attributes (builder/core/describe.py); ValueError otherwise."""
    return read_root(attrs, url).layout


def read_root(attrs: dict, url: str) -> StoreInfo:
    """describe() of a store root the reader opens (a year store, a multi-year index or a geoemb: store);
    ValueError otherwise."""
    try:
        info = describe({"attributes": attrs}, where=url, jsonschema=jsonschema)
    except StoreError as e:
        if e.kind == "version":
            raise ValueError(f"{url}: tessera:dataset_version {e.version!r}; this reader reads "
                             f"{conv.DATASET_VERSION!r}") from None
        raise ValueError(str(e)) from None
    return info


def check_arrays(emb, scl, layout: Layout, grid: ZoneGrid) -> None:
    """What a reader allocates from a zone's embeddings and scales, checked against builder/core/bounds.py and the
    zone grid: the layout's axes, chunk edges of at least 1, inner chunks of at most CHUNK_BYTES_MAX decoded,
    1..BANDS_MAX bands, (rows, cols) equal to spatial:shape and at most COORD_VALUES_MAX each, scales of
    the embeddings' shape without the band axis."""
    nd = 4 if layout.time_axis else 3
    if emb.ndim != nd or scl.ndim != nd - 1:
        raise ValueError(f"embeddings {emb.shape} and scales {scl.shape} are not {layout.name} arrays "
                         f"({nd} and {nd - 1} dimensions)")
    for what, a in (("embeddings", emb), ("scales", scl)):
        outer = a.shards or a.chunks
        if min(outer) < 1 or min(a.chunks) < 1:
            raise ValueError(f"{what}: chunk shape {outer} (inner {a.chunks}) has an edge below 1")
        decoded = int(np.prod(a.chunks, dtype=object)) * a.dtype.itemsize
        if decoded > CHUNK_BYTES_MAX:
            raise ValueError(f"{what}: inner chunks {a.chunks} decode to {decoded} bytes, more than the "
                             f"{mib(CHUNK_BYTES_MAX)} read per chunk")
    bands = emb.shape[layout.band_axis]
    if not 1 <= bands <= BANDS_MAX:
        raise ValueError(f"embeddings has {bands} bands; the reader reads 1 to {BANDS_MAX}")
    h, w = (emb.shape[ax] for ax in layout.yx)
    if (h, w) != (grid.height, grid.width):
        raise ValueError(f"embeddings are {h} x {w} pixels, spatial:shape says {grid.height} x {grid.width}")
    if max(h, w) > COORD_VALUES_MAX:
        raise ValueError(f"a grid of {h} x {w} pixels; the reader reads at most {COORD_VALUES_MAX} rows or columns")
    want = tuple(n for ax, n in enumerate(emb.shape) if ax != layout.band_axis)
    if tuple(scl.shape) != want:
        raise ValueError(f"scales has shape {scl.shape}, the embeddings' {emb.shape} need {want}")


def zone_of_group(name: str, attrs: dict, group, layout: Layout) -> Zone:
    """A zone group's zone (builder/core/zone.py) from its attributes and arrays, checked before anything is
    allocated from them: ValueError (one line) for attributes of no grid, or arrays that do not fit it or exceed
    builder/core/bounds.py."""
    emb, scl = group["embeddings"], group["scales"]
    zone = Zone.of_attrs(name, attrs, layout, emb.shards or emb.chunks, int(emb.shape[layout.band_axis]),
                         chunk=int(emb.chunks[layout.yx[0]]))
    check_arrays(emb, scl, layout, zone.grid)
    return zone


class ZoneView:
    """One zone of one year, read in (y, x, band) order whatever the layout.  `depth` (pixels, box,
    dequantised): read the nested-depth array `embeddings_d{depth}` (the first `depth` bands of every vector,
    geoemb: v2) instead of the full vectors; None reads the full ones.  `depths` lists the zone's."""

    def __init__(self, layout: Layout, group, zone: Zone, year: int, t: int | None, source=None):
        """`source`: (fsspec filesystem, store root) for whole-shard window reads of (H, W[, B]) arrays."""
        from builder.reader.shards import WindowReader
        self.layout, self.zone, self.year, self.t = layout, zone, year, t
        self.group = group
        self.embeddings = group["embeddings"]
        self.scales = group["scales"]
        self._depth_names: dict[int, str] | None = None  # nested_depths of the zone, read when first asked for
        self._depth_arrays: dict[int, object] = {}
        self._windows = None
        if t is None and source is not None:
            self._windows = (WindowReader(self.embeddings, *source), WindowReader(self.scales, *source))

    def _named(self) -> list[tuple[int, str]]:
        """(D, name) of the arrays named as nested depths (builder/core/layout.py depth_arrays)."""
        return depth_arrays(self.group.array_keys()) if self.layout.time_axis else []

    @property
    def depth_names(self) -> dict[int, str]:
        """The zone's nested-depth arrays by depth: those builder/core/layout.py's rule (nested_depths) accepts."""
        if self._depth_names is None:
            shapes = {name: self.group[name].shape for _, name in self._named()}
            self._depth_names = dict(nested_depths(shapes, self.embeddings.shape, self.layout.band_axis))
        return self._depth_names

    @property
    def depths(self) -> list[int]:
        """The depths of the zone's nested-depth arrays, smallest first ([] when it has none)."""
        return sorted(self.depth_names)

    def _embeddings(self, depth: int | None):
        """The embeddings array of `depth` (None: the full vectors): ValueError (one line) for a depth the zone has
        no array of, naming why an array named as that depth is none (builder/core/layout.py depth_fault)."""
        if depth is None:
            return self.embeddings
        if depth not in self.depth_names:
            for d, name in self._named():
                fault = d == depth and depth_fault(d, self.group[name].shape, self.embeddings.shape,
                                                   self.layout.band_axis)
                if fault:
                    raise ValueError(f"{self.zone.name}/{name}: {fault}")
            have = ", ".join(map(str, self.depths)) or "none"
            raise ValueError(f"{self.zone.name}: no depth-{depth} array (embeddings_d{{D}} depths: {have})")
        if depth not in self._depth_arrays:
            a = self.group[self.depth_names[depth]]
            check_arrays(a, self.scales, self.layout, self.zone.grid)
            self._depth_arrays[depth] = a
        return self._depth_arrays[depth]

    def n_bands(self, depth: int | None = None) -> int:
        return self.zone.n_bands if depth is None else int(self._embeddings(depth).shape[self.layout.band_axis])

    def pixels(self, rows: np.ndarray, cols: np.ndarray, depth: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(int8 (N, B), float32 (N,)) of pixels: one coordinate selection per array, so zarr-python reads
        each touched shard index once and each touched inner chunk once (ranged reads, not whole shards)."""
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        emb = self._embeddings(depth)
        b = np.arange(self.n_bands(depth))[None, :]
        if self.t is None:
            def read(r, c):
                return emb.vindex[r[:, None], c[:, None], b]
            q = self._windows[0].points(rows, cols, read) if self._windows and depth is None else read(rows, cols)
        else:
            q = emb.vindex[np.full_like(rows, self.t)[:, None], b, rows[:, None], cols[:, None]]
        return np.asarray(q), self.scales_at(rows, cols)

    def scales_at(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """float32 (N,) scales of pixels, without reading their vectors."""
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        if self.t is None:
            if self._windows:  # the shards the record says do not exist: fill, no request
                return np.asarray(self._windows[1].points(rows, cols, lambda r, c: self.scales.vindex[r, c]),
                                  dtype=np.float32)
            return np.asarray(self.scales.vindex[rows, cols], dtype=np.float32)
        return np.asarray(self.scales.vindex[np.full_like(rows, self.t), rows, cols], dtype=np.float32)

    def scales_box(self, ys: slice, xs: slice) -> np.ndarray:
        if self._windows:
            return self._windows[1].read(ys, xs)
        return np.asarray(self.scales[ys, xs] if self.t is None else self.scales[self.t, ys, xs])

    def box(self, ys: slice, xs: slice, depth: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(int8 (h, w, B), float32 (h, w)) of a window."""
        emb = self._embeddings(depth)
        if self._windows and depth is None:
            return self._windows[0].read(ys, xs), self.scales_box(ys, xs)
        if self.t is None:
            return np.asarray(emb[ys, xs, :]), self.scales_box(ys, xs)
        return np.moveaxis(np.asarray(emb[self.t, :, ys, xs]), 0, -1), self.scales_box(ys, xs)

    def dequantised(self, ys: slice, xs: slice, depth: int | None = None) -> np.ndarray:
        return self.layout.dequantise(*self.box(ys, xs, depth))


class NoDataView(ZoneView):
    """A year a store lists on its time axis but does not hold (dClimate: not in `years_complete`): every
    pixel reads as no data (+inf scales, zero vectors) whatever the arrays hold for it."""

    def pixels(self, rows, cols, depth=None):
        return np.zeros((len(np.asarray(rows)), self.n_bands(depth)), np.int8), self.scales_at(rows, cols)

    def scales_at(self, rows, cols):
        return np.full(len(np.asarray(rows)), np.inf, np.float32)

    def scales_box(self, ys, xs):
        h, w = (len(range(n)[s]) for n, s in zip((self.zone.grid.height, self.zone.grid.width), (ys, xs)))
        return np.full((h, w), np.inf, np.float32)

    def box(self, ys, xs, depth=None):
        s = self.scales_box(ys, xs)
        return np.zeros((*s.shape, self.n_bands(depth)), np.int8), s
