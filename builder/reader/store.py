"""open_store: one object for a tessera: v1 year store (or several: a catalog, a directory, a mapping
year -> store) or a geoemb: multi-year store, local or at any fsspec URL (http(s)://, s3://, ...).

A store's metadata and a catalog are data: JSON is read within builder/core/bounds.py's limits (cache.py
for zarr.json, `_read_json` here for a directory's stores; catalogs by builder/core/catalog.py), zone shapes are checked before
anything is allocated from them (layouts.zone_of_group), and a catalog's stores must lie on the catalog's origin
or below a prefix of `allow` (builder/virtual/contain.py).  Each refusal is a ValueError of one line
naming the store."""
from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fsspec
import jsonschema
import numpy as np
import zarr

from builder.core import convention as conv
from builder.core.bounds import COORD_VALUES_MAX, INDEX_JSON_MAX, ROOT_JSON_MAX, parse_json
from builder.core.catalog import CATALOG_JSON_MAX, parse_catalog
from builder.core.describe import GEOEMB as GEOEMB_KIND
from builder.core.describe import STACK, TESSERA, StoreError, describe
from builder.reader.cache import byte_source, is_url, reader_store
from builder.core.layout import TIME, time_index
from builder.reader.base import EmbeddingStore
from builder.reader.layouts import GEOEMB, V1, Layout, NoDataView, Zone, ZoneView, read_root, zone_of_group
from builder.reader.stack import StackStore
from builder.virtual.contain import check_catalog


def _open_root(url: str, so: dict) -> zarr.Group | None:
    """The root group (consolidated metadata when present), None when there is no zarr.json."""
    try:
        return zarr.open_group(reader_store(url, so), mode="r", zarr_format=3)
    except FileNotFoundError:  # zarr's GroupNotFoundError is one
        return None
    except zarr.errors.ContainsArrayError:
        raise ValueError(f"{url}: a Zarr array, not a store's root group") from None
    except OSError as e:
        raise ValueError(f"{url}: cannot read ({type(e).__name__}: {e})") from None


def zone_names(group: zarr.Group, url: str) -> list[str]:
    """The zone groups (utmNN) of a root group, listed or (plain HTTP cannot list) asked for one by one."""
    try:
        names = sorted(k for k in group.group_keys() if conv.parse_zone_group_name(k) is not None)
    except (OSError, NotImplementedError, ValueError):
        names = []
    if not names and is_url(url):
        # No consolidated metadata and a protocol that cannot list (plain HTTP): ask for each of the 60 zones.
        def probe(name):
            try:
                return zarr.open_group(group.store, path=name, mode="r", zarr_format=3, use_consolidated=False)
            except (FileNotFoundError, zarr.errors.ContainsArrayError):
                return None
        candidates = [conv.zone_group_name(z) for z in range(1, 61)]
        with ThreadPoolExecutor(8) as ex:
            found = list(ex.map(probe, candidates))
        names = [n for n, g in zip(candidates, found) if g is not None]
    return names


def _zones(group: zarr.Group, url: str, layout: Layout) -> dict[str, Zone]:
    zones = {}
    for name in zone_names(group, url):
        g = group[name]
        try:
            zones[name] = zone_of_group(name, dict(g.attrs), g, layout)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{url}/{name}: not a readable zone group ({type(e).__name__}: {e})") from None
    if not zones:
        raise ValueError(f"{url}: no zone group (utmNN)")
    return zones


class V1Stores(EmbeddingStore):
    """tessera: v1: one store per year, opened when first used."""

    rules = V1

    def __init__(self, url: str, sources: dict[int, str], so: dict, opened: dict | None = None):
        self.url, self._sources, self._so = url, dict(sorted(sources.items())), so
        self._open: dict[int, tuple] = dict(opened or {})

    @property
    def years(self) -> list[int]:
        return list(self._sources)

    def _store(self, year: int):
        y = self.year(year)
        if y not in self._open:
            src = self._sources[y]
            g = _open_root(src, self._so)
            if g is None:
                raise ValueError(f"{src}: no zarr.json (year {y} of {self.url})")
            info = read_root(dict(g.attrs), src)
            if info.kind != TESSERA:
                raise ValueError(f"{src}: a {info.kind} store, listed as a tessera: v1 year store in {self.url}")
            if info.year != y:
                raise ValueError(f"{src}: holds year {info.year}, listed as {y} in {self.url}")
            self._open[y] = (g, _zones(g, src, V1), byte_source(src, self._so))
        return self._open[y]

    def zones(self, year=None):
        return self._store(year)[1]

    def view(self, zone, year=None):
        g, zones, source = self._store(year)
        if zone not in zones:
            raise ValueError(f"{self.url}: no zone {zone!r} in {self.year(year)} (zones {', '.join(zones)})")
        return ZoneView(V1, g[zone], zones[zone], self.year(year), None, source)


