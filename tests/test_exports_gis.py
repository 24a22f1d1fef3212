"""Exports a GIS opens as they are, read back with rasterio (GDAL) and tifffile, never with the code under test.

  * class and cluster GeoTIFFs carry a colour table (the map's colours) and the class names (GDAL_METADATA in
    the file; CategoryNames and ColorTable in the .tif.aux.xml a GIS reads beside it);
  * the PNG comes with a world file (.pgw) and a .png.aux.xml naming its CRS, so GDAL places it;
  * region.json gives the transform in rasterio's order (a, b, c, d, e, f) and GDAL's GeoTransform order.
"""
from __future__ import annotations

import io
import json
import warnings
import xml.etree.ElementTree as ET
import zipfile
from xml.sax.saxutils import unescape

import numpy as np
import pytest
import rasterio
import tifffile
import zarr
from affine import Affine

from app import layers, region
from app.tools import cluster as cluster_tool
from conftest import run_async
from tools_util import centre_of_data, opened, pixel_lonlat, training_pixels

HOSTILE = '<b onmouseover="alert(1)">forest</b> & "trees"'


def hex_rgb(c: str) -> tuple[int, int, int]:
    return tuple(int(c[i:i + 2], 16) for i in (1, 3, 5))


async def classified(store, world):
    state = await opened(store)
    state.centre_view(*centre_of_data(store, "utm30"), 2500)
    await state.settle()
    train = training_pixels(store, "utm30", world, 2024)
    for r, c, k in train:
        await state.tools.labels.add(*pixel_lonlat(store, "utm30", r, c), cls=HOSTILE if k == train[0][2] else f"class {k}")
    assert await state.tools.classify.classify("k-NN") is not None
    await state.tools.cluster.cluster(4, 0)
    return state


def unzip(data: bytes, to) -> list[str]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        z.extractall(to)
        return sorted(z.namelist())


