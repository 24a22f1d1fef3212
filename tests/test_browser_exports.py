"""Exports and postMessage commands in real headless Chromium on real Pyodide, read back on CPython."""
from __future__ import annotations

import base64
import io
import json
import shutil
import zipfile

import numpy as np
import pytest
import zarr
from pyproj import Transformer

from browser_util import REPO, all_text, static_server, wait_state, wait_text
from test_browser import interior_valid, pixel_lonlat
from test_exports import read_tif, utm_epsg

pytestmark = pytest.mark.browser
ARTIFACTS = REPO / "artifacts"
B64 = """(b) => { let s = ''; for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
                return btoa(s); }"""


def api_bytes(target, call: str, *args) -> tuple[bytes, float]:
    """Run `await tesseraApi.<call>(...args)` in a page or frame; its Uint8Array and the time it took (ms)."""
    out = target.evaluate(f"""async (args) => {{
        const t0 = performance.now();
        const b = await window.tesseraApi.{call}(...args);
        const ms = performance.now() - t0;
        if (!(b instanceof Uint8Array)) throw new Error('not a Uint8Array: ' + b);
        return [({B64})(b), ms]; }}""", list(args))
    return base64.b64decode(out[0]), out[1]


def cosine_truth(store, zone: str, r0: int, c0: int, h: int, w: int, ti: int, tj: int) -> np.ndarray:
    g = zarr.open_group(store / zone, mode="r")
    v = g["embeddings"][r0:r0 + h, c0:c0 + w].astype(np.float32) * g["scales"][r0:r0 + h, c0:c0 + w][..., None]
    t = v[ti, tj]
    with np.errstate(invalid="ignore", divide="ignore"):
        return v @ t / (np.linalg.norm(v, axis=-1) * np.linalg.norm(t))


