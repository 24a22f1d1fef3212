"""Progress of the tools' steps in real headless Chromium (issue 38, "progress shows for any step over a second"): the
status line's texts recorded as the page shows them (a MutationObserver on the status pane), and the page's own
sign of a step under way (#busy, app/web/busy.js). One page for the file: a 5 km view of utm30 with labels of the
demo's classes, each class named by a number (so that classification and regression train on the same labels)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from browser_util import wait_state
from builder import demo
from conftest import _checked_page
from tools_util import pixel_lonlat, training_pixels, zone_vectors

pytestmark = pytest.mark.browser

# From now on, in window arrays: each text the status line shows (statusSeen), each state of the page's busy sign
# (busySeen: its seconds while shown, null when hidden).
RECORD = """() => {
    const doc = Bokeh.documents[0];
    const root = Bokeh.index.find_one(doc.get_model_by_name('status-line').children[0]).el.shadowRoot;
    const text = () => [...root.childNodes].filter((n) => !['STYLE', 'LINK'].includes(n.nodeName))
        .map((n) => n.textContent).join('').trim();
    const busy = () => { const b = document.getElementById('busy'); return b && !b.hidden ? b.dataset.seconds : null; };
    for (const o of window.recorders || []) o.disconnect();
    window.statusSeen = [text()];
    window.busySeen = [busy()];
    const status = new MutationObserver(() => {
        const t = text();
        if (t !== window.statusSeen.at(-1)) window.statusSeen.push(t);
    });
    status.observe(root, {subtree: true, childList: true, characterData: true});
    const sign = new MutationObserver(() => {
        const s = busy();
        if (s !== window.busySeen.at(-1)) window.busySeen.push(s);
    });
    sign.observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
    window.recorders = [status, sign];
}"""
SEEN = "() => ({status: window.statusSeen, busy: window.busySeen})"


@pytest.fixture(scope="module")
def one_page(chromium):
    yield from _checked_page(chromium)


@pytest.fixture(scope="module")
def labelled(one_page, server, site):
    """The page on a 5 km view of utm30's data with 6 labels of each demo class present, named by numbers."""
    page, store = one_page, site / "data" / "2024.zarr"
    page.goto(server + "index.html")
    assert wait_state(page) == "ready"
    v = zone_vectors(store, "utm30")
    rows, cols = np.nonzero(np.isfinite(v[..., 0]))
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 5000)",
                  list(pixel_lonlat(store, "utm30", int(rows.mean()), int(cols.mean()))))
    train = training_pixels(store, "utm30", demo.World(), 2024, per_class=6)
    features = [{"type": "Feature", "geometry": {"type": "Point", "coordinates": list(pixel_lonlat(store, "utm30", r, c))},
                 "properties": {"class": str(10 * k + 5)}} for r, c, k in train]
    n = page.evaluate("async (g) => await window.tesseraApi.importLabels(g, 'labels.geojson')",
                      {"type": "FeatureCollection", "features": features})
    assert n == len(train) >= 30, (n, len(train))
    page.labels = len(train)
    page.folds = min(5, min(np.unique([k for _, _, k in train], return_counts=True)[1]))  # evaluate.folds_for
    taken = {(r, c) for r, c, _ in train}
    page.spot = next(pixel_lonlat(store, "utm30", int(r), int(c)) for r, c in zip(rows[::97], cols[::97])
                     if (r, c) not in taken)
    return page


def recorded(page, verb: str, *args):
    """Run a page-API verb with the status line and the busy sign recorded; (its answer, what was seen), once the
    page shows the answer's status line and no step under way."""
    page.evaluate(RECORD)
    res = page.evaluate("async ([n, a]) => await window.tesseraApi[n](...a)", [verb, list(args)])
    ended(page)
    return res, page.evaluate(SEEN)


def ended(page) -> None:
    """Wait until the page's busy sign is hidden: the step ended (its end is sent before the verb's answer)."""
    page.wait_for_function("window.busySeen.at(-1) === null && !document.getElementById('busy')?.checkVisibility()",
                           timeout=30_000)


def counts(lines: list[str], what: str) -> list[tuple[int, int, int]]:
    """(index, done, total) of each line counting `what` ("held-out fit 7 of 25…")."""
    out = []
    for i, t in enumerate(lines):
        m = re.search(rf"{what} ([\d,]+) of ([\d,]+)…", t)
        if m:
            out.append((i, int(m[1].replace(",", "")), int(m[2].replace(",", ""))))
    return out


def rises_to_its_total(seen: list[tuple[int, int, int]]) -> None:
    done = [d for _, d, _ in seen]
    totals = {t for _, _, t in seen}
    assert len(totals) == 1 and done == sorted(done) and len(set(done)) >= 3 and done[-1] == totals.pop(), seen


