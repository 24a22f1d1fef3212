"""Read TESSERA stores from a notebook: in the site's JupyterLite kernel (lab/) or in CPython, the same code.

    from app.notebook import open_store, site
    s = await open_store(site("data/2024.zarr"))        # a v1 year store, a multi-year index or a geoemb: store
    vector, status = await s.probe(-0.05, 50.85)       # float32 (B,) and "valid", or None and "water" | "nodata" | "outside"
    vectors = await s.probe_points([(lon, lat), ...])  # float32 (N, B), NaN rows where there is no data
    r = await s.read_region((w, s_, e, n))              # Region: vectors (h, w, B) float32 (NaN: no data), zone, window
    s, v = await open_view("#store=data/2024.zarr&year=2024&lon=-0.05&lat=50.85&span=2000")  # an explorer link's view

It is the explorer's own data layer (builder/core/reader.py StoreModel) over a Source: in the kernel (Pyodide) the
explorer's data path (the site's vendor/tessera.mjs, loaded into the kernel's worker), which reads the stores by
HTTP range requests from the site's origin with the browser's fetch and verifies every chunk's crc32c: no
zarr-python, no numcodecs, no threads.  In CPython, zarr-python (builder/reader/source.py ZarrSource) reads the
same store, which is how a notebook's values are checked against CPython's.  Calls are coroutines: a notebook
cell awaits them at top level.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

import jsonschema

from app.reader import JSSource
from builder.core import convention as conv
from builder.core.reader import StoreModel
from builder.core.source import Source
from builder.core.zone import Zone

IN_BROWSER = sys.platform == "emscripten"
SITE_ENV = "TESSERA_SITE"  # CPython: the site's root (a directory or URL); default "static/"


def site(path: str = "") -> str:
    """The URL of `path` on the site this notebook is served from (in the kernel: the lab's site, whatever its
    host and path), or under $TESSERA_SITE in CPython."""
    if IN_BROWSER:
        import js
        here = str(js.location.href)
        root = here.rsplit("/lab/", 1)[0] + "/" if "/lab/" in here else here.rsplit("/", 1)[0] + "/"
    else:
        root = os.environ.get(SITE_ENV, "static").rstrip("/") + "/"
    return root + path.lstrip("/")


async def _bridge() -> None:
    """The explorer's data path as `self.tesseraJS` in the kernel's worker (app/reader.py JSSource calls it)."""
    import js
    if getattr(js, "tesseraJS", None) is None:
        from pyodide.code import run_js
        js.tesseraJS = await run_js(f"import({site('vendor/tessera.mjs')!r})")


async def source(url: str) -> Source:
    """The Source of a store URL: the explorer's data path in the browser, zarr-python in CPython."""
    if IN_BROWSER:
        await _bridge()
        return JSSource(url)
    from builder.reader.source import ZarrSource  # CPython only (tests/test_contract.py CPYTHON_ONLY)
    return ZarrSource(url)


@dataclass
class Region:
    """A window of one zone: `vectors` (h, w, B) float32 dequantised, NaN where there is no data; `zone` its
    zone; `window` (r0, r1, c0, c1) its rows and columns in the zone's 10 m grid."""
    vectors: np.ndarray
    zone: Zone
    window: tuple[int, int, int, int]

    @property
    def valid(self) -> np.ndarray:
        """(h, w) True where there is data."""
        return ~np.isnan(self.vectors[..., 0])

    def lonlat(self) -> tuple[np.ndarray, np.ndarray]:
        """(h, w) longitudes and latitudes of the pixels' centres."""
        from app import geo
        r0, r1, c0, c1 = self.window
        e, n = self.zone.grid.centre(*np.mgrid[r0:r1, c0:c1])
        return geo.utm_to_lonlat(e, n, self.zone.zone, self.zone.south)


