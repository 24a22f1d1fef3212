"""The xarray engine "tessera": one zone as a lazy Dataset, dequantised on read.

    xr.open_dataset(url, engine="tessera", group="utm30")               # tessera: v1 store or geoemb: store
    xr.open_dataset(url, engine="tessera", group="utm30", year=2024)    # one year of a geoemb: store or catalog
    xr.open_dataset(url, engine="tessera", group="utm30", chunks={})    # dask, 256 x 256 pixel blocks
    xr.open_dataset(catalog, engine="tessera", group="utm30", allow=["https://other/"])  # open_store's allow=

Variables: `embeddings` float32 (y, x, band), or (time, y, x, band) for every year of a geoemb: store,
NaN wherever there is no data; `scales` float32 as stored (v1 NaN; geoemb NaN water, +inf no data);
`rgb` uint8 (y, x, rgb_band) where a v1 zone has its preview: v1 names the last axis of both
`embeddings` and `rgb` "band", so the preview's is renamed here.  Coordinates x, y (pixel centres in
the zone's CRS), band, time (geoemb), and `spatial_ref` (CF grid mapping: crs_wkt, GeoTransform).
The Dataset itself is builder/reader/dataset.py's (shared with read_region).
"""
from __future__ import annotations

import os

import xarray as xr
from xarray.backends import BackendEntrypoint

from builder.reader.dataset import zone_dataset
from builder.reader.store import open_store


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
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "group", "year", "storage_options", "allow")

    def open_dataset(self, filename_or_obj, *, drop_variables=None, group=None, year=None, storage_options=None,
                     allow=None):
        store = open_store(os.fspath(filename_or_obj), allow=allow, **(storage_options or {}))
        return open_zone(store, group, year, drop_variables or ())

    def guess_can_open(self, filename_or_obj) -> bool:
        return False  # a Zarr store is zarr's; this engine is asked for by name
