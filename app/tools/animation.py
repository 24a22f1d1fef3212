"""Animation export: the embedding preview (each zone's rgb array) over the view, one frame per year, as an animated
PNG (APNG, written by Pillow, which the site loads for every PNG export), georeferenced by sidecars.

The years are those of the catalog's year stores, or of the open geoemb: store's time axis. Every frame covers the
same ground: the view's 10 m window in its primary zone (app/layers.py view_window, capped at budgets.MAX_REGION per
side) in the year shown, and in each other year's store the same zone's window shifted onto that store's grid (grids
of a zone lie on one lattice: app/tools/change.py shifted); pixels outside a year's grid, or a year whose store has no
preview there, are transparent. The bundle (zip) holds the APNG, its world file (.pgw) and .png.aux.xml (the CRS),
like the PNG export's (app/gis.py), and a JSON naming the years of each frame, the EPSG code and the transform in
rasterio's and GDAL's orders. Only the preview is animated: a tool layer would need its tool re-run on every year.
"""
from __future__ import annotations

import io
import json
import zipfile

import jsonschema
import numpy as np

from app import gis, raster
from app.layers import ExportError, view_window
from builder.core.reader import StoreModel
from app.tools.change import shifted

FRAME_MS = 800  # each year's time on screen


async def year_model(state, year: int) -> StoreModel:
    """The store showing `year`: the open one, when it holds that year itself (builder/core/kinds.py showing), or the
    catalog's store."""
    m = state.model
    shown = m.kind.showing(m, year)
    if shown is not None:
        return shown
    entry = next(c for c in state.catalog if c["year"] == year)
    return await StoreModel(state.source_factory(entry["url"]), jsonschema=jsonschema).open(year)


async def frame(model: StoreModel, zone, window) -> np.ndarray:
    """RGBA (H, W, 4) of `model`'s preview of zone `zone.name` over the ground of `window` on `zone`'s grid
    (transparent where that store has no such zone, no preview, or no grid)."""
    r0, r1, c0, c1 = window
    out = np.zeros((r1 - r0, c1 - c0, 4), np.uint8)
    z = model.zones.get(zone.name)
    if z is None or not z.has_rgb:
        return out
    s0, s1, t0, t1 = shifted(window, zone, z)
    a0, a1, b0, b1 = max(s0, 0), min(s1, z.height), max(t0, 0), min(t1, z.width)
    if a0 < a1 and b0 < b1:
        rgba = await model.region(z, "rgb", a0, a1, b0, b1)
        out[a0 - s0:a1 - s0, b0 - t0:b1 - t0] = np.asarray(rgba, np.uint8)
    return out


def years(state) -> list[int]:
    return sorted({int(c["year"]) for c in state.catalog} | set(getattr(state.model, "years", None) or []))


async def frames(state) -> tuple:
    """(zone, window, years, [RGBA frames]) of the preview over the view, one frame per year."""
    zone, window = view_window(state)
    ys = years(state)
    if len(ys) < 2:
        raise ExportError("an animation needs a store of several years (this one has one)")
    return zone, window, ys, [await frame(await year_model(state, y), zone, window) for y in ys]


def apng(images: list[np.ndarray], ms: int = FRAME_MS) -> bytes:
    """The RGBA frames as one looping APNG (Pillow writes a frame equal to the one before as that frame shown longer:
    `frame_years` says which years each written frame shows)."""
    from PIL import Image
    pics = [Image.fromarray(np.ascontiguousarray(a), "RGBA") for a in images]
    buf = io.BytesIO()
    pics[0].save(buf, "PNG", save_all=True, append_images=pics[1:], duration=ms, loop=0, disposal=1, blend=0)
    return buf.getvalue()


def frame_years(ys: list[int], images: list[np.ndarray]) -> list[list[int]]:
    """The years each frame of the APNG shows: consecutive years with equal images share one frame."""
    out = []
    for k, y in enumerate(ys):
        if k and np.array_equal(images[k], images[k - 1]):
            out[-1].append(y)
        else:
            out.append([y])
    return out


def sidecar(zone, window, ys: list[int], images: list[np.ndarray], ms: int = FRAME_MS) -> dict:
    g = raster.georef(zone, window)
    t = [float(x) for x in g["spatial:transform"]]
    return {"years": ys, "frames": frame_years(ys, images), "frame_ms": ms, "zone": zone.name, "window": [int(x) for x in window], "epsg": g["epsg"],
            "transform": t, "transform_order": gis.RASTERIO_ORDER, "geotransform": gis.geotransform(t),
            "geotransform_order": gis.GDAL_ORDER, "shape": [window[1] - window[0], window[3] - window[2]]}


async def export(state) -> tuple[str, bytes]:
    """(file name, zip bytes): the APNG of the preview across the years, .pgw, .png.aux.xml and .json."""
    await raster.ensure_writer("png")
    zone, window, ys, images = await frames(state)
    stem = f"tessera-{ys[0]}-{ys[-1]}-{zone.name}-preview"
    side = sidecar(zone, window, ys, images)
    files = {f"{stem}.png": apng(images), f"{stem}.pgw": gis.world_file(side["transform"]).encode(),
             f"{stem}.png.aux.xml": gis.aux_xml(side["epsg"]).encode(),
             f"{stem}.json": json.dumps(side, indent=1).encode()}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:  # stored: PNG is compressed already
        for name, data in files.items():
            z.writestr(name, data)
    return f"{stem}.zip", buf.getvalue()
