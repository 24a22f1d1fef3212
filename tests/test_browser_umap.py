"""UMAP in real headless Chromium: umap-js in a Web Worker of its own, never on the page's thread (the page starts
its worker) nor on Python's (Python answers while it runs); its layout of the scatter's seeded sample is trustworthy
against the sampled vectors read back by zarr-python (scikit-learn's `trustworthiness`, beside umap-learn's layout
of the same vectors), the same seed gives the same layout (a reload re-runs it from the URL), and the layout is
linked to the map both ways as PCA's is; settings out of range are refused in one status line."""
from __future__ import annotations

import html
import json

import numpy as np
import pytest
from pyproj import Transformer

from browser_util import all_text, map_click_point, model_data, wait_async, wait_state, wait_text
from test_browser_hostile import python_lives, status
from test_browser_scatter import highlighted, open_on_utm30
from test_browser_tools import call
from tools_util import pixel_lonlat

pytestmark = pytest.mark.browser

SETTINGS = {"max_points": 1500, "seed": 3, "n_neighbors": 15, "min_dist": 0.1}
# UMAP through the API, and while it runs: Python's own thread answers a command (UMAP is not on it). That the page's
# thread is not held is seen from the worker UMAP runs in (the page's `worker` event); how long the page's thread is
# held at most is a benchmark figure (benchmarks/umap.py, its longest task), not a bound here: a timed bound fails on
# a busy machine.
UMAP_WHILE_PYTHON_ANSWERS = """async (settings) => {
    let done = false;
    const run = window.tesseraApi.scatter('UMAP', settings).then((r) => { done = true; return r; });
    const code = "import gc\\nnext(o for o in gc.get_objects() if type(o).__name__ == 'Explorer').status";
    while (!(await window.tesseraWorker.python(code)).startsWith('Scatter (UMAP): ')) {
        if (done) break;
        await new Promise((ok) => setTimeout(ok, 20));
    }
    const answered = await window.tesseraWorker.python('1 + 1');
    return {answeredWhileRunning: answered === 2 && !done, result: await run};
}"""


