"""The map's base layer for a view: global_rgb levels, and the zones' own previews when zoomed in.

A store without global_rgb (a geoemb: store may have none) shows its zones' grids tinted grey when zoomed
out, and its previews (false colour of the first three embedding dimensions: StoreModel.preview) below
render.ZONE_ZOOM_M metres per screen pixel.

Reads go through the store model (which knows the array paths and caches what it read);
the sampling and compositing are render's pure functions.
"""
from __future__ import annotations

import asyncio

import numpy as np

from app import render
from builder.core.reader import StoreModel


async def draw(model: StoreModel, v: render.View) -> np.ndarray:
    """RGBA (H, W, 4) of the view."""
    lon, lat = v.lonlat_grid()
    lvl = render.choose_level(model.levels, v)
    ijs = render.chunks_with_zones(lvl, render.chunks_in_view(lvl, v), model.zones.values()) if lvl is not None else []
    zoomed_in = v.metres_per_pixel() <= render.ZONE_ZOOM_M
    wins = zone_windows(model, v, lon, lat) if zoomed_in else []
    # The level's chunks and the zones' previews are read at once: a pan zoomed in waits for one round trip, not for
    # the chunks' and then the previews'.
    got = await asyncio.gather(*(model.level_chunk(lvl, *ij) for ij in ijs),
                               *(model.preview(z, *w[2:6]) for z, _, w in wins))
    if lvl is not None:
        img = render.sample_level(lvl, dict(zip(ijs, got[:len(ijs)])), lon, lat)
    elif not zoomed_in:  # no overview (a geoemb: store without global_rgb)
        img = render.footprints(model.zones.values(), lon, lat)
    else:
        img = np.zeros((v.height, v.width, 4), dtype=np.uint8)
    if zoomed_in:
        native = np.zeros_like(img)
        for (z, (i0, i1, j0, j1), (row, col, r0, r1, c0, c1, inside)), rgb in zip(wins, got[len(ijs):]):
            part = native[i0:i1, j0:j1]  # a view: sampled in place; zones in order, the first drawn wins
            render.sample_window(rgb, r0, c0, row, col, inside & (part[..., 3] == 0), part)
        img = render.composite(img, native)
    return img


def zone_windows(model: StoreModel, v: render.View, lon: np.ndarray, lat: np.ndarray) -> list:
    """(zone, screen box, render.zone_window of the box) of each zone with a preview that the view shows.

    Each zone's pixels are projected only over the part of the screen its window covers (render.edge_window: exact
    zoomed in, from the view's edges alone; render.screen_box): a zone the view misses costs 2 (W + H) projections,
    not W x H, and two zones side by side W x H between them. A store of many zones (a global one) projected the
    whole screen into each in every zoomed-in redraw."""
    out = []
    for z in model.zones.values():
        win = render.edge_window(z, v) if model.has_preview(z) else None
        box = None if win is None else render.screen_box(z, win, v)
        if box is not None:
            i0, i1, j0, j1 = box
            w = render.zone_window(z, lon[i0:i1, j0:j1], lat[i0:i1, j0:j1])
            if w is not None:
                out.append((z, box, w))
    return out
