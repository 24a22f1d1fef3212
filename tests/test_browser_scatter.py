"""The embedding scatter in real headless Chromium: the projection against scikit-learn's PCA in CPython on
zarr-python reads of the same pixels, brushing (API, mouse, postMessage) -> the map's highlight layer,
the mouse over a map pixel -> its point marked in the scatter."""
from __future__ import annotations

import json

import numpy as np
import pytest
from pyproj import Transformer

from browser_util import all_text, map_click_point, model_data, wait_async, wait_state, wait_text
from test_browser_tools import HOSTILE, call, layer, shot
from tools_util import pixel_lonlat, zone_vectors

pytestmark = pytest.mark.browser


def highlighted(page) -> set[tuple[int, int]]:
    zone, (r0, r1, c0, c1), vals = layer(page, "scatter")
    return {(r0 + int(r), c0 + int(c)) for r, c in np.argwhere(vals == 1)}  # 0: not brushed, NaN: no data


def open_on_utm30(page, server, store):
    """The explorer opened on a 5 km view around the middle of utm30's data: (utm30's vectors read by zarr-python,
    the rows and columns of its valid pixels, the view's centre lon and lat)."""
    page.goto(server + "index.html")
    assert wait_state(page) == "ready"
    v = zone_vectors(store, "utm30")
    rows, cols = np.nonzero(np.isfinite(v[..., 0]))
    clon, clat = pixel_lonlat(store, "utm30", int(rows.mean()), int(cols.mean()))
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 5000)", [clon, clat])
    return v, rows, cols, clon, clat


def selected_in_bokeh(page) -> int:
    return page.evaluate("Bokeh.documents[0].get_model_by_name('scatter-source').selected.indices.length")


