"""The explorer in real headless Chromium, on real Pyodide, against the real site served on 127.0.0.1."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
import zarr

from browser_util import (REPO, all_text, map_click_point, model_data, rest_mouse, static_server, touch_down,
                          wait_async, wait_state, wait_text)
from tools_util import pixel_lonlat  # re-exported: test_browser_exports and test_browser_hostile import it from here
from tools_util import read_array

pytestmark = pytest.mark.browser
ARTIFACTS = REPO / "artifacts"


def truth(store: Path, zone: str, row: int, col: int) -> np.ndarray | None:
    z = zarr.open_group(store / zone, mode="r")
    s = z["scales"][row, col]
    return None if np.isnan(s) else z["embeddings"][row, col].astype(np.float32) * s


def interior_valid(store: Path, zone: str, k: int = 0) -> tuple[int, int]:
    s = read_array(store / zone / "scales")
    v = ~np.isnan(s)
    inner = v.copy()
    for dy in range(-3, 4):
        for dx in range(-3, 4):
            inner &= np.roll(np.roll(v, dy, 0), dx, 1)
    rows, cols = np.nonzero(inner)
    i = len(rows) // 3 + 97 * k
    return int(rows[i]), int(cols[i])


def open_app(page, url: str) -> str:
    page.goto(url)
    return wait_state(page)


def demo_pixel(site: Path, k: int) -> tuple[int, int, float, float, float, float]:
    """utm30's interior valid pixel k in the demo's 2024 store: row, col, lon, lat and its map point x, y."""
    from app.geo import lonlat_to_merc
    row, col = interior_valid(site / "data" / "2024.zarr", "utm30", k)
    lon, lat = pixel_lonlat(site / "data" / "2024.zarr", "utm30", row, col)
    x, y = (float(v) for v in lonlat_to_merc(lon, lat))
    return row, col, lon, lat, x, y


def open_zoomed_in(page, server: str, lon: float, lat: float) -> None:
    """The explorer open and settled at 10 m per screen pixel (7.6 km across) on lon/lat: a click reads pixels there."""
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 7600)", [lon, lat])


# How many embeddings and scales reads the page's worker has made since its stats were reset.
PIXEL_READS = """() => window.tesseraWorker.stats().then((s) => s.log
    .filter((e) => /\\/(embeddings|scales)\\//.test(e.url)).length)"""


def wait_spectrum(page, n_lines: int, label_part: str | None = None) -> dict:
    page.wait_for_function("""([n, part]) => {
        const d = Bokeh.documents[0].get_model_by_name('spectrum-source').data;
        const labels = d instanceof Map ? d.get('label') : d.label;
        return labels.length === n && (part === null || labels.some((l) => l.includes(part)));
    }""", arg=[n_lines, label_part], timeout=30_000)
    return model_data(page, "spectrum-source")


def test_a_click_where_the_mouse_rested_finds_its_bytes_read_already(page, server, site):
    """Zoomed in as far as a click reads pixels (10 m per screen pixel here), the mouse resting over the map (40 ms)
    reads that pixel and its years ahead (Explorer.hover): the click that follows requests nothing, and plots the
    exact vector. Zoomed out, a rest reads no pixel. Before, the click's reads (4 requests: the year store's
    embeddings and scales, the multi-year index's other year) began at the click."""
    store = site / "data" / "2024.zarr"
    row, col = interior_valid(store, "utm30", 2)
    lon, lat = pixel_lonlat(store, "utm30", row, col)
    from app.geo import lonlat_to_merc
    x, y = (float(v) for v in lonlat_to_merc(lon, lat))
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 200000)", [lon, lat])
    page.evaluate("window.tesseraWorker.resetStats()")
    rest_mouse(page, x, y, [lon, lat, 200000])
    assert page.evaluate(PIXEL_READS) == 0  # 200 km across: no pixel read ahead
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 7600)", [lon, lat])  # 10 m per pixel
    page.mouse.move(5, 5)
    page.evaluate("window.tesseraWorker.resetStats()")
    rest_mouse(page, x, y, [lon, lat, 7600])
    assert page.evaluate(PIXEL_READS) >= 2  # the pixel's embeddings and scales at least
    page.evaluate("window.tesseraWorker.resetStats()")
    page.mouse.click(*map_click_point(page, x, y))
    data = wait_spectrum(page, 1, f"utm30 r{row} c{col}")
    np.testing.assert_allclose(np.array(data["ys"][0], dtype=np.float64), truth(store, "utm30", row, col), rtol=1e-6)
    assert page.evaluate(PIXEL_READS) == 0


def test_a_finger_on_the_map_reads_its_pixel_ahead_and_a_tap_there_requests_nothing(touch_page, server, site):
    """Zoomed in as far as a click reads pixels, a finger touching the map (pointerdown, app/web/press.js) reads the
    pixel under it and its years ahead while it is still down; a tap there then requests nothing and plots the exact
    vector. Before, a finger never rested over the map, so a tap's reads began when it lifted. (The finger held
    while the reads are awaited is then taken off with a touchcancel: held over 300 ms, BokehJS makes a press of it,
    not a tap, and under 300 ms it may or may not be; the tap that selects is a quick one.)"""
    page = touch_page
    store = site / "data" / "2024.zarr"
    row, col, lon, lat, x, y = demo_pixel(site, 3)
    open_zoomed_in(page, server, lon, lat)
    page.evaluate("window.tesseraWorker.resetStats()")
    touch_down(page, page.cdp, x, y, [lon, lat, 7600])
    assert page.evaluate(PIXEL_READS) >= 2  # the pixel's embeddings and scales at least, the finger still down
    page.cdp.send("Input.dispatchTouchEvent", {"type": "touchCancel", "touchPoints": []})
    assert model_data(page, "spectrum-source")["label"] == []  # no tap yet: nothing selected
    page.evaluate("window.tesseraWorker.resetStats()")
    px, py = map_click_point(page, x, y)
    page.cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": px, "y": py}]})
    page.cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    data = wait_spectrum(page, 1, f"utm30 r{row} c{col}")
    np.testing.assert_allclose(np.array(data["ys"][0], dtype=np.float64), truth(store, "utm30", row, col), rtol=1e-6)
    assert page.evaluate(PIXEL_READS) == 0


# Python held busy in its worker for `s` seconds (a blocking sleep there), from the moment it says so on the console.
HOLD_PYTHON = """(s) => { window.__pythonHeld = true;
    window.tesseraWorker.python(`print("tessera-test: python held"); import time; time.sleep(${s})`)
        .finally(() => { window.__pythonHeld = false; }); }"""
SPECTRUM_IN_PYTHON = """import gc, json
from bokeh.models import ColumnDataSource
json.dumps(next(list(o.data["label"]) for o in gc.get_objects()
                if isinstance(o, ColumnDataSource) and o.name == "spectrum-source"))"""
SPECTRUM_LABELS = """() => { const d = Bokeh.documents[0].get_model_by_name('spectrum-source').data;
    return d instanceof Map ? d.get('label') : d.label; }"""


