"""Hostile stores, catalogs and indexes in real Chromium: text is data, bad metadata is an error in the page.

Every payload below would run script if any text sink rendered it as HTML: the tests assert that
nothing ran and that the text is shown literally.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

from browser_util import all_text, static_server, wait_text
from test_browser import interior_valid, open_app, pixel_lonlat, wait_spectrum

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
