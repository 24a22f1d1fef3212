"""Polygon labels in real Chromium (app/tools/polygon.py, polygon_ui.py): through tesseraApi.labelPolygon and by a
polygon drawn on the map with Bokeh's PolyDrawTool; the pixels labelled are checked against matplotlib's
point-in-polygon on pyproj's projections of the same pixel centres (tests/test_tools_polygon.py expected)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from pyproj import Transformer

from browser_util import map_click_point, model_data
from test_browser import open_app
from test_browser_hostile import no_script_ran, status
from test_tools_polygon import TO_MERC, expected, pixels_of, shape_in_utm30

pytestmark = pytest.mark.browser
FROM_MERC = Transformer.from_crs(3857, 4326, always_xy=True)


def labelled(page, store) -> set:
    """utm30's pixels of the labels (pyproj), each once."""
    px = pixels_of(store, [p[2:] for p in json.loads(page.evaluate("window.tesseraApi.labels()"))["points"]])
    assert len(set(px)) == len(px)
    return set(px)


def test_a_polygon_through_the_page_api_and_one_drawn_on_the_map_label_the_pixels_inside(page, server, site):
    store = site / "data" / "2024.zarr"
    coords = shape_in_utm30(store)
    want = expected(store, coords)
    assert 200 < len(want) < 2000
    assert open_app(page, server + "index.html") == "ready"
    got = page.evaluate("async ([c, n]) => await window.tesseraApi.labelPolygon(c, n)", [coords, "<b>field</b>"])
    assert got == {"class": "<b>field</b>", "labelled": len(want), "inside": len(want)}
    assert labelled(page, store) == want
    assert f"Labelled {len(want):,} of {len(want):,} pixels inside the polygon as <b>&lt;b&gt;field" in status(page)
    # ---- drawn on the map: the polygon tool, a long press, taps, Esc; then the Labels tab's button
    page.evaluate("window.tesseraApi.clearLabels()")
    lon0, lat0 = np.mean(coords, axis=0)
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 2000)", [float(lon0), float(lat0)])
    page.locator("[title^='Draw a polygon to label']").first.click()
    drawn = [map_click_point(page, *TO_MERC.transform(lon, lat)) for lon, lat in coords]
    count = """() => { const d = Bokeh.documents[0].get_model_by_name('polygon-source').data;
        return ((d instanceof Map ? d.get('xs') : d.xs)[0] || []).length; }"""

    python_xs = """import gc
next(o for o in gc.get_objects() if type(o).__name__ == "PolygonUI").src.data["xs"]"""

    def python_last_x():  # the last vertex of the polygon as Python holds it (synced when the tool emits)
        xs = page.evaluate("async (code) => await window.tesseraWorker.python(code)", python_xs)
        return xs[-1][-1] if xs and xs[-1] else None

    def gap_after_tap():
        # Bokeh reads a tap within 300 ms of the one before as a double tap (UIGestures.doubletap_threshold), which
        # the polygon tool ignores: the next corner waits until the gesture clock has passed it
        page.wait_for_function("(t) => performance.now() - t > 350", arg=page.evaluate("performance.now()"))

    page.mouse.move(*drawn[0])  # a long press starts the polygon: held until the tool has its first corner
    page.mouse.down()
    page.wait_for_function(f"() => ({count})() === 2")
    page.mouse.up()
    for k, (x, y) in enumerate(drawn[1:-1]):  # a tap per corner
        page.mouse.click(x, y)
        page.wait_for_function(f"() => ({count})() === {k + 3}")
        gap_after_tap()
    x_last = TO_MERC.transform(*coords[-1])[0]
    page.mouse.move(*drawn[-1])  # a long press on the last corner ends it: held until Python has that corner
    page.mouse.down()
    deadline = page.evaluate("performance.now()") + 30_000
    while abs((python_last_x() or 0) - x_last) > 20 and page.evaluate("performance.now()") < deadline:
        pass  # each look is a round trip to Python in the worker
    page.mouse.up()
    assert abs(python_last_x() - x_last) <= 20  # metres in Mercator: a few screen pixels at this zoom
    xs, ys = model_data(page, "polygon-source")["xs"][0], model_data(page, "polygon-source")["ys"][0]
    assert len(xs) == len(coords)
    vertices = [list(FROM_MERC.transform(x, y)) for x, y in zip(xs, ys)]
    want_drawn = expected(store, vertices)
    assert abs(len(want_drawn) - len(want)) < 0.2 * len(want)  # the drawn shape is the given one, to a screen pixel
    assert json.loads(page.evaluate("window.tesseraApi.labels()"))["points"] == []  # the taps labelled nothing
    page.get_by_role("button", name="Label inside the drawn polygon").click()
    deadline = page.evaluate("performance.now()") + 30_000
    while not json.loads(page.evaluate("window.tesseraApi.labels()"))["points"] and \
            page.evaluate("performance.now()") < deadline:
        pass  # each look is a round trip to Python in the worker
    assert labelled(page, store) == want_drawn
    assert f"Labelled {len(want_drawn):,} of {len(want_drawn):,} pixels inside the polygon" in status(page)
    no_script_ran(page)