def test_a_tap_on_a_pixel_read_ahead_plots_its_vector_before_python_has_the_tap(touch_page, server, site):
    """A tap on a pixel that was read ahead (here by the finger's press, app/web/press.js) plots its exact vector from
    the tap's own handler, with Python busy meanwhile: the spectrum Python sent ahead of the tap, with the pixel's
    footprint on the map (ExplorerUI._send_ahead). Before, the vector came in Python's answer to the tap, which
    Chromium holds back after an input until the page has painted a frame. Once Python has the tap it selects that
    pixel (the side bar says so) and sends the spectrum no second time. A tap elsewhere, while the page holds a
    pixel's spectrum, shows nothing of it: its own vector comes from Python once Python is free."""
    page = touch_page
    store = site / "data" / "2024.zarr"
    (row, col, lon, lat, x, y), (row2, col2, _, _, x2, y2) = demo_pixel(site, 4), demo_pixel(site, 5)
    open_zoomed_in(page, server, lon, lat)

    def press(px, py):  # a finger held on the pixel until Python has read it ahead and settled, then taken off
        touch_down(page, page.cdp, px, py, [lon, lat, 7600])
        page.cdp.send("Input.dispatchTouchEvent", {"type": "touchCancel", "touchPoints": []})

    def tap_held(tx, ty, seconds):  # a quick tap there while Python is held busy
        with page.expect_console_message(lambda m: m.text == "tessera-test: python held"):
            page.evaluate(HOLD_PYTHON, seconds)
        px, py = map_click_point(page, tx, ty)
        page.cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": px, "y": py}]})
        page.cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
        page.wait_for_function("""(x) => { const d = Bokeh.documents[0].get_model_by_name('tap-source').data;
            const xs = d instanceof Map ? d.get('x') : d.x; return xs.length === 1 && Math.abs(xs[0] - x) < 20; }""",
                               arg=tx, timeout=10_000)  # the tap's handler has run

    press(x, y)
    tap_held(x2, y2, 3)  # another pixel, not the one read ahead
    assert page.evaluate(SPECTRUM_LABELS) == [] and page.evaluate("window.__pythonHeld")
    page.wait_for_function("() => !window.__pythonHeld", timeout=30_000)
    data = wait_spectrum(page, 1, f"utm30 r{row2} c{col2}")  # from Python
    np.testing.assert_array_equal(np.array(data["ys"][0], dtype=np.float64), truth(store, "utm30", row2, col2))

    press(x, y)
    tap_held(x, y, 8)
    data = wait_spectrum(page, 1, f"utm30 r{row} c{col}")
    assert page.evaluate("window.__pythonHeld")  # shown while Python could answer nothing
    np.testing.assert_array_equal(np.array(data["ys"][0], dtype=np.float64), truth(store, "utm30", row, col))
    page.evaluate("window.__shownData = Bokeh.documents[0].get_model_by_name('spectrum-source').data")
    page.wait_for_function("() => !window.__pythonHeld", timeout=30_000)
    wait_text(page, f"row {row}, col {col}")  # Python selected the pixel (the side bar follows the spectrum's frame)
    assert page.evaluate("Bokeh.documents[0].get_model_by_name('spectrum-source').data === window.__shownData")
    assert json.loads(page.evaluate("async () => await window.tesseraWorker.python(`%s`)" % SPECTRUM_IN_PYTHON)) == \
        page.evaluate(SPECTRUM_LABELS)  # Python's copy of the spectrum is what the page shows


# The tap of the map's Tap callback, made in Python (ExplorerUI._on_tap) as if the page had shown the last spectrum
# sent ahead: what Python does when the page's tap says so; then the explorer settles (tesseraApi.view).
TAP_AHEAD_IN_PYTHON = """import gc
from app.main import ExplorerUI
ui = next(o for o in gc.get_objects() if isinstance(o, ExplorerUI))
ui._on_tap("data", {}, {"x": [%r], "y": [%r], "ahead": [max(ui._aheads)]})"""


def test_a_spectrum_python_sent_after_the_one_sent_ahead_is_not_taken_for_what_the_page_shows(page, server, site):
    """A tap that shows the spectrum sent ahead may be followed on the page by a spectrum Python had sent after that
    one (an earlier select's, under way as the tap came): the page then shows that later spectrum, not the tapped
    pixel's. Python, told of the tap, must not take the page for showing the pixel's spectrum then, and sends it.
    Here the page is in the state such a race leaves: the pixel read ahead, a select of another pixel after it, and
    the tap's message saying the page showed the spectrum sent ahead. Before, Python took that as the page's state,
    selected the pixel, sent nothing, and the page went on showing the other pixel."""
    store = site / "data" / "2024.zarr"
    (row, col, lon, lat, x, y), (row2, col2, lon2, lat2, _, _) = demo_pixel(site, 6), demo_pixel(site, 7)
    open_zoomed_in(page, server, lon, lat)
    rest_mouse(page, x, y, [lon, lat, 7600])  # read ahead: its spectrum is on the page, sent ahead
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon2, lat2])
    wait_spectrum(page, 1, f"utm30 r{row2} c{col2}")
    page.evaluate("async (c) => await window.tesseraWorker.python(c)", TAP_AHEAD_IN_PYTHON % (x, y))
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 7600)", [lon, lat])  # settled
    data = wait_spectrum(page, 1, f"utm30 r{row} c{col}")
    np.testing.assert_array_equal(np.array(data["ys"][0], dtype=np.float64), truth(store, "utm30", row, col))
    assert json.loads(page.evaluate("async () => await window.tesseraWorker.python(`%s`)" % SPECTRUM_IN_PYTHON)) == \
        page.evaluate(SPECTRUM_LABELS)


SPECTRA_SENT = """import gc
from app.main import ExplorerUI
next(o for o in gc.get_objects() if isinstance(o, ExplorerUI))._spectra_sent"""


def test_a_tap_shown_ahead_after_a_tap_outside_every_zone_sends_no_spectrum(page, server, site):
    """After a tap outside every zone, a tap that showed a pixel's spectrum ahead costs no spectrum from Python: its
    select sets the selection before clearing the place outside, so the spectrum drawn in between is not the
    pins' alone. Before, Python sent the pins' spectrum (none here: the page's plot emptied for a frame) and then
    the pixel's again."""
    row, col, lon, lat, x, y = demo_pixel(site, 8)
    open_zoomed_in(page, server, lon, lat)
    page.evaluate("async () => await window.tesseraApi.select(-30.0, 0.0)")  # the Atlantic: outside every zone
    rest_mouse(page, x, y, [lon, lat, 7600])  # read ahead: its spectrum is on the page, sent ahead
    python = "async (c) => await window.tesseraWorker.python(c)"
    sent = page.evaluate(python, SPECTRA_SENT)
    page.evaluate(python, TAP_AHEAD_IN_PYTHON % (x, y))
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 7600)", [lon, lat])  # settled
    wait_text(page, f"row {row}, col {col}")  # selected
    assert page.evaluate(python, SPECTRA_SENT) == sent
    assert json.loads(page.evaluate(python, SPECTRUM_IN_PYTHON)) == [f"selected: utm30 r{row} c{col}"]


def test_click_a_pixel_plots_exactly_the_cpython_dequantised_vector(page, server, site):
    store = site / "data" / "2024.zarr"
    row, col = interior_valid(store, "utm30")
    lon, lat = pixel_lonlat(store, "utm30", row, col)
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 2500)", [lon, lat])
    from app.geo import lonlat_to_merc
    x, y = lonlat_to_merc(lon, lat)
    page.wait_for_function("""([x, y]) => {  // the browser's map shows the new view before we click
        const m = Bokeh.documents[0].get_model_by_name('map');
        return m.x_range.start < x && x < m.x_range.end && m.y_range.start < y && y < m.y_range.end
            && m.x_range.end - m.x_range.start < 10000; }""", arg=[float(x), float(y)], timeout=30_000)
    px, py = map_click_point(page, float(x), float(y))
    page.mouse.click(px, py)  # a real click on the canvas: Bokeh's Tap event, the app's own path
    data = wait_spectrum(page, 1, f"utm30 r{row} c{col}")
    want = truth(store, "utm30", row, col)
    got = np.array(data["ys"][0], dtype=np.float64)
    np.testing.assert_array_equal(got, want.astype(np.float64))  # bit-exact float32 dequantisation
    wait_text(page, f"row {row}, col {col}")  # the side bar's text follows the spectrum's frame
    info = all_text(page)
    assert f"row {row}, col {col}" in info and "utm30" in info and "EPSG:32630" in info
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "explorer-pixel.png"), full_page=True)