def _time_axis(zone: zarr.Group, where: str) -> list[int]:
    """A geoemb: zone's `time` values (calendar years), its length checked against the embeddings' before it is read."""
    try:
        t = zone[TIME]
    except KeyError:
        raise ValueError(f"{where}: no {TIME} array") from None
    n = zone["embeddings"].shape[0]
    if t.ndim != 1 or t.shape[0] != n or n > COORD_VALUES_MAX:
        raise ValueError(f"{where}/{TIME}: shape {t.shape} does not match the embeddings' {n} time steps")
    return [int(v) for v in t[:]]


class GeoembStore(EmbeddingStore):
    """geoemb: one store, years on each zone's `time` axis; v2 stores add nested-depth arrays
    (`embeddings_d{D}`, ZoneView.depths)."""

    rules = GEOEMB

    @classmethod
    def claims(cls, group: zarr.Group, zone_attrs: list[dict]) -> bool:
        """Whether a store that registers geoemb: is of this kind (the most specific kind is asked first)."""
        return True

    def __init__(self, url: str, group: zarr.Group, zones: dict[str, Zone] | None = None):
        self.url, self._group = url, group
        self._zones = zones if zones is not None else _zones(group, url, GEOEMB)
        with ThreadPoolExecutor(8) as ex:  # one small read per zone, concurrently
            times = ex.map(lambda z: _time_axis(group[z], f"{url}/{z}"), self._zones)
        self._times = dict(zip(self._zones, times))

    @property
    def years(self) -> list[int]:
        return sorted(set().union(*self._times.values()))

    def zones(self, year=None):
        y = self.year(year)
        return {n: z for n, z in self._zones.items() if y in self._times[n]}

    def view(self, zone, year=None):
        y = self.year(year)
        if zone not in self._zones or y not in self._times[zone]:
            raise ValueError(f"{self.url}: no zone {zone!r} in {y} (zones {', '.join(self.zones(y))})")
        return ZoneView(GEOEMB, self._group[zone], self._zones[zone], y, time_index(self._times[zone], y))


YEARS_COMPLETE = "years_complete"
YEARS_COMPLETE_MAX = 1000  # values of one years_complete list (metadata is data: bounded before use)


def years_complete(attrs: dict, where: str) -> list[int]:
    """A zone group's `years_complete`: a list of at most YEARS_COMPLETE_MAX integer years; ValueError otherwise."""
    v = attrs[YEARS_COMPLETE]
    if not (isinstance(v, list) and len(v) <= YEARS_COMPLETE_MAX
            and all(isinstance(y, int) and not isinstance(y, bool) for y in v)):
        raise ValueError(f"{where}: {YEARS_COMPLETE} {str(v)[:80]} is not a list of at most "
                         f"{YEARS_COMPLETE_MAX} integer years")
    return sorted(v)


class DClimateStore(GeoembStore):
    """The dClimate v1.1 plain Zarr copy: the geoemb: layout with 256 x 256 x 128 inner chunks (8 MiB a pixel
    read), PCodec-encoded scales, per-pixel quality arrays, and `years_complete` on each zone group: a year on
    the time axis but not listed there reads as no data (a NoDataView)."""

    QUALITY = ("s2_obs_count", "s1_asc_obs_count", "s1_desc_obs_count", "s2_month_covered", "s1_month_covered")

    @classmethod
    def claims(cls, group, zone_attrs):
        return any(YEARS_COMPLETE in a for a in zone_attrs)

    def __init__(self, url: str, group: zarr.Group, zones: dict[str, Zone] | None = None):
        super().__init__(url, group, zones)
        self._complete = {}
        for z in self._zones:
            attrs = dict(group[z].attrs)
            if YEARS_COMPLETE not in attrs:
                raise ValueError(f"{url}/{z}: no {YEARS_COMPLETE} (every other zone of this dClimate store has one)")
            self._complete[z] = years_complete(attrs, f"{url}/{z}")

    def complete(self, zone: str) -> list[int]:
        """The years of `zone` that hold data (the rest of its time axis reads as no data)."""
        return self._complete[zone]

    def view(self, zone, year=None):
        v = super().view(zone, year)
        if v.year in self._complete[zone]:
            return v
        return NoDataView(GEOEMB, v.group, v.zone, v.year, v.t)

    def quality(self, zone: str, year: int, rows, cols) -> dict[str, np.ndarray]:
        """The per-pixel quality arrays present in `zone` at pixels (rows, cols) of `year`, by name."""
        v = super().view(zone, year)
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        t = np.full_like(rows, v.t)
        have = set(v.group.array_keys())
        return {n: np.asarray(v.group[n].vindex[t, rows, cols]) for n in self.QUALITY if n in have}


# The kinds a store registering geoemb: may be, most specific first (GeoembStore claims any).
GEOEMB_KINDS = (DClimateStore, GeoembStore)


