"""Georeferencing of single-band GeoTIFFs (the geotessera landmask tiles).

tifffile reads and writes the TIFF itself, through any file-like object, so a
landmask behind fsspec (s3://, http://) is read by range requests, and it
decodes the GeoKey directory (`geotiff_metadata`).  What is left here is
turning a UTM tile's ModelPixelScale + ModelTiepoint into an origin; the tags
themselves are defined in builder/core/geotags.py (shared with the explorer's
exports).  rasterio would do it too but brings all of GDAL.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import tifffile

from builder.atomic import write_bytes
from builder.core.geotags import TAG_PIXEL_SCALE, TAG_TIEPOINT, extratags


@dataclass(frozen=True)
class GeoInfo:
    epsg: int | None  # projected CRS EPSG code, None when the file names none
    origin_x: float  # coordinates of the top-left corner of pixel (0, 0)
    origin_y: float
    pixel_x: float
    pixel_y: float
    shape: tuple[int, int]
    dtype: str


def read_geoinfo(fh: BinaryIO | str) -> GeoInfo:
    """Read only the header of a GeoTIFF (no pixel data); tifffile decodes the GeoKey directory."""
    with tifffile.TiffFile(fh) as tif:
        page = tif.pages.first
        meta = tif.geotiff_metadata or {}  # None when the file has no GeoKeyDirectory
        tags = page.tags
        if TAG_PIXEL_SCALE not in tags or TAG_TIEPOINT not in tags:
            raise ValueError("not a georeferenced GeoTIFF (no ModelPixelScale/ModelTiepoint tags)")
        sx, sy = tags[TAG_PIXEL_SCALE].value[:2]
        i, j, _k, x, y = tags[TAG_TIEPOINT].value[:5]
        epsg = meta.get("ProjectedCSTypeGeoKey")
        epsg = None if epsg is None or int(epsg) in (0, 32767) else int(epsg)
        return GeoInfo(epsg=epsg, origin_x=float(x - i * sx), origin_y=float(y + j * sy),
                       pixel_x=float(sx), pixel_y=float(sy), shape=tuple(page.shape[:2]), dtype=str(page.dtype))


def read_band(fh: BinaryIO | str) -> np.ndarray:
    return tifffile.imread(fh)


def write_geotiff(path: str, data: np.ndarray, epsg: int, origin_x: float, origin_y: float,
                  pixel: float = 10.0, compression: str | None = "zlib") -> None:
    """Write a single-band GeoTIFF in a projected CRS (PixelIsArea); compression=None for a fixed size.
    Whole or not at all (builder/atomic.py)."""
    buf = io.BytesIO()
    tifffile.imwrite(buf, data, extratags=extratags(epsg, origin_x, origin_y, pixel, pixel),
                     compression=compression, tile=(256, 256))
    write_bytes(Path(path), buf.getvalue())
