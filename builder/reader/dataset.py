"""One zone as an xarray.Dataset, dequantised lazily: what read_region (region.py) and the xarray engine
(xarray_backend.py) both build.  A BackendArray of our own because the dequantised vectors exist in no
array of the store.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import xarray as xr
from pyproj import CRS
from xarray.backends import BackendArray
from xarray.core import indexing

from builder.core import convention as conv
from builder.reader.layouts import BLOCK, ZoneView


class ZoneArray(BackendArray):
    """One variable of one zone: `read(view, ys, xs)` per year, stacked on `time` when `time`; `points(view,
    rows, cols)` gives (N, *tail) values of pixels for vectorised (pointwise) indexing."""

    def __init__(self, views: list[ZoneView], time: bool, read: Callable, tail: tuple[int, ...], dtype,
                 points: Callable):
        g = views[0].zone.grid
        self.views, self.time, self.read, self.points = views, time, read, points
        self.shape = ((len(views),) if time else ()) + (g.height, g.width) + tail
        self.dtype = np.dtype(dtype)

    def __getitem__(self, key):
        if isinstance(key, indexing.VectorizedIndexer):
            return self._pointwise(key)
        # outer indexers: the bounding slices are read, then indexed in memory (xarray's decomposition)
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC, self._get)

    def _pointwise(self, key):
        """Vectorised indexing: only the distinct (time, y, x) pixels the indexer names are read (one
        coordinate selection per year, ZoneView.pixels), not the box around them."""
        arrays = indexing._arrayize_vectorized_indexer(key, self.shape).tuple  # slices as aranges, broadcastable
        full = [np.where(a < 0, a + n, a).astype(np.int64) for a, n in zip(np.broadcast_arrays(*arrays), self.shape)]
        for ax, (a, n) in enumerate(zip(full, self.shape)):
            if a.size and (a.min() < 0 or a.max() >= n):
                raise IndexError(f"an index of axis {ax} is outside 0..{n - 1}")
        lead = 1 if self.time else 0
        t = full[0].ravel() if self.time else np.zeros(full[0].size, np.int64)
        pix = np.stack([t, full[lead].ravel(), full[lead + 1].ravel()], axis=1)
        uniq, inv = np.unique(pix, axis=0, return_inverse=True)
        inv = inv.ravel()
        vals = np.empty((len(uniq), *self.shape[lead + 2:]), self.dtype)
        for ti in np.unique(uniq[:, 0]):
            sel = uniq[:, 0] == ti
            vals[sel] = self.points(self.views[ti], uniq[sel, 1], uniq[sel, 2])
        tails = tuple(a.ravel() for a in full[lead + 2:])
        return vals[(inv, *tails)].reshape(full[0].shape)

    def _get(self, key):
        # basic indexer: ints become one-element slices, and their axes are dropped after reading
        sl = tuple(k if isinstance(k, slice) else slice(int(k), int(k) + 1) for k in key)
        drop = tuple(ax for ax, k in enumerate(key) if not isinstance(k, slice))
        if self.time:
            parts = [self.read(self.views[t], sl[1], sl[2])[(..., *sl[3:])] for t in range(len(self.views))[sl[0]]]
            lens = tuple(len(range(n)[s]) for n, s in zip(self.shape[1:], sl[1:]))
            out = np.stack(parts) if parts else np.empty((0, *lens), self.dtype)
        else:
            out = self.read(self.views[0], sl[0], sl[1])[(..., *sl[2:])]
        return out.squeeze(axis=drop) if drop else out


def spatial_ref(crs: str, transform: list[float]) -> xr.Variable:
    """A CF grid-mapping variable as rioxarray and GDAL read it."""
    t, wkt = transform, CRS(crs).to_wkt()
    return xr.Variable((), np.int32(0), {"crs_wkt": wkt, "spatial_ref": wkt,
                                         "GeoTransform": f"{t[2]} {t[0]} {t[1]} {t[5]} {t[3]} {t[4]}"})


def zone_dataset(views: list[ZoneView], time: bool, drop_variables=(), depth: int | None = None) -> xr.Dataset:
    """The Dataset of one zone: one ZoneView (one year) or one per year on a `time` dimension; `depth`: the
    embeddings of the zone's nested-depth array of that many bands (ZoneView.depths) instead of the full ones."""
    v = views[0]
    z, g = v.zone, v.zone.grid
    nb = v.n_bands(depth)  # a depth the zone lacks: ValueError, one line
    lead = ("time",) if time else ()
    sizes = {"time": 1, "y": BLOCK, "x": BLOCK, "band": nb, "rgb_band": 4}
    specs = {"embeddings": (("y", "x", "band"), lambda w, ys, xs: w.dequantised(ys, xs, depth), (nb,), np.float32,
                            lambda w, r, c: w.layout.dequantise(*w.pixels(r, c, depth))),
             "scales": (("y", "x"), lambda w, ys, xs: w.scales_box(ys, xs), (), np.float32,
                        lambda w, r, c: w.scales_at(r, c))}
    if v.t is None and "rgb" in v.group.array_keys():
        specs["rgb"] = (("y", "x", "rgb_band"), lambda w, ys, xs: np.asarray(w.group["rgb"][ys, xs, :]), (4,), np.uint8,
                        lambda w, r, c: np.asarray(w.group["rgb"].vindex[r[:, None], c[:, None], np.arange(4)[None]]))
    data = {}
    for name, (dims, read, tail, dtype, points) in specs.items():
        if name in set(drop_variables or ()):
            continue
        dims = lead + dims
        data[name] = xr.Variable(dims, indexing.LazilyIndexedArray(ZoneArray(views, time, read, tail, dtype, points)),
                                 {"grid_mapping": "spatial_ref"}, {"preferred_chunks": {d: sizes[d] for d in dims}})
    coords = {"y": conv.northing_coords(g.origin_n, g.height), "x": conv.easting_coords(g.origin_e, g.width),
              "band": np.arange(nb, dtype=np.int32), "spatial_ref": spatial_ref(z.crs, z.transform)}
    attrs = {"proj:code": z.crs, "zone": z.name, "layout": v.layout.name,
             **conv.spatial_attrs(g.origin_e, g.origin_n, g.height, g.width), "spatial:dimensions": ["y", "x"]}
    if depth is not None:
        attrs["depth"] = depth
    if time:
        coords["time"] = np.array([w.year for w in views], dtype=np.int32)
    else:
        attrs["year"] = v.year
    return xr.Dataset(data, coords, attrs)