def test_a_click_repaints_its_marker_alone_not_the_map_below(page, server, site):
    """The selection marker (and the pins) are on the map's overlay level: BokehJS repaints that canvas alone
    for a click, not the primary one with the embedding image, the overlay image and the coastlines. (The first
    click after start-up still repaints the whole map once, as the side bar changes its layout then: the pixel's
    text replaces the one-line hint, the pin button is enabled. The second click is the one checked.)"""
    from app.geo import lonlat_to_merc
    store = site / "data" / "2024.zarr"
    first = pixel_lonlat(store, "utm30", *interior_valid(store, "utm30", 0))
    row, col = interior_valid(store, "utm30", 1)
    lon, lat = pixel_lonlat(store, "utm30", row, col)
    x, y = (float(v) for v in lonlat_to_merc(lon, lat))
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 7600)", [lon, lat])
    marker_alpha = """([x, y]) => {  // the overlay canvas's largest alpha in the 5 x 5 pixels around (x, y)
        const m = Bokeh.documents[0].get_model_by_name('map'), v = Bokeh.index.find_one(m), f = v.frame.bbox;
        const {canvas} = v.canvas_view.overlays, k = canvas.width / v.bbox.width;
        const sx = f.left + (x - m.x_range.start) / (m.x_range.end - m.x_range.start) * f.width;
        const sy = f.top + (m.y_range.end - y) / (m.y_range.end - m.y_range.start) * f.height;
        const px = canvas.getContext('2d').getImageData(Math.round(sx * k) - 2, Math.round(sy * k) - 2, 5, 5).data;
        return Math.max(...px.filter((_, i) => i % 4 === 3)); }"""
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", list(first))
    fx, fy = (float(v) for v in lonlat_to_merc(*first))
    page.wait_for_function(f"({marker_alpha})([{fx}, {fy}]) > 0", timeout=30_000)
    assert page.evaluate(marker_alpha, [x, y]) == 0
    # Each paint pass of the map from here on: the renderers it painted, by name.
    page.evaluate("""() => {
        const v = Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name('map'));
        window.mapPasses = [];
        const pass = v._actual_paint.bind(v);
        v._actual_paint = () => { window.mapPasses.push([]); pass(); };
        for (const [model, rv] of v.renderer_views) {
            const paint = rv.paint.bind(rv);
            rv.paint = (ctx) => { window.mapPasses.at(-1)?.push(model.name || model.glyph?.type || model.type); paint(ctx); };
        }
    }""")
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon, lat])
    wait_spectrum(page, 1, f"utm30 r{row} c{col}")
    page.wait_for_function(f"({marker_alpha})([{x}, {y}]) > 0", timeout=30_000)  # the marker drawn at the pixel
    passes = page.evaluate("window.mapPasses")
    with_marker = [p for p in passes if "selected" in p]
    assert with_marker, passes
    for names in with_marker:
        assert "embedding" not in names and "coast" not in names and "ImageRGBA" not in names, passes
    assert not any("embedding" in p for p in passes), passes  # nothing else on a click repainted the images


def test_a_clicks_first_frame_shows_its_spectrum_and_the_years_and_text_follow(page, server, site):
    """A click's spectrum goes to the page alone; the map's marker, the URL, the years and change plots and the side
    bar's text about the pixel follow once the page has painted that frame (ExplorerUI._after_paint). Sent together,
    the plots were painted in one frame that overran its 16.7 ms (software canvas: the spectrum ~8 ms, the years ~5,
    the change ~3.5), and the vector showed a frame later; the marker's patch and the URL's, sent with the spectrum,
    delayed it by ~10 %. With the pixel read ahead (the mouse rested on it), so that nothing but this order keeps
    the rest back: at the first animation frame that sees the pixel in the spectrum, neither the years plot, nor any
    text of the page, nor the marker, nor the URL has it; all do once the select is done."""
    from app.geo import lonlat_to_merc
    store = site / "data" / "2024.zarr"
    row, col = interior_valid(store, "utm31", 2)
    lon, lat = pixel_lonlat(store, "utm31", row, col)
    x, y = (float(v) for v in lonlat_to_merc(lon, lat))
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 7600)", [lon, lat])
    rest_mouse(page, x, y, [lon, lat, 7600])
    first, after = page.evaluate("""async ([lon, lat, tag, where, x]) => {
        const doc = Bokeh.documents[0];
        const names = (source) => { const d = doc.get_model_by_name(source).data;
                                    return (d instanceof Map ? d.get('label') : d.label).some((l) => l.includes(tag)); };
        const text = () => [...doc.all_models].some((m) => typeof m.text === 'string' && m.text.includes(where));
        const marker = () => { const d = doc.get_model_by_name('selected-source').data;
                               const xs = d instanceof Map ? d.get('x') : d.x;
                               return xs.length === 1 && Math.abs(xs[0] - x) < 1; };
        const state = () => ({spectrum: names('spectrum-source'), years: names('years-source'), text: text(),
                              marker: marker(), url: location.hash.includes('sel=')});
        const first = new Promise((ok) => { const tick = () => names('spectrum-source') ? ok(state())
                                                                                        : requestAnimationFrame(tick);
                                            requestAnimationFrame(tick); });
        await window.tesseraApi.select(lon, lat);
        return [await first, state()];
    }""", [lon, lat, f"utm31 r{row} c{col}", f"row {row}, col {col}", x])
    assert first == {"spectrum": True, "years": False, "text": False, "marker": False, "url": False}, first
    assert after == {"spectrum": True, "years": True, "text": True, "marker": True, "url": True}, after


def test_python_runs_off_the_page_thread(page, server):
    """Python runs in a Web Worker: while it computes without a pause for 1.5 s, the page keeps drawing frames
    (on the page's thread, as before, it would draw none until Python was done)."""
    assert open_app(page, server + "index.html") == "ready"
    assert page.evaluate("window.pyodide") is None and page.evaluate("typeof window.Bokeh") == "object"
    got = page.evaluate("""async () => {
        let frames = 0, busy = true;
        const tick = () => { if (busy) { frames += 1; requestAnimationFrame(tick); } };
        const answer = window.tesseraWorker.python(
            "import time\\nend = time.monotonic() + 1.5\\nwhile time.monotonic() < end: pass\\n'done'");
        requestAnimationFrame(tick);
        const r = await answer;
        busy = false;
        return {r, frames};
    }""")
    assert got["r"] == "done" and got["frames"] >= 10, got


def test_every_label_click_reaches_python_while_it_is_busy(page, server, site):
    """Changes made while Python handles an earlier one wait and go together in order; newer values of a
    property replace older ones, but never a tap's: three quick label clicks are three labels."""
    from app.geo import lonlat_to_merc
    store = site / "data" / "2024.zarr"
    cells = [interior_valid(store, "utm30", k) for k in range(3)]
    xy = [lonlat_to_merc(*pixel_lonlat(store, "utm30", r, c)) for r, c in cells]
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("""(xy) => {
        const doc = Bokeh.documents[0];
        const mode = [...doc.all_models].find((m) => m.label === 'Click to label' && 'active' in m);
        const tap = doc.get_model_by_name('tap-source');
        mode.active = true;  // goes to Python at once; the taps below wait until Python is idle again
        for (const [x, y] of xy) tap.data = {x: [x], y: [y]};
    }""", [[float(x), float(y)] for x, y in xy])
    got = wait_async(page, "async () => { const l = JSON.parse(await window.tesseraApi.labels());"
                           " return l.points.length >= 3 && l; }")
    want = [pixel_lonlat(store, "utm30", r, c) for r, c in cells]
    assert len(got["points"]) == 3
    np.testing.assert_allclose([p[2:] for p in got["points"]], want, atol=1e-7)  # in click order


def test_the_explorer_starts_where_local_storage_is_denied(page, server, site):
    """A sandboxed frame or a strict privacy setting makes localStorage throw: the explorer still starts, and
    labels work for the session."""
    page.add_init_script("Object.defineProperty(window, 'localStorage', {get() {"
                         " throw new DOMException('denied', 'SecurityError'); }})")
    store = site / "data" / "2024.zarr"
    r, c = interior_valid(store, "utm30")
    assert open_app(page, server + "index.html") == "ready"
    lon, lat = pixel_lonlat(store, "utm30", r, c)
    assert wait_async(page, "async ([lon, lat]) => await window.tesseraApi.label(lon, lat, 'field')", [lon, lat])
    assert json.loads(page.evaluate("window.tesseraApi.labels()"))["points"][0][0] == "field"


