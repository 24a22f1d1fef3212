"""Hostile stores, catalogs and indexes in real Chromium: text is data, bad metadata is an error in the page.

Every payload below would run script if any text sink rendered it as HTML: the tests assert that
nothing ran and that the text is shown literally.
"""
from __future__ import annotations

import html
import json
import re
import shutil
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
import zarr
from playwright.sync_api import expect
from pyproj import Transformer

from browser_util import all_text, static_server, wait_async, wait_text
from test_browser import demo_pixel, interior_valid, open_app, pixel_lonlat, wait_spectrum
from tools_util import zone_vectors

pytestmark = pytest.mark.browser


def payload(tag: str) -> str:
    return f'<img src=x onerror="window.__xss=(window.__xss||[]).concat([`{tag}`])">{tag}'


def plant(store: Path, edit) -> None:
    """Apply `edit(attrs, node_key)` to every node's attributes, in the node's zarr.json and in the
    root's consolidated metadata (which is what the explorer reads)."""
    root = store / "zarr.json"
    doc = json.loads(root.read_text())
    edit(doc["attributes"], "")
    for key, meta in doc["consolidated_metadata"]["metadata"].items():
        edit(meta.setdefault("attributes", {}), key)
        node = store / key / "zarr.json"
        ndoc = json.loads(node.read_text())
        ndoc["attributes"] = meta["attributes"]
        node.write_text(json.dumps(ndoc))
    root.write_text(json.dumps(doc))


def copy_store(site: Path, year: int, name: str) -> Path:
    dst = site / "data" / "hostile" / name
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(site / "data" / f"{year}.zarr", dst)
    return dst


def no_script_ran(page) -> None:
    assert page.evaluate("window.__xss === undefined"), page.evaluate("window.__xss")
    # No <img> was created from data anywhere in the page (shadow roots included).
    assert page.evaluate("""() => {
        const walk = (n) => (n.tagName === 'IMG' && n.getAttribute('src') === 'x') || (n.shadowRoot && walk(n.shadowRoot))
            || Array.from(n.children || []).some(walk);
        return walk(document.body); }""") is False