def _geoemb_kind(url: str, g: zarr.Group) -> EmbeddingStore:
    zones = _zones(g, url, GEOEMB)
    kind = next(k for k in GEOEMB_KINDS if k.claims(g, [dict(g[n].attrs) for n in zones]))
    return kind(url, g, zones)


def _read_bytes(url: str, so: dict, limit: int) -> bytes | None:
    """At most limit + 1 bytes of a document (a catalog, or a directory's store root); None when absent."""
    try:
        with fsspec.open(url, "rb", **so) as f:
            return f.read(limit + 1)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ValueError(f"{url}: cannot read ({type(e).__name__}: {e})") from None


def _read_json(url: str, so: dict) -> dict | None:
    """A directory's store root read within builder/core/bounds.py's limits; None when absent."""
    raw = _read_bytes(url, so, ROOT_JSON_MAX)
    return None if raw is None else parse_json(raw, url, ROOT_JSON_MAX)


def _from_catalog(cat_url: str, raw: bytes, so: dict, allow) -> V1Stores:
    """The year stores a catalog lists (builder/core/catalog.py parses it): relative URLs below the catalog's
    directory, each store on the catalog's origin or below a prefix of `allow` (builder/virtual/contain.py)."""
    base = cat_url.rsplit("/", 1)[0] if "/" in cat_url else "."
    listed = parse_catalog(raw, cat_url).urls().items()
    resolved = [(y, u, u if "://" in u or u.startswith("/") else f"{base}/{u}") for y, u in listed]
    check_catalog(cat_url, resolved, allow)
    return V1Stores(cat_url, {y: url for y, _, url in resolved}, so)


def open_store(url, *, allow=None, **storage_options) -> EmbeddingStore:
    """Open a tessera: v1 year store, a directory or catalog.json of year stores, a mapping {year: store},
    or a geoemb: store.  `storage_options` go to fsspec (e.g. endpoint_url, anon for s3://).  A catalog's
    stores must lie on the catalog's own origin (its scheme://host/, or the local file system for a local
    catalog) unless below a prefix of `allow` (a URL or path, or a list of them)."""
    so = storage_options
    if isinstance(url, Mapping):
        return V1Stores(f"{{{', '.join(f'{y}: {u}' for y, u in sorted(url.items()))}}}",
                        {int(y): os.fspath(u) for y, u in url.items()}, so)
    url = os.fspath(url).rstrip("/")
    if url.endswith(".parquet"):
        return _of_root(url, _open_index(url, so, allow), so)
    if url.endswith(".json"):
        raw = _read_bytes(url, so, INDEX_JSON_MAX)
        if raw is None:
            raise ValueError(f"{url}: no such file")
        if len(raw) > CATALOG_JSON_MAX or "refs" in parse_json(raw, url, CATALOG_JSON_MAX):
            return _of_root(url, _open_index(url, so, allow), so)
        return _from_catalog(url, raw, so, allow)
    g = _open_root(url, so)
    if g is None:
        raw = _read_bytes(f"{url}/catalog.json", so, CATALOG_JSON_MAX)
        if raw is not None:
            return _from_catalog(f"{url}/catalog.json", raw, so, allow)
        local = [] if is_url(url) else sorted(Path(url.removeprefix("file://")).glob("*/zarr.json"))
        years = {}
        for meta in local:
            doc = _read_json(str(meta), {})
            try:
                info = describe(doc, str(meta.parent), jsonschema=jsonschema)
            except StoreError:  # not a store: not one of ours to list
                continue
            if info.kind == TESSERA:
                years[info.year] = str(meta.parent)
        if years:
            return V1Stores(url, years, so)
        raise ValueError(f"{url}: no zarr.json and no catalog.json (not a store, nor a directory of year stores)")
    return _of_root(url, g, so)


def _of_root(url: str, g: zarr.Group, so: dict) -> EmbeddingStore:
    """The kind of store a root group is, by the conventions it registers (builder/core/describe.py)."""
    info = read_root(dict(g.attrs), url)
    if info.kind == GEOEMB_KIND:
        return _geoemb_kind(url, g)
    if info.kind == STACK:
        return StackStore(url, g, info.years)
    year = info.year
    return V1Stores(url, {year: url}, so, {year: (g, _zones(g, url, V1), byte_source(url, so))})


def _open_index(url: str, so: dict, allow) -> zarr.Group:
    """A multi-year index (Kerchunk JSON or Parquet references, builder/virtual/), its references resolved
    against, and kept below, its own directory (or a prefix of `allow`)."""
    from builder.virtual.reader import open_index
    base = url.rsplit("/", 1)[0] + "/" if "/" in url else "./"
    try:
        return open_index(url, base=base, remote_options=so, allow=allow)
    except OSError as e:
        raise ValueError(f"{url}: cannot read the index ({type(e).__name__}: {e})") from None