def test_what_the_explorer_does_not_use_at_start_is_loaded_after_it(page, server, site):
    """pandas and narwhals (Bokeh's dependencies, unused by the explorer), Pillow (PNG exports), contourpy,
    python-markdown and bleach are neither loaded nor imported while the explorer starts; they load in the
    background once ready, Bokeh can then use pandas for date/time values and a DataFrame (through narwhals)
    as a data source, a tile layer can be named by its xyzservices provider, and each imports. Panel's chat components, its templates and unittest (which Panel's
    cache imported for Mock objects) are not imported at start either, and `pn.chat`, `pn.template` and
    `pn.Template` and a template named by a string still work. Nor numpy.ma (Bokeh asked every array it sends whether it is a masked one; a
    masked array still goes as one, NaN where masked). Nor markdown-it: Panel renders a parameter's doc with
    it as the widget's tooltip, and no widget at start shows one (they showed developers' docs: "a name of
    app/layers.PROVIDERS")."""
    boot = json.loads((site / "boot.json").read_text())
    later = ["pandas", "pillow", "contourpy"]
    assert set(later) <= set(boot["background_packages"]) and not set(later) & set(boot["lock_packages"])
    assert sorted(w.split("/")[-1].split("-")[0] for w in boot["background_wheels"]) == \
        ["bleach", "markdown", "narwhals", "webencodings", "xyzservices"]
    assert not set(boot["background_wheels"]) & set(boot["wheels"])
    modules = ["pandas", "PIL", "contourpy", "markdown", "bleach", "webencodings", "narwhals", "xyzservices"]
    assert open_app(page, server + "index.html") == "ready"
    python = "(code) => window.tesseraWorker.python(code)"
    never = modules + ["panel.chat", "panel.template", "unittest", "zoneinfo", "markdown_it", "numpy.ma"]
    assert page.evaluate(python, f"import sys\n[m for m in {never} if m in sys.modules]") == []
    assert page.evaluate("() => [...Bokeh.documents[0].all_models].filter((m) => m.type === 'Tooltip')"
                         ".map((m) => String(m.content?.text ?? m.content))") == []
    assert page.evaluate(python, "import panel as pn\npn.chat.ChatFeed.__name__") == "ChatFeed"
    assert page.evaluate(python, "import numpy as np\nfrom bokeh.util.serialization import transform_array\n"
                                 "str(transform_array(np.ma.masked_array([1.5, 2.5], mask=[0, 1])).tolist())") == "[1.5, nan]"
    assert page.evaluate(python, "import panel as pn\npn.config.template = 'fast'\nt = pn.config.template\n"
                                 "pn.config.template = None\nt.__name__") == "FastListTemplate"  # by name, first
    assert page.evaluate(python, "import panel as pn\n[pn.template.FastListTemplate.__name__, pn.Template.__name__,"
                                 " pn.template.Template is pn.Template]") == ["FastListTemplate", "Template", True]
    assert page.evaluate(python, "from panel.io.cache import compute_hash\n"
                                 "compute_hash(lambda: 1, {}, (1,), {}) is not None") is True  # Panel's cache, patched
    page.wait_for_function("window.tesseraTimings.background", timeout=300_000)
    assert page.evaluate("window.tesseraWorker.python('import pandas, bokeh.util.serialization as s\\n"
                         "s.is_datetime_type(pandas.Timestamp(0))')") is True
    assert page.evaluate(python, "import pandas\nfrom bokeh.models import ColumnDataSource\n"
                         "sorted(ColumnDataSource(pandas.DataFrame({'a': [1, 2]})).data)") == ["a", "index"]
    assert page.evaluate(python, f"import importlib\n[importlib.import_module(m).__name__ for m in {modules}]") == modules
    assert "openstreetmap" in page.evaluate(python, "from bokeh.plotting import figure\n"
                                            "figure().add_tile('osm').tile_source.url")  # a provider by name (patched)
    timings = page.evaluate("window.tesseraTimings")
    assert timings["background"] > timings["app"]


def test_the_bokeh_scripts_load_once_python_has_its_packages(page, server, site):
    """BokehJS and Panel's scripts (2.5 MB, for drawing Python's document) are requested only once the worker
    has its packages, so they share the link with neither Pyodide's core nor the packages (they loaded at
    the preview's first paint before)."""
    assert open_app(page, server + "index.html") == "ready"
    scripts = json.loads((site / "boot.json").read_text())["scripts"]
    starts = page.evaluate("""(names) => names.map((n) => performance.getEntriesByType("resource")
        .filter((e) => e.name.endsWith("/" + n)).map((e) => e.startTime)[0])""", scripts)
    packages = page.evaluate("window.tesseraTimings.packages")
    assert all(s is not None for s in starts), dict(zip(scripts, starts))
    assert min(starts) >= packages, (dict(zip(scripts, starts)), packages)


def test_the_packages_download_while_pyodide_starts_once_each(page, server, site):
    """The start-up wheels and the lock's packages are requested while Pyodide's core compiles and starts
    (the link is idle then), each once: Pyodide's loadPackage takes the responses already under way. Before,
    they were requested once Pyodide was in, and their download (1.6 s at 50 Mbit/s) waited for it."""
    assert open_app(page, server + "index.html") == "ready"
    boot = json.loads((site / "boot.json").read_text())
    lock = json.loads((site / "pyodide" / "pyodide-lock.json").read_text())["packages"]
    names = [w.rsplit("/", 1)[-1] for w in boot["wheels"]] + [lock[p]["file_name"] for p in boot["lock_packages"]]
    entries = page.evaluate("""async () => JSON.parse(await window.tesseraWorker.python(`import js, json
json.dumps([(e.name, e.startTime + js.performance.timeOrigin) for e in js.performance.getEntriesByType('resource')])`))""")
    origin = page.evaluate("performance.timeOrigin")
    starts = {n: [s - origin for url, s in entries if url.rsplit("/", 1)[-1] == n] for n in names}
    assert {n: len(s) for n, s in starts.items()} == {n: 1 for n in names}  # each fetched once, by the worker
    pyodide_in = page.evaluate("window.tesseraTimings.pyodide")
    late = {n: round(s[0] - pyodide_in) for n, s in starts.items() if s[0] >= pyodide_in}
    assert not late, f"requested only once Pyodide was in (ms after): {late}"


def test_the_worker_requests_the_start_up_packages_without_waiting_for_the_page(page, server, site):
    """The worker takes the start-up packages from boot.json itself, as it starts: it does not wait for the page's
    boot message. Before, that message (sent once the page had imported its data path and its preview) was the
    packages' only list; on a loaded machine it came after Pyodide was in, and the packages were requested then,
    after the core instead of beside it (the test above failed so in a CI run)."""
    boot = json.loads((site / "boot.json").read_text())
    lock = json.loads((site / "pyodide" / "pyodide-lock.json").read_text())["packages"]
    names = {w.rsplit("/", 1)[-1] for w in boot["wheels"]} | {lock[p]["file_name"] for p in boot["lock_packages"]}
    seen: set[str] = set()

    def all_seen(request) -> bool:
        seen.add(request.url.rsplit("/", 1)[-1])
        return names <= seen

    # A page of the site's origin that starts the worker and never sends it anything.
    page.route(server + "worker-alone.html", lambda r: r.fulfill(
        content_type="text/html", body="<script>new Worker('worker.js', { type: 'module' });</script>"))
    with page.expect_event("request", predicate=all_seen, timeout=120_000):
        page.goto(server + "worker-alone.html")
    assert names <= seen


@pytest.mark.parametrize("broken", ["numpy altered (integrity)", "param missing (404)"])
def test_a_start_up_package_that_cannot_be_had_is_reported_in_one_line(page, server, site, broken):
    """A start-up package that cannot be had (a lock package whose bytes differ from the lock's sha256, a wheel the
    host does not have) stops the start-up with one line naming it. Before, loadPackage reported it on the console
    only and went on, and the start-up failed later with a traceback: No module named 'numpy'."""
    lock = json.loads((site / "pyodide" / "pyodide-lock.json").read_text())["packages"]
    name = lock["numpy"]["file_name"] if broken.startswith("numpy") else "param-2.4.2-py3-none-any.whl"
    body = (site / "pyodide" / name).read_bytes() if broken.startswith("numpy") else b""
    fulfil = ((lambda r: r.fulfill(status=200, body=body[:-1] + bytes([body[-1] ^ 1]))) if body
              else (lambda r: r.fulfill(status=404, body="not here")))
    page.route("**/" + name, fulfil)
    text = error_text(page, server + "index.html")
    assert "could not start" in text and name in text, text  # the file it could not have


