"""Sparse zone arrays in real headless Chromium: a read over a shard the store never wrote (no valid pixel there)
asks for nothing there.  The zone's embeddings, scales and rgb record the shards that exist (builder/core/
chunkruns.py), and so do its overview arrays; the bridge reads the others as fill (app/js/sources.js), with the
values zarr-python reads, where it asked for the missing shard file before: one 404 in the page's console per array
read across it."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import zarr

from browser_util import wait_state
from sparse_util import missing_beside_present

pytestmark = pytest.mark.browser

def without_records(store, dest):
    """A copy of `store` whose zone arrays record nothing (as stores built before the records): the reads' baseline."""
    if dest.exists():
        return dest
    shutil.copytree(store, dest)
    root = json.loads((dest / "zarr.json").read_text())
    for path, doc in root["consolidated_metadata"]["metadata"].items():
        if path.startswith("utm") and "chunks_present" in doc.get("attributes", {}):
            del doc["attributes"]["chunks_present"]
            arr = json.loads((dest / path / "zarr.json").read_text())
            del arr["attributes"]["chunks_present"]
            (dest / path / "zarr.json").write_text(json.dumps(arr))
    (dest / "zarr.json").write_text(json.dumps(root))
    return dest


READ = """async ([url, path, sel, hint]) => { const r = await window.tesseraJS.read(url, path, sel, hint);
    if (!r.ok) throw new Error(r.error.message); return [Array.from(r.value.data), r.value.shape]; }"""


def test_reads_across_a_shard_never_written_ask_for_nothing_there_and_read_fill(page, server, site):
    failed = []  # every 404 of the page and of its workers (Python's reads run in a Web Worker)
    page.context.on("response", lambda r: failed.append(r.url) if r.status == 404 else None)
    store = site / "data" / "2024.zarr"
    zone, (i, j), _, (r0, r1, c0, c1) = missing_beside_present(store)
    page.goto(server + "index.html")
    assert wait_state(page) == "ready"
    failed.clear()  # the load's own requests are the console test's (test_browser_page.py)

    def reads(url):
        out = {}
        for path, hint in ((f"{zone}/scales", "region"), (f"{zone}/embeddings", "pixel"), (f"{zone}/rgb", "region"),
                           (f"{zone}/overviews/0/code", "pixel")):
            sel = [[r0, r1], [c0, c1]] + ([] if path.endswith("scales") else [None])
            data, shape = page.evaluate(READ, [url, path, sel, hint])
            out[path] = np.asarray(data).reshape(shape)
        return out

    got = reads(server + "data/2024.zarr")
    assert failed == [], failed
    # the values are zarr-python's: fill (NaN scales, zero vectors and codes, transparent rgb) in the missing shard
    group = zarr.open_group(store / zone, mode="r")
    for path, values in got.items():
        want = group[path.split("/", 1)[1]][r0:r1, c0:c1]
        np.testing.assert_array_equal(values, want, err_msg=path)
    assert np.isfinite(got[f"{zone}/scales"]).any() and np.isnan(got[f"{zone}/scales"]).any()
    # Python's own reads, in the worker: a similarity over the same window
    out = page.evaluate("async (w) => await window.tesseraApi.timeSimilarity(...w)", [zone, r0, r1, c0, c1])
    assert out["valid"] > 0 and failed == [], (out, failed)
    # A store without the records reads the same values, asking for the missing shard of each array (404s): the
    # requests the records spare.
    without_records(store, site / "shards-without-records" / "2024.zarr")
    again = reads(server + "shards-without-records/2024.zarr")
    for path, values in again.items():
        np.testing.assert_array_equal(values, got[path], err_msg=path)
    assert {u.split("/2024.zarr/")[1] for u in failed} >= {f"{zone}/scales/c/{i}/{j}", f"{zone}/rgb/c/{i}/{j}/0",
                                                             f"{zone}/embeddings/c/{i}/{j}/0"}, failed
