"""Stores with big inner chunks (256x256x128 int8: 8.4 MB each, as the dClimate copy of TESSERA has them), in real
Chromium against builder/serve.py on 127.0.0.1: a chunk is read once however many pixels and regions need it
(app/js/chunks.js keeps it decoded), a read says its bytes before it starts, shows its progress, and can be
cancelled with the page still usable (app/bigreads.py). The store is a geoemb: store written by
tests/geoemb_writer.py (zarr-python) with 256-px inner chunks; expected values are zarr-python's reads."""
from __future__ import annotations

import shutil
import threading

import numpy as np
import pytest
import zarr
from pyproj import Transformer

from browser_util import model_data, open_bridge, wait_state, wait_text
from geoemb_writer import YEARS, write_geoemb
from test_browser_flaky import faulty_server

pytestmark = pytest.mark.browser
REL = "data/bigchunks/geoemb256.zarr"
CHUNK_BYTES = 256 * 256 * 128  # 8,388,608: "8.4 MB"


@pytest.fixture(scope="module")
def big(site, tiles2):
    """The two-year demo tiles as a geoemb: store with 256x256 inner chunks (one per 256x256 shard), in the site."""
    root = site / "data" / "bigchunks"
    if root.exists():
        shutil.rmtree(root)
    store = write_geoemb(tiles2, YEARS, root / "geoemb256.zarr", shard=256, chunk=256)
    g = zarr.open_group(str(store / "utm30"), mode="r")
    assert g["embeddings"].chunks == (1, 128, 256, 256)
    return store