def test_the_start_up_loads_the_codec_of_tessera_stores_alone_and_another_on_first_use(page, server, site):
    """The compression codecs are chunks of the JavaScript bundle of their own (builder/site.py): the start-up loads
    Blosc, every TESSERA store's codec, and neither Zstd nor LZ4 (with Blosc's, 1.4 MB of the 1.45 MB bundle the
    page loaded first of all before); an array in another codec is read all the same, its codec loaded then."""
    chunks = {p.name.split("-")[0]: p.name for p in (site / "vendor" / "chunks").glob("*.mjs")}  # "chunk": shared code
    assert {"blosc", "zstd", "lz4"} <= set(chunks), chunks
    assert (site / "vendor" / "tessera.mjs").stat().st_size < 200_000
    group = zarr.open_group(site / "data" / "zstd-test.zarr", mode="w", zarr_format=3)
    want = np.arange(12, dtype="int16").reshape(3, 4) * 7 - 20
    group.create_array("a", shape=(3, 4), chunks=(3, 4), dtype="int16", compressors=zarr.codecs.ZstdCodec(level=3))[:] = want
    assert open_app(page, server + "index.html") == "ready"
    seen = page.evaluate("""async () => JSON.parse(await window.tesseraWorker.python(`import js, json
json.dumps([e.name for e in js.performance.getEntriesByType('resource')])`)).concat(
        performance.getEntriesByType('resource').map((e) => e.name))""")  # the worker's requests and the page's
    codecs = lambda names: sorted({n.rsplit("/", 1)[-1].split("-")[0] for n in names if "/vendor/chunks/" in n} - {"chunk"})
    assert codecs(seen) == ["blosc"], seen
    got = page.evaluate("""async (url) => { const r = await window.tesseraJS.read(url, "a", [[0, 3], [0, 4]], "pixel");
        if (!r.ok) throw new Error(r.error.message); return [Array.from(r.value.data), r.value.shape, r.value.dtype]; }""",
                        server + "data/zstd-test.zarr")
    assert got == [want.ravel().tolist(), [3, 4], "int16"]
    assert codecs(page.evaluate("() => performance.getEntriesByType('resource').map((e) => e.name)")) == ["blosc", "zstd"]


def test_the_first_map_reads_its_overview_chunks_at_once_not_one_after_another(page, server):
    """The first draw's global_rgb chunks are fetched together: one after another, each costs a round trip
    (about 30 of them, 1.4 s over a 40 ms link, before the explorer was interactive). A view of the Sussex tiles at
    level 0's resolution, over the three level-0 chunks the test site's pyramid has there (it asks only for the
    chunks its level records: builder/core/chunkruns.py; a dozen requests before, most of them for chunks that
    do not exist)."""
    assert open_app(page, server + "index.html#lon=0.005&lat=50.845&span=8000") == "ready"
    log = [e for e in page.evaluate("window.tesseraWorker.stats().then((s) => s.log)")
           if "/global_rgb/" in e["url"] and not e["url"].endswith(".json")]
    assert len(log) >= 2, log
    in_flight = max(sum(1 for o in log if o["start"] <= e["start"] < o["end"]) for e in log)
    assert in_flight >= 2, [(round(e["start"]), round(e["end"])) for e in log]  # one after another: always 1


def test_the_first_maps_reads_are_under_way_while_python_builds_the_ui(page, server):
    """The first draw's global_rgb chunks are requested before Python builds the UI (`ui` mark), not once it waits
    for the page to lay the UI out: the reads (~50 requests, 0.3 s over a 40 ms link) then end while it builds. On
    a view of the Sussex tiles at level 0's resolution, over the three level-0 chunks the test site has there."""
    assert open_app(page, server + "index.html#lon=0.005&lat=50.845&span=8000") == "ready"
    t = page.evaluate("window.tesseraTimings")
    origin = page.evaluate("performance.timeOrigin")
    log = [e for e in page.evaluate("window.tesseraWorker.stats().then((s) => s.log)")
           if "/global_rgb/" in e["url"] and not e["url"].endswith(".json")]
    assert len(log) >= 2, log
    late = [round(e["start"] - origin - t["ui"]) for e in log if e["start"] - origin > t["ui"]]
    assert not late, f"{len(late)} of {len(log)} reads requested after the UI was built (ms after): {late[:10]}"


def test_the_first_document_holds_the_shown_tool_tab_alone_and_a_tab_is_drawn_when_opened(page, server):
    """The tools' tabs are dynamic: at start the document holds the Labels tab's models, not the other five
    tabs' plots and widgets (some 100 models fewer for BokehJS to build and lay out before `ready`); opening a
    tab draws it, and its widgets then reach Python. Those tabs are not even built in Python before they are
    first opened: their figures do not exist there at start."""
    assert open_app(page, server + "index.html") == "ready"
    named = "(n) => Bokeh.documents[0].get_model_by_name(n) !== null"
    text = all_text(page)
    assert "Add class" in text and "Change between the years" not in text  # buttons of Labels and Change
    assert not page.evaluate(named, "change-hist") and not page.evaluate(named, "scatter")  # their plots
    built = ("import gc\nfrom bokeh.models import Plot\n"
             "sorted(o.name for o in gc.get_objects() if isinstance(o, Plot) and o.name in ('change-hist', 'scatter'))")
    assert page.evaluate("(code) => window.tesseraWorker.python(code)", built) == []
    page.locator(".bk-tab", has_text="Change").click()
    page.wait_for_function("Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name('change-hist'))"
                           "?.frame.bbox.width > 100", timeout=60_000)
    assert page.evaluate("(code) => window.tesseraWorker.python(code)", built) == ["change-hist"]
    assert "Add class" not in all_text(page)  # the tab shown before left the page
    # a button of the opened tab reaches Python: change between the demo's two years over the view, whose
    # histogram comes back into the tab's plot
    page.locator("button", has_text="Change between the years").click()
    page.wait_for_function("(() => { const d = Bokeh.documents[0].get_model_by_name('hist-source').data;"
                           " return (d instanceof Map ? d.get('count') : d.count).length > 0; })()", timeout=120_000)
    # its counts on a logarithmic axis (on a linear one, the bin of the unchanged pixels dwarfed the rest)
    assert page.evaluate("Bokeh.documents[0].get_model_by_name('change-hist').y_scale.type") == "LogScale"


def test_no_data_pixel_is_shown_as_no_data(page, server, site):
    store = site / "data" / "2024.zarr"
    s = zarr.open_group(store / "utm30", mode="r")["scales"][:]
    rgb = zarr.open_group(store / "utm30", mode="r")["rgb"][:]
    rows, cols = np.nonzero(np.isnan(s))
    # a no-data pixel inside the area the tiles cover (sea next to the coast), not outside every tile
    near = [(r, c) for r, c in zip(rows, cols) if rgb[max(r - 30, 0):r + 30, max(c - 30, 0):c + 30, 3].any()]
    r, c = near[len(near) // 2]
    lon, lat = pixel_lonlat(store, "utm30", int(r), int(c))
    assert open_app(page, server + "index.html") == "ready"
    res = page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon, lat])
    assert res["valid"] is False and res["row"] == r and res["col"] == c
    data = model_data(page, "spectrum-source")
    assert data["ys"] == []  # nothing plotted: never zeros
    assert "No data" in all_text(page)


