"""Zone grids: where tiles and shards sit inside a zone group.

Every zone grid of every year lies on one lattice per CRS: its top-left
corner is a multiple of the shard edge (256 px x 10 m = 2560 m) in both
easting and northing.  Two grids of the same zone therefore differ only by
whole shards, which is what lets a store grow to the north or west by
renaming shard files (builder.regrid) and lets a multi-year virtual index
line years up by remapping shard keys (builder.virtual).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from builder.core import convention as conv

EPS = 1e-6


def finite_number(x) -> bool:
    """A JSON number (not a bool) that is finite as a float: not NaN, not +-inf, not an integer beyond float."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:  # an integer of hundreds of digits
        return False


@dataclass(frozen=True)
class ZoneGrid:
    zone: int
    south: bool
    origin_e: float
    origin_n: float
    height: int
    width: int
    shard: int = conv.SHARD
    pixel: float = conv.PIXEL_SIZE  # metres; 10 * 2**k for the grid of overview level k (`level`)

    @property
    def step(self) -> float:
        return self.shard * self.pixel

    @property
    def name(self) -> str:
        return conv.zone_group_name(self.zone)

    @property
    def shard_grid(self) -> tuple[int, int]:
        return self.height // self.shard, self.width // self.shard

    @classmethod
    def covering(cls, zone: int, south: bool, boxes: Iterable[tuple[float, float, float, float]],
                 shard: int = conv.SHARD) -> "ZoneGrid":
        """Smallest lattice-aligned grid containing every (e0, n0, e1, n1) box."""
        boxes = list(boxes)
        step = shard * conv.PIXEL_SIZE
        e0 = math.floor(min(b[0] for b in boxes) / step + EPS) * step
        n1 = math.ceil(max(b[3] for b in boxes) / step - EPS) * step
        e1 = math.ceil(max(b[2] for b in boxes) / step - EPS) * step
        n0 = math.floor(min(b[1] for b in boxes) / step + EPS) * step
        return cls(zone, south, e0, n1, round((n1 - n0) / conv.PIXEL_SIZE), round((e1 - e0) / conv.PIXEL_SIZE), shard)

    @classmethod
    def from_attrs(cls, attrs: dict, shard: int) -> "ZoneGrid":
        """The grid a zone group's proj:/spatial: attributes describe; ValueError when they describe none (a
        transform of other than six finite numbers, a shape of other than two non-negative integers, a
        shard edge below 1): metadata may be hostile."""
        t, shape = attrs["spatial:transform"], attrs["spatial:shape"]
        if not (isinstance(t, (list, tuple)) and len(t) == 6 and all(finite_number(x) for x in t)):
            raise ValueError(f"spatial:transform {str(t)[:200]} is not six finite numbers")
        if not (isinstance(shape, (list, tuple)) and len(shape) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in shape)):
            raise ValueError(f"spatial:shape {str(shape)[:200]} is not two non-negative integers")
        if isinstance(shard, bool) or not isinstance(shard, (int, np.integer)) or shard < 1:
            raise ValueError(f"shard edge {shard!r} is not a positive integer")
        zone, south = conv.parse_proj_code(attrs["proj:code"])
        h, w = shape
        return cls(zone, south, float(t[2]), float(t[5]), int(h), int(w), int(shard))

    def box(self) -> tuple[float, float, float, float]:
        p = self.pixel
        return (self.origin_e, self.origin_n - self.height * p, self.origin_e + self.width * p, self.origin_n)

    def union(self, other: "ZoneGrid") -> "ZoneGrid":
        if (other.zone, other.south, other.shard) != (self.zone, self.south, self.shard):
            raise ValueError("cannot unite grids of different zones or shard sizes")
        return ZoneGrid.covering(self.zone, self.south, [self.box(), other.box()], self.shard)

    def offset_of(self, other: "ZoneGrid") -> tuple[int, int]:
        """(rows, cols) in whole shards from this grid's corner to `other`'s corner."""
        dr = (self.origin_n - other.origin_n) / self.step
        dc = (other.origin_e - self.origin_e) / self.step
        if abs(dr - round(dr)) > EPS or abs(dc - round(dc)) > EPS:
            raise ValueError("grids are not on the same shard lattice")
        return round(dr), round(dc)

    def pixel_offset(self, origin_e: float, origin_n: float) -> tuple[int, int]:
        """Row/col of the pixel whose area contains the tile corner (floor, as the tiles are laid out)."""
        col = math.floor((origin_e - self.origin_e) / self.pixel + EPS)
        row = math.floor((self.origin_n - origin_n) / self.pixel + EPS)
        return row, col

    # Pixel (row, col) covers easting [e0 + col * 10, e0 + (col + 1) * 10) and northing
    # (n0 - (row + 1) * 10, n0 - row * 10]: rowcol is the inverse of conv.pixel_corner.
    def rowcol(self, e, n) -> tuple[np.ndarray, np.ndarray]:
        """Row and column of the pixels whose areas contain UTM points (any, even outside; -1 if not finite)."""
        with np.errstate(invalid="ignore"):
            col = np.floor((np.asarray(e, dtype=np.float64) - self.origin_e) / self.pixel)
            row = np.floor((self.origin_n - np.asarray(n, dtype=np.float64)) / self.pixel)
        ok = np.isfinite(row) & np.isfinite(col)
        return np.where(ok, row, -1).astype(np.int64), np.where(ok, col, -1).astype(np.int64)

    def centre(self, row, col) -> tuple:
        """UTM easting and northing of pixel centres."""
        return conv.pixel_corner(self.origin_e, self.origin_n, row, col, 0.5, self.pixel)

    def corner(self, row, col) -> tuple:
        """UTM easting and northing of pixels' top-left corners."""
        return conv.pixel_corner(self.origin_e, self.origin_n, row, col, 0.0, self.pixel)

    def contains(self, row, col):
        return (row >= 0) & (row < self.height) & (col >= 0) & (col < self.width)

    def window(self, e0: float, n0: float, e1: float, n1: float) -> tuple[int, int, int, int] | None:
        """(r0, r1, c0, c1) of the pixels touching a UTM box, clipped to the grid; None when it misses."""
        p = self.pixel
        c0, c1 = max(math.floor((e0 - self.origin_e) / p), 0), min(math.ceil((e1 - self.origin_e) / p), self.width)
        r0, r1 = max(math.floor((self.origin_n - n1) / p), 0), min(math.ceil((self.origin_n - n0) / p), self.height)
        return (r0, r1, c0, c1) if r0 < r1 and c0 < c1 else None

    def shards_in(self, r0: int, c0: int, h: int, w: int) -> list[tuple[int, int]]:
        s = self.shard
        return [(sr, sc) for sr in range(r0 // s, (r0 + h - 1) // s + 1)
                for sc in range(c0 // s, (c0 + w - 1) // s + 1)]

    def window_attrs(self, r0: int, r1: int, c0: int, c1: int) -> dict:
        """`spatial:` properties (transform, shape, bbox) of rows r0:r1, cols c0:c1 of this grid."""
        e, n = self.corner(r0, c0)
        return conv.spatial_attrs(float(e), float(n), r1 - r0, c1 - c0, self.pixel)

    def attrs(self) -> dict:
        return conv.spatial_attrs(self.origin_e, self.origin_n, self.height, self.width, self.pixel)

    # ---- overview levels (tessera-ovr:) ------------------------------------------------------
    # Level k (of a level-0 grid) has pixels of 10 * 2**k m and shards of `shard` pixels; its grid is the smallest one
    # on the CRS-wide lattice of level-k shards that covers the zone grid.  Shard (R, C) of the
    # lattice (R counted down from northing 0, C east from easting 0) holds the 2x2 means of
    # level-(k-1) shards (2R..2R+1, 2C..2C+1), so levels of every grid of a zone line up, and a
    # grid that grows moves each level by whole shards.
    def lattice_origin(self, k: int = 0) -> tuple[int, int]:
        """(R, C) of the level-k lattice shard at this grid's level-k top-left corner."""
        r0, c0 = round(-self.origin_n / self.step), round(self.origin_e / self.step)
        return r0 >> k, c0 >> k  # floor division by 2**k, also for negative indices

    def level_shards(self, k: int) -> tuple[int, int]:
        """Shard rows and columns of the level-k grid."""
        (r0, c0), (h, w) = self.lattice_origin(0), self.shard_grid
        return -(-(r0 + h) // 2**k) - (r0 >> k), -(-(c0 + w) // 2**k) - (c0 >> k)

    def level_grid(self, k: int) -> tuple[float, float, int, int]:
        """(origin_e, origin_n, height, width) of the level-k grid (k = 0: this grid)."""
        r, c = self.lattice_origin(k)
        step = self.step * 2**k
        nr, nc = self.level_shards(k)
        return c * step, -r * step, nr * self.shard, nc * self.shard

    def level(self, k: int) -> "ZoneGrid":
        """The level-k grid as a grid of its own (pixels of 10 * 2**k m): rowcol, centre, window_attrs in level
        pixels.  What the builder writes as a level's `spatial:transform`/`spatial:shape` (builder.overviews)."""
        e0, n0, h, w = self.level_grid(k)
        return ZoneGrid(self.zone, self.south, e0, n0, h, w, self.shard, self.pixel * 2**k)

    @classmethod
    def from_level_attrs(cls, zone: "ZoneGrid", item: dict) -> "ZoneGrid":
        """A level's grid from its `tessera-ovr:levels` item (spatial:transform, spatial:shape) in `zone`'s CRS."""
        t, (h, w) = item["spatial:transform"], item["spatial:shape"]
        return cls(zone.zone, zone.south, float(t[2]), float(t[5]), int(h), int(w), zone.shard, float(t[0]))