def check_similarity_tif(data: bytes, store, zone: str, lon: float, lat: float, rc: tuple[int, int]) -> None:
    """The GeoTIFF's CRS, transform, nodata and values against pyproj and numpy on the store."""
    arr, tags, geo, _ = read_tif(data)
    epsg = int(getattr(geo["ProjectedCSTypeGeoKey"], "value", geo["ProjectedCSTypeGeoKey"]))
    assert epsg == utm_epsg(lon, lat)
    assert tuple(tags[33550][:2]) == (10.0, 10.0) and tags[42113].strip("\x00") == "nan"
    x0, y0 = tags[33922][3:5]
    t = zarr.open_group(store / zone, mode="r").attrs["spatial:transform"]
    r0, c0 = int((t[5] - y0) / 10), int((x0 - t[2]) / 10)
    assert (t[5] - y0) % 10 == 0 and (x0 - t[2]) % 10 == 0
    e, n = Transformer.from_crs(4326, epsg, always_xy=True).transform(lon, lat)
    ti, tj = int((y0 - n) // 10), int((e - x0) // 10)
    assert (r0 + ti, c0 + tj) == rc
    want = cosine_truth(store, zone, r0, c0, *arr.shape, ti, tj)
    np.testing.assert_allclose(arr, want, rtol=0, atol=1e-5, equal_nan=True)
    assert np.isnan(arr).any() and np.isfinite(arr).sum() > 1000


def test_exports_through_tesseraapi_read_back_on_cpython(page, server, site, tmp_path):
    store = site / "data" / "2024.zarr"
    row, col = interior_valid(store, "utm30")
    lon, lat = pixel_lonlat(store, "utm30", row, col)
    page.goto(server + "index.html")
    assert wait_state(page) == "ready"
    boot = json.loads((site / "boot.json").read_text())
    assert not any("tifffile" in w for w in boot["wheels"]) and "tifffile" in boot["lazy_wheels"]
    assert not any("tifffile" in u for u in page.requests_seen)  # not loaded at start-up
    page.evaluate("async ([lon, lat]) => { await tesseraApi.view(lon, lat, 4000); await tesseraApi.select(lon, lat);"
                  " await tesseraApi.similarity(true); }", [lon, lat])
    tif, first_ms = api_bytes(page, "exportGeoTIFF", "similarity")
    assert sum("tifffile" in u for u in page.requests_seen) == 1  # loaded on first use, once
    check_similarity_tif(tif, store, "utm30", lon, lat, (row, col))
    tif2, again_ms = api_bytes(page, "exportGeoTIFF", "similarity")
    assert tif2 == tif and sum("tifffile" in u for u in page.requests_seen) == 1
    # the page's button saves the same bytes
    with page.expect_download() as dl:
        page.get_by_role("button", name="GeoTIFF", exact=True).click()
    assert dl.value.suggested_filename == "tessera-2024-utm30-similarity.tif"
    dl.value.save_as(tmp_path / "button.tif")
    assert (tmp_path / "button.tif").read_bytes() == tif
    # PNG of the layer: transparent where below the threshold or no data
    png, png_ms = api_bytes(page, "exportPNG", "similarity")
    from PIL import Image
    img = np.asarray(Image.open(io.BytesIO(png)))
    arr = read_tif(tif)[0]
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(img[..., 3] > 0, np.isfinite(arr) & (arr >= 0.8))
    # region: .npy + JSON sidecar equal to zarr-python and dequantisation here
    page.evaluate("window.tesseraWorker.resetStats()")
    data, region_ms = api_bytes(page, "exportRegion")
    fetched = page.evaluate("window.tesseraWorker.stats().then((s) => s.log)")
    z = zipfile.ZipFile(io.BytesIO(data))
    got, meta = np.load(io.BytesIO(z.read("region.npy"))), json.loads(z.read("region.json"))
    (r0, r1), (c0, c1) = meta["rows"], meta["cols"]
    g = zarr.open_group(store / "utm30", mode="r")
    want = g["embeddings"][r0:r1, c0:c1].astype(np.float32) * g["scales"][r0:r1, c0:c1][..., None]
    np.testing.assert_array_equal(got, want)
    t = g.attrs["spatial:transform"]
    assert meta["transform"] == [10.0, 0.0, t[2] + c0 * 10, 0.0, -10.0, t[5] - r0 * 10]
    assert meta["epsg"] == 32630 and meta["year"] == 2024 and meta["store"].endswith("/data/2024.zarr")
    # an export that cannot be made rejects with one line, and the page keeps working
    err = page.evaluate("async () => { try { await tesseraApi.exportPNG('nope'); return 'resolved'; }"
                        " catch (e) { return e.message; } }")
    assert err.startswith("unknown layer 'nope'") and "\n" not in err
    base, _ = api_bytes(page, "exportGeoTIFF", "base")
    assert read_tif(base)[0].shape[2] == 4
    print(f"\nexport figures (demo, 256 px tiles): GeoTIFF similarity {len(tif):,} B first {first_ms:.0f} ms "
          f"(tifffile load included) then {again_ms:.0f} ms; PNG {len(png):,} B {png_ms:.0f} ms; region "
          f"{got.shape} {len(data):,} B {region_ms:.0f} ms, {len(fetched)} requests "
          f"{sum(e.get('bytes', 0) for e in fetched):,} B fetched")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "exports.png"), full_page=True)


@pytest.fixture()
def host(site, tmp_path):
    """A second server on another 127.0.0.1 port serving the site's own embed.html (another origin)."""
    root = tmp_path / "host"
    root.mkdir()
    shutil.copy(site / "embed.html", root / "embed.html")
    (root / "index.html").write_text("<!doctype html><title>host</title>")
    with static_server(root) as base:
        yield base


def explorer_frame(page):
    page.wait_for_function("() => document.getElementById('viewer').contentWindow !== null")
    frame = next(f for f in page.frames if f is not page.main_frame and "index.html" in f.url)
    frame.wait_for_function("document.body.dataset.state === 'ready'", timeout=120_000)
    return frame