def test_one_range_request_per_pixel_once_the_shard_index_is_cached(page, server, site):
    store = site / "data" / "2024.zarr"
    (r1, c1), (r2, c2) = interior_valid(store, "utm31", 0), interior_valid(store, "utm31", 0)
    r2, c2 = r1 + 5, c1 + 6  # same shard, another inner chunk
    assert truth(store, "utm31", r2, c2) is not None and (r1 // 256, c1 // 256) == (r2 // 256, c2 // 256)
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("async () => await window.tesseraApi.redraw()")  # let map reads settle first

    def pixel_log():  # requests of the pixel path in the 2024 store (not the map's rgb, not the multi-year index)
        log = page.evaluate("window.tesseraWorker.stats().then((s) => s.log)")
        return [e for e in log if (e["source"] or "").endswith("/data/2024.zarr")
                and ("/utm31/embeddings/" in e["url"] or "/utm31/scales/" in e["url"])]

    page.evaluate("window.tesseraWorker.resetStats()")
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", list(pixel_lonlat(store, "utm31", r1, c1)))
    first = pixel_log()
    summary = [(e["method"], e["url"].split("/data/")[-1], e["range"], e["status"]) for e in first]
    assert len(first) <= 4, summary  # embeddings and scales: one index each (first touch) + one chunk each
    page.evaluate("window.tesseraWorker.resetStats()")
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", list(pixel_lonlat(store, "utm31", r2, c2)))
    log = pixel_log()
    emb = [e for e in log if "/embeddings/" in e["url"]]
    scl = [e for e in log if "/scales/" in e["url"]]
    assert len(emb) == 1 and len(scl) == 1 and len(log) == 2, log
    assert all(e["range"] and e["status"] == 206 for e in log)
    assert 16 * 128 * 0.5 < emb[0]["bytes"] <= 16 * 128 + 64  # one 4x4x128 int8 inner chunk, about 2 KB
    got = np.array(wait_spectrum(page, 1, f"r{r2} c{c2}")["ys"][0])
    np.testing.assert_array_equal(got, truth(store, "utm31", r2, c2).astype(np.float64))


def test_a_pixel_from_a_cold_shard_reads_each_shard_index_once_and_no_range_twice(page, server, site):
    """The first click in an untouched shard: the year store and the multi-year index (which refers to the
    same 2024 shard files) share what they read, so each shard file costs one index read and one chunk read,
    with no HEAD first; the plotted vectors (this year, and every year of the index) are CPython's."""
    data = site / "data"
    row, col = interior_valid(data / "2024.zarr", "utm31", 2)
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("async () => await window.tesseraApi.redraw()")  # let map reads settle first
    page.evaluate("window.tesseraWorker.resetStats()")
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)",
                  list(pixel_lonlat(data / "2024.zarr", "utm31", row, col)))
    log = [e for e in page.evaluate("window.tesseraWorker.stats().then((s) => s.log)")
           if "/utm31/embeddings/" in e["url"] or "/utm31/scales/" in e["url"]]
    summary = [(e["method"], e["url"].split("/data/")[-1], e["range"], e["bytes"]) for e in log]
    assert all(e["method"] == "GET" and e["status"] == 206 and e["range"] for e in log), summary
    assert len({(e["url"], e["range"]) for e in log}) == len(log), summary  # no range fetched twice
    shard = f"{row // 256}/{col // 256}"
    files = {f"{y}.zarr/utm31/{a}" for y in (2023, 2024) for a in (f"embeddings/c/{shard}/0", f"scales/c/{shard}")}
    assert {e["url"].split("/data/")[-1] for e in log} == files, summary
    index_bytes = 64 * 64 * 16 + 4  # (256/4)^2 (offset, length) uint64 pairs and a CRC32C
    for f in files:
        reads = sorted((e for e in log if e["url"].endswith(f)), key=lambda e: -e["bytes"])
        assert len(reads) == 2 and reads[0]["bytes"] == index_bytes, summary  # its index, then one chunk
        assert reads[1]["bytes"] <= 16 * 128 + 64, summary
    got = np.array(wait_spectrum(page, 1, f"r{row} c{col}")["ys"][0])
    np.testing.assert_array_equal(got, truth(data / "2024.zarr", "utm31", row, col).astype(np.float64))
    years = model_data(page, "years-source")
    want = [truth(data / f"{y}.zarr", "utm31", row, col) for y in (2023, 2024)]
    assert [lab.split(" ")[0] for lab in years["label"]] == ["2023", "2024"]
    for ys, w in zip(years["ys"], want):
        np.testing.assert_array_equal(np.array(ys), w.astype(np.float64))
    # Both sides of the bridge in this page hold the one list of error kinds (builder/core/errors.json).
    kinds = json.loads((REPO / "builder" / "core" / "errors.json").read_text())
    assert page.evaluate("Object.assign({}, window.tesseraJS.ERROR_KINDS)") == kinds
    assert json.loads(page.evaluate("window.tesseraWorker.python('import json, builder.core.source as s; json.dumps(s.ERROR_KINDS)')")) == kinds


def test_a_view_settled_at_10_m_warms_its_shard_indexes_and_a_click_there_reads_only_its_chunks(page, server, site):
    """Zoomed out nothing is prefetched; once the view settles at 10 m per screen pixel the worker has read the
    index (and only the index) of every shard in view of the year store's embeddings and scales, then those of the
    multi-year index's other year (its 2024 refers to the year store's files: not read again), and a click there
    then reads one chunk per array and year, no index; the plotted vectors are CPython's."""
    store = site / "data" / "2024.zarr"
    row, col = interior_valid(store, "utm31", 2)
    lon, lat = pixel_lonlat(store, "utm31", row, col)
    index_bytes = 64 * 64 * 16 + 4  # (256/4)^2 (offset, length) uint64 pairs and a CRC32C
    pixel_files = lambda log: [e for e in log if "/embeddings/" in e["url"] or "/scales/" in e["url"]]
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("window.tesseraWorker.resetStats()")
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 200000)", [lon, lat])  # zoomed out
    stats = page.evaluate("window.tesseraWorker.stats()")
    assert pixel_files(stats["log"]) == [] and stats["prefetch"]["files"] == 0
    page.evaluate("window.tesseraWorker.resetStats()")
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 7600)", [lon, lat])  # 10 m per px
    stats = page.evaluate("window.tesseraWorker.stats()")
    warm = pixel_files(stats["log"])
    summary = [(e["url"].split("/data/")[-1], e["range"], e["status"], e["bytes"]) for e in warm]
    years = [e["url"].split("/data/")[-1].split("/")[0] for e in warm]
    assert set(years) == {"2024.zarr", "2023.zarr"}, summary  # the year store shown, then the other year's
    assert years == sorted(years, key=lambda y: y != "2024.zarr"), summary  # the year store's first (the spectrum)
    assert all(e["bytes"] == index_bytes for e in warm if e["status"] == 206), summary  # indexes, no chunk
    assert len({e["url"] for e in warm}) == len(warm), summary  # each shard file once (2024's not again)
    assert years.count("2024.zarr") <= 64 and years.count("2023.zarr") <= 64, summary  # capped, per call
    shard = f"{row // 256}/{col // 256}"
    for y in (2024, 2023):
        for f in (f"utm31/embeddings/c/{shard}/0", f"utm31/scales/c/{shard}"):
            assert any(e["url"].endswith(f"{y}.zarr/" + f) and e["status"] == 206 for e in warm), (y, f, summary)
    page.evaluate("window.tesseraWorker.resetStats()")
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon, lat])
    log = pixel_files(page.evaluate("window.tesseraWorker.stats().then((s) => s.log)"))
    summary = [(e["url"].split("/data/")[-1], e["range"], e["bytes"]) for e in log]
    # One chunk per array and year: the year store's two (the multi-year index's 2024 shares them), 2023's two.
    assert sorted(e["url"].split("/data/")[-1].split("/")[0] for e in log) == ["2023.zarr"] * 2 + ["2024.zarr"] * 2, summary
    assert all(e["status"] == 206 and e["bytes"] <= 16 * 128 + 64 for e in log), summary
    got = np.array(wait_spectrum(page, 1, f"r{row} c{col}")["ys"][0])
    np.testing.assert_array_equal(got, truth(store, "utm31", row, col).astype(np.float64))
    page.wait_for_function("""(part) => { const d = Bokeh.documents[0].get_model_by_name('years-source').data;
        const l = d instanceof Map ? d.get('label') : d.label; return l.length === 2 && l.every((x) => x.includes(part)); }""",
                           arg=f"r{row} c{col}", timeout=30_000)
    got = model_data(page, "years-source")
    assert [lab.split(" ")[0] for lab in got["label"]] == ["2023", "2024"]
    for ys, y in zip(got["ys"], (2023, 2024)):
        np.testing.assert_array_equal(np.array(ys), truth(site / "data" / f"{y}.zarr", "utm31", row, col).astype(np.float64))