def two_pixels_in_one_chunk(store) -> tuple[tuple[int, int], tuple[int, int]]:
    """(row, col) of two pixels of utm30 with data in 2024, in the same 256x256 chunk, far apart."""
    s = zarr.open_group(str(store / "utm30"), mode="r")["scales"][1]
    ok = [(int(r), int(c)) for r, c in np.argwhere(np.isfinite(s))]
    first = ok[0]
    same = [p for p in ok if (p[0] // 256, p[1] // 256) == (first[0] // 256, first[1] // 256)]
    return first, same[-1]


def chunk_reads(log, array: str = "utm30/embeddings/c/1/") -> list[tuple[str, str]]:
    """Requests for the bytes of 2024's embeddings chunks of utm30 (not their shard indexes: suffix reads)."""
    return [(p, r) for p, r, f in log if array in p and not r.startswith("bytes=-")]


def bridge_read(page, url, path, sel, hint, rid=None):
    return page.evaluate("""async ([url, path, sel, hint, rid]) => {
        const r = await window.tesseraJS.read(url, path, sel, hint, rid);
        return r.ok ? {data: Array.from(r.value.data), shape: r.value.shape} : {error: r.error}; }""",
                         [url, path, sel, hint, rid])


def hold_the_first_chunk_read(prefix: str):
    """A `fail` for faulty_server that holds the first chunk read (not a shard index's suffix range) of a path
    holding `prefix`, and the event set when that read arrives."""
    arrived = threading.Event()

    def fail(key):
        if prefix in key[0] and not key[1].startswith("bytes=-") and not arrived.is_set():
            arrived.set()
            return "hold"
        return None
    return fail, arrived


def test_a_big_chunk_is_read_once_for_two_pixels_and_a_region_and_its_cost_is_said_before(page, site, big):
    """Two pixels of one 256-px chunk and then a region over it: one request for the chunk's bytes (read whole by
    the region store before chunks were kept decoded); the cost asked before is 8,388,608 bytes, after it 0."""
    (r1, c1), (r2, c2) = two_pixels_in_one_chunk(big)
    e = zarr.open_group(str(big / "utm30"), mode="r")["embeddings"]
    with faulty_server(site, lambda key: None, paths=("/bigchunks/",)) as (base, log):
        open_bridge(page, base)
        url = base + REL
        sel = lambda r, c: [[1, 2], None, [r, r + 1], [c, c + 1]]
        cost = page.evaluate("async (a) => (await window.tesseraJS.readCost(...a)).value",
                             [url, "utm30/embeddings", sel(r1, c1), "pixel"])
        assert cost == {"bytes": CHUNK_BYTES, "chunks": 1, "big": True}
        for r, c in ((r1, c1), (r2, c2)):
            got = bridge_read(page, url, "utm30/embeddings", sel(r, c), "pixel")
            np.testing.assert_array_equal(np.array(got["data"]), e[1, :, r, c])
        r0, c0 = r1 // 256 * 256, c1 // 256 * 256
        got = bridge_read(page, url, "utm30/embeddings", [[1, 2], [0, 3], [r0, r0 + 256], [c0, c0 + 256]], "region")
        np.testing.assert_array_equal(np.array(got["data"]).reshape(3, 256, 256), e[1, :3, r0:r0 + 256, c0:c0 + 256])
        assert len(chunk_reads(log)) == 1, chunk_reads(log)
        cost = page.evaluate("async (a) => (await window.tesseraJS.readCost(...a)).value",
                             [url, "utm30/embeddings", sel(r2, c2), "pixel"])
        assert cost == {"bytes": 0, "chunks": 0, "big": True}


def test_a_cancelled_big_read_stops_its_request_and_the_next_read_is_exact(page, site, big):
    """The chunk's request is held by the server; cancelling the read (its id) fails it at once with the
    "cancelled" kind while the request is still held, the chunk is not kept, and the same read then gets the
    exact values."""
    (r1, c1), _ = two_pixels_in_one_chunk(big)
    held = threading.Event()
    hold_first_chunk, arrived = hold_the_first_chunk_read("utm30/embeddings/c/1/")

    e = zarr.open_group(str(big / "utm30"), mode="r")["embeddings"]
    sel = [[1, 2], None, [r1, r1 + 1], [c1, c1 + 1]]
    with faulty_server(site, hold_first_chunk, hold=held, paths=("/bigchunks/",)) as (base, log):
        open_bridge(page, base)
        url = base + REL
        page.evaluate("([url, sel]) => { window.first = window.tesseraJS.read(url, 'utm30/embeddings', sel, 'pixel', 'r1'); }",
                      [url, sel])
        assert arrived.wait(30), "the chunk's request never reached the server"
        page.evaluate("window.tesseraJS.cancelRead('r1')")
        assert page.evaluate("window.first.then((r) => r.error)")["kind"] == "cancelled"
        held.set()
        cost = page.evaluate("async (a) => (await window.tesseraJS.readCost(...a)).value",
                             [url, "utm30/embeddings", sel, "pixel"])
        assert cost["bytes"] == CHUNK_BYTES  # not kept: the cancelled read left nothing behind
        got = bridge_read(page, url, "utm30/embeddings", sel, "pixel", "r2")
        np.testing.assert_array_equal(np.array(got["data"]), e[1, :, r1, c1])
        assert len(chunk_reads(log)) == 2, chunk_reads(log)


def test_the_explorer_says_a_big_pixel_read_shows_its_progress_and_cancels_it(page, site, big):
    """In the explorer, zoomed in on a pixel (the map has read 2024's chunk there): its click needs 2023's chunk too
    (the years plot), and says "Reading 8.4 MB for this pixel" before that chunk arrives, the bytes received once it takes over a second, and
    a Cancel button that stops it (the status says so); the page is usable after: the same click plots the exact
    vector, and a second pixel of the same chunk reads no chunk again."""
    (r1, c1), (r2, c2) = two_pixels_in_one_chunk(big)
    held = threading.Event()
    hold_first_2023_chunk, arrived = hold_the_first_chunk_read("utm30/embeddings/c/0/")

    g = zarr.open_group(str(big / "utm30"), mode="r")
    t = g.attrs["spatial:transform"]
    to_ll = Transformer.from_crs(32630, 4326, always_xy=True)
    lonlat = lambda r, c: to_ll.transform(t[2] + (c + 0.5) * 10, t[5] - (r + 0.5) * 10)
    vec = lambda r, c: g["embeddings"][1, :, r, c].astype(np.float32) * g["scales"][1, r, c]
    with faulty_server(site, hold_first_2023_chunk, hold=held, paths=("/bigchunks/",)) as (base, log):
        page.goto(base + "index.html?store=" + REL + "#year=2024")
        assert wait_state(page) == "ready"
        lon, lat = lonlat(r1, c1)
        # zoomed in on the pixel, the map shows 2024's false colour: its chunk is read (and kept) once this settles
        page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 3000)", [lon, lat])
        page.evaluate("([lon, lat]) => { window.sel = window.tesseraApi.select(lon, lat); }", [lon, lat])
        wait_text(page, "Reading 8.4 MB for this pixel")  # 2023's chunk: the years plot needs it
        assert arrived.wait(60), "the 2023 chunk's request never reached the server"
        wait_text(page, "received")  # held: the read takes over a second
        page.get_by_role("button", name="Cancel read").click()
        wait_text(page, "Read cancelled")
        page.evaluate("window.sel")
        held.set()
        assert not page.get_by_role("button", name="Cancel read").is_visible()
        page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon, lat])
        page.wait_for_function("""(part) => { const d = Bokeh.documents[0].get_model_by_name('spectrum-source').data;
            const labels = d instanceof Map ? d.get('label') : d.label;
            return labels.length === 1 && labels[0].includes(part); }""", arg=f"utm30 r{r1} c{c1}", timeout=60_000)
        np.testing.assert_allclose(np.array(model_data(page, "spectrum-source")["ys"][0]), vec(r1, c1), rtol=1e-6)
        before = len(chunk_reads(log, "utm30/embeddings/c/"))
        lon2, lat2 = lonlat(r2, c2)
        page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", [lon2, lat2])
        page.wait_for_function("""(part) => { const d = Bokeh.documents[0].get_model_by_name('spectrum-source').data;
            const labels = d instanceof Map ? d.get('label') : d.label;
            return labels.length === 1 && labels[0].includes(part); }""", arg=f"utm30 r{r2} c{c2}", timeout=60_000)
        np.testing.assert_allclose(np.array(model_data(page, "spectrum-source")["ys"][0]), vec(r2, c2), rtol=1e-6)
        assert len(chunk_reads(log, "utm30/embeddings/c/")) == before, chunk_reads(log, "utm30/embeddings/c/")
