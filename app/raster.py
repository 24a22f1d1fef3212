"""Raster exports: any layer on a zone's grid as a GeoTIFF (the zone's UTM CRS) or a PNG.

A layer is a 2-D array over a window (rows r0:r1, cols c0:c1) of one zone's 10 m grid. Every
tool's raster (similarity, class, cluster, change maps) is exported through the same two pure
functions:

  * `geotiff(values, zone, window, nodata, palette)`: float32 values (similarity, change; NaN is
    no data) or uint8 (class, cluster; `nodata` names the no-data class, `palette` writes a colour
    map) or (H, W, 4) uint8 RGBA (previews). Georeferenced by builder/core/geotags.py: the zone's EPSG
    code (builder/core/convention.py), the window's corner from the zone grid (builder/core/grid.py);
  * `png(rgba)`: what the layer looks like, one PNG pixel per grid pixel (the colours the map uses).

Neither writer is loaded at start-up in the browser: `ensure_writer(kind)` loads tifffile (a pure wheel
the site ships, boot.json `lazy_wheels`) on the first GeoTIFF export and Pillow (a Pyodide lock package
loaded in the background once the explorer is ready) before the first PNG; on CPython both are imported.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Callable

import numpy as np

from app import gis
from builder.core.zone import Zone
from builder.core import convention as conv
from builder.core import geotags

Window = tuple[int, int, int, int]  # r0, r1, c0, c1


@dataclass(frozen=True)
class RasterLayer:
    """A layer ready to export: its values on a zone window, its no-data value and its colours."""

    name: str
    values: np.ndarray
    zone: Zone
    window: Window
    nodata: float | int | None = None
    colours: Callable[[np.ndarray], np.ndarray] | None = None  # values -> RGBA (H, W, 4) uint8, for PNG
    palette: np.ndarray | None = None  # (N, 3) uint8 colours of classes 0..N-1 (uint8 layers)
    names: tuple[str, ...] | None = None  # the names of classes 0..N-1 (GDAL_METADATA and the .aux.xml)

    def geotiff(self) -> bytes:
        return geotiff(self.values, self.zone, self.window, self.nodata, self.palette, self.names)

    def png(self) -> bytes:
        return png(self.colours(self.values) if self.colours else self.values)


def georef(zone: Zone, window: Window) -> dict:
    """EPSG code and `spatial:` properties (transform, shape, bbox) of a window of the zone's grid."""
    r0, r1, c0, c1 = window
    return {"epsg": conv.epsg_for_zone(zone.zone, zone.south), **zone.grid.window_attrs(r0, r1, c0, c1)}


def _check(values: np.ndarray, window: Window) -> np.ndarray:
    r0, r1, c0, c1 = window
    v = np.asarray(values)
    if v.shape[:2] != (r1 - r0, c1 - c0):
        raise ValueError(f"layer of shape {v.shape[:2]} does not fit window rows {r0}-{r1}, cols {c0}-{c1}")
    if v.ndim == 3 and v.shape[2] == 4 and v.dtype == np.uint8:
        return v
    if v.ndim != 2:
        raise ValueError(f"a layer is 2-D (or RGBA), not of shape {v.shape}")
    if v.dtype == np.uint8:
        return v
    if np.issubdtype(v.dtype, np.floating):
        return v.astype(np.float32, copy=False)
    raise ValueError(f"a layer is float32 or uint8, not {v.dtype}")


def geotiff(values: np.ndarray, zone: Zone, window: Window, nodata=None, palette=None, names=None) -> bytes:
    """The layer as a GeoTIFF (zlib-compressed tiles) in the zone's UTM CRS; float layers have NaN as no data;
    `names` (class names) go in the GDAL_METADATA tag as band items CLASS_i (app/gis.py)."""
    import tifffile  # loaded by ensure_writer("tif") in the browser
    v = _check(values, window)
    if nodata is None and v.dtype == np.float32:
        nodata = float("nan")
    g = georef(zone, window)
    t = g["spatial:transform"]  # [a, b, c, d, e, f]: x = c + col * a, y = f + row * e
    kw = {}
    if v.ndim == 3:
        kw = dict(photometric="rgb", extrasamples=["unassalpha"])
    elif palette is not None:
        pal = np.zeros((256, 3), np.uint16)
        pal[: len(palette)] = np.asarray(palette, np.uint16)[:256]
        kw = dict(photometric="palette", colormap=(pal * 257).T)
    tags = geotags.extratags(g["epsg"], t[2], t[5], t[0], -t[4], nodata)
    if names is not None:
        tags.append((gis.TAG_GDAL_METADATA, "s", 0, gis.gdal_metadata(names).encode(), True))
    buf = io.BytesIO()
    tifffile.imwrite(buf, v, extratags=tags,
                     compression="zlib", tile=(256, 256), maxworkers=1, **kw)  # no threads in Pyodide
    return buf.getvalue()


def png(rgba: np.ndarray) -> bytes:
    """An RGBA (H, W, 4) uint8 image (or a 2-D uint8 one) as PNG, with Pillow (in the Pyodide lock)."""
    from PIL import Image
    a = np.ascontiguousarray(rgba)
    buf = io.BytesIO()
    Image.fromarray(a, "RGBA" if a.ndim == 3 else "L").save(buf, "PNG")
    return buf.getvalue()


async def ensure_writer(kind: str) -> None:
    """Make the writer of `kind` ("tif": tifffile, "png": Pillow) importable, loading it the first time in the
    browser (a load under way in the background is joined: pyodide.loadPackage runs one load at a time)."""
    module = {"tif": "tifffile", "png": "PIL"}[kind]
    try:
        __import__(module)
        return
    except ImportError:
        pass
    import js
    import pyodide_js

    from app import page
    await pyodide_js.loadPackage(page.url(str(js.tesseraBoot.lazy_wheels.tifffile)) if kind == "tif" else "pillow")
    __import__(module)