def test_similarity_ranks_a_known_similar_pixel_high(page, server, site):
    store = site / "data" / "2024.zarr"
    z = zarr.open_group(store / "utm30", mode="r")
    row, col = interior_valid(store, "utm30", 1)
    target = truth(store, "utm30", row, col)
    emb = z["embeddings"][:].astype(np.float32) * z["scales"][:][..., None]
    with np.errstate(invalid="ignore"):
        cos = (emb @ target) / (np.linalg.norm(emb, axis=-1) * np.linalg.norm(target))
    # a pixel at least 40 px away, the most similar there, and the least similar one
    yy, xx = np.indices(cos.shape)
    far = (np.hypot(yy - row, xx - col) > 40) & (np.abs(yy - row) < 160) & (np.abs(xx - col) < 200)
    sim_rc = np.unravel_index(np.nanargmax(np.where(far, cos, np.nan)), cos.shape)
    dis_rc = np.unravel_index(np.nanargmin(np.where(far, cos, np.nan)), cos.shape)
    lon, lat = pixel_lonlat(store, "utm30", row, col)
    assert open_app(page, server + "index.html") == "ready"
    # 5 km: full 10 m vectors (a wider view reads the compact code, tests/test_tools_anyzoom.py)
    page.evaluate("([lon, lat]) => window.tesseraApi.view(lon, lat, 5000)", [lon, lat])
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon, lat])
    page.evaluate("async () => await window.tesseraApi.similarity(true)")
    at = lambda rc: page.evaluate("([lon, lat]) => window.tesseraApi.simAt(lon, lat)",
                                  list(pixel_lonlat(store, "utm30", int(rc[0]), int(rc[1]))))
    assert at((row, col)) == pytest.approx(1.0, abs=1e-6)
    assert at(sim_rc) == pytest.approx(float(cos[sim_rc]), abs=1e-5)
    assert at(dis_rc) == pytest.approx(float(cos[dis_rc]), abs=1e-5) and at(dis_rc) < at(sim_rc)
    overlay = model_data(page, "overlay-source")
    assert len(overlay["image"]) == 1  # the heat-map layer is on the map
    assert "Similarity to utm30" in all_text(page)


def test_state_is_restored_from_the_url(page, server, site):
    store = site / "data" / "2023.zarr"
    sel = interior_valid(store, "utm31")
    pin = interior_valid(store, "utm30")
    slon, slat = pixel_lonlat(store, "utm31", *sel)
    plon, plat = pixel_lonlat(store, "utm30", *pin)
    h = f"#year=2023&lon={slon:.6f}&lat={slat:.6f}&span=4000&sel={slon:.6f},{slat:.6f}&pins={plon:.6f},{plat:.6f}"
    # a hand-edited threshold (here hostile markup) is named in one literal line; the rest of the link applies
    bad = '<img src=x onerror="window.__pwned=1">'
    assert open_app(page, server + "index.html" + h + "&sim=" + quote(bad)) == "ready"
    wait_text(page, f"sim {bad!r} is not a number")
    assert "Ignored in the link:" in all_text(page)
    assert page.evaluate("window.__pwned") is None
    data = wait_spectrum(page, 2, f"utm31 r{sel[0]} c{sel[1]}")
    assert any(f"pin 1: utm30 r{pin[0]} c{pin[1]}" == lab for lab in data["label"])
    np.testing.assert_array_equal(np.array(data["ys"][0]), truth(store, "utm31", *sel).astype(np.float64))
    wait_text(page, "year 2023")  # the side bar's text follows the spectrum's frame
    assert page.locator("#cosine-table").count() == 1
    from app.geo import lonlat_to_merc
    x, y = lonlat_to_merc(slon, slat)
    box = page.evaluate("""() => { const m = Bokeh.documents[0].get_model_by_name('map');
        return [m.x_range.start, m.x_range.end, m.y_range.start, m.y_range.end]; }""")
    assert box[0] < x < box[1] and box[2] < y < box[3]  # the map shows the URL's place ...
    assert 4000 < box[1] - box[0] < 4000 / 0.6  # ... at the URL's span (Mercator metres at ~50 deg N)
    # the app keeps writing its state back: a reload of that URL gives the same selection
    url = page.url
    assert "sel=" in url and "pins=" in url and "year=2023" in url


def test_the_plots_are_built_once_the_map_is_interactive_and_show_what_was_selected_before(page, server, site):
    """The first document holds the map and the side bar; the spectrum, years and change plots are added once the
    page is `ready` (building their views held the page's thread before it), marked `plots` once painted. Their
    sources are in the first document: a selection restored from the link before the plots exist shows in them."""
    store = site / "data" / "2024.zarr"
    sel = interior_valid(store, "utm31")
    lon, lat = pixel_lonlat(store, "utm31", *sel)
    # What the document holds at the moment the page turns `ready` (an observer on the body's data-state).
    page.add_init_script("""new MutationObserver(() => {
        if (document.body && document.body.dataset.state === 'ready' && !window.__atReady) {
          const d = Bokeh.documents[0];
          window.__atReady = {figures: [...d.all_models].filter((m) => m.type === 'Figure').map((m) => m.name).sort(),
                              sources: ['spectrum-source', 'years-source', 'change-source'].filter((n) => d.get_model_by_name(n))};
        } }).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-state']});""")
    h = f"#year=2024&lon={lon:.6f}&lat={lat:.6f}&span=4000&sel={lon:.6f},{lat:.6f}"
    assert open_app(page, server + "index.html" + h) == "ready"
    at_ready = page.evaluate("window.__atReady")
    assert at_ready == {"figures": ["map"], "sources": ["spectrum-source", "years-source", "change-source"]}, at_ready
    page.wait_for_function("window.tesseraTimings.plots !== undefined", timeout=30_000)
    figures = page.evaluate("""() => Object.fromEntries([...Bokeh.documents[0].all_models].filter((m) => m.type === 'Figure')
        .map((m) => [m.name, m.renderers.map((r) => r.data_source && r.data_source.name).filter((n) => n)])) """)
    assert figures["spectrum"] == ["spectrum-source"] and figures["years"] == ["years-source"], figures
    assert "change-source" in figures["change"], figures
    # Laid out: every figure's element is on the page at its height (searched through the shadow roots BokehJS uses).
    heights = page.evaluate("""() => { const out = [];
        const walk = (root) => { for (const e of root.querySelectorAll('*')) {
            if (e.classList.contains('bk-Figure')) out.push(Math.round(e.getBoundingClientRect().height));
            if (e.shadowRoot) walk(e.shadowRoot); } };
        walk(document); return out.sort((a, b) => a - b); }""")
    assert heights[:3] == [240, 240, 260] and len(heights) == 4, heights  # change and years, spectrum; the map
    data = wait_spectrum(page, 1, f"utm31 r{sel[0]} c{sel[1]}")  # the link's selection, restored before the plots
    np.testing.assert_array_equal(np.array(data["ys"][0]), truth(store, "utm31", *sel).astype(np.float64))


def test_the_first_documents_stylesheets_come_with_the_scripts_once_each(page, server):
    """Panel's stylesheets that the first document links are preloaded while Python imports Panel (boot.json
    `stylesheets`), each fetched once and none other before the page is ready: the first layout waits for none."""
    assert open_app(page, server + "index.html") == "ready"
    page.wait_for_function("window.tesseraTimings.plots !== undefined", timeout=30_000)
    t = page.evaluate("window.tesseraTimings")
    listed = page.evaluate("window.tesseraBoot.stylesheets")
    css = page.evaluate("""() => performance.getEntriesByType('resource').filter((e) => new URL(e.name).pathname.endsWith('.css'))
        .map((e) => [new URL(e.name).pathname, e.startTime, e.initiatorType])""")
    before_ready = [(u, at) for u, at, _ in css if at < t["interactive"] and u != "/app.css"]  # app.css: the page's own
    assert listed and {u for u, _ in before_ready} == {"/" + s for s in listed}, (listed, css)
    assert len(before_ready) == len(listed), css  # once each: the layout's <link> took the preloaded response
    assert all(at < t["store_opened"] for _, at in before_ready), (t, css)  # with the scripts, not in the layout


