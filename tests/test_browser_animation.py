"""The animation export in real Chromium (tesseraApi.exportAnimation and the page's "Years (APNG)" button, Pyodide's
Pillow): the APNG's frames, read back by Pillow in CPython, are each catalog year's rgb preview over the view's window
(read by zarr-python), one frame per year, with the window's transform in the sidecars, which GDAL (rasterio) reads
(tests/test_tools_animation.py checks the same on CPython)."""
from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
import zipfile

import numpy as np
import pytest
import zarr
from PIL import Image, ImageSequence

from test_browser import open_app
from test_browser_hostile import status
from test_browser_exports import api_bytes
from test_tools_animation import preview_on
from test_exports_gis import opened_quietly
from tools_util import centre_of_data, zone_vectors

pytestmark = pytest.mark.browser


def test_the_preview_across_the_catalogs_years_as_an_apng_in_chromium(page, server, site):
    ref = site / "data" / "2024.zarr"
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 3000)", list(centre_of_data(ref, "utm30")))
    data, _ = api_bytes(page, "exportAnimation")
    z = zipfile.ZipFile(io.BytesIO(data))
    (side_name,) = [n for n in z.namelist() if n.endswith(".json")]
    side = json.loads(z.read(side_name))
    years = side["years"]
    assert len(years) >= 2 and side["zone"] == "utm30" and side["frames"] == [[y] for y in years]
    im = Image.open(io.BytesIO(z.read(side_name[:-5] + ".png")))
    assert im.n_frames == len(years)
    got = [np.asarray(f.convert("RGBA")) for f in ImageSequence.Iterator(im)]
    for y, g in zip(years, got):
        want = preview_on(site / "data" / f"{y}.zarr", ref, side["window"])
        assert (want[..., 3] > 0).sum() > 1000
        np.testing.assert_array_equal(g, want)
    r0, _, c0, _ = side["window"]
    a, b, c, d, e, f = zarr.open_group(ref / "utm30", mode="r").attrs["spatial:transform"]
    assert side["transform"] == pytest.approx([a, b, c + c0 * a, d, e, f + r0 * e])


def store_years(data) -> list[int]:
    """The years of the year stores the site's catalog lists, from each store's root attributes (zarr-python).
    Not every *.zarr in data/: other tests of the session write stores there that the catalog does not list."""
    listed = json.loads((data / "catalog.json").read_text())["stores"]
    return sorted(int(zarr.open_group(data / s["url"], mode="r").attrs["tessera:year"]) for s in listed)


def test_the_years_button_downloads_the_apng_with_its_sidecars_which_gdal_opens(page, server, site, tmp_path):
    """The Export card's "Years (APNG)" button: the download is the zip of the APNG (a frame per store year, each
    that year's preview), its world file, .aux.xml and JSON; GDAL opens the PNG with its CRS and transform from the
    sidecars; the status line names the file and its size."""
    from affine import Affine

    ref = site / "data" / "2024.zarr"
    years = store_years(site / "data")
    assert len(years) >= 2
    v = zone_vectors(ref, "utm30")
    rows, cols = np.nonzero(np.isfinite(v[..., 0]))
    row, col = int(rows.mean()), int(cols.mean())  # the pixel centre_of_data gives: the view's centre
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 3000)", list(centre_of_data(ref, "utm30")))
    with page.expect_download(timeout=180_000) as dl:
        page.get_by_role("button", name="Years (APNG)", exact=True).click()
    stem = f"tessera-{years[0]}-{years[-1]}-utm30-preview"
    assert dl.value.suggested_filename == stem + ".zip"
    dl.value.save_as(tmp_path / "years.zip")
    data = (tmp_path / "years.zip").read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert sorted(z.namelist()) == sorted(stem + s for s in (".png", ".pgw", ".png.aux.xml", ".json"))
        z.extractall(tmp_path)
    side = json.loads((tmp_path / f"{stem}.json").read_text())
    assert side["years"] == years and side["zone"] == "utm30" and side["epsg"] == 32630
    r0, r1, c0, c1 = side["window"]
    assert r0 <= row < r1 and c0 <= col < c1 and abs((r0 + r1) / 2 - row) <= 1 and abs((c0 + c1) / 2 - col) <= 1
    with Image.open(tmp_path / f"{stem}.png") as im:
        assert im.format == "PNG" and im.is_animated and im.n_frames == len(years)
        got = [np.asarray(f.convert("RGBA")) for f in ImageSequence.Iterator(im)]
    for y, g in zip(years, got):
        want = preview_on(site / "data" / f"{y}.zarr", ref, side["window"])
        assert (want[..., 3] > 0).sum() > 1000
        np.testing.assert_array_equal(g, want)
    a, b, c, d, e, f = zarr.open_group(ref / "utm30", mode="r").attrs["spatial:transform"]
    transform = Affine(a, b, c + c0 * a, d, e, f + r0 * e)
    world = [float(x) for x in (tmp_path / f"{stem}.pgw").read_text().split()]  # a, d, b, e, the first pixel's centre
    assert world == pytest.approx([a, d, b, e, c + c0 * a + a / 2, f + r0 * e + e / 2])
    assert ET.parse(tmp_path / f"{stem}.png.aux.xml").getroot().tag == "PAMDataset"
    with opened_quietly(tmp_path / f"{stem}.png") as png:
        assert png.crs.to_epsg() == 32630 and png.transform.almost_equals(transform)
        assert (png.width, png.height) == (c1 - c0, r1 - r0) and png.count == 4
        np.testing.assert_array_equal(np.moveaxis(png.read(), 0, -1), got[0])  # GDAL reads the first frame
    assert f"Exported {stem}.zip: {len(data):,} bytes" in status(page)
