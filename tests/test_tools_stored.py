"""Label sets larger than a link holds: kept in storage under an id, the link holding stored:<id>, read back like a
label file (app/tools/stored.py). The browser's side is tests/test_browser_stored.py."""
from __future__ import annotations

import hashlib
import html
import json

import numpy as np

from app.state import UrlState
from app.tools import labels as lab, stored
from conftest import run_async
from tools_util import opened, pixel_lonlat, zone_vectors


def valid_pixels(store, zone, n):
    v = zone_vectors(store, zone)
    return [tuple(map(int, rc)) for rc in np.argwhere(np.isfinite(v[..., 0]))[:n]]


def test_a_label_set_over_the_links_budget_goes_to_storage_and_a_reload_reads_it_back(store):
    async def run():
        state = await opened(store)
        L = state.tools.labels
        pts = [("a" if k % 2 else "b", 2024, *pixel_lonlat(store, "utm30", r, c))
               for k, (r, c) in enumerate(valid_pixels(store, "utm30", 200))]
        await L.load([("a", "#ff0000"), ("b", "#0000ff")], pts)
        text = json.dumps(lab.saved(L.classes, L.points), separators=(",", ":"))
        assert len(text) > stored.URL_BUDGET
        want_id = hashlib.sha256(text.encode()).hexdigest()[:16]  # the id is the set's SHA-256, by hashlib here
        link = UrlState.from_url("", state.url().to_hash()).labels
        assert link == f"stored:{want_id}"
        assert L.storage.get_item(f"tessera-labels-{want_id}") == text
        assert f"kept in this browser&#x27;s storage (stored:{want_id})" in state.status
        # a reload of that link in the same browser (a new explorer on the same storage): the same labels
        again = await opened(store)
        again.tools.labels.storage = L.storage
        await again.tools.labels.restore(link)
        back = sorted((p.cls, p.year, p.lon, p.lat) for p in again.tools.labels.points)  # stored by class
        assert [b[:2] for b in back] == [b[:2] for b in sorted((p.cls, p.year, p.lon, p.lat) for p in L.points)]
        np.testing.assert_allclose([b[2:] for b in back], [b[2:] for b in sorted(
            (p.cls, p.year, p.lon, p.lat) for p in L.points)], rtol=0, atol=1e-7)  # 7 decimals kept
        assert again.tools.labels.classes == L.classes
        # and without the link, the latest set
        third = await opened(store)
        third.tools.labels.storage = L.storage
        await third.tools.labels.restore()
        assert len(third.tools.labels.points) == 200
        # a small set still goes in the link itself
        L.delete("b")
        L.points = L.points[:3]
        assert UrlState.from_url("", state.url().to_hash()).labels.startswith('[["a","#ff0000",[[')
    run_async(run())


def test_stored_sets_are_bounded_oldest_dropped_first_and_one_too_large_is_not_stored(monkeypatch):
    monkeypatch.setattr(stored, "MAX_STORED", 10_000)
    s = lab.MemoryStorage()
    sets = [json.dumps([["c", None, [[k, 0, None]] * 250]]) for k in range(4)]
    assert all(3400 < len(t) < 4000 for t in sets)  # two fit in 10,000 characters, three do not
    refs = [stored.place(s, t) for t in sets]
    kept = [r for r, t in zip(refs, sets) if s.get_item("tessera-labels-" + r[7:]) == t]
    assert kept == refs[2:]  # two fit in 10,000 characters: the two newest
    assert stored.index(s) == [r[7:] for r in refs[2:]]
    assert sum(len(v) for k, v in s.items() if k != stored.INDEX) <= 10_000
    big = json.dumps([["c", None, [[1, 0, None]] * 2000]])
    assert stored.place(s, big) is None
    assert "export them to a file" in stored.note(None, 2000)
    monkeypatch.setattr(stored, "MAX_STORED", 4_000_000)
    small = [stored.place(s, json.dumps([["c", None, [[k, 1, None]] * 200]])) for k in range(stored.MAX_SETS + 3)]
    assert stored.index(s) == [r[7:] for r in small[3:]]  # at most MAX_SETS sets, the newest
    assert sorted(k for k in s if k != stored.INDEX) == sorted("tessera-labels-" + r[7:] for r in small[3:])


def test_a_stored_set_missing_oversized_or_hostile_is_one_status_line_and_no_labels(store, monkeypatch):
    hostile = "<img src=x onerror=\"window.__pwned=1\">"

    async def run():
        state = await opened(store)
        L = state.tools.labels
        ref = "stored:" + "ab" * 8
        cases = {
            "not-in-storage": (None, "the label set stored:abababababababab is not in this browser's storage"),
            "nested": ("[" * 20_000 + "]" * 20_000, "is nested"),
            "html-colour": (json.dumps([["a", hostile, [[0.05, 50.85, 2024]]]]), "is not a CSS colour"),
            "oversized": ("[" + " " * (stored.MAX_STORED + 1) + "]", "at most 4,000,000 are read"),
        }
        for name, (entry, line) in cases.items():
            L.storage = lab.MemoryStorage()
            if entry is not None:
                L.storage.set_item("tessera-labels-" + ref[7:], entry)
            state.status = ""
            await L.restore(ref)
            assert state.status.startswith("<b>Saved labels ignored:</b>") and html.escape(line) in state.status, \
                (name, state.status[:300])
            assert "\n" not in state.status and hostile not in state.status and L.points == [], name
        state.status = ""
        await L.restore("stored:<b>x</b>")
        assert "&#x27;stored:&lt;b&gt;x&lt;/b&gt;&#x27; is not a stored label set" in state.status, state.status
        # a hostile class name in a well-formed set is data: loaded, and shown escaped
        L.storage.set_item("tessera-labels-" + ref[7:], json.dumps([[hostile, None, []]]))
        await L.restore(ref)
        assert L.names() == [hostile]
    run_async(run())
