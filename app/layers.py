"""The explorer's raster layers as exportable `RasterLayer`s, by name.

`PROVIDERS` maps a layer name to a coroutine function `(state) -> RasterLayer`; every tool that
makes a raster (class, cluster, change maps) adds its own entry and is then exported as GeoTIFF
and PNG by `tesseraApi.exportGeoTIFF(name)`, `exportPNG(name)` and the page's buttons.

  * "similarity": the last similarity map, float32 cosines on its zone window, NaN where no data
    (PNG: the map's colours, transparent below the threshold);
  * "base": the embedding preview (the zone's rgb array) over the view's window of one zone.
"""
from __future__ import annotations

import numpy as np

from app import render
from app.model import Zone
from app.raster import RasterLayer


class ExportError(ValueError):
    """An export that cannot be made now (nothing computed, no zone in view): one line for the user."""


def view_window(state) -> tuple[Zone, tuple[int, int, int, int]]:
    """The view's window in one zone (the zone under the view's centre, else the one with most of the
    view), capped like similarity at model.MAX_REGION pixels per side around the view's centre."""
    if state.model is None:
        raise ExportError("no store is open")
    v = state.render_view()
    lon, lat = v.lonlat_grid()
    best = None
    for zone in sorted(state.model.zones.values(), key=lambda z: z.name):
        win = render.zone_window(zone, lon, lat, pad=0)
        if win is None:
            continue
        inside = win[6]
        key = (bool(inside[v.height // 2, v.width // 2]), int(inside.sum()))
        if best is None or key > best[0]:
            best = (key, zone, win[2:6])
    if best is None:
        raise ExportError("the view shows no zone of this store")
    (centred, _), zone, (r0, r1, c0, c1) = best
    # around the pixel under the view's centre, or the middle of the view's part of the zone
    row, col = ((int(v) for v in zone.to_rowcol(*v.centre_lonlat())) if centred else ((r0 + r1) // 2, (c0 + c1) // 2))
    return zone, state.model.similarity_window(zone, row, col, (r0, r1, c0, c1))


async def similarity_layer(state) -> RasterLayer:
    if not state.sim:
        raise ExportError("no similarity map yet: select a pixel and turn similarity search on")
    zone, window, sim = state.sim
    threshold = state.threshold
    return RasterLayer("similarity", sim, zone, window, float("nan"),
                       colours=lambda v: render.similarity_rgba(v, threshold))


async def base_layer(state) -> RasterLayer:
    zone, (r0, r1, c0, c1) = view_window(state)
    if not zone.has_rgb:
        raise ExportError(f"{zone.name} has no rgb preview")
    rgba = await state.model.region(zone, "rgb", r0, r1, c0, c1)
    return RasterLayer("base", np.ascontiguousarray(rgba, np.uint8), zone, (r0, r1, c0, c1))


PROVIDERS = {"similarity": similarity_layer, "base": base_layer}


async def layer(state, name: str) -> RasterLayer:
    provider = PROVIDERS.get(str(name))
    if provider is None:
        raise ExportError(f"unknown layer {name!r} (layers: {', '.join(PROVIDERS)})")
    return await provider(state)
