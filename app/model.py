"""The explorer's logic, free of any UI: open a store, find pixels, read and compare embeddings.

Runs unchanged in Pyodide (with JSSource) and on CPython (with ZarrSource).
"""
from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

import numpy as np

from app import geo
from app.reader import Source, SourceError
from builder import convention as conv
from builder.grid import ZoneGrid

MAX_REGION = 768  # pixels per side of a tool region (app/tools/region.py) (4x4 shards at most: an unaligned window of 3 shard widths)


@dataclass(frozen=True)
class Zone:
    """A zone group as the browser sees it: its grid (the builder's ZoneGrid) plus what the UI needs."""

    name: str
    grid: ZoneGrid
    n_bands: int
    has_rgb: bool
    lonlat: tuple[float, float, float, float]  # west, south, east, north
    model_version: str = ""
    build_version: str = ""

    zone = property(lambda self: self.grid.zone)
    south = property(lambda self: self.grid.south)
    origin_e = property(lambda self: self.grid.origin_e)
    origin_n = property(lambda self: self.grid.origin_n)
    height = property(lambda self: self.grid.height)
    width = property(lambda self: self.grid.width)
    shard = property(lambda self: self.grid.shard)

    def to_rowcol(self, lon, lat):
        e, n = geo.lonlat_to_utm(lon, lat, self.zone, self.south)
        col = np.floor((e - self.origin_e) / conv.PIXEL_SIZE).astype(np.int64)
        row = np.floor((self.origin_n - n) / conv.PIXEL_SIZE).astype(np.int64)
        return row, col

    def contains(self, row, col):
        return (row >= 0) & (row < self.height) & (col >= 0) & (col < self.width)

    def centre_lonlat(self, row: int, col: int) -> tuple[float, float]:
        e = self.origin_e + (col + 0.5) * conv.PIXEL_SIZE
        n = self.origin_n - (row + 0.5) * conv.PIXEL_SIZE
        lon, lat = geo.utm_to_lonlat(e, n, self.zone, self.south)
        return float(lon), float(lat)

    def utm(self, row: int, col: int) -> tuple[float, float]:
        return self.origin_e + (col + 0.5) * conv.PIXEL_SIZE, self.origin_n - (row + 0.5) * conv.PIXEL_SIZE


@dataclass(frozen=True)
class Level:
    index: int
    res: float
    height: int
    width: int
    chunk: int


@dataclass
class Pixel:
    zone: str
    row: int
    col: int
    lon: float
    lat: float
    easting: float
    northing: float
    scale: float
    vector: np.ndarray | None  # float32 (B,), None where there is no data

    @property
    def valid(self) -> bool:
        return self.vector is not None

    def label(self) -> str:
        return f"{self.zone} r{self.row} c{self.col}"


def _zone_from_meta(name: str, attrs: dict, arrays: dict) -> Zone:
    zone, south = conv.parse_proj_code(attrs["proj:code"])
    t = attrs["spatial:transform"]
    h, w = attrs["spatial:shape"]
    emb = arrays.get("embeddings", {})
    shard = emb.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape", [conv.SHARD])[0]
    bbox = attrs.get("spatial:bbox") or [t[2], t[5] - h * conv.PIXEL_SIZE, t[2] + w * conv.PIXEL_SIZE, t[5]]
    grid = ZoneGrid(zone, south, float(t[2]), float(t[5]), int(h), int(w), int(shard))
    return Zone(name, grid, int(attrs["tessera:n_bands"]), bool(attrs.get("tessera:has_rgb_preview", False)),
                geo.utm_bbox_lonlat(bbox, zone, south), str(attrs.get("tessera:model_version", "")),
                str(attrs.get("tessera:build_version", "")))