def write_json(path: Path, doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def test_text_from_stores_and_catalogs_is_shown_literally_and_never_runs(page, server, site):
    good = copy_store(site, 2024, "good.zarr")

    def versions(attrs, key):
        if key.startswith("utm") and "/" not in key:
            attrs["tessera:model_version"] = payload("model")
            attrs["tessera:build_version"] = payload("build")
    plant(good, versions)
    bad = copy_store(site, 2023, "bad.zarr")
    plant(bad, lambda attrs, key: attrs.update({"tessera:dataset_version": payload("dataset")}) if key == "" else None)
    write_json(site / "data" / "hostile" / "catalog.json", {"stores": [
        {"year": 2023, "url": "bad.zarr", "label": payload("label2023")},
        {"year": 2024, "url": "good.zarr", "label": payload("label2024")}]})
    assert open_app(page, server + "index.html?catalog=data/hostile/catalog.json") == "ready"
    row, col = interior_valid(good, "utm30")
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", list(pixel_lonlat(good, "utm30", row, col)))
    wait_spectrum(page, 1, f"utm30 r{row} c{col}")
    wait_text(page, payload("build"))
    text = all_text(page)
    assert payload("model") in text and payload("build") in text
    # The catalog labels are the year selector's options, as text.
    select = page.get_by_label("Year", exact=True)  # inside Bokeh's shadow root; locators pierce it
    options = select.evaluate("(s) => Array.from(s.options, (o) => o.textContent)")
    assert options == [payload("label2023"), payload("label2024")]
    # Choosing the year whose store is hostile: the error shows its text literally, the selector goes back.
    select.select_option(index=0)
    wait_text(page, "Cannot open 2023")
    assert payload("dataset") in all_text(page)
    expect(select).to_have_js_property("selectedIndex", 1, timeout=30_000)
    no_script_ran(page)


def error_box(page, url: str) -> str:
    assert open_app(page, url) == "error"
    text = page.locator("#error").inner_text()
    assert "Traceback" not in text
    return text


def test_hostile_text_in_an_error_box_is_shown_literally(page, server, site):
    s = copy_store(site, 2024, "projcode.zarr")
    plant(s, lambda attrs, key: attrs.update({"proj:code": payload("proj")}) if key == "utm30" else None)
    text = error_box(page, server + "index.html?store=data/hostile/projcode.zarr")
    assert text.startswith("Not a tessera store") and payload("proj") in text
    assert "not a tessera store:" in text and len(text.strip().splitlines()) == 2  # title + one line
    no_script_ran(page)
    # The root's schema, checked by the real jsonschema in the browser: its message quotes the value.
    s = copy_store(site, 2024, "year.zarr")
    plant(s, lambda attrs, key: attrs.update({"tessera:year": payload("year")}) if key == "" else None)
    text = error_box(page, server + "index.html?store=data/hostile/year.zarr")
    assert f"not a tessera store: store root: tessera:year: '{payload('year')}' is not of type 'integer'" in text
    assert len(text.strip().splitlines()) == 2
    no_script_ran(page)


def test_deeply_nested_metadata_is_an_error_not_a_hung_page(page, server, site):
    s = copy_store(site, 2024, "deep.zarr")
    doc = json.loads((s / "zarr.json").read_text())
    text = json.dumps(doc)
    deep = "[" * 100_000 + "]" * 100_000
    (s / "zarr.json").write_text(text[:-1] + ', "deep": ' + deep + "}")
    text = error_box(page, server + "index.html?store=data/hostile/deep.zarr")
    assert "nested more than 64 levels" in text


def test_huge_metadata_is_refused_without_reading_it(page, server, site):
    s = copy_store(site, 2024, "huge.zarr")
    doc = json.loads((s / "zarr.json").read_text())
    doc["attributes"]["padding"] = "x" * (20 * 2 ** 20)  # over the documented 16 MiB limit
    (s / "zarr.json").write_text(json.dumps(doc))
    text = error_box(page, server + "index.html?store=data/hostile/huge.zarr")
    assert "documents over 16777216 bytes are refused" in text


@pytest.mark.parametrize("case", ["plain-zarr", "bad-shape", "not-json", "catalog-not-a-list"])
def test_metadata_that_is_not_a_tessera_store_is_one_line(page, server, site, case):
    url = server + "index.html?store=data/hostile/{}.zarr".format(case)
    if case == "plain-zarr":
        write_json(site / "data" / "hostile" / "plain-zarr.zarr" / "zarr.json",
                   {"zarr_format": 3, "node_type": "group", "attributes": {}})
        want = "not a tessera store: store root: attributes: 'zarr_conventions' is a required property"
    elif case == "bad-shape":
        s = copy_store(site, 2024, "bad-shape.zarr")
        plant(s, lambda attrs, key: attrs.update({"spatial:shape": "wide"}) if key == "utm30" else None)
        want = "not a tessera store:"
    elif case == "not-json":
        d = site / "data" / "hostile" / "not-json.zarr"
        d.mkdir(parents=True, exist_ok=True)
        (d / "zarr.json").write_text("{ this is not json")
        want = "is not valid JSON"
    else:
        write_json(site / "data" / "hostile" / "catalog-bad.json", {"stores": {"2024": "x"}})
        url = server + "index.html?catalog=data/hostile/catalog-bad.json"
        want = 'catalog: expected an object with a non-empty "stores" list'
    text = error_box(page, url)
    assert want in text and len(text.strip().splitlines()) == 2, text


def test_a_broken_multi_year_index_is_reported_and_the_rest_keeps_working(page, server, site):
    (site / "data" / "hostile").mkdir(parents=True, exist_ok=True)
    (site / "data" / "hostile" / "broken.json").write_text('{"version": 1, "refs": {"zarr.json": ')
    assert open_app(page, server + "index.html?years=data/hostile/broken.json") == "ready"
    wait_text(page, "Multi-year index unavailable")
    store = site / "data" / "2024.zarr"
    row, col = interior_valid(store, "utm30")
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", list(pixel_lonlat(store, "utm30", row, col)))
    wait_spectrum(page, 1, f"utm30 r{row} c{col}")


def test_index_text_is_literal_and_references_to_another_origin_are_refused(page, server, site):
    doc = json.loads((site / "data" / "years.json").read_text())
    root = json.loads(doc["refs"]["zarr.json"])
    for key, meta in root["consolidated_metadata"]["metadata"].items():
        if key.startswith("utm") and "/" not in key:
            meta["attributes"]["tessera:model_version"] = payload("index")
    doc["refs"]["zarr.json"] = json.dumps(root)
    write_json(site / "data" / "hostile" / "years-text.json", doc)
    assert open_app(page, server + "index.html?years=data/hostile/years-text.json") == "ready"
    wait_text(page, payload("index"))
    no_script_ran(page)

    with static_server(site) as other:
        evil = json.loads((site / "data" / "years.json").read_text())
        key = next(k for k, v in evil["refs"].items() if isinstance(v, list) and "embeddings/c/" in k)
        evil["refs"][key] = [other + "data/2023.zarr/utm30/embeddings/c/0/0/0"] + evil["refs"][key][1:]
        write_json(site / "data" / "hostile" / "years-evil.json", evil)
        page.goto("about:blank")
        assert open_app(page, server + "index.html?years=data/hostile/years-evil.json") == "ready"
        wait_text(page, "points to another origin")
        assert not [u for u in page.requests_seen if u.startswith(other)]
    assert "Multi-year index unavailable" in all_text(page)


# The C stack pointer of Python's runtime in the worker, around event-loop turns of every kind the explorer takes.
STACK_AFTER_TURNS = """import asyncio, js, pyodide_js
sp = pyodide_js._module.stackSave
async def one():
    return 1
before = sp()
for _ in range(2000):
    await asyncio.sleep(0)
for _ in range(500):
    await js.Promise.resolve(1)
    await asyncio.gather(one(), one())
[before, sp()]"""


def test_python_in_the_worker_leaks_no_stack_over_event_loop_turns(page, server):
    """Pyodide 0.27.7 with WebAssembly JS Promise Integration (JSPI, on in Chromium) leaked 16 bytes of its 5 MiB C
    stack for every callback of its event loop (112 for a gather of two): a session died of a stack overflow ("memory
    access out of bounds") after some 300,000 of them, whatever it did; a label import of 20,000 points was enough.
    The worker runs Pyodide without JSPI, which the explorer does not use."""
    assert open_app(page, server + "index.html") == "ready"
    before, after = page.evaluate("async (code) => await window.tesseraWorker.python(code)", STACK_AFTER_TURNS)
    # none per turn (a one-time 48 bytes was seen); 104 KB with the leak
    assert before - after < 1024, f"{before - after} bytes of C stack lost over 3000 turns of the event loop"


# ---------------------------------------------------------------- labels and arguments: data with limits --
STATUS = """import gc
next(o for o in gc.get_objects() if type(o).__name__ == "Explorer").status"""


def status(page) -> str:
    """The status line's HTML, as Python holds it."""
    return page.evaluate("async (code) => await window.tesseraWorker.python(code)", STATUS)


def python_lives(page, site) -> None:
    """A normal command still works: a select reads its pixel (after each hostile input)."""
    row, col, lon, lat, _, _ = demo_pixel(site, 0)
    got = page.evaluate("""async ([lon, lat]) => await Promise.race([window.tesseraApi.select(lon, lat),
        new Promise((ok) => setTimeout(() => ok('no answer in 30 s'), 30000))])""", [lon, lat])
    assert isinstance(got, dict) and (got["zone"], got["row"], got["col"]) == ("utm30", row, col), got


def rejection(page, expr: str, arg=None) -> str:
    """The one line a tesseraApi command's promise rejects with ("resolved" if it does not)."""
    return page.evaluate(f"""async (arg) => {{ try {{ await ({expr}); return "resolved"; }}
                             catch (e) {{ return e.message; }} }}""", arg)


def test_labels_in_a_link_nested_20000_deep_or_malformed_are_one_line_and_the_explorer_starts(page, server, site):
    """A link whose labels= held 20,000 nested brackets (a 120 KB URL) killed Python as the page started ("Maximum
    call stack size exceeded"): the page reached neither ready nor error. A year of 1e400 escaped as OverflowError."""
    deep = "[" * 20_000 + "]" * 20_000
    assert open_app(page, server + "index.html#labels=" + quote(deep)) == "ready"
    assert "<b>Saved labels ignored:</b> the labels= field of the link is nested more than 64 levels deep" \
        in status(page)
    python_lives(page, site)
    for bad, line in [('[["a",null,[[0.05,50.85,1e400]]]]', "point 0: year is not a whole number from 1 to 9999"),
                      (json.dumps([["a", payload("colour"), [[0.05, 50.85, 2024]]]]), "is not a CSS colour"),
                      ('[["a",null,[[0.05,50.85,2024]]', "the labels= field of the link is not valid JSON")]:
        page.goto("about:blank")
        assert open_app(page, server + "index.html#labels=" + quote(bad)) == "ready"
        got = status(page)
        assert got.startswith("<b>Saved labels ignored:</b>") and line in got and "\n" not in got, got
        python_lives(page, site)
    no_script_ran(page)


# The malformed label files of the CPython test, each imported through tesseraApi as text: the same line, but where
# JavaScript's check speaks first (NaN is not JSON).
BROWSER_LINE = {"coordinates-NaN": "the labels file is not valid JSON"}


def test_hostile_label_imports_and_arguments_are_one_status_line_and_python_lives(page, server, site, tmp_path):
    """Labels nested 10,000 deep killed a running session; nine malformed GeoJSON files raised errors the UI did not
    catch (the status line said nothing). Every one is now refused in one line, shown escaped in the status line,
    and a select still works after each: through tesseraApi (as text and as an object), postMessage and the file
    input."""
    from test_tools_labels import MALFORMED
    assert open_app(page, server + "index.html") == "ready"
    for case, (doc, line) in MALFORMED.items():
        text = doc if isinstance(doc, str) else json.dumps(doc)
        got = rejection(page, "window.tesseraApi.importLabels(arg)", text)
        assert BROWSER_LINE.get(case, line) in got and "\n" not in got, (case, got)
        assert status(page) == "<b>Import refused:</b> " + html.escape(got), case
        python_lives(page, site)
    # an object nested 10,000 deep, as a script passes it: refused before Python converts it
    got = rejection(page, "(() => { let a = []; for (let i = 0; i < 10000; i++) a = [a]; "
                          "return window.tesseraApi.importLabels({type: 'FeatureCollection', features: a}); })()")
    assert got == "the arguments of importLabels is nested more than 64 levels deep", got
    python_lives(page, site)
    # text over the documents' 16 MiB
    got = rejection(page, "window.tesseraApi.importLabels(' '.repeat(17 * 2 ** 20))")
    assert got == "the labels file is 17825792 bytes; documents over 16777216 bytes are refused", got
    python_lives(page, site)
    # a host page's message nested 1,000 deep (10,000 is more than the host's own postMessage can copy): answered
    # with why
    reply = page.evaluate("""() => new Promise((resolve) => {
        addEventListener("message", (e) => { if (e.data && e.data.id === "deep" && "ok" in e.data) resolve(e.data); });
        let a = []; for (let i = 0; i < 1000; i++) a = [a];
        postMessage({tessera: 1, id: "deep", cmd: "importLabels", args: [a]}, location.origin); })""")
    assert reply["ok"] is False and "\n" not in reply["error"] and "nested" in reply["error"], reply
    python_lives(page, site)
    # the file input: a file nested 10,000 deep, a hostile colour, a file over the limit (not sent to Python), a good one
    upload = page.locator("input[type=file]")
    files = {"deep.geojson": "[" * 10_000 + "]" * 10_000,
             "colour.geojson": json.dumps({"type": "FeatureCollection", "features": [
                 {"type": "Feature", "geometry": {"type": "Point", "coordinates": [0.05, 50.85]},
                  "properties": {"class": "a", "color": payload("colour")}}]}),
             "huge.geojson": " " * (17 * 2 ** 20)}
    for name, want in [("deep.geojson", "<b>Import refused:</b> the labels file is nested more than 64 levels deep"),
                       ("colour.geojson", "<b>Import refused:</b> labels: feature 0: colour "),
                       ("huge.geojson", "<b>Import refused:</b> the labels file is 17,825,792 bytes; files over "
                                        "16,777,216 bytes are refused")]:
        (tmp_path / name).write_text(files[name])
        upload.set_input_files(str(tmp_path / name))
        wait_async(page, f"async () => (await window.tesseraWorker.python(`{STATUS}`)).startsWith({json.dumps(want)})")
        python_lives(page, site)
    row, col, lon, lat, _, _ = demo_pixel(site, 1)
    (tmp_path / "good.geojson").write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": [lon, lat]},
         "properties": {"class": "field", "color": "#fff"}}]}))
    upload.set_input_files(str(tmp_path / "good.geojson"))
    wait_async(page, f"async () => (await window.tesseraWorker.python(`{STATUS}`)).startsWith('Loaded 1 labels')")
    assert json.loads(page.evaluate("window.tesseraApi.labels()"))["classes"] == [["field", "#ffffff"]]
    no_script_ran(page)


