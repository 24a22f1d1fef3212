"""Large label files imported in real Chromium: the page's status line counts their reading as it goes."""
from __future__ import annotations

import re

import pytest

from test_browser import open_app
from test_tools_labelfiles import label_file

pytestmark = pytest.mark.browser

MARK = "status line here: 38"
# Every text the status line shows from now on, in window.__status: a MutationObserver on the status pane's view (found
# by the text Python just gave it), which records what the page shows, not what Python set.
OBSERVE = """(mark) => {
    const m = [...Bokeh.documents[0].all_models].find((m) => typeof m.text === 'string' && m.text.includes(mark));
    const v = m && Bokeh.index.find_one(m);
    if (!v || !v.container || !v.container.textContent.includes(mark)) return false;
    window.__status = [];
    new MutationObserver(() => window.__status.push(v.container.textContent))
        .observe(v.shadow_el, {subtree: true, childList: true, characterData: true});
    return true;
}"""
SET_MARK = f"""import gc
next(o for o in gc.get_objects() if type(o).__name__ == "Explorer").status = {MARK!r}
None"""


def test_a_100000_label_file_shows_its_rows_and_features_counted_in_the_status_line_while_it_is_read(page, server):
    """A 100,000-label CSV or GeoJSON was read with nothing in the status line until the batches of its pixels began
    (issue 38: progress for any step over a second). The page now shows the rows or features read, by steps of 5,000,
    before the line that says the labels were loaded. Its labels lie in the Atlantic (no store's pixels to read)."""
    assert open_app(page, server + "index.html") == "ready"
    page.evaluate("async (code) => await window.tesseraWorker.python(code)", SET_MARK)
    page.wait_for_function(OBSERVE, arg=MARK, timeout=30_000)
    for fmt, what in (("csv", "rows"), ("geojson", "features")):
        page.evaluate("window.__status.length = 0")
        text = label_file(fmt, 100_000).decode()
        got = page.evaluate("async ([t, name]) => await window.tesseraApi.importLabels(t, name)", [text, f"big.{fmt}"])
        assert got == 100_000, got
        page.wait_for_function("window.__status.some((s) => s.startsWith('Loaded 100000 labels in 3 classes'))",
                               timeout=60_000)
        seen = page.evaluate("window.__status")
        final = next(i for i, s in enumerate(seen) if s.startswith("Loaded 100000 labels in 3 classes"))
        counts = [int(m.group(1).replace(",", "")) for s in seen[:final]
                  if (m := re.fullmatch(rf"Reading big\.{fmt}: ([\d,]+) of 100,000 {what}…", s))]
        assert any(0 < c < 100_000 for c in counts), seen[:final + 1]  # shown while the file was being read
        assert counts == sorted(set(counts)) and counts[-1] == 100_000, seen[:final + 1]
        if fmt == "geojson":
            assert seen.index("Reading big.geojson: parsing the JSON…") < seen.index(
                "Reading big.geojson: 0 of 100,000 features…"), seen[:final + 1]