class StoreModel:
    def __init__(self, source: Source):
        self.source = source
        self.root: dict = {}
        self.zones: dict[str, Zone] = {}
        self.levels: list[Level] = []
        self.year: int | None = None
        self.years: list[int] | None = None  # a multi-year virtual index (builder.virtual)
        self._chunks: dict = {}
        self._previews: dict = {}

    async def open(self) -> "StoreModel":
        doc = await self.source.meta()
        if not isinstance(doc, dict):
            raise SourceError("invalid", "not a tessera store: its root zarr.json is not a JSON object")
        try:
            return self._read_root(doc)
        except SourceError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            # Metadata that passes the root checks but not the zone/level parsing: one line, no traceback.
            what = f"missing {e}" if isinstance(e, KeyError) else str(e)
            raise SourceError("invalid", f"not a tessera store: {what}") from None

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
            raise SourceError("invalid", "not a tessera store: " + "; ".join(problems))
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
                self.zones[key] = _zone_from_meta(key, meta.get("attributes", {}), arrays)
        g = cons.get(conv.GLOBAL_GROUP)
        if g:
            for item in g.get("attributes", {}).get("multiscales", {}).get("layout", []):
                arr = cons.get(f"{conv.GLOBAL_GROUP}/{item['asset']}/rgb")
                if arr is None:
                    continue
                chunk = arr["chunk_grid"]["configuration"]["chunk_shape"][0]
                h, w = item["spatial:shape"]
                self.levels.append(Level(int(item["asset"]), float(item["spatial:transform"][0]), h, w, chunk))
        if not self.zones:
            raise SourceError("invalid", "not a tessera store: no zone group (utmNN)")
        return self

    # ------------------------------------------------------------ pixels --
    def locate(self, lon: float, lat: float) -> tuple[Zone, int, int] | None:
        """The zone pixel under lon/lat; where zones overlap, the zone whose central meridian is nearest."""
        cands = sorted(self.zones.values(), key=lambda z: abs(lon - geo.central_meridian(z.zone)))
        for z in cands:
            w, s, e, n = z.lonlat
            if not (w - 0.01 <= lon <= e + 0.01 and s - 0.01 <= lat <= n + 0.01):
                continue
            r, c = z.to_rowcol(lon, lat)
            if z.contains(r, c):
                return z, int(r), int(c)
        return None

    async def pixel(self, zone: Zone, row: int, col: int) -> Pixel:
        e, s = await asyncio.gather(
            self.source.read(f"{zone.name}/embeddings", [(row, row + 1), (col, col + 1), None]),
            self.source.read(f"{zone.name}/scales", [(row, row + 1), (col, col + 1)]))
        scale = float(s.reshape(-1)[0])
        vec = None if math.isnan(scale) else conv.dequantise(e.reshape(-1).astype(np.int8), np.float32(scale))
        lon, lat = zone.centre_lonlat(row, col)
        east, north = zone.utm(row, col)
        return Pixel(zone.name, row, col, lon, lat, east, north, scale, vec)

    async def pixel_at(self, lon: float, lat: float) -> Pixel | None:
        hit = self.locate(lon, lat)
        return None if hit is None else await self.pixel(*hit)

    async def pixel_years(self, lon: float, lat: float) -> tuple[Zone, int, int, list[np.ndarray | None]] | None:
        """One pixel's dequantised vector in every year of a multi-year index (None where no data)."""
        hit = self.locate(lon, lat)
        if hit is None or self.years is None:
            return None
        zone, row, col = hit
        n = len(self.years)
        e, s = await asyncio.gather(
            self.source.read(f"{zone.name}/embeddings", [(0, n), (row, row + 1), (col, col + 1), None]),
            self.source.read(f"{zone.name}/scales", [(0, n), (row, row + 1), (col, col + 1)]))
        e = e.reshape(n, -1).astype(np.int8)
        s = s.reshape(n)
        vecs = [None if math.isnan(float(s[i])) else conv.dequantise(e[i], np.float32(s[i])) for i in range(n)]
        return zone, row, col, vecs

    # ------------------------------------------------------------ previews --
    async def level_chunk(self, level: Level, ci: int, cj: int) -> np.ndarray:
        """Chunk (ci, cj) of a global_rgb level, padded to the full chunk size (cached)."""
        key = (level.index, ci, cj)
        if key not in self._chunks:
            c = level.chunk
            data = await self.source.read(f"{conv.GLOBAL_GROUP}/{level.index}/rgb",
                                          [(ci * c, min((ci + 1) * c, level.height)),
                                           (cj * c, min((cj + 1) * c, level.width)), None], whole=True)
            if data.shape[0] < c or data.shape[1] < c:
                pad = np.zeros((c, c, 4), np.uint8)
                pad[: data.shape[0], : data.shape[1]] = data
                data = pad
            self._chunks[key] = data
        return self._chunks[key]

    async def preview(self, zone: Zone, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """A window of a zone's rgb preview (the last window read is kept: pans re-read the same one)."""
        key = (zone.name, r0, r1, c0, c1)
        if key not in self._previews:
            self._previews = {key: await self.region(zone, "rgb", r0, r1, c0, c1)}
        return self._previews[key]

    # ------------------------------------------------------------ regions --
    async def region(self, zone: Zone, array: str, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        tail = [None] if array in ("embeddings", "rgb") else []
        return await self.source.read(f"{zone.name}/{array}", [(r0, r1), (c0, c1), *tail], whole=True)


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
