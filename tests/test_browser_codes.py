"""The explorer in real headless Chromium (Pyodide) on a store built with the PQ compact code (--code pq): a
zoomed-out similarity runs on the level's PQ code, equal to numpy on zarr-python reads of the code's arrays."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from browser_util import all_text, static_server, wait_state
from test_codes_pq import pq_vectors
from tools_util import pixel_lonlat, zone_vectors

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def pq_site(tmp_path_factory, site, pq_store):
    """The session's site (its files hard-linked: the server serves no symlink out of its root) with the PQ store
    as its only year."""
    from builder.catalog import write_catalog
    dest = tmp_path_factory.mktemp("pq-site") / "site"
    shutil.copytree(site, dest, copy_function=os.link, ignore=lambda d, names: ["data"] if Path(d) == site else [])
    shutil.copytree(pq_store, dest / "data" / "2024.zarr")
    write_catalog(dest / "data")
    return dest


def test_similarity_in_chromium_runs_on_the_pq_code(page, pq_site):
    store = pq_site / "data" / "2024.zarr"
    v = zone_vectors(store, "utm30")
    rows, cols = np.nonzero(np.isfinite(v[..., 0]))
    r, c = int(rows[len(rows) // 2]), int(cols[len(rows) // 2])
    lon, lat = pixel_lonlat(store, "utm30", r, c)
    with static_server(pq_site) as base:
        page.goto(base + "index.html")
        assert wait_state(page) == "ready"
        # the small test tiles' full vectors would fit the read budget: a real screen's do not
        page.evaluate("async () => await window.tesseraWorker.python('import app.budgets as m; m.REGION_BYTES = 1000')")
        page.evaluate("async ([lon, lat]) => { await tesseraApi.view(lon, lat, 20000); await tesseraApi.select(lon, lat); }",
                      [lon, lat])
        page.evaluate("window.tesseraWorker.resetStats()")
        res = page.evaluate("async () => await window.tesseraApi.similarity('selection', 'mean', -1.0)")
        assert res is not None and res["level"] >= 1, all_text(page)[-500:]
        k = res["level"]
        assert f"overview level {k} ({10 * 2 ** k} m pixels), the 8-byte PQ code" in res["status"], res["status"]
        urls = page.evaluate("window.tesseraWorker.stats().then((s) => s.log.map((e) => e.url))")
        assert any(f"/utm30/overviews/{k}/code/" in u for u in urls) and any("/code_codebook/" in u for u in urls)
        assert not any(f"/overviews/{k}/embeddings/" in u or "/utm30/embeddings/" in u for u in urls)
        d = json.loads(page.evaluate("(n) => window.tesseraApi.layerArray(n)", "similarity"))
    r0, r1, c0, c1 = d["window"]
    got = np.array([np.nan if x is None else x for x in d["values"]], np.float64).reshape(r1 - r0, c1 - c0)
    sub, t = pq_vectors(store, "utm30", k)[r0:r1, c0:c1], v[r, c].astype(np.float64)
    want = sub @ t / (np.linalg.norm(sub, axis=-1) * np.linalg.norm(t))
    assert d["zone"] == "utm30" and np.isfinite(want).sum() > 100
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5, equal_nan=True)
