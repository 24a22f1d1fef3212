"""The map first: the store's global_rgb preview is painted by JavaScript before Python is ready
(state "map"), pans and zooms, and hands its view over to the Panel map (state "ready")."""
from __future__ import annotations

import math

import numpy as np
import pytest
import zarr
from pyproj import Transformer

from browser_util import wait_state

pytestmark = pytest.mark.browser

W, H = 760, 520
TO_LONLAT = Transformer.from_crs("EPSG:3857", "EPSG:4326", always_xy=True)

PREVIEW = """() => {
    const p = window.tesseraPreview;
    const d = p.base.getContext('2d').getImageData(0, 0, p.base.width, p.base.height).data;
    let s = '';
    for (let i = 0; i < d.length; i += 8192) s += String.fromCharCode(...d.subarray(i, i + 8192));
    return {state: document.body.dataset.state, python: window.tesseraApi !== undefined, frozen: p.frozen,
            hidden: document.getElementById('preview').hidden, view: {...p.view}, store: p.store,
            level: p.img.level.index, size: [p.base.width, p.base.height], pixels: btoa(s)};
}"""


RANGES = """() => { const d = Bokeh.documents[0];
    const x = d.get_model_by_name('map-x'), y = d.get_model_by_name('map-y'), f = d.get_model_by_name('map');
    return [x.start, x.end, y.start, y.end, f.width, f.height]; }"""


def snapshot(page) -> dict:
    import base64
    snap = page.evaluate(PREVIEW)
    snap["rgba"] = np.frombuffer(base64.b64decode(snap.pop("pixels")), np.uint8).reshape(snap["size"][1], snap["size"][0], 4)
    return snap


def expected_rgba(store, snap) -> np.ndarray:
    """What the canvas should show, computed here: each canvas pixel's centre taken from Web Mercator to lon/lat
    by pyproj, then the global_rgb level's pixel there (row = floor((90 - lat) / res), col likewise), read by
    zarr-python.  Pixels off the level are transparent."""
    k = snap["level"]
    res = 0.0001 * 2 ** k  # the convention's level resolutions
    arr = zarr.open_group(store / "global_rgb" / str(k), mode="r")["rgb"]
    v = snap["view"]
    xs = v["cx"] + (np.arange(W) + 0.5 - W / 2) * v["mpp"]
    ys = v["cy"] + (H / 2 - np.arange(H) - 0.5) * v["mpp"]
    lon, _ = TO_LONLAT.transform(xs, np.zeros_like(xs))
    _, lat = TO_LONLAT.transform(np.zeros_like(ys), ys)
    rows, cols = np.floor((90 - np.asarray(lat)) / res).astype(int), np.floor((np.asarray(lon) + 180) / res).astype(int)
    okr, okc = (rows >= 0) & (rows < arr.shape[0]), (cols >= 0) & (cols < arr.shape[1])
    r0, r1, c0, c1 = rows[okr].min(), rows[okr].max() + 1, cols[okc].min(), cols[okc].max() + 1
    block = arr[r0:r1, c0:c1]
    out = np.zeros((H, W, 4), np.uint8)
    out[np.ix_(okr, okc)] = block[np.ix_(rows[okr] - r0, cols[okc] - c0)]
    return out


def assert_painted_from_store(store, snap, at_least: int) -> None:
    """The canvas shows the level's pixels: alpha exactly, colour exactly where opaque and within the canvas's
    premultiplied rounding (255 / alpha) elsewhere; transparent where the store has no data.  (A pixel centre on
    a level pixel's edge may round the other way in pyproj than in the page: 0.5 % of pixels may differ.)"""
    got, want = snap["rgba"].astype(int), expected_rgba(store, snap).astype(int)
    data = want[..., 3] > 0
    assert data.sum() >= at_least, f"the view shows only {data.sum()} level pixels with data"
    tol = 255 / np.maximum(want[..., 3], 1) + 1
    same = (got[..., 3] == want[..., 3]) & np.all(np.abs(got[..., :3] - want[..., :3]) <= tol[..., None], axis=-1)
    assert same[data].mean() >= 0.995, f"{(~same[data]).sum()} of {data.sum()} pixels differ from global_rgb"
    assert (got[~data][:, 3] == 0).mean() >= 0.995  # nothing painted where the store has no data
    full = want[..., 3] == 255  # opaque pixels come through the canvas unchanged
    if full.any():
        assert (got[full] == want[full]).all(axis=1).mean() >= 0.995


def merc(lon, lat):
    return (math.radians(lon) * 6378137.0, 6378137.0 * math.log(math.tan(math.pi / 4 + math.radians(lat) / 2)))


