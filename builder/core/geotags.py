"""The GeoTIFF tags of a north-up raster in a projected CRS: what they hold, in one place.

tifffile reads and writes TIFFs but leaves the meaning of the GeoTIFF tags to its caller. These
few definitions are shared by the builder (reading and writing landmask tiles, builder/geotiff.py)
and the explorer (raster exports in the browser, app/raster.py), so the core stays stdlib-only.

  * ModelPixelScale (33550): (pixel width, pixel height, 0);
  * ModelTiepoint (33922): raster point (0, 0, 0) -> the model point of the top-left corner of
    pixel (0, 0) (PixelIsArea);
  * GeoKeyDirectory (34735): model type projected, raster type PixelIsArea, the EPSG code;
  * GDAL_NODATA (42113): the no-data value as ASCII text ("nan" for NaN), as GDAL reads it.
"""
from __future__ import annotations

import math

TAG_PIXEL_SCALE = 33550
TAG_TIEPOINT = 33922
TAG_GEOKEYS = 34735
TAG_GDAL_NODATA = 42113
KEY_MODEL_TYPE = 1024  # 1 = projected
KEY_RASTER_TYPE = 1025  # 1 = PixelIsArea
KEY_PROJECTED_CRS = 3072


def geokeys(epsg: int) -> list[int]:
    """The GeoKeyDirectory of a projected CRS given by its EPSG code (every key inline)."""
    return [1, 1, 0, 3,
            KEY_MODEL_TYPE, 0, 1, 1,
            KEY_RASTER_TYPE, 0, 1, 1,
            KEY_PROJECTED_CRS, 0, 1, int(epsg)]


def nodata_text(nodata) -> str:
    """GDAL_NODATA's ASCII form of a no-data value."""
    if isinstance(nodata, float) and math.isnan(nodata):
        return "nan"
    return repr(nodata) if isinstance(nodata, float) else str(int(nodata))


def extratags(epsg: int, origin_x: float, origin_y: float, pixel_x: float, pixel_y: float,
              nodata=None) -> list[tuple]:
    """tifffile `extratags` georeferencing a raster whose pixel (0, 0) has its top-left corner at
    (origin_x, origin_y), rows going south by pixel_y and columns east by pixel_x."""
    keys = geokeys(epsg)
    tags = [(TAG_PIXEL_SCALE, "d", 3, (float(pixel_x), float(pixel_y), 0.0), True),
            (TAG_TIEPOINT, "d", 6, (0.0, 0.0, 0.0, float(origin_x), float(origin_y), 0.0), True),
            (TAG_GEOKEYS, "H", len(keys), keys, True)]
    if nodata is not None:
        tags.append((TAG_GDAL_NODATA, "s", 0, nodata_text(nodata), True))
    return tags
