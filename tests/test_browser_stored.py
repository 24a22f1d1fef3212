"""A label set larger than the link holds, in real Chromium: kept in localStorage, the link holding stored:<id>, back
after a reload; a corrupt or hostile stored entry is one status line and nothing runs (app/tools/stored.py)."""
from __future__ import annotations

import hashlib
import html
import json
import re

import numpy as np
import pytest

from browser_util import all_text
from test_browser import open_app
from test_browser_hostile import no_script_ran, payload, python_lives, status
from tools_util import pixel_lonlat, zone_vectors

pytestmark = pytest.mark.browser


def labels(page) -> dict:
    return json.loads(page.evaluate("window.tesseraApi.labels()"))


def test_labels_over_the_links_budget_are_stored_back_after_a_reload_and_a_bad_entry_is_one_line(page, server, site):
    store = site / "data" / "2024.zarr"
    assert open_app(page, server + "index.html") == "ready"
    v = zone_vectors(store, "utm30")
    rcs = np.argwhere(np.isfinite(v[..., 0]))[::7][:150]
    feats = [{"type": "Feature", "geometry": {"type": "Point", "coordinates": list(pixel_lonlat(store, "utm30", *map(int, rc)))},
              "properties": {"class": payload("name") if k % 3 else "water", "year": 2024}} for k, rc in enumerate(rcs)]
    n = page.evaluate("async (t) => await window.tesseraApi.importLabels(t)",
                      json.dumps({"type": "FeatureCollection", "features": feats}))
    assert n == 150
    before = labels(page)
    page.wait_for_function("() => /[#&]labels=stored(:|%3A)[0-9a-f]{16}(&|$)/.test(location.hash)")
    ref = re.search(r"labels=stored(?::|%3A)([0-9a-f]{16})", page.evaluate("location.hash")).group(1)
    entry = page.evaluate("(k) => localStorage.getItem(k)", "tessera-labels-" + ref)
    assert entry is not None and hashlib.sha256(entry.encode()).hexdigest()[:16] == ref
    assert len(json.loads(entry)[0][2]) + len(json.loads(entry)[1][2]) == 150
    assert f"kept in this browser&#x27;s storage (stored:{ref})" in status(page), status(page)

    page.reload()
    assert open_app(page, page.url) == "ready"
    after = labels(page)
    assert after["classes"] == before["classes"]
    # the stored form groups the points by class and keeps lon/lat to 7 decimals (1 cm)
    b, a = sorted(before["points"]), sorted(after["points"])
    assert [p[:2] for p in a] == [p[:2] for p in b]
    np.testing.assert_allclose([p[2:] for p in a], [p[2:] for p in b], rtol=0, atol=1e-7)
    assert f"stored:{ref}" in page.evaluate("location.hash")

    # the stored entry replaced by hostile content: one line, no labels, nothing runs, Python lives
    for bad, line in [("[" * 20_000 + "]" * 20_000, "nested more than 64 levels deep"),
                      (json.dumps([[payload("cls"), payload("colour"), [[0.05, 50.85, 2024]]]]), "is not a CSS colour")]:
        page.evaluate("([k, v]) => localStorage.setItem(k, v)", ["tessera-labels-" + ref, bad])
        page.goto("about:blank")
        assert open_app(page, server + f"index.html#labels=stored:{ref}") == "ready"
        got = status(page)
        assert got.startswith("<b>Saved labels ignored:</b>") and line in got and "\n" not in got, got[:300]
        assert labels(page)["points"] == []
        if "CSS" in line:  # the refused entry's class name is named in the line, as text
            assert html.escape(payload("cls")) in got and payload("cls") in all_text(page)
        python_lives(page, site)
    no_script_ran(page)