def test_postmessage_from_a_listed_origin_drives_the_iframe(page, server, site, host):
    store = site / "data" / "2024.zarr"
    row, col = interior_valid(store, "utm31")
    lon, lat = pixel_lonlat(store, "utm31", row, col)
    page.goto(host + f"embed.html?explorer={server}index.html")
    page.wait_for_function("document.getElementById('state').textContent === 'ready'", timeout=120_000)
    frame = explorer_frame(page)
    assert f"origins={host.rstrip('/')}".replace(":", "%3A").replace("/", "%2F") in frame.url
    res = page.evaluate("""async ([lon, lat]) => {
        const went = await tessera('goto', `${lon},${lat}`);
        const view = await tessera('view', lon, lat, 4000);
        const px = await tessera('select', lon, lat);
        const sim = await tessera('similarity', true);
        return {went, px, sim}; }""", [lon, lat])
    assert res["went"]["kind"] == "point" and res["sim"] is True
    assert (res["px"]["zone"], res["px"]["row"], res["px"]["col"], res["px"]["valid"]) == ("utm31", row, col, True)
    assert frame.evaluate("([lon, lat]) => tesseraApi.simAt(lon, lat)", [lon, lat]) == pytest.approx(1.0)
    b64 = page.evaluate(f"async () => ({B64})(await tessera('exportGeoTIFF', 'similarity'))")
    check_similarity_tif(base64.b64decode(b64), store, "utm31", lon, lat, (row, col))
    # hostile text in an error comes back and is shown literally, and runs nowhere
    hostile = '<img src=x onerror="window.__pwned=1">'
    err = page.evaluate("async (cmd) => { try { await tessera(cmd); return 'resolved'; } catch (e) { return e.message; } }",
                        hostile)
    assert err.startswith(f"unknown command {hostile!r}")
    wait_text(frame, hostile, 30_000)  # the iframe's status line shows it as text
    assert hostile in all_text(frame)
    page.get_by_role("button", name="Select", exact=True).click()  # the example page's own controls work too
    page.wait_for_function("document.getElementById('log').textContent.includes('select:')", timeout=60_000)
    assert page.evaluate("window.__pwned") is None and frame.evaluate("window.__pwned") is None
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "embed-postmessage.png"), full_page=True)


def test_postmessage_from_an_origin_not_listed_is_refused(page, server, host):
    page.goto(host + f"embed.html?explorer={server}index.html&origins=http://127.0.0.1:1")
    frame = explorer_frame(page)
    before = frame.evaluate("location.hash")
    with page.expect_console_message(lambda m: f"refused a message from {host.rstrip('/')}" in m.text,
                                     timeout=30_000):
        page.evaluate("() => { window.refused = tessera('view', 18.45, -33.95, 1000)"
                      ".then(() => 'resolved', (e) => 'rejected: ' + e.message); }")
    # a same-origin message sent after it is answered: the refused one was handled (dropped) before
    ok = frame.evaluate("""() => new Promise((resolve) => {
        addEventListener('message', (e) => { if (e.data && e.data.id === 'probe' && 'ok' in e.data) resolve(e.data.ok); });
        postMessage({tessera: 1, id: 'probe', cmd: 'pin', args: []}, location.origin); })""")
    assert ok is True
    assert frame.evaluate("location.hash") == before  # no action
    assert page.evaluate("window.tesseraPending.size") == 1  # no reply
    assert page.evaluate("document.getElementById('state').textContent") != "ready"  # no ready event either