def utm30_points(store: Path, n: int, seed: int):
    """n random points inside utm30's grid west of 0° (where no other zone is nearer), each within 4 m of its pixel's
    centre: (rows, cols, lons, lats), by pyproj from the zone's attributes."""
    g = zarr.open_group(store / "utm30", mode="r")
    t, (h, w) = g.attrs["spatial:transform"], g.attrs["spatial:shape"]
    to_lonlat = Transformer.from_crs(int(g.attrs["proj:code"].split(":")[1]), 4326, always_xy=True)
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, h, 2 * n), rng.integers(0, w, 2 * n)
    e = t[2] + (cols + 0.5) * 10 + rng.uniform(-4, 4, 2 * n)
    nn = t[5] - (rows + 0.5) * 10 + rng.uniform(-4, 4, 2 * n)
    lons, lats = to_lonlat.transform(e, nn)
    west = np.nonzero(lons < -0.001)[0][:n]
    assert len(west) == n
    return rows[west], cols[west], lons[west], lats[west]


# Every status line Python sets from now on, kept in a list on the state.
RECORD_STATUS = """import gc
s = next(o for o in gc.get_objects() if type(o).__name__ == "Explorer")
s.seen_status = []
s.param.watch(lambda e: s.seen_status.append(e.new), "status")
None"""
HEAP = "import pyodide_js\npyodide_js._module.HEAP8.length"


