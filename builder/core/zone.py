"""One zone of a store (pure core: stdlib + numpy): the description every reader, the explorer and the builder share.

A `Zone` is a zone group's grid (`ZoneGrid`, in the zone's own UTM CRS), where it lies in lon/lat and what its
embeddings hold; the explorer adds its years (geoemb: time axes) and its overview grids (tessera-ovr:).  Points
go through builder/core/utm.py, so the browser, which has no pyproj, locates them the same way as Python.

    zone = Zone.of_attrs("utm30", attrs, layout, shard_shape, n_bands)
    rows, cols = zone.to_rowcol(lon, lat)
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from builder.core import convention as conv
from builder.core.grid import ZoneGrid
from builder.core.utm import lonlat_to_utm, utm_bbox_lonlat, utm_to_lonlat


@dataclass(frozen=True)
class Zone:
    name: str
    grid: ZoneGrid
    lonlat: tuple[float, float, float, float]  # west, south, east, north of the grid
    n_bands: int = 0
    chunk: int = 0  # the embeddings' inner chunk edge in pixels (0: not read)
    has_rgb: bool = False
    model_version: str = ""
    build_version: str = ""
    times: tuple[int, ...] = ()  # geoemb: the years on this zone's time axis
    levels: tuple[ZoneGrid, ...] = field(default=(), repr=False)  # tessera-ovr: grid of level k at [k] (k = 0..)
    level: int = 0  # the overview level whose grid `grid` is (at_level)
    code_dims: int = 0  # tessera-ovr: the compact code's dimensions (0: no overviews)
    code_method: str = ""  # tessera-ovr: the compact code's method (builder/core/codes.py; "": PCA's)
    # geoemb: (D, array name) of its nested-depth arrays (first D bands; builder/core/layout.py nested_depths)
    depths: tuple[tuple[int, str], ...] = ()

    zone = property(lambda self: self.grid.zone)
    south = property(lambda self: self.grid.south)
    origin_e = property(lambda self: self.grid.origin_e)
    origin_n = property(lambda self: self.grid.origin_n)
    height = property(lambda self: self.grid.height)
    width = property(lambda self: self.grid.width)
    shard = property(lambda self: self.grid.shard)
    pixel = property(lambda self: self.grid.pixel)

    @classmethod
    def of_attrs(cls, name: str, attrs: dict, layout, shard_shape, n_bands: int, **more) -> "Zone":
        """A zone group's zone from its proj:/spatial: attributes (by `layout`'s rule, which checks them: ValueError,
        one line) and its embeddings' shard shape; `more`: the other fields."""
        grid = layout.zone_grid(attrs, shard_shape, name)
        return cls(name, grid, utm_bbox_lonlat(grid.box(), grid.zone, grid.south), int(n_bands), **more)

    @property
    def crs(self) -> str:
        return conv.proj_code(self.zone, self.south)

    @property
    def epsg(self) -> int:
        return conv.epsg_for_zone(self.zone, self.south)

    @property
    def transform(self) -> list[float]:
        return self.grid.attrs()["spatial:transform"]

    @property
    def code_kind(self):
        """The class of the zone's compact code (builder/core/codes.py)."""
        from builder.core import codes
        return codes.kind(self.code_method)

    def at_level(self, k: int) -> "Zone":
        """The same zone on the grid of its overview level k (rows, cols, centres and exports in level pixels)."""
        return replace(self, grid=self.levels[k], level=k)

    def rowcol(self, e, n) -> tuple[np.ndarray, np.ndarray]:
        """Row and column of the pixels containing UTM points (any, even outside the grid)."""
        return self.grid.rowcol(e, n)

    def to_rowcol(self, lon, lat) -> tuple[np.ndarray, np.ndarray]:
        """Row and column of the pixels containing lon/lat points (any, even outside the grid)."""
        return self.grid.rowcol(*lonlat_to_utm(lon, lat, self.zone, self.south))

    def contains(self, row, col):
        return self.grid.contains(row, col)

    def near(self, lon, lat, margin: float = 0.01) -> np.ndarray:
        """Points within the grid's lon/lat bounds (+ about 1 km): the ones worth projecting."""
        w, s, e, n = self.lonlat
        lon, lat = np.asarray(lon), np.asarray(lat)
        return (lon >= w - margin) & (lon <= e + margin) & (lat >= s - margin) & (lat <= n + margin)

    def utm(self, row: int, col: int) -> tuple[float, float]:
        e, n = self.grid.centre(row, col)
        return float(e), float(n)

    def centre_lonlat(self, row: int, col: int) -> tuple[float, float]:
        lon, lat = utm_to_lonlat(*self.grid.centre(row, col), self.zone, self.south)
        return float(lon), float(lat)
