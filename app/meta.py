"""What the explorer reads from a store's metadata: zones (grids) and the pixels it shows (the global_rgb
levels are builder/core/describe.py's Level)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from app import geo
from builder.core import convention as conv
from builder.core import layout as lay
from builder.core.grid import ZoneGrid


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
    times: tuple[int, ...] = field(default=())  # geoemb: the years on this zone's time axis
    levels: tuple[ZoneGrid, ...] = field(default=(), repr=False)  # tessera-ovr: grid of level k at [k] (k = 0..)
    level: int = 0  # the overview level whose grid `grid` is (at_level)
    code_dims: int = 0  # tessera-ovr: the compact code's dimensions (0: no overviews)

    zone = property(lambda self: self.grid.zone)
    south = property(lambda self: self.grid.south)
    origin_e = property(lambda self: self.grid.origin_e)
    origin_n = property(lambda self: self.grid.origin_n)
    height = property(lambda self: self.grid.height)
    width = property(lambda self: self.grid.width)
    shard = property(lambda self: self.grid.shard)

    @property
    def pixel(self) -> float:
        return self.grid.pixel

    def at_level(self, k: int) -> "Zone":
        """The same zone on the grid of its overview level k (rows, cols, centres and exports in level pixels)."""
        return replace(self, grid=self.levels[k], level=k)

    def to_rowcol(self, lon, lat):
        return self.grid.rowcol(*geo.lonlat_to_utm(lon, lat, self.zone, self.south))

    def contains(self, row, col):
        return self.grid.contains(row, col)

    def centre_lonlat(self, row: int, col: int) -> tuple[float, float]:
        lon, lat = geo.utm_to_lonlat(*self.grid.centre(row, col), self.zone, self.south)
        return float(lon), float(lat)

    def utm(self, row: int, col: int) -> tuple[float, float]:
        e, n = self.grid.centre(row, col)
        return float(e), float(n)


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
    status: str = lay.VALID  # builder.core.layout: valid, or water / nodata (geoemb: NaN water, +inf no data)

    @property
    def valid(self) -> bool:
        return self.vector is not None

    def label(self) -> str:
        return f"{self.zone} r{self.row} c{self.col}"


def zone_from_meta(name: str, attrs: dict, arrays: dict, overviews: tuple = ()) -> Zone:
    """A zone from its group attributes and arrays; `overviews`: describe's tessera-ovr:levels items (their grids
    are kept when they run 0, 1, .. without a gap)."""
    zone, south = conv.parse_proj_code(attrs["proj:code"])
    t = attrs["spatial:transform"]
    h, w = attrs["spatial:shape"]
    emb = arrays.get("embeddings", {})
    shard = emb.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape", [conv.SHARD])[0]
    grid = ZoneGrid(zone, south, float(t[2]), float(t[5]), int(h), int(w), int(shard))
    bbox = attrs.get("spatial:bbox") or grid.box()
    levels = tuple(ZoneGrid.from_level_attrs(grid, it) for it in overviews)
    if [it["level"] for it in overviews] != list(range(len(overviews))):
        levels = ()
    return Zone(name, grid, int(attrs["tessera:n_bands"]), bool(attrs.get("tessera:has_rgb_preview", False)),
                geo.utm_bbox_lonlat(bbox, zone, south), str(attrs.get("tessera:model_version", "")),
                str(attrs.get("tessera:build_version", "")), levels=levels,
                code_dims=int((attrs.get("tessera-ovr:code") or {}).get("dims", 0)) if levels else 0)