def test_scatter_projection_brush_and_hover(page, server, site):
    from sklearn.decomposition import PCA

    store = site / "data" / "2024.zarr"
    v, rows, cols, clon, clat = open_on_utm30(page, server, store)

    res = call(page, "scatter", "PCA", {"max_points": 3000, "seed": 2})
    assert res is not None, all_text(page)[-500:]
    r0, r1, c0, c1 = res["window"]
    n_valid = int(np.isfinite(v[r0:r1, c0:c1, 0]).sum())
    assert res["zone"] == "utm30" and res["points"] == 3000 and res["valid"] == n_valid > 10_000
    # the Scatter tab, as a user opens it: its plot and note are rendered when shown (dynamic tabs, app/tools/ui.py)
    page.locator(".bk-tab", has_text="Scatter").click()
    page.wait_for_function("Bokeh.documents[0].get_model_by_name('scatter-source') !== null", timeout=60_000)
    wait_text(page, "a seeded random sample")
    assert f"a seeded random sample of the view's {n_valid:,} valid pixels" in all_text(page)

    # the projection: scikit-learn's PCA on the same pixels read by zarr-python, up to each component's sign
    pts = json.loads(page.evaluate("window.tesseraApi.scatterPoints()"))
    X = v[pts["rows"], pts["cols"]].astype(np.float64)
    assert np.isfinite(X).all() and len({*zip(pts["rows"], pts["cols"])}) == 3000
    got = np.stack([pts["x"], pts["y"]], axis=1)
    want = PCA(n_components=2).fit_transform(X)
    want *= np.sign((got * want).sum(axis=0))
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * scale)
    assert len(model_data(page, "scatter-source")["x"]) == 3000  # all drawn

    # brushing through the API: the box's points (by scikit-learn's coordinates) are the map's highlighted pixels
    xs, ys = np.sort(want[:, 0]), np.sort(want[:, 1])
    box = [(xs[900] + xs[901]) / 2, (xs[2100] + xs[2101]) / 2, (ys[600] + ys[601]) / 2, (ys[2400] + ys[2401]) / 2]
    inside = np.nonzero((want[:, 0] > box[0]) & (want[:, 0] < box[1]) & (want[:, 1] > box[2])
                        & (want[:, 1] < box[3]))[0]
    out = call(page, "scatterSelect", {"box": box})
    assert out["selected"] == out["highlighted"] == len(inside) > 100
    assert highlighted(page) == {(pts["rows"][i], pts["cols"][i]) for i in inside}
    page.wait_for_function("(n) => Bokeh.documents[0].get_model_by_name('scatter-source').selected.indices.length"
                           " === n", arg=len(inside), timeout=60_000)  # the scatter shows the same brush
    assert call(page, "value", "scatter", *pixel_lonlat(store, "utm30", pts["rows"][inside[0]],
                                                        pts["cols"][inside[0]])) == 1.0

    # brushing with the mouse (box select, the scatter's default drag) in the Scatter tab
    page.wait_for_function("Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name('scatter')).frame.bbox.width"
                           " > 100", timeout=60_000)
    ax, ay = map_click_point(page, float(np.quantile(want[:, 0], 0.1)), float(np.quantile(want[:, 1], 0.9)), "scatter")
    bx, by = map_click_point(page, float(np.quantile(want[:, 0], 0.6)), float(np.quantile(want[:, 1], 0.3)), "scatter")
    assert call(page, "scatterSelect", {"indices": []}) == {"selected": 0, "highlighted": 0}
    page.wait_for_function("Bokeh.documents[0].get_model_by_name('scatter-source').selected.indices.length === 0",
                           timeout=60_000)
    page.mouse.move(ax, ay)
    page.mouse.down()
    page.mouse.move(bx, by, steps=8)
    page.mouse.up()
    wait_async(page, "async () => JSON.parse(await window.tesseraApi.scatterPoints()).selected.length > 0")
    brushed = json.loads(page.evaluate("window.tesseraApi.scatterPoints()"))["selected"]
    assert len(brushed) == selected_in_bokeh(page) > 50
    assert highlighted(page) == {(pts["rows"][i], pts["cols"][i]) for i in brushed}
    sel_x = got[brushed]
    lo, hi = sorted([np.quantile(want[:, 0], 0.1), np.quantile(want[:, 0], 0.6)])
    assert (sel_x[:, 0] >= lo - 0.05 * scale).all() and (sel_x[:, 0] <= hi + 0.05 * scale).all()

    # the mouse over a map pixel of a drawn point marks that point in the scatter
    k = brushed[len(brushed) // 2]
    lon, lat = pixel_lonlat(store, "utm30", pts["rows"][k], pts["cols"][k])
    mx, my = Transformer.from_crs(4326, 3857, always_xy=True).transform(lon, lat)
    page.mouse.move(*map_click_point(page, mx, my))
    page.wait_for_function("(x) => { const d = Bokeh.documents[0].get_model_by_name('scatter-cursor').data;"
                           " const xs = d instanceof Map ? d.get('x') : d.x; return xs.length === 1 &&"
                           " Math.abs(xs[0] - x) < 1e-6 * Math.max(1, Math.abs(x)); }", arg=float(got[k, 0]),
                           timeout=60_000)
    cur = model_data(page, "scatter-cursor")
    assert cur["y"][0] == pytest.approx(float(got[k, 1]), abs=1e-6 * scale)
    hover = call(page, "scatterAt", lon, lat)
    assert hover["index"] == k

    # tapping a point (mouse click on the scatter): that point alone is brushed, its pixel becomes the map's
    # selected pixel (marker and info) and the point is ringed. A point with no other within 4 screen px (markers
    # are 3 px wide, so the tap hits it alone):
    sx0, sy0 = map_click_point(page, 0.0, 0.0, "scatter")
    sx1, sy1 = map_click_point(page, 1.0, 1.0, "scatter")
    screen = np.stack([sx0 + got[:, 0] * (sx1 - sx0), sy0 + got[:, 1] * (sy1 - sy0)], axis=1)
    d = np.linalg.norm(screen[:, None] - screen[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    lone = [i for i in np.argsort(np.abs(got[:, 0]) + np.abs(got[:, 1])) if d[i].min() > 4]
    assert lone, "no isolated point to tap"
    t = int(lone[0])
    page.mouse.click(*map_click_point(page, float(got[t, 0]), float(got[t, 1]), "scatter"))
    wait_async(page, "async (t) => { const s = JSON.parse(await window.tesseraApi.scatterPoints()).selected;"
                     " return s.length === 1 && s[0] === t; }", t)
    tlon, tlat = pixel_lonlat(store, "utm30", pts["rows"][t], pts["cols"][t])
    tx, ty = Transformer.from_crs(4326, 3857, always_xy=True).transform(tlon, tlat)
    page.wait_for_function("(x) => { const d = Bokeh.documents[0].get_model_by_name('selected-source').data;"
                           " const xs = d instanceof Map ? d.get('x') : d.x; return xs.length === 1 &&"
                           " Math.abs(xs[0] - x) < 0.5; }", arg=tx, timeout=60_000)  # the map's marker
    assert model_data(page, "selected-source")["y"][0] == pytest.approx(ty, abs=0.5)
    wait_text(page, f"row {pts['rows'][t]}, col {pts['cols'][t]}, year")  # the info pane: that pixel
    assert highlighted(page) == {(pts["rows"][t], pts["cols"][t])}
    assert call(page, "value", "scatter", tlon, tlat) == 1.0
    page.wait_for_function("(x) => { const d = Bokeh.documents[0].get_model_by_name('scatter-cursor').data;"
                           " const xs = d instanceof Map ? d.get('x') : d.x; return xs.length === 1 &&"
                           " Math.abs(xs[0] - x) < 1e-6 * Math.max(1, Math.abs(x)); }", arg=float(got[t, 0]),
                           timeout=60_000)  # ringed in the scatter
    call(page, "view", lon, lat, 3000)  # close enough to see single highlighted 10 m pixels in the picture
    shot(page, "scatter")

    # postMessage from the page's own origin (allowed by default): the same command, the same highlight
    reply = page.evaluate("""() => new Promise((resolve) => {
        addEventListener('message', (e) => { if (e.data && e.data.id === 99 && 'ok' in e.data) resolve(e.data); });
        postMessage({tessera: 1, id: 99, cmd: 'scatterSelect', args: [{indices: [0, 1, 2, 3, 4]}]}, location.origin);
    })""")
    assert reply["ok"] and reply["result"] == {"selected": 5, "highlighted": 5}, reply
    assert highlighted(page) == {(pts["rows"][i], pts["cols"][i]) for i in range(5)}

    # the brushed points -> a label class, its name shown escaped
    assert call(page, "scatterToClass", HOSTILE, 3) == HOSTILE
    labels = json.loads(page.evaluate("window.tesseraApi.labels()"))
    assert [p[0] for p in labels["points"]] == [HOSTILE] * 3
    assert HOSTILE in all_text(page) and page.evaluate("window.__pwned") is None

    # the URL records the brushed scatter; a reload re-projects the same view and brushes the same points
    call(page, "view", clon, clat, 30000)  # the view the scatter was computed on
    page.wait_for_function("location.hash.includes('tool=scatter,max_points:3000,seed:2,method:PCA,n_neighbors:15,"
                           "min_dist:0.1,sel:0-4,win:')", timeout=60_000)
    page.reload()
    assert wait_state(page) == "ready"
    wait_async(page, "async () => (await window.tesseraApi.scatterPoints()) !== null")
    again = json.loads(page.evaluate("window.tesseraApi.scatterPoints()"))
    assert (again["rows"], again["cols"], again["selected"]) == (pts["rows"], pts["cols"], [0, 1, 2, 3, 4])
    assert highlighted(page) == {(pts["rows"][i], pts["cols"][i]) for i in range(5)}
    assert page.evaluate("window.tesseraApi.exportGeoTIFF('scatter').then((b) => b.length)") > 100
