"""Raster and region exports on CPython, read back with tifffile, pyproj, Pillow and zarr-python.

Expected values are computed here from the store (zarr-python, numpy) and the convention's rules
(UTM zone from longitude, EPSG 326NN/327NN, 10 m pixels, grid corners on the 2560 m lattice),
never by the code under test.
"""
from __future__ import annotations

import io
import json
import math
import zipfile

import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image
from pyproj import CRS, Transformer

from app import api, layers, messages, raster, region
from builder.reader.source import ZarrSource
from app.session import Explorer
from app.state import UrlState
from app.tools import region as tool_region
from conftest import run_async
from tools_util import read_array


def valid_interior(store, zone: str, k: int = 0) -> tuple[int, int]:
    s = read_array(store / zone / "scales")
    ok = ~np.isnan(s)
    inner = ok.copy()
    for dy in (-2, 0, 2):
        for dx in (-2, 0, 2):
            inner &= np.roll(np.roll(ok, dy, 0), dx, 1)
    r, c = np.argwhere(inner)[len(np.argwhere(inner)) // 2 + k]
    return int(r), int(c)


def utm_epsg(lon: float, lat: float) -> int:
    """The convention's rule: WGS84 UTM zone of a longitude, north/south by latitude."""
    zone = int(math.floor((lon + 180) / 6)) + 1
    return (32700 if lat < 0 else 32600) + zone


def read_tif(data: bytes):
    with tifffile.TiffFile(io.BytesIO(data)) as tif:
        page = tif.pages.first
        tags = {t.code: t.value for t in page.tags.values()}
        return page.asarray(), tags, page.geotiff_tags, page


async def explorer_at(store, zone_name: str, span: float = 3000.0):
    state = Explorer([{"year": 2024, "url": str(store), "label": "2024"}], UrlState(), source_factory=ZarrSource)
    await state.open_year(2024)
    state.year = 2024
    zone = state.model.zones[zone_name]
    r, c = valid_interior(store, zone_name)
    lon, lat = zone.centre_lonlat(r, c)
    state.centre_view(lon, lat, span)
    await state.select(lon, lat)
    state.tools.similarity.on = True
    await state.settle()
    return state, (r, c), (lon, lat)


@pytest.mark.parametrize("zone_name", ["utm30", "utm34"])
def test_similarity_geotiff_reads_back_with_crs_transform_nodata_and_values(store, zone_name):
    state, (r, c), (lon, lat) = run_async(explorer_at(store, zone_name))
    lay = run_async(layers.layer(state, "similarity"))
    arr, tags, geo, page = read_tif(lay.geotiff())
    # CRS: the EPSG the convention gives for this longitude/latitude, via pyproj
    epsg = geo["ProjectedCSTypeGeoKey"]
    epsg = int(getattr(epsg, "value", epsg))
    assert epsg == utm_epsg(lon, lat)
    assert CRS.from_epsg(epsg).utm_zone == f"{(epsg % 100):d}{'S' if epsg > 32700 else 'N'}"
    assert geo["GTRasterTypeGeoKey"] == 1 or int(getattr(geo["GTRasterTypeGeoKey"], "value", 0)) == 1  # PixelIsArea
    # transform: 10 m pixels, the corner on the zone grid (store attrs) and its 10 m lattice
    sx, sy, _ = tags[33550]
    _, _, _, x0, y0, _ = tags[33922]
    assert (sx, sy) == (10.0, 10.0)
    t = zarr.open_group(store / zone_name, mode="r").attrs["spatial:transform"]
    assert t[2] % 2560 == 0 and t[5] % 2560 == 0  # the convention's shard lattice
    c0, r0 = (x0 - t[2]) / 10, (t[5] - y0) / 10
    assert c0 == int(c0) and r0 == int(r0)
    r0, c0 = int(r0), int(c0)
    h, w = arr.shape
    # the selected pixel's centre, from lon/lat by pyproj, lands in the tif's pixel of the selection
    e, n = Transformer.from_crs(4326, epsg, always_xy=True).transform(lon, lat)
    ti, tj = int((y0 - n) // 10), int((e - x0) // 10)
    assert (r0 + ti, c0 + tj) == (r, c)
    assert arr[ti, tj] == pytest.approx(1.0, abs=1e-6)
    # values: cosine over the same window computed here with numpy from zarr-python
    g = zarr.open_group(store / zone_name, mode="r")
    v = g["embeddings"][r0:r0 + h, c0:c0 + w].astype(np.float32) * g["scales"][r0:r0 + h, c0:c0 + w][..., None]
    target = v[ti, tj]
    with np.errstate(invalid="ignore", divide="ignore"):
        want = v @ target / (np.linalg.norm(v, axis=-1) * np.linalg.norm(target))
    assert arr.dtype == np.float32
    np.testing.assert_allclose(arr, want, rtol=0, atol=1e-5, equal_nan=True)
    # nodata: GDAL_NODATA "nan", and NaN exactly where the store has no data
    assert tags[42113].strip("\x00") == "nan"
    np.testing.assert_array_equal(np.isnan(arr), np.isnan(g["scales"][r0:r0 + h, c0:c0 + w]))


def test_similarity_png_shows_the_threshold_and_no_data_as_transparent(store):
    state, _, _ = run_async(explorer_at(store, "utm30"))
    state.tools.similarity.threshold = 0.5
    lay = run_async(layers.layer(state, "similarity"))
    img = np.asarray(Image.open(io.BytesIO(lay.png())))
    got = state.tools.similarity.result
    zone, (r0, r1, c0, c1), sim = got.zone, got.window, got.values
    assert img.shape == (r1 - r0, c1 - c0, 4)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(img[..., 3] > 0, np.isfinite(sim) & (sim >= 0.5))


def test_base_layer_geotiff_is_the_zone_preview_of_the_view(store):
    state, (r, c), _ = run_async(explorer_at(store, "utm31"))
    arr, tags, geo, page = read_tif(run_async(layers.layer(state, "base")).geotiff())
    t = zarr.open_group(store / "utm31", mode="r").attrs["spatial:transform"]
    r0, c0 = int((t[5] - tags[33922][4]) / 10), int((tags[33922][3] - t[2]) / 10)
    assert r0 <= r < r0 + arr.shape[0] and c0 <= c < c0 + arr.shape[1]
    want = zarr.open_group(store / "utm31", mode="r")["rgb"][r0:r0 + arr.shape[0], c0:c0 + arr.shape[1]]
    np.testing.assert_array_equal(arr, want)
    assert 42113 not in tags  # alpha carries no-data


def test_class_map_geotiff_is_uint8_with_palette_and_nodata(store):
    state, _, _ = run_async(explorer_at(store, "utm34"))
    zone = state.model.zones["utm34"]
    classes = np.arange(12 * 20, dtype=np.uint8).reshape(12, 20) % 3
    classes[0, 0] = 255
    palette = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255]], np.uint8)
    arr, tags, geo, page = read_tif(raster.geotiff(classes, zone, (4, 16, 8, 28), nodata=255, palette=palette))
    np.testing.assert_array_equal(arr, classes)
    assert tags[42113].strip("\x00") == "255" and page.photometric == tifffile.PHOTOMETRIC.PALETTE
    assert tuple(page.colormap[:, 1] // 257) == (0, 255, 0)
    t = zarr.open_group(store / "utm34", mode="r").attrs["spatial:transform"]
    assert tuple(tags[33922][3:5]) == (t[2] + 8 * 10, t[5] - 4 * 10)
    with pytest.raises(ValueError, match="does not fit window"):
        raster.geotiff(classes, zone, (0, 5, 0, 5))
    with pytest.raises(ValueError, match="float32 or uint8"):
        raster.geotiff(classes.astype(np.int32), zone, (4, 16, 8, 28))


def test_region_zip_equals_a_direct_zarr_read_dequantised_here(store):
    state, (r, c), (lon, lat) = run_async(explorer_at(store, "utm30", span=1500.0))
    z = zipfile.ZipFile(io.BytesIO(run_async(region.export(state))))
    got = np.load(io.BytesIO(z.read("region.npy")))
    meta = json.loads(z.read("region.json"))
    r0, r1 = meta["rows"]
    c0, c1 = meta["cols"]
    assert r0 <= r < r1 and c0 <= c < c1 and max(r1 - r0, c1 - c0) <= 768
    g = zarr.open_group(store / "utm30", mode="r")
    want = g["embeddings"][r0:r1, c0:c1].astype(np.float32) * g["scales"][r0:r1, c0:c1][..., None]
    assert got.dtype == np.float32 and got.shape == want.shape == tuple(meta["shape"])
    np.testing.assert_array_equal(got, want)  # bit-exact, NaN where no data
    assert np.isnan(got).any() and meta["nodata"] == "NaN"
    t = g.attrs["spatial:transform"]
    assert meta["transform"] == [10.0, 0.0, t[2] + c0 * 10, 0.0, -10.0, t[5] - r0 * 10]
    assert meta["epsg"] == utm_epsg(lon, lat) and meta["crs"] == f"EPSG:{utm_epsg(lon, lat)}"
    assert meta["zone"] == "utm30" and meta["year"] == 2024 and meta["store"] == str(store)
    # the pixel the view is centred on is where the sidecar's transform puts it
    e, n = Transformer.from_crs(4326, meta["epsg"], always_xy=True).transform(lon, lat)
    a, _, xo, _, ee, yo = meta["transform"]
    assert (int((n - yo) // ee), int((e - xo) // a)) == (r - r0, c - c0)


def test_exports_refuse_in_one_line_when_there_is_nothing_to_export(store):
    async def run():
        state = Explorer([{"year": 2024, "url": str(store)}], UrlState(), source_factory=ZarrSource)
        await state.open_year(2024)
        state.centre_view(100.0, 10.0, 3000)  # no zone here
        out = []
        for coro in (layers.layer(state, "similarity"), layers.layer(state, "base"), region.export(state),
                     layers.layer(state, "<b>nope</b>")):
            with pytest.raises(layers.ExportError) as e:
                await coro
            out.append(str(e.value))
        return out
    msgs = run_async(run())
    assert "no similarity map yet" in msgs[0] and "shows no zone" in msgs[1] and "shows no zone" in msgs[2]
    assert "unknown layer '<b>nope</b>'" in msgs[3] and all("\n" not in m for m in msgs)


def test_origins_setting_accepts_only_origins():
    allowed, bad = messages.allowed_origins("http://127.0.0.1:8000", " https://Docs.Example.org ,http://127.0.0.1:9001/,"
                                            "javascript:alert(1),https://x.org/path,*", ["https://a.org:443", 5])
    assert allowed == ["http://127.0.0.1:8000", "https://docs.example.org", "http://127.0.0.1:9001", "https://a.org"]
    assert bad == ["javascript:alert(1)", "https://x.org/path", "*", "5"]
    assert messages.allowed_origins("http://h:1", None, None) == (["http://h:1"], [])


def test_message_dispatch_runs_commands_and_answers_errors_in_one_line(store):
    async def run():
        state, (r, c), (lon, lat) = await explorer_at(store, "utm30")
        cmds = api.commands(state)
        ok = await messages.answer(cmds, {"tessera": 1, "id": "a", "cmd": "select", "args": [lon, lat]})
        hostile = "<img src=x onerror=\"window.__pwned=1\">"
        bad = await messages.answer(cmds, {"tessera": 1, "id": 2, "cmd": hostile, "args": []})
        args = await messages.answer(cmds, {"tessera": 1, "id": 3, "cmd": "select", "args": {"lon": 1}})
        missing = await messages.answer(cmds, {"tessera": 1, "id": 4, "cmd": "select", "args": [1.0]})
        layer = await messages.answer(cmds, {"tessera": 1, "id": 5, "cmd": "exportPNG", "args": ["nope"]})
        tif = await messages.answer(cmds, {"tessera": 1, "id": 6, "cmd": "exportGeoTIFF", "args": []})
        return ok, bad, args, missing, layer, tif, (r, c), hostile
    ok, bad, args, missing, layer, tif, (r, c), hostile = run_async(run())
    assert ok == {"tessera": 1, "id": "a", "ok": True, "result": {"zone": "utm30", "row": r, "col": c, "valid": True,
                                                                  "scale": ok["result"]["scale"]}}
    assert bad["ok"] is False and bad["id"] == 2 and f"unknown command {hostile!r}" in bad["error"]
    assert "args must be a list" in args["error"] and "missing 1 required positional argument" in missing["error"]
    assert "unknown layer 'nope'" in layer["error"]
    assert tif["ok"] and tif["result"][:4] == b"II*\x00"
    assert all("\n" not in m["error"] for m in (bad, args, missing, layer))
    assert not messages.is_ours({"cmd": "select"}) and not messages.is_ours("x") and not messages.is_ours(
        {"tessera": 2, "cmd": "pin"})


def test_a_message_of_another_contract_version_is_refused_in_one_line():
    """`"tessera"` is the contract's version (docs/embedding.md): another one is refused in one console line, and a
    message without the key is not ours (iframe-resizer's, say): no line."""
    line = messages.version_refusal({"tessera": 2, "id": 1, "cmd": "pin"}, "http://127.0.0.1:9")
    assert line == "tessera: refused a message of contract version 2 from http://127.0.0.1:9 (this explorer speaks version 1)"
    for other in ("1", True, 1.5, None, [1], {"v": 1}):
        assert f"contract version {other!r} from" in messages.version_refusal({"tessera": other, "cmd": "pin"}, "o")
        assert not messages.is_ours({"tessera": other, "cmd": "pin"})
    long = messages.version_refusal({"tessera": "<b>" + "x" * 500}, "o")
    assert "\n" not in long and len(long) < 150
    for ours_or_none in ({"tessera": 1, "cmd": "pin"}, {"cmd": "pin"}, "[iFrameSizer]message", None, [1, 2]):
        assert messages.version_refusal(ours_or_none, "o") is None
    assert messages.is_ours({"tessera": 1, "cmd": "pin"})


def test_region_is_capped_at_max_region_around_the_view_centre(store, monkeypatch):
    import app.budgets
    monkeypatch.setattr(app.budgets, "MAX_REGION", 40)  # the demo zones are smaller than 768 px
    state, (r, c), _ = run_async(explorer_at(store, "utm30", span=6000.0))
    zone, (r0, r1, c0, c1) = layers.view_window(state)
    assert zone.name == "utm30" and (r1 - r0, c1 - c0) == (40, 40)
    assert (r0 + r1) // 2 == r and (c0 + c1) // 2 == c  # centred on the pixel under the view's centre
    meta = json.loads(zipfile.ZipFile(io.BytesIO(run_async(region.export(state)))).read("region.json"))
    assert (meta["rows"], meta["cols"]) == ([r0, r1], [c0, c1]) and meta["shape"][:2] == [40, 40]


def level_item(store, zone: str, k: int) -> dict:
    g = zarr.open_group(store / zone, mode="r")
    return next(it for it in g.attrs["tessera-ovr:levels"] if it["level"] == k)


@pytest.mark.parametrize("cap", [None, 12])
def test_region_export_of_a_zoomed_out_view_is_the_levels_full_vectors(store, monkeypatch, cap):
    """20 km across the map (26 m per map pixel): the export is the whole view at overview level 2 (40 m), its
    full vectors (overviews/2/embeddings * scales), georeferenced on level 2's grid; capped at MAX_REGION per side
    around the view's centre when the view is larger, which the sidecar says."""
    if cap:
        monkeypatch.setattr("app.budgets.MAX_REGION", cap)
    state, (r, c), (lon, lat) = run_async(explorer_at(store, "utm30", span=20_000.0))
    meta_z = zipfile.ZipFile(io.BytesIO(run_async(region.export(state))))
    got, meta = np.load(io.BytesIO(meta_z.read("region.npy"))), json.loads(meta_z.read("region.json"))
    (r0, r1), (c0, c1) = meta["rows"], meta["cols"]
    assert (meta["level"], meta["pixel_size"]) == (2, 40.0)
    g = zarr.open_group(store / "utm30/overviews/2", mode="r")
    want = g["embeddings"][r0:r1, c0:c1].astype(np.float32) * g["scales"][r0:r1, c0:c1][..., None]
    assert got.dtype == np.float32 and got.shape == want.shape == tuple(meta["shape"])
    np.testing.assert_array_equal(got, want)
    t = level_item(store, "utm30", 2)["spatial:transform"]
    assert meta["transform"] == [40.0, 0.0, t[2] + c0 * 40, 0.0, -40.0, t[5] - r0 * 40]
    # the view's centre lies in the window where the sidecar's transform puts it
    e, n = Transformer.from_crs(4326, meta["epsg"], always_xy=True).transform(lon, lat)
    a, _, xo, _, ee, yo = meta["transform"]
    row, col = int((n - yo) // ee), int((e - xo) // a)
    assert 0 <= row < r1 - r0 and 0 <= col < c1 - c0
    full = meta["view_window"]
    if cap:
        assert (r1 - r0, c1 - c0) == (cap, cap) and meta["capped"] and full != [r0, r1, c0, c1]
        assert abs(row - cap // 2) <= 1 and abs(col - cap // 2) <= 1
    else:
        plan = tool_region.plan(state.model, state.render_view())
        assert (plan[0].level, tuple(plan[1])) == (2, (r0, r1, c0, c1)) and not meta["capped"]
        assert np.isfinite(want[..., 0]).sum() > 300 and full == [r0, r1, c0, c1]
    assert f"at most {cap or 768} x {cap or 768} px" in meta["max_region"]