def test_gis_bundle_of_a_class_map_opens_in_gdal(page, server, site, tmp_path):
    """tesseraApi.exportGIS('class') in Chromium: the GeoTIFF with its colour table and class names (one named with
    HTML), its .aux.xml, the PNG with its world file and .aux.xml, read back by GDAL (rasterio) on CPython."""
    import xml.etree.ElementTree as ET

    import rasterio
    from affine import Affine

    from builder import demo
    from test_exports_gis import HOSTILE, hex_rgb, opened_quietly
    from tools_util import training_pixels

    store = site / "data" / "2024.zarr"
    row, col = interior_valid(store, "utm30")
    page.goto(server + "index.html")
    assert wait_state(page) == "ready"
    page.evaluate("async ([lon, lat]) => await tesseraApi.view(lon, lat, 3000)", list(pixel_lonlat(store, "utm30", row, col)))
    train = training_pixels(store, "utm30", demo.World(), 2024, per_class=6)
    for r, c, k in train:
        page.evaluate("async ([lon, lat, cls]) => await tesseraApi.label(lon, lat, cls)",
                      [*pixel_lonlat(store, "utm30", r, c), HOSTILE if k == train[0][2] else f"class {k}"])
    res = page.evaluate("async () => await tesseraApi.classify('k-NN', {seed: 0})")
    names = list(res["names"])
    colour_of = dict(map(tuple, json.loads(page.evaluate("tesseraApi.labels()"))["classes"]))
    colours = [colour_of[n] for n in names]
    assert HOSTILE in names
    data, ms = api_bytes(page, "exportGIS", "class")
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        z.extractall(tmp_path)
        files = sorted(z.namelist())
    stem = "tessera-2024-utm30-class"
    assert files == sorted([f"{stem}{s}" for s in (".tif", ".tif.aux.xml", ".png", ".pgw", ".png.aux.xml")]
                           + ["tessera-2024-class-evaluation.json"])
    ev = json.loads((tmp_path / "tessera-2024-class-evaluation.json").read_text())
    assert ev == res["evaluation"]
    # the held-out report agrees with scikit-learn's cross_val_predict in CPython on the same vectors
    from sklearn.metrics import confusion_matrix
    from test_tools_evaluate import reference
    from tools_util import zone_vectors
    v = zone_vectors(store, "utm30")
    X = np.stack([v[r, c] for r, c, _ in train])
    y = np.array([names.index(HOSTILE if k == train[0][2] else f"class {k}") for _, _, k in train])
    folds = min(5, int(np.bincount(y).min()))
    assert ev["folds"] == folds
    pred = reference("k-NN", X, y, len(names), 0, folds)
    assert ev["accuracy"] == float((pred == y).mean())
    np.testing.assert_array_equal(ev["confusion"], confusion_matrix(y, pred, labels=range(len(names))))
    assert "Held-out: accuracy" in all_text(page) and page.evaluate("window.__pwned") is None
    with opened_quietly(tmp_path / f"{stem}.tif") as tif, opened_quietly(tmp_path / f"{stem}.png") as png:
        cmap = tif.colormap(1)
        assert [cmap[i][:3] for i in range(len(colours))] == [hex_rgb(c) for c in colours]
        assert [tif.tags(1)[f"CLASS_{i}"] for i in range(len(names))] == names
        assert tif.crs.to_epsg() == 32630 == png.crs.to_epsg() and tif.transform == png.transform
        t = zarr.open_group(store / "utm30", mode="r").attrs["spatial:transform"]
        assert (tif.transform.a, tif.transform.e) == (10.0, -10.0)
        assert (tif.transform.c - t[2]) % 10 == 0 and (t[5] - tif.transform.f) % 10 == 0
        np.testing.assert_array_equal(png.read(4) > 0, tif.read(1) != 255)
    aux = ET.parse(tmp_path / f"{stem}.tif.aux.xml").getroot()
    assert [c.text for c in aux.find("PAMRasterBand/CategoryNames")] == names
    assert page.evaluate("window.__pwned") is None
    # label files: a CSV exported by the page reads back by the csv module; a bad KML is refused in one line
    import csv as csvmod
    text = page.evaluate("tesseraApi.exportLabelsCSV()")
    rows = list(csvmod.DictReader(io.StringIO(text)))
    assert len(rows) == len(train) and HOSTILE in {r["class"] for r in rows}
    page.evaluate("tesseraApi.clearLabels()")
    deep = "<kml>" + "<Folder>" * 100 + "</Folder>" * 100 + "</kml>"
    assert page.evaluate("async ([t]) => await tesseraApi.importLabels(t, 'deep.kml')", [deep]) == 0
    assert "deep.kml: nested deeper than 64 levels" in all_text(page)
    assert page.evaluate("async ([t]) => await tesseraApi.importLabels(t, 'mine.csv')", [text]) == len(train)
    assert HOSTILE in all_text(page) and page.evaluate("window.__pwned") is None
    print(f"\nGIS bundle of the class map: {len(data):,} B in {ms:.0f} ms")