def opened_quietly(path):
    """rasterio.open with GDAL's warnings made errors (a sidecar GDAL cannot parse warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return rasterio.open(path)


@pytest.mark.parametrize("name", ["class", "cluster"])
def test_class_and_cluster_geotiffs_carry_colour_table_and_class_names(store, world, tmp_path, name):
    state = run_async(classified(store, world))
    tool = state.tools.classify if name == "class" else state.tools.cluster
    layer = state.tools.layer(name)
    names = tool.names if name == "class" else [f"cluster {i}" for i in range(4)]
    colours = tool.colours if name == "class" else cluster_tool.colours(4)
    assert HOSTILE in state.tools.classify.names
    file, data, mime, _ = run_async(layers.download(state, name, "gis"))
    assert file == f"tessera-2024-utm30-{name}-gis.zip" and mime == "application/zip"
    stem = f"tessera-2024-utm30-{name}"
    assert unzip(data, tmp_path) == sorted([f"{stem}.tif", f"{stem}.tif.aux.xml", f"{stem}.png", f"{stem}.pgw",
                                            f"{stem}.png.aux.xml"] + ["tessera-2024-class-evaluation.json"] * (name == "class"))
    if name == "class":  # the held-out report of the model that drew the map (tests/test_tools_evaluate.py)
        ev = json.loads((tmp_path / "tessera-2024-class-evaluation.json").read_text())
        assert ev == json.loads(json.dumps(state.tools.classify.evaluation)) and ev["classes"][0]["name"] in names
    want = np.where(np.isfinite(layer.values), layer.values, 255).astype(np.uint8)
    # tifffile: a palette TIFF whose colour map holds the class colours (16 bit), GDAL_METADATA holds the names
    with tifffile.TiffFile(tmp_path / f"{stem}.tif") as tif:
        page = tif.pages.first
        assert page.photometric == tifffile.PHOTOMETRIC.PALETTE
        np.testing.assert_array_equal(page.asarray(), want)
        for i, c in enumerate(colours):
            assert tuple(int(x) // 257 for x in page.colormap[:, i]) == hex_rgb(c)
        meta = ET.fromstring(page.tags[42112].value)  # item values escaped once more, as GDAL writes them
        items = {(e.get("name"), e.get("sample")): unescape(e.text, {"&quot;": '"'}) for e in meta.iter("Item")}
        assert [items[(f"CLASS_{i}", "0")] for i in range(len(names))] == names
    # GDAL (rasterio) reads the colour table, CRS, transform and no-data, and the sidecar without complaint
    with opened_quietly(tmp_path / f"{stem}.tif") as src:
        cmap = src.colormap(1)
        assert [cmap[i][:3] for i in range(len(colours))] == [hex_rgb(c) for c in colours]
        assert src.crs.to_epsg() == 32630 and src.nodata == 255
        t = zarr.open_group(store / "utm30", mode="r").attrs["spatial:transform"]
        r0, _, c0, _ = layer.window
        assert src.transform == Affine(10.0, 0.0, t[2] + c0 * 10, 0.0, -10.0, t[5] - r0 * 10)
        assert [src.tags(1)[f"CLASS_{i}"] for i in range(len(names))] == names
        np.testing.assert_array_equal(src.read(1), want)
    # the .aux.xml: GDAL's PAM CategoryNames and ColorTable, the names as text (escaped XML, parsed back equal)
    aux = ET.parse(tmp_path / f"{stem}.tif.aux.xml").getroot()
    assert [c.text or "" for c in aux.find("PAMRasterBand/CategoryNames")][:len(names)] == names
    entries = aux.findall("PAMRasterBand/ColorTable/Entry")
    assert [(int(e.get("c1")), int(e.get("c2")), int(e.get("c3"))) for e in entries[:len(colours)]] == \
        [hex_rgb(c) for c in colours]
    assert "<b " not in (tmp_path / f"{stem}.tif.aux.xml").read_text()  # markup in a name is escaped text
    # the PNG: GDAL places it by its world file and reads its CRS from the .aux.xml
    with opened_quietly(tmp_path / f"{stem}.png") as src:
        assert src.crs.to_epsg() == 32630
        assert src.transform == Affine(10.0, 0.0, t[2] + c0 * 10, 0.0, -10.0, t[5] - r0 * 10)
        assert src.shape == want.shape and src.count == 4
        np.testing.assert_array_equal(src.read(4) > 0, want != 255)


def test_similarity_gis_bundle_has_no_class_names_and_a_world_file(store, world, tmp_path):
    """A float layer: GeoTIFF with NaN no data, no colour table; its PNG georeferenced by .pgw (pixel centres)."""
    async def run():
        state = await classified(store, world)
        await state.select(*centre_of_data(store, "utm30"))
        state.tools.similarity.on = True
        await state.settle()
        return await layers.download(state, "similarity", "gis")
    file, data, _, lays = run_async(run())
    names = unzip(data, tmp_path)
    stem = "tessera-2024-utm30-similarity"
    assert names == sorted([f"{stem}.tif", f"{stem}.png", f"{stem}.pgw", f"{stem}.png.aux.xml"])
    with opened_quietly(tmp_path / f"{stem}.tif") as tif, opened_quietly(tmp_path / f"{stem}.png") as png:
        assert tif.transform == png.transform and tif.crs == png.crs and np.isnan(tif.nodata)
        with pytest.raises(ValueError):
            tif.colormap(1)
    # the world file's six lines: A, D, B, E, then the centre of the top-left pixel (the corner + half a pixel)
    a, d, b, e, cx, cy = (float(x) for x in (tmp_path / f"{stem}.pgw").read_text().split())
    t = Affine(*lays[0].zone.grid.window_attrs(*lays[0].window)["spatial:transform"])
    assert (a, d, b, e) == (10.0, 0.0, 0.0, -10.0) and (cx, cy) == (t.c + 5.0, t.f - 5.0)


def test_region_json_names_both_transform_orders(store, tmp_path):
    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm30"), 1500)
        await state.settle()
        return await region.export(state)
    z = zipfile.ZipFile(io.BytesIO(run_async(run())))
    meta = json.loads(z.read("region.json"))
    a = Affine(*meta["transform"])
    assert Affine.from_gdal(*meta["geotransform"]) == a  # GDAL's GeoTransform (c, a, b, f, d, e)
    assert "rasterio" in meta["transform_order"] and "GDAL" not in meta["transform_order"]
    assert "GDAL" in meta["geotransform_order"]
    # the same placement as GDAL gives the .npy written as a GeoTIFF with that GeoTransform
    arr = np.load(io.BytesIO(z.read("region.npy")))
    path = tmp_path / "r.tif"
    with rasterio.open(path, "w", driver="GTiff", width=arr.shape[1], height=arr.shape[0], count=1,
                       dtype="float32", crs=f"EPSG:{meta['epsg']}", transform=Affine.from_gdal(*meta["geotransform"])) as dst:
        dst.write(arr[..., 0], 1)
    with rasterio.open(path) as src:
        assert list(src.bounds) == pytest.approx(meta["bbox"])