def test_preview_paints_the_store_before_python_and_hands_a_panned_view_over(page, server, site):
    store = site / "data" / "2024.zarr"
    lon, lat = 0.0, 50.8  # the demo's Sussex tiles, either side of the Greenwich meridian
    page.goto(server + f"index.html#lon={lon}&lat={lat}&span=40000")
    page.wait_for_function("document.body.dataset.state === 'map'", timeout=60_000)
    snap = snapshot(page)
    assert snap["state"] == "map" and not snap["python"] and not snap["hidden"]
    assert snap["store"] == server + "data/2024.zarr"
    cx, cy = merc(lon, lat)
    v = snap["view"]
    assert abs(v["cx"] - cx) < 1 and abs(v["cy"] - cy) < 1
    assert abs(v["mpp"] * W * math.cos(math.radians(lat)) - 40000) < 1
    assert_painted_from_store(store, snap, 2000)

    # Drag the map 150 px left and 80 px down, then zoom in at its centre (wheel), all before Python is up.
    box = page.locator("#preview canvas.coast").bounding_box()
    mx, my = box["x"] + W / 2, box["y"] + H / 2
    page.mouse.move(mx, my)
    page.mouse.down()
    page.mouse.move(mx - 150, my + 80, steps=6)
    page.mouse.up()
    page.mouse.move(mx, my)  # the wheel zooms about the cursor: here, the centre
    page.mouse.wheel(0, -300)
    page.wait_for_function("(mpp) => window.tesseraPreview.view.mpp < mpp", arg=v["mpp"], timeout=30_000)
    moved = snapshot(page)
    assert moved["state"] == "map" and not moved["frozen"], "Python took the view over before the test moved it"
    m = moved["view"]
    assert abs(m["cx"] - (v["cx"] + 150 * v["mpp"])) < 2 * v["mpp"]
    assert abs(m["cy"] - (v["cy"] + 80 * v["mpp"])) < 2 * v["mpp"]
    assert m["mpp"] == pytest.approx(v["mpp"] * math.exp(-0.6), rel=1e-6)
    assert_painted_from_store(store, moved, 1000)  # redrawn for the new view from the same level

    # Zoom in further, about a pixel with data: once the wheel settles, the finer level for the view (the coarsest
    # whose pixel is no larger than a screen pixel) is read and painted, not the first level's blocks.
    rows, cols = np.nonzero(moved["rgba"][..., 3] > 0)
    k = np.argsort(rows * W + cols)[len(rows) // 2]
    page.mouse.move(box["x"] + cols[k] + 0.5, box["y"] + rows[k] + 0.5)
    page.mouse.wheel(0, -600)
    mpp = v["mpp"] * math.exp(-1.8)
    levels = sorted(int(p.name) for p in (store / "global_rgb").iterdir() if p.name.isdigit())
    screen_deg = mpp / (2 * math.pi * 6378137.0) * 360  # a screen pixel's width in longitude
    want = max([k for k in levels if 0.0001 * 2 ** k <= screen_deg] or levels[:1])
    assert want < moved["level"]
    page.wait_for_function("(lvl) => window.tesseraPreview.img.level.index === lvl", arg=want, timeout=30_000)
    fine = snapshot(page)
    m = fine["view"]
    assert m["mpp"] == pytest.approx(mpp, rel=1e-6) and fine["level"] == want
    assert_painted_from_store(store, fine, 500)

    assert wait_state(page) == "ready"
    ranges = page.evaluate(RANGES)
    x0, x1, y0, y1, fw, fh = ranges
    assert [fw, fh] == moved["size"] == [W, H]  # the preview has the Panel map's size
    assert abs((x0 + x1) / 2 - m["cx"]) < 0.01 * (x1 - x0)  # the Panel map opened where the user moved to
    assert abs((y0 + y1) / 2 - m["cy"]) < 0.01 * (x1 - x0)
    assert (x1 - x0) == pytest.approx(W * m["mpp"], rel=0.05)
    assert page.evaluate("document.getElementById('preview').hidden")


def test_embedded_preview_frames_the_coarsest_level_and_gives_way_to_the_app(page, server, site):
    store = site / "data" / "2024.zarr"
    page.goto(server + "index.html?embed=1")
    page.wait_for_function("document.body.dataset.state === 'map'", timeout=60_000)
    snap = snapshot(page)
    assert not snap["python"] and not snap["hidden"]
    assert page.evaluate("getComputedStyle(document.getElementById('header')).display") == "none"
    levels = sorted(int(p.name) for p in (store / "global_rgb").iterdir() if p.name.isdigit())
    # Framed on the largest group of zones (Sussex; not Sussex to the Cape, where the data were a few pixels), read
    # at about screen resolution (the coarsest level whose pixel is no larger than a screen pixel): data fill it.
    screen_deg = snap["view"]["mpp"] / (2 * math.pi * 6378137.0) * 360
    assert snap["level"] == max([k for k in levels if 0.0001 * 2 ** k <= screen_deg] or levels[:1])
    assert_painted_from_store(store, snap, 5000)
    assert wait_state(page) == "ready"
    assert page.evaluate("document.getElementById('preview').hidden")
    # No view in the hash: the Panel map opens on the preview's framing (one rule, no jump at "ready").
    last = page.evaluate("({...window.tesseraPreview.view})")
    x0, x1, y0, y1 = page.evaluate(RANGES)[:4]
    mpp = last["mpp"]
    assert abs(x0 - (last["cx"] - W / 2 * mpp)) < mpp and abs(x1 - (last["cx"] + W / 2 * mpp)) < mpp
    assert abs(y0 - (last["cy"] - H / 2 * mpp)) < mpp and abs(y1 - (last["cy"] + H / 2 * mpp)) < mpp
