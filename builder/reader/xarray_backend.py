"""The xarray engine "tessera": one zone as a lazy Dataset, dequantised on read.

    xr.open_dataset(url, engine="tessera", group="utm30")               # tessera: v1 store or geoemb: store
    xr.open_dataset(url, engine="tessera", group="utm30", year=2024)    # one year of a geoemb: store or catalog
    xr.open_dataset(url, engine="tessera", group="utm30", chunks={})    # dask, 256 x 256 pixel blocks
    xr.open_dataset(catalog, engine="tessera", group="utm30", allow=["https://other/"])  # open_store's allow=
    xr.open_datatree(url, engine="tessera")                             # one node per UTM zone (/utm30, ...)
    xr.open_dataset(url, engine="tessera", group="utm30", depth=16)     # a geoemb: v2 store's depth-16 prefixes
    xr.open_dataset(url)                                                # a store that registers tessera: or geoemb:

`guess_can_open` reads the root zarr.json (bounded, builder/core/bounds.py) of a local store or an fsspec URL and
says yes for a root that registers the tessera: or geoemb: convention (its `zarr_conventions` uuids),
whatever the name ends with.  Vectorised (pointwise) indexing reads only the pixels it names
(builder/reader/dataset.py).

Variables: `embeddings` float32 (y, x, band), or (time, y, x, band) for every year of a geoemb: store,
NaN wherever there is no data; `scales` float32 as stored (v1 NaN; geoemb NaN water, +inf no data);
`rgb` uint8 (y, x, rgb_band) where a v1 zone has its preview: v1 names the last axis of both
`embeddings` and `rgb` "band", so the preview's is renamed here.  Coordinates x, y (pixel centres in
the zone's CRS), band, time (geoemb), and `spatial_ref` (CF grid mapping: crs_wkt, GeoTransform).
The Dataset itself is builder/reader/dataset.py's (shared with read_region).
"""
from __future__ import annotations

import os

import fsspec
import xarray as xr
from xarray.backends import BackendEntrypoint

from builder.core.bounds import ROOT_JSON_MAX, read_json_file
from builder.core.layout import root_kind
from builder.reader.dataset import zone_dataset
from builder.reader.store import open_store

OPENS = ("tessera:", "geoemb:")  # the root conventions this engine opens (a tessera-stack: index is refused)


def _years(store, year: int | None) -> tuple[bool, list[int], list[str]]:
    """(every year?, the years read, the zones they hold): every year of a store with a time axis when year is
    None, else the one year."""
    every_year = year is None and store.rules.time_axis
    years = store.years if every_year else [store.year(year)]
    return every_year, years, sorted({n for y in years for n in store.zones(y)})


def open_zone(store, group: str | None, year: int | None = None, drop_variables=(), depth: int | None = None
              ) -> xr.Dataset:
    """Zone `group` of one year, or of every year of a geoemb: store when year is None; `depth`: its
    nested-depth embeddings (geoemb: v2) instead of the full vectors."""
    every_year, years, zones = _years(store, year)
    name = (group or "").strip("/")
    if name not in zones:
        given = f"no zone {group!r}; " if group else ""
        raise ValueError(f"{store.url}: {given}pass group= one of {', '.join(zones)}")
    views = [store.view(name, y) for y in years if name in store.zones(y)]
    return zone_dataset(views, every_year, drop_variables, depth)


def open_zones(store, year: int | None = None, drop_variables=(), depth: int | None = None) -> dict[str, xr.Dataset]:
    """{"/": the store's attributes, "/utmNN": each zone's Dataset}, as open_zone gives them."""
    _, _, zones = _years(store, year)
    root = xr.Dataset(attrs={"layout": store.layout, "url": store.url, "years": list(store.years), "zones": zones})
    return {"/": root, **{f"/{z}": open_zone(store, z, year, drop_variables, depth) for z in zones}}


def registers_ours(path: str) -> bool:
    """Whether the store root at `path` (local or fsspec URL) registers a convention this engine opens."""
    try:
        with fsspec.open(f"{path.rstrip('/')}/zarr.json", "rb") as f:
            doc = read_json_file(f, path, ROOT_JSON_MAX)
    except Exception:  # anything unreadable is not ours to claim: guessing never raises
        return False
    return isinstance(doc, dict) and root_kind(doc.get("attributes")) in OPENS


class TesseraBackendEntrypoint(BackendEntrypoint):
    description = "TESSERA embeddings (tessera: v1, geoemb: and dClimate Zarr stores), by zone, dequantised lazily"
    url = "https://github.com/ucam-eo/zarr-convention-tessera"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "group", "year", "storage_options", "allow",
                               "depth")
    supports_groups = True

    def _store(self, filename_or_obj, storage_options, allow):
        return open_store(os.fspath(filename_or_obj), allow=allow, **(storage_options or {}))

    def open_dataset(self, filename_or_obj, *, drop_variables=None, group=None, year=None, storage_options=None,
                     allow=None, depth=None):
        return open_zone(self._store(filename_or_obj, storage_options, allow), group, year, drop_variables or (),
                         depth)

    def open_groups_as_dict(self, filename_or_obj, *, drop_variables=None, year=None, storage_options=None,
                            allow=None, depth=None, **_decoders) -> dict[str, xr.Dataset]:
        return open_zones(self._store(filename_or_obj, storage_options, allow), year, drop_variables or (), depth)

    def open_datatree(self, filename_or_obj, *, drop_variables=None, year=None, storage_options=None, allow=None,
                      depth=None, **_decoders) -> xr.DataTree:
        return xr.DataTree.from_dict(self.open_groups_as_dict(filename_or_obj, drop_variables=drop_variables,
                                                              year=year, storage_options=storage_options, allow=allow,
                                                              depth=depth))

    def guess_can_open(self, filename_or_obj) -> bool:
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            return False
        return registers_ours(os.fspath(filename_or_obj))
