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

from builder import convention as conv
from builder.reader.layouts import BLOCK, ZoneView


class ZoneArray(BackendArray):
    """One variable of one zone: `read(view, ys, xs)` per year, stacked on `time` when `time`."""

    def __init__(self, views: list[ZoneView], time: bool, read: Callable, tail: tuple[int, ...], dtype):
        g = views[0].zone.grid
        self.views, self.time, self.read = views, time, read
        self.shape = ((len(views),) if time else ()) + (g.height, g.width) + tail
        self.dtype = np.dtype(dtype)

    def __getitem__(self, key):
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC, self._get)

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


def zone_dataset(views: list[ZoneView], time: bool, drop_variables=()) -> xr.Dataset:
    """The Dataset of one zone: one ZoneView (one year) or one per year on a `time` dimension."""
    v = views[0]
    z, g = v.zone, v.zone.grid
    lead = ("time",) if time else ()
    sizes = {"time": 1, "y": BLOCK, "x": BLOCK, "band": z.n_bands, "rgb_band": 4}
    specs = {"embeddings": (("y", "x", "band"), lambda w, ys, xs: w.dequantised(ys, xs), (z.n_bands,), np.float32),
             "scales": (("y", "x"), lambda w, ys, xs: w.scales_box(ys, xs), (), np.float32)}
    if v.t is None and "rgb" in v.group.array_keys():
        specs["rgb"] = (("y", "x", "rgb_band"), lambda w, ys, xs: np.asarray(w.group["rgb"][ys, xs, :]), (4,), np.uint8)
    data = {}
    for name, (dims, read, tail, dtype) in specs.items():
        if name in set(drop_variables or ()):
            continue
        dims = lead + dims
        data[name] = xr.Variable(dims, indexing.LazilyIndexedArray(ZoneArray(views, time, read, tail, dtype)),
                                 {"grid_mapping": "spatial_ref"}, {"preferred_chunks": {d: sizes[d] for d in dims}})
    coords = {"y": conv.northing_coords(g.origin_n, g.height), "x": conv.easting_coords(g.origin_e, g.width),
              "band": np.arange(z.n_bands, dtype=np.int32), "spatial_ref": spatial_ref(z.crs, z.transform)}
    attrs = {"proj:code": z.crs, "zone": z.name, "layout": v.layout.name,
             **conv.spatial_attrs(g.origin_e, g.origin_n, g.height, g.width), "spatial:dimensions": ["y", "x"]}
    if time:
        coords["time"] = np.array([w.year for w in views], dtype=np.int32)
    else:
        attrs["year"] = v.year
    return xr.Dataset(data, coords, attrs)