class Store:
    """An open store (a year of it): see the module's docstring."""

    def __init__(self, model: StoreModel):
        self.model = model

    @property
    def year(self) -> int | None:
        return self.model.year

    @property
    def years(self) -> list[int] | None:
        return self.model.years

    @property
    def zones(self) -> dict[str, Zone]:
        return self.model.zones

    async def probe(self, lon: float, lat: float) -> tuple[np.ndarray | None, str]:
        """The dequantised vector at lon/lat and its status (valid, water, nodata, or outside every zone)."""
        px = await self.model.pixel_at(float(lon), float(lat))
        if px is None:
            return None, "outside"
        return px.vector, px.status

    async def probe_points(self, points) -> np.ndarray:
        """(N, B) float32 vectors at the (lon, lat) points, NaN rows where there is none."""
        bands = next(iter(self.zones.values())).n_bands
        out = np.full((len(points), bands), np.nan, np.float32)
        for i, (lon, lat) in enumerate(points):
            v, _ = await self.probe(lon, lat)
            if v is not None:
                out[i] = v
        return out

    async def read_region(self, box: tuple[float, float, float, float], max_side: int = 2048) -> Region:
        """The pixels of the zone holding the box's centre inside the lon/lat box (west, south, east, north),
        dequantised; at most `max_side` pixels per side (a larger box is refused: ValueError)."""
        w, s, e, n = (float(x) for x in box)
        hit = self.model.locate((w + e) / 2, (s + n) / 2)
        if hit is None:
            raise ValueError(f"no zone of this store holds the box's centre {((w + e) / 2, (s + n) / 2)}")
        zone = hit[0]
        rows, cols = zone.to_rowcol(np.array([w, e, w, e]), np.array([s, s, n, n]))
        r0, r1 = max(0, int(np.floor(np.min(rows)))), min(zone.height, int(np.floor(np.max(rows))) + 1)
        c0, c1 = max(0, int(np.floor(np.min(cols)))), min(zone.width, int(np.floor(np.max(cols))) + 1)
        if r1 - r0 > max_side or c1 - c0 > max_side:
            raise ValueError(f"the box is {r1 - r0} x {c1 - c0} pixels of {zone.name}, more than {max_side} per side")
        q = await self.model.region(zone, "embeddings", r0, r1, c0, c1)
        scales = await self.model.region(zone, "scales", r0, r1, c0, c1)
        ok = ~np.isnan(scales)
        vectors = np.full(q.shape, np.nan, np.float32)
        vectors[ok] = conv.dequantise(q[ok], scales[ok])
        return Region(vectors, zone, (r0, r1, c0, c1))


async def open_store(url: str, year: int | None = None) -> Store:
    """Open a store by URL (in CPython also a local path): a v1 year store, a multi-year index or a geoemb: store
    (`year`: the year of its time axis to read; the last by default)."""
    return Store(await StoreModel(await source(url), jsonschema=jsonschema).open(year))


# A view's first read is at most this wide (metres): 256 x 256 pixels, 33 MB as float32, whatever the explorer showed.
VIEW_SIDE_MAX = 2560.0
METRES_PER_DEGREE = 111_320.0  # of latitude, and of longitude at the equator (a sphere: only sizes the box)


@dataclass
class View:
    """A view of the explorer, from its link (the hash app/state.py UrlState writes): the store's URL, the year,
    `box` (west, south, east, north) a square around the view's centre as wide as the view and at most
    VIEW_SIDE_MAX metres, the selected pixel and the pins as (lon, lat)."""
    store: str
    year: int | None
    box: tuple[float, float, float, float]
    selected: tuple[float, float] | None = None
    pins: list[tuple[float, float]] = field(default_factory=list)


def view(link: str) -> View:
    """The View an explorer link holds (its hash, with or without '#'); ValueError naming what is missing or bad."""
    from app.state import UrlState
    u = UrlState.from_url("", "#" + str(link).split("#", 1)[-1])
    if u.problems:
        raise ValueError("the link's " + "; ".join(u.problems))
    if not u.store:
        raise ValueError("the link names no store (store=URL)")
    if u.lon is None or u.lat is None or not -90 < u.lat < 90:
        raise ValueError("the link names no view centre (lon=, lat=)")
    half = min(u.span or VIEW_SIDE_MAX, VIEW_SIDE_MAX) / 2
    dlat = half / METRES_PER_DEGREE
    dlon = dlat / math.cos(math.radians(u.lat))
    box = (u.lon - dlon, u.lat - dlat, u.lon + dlon, u.lat + dlat)
    store = u.store if "://" in u.store else site(u.store)
    return View(store, u.year, box, u.sel, list(u.pins))


async def open_view(link: str) -> tuple[Store, View]:
    """The store of an explorer link, opened at its year, and the link's View."""
    v = view(link)
    return await open_store(v.store, v.year), v