def _object_types(doc, out: set) -> set:
    """The model types (Bokeh's `name` of each {"type": "object"}) in a document's JSON."""
    if isinstance(doc, dict):
        if doc.get("type") == "object":
            out.add(doc["name"])
        for v in doc.values():
            _object_types(v, out)
    elif isinstance(doc, list):
        for v in doc:
            _object_types(v, out)
    return out


def test_bokehjs_warms_up_on_the_explorers_kinds_of_models_first_and_keeps_nothing_of_it(page, server, site):
    """While Python imports Panel, the page builds the warm-up document (app/warmup.py, made at site build) off screen
    and drops it: done before the explorer's own document is built, holding every kind of model that the explorer's
    document holds once its plots are shown, and nothing of it left (not in Bokeh.documents, nor in the page, nor
    the page's title)."""
    warm = json.loads((site / "warmup.json").read_text())
    assert open_app(page, server + "index.html") == "ready"
    page.wait_for_function("window.tesseraTimings.plots !== undefined", timeout=30_000)
    t = page.evaluate("window.tesseraTimings")
    assert t["packages"] < t["warm"] < t["rendered"], t
    kinds = set(page.evaluate("[...new Set([...Bokeh.documents[0].all_models].map((m) => m.type))]"))
    assert len(kinds) > 40 and "Figure" in kinds and "panel.models.widgets.Button" in kinds, kinds
    missing = kinds - _object_types(json.loads(warm["docs_json"]), set())
    assert not missing, f"app/warmup.py lacks {sorted(missing)}"
    left = page.evaluate("""[Bokeh.documents.length, !!document.getElementById('tessera-warm-up'), document.title,
        Bokeh.documents[0].roots().length]""")
    assert left == [1, False, "TESSERA explorer", 1], left


def test_the_explorer_starts_without_its_warm_up(page, server):
    """A warm-up that cannot be had costs its gain only: the page says so once on its console and starts."""
    warnings = []
    page.on("console", lambda m: warnings.append(m.text) if m.type == "warning" and "warm-up" in m.text else None)
    page.route("**/warmup.json", lambda route: route.fulfill(status=404, body="gone"))
    assert open_app(page, server + "index.html") == "ready"
    assert page.evaluate("window.tesseraTimings.warm") is None
    assert warnings == ["tessera: no warm-up: warmup.json: HTTP 404"], warnings


def test_year_selector_switches_store_and_rereads_the_pixel(page, server, site):
    s23, s24 = site / "data" / "2023.zarr", site / "data" / "2024.zarr"
    row, col = interior_valid(s24, "utm30")
    lon, lat = pixel_lonlat(s24, "utm30", row, col)
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon, lat])
    before = wait_spectrum(page, 1)["ys"][0]
    page.get_by_label("Year", exact=True).select_option("2023")
    wait_text(page, "year 2023")
    # the info text and the spectrum are separate models: await the spectrum itself (CI read the 2024 line)
    page.wait_for_function("""(before) => {
        const d = Bokeh.documents[0].get_model_by_name('spectrum-source').data;
        const ys = d instanceof Map ? d.get('ys') : d.ys;
        return ys.length === 1 && Array.from(ys[0]).some((v, i) => v !== before[i]);
    }""", arg=before, timeout=30_000)
    data = model_data(page, "spectrum-source")
    np.testing.assert_array_equal(np.array(data["ys"][0]), truth(s23, "utm30", row, col).astype(np.float64))


def test_export_pins_as_csv_and_npy(page, server, site, tmp_path):
    store = site / "data" / "2024.zarr"
    a, b = interior_valid(store, "utm30", 0), interior_valid(store, "utm34", 0)
    assert open_app(page, server + "index.html") == "ready"
    for zone, rc in (("utm30", a), ("utm34", b)):
        page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", list(pixel_lonlat(store, zone, *rc)))
        page.get_by_role("button", name="Pin pixel").click()
    wait_spectrum(page, 3)
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download pins (.npy)").click()
    path = tmp_path / "pins.npy"
    dl.value.save_as(path)
    got = np.load(path)
    np.testing.assert_array_equal(got, np.stack([truth(store, "utm30", *a), truth(store, "utm34", *b)]))
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download pins (CSV)").click()
    dl.value.save_as(tmp_path / "pins.csv")
    lines = (tmp_path / "pins.csv").read_text().splitlines()
    assert lines[0].startswith("zone,row,col,lon,lat,easting,northing,scale,b0") and len(lines) == 3
    vals = np.array([float(x) for x in lines[2].split(",")[8:]], dtype=np.float32)
    np.testing.assert_array_equal(vals, truth(store, "utm34", *b))


def test_embed_page_loads_the_viewer_in_an_iframe(page, server):
    page.goto(server + "embed.html?store=data/2024.zarr")
    assert "<iframe src=" in page.inner_text("#snippet")
    frame = page.frame_locator("#viewer")
    frame.locator("body[data-state='ready']").wait_for(timeout=120_000)
    assert frame.locator("#header").is_hidden()  # embed=1 hides the header
    frame.get_by_text("Click the map").first.wait_for(timeout=30_000)  # pierces the shadow DOM


def error_text(page, url: str) -> str:
    assert open_app(page, url) == "error"
    box = page.locator("#error")
    assert box.is_visible()
    return box.inner_text()


def test_error_for_a_missing_store(page, server):
    text = error_text(page, server + "index.html?store=data/nope.zarr")
    assert "Store not found" in text and "nope.zarr" in text


def test_error_for_a_server_without_range_support(page, site):
    with static_server(site, "--no-range") as base:
        text = error_text(page, base + "index.html")
    assert "does not support HTTP Range" in text


def test_error_for_a_store_of_another_dataset_version(page, site, tmp_path):
    data = site / "data" / "v2.zarr"
    if data.exists():
        shutil.rmtree(data)
    shutil.copytree(site / "data" / "2024.zarr", data)
    meta = data / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["tessera:dataset_version"] = "v2"
    meta.write_text(json.dumps(doc))
    with static_server(site) as base:
        text = error_text(page, base + "index.html?store=data/v2.zarr")
    assert "Unsupported tessera dataset version" in text and "'v2'" in text


def test_error_for_a_store_host_without_cors(page, server, site):
    with static_server(site, "--no-cors") as other:
        text = error_text(page, server + f"index.html?store={other}data/2024.zarr")
    assert "network or CORS" in text


def test_multi_year_index_shows_a_pixel_across_years_with_a_change_plot(page, server, site):
    s23, s24 = site / "data" / "2023.zarr", site / "data" / "2024.zarr"
    doc = json.loads((site / "data" / "years.json").read_text())
    assert all(v[0].startswith("{{base}}") for v in doc["refs"].values() if isinstance(v, list))  # relocatable
    row, col = interior_valid(s24, "utm30", 2)
    lon, lat = pixel_lonlat(s24, "utm30", row, col)
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("window.tesseraWorker.resetStats()")
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon, lat])
    page.wait_for_function("""() => {
        const d = Bokeh.documents[0].get_model_by_name('years-source').data;
        return (d instanceof Map ? d.get('ys') : d.ys).length === 2; }""", timeout=30_000)
    data = model_data(page, "years-source")
    # the same ground in each year's own store (their grids differ: the index lines them up)
    from pyproj import Transformer
    vecs = []
    for s in (s23, s24):
        z = zarr.open_group(s / "utm30", mode="r")
        t = z.attrs["spatial:transform"]
        e, n = Transformer.from_crs(4326, 32630, always_xy=True).transform(lon, lat)
        r, c = int((t[5] - n) // 10), int((e - t[2]) // 10)
        vecs.append(truth(s, "utm30", r, c))
    for got, want in zip(data["ys"], vecs):
        np.testing.assert_array_equal(np.array(got), want.astype(np.float64))
    change = model_data(page, "change-source")
    want = float(np.dot(vecs[0], vecs[1]) / (np.linalg.norm(vecs[0]) * np.linalg.norm(vecs[1])))
    assert change["year"] == [2024] and change["cosine"][0] == pytest.approx(want, abs=1e-6)
    # the index's references resolve to the year stores' own shard files
    urls = [e["url"] for e in page.evaluate("window.tesseraWorker.stats().then((s) => s.log)")]
    assert any("/data/2023.zarr/utm30/embeddings/c/" in u for u in urls)
