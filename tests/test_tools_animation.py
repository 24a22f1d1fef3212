"""The animation export (app/tools/animation.py) on CPython: the APNG's frames, read back by Pillow, are each year's
rgb preview over the same ground (read here by zarr-python and aligned by the stores' transforms), one frame per
year, and the sidecars' transform is the window's (from the zone's spatial:transform, in both orders)."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
import zarr
from PIL import Image, ImageSequence

from app.tools import animation
from builder import demo
from conftest import PLACES, PX, run_async, run_cli
from tools_util import centre_of_data, opened, read_array


@pytest.fixture(scope="module")
def store_2023(tmp_path_factory, world):
    root = tmp_path_factory.mktemp("anim-tiles2023")
    for lon, lat in PLACES + [(-0.2, 50.85)]:  # one more tile to the west: this year's zone grid is wider
        demo.write_tile(root, 2023, lon, lat, PX, world=world)
    out = tmp_path_factory.mktemp("anim-stores2023")
    run_cli("build", str(root), "--year", "2023", "--out", str(out), "--scheduler", "threads", "-q")
    return out / "2023.zarr"


def preview_on(store, ref_store, window):
    """utm30's rgb of `store` over the ground of `window` on `ref_store`'s utm30 grid (zeros outside)."""
    t = zarr.open_group(store / "utm30", mode="r").attrs["spatial:transform"]
    t0 = zarr.open_group(ref_store / "utm30", mode="r").attrs["spatial:transform"]
    rgb = read_array(store / "utm30" / "rgb")
    dr, dc = round((t[5] - t0[5]) / 10), round((t0[2] - t[2]) / 10)
    r0, r1, c0, c1 = window
    out = np.zeros((r1 - r0, c1 - c0, 4), np.uint8)
    for r in range(r0, r1):
        for c in range(c0, c1):
            rr, cc = r + dr, c + dc
            if 0 <= rr < rgb.shape[0] and 0 <= cc < rgb.shape[1]:
                out[r - r0, c - c0] = rgb[rr, cc]
    return out


def test_the_preview_across_years_is_an_apng_of_each_years_frame_with_its_transform(store, store_2023):
    catalog = [{"year": 2023, "url": str(store_2023), "label": "2023"}, {"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        state = await opened(store, 2024, catalog=catalog)
        state.centre_view(*centre_of_data(store, "utm30"), 3000)
        return await animation.export(state)
    name, data = run_async(run())
    z = zipfile.ZipFile(io.BytesIO(data))
    stem = "tessera-2023-2024-utm30-preview"
    assert name == stem + ".zip" and sorted(z.namelist()) == sorted(
        [stem + ".png", stem + ".pgw", stem + ".png.aux.xml", stem + ".json"])
    side = json.loads(z.read(stem + ".json"))
    assert side["years"] == [2023, 2024] and side["frames"] == [[2023], [2024]] and side["zone"] == "utm30"
    r0, r1, c0, c1 = side["window"]
    assert (r1 - r0) * (c1 - c0) > 10_000
    # the frames, read back by Pillow: one per year, each that year's preview over the window's ground
    im = Image.open(io.BytesIO(z.read(stem + ".png")))
    assert im.format == "PNG" and getattr(im, "is_animated", False) and im.n_frames == 2
    got = [np.asarray(f.convert("RGBA")) for f in ImageSequence.Iterator(im)]
    want = [preview_on(store_2023, store, side["window"]), preview_on(store, store, side["window"])]
    assert not np.array_equal(want[0], want[1]) and all((w[..., 3] > 0).sum() > 1000 for w in want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # georeferencing: the window's corner and pixel on the zone's grid, read from the store here
    a, b, c, d, e, f = zarr.open_group(store / "utm30", mode="r").attrs["spatial:transform"]
    want_t = [a, b, c + c0 * a, d, e, f + r0 * e]
    assert side["transform"] == pytest.approx(want_t) and side["epsg"] == 32630
    assert side["geotransform"] == pytest.approx([want_t[2], a, b, want_t[5], d, e])
    pgw = [float(x) for x in z.read(stem + ".pgw").decode().split()]
    assert pgw == pytest.approx([a, d, b, e, want_t[2] + a / 2, want_t[5] + e / 2])
    assert "<SRS>EPSG:32630</SRS>" in z.read(stem + ".png.aux.xml").decode()


def test_a_single_year_store_has_no_animation(store):
    async def run():
        state = await opened(store, 2024)
        state.centre_view(*centre_of_data(store, "utm30"), 3000)
        with pytest.raises(animation.ExportError, match="several years"):
            await animation.export(state)
    run_async(run())
