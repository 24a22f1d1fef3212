"""The analysis tools in real headless Chromium (Pyodide, scikit-learn loaded on first use), each checked
against the same computation in CPython (scikit-learn / numpy on zarr-python reads of the same store)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import zarr
from pyproj import Transformer

from browser_util import REPO, all_text, wait_state
from builder import demo
from tools_util import level_change, level_full, pixel_lonlat, training_pixels, zone_vectors

pytestmark = pytest.mark.browser
ARTIFACTS = REPO / "artifacts"
HOSTILE = "<img src=x onerror=\"window.__pwned=1\">"


def rowcol(store, zone, lon, lat):
    g = zarr.open_group(store / zone, mode="r")
    t = g.attrs["spatial:transform"]
    e, n = Transformer.from_crs(4326, int(g.attrs["proj:code"].split(":")[1]), always_xy=True).transform(lon, lat)
    return int(np.floor((t[5] - n) / 10)), int(np.floor((e - t[2]) / 10))


def call(page, expr: str, *args):
    """Await a tesseraApi promise (its results are plain values: app/api.py)."""
    return page.evaluate("async ([expr, args]) => await window.tesseraApi[expr](...args)", [expr, list(args)])


def layer(page, name):
    d = json.loads(page.evaluate("(n) => window.tesseraApi.layerArray(n)", name))
    r0, r1, c0, c1 = d["window"]
    vals = np.array([np.nan if x is None else x for x in d["values"]], np.float64).reshape(r1 - r0, c1 - c0)
    return d["zone"], d["window"], vals


def shot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.wait_for_timeout(300)  # let Bokeh paint the new layer before the picture (a picture only, no assertion)
    page.screenshot(path=str(ARTIFACTS / f"tools-{name}.png"), full_page=True)


def test_tools_agree_with_cpython(page, server, site):
    from sklearn.cluster import KMeans
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier

    store, old = site / "data" / "2024.zarr", site / "data" / "2023.zarr"
    boot = json.loads((site / "boot.json").read_text())  # shipped (sha256-checked at build), not booted
    lock = json.loads((site / "pyodide" / "pyodide-lock.json").read_text())["packages"]
    for name in ("scikit-learn", "scipy", "joblib", "threadpoolctl", "openblas"):
        assert name not in boot["lock_packages"] and (site / "pyodide" / lock[name]["file_name"]).exists()
    page.goto(server + "index.html")
    assert wait_state(page) == "ready"
    # scikit-learn is not loaded at start-up, nor fetched
    loaded = page.evaluate("window.tesseraWorker.packages()")
    assert "scikit-learn" not in loaded and "scipy" not in loaded
    assert not [u for u in page.requests_seen if "scikit_learn" in u or "scipy-" in u]

    v = zone_vectors(store, "utm30")
    rows, cols = np.nonzero(np.isfinite(v[..., 0]))
    clon, clat = pixel_lonlat(store, "utm30", int(rows.mean()), int(cols.mean()))
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 5000)", [clon, clat])

    # ---- labels: through tesseraApi, one class named with HTML
    train = training_pixels(store, "utm30", demo.World(), 2024, per_class=6)
    name = lambda k: HOSTILE if k == train[0][2] else f"class {k}"
    for r, c, k in train:
        assert call(page, "label", *pixel_lonlat(store, "utm30", r, c), name(k)) is True
    text = all_text(page)
    assert HOSTILE in text and page.evaluate("window.__pwned") is None  # shown literally, never run
    # the first label started loading scikit-learn (app/tools/lazy.py prefetch): it arrives while the user labels
    # (packages() is a promise from the worker: polled here, and a load that never comes throws)
    assert page.evaluate("""async () => {
        const t0 = performance.now();
        while (!(await window.tesseraWorker.packages()).includes('scikit-learn')) {
            if (performance.now() - t0 > 120000) throw new Error('scikit-learn not loaded 120 s after the first label');
            await new Promise((r) => setTimeout(r, 100));
        }
        return true;
    }""") is True

    # ---- classification: k-NN and logistic regression against scikit-learn in CPython
    X = np.stack([v[r, c] for r, c, _ in train])
    timings = {}
    for method, est in (("k-NN", KNeighborsClassifier(n_neighbors=5)),
                        ("logistic regression", LogisticRegression(max_iter=1000, random_state=3))):
        res = call(page, "classify", method, {"seed": 3})
        assert res is not None, all_text(page)[-500:]
        names = list(res["names"])
        est.fit(X, np.array([names.index(name(k)) for _, _, k in train]))
        zone, (r0, r1, c0, c1), got = layer(page, "class")
        sub = v[r0:r1, c0:c1]
        valid = np.isfinite(sub[..., 0])
        agree = float((got[valid].astype(int) == est.predict(sub[valid])).mean())
        assert zone == "utm30" and agree >= 0.99 and valid.sum() > 10_000, (method, agree, valid.sum())
        rr, cc = np.argwhere(valid)[valid.sum() // 3]
        assert call(page, "value", "class", *pixel_lonlat(store, "utm30", r0 + rr, c0 + cc)) == got[rr, cc]
        timings[method] = res
        shot(page, f"classify-{method.replace(' ', '-')}")
    assert "scikit-learn" in page.evaluate("window.tesseraWorker.packages()")
    # its wheel was fetched by Python's worker, and the page saw that request (so the check above could fail)
    assert [u for u in page.requests_seen if "scikit_learn" in u]
    timings["k-NN warm"] = call(page, "classify", "k-NN", {"seed": 3})  # scikit-learn already loaded

    # ---- similarity over the same view (timed beside classification), from two pins, max
    for k in (10, 4000):
        r, c = int(rows[k]), int(cols[k])
        call(page, "select", *pixel_lonlat(store, "utm30", r, c))
        page.evaluate("window.tesseraApi.pin()")
    sim_res = call(page, "similarity", "pins", "max", -1.0)
    zone, (r0, r1, c0, c1), sim = layer(page, "similarity")
    sub = v[r0:r1, c0:c1].astype(np.float64)
    want = np.max([sub @ v[int(rows[k]), int(cols[k])] / (np.linalg.norm(sub, axis=-1) * np.linalg.norm(
        v[int(rows[k]), int(cols[k])])) for k in (10, 4000)], axis=0)
    np.testing.assert_allclose(sim, want, rtol=0, atol=1e-5, equal_nan=True)
    page.get_by_label("Tool layer").select_option("none")  # the class layer is drawn over similarity's
    shot(page, "similarity")
    size = f"{r1 - r0}x{c1 - c0} px"
    fmt = lambda t: f"{t['ms']:.0f} ms (read {t['read_ms']:.0f}, compute {t['compute_ms']:.0f})"
    print(f"\nsame view {size}: classify k-NN first (scikit-learn loaded since the first label) {fmt(timings['k-NN'])}, k-NN warm "
          f"{fmt(timings['k-NN warm'])}, logistic regression {fmt(timings['logistic regression'])}; "
          f"similarity (2 pins, max) {sim_res['ms']:.0f} ms")

    # ---- k-means: inertia within 1 % of scikit-learn on the same pixels
    res = call(page, "cluster", 4, 7)
    zone, (r0, r1, c0, c1), cl = layer(page, "cluster")
    sub = v[r0:r1, c0:c1]
    Xv = sub[np.isfinite(sub[..., 0])]
    km = KMeans(n_clusters=4, random_state=7, n_init=3).fit(Xv)
    assert abs(res["inertia"] - km.inertia_) <= 0.01 * km.inertia_, (res["inertia"], km.inertia_)
    shot(page, "clusters")
    assert call(page, "clusterToClass", 1, None, 5) == "cluster 1"

    # ---- change 2023 -> 2024 (read from the two year stores) against numpy on zarr-python reads of them
    res = call(page, "change", 2023, 2024)
    assert res is not None, all_text(page)[-500:]
    a, b = zone_vectors(old, "utm30").astype(np.float64), v.astype(np.float64)
    checked = 0
    for k in range(0, len(rows), max(1, len(rows) // 60)):
        lon, lat = pixel_lonlat(store, "utm30", int(rows[k]), int(cols[k]))
        ra, ca = rowcol(old, "utm30", lon, lat)
        va, vb = a[ra, ca], b[rows[k], cols[k]]
        got = call(page, "value", "change", lon, lat)
        if np.isfinite(va).all() and got is not None:
            assert got == pytest.approx(1 - va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)), abs=1e-5)
            checked += 1
    assert checked >= 30
    shot(page, "change")

    # ---- GeoJSON: export, clear, import: the same labels
    before = json.loads(page.evaluate("window.tesseraApi.labels()"))
    geojson = page.evaluate("window.tesseraApi.exportLabels()")
    page.evaluate("window.tesseraApi.clearLabels()")
    assert json.loads(page.evaluate("window.tesseraApi.labels()"))["points"] == []
    assert call(page, "importLabels", geojson) == len(before["points"])
    after = json.loads(page.evaluate("window.tesseraApi.labels()"))
    assert after == before
    shot(page, "labels")
    assert page.evaluate("window.__pwned") is None


def test_zoomed_out_similarity_reads_the_overview_level(page, server, site):
    """A 60 km view (79 m per map pixel): similarity runs on overview level 3 in Pyodide, on its full vectors (the
    view's ~2,200 pixels fit the read budget), equal to numpy on zarr-python reads of utm30/overviews/3, with the
    layer on level 3's grid. (The compact-code path is the CPython tests' test_tools_anyzoom.)"""
    store = site / "data" / "2024.zarr"
    page.goto(server + "index.html")
    assert wait_state(page) == "ready"
    v = zone_vectors(store, "utm30")
    rows, cols = np.nonzero(np.isfinite(v[..., 0]))
    r, c = int(rows[len(rows) // 2]), int(cols[len(rows) // 2])
    lon, lat = pixel_lonlat(store, "utm30", r, c)
    page.evaluate("async ([lon, lat]) => { await tesseraApi.view(lon, lat, 60000); await tesseraApi.select(lon, lat); }",
                  [lon, lat])
    page.evaluate("window.tesseraWorker.resetStats()")
    res = call(page, "similarity", "selection", "mean", -1.0)
    assert res is not None and (res["level"], res["pixel"]) == (3, 80.0), all_text(page)[-500:]
    assert "overview level 3 (80 m pixels), full 128-d vectors" in res["status"]
    urls = page.evaluate("window.tesseraWorker.stats().then((s) => s.log.map((e) => e.url))")
    assert any("/utm30/overviews/3/embeddings/" in u for u in urls) and not any("/utm30/embeddings/" in u for u in urls)
    assert not any("/code/" in u for u in urls)
    zone, (r0, r1, c0, c1), sim = layer(page, "similarity")
    vec, t, epsg = level_full(store, "utm30", 3)
    sub, tv = vec[r0:r1, c0:c1].astype(np.float64), v[r, c].astype(np.float64)
    want = sub @ tv / (np.linalg.norm(sub, axis=-1) * np.linalg.norm(tv))
    assert zone == "utm30" and np.isfinite(want).sum() > 100
    np.testing.assert_allclose(sim, want, rtol=0, atol=1e-5, equal_nan=True)
    to_ll = Transformer.from_crs(epsg, 4326, always_xy=True)
    lr, lc = np.argwhere(np.isfinite(want))[np.isfinite(want).sum() // 2]
    plon, plat = to_ll.transform(t[2] + (c0 + lc + 0.5) * t[0], t[5] + (r0 + lr + 0.5) * t[4])
    assert call(page, "value", "similarity", plon, plat) == pytest.approx(want[lr, lc], abs=1e-5)
    # the view crosses the Greenwich meridian: utm31's part, on its own level-3 grid, equal to numpy too
    assert [z["zone"] for z in res["zones"]] == ["utm30", "utm31"], res["zones"]
    east = json.loads(page.evaluate("(n) => window.tesseraApi.layerArray(n)", "similarity"))["parts"][1]
    a0, a1, b0, b1 = east["window"]
    got31 = np.array([np.nan if x is None else x for x in east["values"]], np.float64).reshape(a1 - a0, b1 - b0)
    vec31, t31, epsg31 = level_full(store, "utm31", 3)
    sub = vec31[a0:a1, b0:b1].astype(np.float64)
    want31 = sub @ tv / (np.linalg.norm(sub, axis=-1) * np.linalg.norm(tv))
    assert east["zone"] == "utm31" and np.isfinite(want31).sum() > 100
    np.testing.assert_allclose(got31, want31, rtol=0, atol=1e-5, equal_nan=True)
    lr, lc = np.argwhere(np.isfinite(want31))[0]
    plon, plat = Transformer.from_crs(epsg31, 4326, always_xy=True).transform(
        t31[2] + (b0 + lc + 0.5) * t31[0], t31[5] + (a0 + lr + 0.5) * t31[4])
    assert plon > 0 and call(page, "value", "similarity", plon, plat) == pytest.approx(want31[lr, lc], abs=1e-5)
    # change 2023 -> 2024 on the same view: both year stores' level-3 full vectors, against numpy on zarr-python
    # reads of both stores' utm30/overviews/3
    page.evaluate("window.tesseraWorker.resetStats()")
    res = call(page, "change", 2023, 2024)
    assert res is not None and (res["level"], res["window"]) == (3, [r0, r1, c0, c1]), all_text(page)[-500:]
    assert "overview level 3 (80 m pixels), full 128-d vectors" in res["status"]
    urls = page.evaluate("window.tesseraWorker.stats().then((s) => s.log.map((e) => e.url))")
    assert any("2023.zarr/utm30/overviews/3/embeddings/" in u for u in urls)
    assert not any("/code/" in u or "/utm30/embeddings/" in u for u in urls)
    zone, _, got = layer(page, "change")
    want = level_change(store, site / "data" / "2023.zarr", "utm30", 3, (r0, r1, c0, c1), read=level_full)
    assert zone == "utm30" and np.isfinite(want).sum() > 100
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5, equal_nan=True)
