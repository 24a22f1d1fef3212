"""Polygon labels: every valid pixel whose centre lies inside a polygon drawn on the map, labelled with one class.

The polygon is given by its lon/lat vertices; its edges are straight on the map (Web Mercator), as it was drawn.
Each zone of the store is read over the polygon's bounding window (full vectors, at most budgets.MAX_REGION pixels per
side: a larger polygon is refused in one line), and a pixel belongs to the zone that owns its centre where zones
overlap (StoreModel.locate_many: the nearest central meridian). When more than MAX_LABELS pixels are inside, a
seeded sample of MAX_LABELS is labelled; the status line gives both counts.
"""
from __future__ import annotations

import numpy as np

from app import budgets, geo, views
from app.tools import labels as lab, region, stored

MAX_LABELS = 2000  # labels one polygon adds (a seeded sample of the pixels inside when there are more)
MAX_VERTICES = 1000
DENSIFY = 16  # points per edge when the bounding window is found (edges straight in Mercator bend in UTM)


def vertices(coords) -> tuple[np.ndarray, np.ndarray]:
    """(lon, lat) arrays of a polygon's vertices [[lon, lat], ...] (3 to MAX_VERTICES, a closing repeat of the first
    dropped); ValueError with one line naming what is wrong."""
    if not isinstance(coords, (list, tuple)) or not 3 <= len(coords) <= MAX_VERTICES + 1:
        raise ValueError(f"a polygon is a list of 3 to {MAX_VERTICES} [lon, lat] vertices")
    pts = []
    for i, c in enumerate(coords):
        if not isinstance(c, (list, tuple)) or len(c) != 2:
            raise ValueError(f"polygon vertex {i} is not [lon, lat]")
        try:
            pts.append(lab.lonlat(*c))
        except ValueError as e:
            raise ValueError(f"polygon vertex {i} {e}") from None
    if len(pts) > 3 and pts[0] == pts[-1]:
        pts.pop()
    if len(pts) < 3 or len(pts) > MAX_VERTICES:
        raise ValueError(f"a polygon is a list of 3 to {MAX_VERTICES} [lon, lat] vertices")
    a = np.array(pts, np.float64)
    return a[:, 0], a[:, 1]


def inside(x: np.ndarray, y: np.ndarray, vx: np.ndarray, vy: np.ndarray) -> np.ndarray:
    """Which points (x, y) are inside the polygon (vx, vy), by the even-odd rule: a ray to +x crosses its edges an odd
    number of times. Written here because shapely is not in the Pyodide build the explorer loads, and matplotlib.path,
    which is, would load matplotlib (megabytes, the notebooks' plotting) for these few lines."""
    out = np.zeros(np.shape(x), bool)
    for x0, y0, x1, y1 in zip(vx, vy, np.roll(vx, -1), np.roll(vy, -1)):
        if y0 == y1:
            continue  # a horizontal edge: the ray never crosses it
        crosses = (y0 > y) != (y1 > y)
        with np.errstate(invalid="ignore", divide="ignore"):
            xc = x0 + (y - y0) * (x1 - x0) / (y1 - y0)
        out ^= crosses & (x < xc)
    return out


def zone_window(zone, lon: np.ndarray, lat: np.ndarray):
    """The polygon's bounding window (r0, r1, c0, c1) in `zone`'s grid, clipped to it; None when outside."""
    mx, my = geo.lonlat_to_merc(lon, lat)
    t = np.linspace(0, 1, DENSIFY, endpoint=False)[:, None]
    ex, ey = mx + t * (np.roll(mx, -1) - mx), my + t * (np.roll(my, -1) - my)
    rows, cols = zone.to_rowcol(*geo.merc_to_lonlat(ex.ravel(), ey.ravel()))
    r0, r1 = max(int(rows.min()) - 1, 0), min(int(rows.max()) + 2, zone.height)
    c0, c1 = max(int(cols.min()) - 1, 0), min(int(cols.max()) + 2, zone.width)
    return (r0, r1, c0, c1) if r0 < r1 and c0 < c1 else None


async def label(app, coords, cls=None, seed: int = 0, cap: int = MAX_LABELS) -> dict:
    """Label the valid pixels inside the polygon `coords` ([[lon, lat], ...]) as class `cls` (default: the active
    class): all of them, or a seeded sample of `cap`. Returns {"class", "labelled", "inside"}; ValueError (its line in
    the status too) for a bad polygon or one larger than a tool region."""
    labels, model = app.tools.labels, app.model
    try:
        lon, lat = vertices(coords)
        if model is None:
            raise ValueError("no store is open")
        found = []  # (zone, window, rows, cols, vectors) of the pixels inside, per zone
        mx, my = geo.lonlat_to_merc(lon, lat)
        for z in model.zones.values():  # the order locate_many numbers them in
            w = zone_window(z, lon, lat)
            if w is None:
                continue
            r0, r1, c0, c1 = w
            if max(r1 - r0, c1 - c0) > budgets.MAX_REGION:
                raise ValueError(f"the polygon spans more than {budgets.MAX_REGION} pixels per side in {z.name}: "
                                 "draw a smaller one")
            rr, cc = np.mgrid[r0:r1, c0:c1]
            plon, plat = geo.utm_to_lonlat(*z.grid.centre(rr, cc), z.zone, z.south)
            px, py = geo.lonlat_to_merc(plon, plat)
            own = model.locate_many(plon.ravel(), plat.ravel())[1].reshape(rr.shape) == list(model.zones).index(z.name)
            keep = inside(px, py, mx, my) & own
            if not keep.any():
                continue
            vec = await region.read_window(model, z, w)
            keep &= np.isfinite(vec[..., 0])
            r, c = np.nonzero(keep)
            found.append((z, w, r, c, vec[r, c]))
    except ValueError as e:
        app.status = views.html("<b>Polygon not labelled:</b> {}", e)
        raise
    total = sum(len(f[2]) for f in found)
    name = labels.add_class(cls if cls is not None else (labels.active or "class 1"))
    if not total:
        app.status = views.html("No pixel with data inside the polygon: nothing labelled.")
        return {"class": name, "labelled": 0, "inside": 0}
    pick = np.sort(np.random.default_rng(seed).choice(total, min(cap, total), replace=False))
    start = 0
    for z, w, r, c, vec in found:
        mine = pick[(pick >= start) & (pick < start + len(r))] - start
        start += len(r)
        if len(mine):
            labels.add_pixels(name, z, w, r[mine], c[mine], vec[mine], model.year)
    app.status = views.html("Labelled {:,} of {:,} pixels inside the polygon as <b>{}</b> ({:,} labels).{}",
                            len(pick), total, name, len(labels.points), stored.note(labels.link, len(labels.points)))
    return {"class": name, "labelled": int(len(pick)), "inside": int(total)}