def test_a_100000_point_label_import_reads_its_pixels_in_batches_with_progress_and_python_lives(page, server, site):
    """A 100,000-point import (under the 100,000-feature limit) ran for 90-110 s with no progress, then Python died
    ("memory access out of bounds" in labels.load -> pixel_at), the page still saying ready. Its pixels are now read
    a shard at a time, the status line counting them, within a bound on memory, and every vector is the store's."""
    store = site / "data" / "2024.zarr"
    n_in, n_out = 99_000, 1_000
    rows, cols, lons, lats = utm30_points(store, n_in, seed=7)
    lons = np.concatenate([lons, np.full(n_out, -30.0)])  # the Atlantic: outside every zone
    lats = np.concatenate([lats, np.linspace(-10, 10, n_out)])
    feats = [{"type": "Feature", "geometry": {"type": "Point", "coordinates": [round(float(a), 7), round(float(b), 7)]},
              "properties": {"class": f"class {i % 3}", "year": 2024}} for i, (a, b) in enumerate(zip(lons, lats))]
    text = json.dumps({"type": "FeatureCollection", "features": feats})
    assert 13 * 2 ** 20 < len(text) < 16 * 2 ** 20  # the issue's 15.5 MB file, under the documents' limit
    assert open_app(page, server + "index.html") == "ready"
    py = lambda code: page.evaluate("async (code) => await window.tesseraWorker.python(code)", code)
    py(RECORD_STATUS)
    heap = py(HEAP)
    t0 = time.monotonic()
    got = page.evaluate("""async (text) => await Promise.race([window.tesseraApi.importLabels(text),
        new Promise((ok) => setTimeout(() => ok('no answer in 180 s'), 180000))])""", text)
    seconds = time.monotonic() - t0
    assert got == n_in + n_out, got
    truth = zone_vectors(store, "utm30")[rows, cols]  # zarr-python + numpy
    valid = np.isfinite(truth[:, 0])
    seen = py("import gc, json\njson.dumps(next(o for o in gc.get_objects() if type(o).__name__ == 'Explorer')"
              ".seen_status)")
    seen = json.loads(seen)
    counts = [int(m.group(1).replace(",", "")) for s in seen
              if (m := re.fullmatch(r"Reading the labels' pixels: ([\d,]+) of 100,000…", s))]
    assert len(counts) >= 5 and counts == sorted(counts) and counts[-1] == 100_000, seen[:10]
    missing = n_out + int((~valid).sum())
    assert seen[-1] == f"Loaded 100000 labels in 3 classes; {missing} have no data in this store and are left out " \
                       "of training. Too many for the link: kept in this browser&#x27;s storage (stored:" \
                       + seen[-1].rsplit("(stored:", 1)[-1], seen[-1]  # the set's id (app/tools/stored.py) aside
    assert seen[-1].endswith("); export them to a file for another browser."), seen[-1]
    sample = np.random.default_rng(1).choice(n_in, 300, replace=False).tolist() + [n_in, n_in + n_out - 1]
    vecs = json.loads(py("import gc, json\nL = next(o for o in gc.get_objects() if type(o).__name__ == 'Explorer')"
                         f".tools.labels\njson.dumps([None if L.points[i].vector is None else L.points[i].vector"
                         f".tolist() for i in {sample}])"))
    for i, vec in zip(sample, vecs):
        if i >= n_in or not valid[i]:
            assert vec is None, i
        else:
            assert vec == truth[i].tolist(), i
    grown = py(HEAP) - heap
    print(f"100,000-point import: {seconds:.1f} s, wasm heap +{grown / 2 ** 20:.0f} MiB")
    assert grown < 384 * 2 ** 20, f"the wasm heap grew by {grown / 2 ** 20:.0f} MiB"
    python_lives(page, site)
