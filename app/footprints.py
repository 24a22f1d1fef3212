"""The zones' footprints on the map: where a store has data, findable at every zoom.

Each zone is drawn as its grid's outline (UTM box, edges densified, in Web Mercator); a zone narrower than
MARKER_PX screen pixels also gets a marker at its centre, and a tap on a zone narrower than ZOOM_PX pixels (or
within HIT_PX of its outline) zooms to it. The first view, when the link names none, frames the largest group
of zones (`first_box`: zones within GAP_DEG of each other form a group; Sussex and the Cape are two). The JS
preview (app/web/preview.js dataBox) frames the largest group of the coarsest level's pixels with data by the
same rule, and hands that view to the Panel map (app/main.py), so the map does not move at "ready".

Pure functions of the zones and the view: tested on CPython and in Chromium (tests/test_browser_page.py).
"""
from __future__ import annotations

import numpy as np

from app import geo

GAP_DEG = 2.0  # zones (or data) closer than this are one group
MARKER_PX = 6  # a zone narrower or lower than this on screen gets a marker
ZOOM_PX = 48  # a tap on a zone narrower than this on screen zooms to it
HIT_PX = 8  # ... or within this many screen pixels of it
DENSIFY = 16


def outlines(zones) -> dict:
    """A multi_line source's data: each zone's grid outline in Web Mercator (closed), with its name."""
    xs, ys, names = [], [], []
    for z in zones:
        e0, n0, e1, n1 = z.grid.box()
        t = np.linspace(0, 1, DENSIFY)
        es = np.concatenate([e0 + (e1 - e0) * t, np.full(DENSIFY, e1), e1 - (e1 - e0) * t, np.full(DENSIFY, e0)])
        ns = np.concatenate([np.full(DENSIFY, n0), n0 + (n1 - n0) * t, np.full(DENSIFY, n1), n1 - (n1 - n0) * t])
        x, y = geo.lonlat_to_merc(*geo.utm_to_lonlat(es, ns, z.zone, z.south))
        xs.append([float(v) for v in x])
        ys.append([float(v) for v in y])
        names.append(z.name)
    return dict(xs=xs, ys=ys, name=names)


def _merc_boxes(zones) -> list[tuple[str, float, float, float, float]]:
    out = []
    for z in zones:
        w, s, e, n = z.lonlat
        x0, y0 = geo.lonlat_to_merc(w, s)
        x1, y1 = geo.lonlat_to_merc(e, n)
        out.append((z.name, float(x0), float(x1), float(y0), float(y1)))
    return out


def markers(zones, view: tuple[float, float, float, float], width_px: int) -> dict:
    """A scatter source's data: the centres of the zones smaller than MARKER_PX on screen in `view`."""
    mpp = (view[1] - view[0]) / width_px
    pts = [(nm, (x0 + x1) / 2, (y0 + y1) / 2) for nm, x0, x1, y0, y1 in _merc_boxes(zones)
           if min(x1 - x0, y1 - y0) < MARKER_PX * mpp]
    return dict(x=[p[1] for p in pts], y=[p[2] for p in pts], name=[p[0] for p in pts])


def zone_at(zones, view: tuple[float, float, float, float], width_px: int, x: float, y: float):
    """The zone a tap at Mercator (x, y) zooms to: the smallest zone narrower than ZOOM_PX on screen whose box,
    grown by HIT_PX screen pixels, holds the tap; None when there is none (the tap selects a pixel)."""
    mpp = (view[1] - view[0]) / width_px
    pad = HIT_PX * mpp
    hits = [(x1 - x0, z) for z, (_, x0, x1, y0, y1) in zip(zones, _merc_boxes(zones))
            if x1 - x0 < ZOOM_PX * mpp and x0 - pad <= x <= x1 + pad and y0 - pad <= y <= y1 + pad]
    return min(hits, key=lambda h: h[0])[1] if hits else None


def first_box(boxes: list[tuple[float, float, float, float]]) -> tuple[float, float, float, float]:
    """The lon/lat box (w, s, e, n) to frame first: the union of the largest group (by area) of `boxes`, boxes
    within GAP_DEG of each other being one group."""
    groups: list[list[tuple[float, float, float, float]]] = []
    for b in boxes:
        near = [g for g in groups if any(_close(b, o) for o in g)]
        merged = [b] + [o for g in near for o in g]
        groups = [g for g in groups if not any(g is n for n in near)] + [merged]
    area = lambda g: sum((e - w) * (n - s) for w, s, e, n in g)
    best = max(groups, key=area)
    return (min(b[0] for b in best), min(b[1] for b in best), max(b[2] for b in best), max(b[3] for b in best))


def _close(a, b) -> bool:
    return a[0] < b[2] + GAP_DEG and b[0] < a[2] + GAP_DEG and a[1] < b[3] + GAP_DEG and b[1] < a[3] + GAP_DEG
