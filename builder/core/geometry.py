"""Zone and global-level geometry of the `tessera:` convention (pure core: stdlib + numpy).

Zone group names, zone <-> EPSG, the one pixel formula of a zone grid and the global_rgb level geometry.
builder/core/convention.py re-exports every name here (conv.proj_code, conv.global_chunks, ...).
"""
from __future__ import annotations

import math
import re

import numpy as np

PIXEL_SIZE = 10.0  # metres, fixed for dataset_version v1
SOUTH_FALSE_NORTHING = 10_000_000.0
GLOBAL_BBOX = [-180.0, -90.0, 180.0, 90.0]
_ZONE_RE = re.compile(r"^utm(\d{2})$")

def zone_group_name(zone: int) -> str:
    if not 1 <= int(zone) <= 60:
        raise ValueError(f"UTM zone {zone} is outside 1..60")
    return f"utm{int(zone):02d}"


def parse_zone_group_name(name: str) -> int | None:
    """Zone number of a group called utmNN, or None for any other name."""
    m = _ZONE_RE.match(name)
    return int(m.group(1)) if m else None


def central_meridian(zone: int) -> float:
    """Longitude of a UTM zone's central meridian."""
    return -183.0 + 6.0 * zone


def meridian_distance(lon, zone: int) -> np.ndarray:
    """Degrees between each longitude and a UTM zone's central meridian. Where zone grids overlap, the zone whose
    central meridian is nearest wins (the least distortion), the first listed of equals: NearestZone for points,
    and the global pyramid's order of zones for a chunk (builder/pyramid.py)."""
    return np.abs(np.asarray(lon, dtype=np.float64) - central_meridian(zone))


class NearestZone:
    """The zone each point falls in, by the rule of `meridian_distance`: `offer` the zones in their listed order,
    each with the points its grid contains; `which` is each point's index among them, or -1 outside every one."""

    def __init__(self, lon):
        self.lon = np.asarray(lon, dtype=np.float64)
        self.which = np.full(self.lon.shape, -1, dtype=np.int64)
        self._best = np.full(self.lon.shape, np.inf)

    def offer(self, index: int, zone: int, contains: np.ndarray) -> np.ndarray:
        """The points (a mask) that zone `zone`, listed at `index`, now wins among those it `contains`."""
        d = meridian_distance(self.lon, zone)
        win = np.asarray(contains, dtype=bool) & (d < self._best)
        self.which[win], self._best[win] = index, d[win]
        return win


def epsg_for_zone(zone: int, south: bool) -> int:
    return (32700 if south else 32600) + int(zone)


def proj_code(zone: int, south: bool) -> str:
    return f"EPSG:{epsg_for_zone(zone, south)}"


def zone_from_epsg(epsg: int) -> tuple[int, bool]:
    """(zone, south) of a WGS84 UTM EPSG code; ValueError for anything else."""
    epsg = int(epsg)
    if 32601 <= epsg <= 32660:
        return epsg - 32600, False
    if 32701 <= epsg <= 32760:
        return epsg - 32700, True
    raise ValueError(f"EPSG:{epsg} is not a WGS84 UTM zone (EPSG:32601-32660 or 32701-32760)")


def parse_proj_code(code: str) -> tuple[int, bool]:
    m = re.match(r"^EPSG:(\d+)$", str(code))
    if not m:
        raise ValueError(f"proj:code {code!r} is not of the form EPSG:NNNNN")
    return zone_from_epsg(int(m.group(1)))


def pixel_corner(origin_e: float, origin_n: float, row, col, at: float = 0.0, pixel: float = PIXEL_SIZE) -> tuple:
    """UTM easting, northing of pixels' top-left corners (at=0) or centres (at=0.5): the one pixel formula
    (`pixel`: the pixel edge in metres, 10 * 2**k at overview level k)."""
    return origin_e + (np.asarray(col) + at) * pixel, origin_n - (np.asarray(row) + at) * pixel


def easting_coords(origin_e: float, width: int) -> np.ndarray:
    return pixel_corner(origin_e, 0.0, 0, np.arange(width, dtype=np.float64), 0.5)[0]


def northing_coords(origin_n: float, height: int) -> np.ndarray:
    return pixel_corner(0.0, origin_n, np.arange(height, dtype=np.float64), 0, 0.5)[1]


def global_level_transform(res: float) -> list[float]:
    return [res, 0.0, GLOBAL_BBOX[0], 0.0, -res, GLOBAL_BBOX[3]]


def global_rowcol(lon, lat, res: float) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of a global_rgb level (res degrees per pixel) at lon/lat: the level's pixel formula."""
    return (np.floor((GLOBAL_BBOX[3] - np.asarray(lat)) / res).astype(np.int64),
            np.floor((np.asarray(lon) - GLOBAL_BBOX[0]) / res).astype(np.int64))


def global_centres(r0: int, c0: int, n: int, res: float) -> tuple[np.ndarray, np.ndarray]:
    """Longitudes of columns c0..c0+n and latitudes of rows r0..r0+n (pixel centres) of a global level."""
    k = np.arange(n) + 0.5
    return GLOBAL_BBOX[0] + (c0 + k) * res, GLOBAL_BBOX[3] - (r0 + k) * res


def global_chunks(lonlat: tuple[float, float, float, float], res: float, shape: tuple[int, int],
                  chunk: int) -> list[tuple[int, int]]:
    """The chunks (row, col) of a global level of `shape` that a lon/lat box (w, s, e, n) touches."""
    w, s, e, n = lonlat
    step = res * chunk
    r0 = max(0, math.floor((GLOBAL_BBOX[3] - n) / step))
    r1 = min(math.ceil(shape[0] / chunk) - 1, math.floor((GLOBAL_BBOX[3] - s) / step))
    c0 = max(0, math.floor((w - GLOBAL_BBOX[0]) / step))
    c1 = min(math.ceil(shape[1] / chunk) - 1, math.floor((e - GLOBAL_BBOX[0]) / step))
    return [(r, c) for r in range(r0, r1 + 1) for c in range(c0, c1 + 1)]
