"""A region's dequantised embeddings: region.npy (float32 (H, W, B), NaN where no data) and
region.json (its georeferencing), in one zip.

The region is the view's window in one zone, capped like similarity at model.MAX_REGION pixels
per side around the view's centre (app/layers.view_window). At the cap that is 768 x 768 x 128
float32 = 302 MB, so the .npy is written a row block at a time (numpy's own .npy header, then
dequantised rows) straight into an uncompressed zip, with no full float32 copy in memory.
"""
from __future__ import annotations

import asyncio
import io
import json
import zipfile

import numpy as np

from app.layers import view_window
from app.raster import georef
from builder import convention as conv

ROWS_PER_BLOCK = 32


def sidecar(zone, window, shape, year, store_url: str) -> dict:
    """region.json: what region.npy holds and where it lies."""
    r0, r1, c0, c1 = window
    g = georef(zone, window)
    return {"zone": zone.name, "epsg": g["epsg"], "crs": conv.proj_code(zone.zone, zone.south),
            "transform": g["spatial:transform"], "transform_order": "GDAL/rasterio affine a, b, c, d, e, f: "
            "x = c + col * a, y = f + row * e (top-left corner of pixel (0, 0))",
            "bbox": g["spatial:bbox"], "shape": [int(x) for x in shape], "dims": ["northing", "easting", "band"],
            "dtype": "float32", "nodata": "NaN", "rows": [r0, r1], "cols": [c0, c1], "year": year,
            "store": store_url, "dequantisation": "embeddings (int8) * scales (float32), per pixel",
            "max_region": "the view's window in one zone, at most MAX_REGION x MAX_REGION px"}


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


async def export(state) -> bytes:
    """The current view's region of the open year store, as region.npy + region.json in a zip."""
    zone, (r0, r1, c0, c1) = view_window(state)
    emb, scl = await asyncio.gather(state.model.region(zone, "embeddings", r0, r1, c0, c1),
                                    state.model.region(zone, "scales", r0, r1, c0, c1))
    meta = sidecar(zone, (r0, r1, c0, c1), emb.shape, state.model.year, state.model.source.url)
    return write_zip(np.asarray(emb, np.int8), np.asarray(scl, np.float32), meta)
