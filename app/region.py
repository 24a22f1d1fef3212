"""A region's dequantised embeddings: region.npy (float32 (H, W, B), NaN where no data) and
region.json (its georeferencing), in one zip.

The region is the view's window in one zone (app/tools/region.py plan), at most budgets.MAX_REGION pixels per
side around the view's centre: zoomed in (level 0) the zone's 10 m vectors, as similarity reads them
without overviews; zoomed out, when the zone has embedding overviews (tessera-ovr:), the full vectors of
the view's overview level (overviews/k/embeddings * scales: 2x2 means, 10 x 2^k m pixels), georeferenced on
that level's grid.  At the cap that is 768 x 768 x 128 float32 = 302 MB, so the .npy is written a row block
at a time (numpy's own .npy header, then dequantised rows) straight into an uncompressed zip, with no full
float32 copy in memory.
"""
from __future__ import annotations

import asyncio
import io
import json
import zipfile

import numpy as np

from app import budgets, gis  # MAX_REGION, looked up at call time
from app.layers import ExportError
from app.raster import georef
from app.tools import region as tool_region
from builder.core import convention as conv

ROWS_PER_BLOCK = 32


def sidecar(zone, window, shape, year, store_url: str, full=None) -> dict:
    """region.json: what region.npy holds and where it lies (on the grid of the zone's level `zone.level`)."""
    r0, r1, c0, c1 = window
    full = tuple(window if full is None else full)
    g = georef(zone, window)
    k, side = zone.level, budgets.MAX_REGION
    arrays = "embeddings (int8) * scales (float32)" if not k else \
        f"overviews/{k}/embeddings (int8) * overviews/{k}/scales (float32), 2x2 means of level {k - 1}"
    return {"zone": zone.name, "epsg": g["epsg"], "crs": conv.proj_code(zone.zone, zone.south),
            "transform": g["spatial:transform"], "transform_order": gis.RASTERIO_ORDER,
            "geotransform": gis.geotransform(g["spatial:transform"]), "geotransform_order": gis.GDAL_ORDER,
            "bbox": g["spatial:bbox"], "shape": [int(x) for x in shape], "dims": ["northing", "easting", "band"],
            "dtype": "float32", "nodata": "NaN", "rows": [r0, r1], "cols": [c0, c1], "year": year,
            "store": store_url, "level": k, "pixel_size": zone.pixel,
            "dequantisation": f"{arrays}, per pixel",
            "view_window": [int(x) for x in full], "capped": full != tuple(window),
            "max_region": f"the view's window in one zone at its overview level (the finest whose pixel is at least "
                          f"the map's metres per pixel; 10 m without overviews), at most {side} x {side} px "
                          "around the view's centre (view_window: the whole view on that grid)"}


def write_zip(emb: np.ndarray, scl: np.ndarray, meta: dict) -> bytes:
    """region.npy and region.json, zipped without compression; the .npy streamed by row blocks."""
    h, w, b = emb.shape
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        with z.open("region.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (h, w, b)})
            for i in range(0, h, ROWS_PER_BLOCK):
                f.write(conv.dequantise(emb[i:i + ROWS_PER_BLOCK], scl[i:i + ROWS_PER_BLOCK]).astype("<f4").tobytes())
        z.writestr("region.json", json.dumps(meta, indent=1))
    return buf.getvalue()


def export_window(state):
    """(zone at the view's overview level, window capped at MAX_REGION per side around the view's centre, the
    view's whole window on that grid); ExportError when there is nothing to export."""
    if state.model is None:
        raise ExportError("no store is open")
    v = state.render_view()
    p = tool_region.plan(state.model, v)
    if p is None:
        raise ExportError("the view shows no zone of this store")
    zone, full = p[0], p[2]
    if not zone.level:  # 10 m: the capped view window (plan does not cap a level-0 code window)
        return tool_region.view_window(state.model, v)
    return zone, tool_region.cap(full, tool_region.centre(zone, v), budgets.MAX_REGION), full


async def export(state) -> bytes:
    """The current view's region of the open year store, as region.npy + region.json in a zip."""
    zone, (r0, r1, c0, c1), full = export_window(state)
    m = state.model
    read = m.overview if zone.level else m.region
    emb, scl = await asyncio.gather(read(zone, "embeddings", r0, r1, c0, c1), read(zone, "scales", r0, r1, c0, c1))
    meta = sidecar(zone, (r0, r1, c0, c1), emb.shape, m.year, m.source.url, full)
    return write_zip(np.asarray(emb, np.int8), np.asarray(scl, np.float32), meta)
