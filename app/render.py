"""Drawing the map: the view is a Web Mercator image, sampled from the store's previews.

A view of W x H screen pixels covers a Mercator box; each screen pixel's
centre is taken back to lon/lat and sampled (nearest) from
  * the global_rgb level whose resolution best matches the screen pixel
    (only the chunks that the view touches are read), or
  * a zone's own rgb preview, reprojected from its UTM grid, once a screen
    pixel is smaller than ZONE_ZOOM_M metres.
The similarity overlay is sampled the same way from its zone window.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from bokeh.palettes import Viridis256

from app import geo
from builder.core.zone import Zone
from builder.core import convention as conv
from builder.core.describe import Level

ZONE_ZOOM_M = 12.0  # below this many metres per screen pixel, draw zones' native previews (level 0 is ~10 m)
MAX_CHUNKS = 48


@dataclass(frozen=True)
class View:
    x0: float
    x1: float
    y0: float
    y1: float
    width: int
    height: int

    def lonlat_grid(self) -> tuple[np.ndarray, np.ndarray]:
        xs = self.x0 + (np.arange(self.width) + 0.5) * (self.x1 - self.x0) / self.width
        ys = self.y1 - (np.arange(self.height) + 0.5) * (self.y1 - self.y0) / self.height  # top row first
        lon, _ = geo.merc_to_lonlat(xs, np.zeros_like(xs))
        _, lat = geo.merc_to_lonlat(np.zeros_like(ys), ys)
        return np.broadcast_to(lon[None, :], (self.height, self.width)), np.broadcast_to(lat[:, None], (self.height, self.width))

    def metres_per_pixel(self) -> float:
        _, lat = geo.merc_to_lonlat(0.0, (self.y0 + self.y1) / 2)
        return (self.x1 - self.x0) / self.width * math.cos(math.radians(float(lat)))

    def centre_lonlat(self) -> tuple[float, float]:
        lon, lat = geo.merc_to_lonlat((self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2)
        return float(lon), float(lat)

    def lonlat_box(self) -> tuple[float, float, float, float]:
        w, s = geo.merc_to_lonlat(self.x0, self.y0)
        e, n = geo.merc_to_lonlat(self.x1, self.y1)
        return float(w), float(s), float(e), float(n)


def choose_level(levels: list[Level], view: View) -> Level | None:
    """The coarsest level still at least as fine as a screen pixel, limited to MAX_CHUNKS chunks."""
    if not levels:
        return None
    w, s, e, n = view.lonlat_box()
    deg_per_px = (e - w) / view.width
    best = levels[0]
    for lvl in levels:
        if lvl.res <= deg_per_px:
            best = lvl
    for lvl in levels[best.index:]:
        if len(chunks_in_view(lvl, view)) <= MAX_CHUNKS:
            return lvl
    return levels[-1]


def chunks_in_view(level: Level, view: View) -> list[tuple[int, int]]:
    return conv.global_chunks(view.lonlat_box(), level.res, (level.height, level.width), level.chunk)


def chunks_with_zones(level: Level, chunks: list[tuple[int, int]], zones) -> list[tuple[int, int]]:
    """Those of `chunks` that exist: the level's record of its chunks (builder/core/chunkruns.py) when it has
    one, else those that touch a zone's lon/lat box (grown by one level pixel).  The builder writes a global_rgb
    chunk only where a zone has data (builder/pyramid.py), so a sparse pyramid has no others, and asking for
    them is a request that fails (a 404 in the page's console) for a chunk known to be empty."""
    if level.present is not None:
        return [ij for ij in chunks if ij in level.present]
    boxes = [(w - level.res, s - level.res, e + level.res, n + level.res) for w, s, e, n in (z.lonlat for z in zones)]
    step = level.res * level.chunk
    out = []
    for i, j in chunks:
        cw, cn = conv.GLOBAL_BBOX[0] + j * step, conv.GLOBAL_BBOX[3] - i * step
        ce, cs = cw + step, cn - step
        if any(w < ce and e > cw and s < cn and n > cs for w, s, e, n in boxes):
            out.append((i, j))
    return out


def sample_level(level: Level, chunks: dict[tuple[int, int], np.ndarray], lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """RGBA (H, W, 4) of the view from the level's chunks (missing chunks are transparent).

    The chunks are laid side by side in one array of RGBA words, the view's pixels outside them pointed at one
    transparent word past its end, and all looked up with one `take`: a 1600x1000 view of 48 chunks costs 30-45 ms in
    CPython, where a mask per chunk took 0.35 s (the first map's sampling in the browser: 196 -> ~40 ms)."""
    c = level.chunk
    if not chunks:
        return np.zeros(lon.shape + (4,), dtype=np.uint8)
    i0, j0 = min(i for i, _ in chunks), min(j for _, j in chunks)
    h, w = (max(i for i, _ in chunks) - i0 + 1) * c, (max(j for _, j in chunks) - j0 + 1) * c
    words = np.zeros(h * w + 1, np.uint32)  # the last: transparent, for every pixel outside the chunks
    mosaic = words[:-1].reshape(h, w)
    for (i, j), data in chunks.items():
        rgba = rgba_words(np.ascontiguousarray(data, dtype=np.uint8))
        mosaic[(i - i0) * c:(i - i0) * c + rgba.shape[0], (j - j0) * c:(j - j0) * c + rgba.shape[1]] = rgba
    row, col = conv.global_rowcol(lon, lat, level.res)
    row -= i0 * c
    col -= j0 * c
    at = np.where((row < 0) | (row >= h) | (col < 0) | (col >= w), h * w, row * w + col).astype(np.intp)  # wasm32: int32
    return np.take(words, at).view(np.uint8).reshape(lon.shape + (4,))


def zone_window(zone: Zone, lon: np.ndarray, lat: np.ndarray, pad: int = 1):
    """(rows, cols, r0, r1, c0, c1, inside) of the view pixels in `zone`, or None when none fall in it."""
    row, col = zone.to_rowcol(lon, lat)
    inside = zone.contains(row, col)
    if not inside.any():
        return None
    r0, r1 = int(row[inside].min()), int(row[inside].max()) + 1
    c0, c1 = int(col[inside].min()), int(col[inside].max()) + 1
    return row, col, max(r0 - pad, 0), min(r1 + pad, zone.height), max(c0 - pad, 0), min(c1 + pad, zone.width), inside


def view_edges(v: View) -> tuple[np.ndarray, np.ndarray]:
    """lon, lat of the pixel centres on the view's four edges (its first and last rows and columns)."""
    lon, lat = v.lonlat_grid()
    return (np.concatenate([lon[0], lon[-1], lon[:, 0], lon[:, -1]]),
            np.concatenate([lat[0], lat[-1], lat[:, 0], lat[:, -1]]))


def edge_window(zone: Zone, v: View) -> tuple[int, int, int, int] | None:
    """(r0, r1, c0, c1): the zone grid's window of the view's pixels, from the pixel centres on the view's edges
    alone (2 (W + H) projections, not W x H: a 1600 x 1000 view's grid cost ~0.2 s per zone in CPython and more
    in WebAssembly).  Exact for the view's whole footprint: at any longitude northing grows with latitude, and
    at any latitude easting grows with longitude (transverse Mercator, well within 90 degrees of the central
    meridian), so the view's extreme rows and columns lie on its edges.  Clipped to the grid, which may keep a
    few pixels more than the view's pixels inside it where a view edge crosses a grid corner at an angle (never
    fewer); None when the footprint misses the grid."""
    row, col = zone.to_rowcol(*view_edges(v))
    r0, r1 = max(int(row.min()), 0), min(int(row.max()) + 1, zone.height)
    c0, c1 = max(int(col.min()), 0), min(int(col.max()) + 1, zone.width)
    return (r0, r1, c0, c1) if r0 < r1 and c0 < c1 else None


def window_outline(zone: Zone, window) -> tuple[np.ndarray, np.ndarray]:
    """Web Mercator x, y of a zone window's outline (its pixels' corners along its four sides): longitude grows
    with easting at any northing and latitude with northing at any easting, so the outline holds the window's
    extremes on the map."""
    r0, r1, c0, c1 = window
    rows = np.concatenate([np.arange(r0, r1 + 1), np.arange(r0, r1 + 1), np.full(c1 - c0 + 1, r0), np.full(c1 - c0 + 1, r1)])
    cols = np.concatenate([np.full(r1 - r0 + 1, c0), np.full(r1 - r0 + 1, c1), np.arange(c0, c1 + 1), np.arange(c0, c1 + 1)])
    e, n = zone.grid.corner(rows, cols)
    return geo.lonlat_to_merc(*geo.utm_to_lonlat(e, n, zone.zone, zone.south))


def window_view(zone: Zone, window) -> View:
    """The map box around a zone window (window_outline's extremes), one box pixel per window pixel."""
    x, y = window_outline(zone, window)
    return View(float(np.min(x)), float(np.max(x)), float(np.min(y)), float(np.max(y)),
                max(window[3] - window[2], 1), max(window[1] - window[0], 1))


def screen_box(zone: Zone, window, v: View) -> tuple[int, int, int, int] | None:
    """(i0, i1, j0, j1): the view's screen rows and columns that a zone window covers (a pixel's margin), from
    the window's outline alone (window_outline); None when it is off screen."""
    x, y = window_outline(zone, window)
    sx, sy = (v.x1 - v.x0) / v.width, (v.y1 - v.y0) / v.height
    j0, j1 = max(int(np.floor((np.min(x) - v.x0) / sx)) - 1, 0), min(int(np.ceil((np.max(x) - v.x0) / sx)) + 1, v.width)
    i0, i1 = max(int(np.floor((v.y1 - np.max(y)) / sy)) - 1, 0), min(int(np.ceil((v.y1 - np.min(y)) / sy)) + 1, v.height)
    return (i0, i1, j0, j1) if i0 < i1 and j0 < j1 else None


def view_windows(zones, view: View, step: int = 20) -> list[tuple[Zone, int, int, int, int]]:
    """(zone, r0, r1, c0, c1) of the pixels of each zone that the view shows, from a grid of every `step`-th screen
    pixel (padded by a step: cheap, and a window that may be a little larger, never smaller)."""
    coarse = View(view.x0, view.x1, view.y0, view.y1, max(2, view.width // step), max(2, view.height // step))
    lon, lat = coarse.lonlat_grid()
    out = []
    for z in zones:
        win = zone_window(z, lon, lat, pad=math.ceil(step * view.metres_per_pixel() / z.pixel) + 1)
        if win is not None:
            out.append((z, *win[2:6]))
    return out


def rgba_words(rgba: np.ndarray) -> np.ndarray:
    """A view of an RGBA image (uint8 (h, w, 4), its pixels' 4 bytes side by side: any slice of rows and columns) as
    one 32-bit word per pixel, which numpy moves in one step instead of four."""
    return rgba.view(np.uint32)[..., 0]


def sample_window(values: np.ndarray, r0: int, c0: int, row: np.ndarray, col: np.ndarray, mask: np.ndarray,
                  out: np.ndarray) -> None:
    """out[mask] = values[row - r0, col - c0] where (row, col) fall inside `values`: RGBA images (rgba_words)."""
    rr, cc = row - r0, col - c0
    ok = mask & (rr >= 0) & (rr < values.shape[0]) & (cc >= 0) & (cc < values.shape[1])
    rgba_words(out)[ok] = rgba_words(values)[rr[ok], cc[ok]]


def footprints(zones, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """RGBA of the view with the zones' grids tinted grey (where a store has no overview to show)."""
    out = np.zeros(lon.shape + (4,), dtype=np.uint8)
    for z in zones:
        w, s, e, n = z.lonlat
        near = (lon >= w) & (lon <= e) & (lat >= s) & (lat <= n)
        if near.any():
            row, col = z.to_rowcol(lon[near], lat[near])
            idx = np.flatnonzero(near.ravel())[z.contains(row, col)]
            out.reshape(-1, 4)[idx] = (128, 128, 128, 90)
    return out


def composite(under: np.ndarray, over: np.ndarray) -> np.ndarray:
    """Draw `over` where it is opaque (alpha > 0), `under` elsewhere (RGBA images)."""
    words = np.where(over[..., 3] > 0, rgba_words(np.ascontiguousarray(over)), rgba_words(np.ascontiguousarray(under)))
    return words.view(np.uint8).reshape(under.shape)


# Bokeh's 256-step viridis (perceptually ordered) for similarity in [-1, 1].
_VIRIDIS = np.array([[int(h[i:i + 2], 16) for i in (1, 3, 5)] for h in Viridis256], dtype=np.uint8)


def similarity_range(threshold: float) -> tuple[float, float]:
    """The cosines a similarity map is coloured over: the range it shows, `threshold` to 1 (the colour bar's ends,
    app/legend.py). (Over -1..1, every pixel above a 0.8 threshold was nearly the same yellow.)"""
    return min(float(threshold), 1.0 - 1e-6), 1.0


def similarity_rgba(sim: np.ndarray, threshold: float) -> np.ndarray:
    """Colour a cosine-similarity map over similarity_range(threshold); transparent below `threshold` and where
    NaN."""
    return ramp_rgba(sim, threshold, *similarity_range(threshold))


def ramp_rgba(values: np.ndarray, threshold: float, lo: float, hi: float) -> np.ndarray:
    """Colour values on [lo, hi] with the ramp; transparent below `threshold` and where NaN."""
    sim = values
    out = np.zeros(sim.shape + (4,), dtype=np.uint8)
    ok = np.isfinite(sim) & (np.nan_to_num(sim, nan=-np.inf) >= threshold)
    i = np.round(np.clip((np.nan_to_num(sim) - lo) / (hi - lo), 0, 1) * (len(_VIRIDIS) - 1)).astype(int)
    out[ok, :3] = _VIRIDIS[i[ok]]
    out[ok, 3] = 210
    return out


def to_bokeh_image(rgba: np.ndarray) -> np.ndarray:
    """uint32 (H, W) view for Bokeh's image_rgba, whose first row is the bottom one."""
    return np.ascontiguousarray(rgba[::-1]).view(np.uint32).reshape(rgba.shape[:2])