def test_a_random_forest_says_what_it_fits_counts_its_held_out_fits_and_ends_on_its_result(labelled):
    """Random forest (about 4.5 s): the first line says what runs and on what, the held-out fits (k folds x 5
    learning-curve points) are counted up to their total, the last line is the result; meanwhile the page's sign counted
    seconds on its own thread (its longest task is a benchmark figure, benchmarks/browser.py, not a timed bound here)."""
    page = labelled
    res, seen = recorded(page, "classify", "random forest", {"seed": 1})
    lines = seen["status"]
    assert res is not None and "Classified (random forest" in res["status"], (res, lines)
    start = [i for i, t in enumerate(lines) if t == f"Classification (random forest): fitting on {page.labels} "
             f"labels, {page.folds}-fold held-out evaluation…"]
    fits = counts(lines, "Classification \\(random forest\\): held-out fit")
    assert start and fits and start[0] < fits[0][0], lines
    rises_to_its_total(fits)
    assert fits[-1][2] == 5 * page.folds == res["evaluation"]["folds"] * 5, fits
    assert lines[-1].startswith("Classified (random forest") and fits[-1][0] < len(lines) - 1, lines
    assert not any("…" in t for t in lines[fits[-1][0] + 1:]), lines  # no progress after the result
    shown = [int(s) for s in seen["busy"] if s is not None]
    assert len(set(shown)) >= 2 and shown == sorted(shown) and seen["busy"][-1] is None, seen["busy"]


def test_a_regression_counts_its_learning_curve_fits_and_ends_on_its_result(labelled):
    page = labelled
    res, seen = recorded(page, "regress", "random forest", {"seed": 1})
    lines = seen["status"]
    assert res is not None and res["evaluation"]["folds"] == 5, lines
    start = [i for i, t in enumerate(lines)
             if t == f"Regression (random forest): fitting on {page.labels} labels, 5-fold held-out evaluation…"]
    blocks = counts(lines, "Regression \\(random forest\\): pixel block")
    fits = counts(lines, "Regression \\(random forest\\): held-out fit")
    assert start and blocks and fits and start[0] < blocks[0][0] < fits[0][0], lines
    assert blocks[-1][1] == blocks[-1][2] >= 1, blocks  # every block of the view's pixels predicted
    rises_to_its_total(fits)
    assert fits[-1][2] == 25 and lines[-1].startswith("Regression (random forest, "), lines
    assert seen["busy"][-1] is None and any(s is not None for s in seen["busy"]), seen["busy"]


def test_umap_counts_its_epochs_from_umap_js_and_ends_on_its_result(labelled):
    page = labelled
    res, seen = recorded(page, "scatter", "UMAP", {"max_points": 1500, "seed": 2})
    lines = seen["status"]
    assert res is not None and res["points"] == 1500, lines
    start = [i for i, t in enumerate(lines)
             if t == "Scatter (UMAP): laying out up to 1,500 points (umap-js, in a Web Worker)…"]
    epochs = counts(lines, "Scatter \\(UMAP\\): epoch")
    assert start and epochs and start[0] < epochs[0][0], lines
    rises_to_its_total(epochs)
    assert epochs[-1][2] == 500, epochs  # umap-js's epochs for fewer than 2,500 points
    assert lines[-1].startswith("Scatter (UMAP, 15 neighbours"), lines
    assert seen["busy"][-1] is None and any(s is not None for s in seen["busy"]), seen["busy"]


def test_a_failure_ends_the_progress_with_its_one_line(labelled):
    """UMAP refused once its step began (too few points for its neighbours), and a classification started from its
    button whose label classes changed while it ran: each ends on its one line, with no step left under way."""
    page = labelled
    res, seen = recorded(page, "scatter", "UMAP", {"max_points": 100, "n_neighbors": 150})
    lines = seen["status"]
    assert res is None, res
    assert "Scatter (UMAP): laying out up to 100 points (umap-js, in a Web Worker)…" in lines, lines
    assert lines[-1] == "UMAP failed: 100 points are too few for 150 neighbours", lines

    # the button's path: its step is the verb's; a label of a new class lands between two held-out fits
    page.locator(".bk-tab", has_text="Classify").click()
    page.get_by_role("button", name="Classify the view", exact=True).wait_for(timeout=60_000)
    page.evaluate(RECORD)
    page.get_by_role("button", name="Classify the view", exact=True).click()
    page.wait_for_function("window.statusSeen.some((t) => t.includes('held-out fit'))", timeout=120_000)
    page.evaluate("([lon, lat]) => { window.labelled = window.tesseraApi.label(lon, lat, '999'); }", list(page.spot))
    page.wait_for_function("window.statusSeen.at(-1).startsWith('Classification stopped')", timeout=120_000)
    ended(page)
    lines = page.evaluate(SEEN)["status"]
    assert lines[-1] == "Classification stopped: the label classes changed while it ran; run it again.", lines
    assert [t for t in lines if t.startswith("Classification (random forest): fitting on")], lines


def test_similarity_shows_the_busy_sign_while_it_runs(labelled):
    """Similarity's compute is a step like every tool's: its first line, the page's busy sign while it runs, and its
    result line at the end."""
    page = labelled
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.select(lon, lat)", list(page.spot))
    res, seen = recorded(page, "similarity", "selection", "mean", 0.5)
    lines = seen["status"]
    assert res is not None and res["status"].startswith("Similarity to "), (res, lines)
    assert "Similarity: reading the view…" in lines and lines[-1].startswith("Similarity to "), lines
    assert any(s is not None for s in seen["busy"]) and seen["busy"][-1] is None, seen["busy"]
