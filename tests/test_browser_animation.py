"""The animation export in real Chromium (tesseraApi.exportAnimation, Pyodide's Pillow): the APNG's frames, read
back by Pillow in CPython, are each catalog year's rgb preview over the view's window (read by zarr-python), one
frame per year, with the window's transform in the sidecars (tests/test_tools_animation.py checks the same on
CPython)."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
import zarr
from PIL import Image, ImageSequence

from test_browser import open_app
from test_browser_exports import api_bytes
from test_tools_animation import preview_on
from tools_util import centre_of_data

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