def test_umap_off_the_page_thread_trustworthy_seeded_and_linked(page, server, site):
    from sklearn.manifold import trustworthiness

    store = site / "data" / "2024.zarr"
    v, rows, cols, clon, clat = open_on_utm30(page, server, store)
    page.locator(".bk-tab", has_text="Scatter").click()  # the plot is on the page: its drawing is measured too
    page.wait_for_function("Bokeh.documents[0].get_model_by_name('scatter-source') !== null", timeout=60_000)

    workers = []  # the URL of each Web Worker the page starts from now on
    page.on("worker", lambda w: workers.append(w.url))
    out = page.evaluate(UMAP_WHILE_PYTHON_ANSWERS, SETTINGS)
    res = out["result"]
    assert res is not None, all_text(page)[-500:]
    assert out["answeredWhileRunning"], "Python's thread did not answer while UMAP ran"
    pts = json.loads(page.evaluate("window.tesseraApi.scatterPoints()"))
    wait_text(page, "UMAP's axes have no units (15 neighbours, minimum distance 0.1, seed 3")
    assert any(u.endswith("umap-worker.js") for u in workers), workers  # umap-js ran in a worker of its own
    assert (res["method"], res["points"], res["n_neighbors"], res["min_dist"], res["seed"]) == ("UMAP", 1500, 15,
                                                                                                0.1, 3)
    assert res["valid"] > 1500 and res["explained"] == []

    # one 2-d point per sampled pixel: the same seeded sample as PCA's
    got = np.stack([pts["x"], pts["y"]], axis=1)
    assert got.shape == (1500, 2) and np.isfinite(got).all()
    pca = json.loads(page.evaluate("""async (s) => { await window.tesseraApi.scatter('PCA', s);
                                      return window.tesseraApi.scatterPoints(); }""",
                                   {"max_points": 1500, "seed": 3}))
    assert (pca["rows"], pca["cols"]) == (pts["rows"], pts["cols"])

    # quality: the browser's layout against the sampled vectors read by zarr-python, beside umap-learn's
    X = v[pts["rows"], pts["cols"]].astype(np.float64)
    assert np.isfinite(X).all() and len({*zip(pts["rows"], pts["cols"])}) == 1500
    trust = trustworthiness(X, got, n_neighbors=SETTINGS["n_neighbors"])
    import umap
    ref = umap.UMAP(n_neighbors=15, min_dist=0.1, random_state=3).fit_transform(X)
    trust_ref = trustworthiness(X, ref, n_neighbors=SETTINGS["n_neighbors"])
    trust_pca = trustworthiness(X, np.stack([pca["x"], pca["y"]], axis=1), n_neighbors=SETTINGS["n_neighbors"])
    print(f"trustworthiness (15 neighbours): umap-js {trust:.4f}, umap-learn {trust_ref:.4f}, PCA {trust_pca:.4f}")
    # The 0.9 is out of reach on this demo for umap-learn too (0.78 on such a sample: its vectors are as
    # incompressible as real ones, docs/demo.md); umap-js is held to umap-learn's score, and well above PCA's.
    assert trust >= trust_ref - 0.02 and trust >= trust_pca + 0.05, (trust, trust_ref, trust_pca)

    # back to UMAP, the same seed: the same layout
    res2 = call(page, "scatter", "UMAP", SETTINGS)
    again = json.loads(page.evaluate("window.tesseraApi.scatterPoints()"))
    assert res2["points"] == 1500 and (again["x"], again["y"]) == (pts["x"], pts["y"])
    assert len(model_data(page, "scatter-source")["x"]) == 1500  # all drawn

    # brushing (API box in UMAP's coordinates): the points inside are the map's highlighted pixels
    xs, ys = np.sort(got[:, 0]), np.sort(got[:, 1])
    box = [(xs[400] + xs[401]) / 2, (xs[1100] + xs[1101]) / 2, (ys[300] + ys[301]) / 2, (ys[1200] + ys[1201]) / 2]
    inside = np.nonzero((got[:, 0] > box[0]) & (got[:, 0] < box[1]) & (got[:, 1] > box[2]) & (got[:, 1] < box[3]))[0]
    sel = call(page, "scatterSelect", {"box": box})
    assert sel["selected"] == sel["highlighted"] == len(inside) > 50
    assert highlighted(page) == {(pts["rows"][i], pts["cols"][i]) for i in inside}
    page.wait_for_function("(n) => Bokeh.documents[0].get_model_by_name('scatter-source').selected.indices.length"
                           " === n", arg=len(inside), timeout=60_000)

    # the mouse over a drawn point's pixel rings that point in the scatter
    k = int(inside[len(inside) // 2])
    lon, lat = pixel_lonlat(store, "utm30", pts["rows"][k], pts["cols"][k])
    mx, my = Transformer.from_crs(4326, 3857, always_xy=True).transform(lon, lat)
    page.mouse.move(*map_click_point(page, mx, my))
    page.wait_for_function("(x) => { const d = Bokeh.documents[0].get_model_by_name('scatter-cursor').data;"
                           " const xs = d instanceof Map ? d.get('x') : d.x; return xs.length === 1 &&"
                           " xs[0] === x; }", arg=float(got[k, 0]), timeout=60_000)
    assert model_data(page, "scatter-cursor")["y"][0] == float(got[k, 1])
    assert call(page, "scatterAt", lon, lat)["index"] == k
    # a pixel that was not drawn: at the point of its nearest drawn vector (in 128-d, by numpy here)
    drawn = {*zip(pts["rows"], pts["cols"])}
    r0, r1, c0, c1 = res["window"]

    def nearest(r, c):  # the nearest drawn vector, and whether the next one is clearly farther (no tie to round)
        d = ((X - v[r, c].astype(np.float64)) ** 2).sum(axis=1)
        first, second = np.partition(d, 1)[:2]
        return int(d.argmin()), second - first > 1e-3 * second

    r, c = next((int(r), int(c)) for r, c in zip(rows, cols) if (r, c) not in drawn and r0 <= r < r1 and c0 <= c < c1
                and nearest(r, c)[1])
    at = call(page, "scatterAt", *pixel_lonlat(store, "utm30", r, c))
    near = nearest(r, c)[0]
    assert at["index"] is None and (at["x"], at["y"]) == (float(got[near, 0]), float(got[near, 1]))

    # the URL holds the method and its settings; a reload re-runs the same UMAP: the same layout, the same brush
    call(page, "view", clon, clat, 30000)
    page.wait_for_function("location.hash.includes('tool=scatter,max_points:1500,seed:3,method:UMAP,"
                           "n_neighbors:15,min_dist:0.1,sel:')", timeout=60_000)
    page.reload()
    assert wait_state(page) == "ready"
    wait_async(page, "async () => (await window.tesseraApi.scatterPoints()) !== null", timeout_ms=300_000)
    back = json.loads(page.evaluate("window.tesseraApi.scatterPoints()"))
    assert (back["rows"], back["cols"], back["x"], back["y"]) == (pts["rows"], pts["cols"], pts["x"], pts["y"])
    assert back["selected"] == inside.tolist()
    assert highlighted(page) == {(pts["rows"][i], pts["cols"][i]) for i in inside}


# Settings a script may send, each refused in one line (param's bounds), the status line saying it escaped.
REFUSED = [
    ({"n_neighbors": 1}, "Integer parameter 'Scatter.n_neighbors' must be at least 2, not 1."),
    ({"n_neighbors": 100_000}, "Integer parameter 'Scatter.n_neighbors' must be at most 200, not 100000."),
    ({"min_dist": -0.5}, "Number parameter 'Scatter.min_dist' must be at least 0.0, not -0.5."),
    ({"min_dist": "<img src=x onerror=window.__xss=1>"},
     "Number parameter 'Scatter.min_dist' only takes numeric values, not <class 'str'>."),
    ({"seed": -1}, "Integer parameter 'Scatter.seed' must be at least 0, not -1."),
]


def test_umap_settings_out_of_range_are_one_status_line(page, server, site):
    page.goto(server + "index.html")
    assert wait_state(page) == "ready"
    for settings, line in REFUSED:
        got = page.evaluate("""async (s) => { try { await window.tesseraApi.scatter('UMAP', s); return 'resolved'; }
                               catch (e) { return e.message; } }""", settings)
        assert got == line, (settings, got)
        assert status(page) == "<b>Scatter refused:</b> " + html.escape(line)
        assert page.evaluate("window.__xss === undefined")
        python_lives(page, site)
