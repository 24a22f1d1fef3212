"""The explorer's logic, free of any UI: open a store, find pixels, read and compare embeddings.

Runs unchanged in Pyodide (with JSSource) and on CPython (with ZarrSource).
"""
from __future__ import annotations

import asyncio
import copy

import numpy as np

from app import geo, render
from app.meta import Level, Pixel, Zone, levels, zone_from_meta
from app.reader import PIXEL, REGION, Source, SourceError, as_slices
from builder import convention as conv
from builder import layout as lay

__all__ = ["StoreModel", "Zone", "Level", "Pixel", "cosine_map", "cosine_table", "levels"]

COLUMNS = 256  # geoemb: pixels kept at every year (StoreModel._column)
MAX_REGION = 768  # pixels per side of a tool region (app/tools/region.py) (4x4 shards at most: an unaligned window of 3 shard widths)


class StoreModel:
    """A store as the explorer reads it: a tessera: v1 year store, a multi-year index (tessera-stack:) or a
    geoemb: store (years on a time axis: `at_year` gives the same store at another year, no second open).

    The data-layer API the views and tools use, whatever the layout: `zones`, `locate`, `pixel`, `pixel_at`,
    `pixel_years`, `region` (embeddings (h, w, B) int8, scales (h, w) float32 with NaN wherever there is no
    data), `similarity`."""

    def __init__(self, source: Source):
        self.source = source
        self.layout: lay.Layout = lay.V1
        self.root: dict = {}
        self.zones: dict[str, Zone] = {}
        self.all_zones: dict[str, Zone] = {}  # geoemb: zones of every year (`zones`: those with the year shown)
        self.levels: list[Level] = []
        self.year: int | None = None
        self.years: list[int] | None = None  # a multi-year index (builder.virtual) or a geoemb: store's years
        self.preview_array: str | None = None  # geoemb: the array the false-colour preview is read from
        self._chunks: dict = {}
        self._previews: dict = {}
        self._columns: dict = {}

    async def open(self, year: int | None = None) -> "StoreModel":
        """Read the root (and, for geoemb:, each zone's time axis); `year`: the geoemb: year to show first."""
        doc = await self.source.meta()
        if not isinstance(doc, dict):
            raise SourceError("invalid", "not a tessera store: its root zarr.json is not a JSON object")
        try:
            if lay.root_kind(doc.get("attributes")) == "geoemb:":
                from app.geoemb import read_geoemb  # here: app.geoemb builds on this module
                await read_geoemb(self, doc)
                return self.at_year(year if year in self.years else self.years[-1])
            return self._read_root(doc)
        except SourceError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            # Metadata that passes the root checks but not the zone/level parsing: one line, no traceback.
            what = f"missing {e}" if isinstance(e, KeyError) else str(e)
            raise SourceError("invalid", f"not a tessera store: {what}") from None

    def at_year(self, year: int) -> "StoreModel":
        """The same geoemb: store (same source, metadata and caches) showing another year of its time axis."""
        m = copy.copy(self)
        m.year = int(year)
        m.zones = {n: z for n, z in self.all_zones.items() if m.year in z.times}
        m._previews = {}
        return m

    def _read_root(self, doc: dict) -> "StoreModel":
        attrs = doc.get("attributes", {})
        multi = not conv.registered(attrs, conv.STACK_ROOT_CONVENTIONS)  # a multi-year index (tessera-stack:)
        schema = conv.STACK_ROOT_SCHEMA if multi else conv.ROOT_SCHEMA
        problems = conv.quick_check(attrs, schema, "store root")
        if problems:
            version = attrs.get("tessera:dataset_version")
            if version is not None and version != conv.DATASET_VERSION:
                raise SourceError("version", f"this store has tessera:dataset_version={version!r}; the explorer "
                                             f"reads {conv.DATASET_VERSION!r} stores only")
            known = lay.root_kind(attrs) is not None
            raise SourceError("invalid", "not a tessera store: " + "; ".join(problems) + ("" if known else
                                                                                          "; " + lay.neither(attrs)))
        self.root = attrs
        if multi:
            self.years = list(attrs[conv.STACK_YEARS])
        else:
            self.year = attrs["tessera:year"]
        cons = (doc.get("consolidated_metadata") or {}).get("metadata") or {}
        if not cons:
            raise SourceError("invalid", "not a tessera store: no consolidated metadata in its root zarr.json "
                                         "(rebuild or re-consolidate it with zarr.consolidate_metadata)")
        for key, meta in cons.items():
            if "/" not in key and conv.parse_zone_group_name(key) is not None and meta.get("node_type") == "group":
                arrays = {k.split("/", 1)[1]: v for k, v in cons.items() if k.startswith(key + "/")}
                self.zones[key] = zone_from_meta(key, meta.get("attributes", {}), arrays)
        self.all_zones = self.zones
        self.levels = levels(cons)
        if not self.zones:
            raise SourceError("invalid", "not a tessera store: no zone group (utmNN)")
        return self

    # ------------------------------------------------------------ pixels --
    def locate(self, lon: float, lat: float, zones: dict[str, Zone] | None = None) -> tuple[Zone, int, int] | None:
        """The zone pixel under lon/lat; where zones overlap, the zone whose central meridian is nearest."""
        cands = sorted((zones or self.zones).values(), key=lambda z: abs(lon - geo.central_meridian(z.zone)))
        for z in cands:
            w, s, e, n = z.lonlat
            if not (w - 0.01 <= lon <= e + 0.01 and s - 0.01 <= lat <= n + 0.01):
                continue
            r, c = z.to_rowcol(lon, lat)
            if z.contains(r, c):
                return z, int(r), int(c)
        return None

    def _t(self, zone: Zone) -> tuple[int, int] | None:
        """The time index of the year shown, as a selection (geoemb:); None for a year store."""
        if not self.layout.time_axis:
            return None
        t = lay.time_index(zone.times, self.year)
        return (t, t + 1)

    async def _box(self, zone: Zone, rows, cols, t, array: str = "embeddings", bands=None, hint: str = PIXEL):
        """(int8 (T?, h, w, B), float32 (T?, h, w)) of a box, whatever the layout's axis order."""
        esel, ssel = (as_slices(b) for b in self.layout.pixel_sel(rows, cols, t, bands))
        e, s = await asyncio.gather(self.source.read(f"{zone.name}/{array}", esel, hint),
                                    self.source.read(f"{zone.name}/scales", ssel, hint))
        return self.layout.to_yxb(e), s

    async def _column(self, zone: Zone, row: int, col: int) -> tuple[np.ndarray, np.ndarray]:
        """geoemb: a pixel at every time index of its zone: (int8 (T, B), float32 (T,)), one inner chunk per time
        index and array.  Kept (the last COLUMNS pixels, shared by every year of the store), so the years plot,
        a year switch and pins re-read nothing."""
        key = (zone.name, row, col)
        if key not in self._columns:
            e, s = await self._box(zone, (row, row + 1), (col, col + 1), (0, len(zone.times)))
            while len(self._columns) >= COLUMNS:
                self._columns.pop(next(iter(self._columns)))
            self._columns[key] = (e.reshape(len(zone.times), -1).astype(np.int8), s.reshape(len(zone.times)))
        return self._columns[key]

    async def pixel(self, zone: Zone, row: int, col: int) -> Pixel:
        if self.layout.time_axis:
            e, s = await self._column(zone, row, col)
            t = lay.time_index(zone.times, self.year)
            e, s = e[t], s[t]
        else:
            e, s = await self._box(zone, (row, row + 1), (col, col + 1), None)
        scale = float(s.reshape(-1)[0])
        status = str(self.layout.classify(np.array([scale], np.float32))[0])
        vec = None if status != lay.VALID else conv.dequantise(e.reshape(-1).astype(np.int8), np.float32(scale))
        lon, lat = zone.centre_lonlat(row, col)
        east, north = zone.utm(row, col)
        return Pixel(zone.name, row, col, lon, lat, east, north, scale, vec, status)

    async def pixel_at(self, lon: float, lat: float) -> Pixel | None:
        hit = self.locate(lon, lat)
        return None if hit is None else await self.pixel(*hit)

    async def pixel_years(self, lon: float, lat: float) -> tuple[Zone, int, int, list[np.ndarray | None]] | None:
        """One pixel's dequantised vector in every year of `years` (None where no data), read from a multi-year
        index or a geoemb: store's time axis."""
        hit = self.locate(lon, lat, self.all_zones)
        if hit is None or self.years is None:
            return None
        zone, row, col = hit
        if self.layout.time_axis:
            e, s = await self._column(zone, row, col)
            at = {y: i for i, y in enumerate(zone.times)}
        else:  # a multi-year index: (year, H, W, B)
            n = len(self.years)
            e, s = await asyncio.gather(
                self.source.read(f"{zone.name}/embeddings", (slice(0, n), slice(row, row + 1), slice(col, col + 1),
                                                             slice(None)), PIXEL),
                self.source.read(f"{zone.name}/scales", (slice(0, n), slice(row, row + 1), slice(col, col + 1)), PIXEL))
            at = {y: i for i, y in enumerate(self.years)}
        e = e.reshape(len(at), -1).astype(np.int8)
        s = s.reshape(len(at))
        ok = self.layout.valid(s)
        vecs = [conv.dequantise(e[at[y]], s[at[y]]) if y in at and ok[at[y]] else None for y in self.years]
        return zone, row, col, vecs

    # ------------------------------------------------------------ previews --
    async def level_chunk(self, level: Level, ci: int, cj: int) -> np.ndarray:
        """Chunk (ci, cj) of a global_rgb level, padded to the full chunk size (cached)."""
        key = (level.index, ci, cj)
        if key not in self._chunks:
            c = level.chunk
            data = await self.source.read(f"{conv.GLOBAL_GROUP}/{level.index}/rgb",
                                          (slice(ci * c, min((ci + 1) * c, level.height)),
                                           slice(cj * c, min((cj + 1) * c, level.width)), slice(None)), REGION)
            if data.shape[0] < c or data.shape[1] < c:
                pad = np.zeros((c, c, 4), np.uint8)
                pad[: data.shape[0], : data.shape[1]] = data
                data = pad
            self._chunks[key] = data
        return self._chunks[key]

    def has_preview(self, zone: Zone) -> bool:
        return zone.has_rgb or self.preview_array is not None

    async def preview(self, zone: Zone, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """RGBA window of a zone's preview: its rgb array (v1), or false colour from the first three embedding
        dimensions (geoemb:, app/render.py false_colour).  The last window read is kept: pans re-read it."""
        key = (zone.name, r0, r1, c0, c1)
        if key not in self._previews:
            if zone.has_rgb:
                rgba = await self.region(zone, "rgb", r0, r1, c0, c1)
            else:
                q, s = await self._box(zone, (r0, r1), (c0, c1), self._t(zone), self.preview_array, (0, 3),
                                       hint=self._region_hint())
                rgba = render.false_colour(q.reshape(r1 - r0, c1 - c0, 3), self.layout.valid(s.reshape(r1 - r0, c1 - c0)))
            self._previews = {key: rgba}
        return self._previews[key]

    # ------------------------------------------------------------ regions --
    def _region_hint(self) -> str:
        """Whole shards for a region where the layout's shards hold whole windows (v1), else inner chunks."""
        return REGION if self.layout.whole_shard_regions else PIXEL

    async def region(self, zone: Zone, array: str, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """A window of a zone array in (h, w[, B]) order: embeddings int8, rgb uint8 (v1 only), scales float32 with
        NaN wherever there is no data (geoemb: +inf too), whatever the layout."""
        hint = self._region_hint()
        if array == "rgb":
            return await self.source.read(f"{zone.name}/rgb", (slice(r0, r1), slice(c0, c1), slice(None)), hint)
        esel, ssel = (as_slices(b) for b in self.layout.pixel_sel((r0, r1), (c0, c1), self._t(zone)))
        if array == "scales":
            s = await self.source.read(f"{zone.name}/scales", ssel, hint)
            return self.layout.nan_nodata(s.reshape(r1 - r0, c1 - c0))
        e = self.layout.to_yxb(await self.source.read(f"{zone.name}/{array}", esel, hint))
        return e.reshape(r1 - r0, c1 - c0, -1)


def cosine_map(vectors: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Cosine similarity of every (H, W, B) vector with `target` (B,); NaN where a vector is NaN or zero."""
    t = np.asarray(target, dtype=np.float32)
    tn = np.linalg.norm(t)
    norms = np.linalg.norm(vectors, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sim = (vectors @ t) / (norms * tn)
    sim[~np.isfinite(sim)] = np.nan
    return sim.astype(np.float32)


def cosine_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of a[..., :] with b[..., :] pixel by pixel; NaN where either is NaN or zero."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = (a64 * b64).sum(-1) / (np.linalg.norm(a64, axis=-1) * np.linalg.norm(b64, axis=-1))
    c[~np.isfinite(c)] = np.nan
    return c.astype(np.float32)


def cosine_table(vectors: list[np.ndarray]) -> np.ndarray:
    m = np.stack([np.asarray(v, dtype=np.float64) for v in vectors])
    n = np.linalg.norm(m, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (m @ m.T) / np.outer(n, n)
