"""What a GIS needs beside a raster to open it as it is: the sidecar texts of a layer's exports.

  * `geotransform(t)`: an affine in rasterio's order (a, b, c, d, e, f: x = c + col * a, y = f + row * e, the
    builder's `spatial:transform`) in GDAL's GeoTransform order (c, a, b, f, d, e);
  * `world_file(t)`: the six lines of a world file (.pgw for a PNG): A, D, B, E, then the CENTRE of the top-left
    pixel (the corner plus half a pixel), as world files define it;
  * `aux_xml(epsg, names, colours)`: GDAL's PAM sidecar (.aux.xml): a PNG's CRS, and for a class raster its
    CategoryNames and ColorTable, which QGIS shows as the legend;
  * `gdal_metadata(names)`: the GDAL_METADATA TIFF tag (42112) holding the class names as band items
    CLASS_0, CLASS_1, ... inside the GeoTIFF itself.

Class names are user text: they are written as XML text (escaped by ElementTree), never as markup.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

TAG_GDAL_METADATA = 42112
RASTERIO_ORDER = ("rasterio/affine order a, b, c, d, e, f: x = c + col * a + row * b, y = f + col * d + row * e "
                  "(top-left corner of pixel (0, 0))")
GDAL_ORDER = "GDAL GeoTransform order c, a, b, f, d, e (the same affine)"


def geotransform(t) -> list[float]:
    """GDAL's GeoTransform [c, a, b, f, d, e] of a rasterio-order affine [a, b, c, d, e, f]."""
    a, b, c, d, e, f = (float(x) for x in t)
    return [c, a, b, f, d, e]


def world_file(t) -> str:
    """A world file of rasterio-order affine `t`: A, D, B, E, and the top-left pixel's centre."""
    a, b, c, d, e, f = t
    return "\n".join(repr(float(x)) for x in (a, d, b, e, c + a / 2 + b / 2, f + d / 2 + e / 2)) + "\n"


def _rgb(colour) -> tuple[int, int, int]:
    if isinstance(colour, str):
        return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return tuple(int(x) for x in colour[:3])


def aux_xml(epsg: int | None = None, names=None, colours=None) -> str:
    """GDAL's PAM .aux.xml: the CRS as EPSG:N (a PNG's; a GeoTIFF holds its own), and for a class raster (values
    0..n-1) band 1's category names and colour table (alpha 0 for every other value)."""
    root = ET.Element("PAMDataset")
    if epsg is not None:
        ET.SubElement(root, "SRS").text = f"EPSG:{int(epsg)}"
    if names is not None:
        band = ET.SubElement(root, "PAMRasterBand", band="1")
        cats = ET.SubElement(band, "CategoryNames")
        for n in names:
            ET.SubElement(cats, "Category").text = str(n)
        if colours is not None:
            table = ET.SubElement(band, "ColorTable")
            for i in range(256):
                r, g, b = _rgb(colours[i]) if i < len(colours) else (0, 0, 0)
                ET.SubElement(table, "Entry", c1=str(r), c2=str(g), c3=str(b), c4="255" if i < len(colours) else "0")
    return ET.tostring(root, encoding="unicode") + "\n"


def gdal_metadata(names) -> str:
    """The GDAL_METADATA tag's XML: band 1's items CLASS_i = the name of class i.  GDAL escapes an item's value
    for XML before the XML is written (so "&" is stored as "&amp;amp;") and unescapes it again when read: the
    value is escaped here the same way, else GDAL reads a name with "&" cut short."""
    root = ET.Element("GDALMetadata")
    for i, n in enumerate(names):
        ET.SubElement(root, "Item", name=f"CLASS_{i}", sample="0").text = escape(str(n), {'"': "&quot;"})
    return ET.tostring(root, encoding="unicode")


def palette(colours) -> list[tuple[int, int, int]]:
    """(r, g, b) of each colour ("#rrggbb" or a triple), for raster.geotiff's colour map."""
    return [_rgb(c) for c in colours]
