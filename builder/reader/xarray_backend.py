"""The xarray engine "tessera": one zone as a lazy Dataset, dequantised on read.

    xr.open_dataset(url, engine="tessera", group="utm30")               # tessera: v1 store or geoemb: store
    xr.open_dataset(url, engine="tessera", group="utm30", year=2024)    # one year of a geoemb: store or catalog
    xr.open_dataset(url, engine="tessera", group="utm30", chunks={})    # dask, 256 x 256 pixel blocks

Variables: `embeddings` float32 (y, x, band), or (time, y, x, band) for every year of a geoemb: store,
NaN wherever there is no data; `scales` float32 as stored (v1 NaN; geoemb NaN water, +inf no data);
`rgb` uint8 (y, x, rgb_band) where a v1 zone has its preview: v1 names the last axis of both
`embeddings` and `rgb` "band", so the preview's is renamed here.  Coordinates x, y (pixel centres in
the zone's CRS), band, time (geoemb), and `spatial_ref` (CF grid mapping: crs_wkt, GeoTransform).
A BackendArray of our own because the dequantised vectors exist in no array of the store.
"""
from __future__ import annotations

import os
from typing import Callable

import numpy as np
import xarray as xr
from pyproj import CRS
from xarray.backends import BackendArray, BackendEntrypoint
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


def open_zone(store, group: str | None, year: int | None = None, drop_variables=()) -> xr.Dataset:
    """Zone `group` of one year, or of every year of a geoemb: store when year is None."""
    every_year = year is None and store.rules.time_axis
    years = store.years if every_year else [store.year(year)]
    zones = sorted({n for y in years for n in store.zones(y)})
    name = (group or "").strip("/")
    if name not in zones:
        given = f"no zone {group!r}; " if group else ""
        raise ValueError(f"{store.url}: {given}pass group= one of {', '.join(zones)}")
    views = [store.view(name, y) for y in years if name in store.zones(y)]
    return zone_dataset(views, every_year, drop_variables)


class TesseraBackendEntrypoint(BackendEntrypoint):
    description = "TESSERA embeddings (tessera: v1 and geoemb: Zarr stores), one zone, dequantised lazily"
    url = "https://github.com/ucam-eo/zarr-convention-tessera"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "group", "year", "storage_options")

    def open_dataset(self, filename_or_obj, *, drop_variables=None, group=None, year=None, storage_options=None):
        from builder.reader.store import open_store
        store = open_store(os.fspath(filename_or_obj), **(storage_options or {}))
        return open_zone(store, group, year, drop_variables or ())

    def guess_can_open(self, filename_or_obj) -> bool:
        return False  # a Zarr store is zarr's; this engine is asked for by name
