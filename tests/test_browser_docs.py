"""The documentation in the built site, in real Chromium: a page with the `tessera-explorer` directive
(docs/embedding.md) shows the live explorer, sized to its content, which the page drives by the message contract;
a message of another contract version is refused in one console line. And every link of the docs resolves in
the site that `python -m builder site` built (the session's `site` fixture)."""
from __future__ import annotations

import time

import pytest

from browser_util import REPO
from test_browser import interior_valid, pixel_lonlat
from test_docs import broken_links

pytestmark = pytest.mark.browser
ARTIFACTS = REPO / "artifacts"
FRAME = "embedding-demo"  # the directive's :name: in docs/embedding.md


def open_docs_explorer(page, server):
    """docs/embedding.html, once its explorer said `ready` to the page (the page script marks the frame); the frame."""
    page.goto(server + "docs/embedding.html")
    page.wait_for_function(f"document.getElementById('{FRAME}').dataset.tesseraState === 'ready'", timeout=180_000)
    frame = next(f for f in page.frames if f is not page.main_frame and "index.html" in f.url)
    assert frame.evaluate("document.body.dataset.state") == "ready"
    return frame


def test_every_link_of_the_docs_resolves_in_the_built_site(site):
    assert (site / "docs" / "index.html").is_file() and (site / "docs" / "embedding.html").is_file()
    assert broken_links(site / "docs", site) == []
    for name in ("iframeResizer.min.js", "iframeResizer.contentWindow.min.js"):  # vendored from npm
        assert b"iFrame" in (site / "vendor" / "iframe-resizer" / name).read_bytes()


def test_a_docs_page_with_the_directive_shows_the_live_explorer_sized_to_its_content(page, server):
    frame = open_docs_explorer(page, server)
    # the directive's options reached the explorer: the view in its hash, embed mode, the one tool asked for
    url = frame.url
    assert "embed=1" in url and "tools=similarity" in url and "year=2024" in url
    assert frame.evaluate("document.body.classList.contains('embed')")
    tabs = frame.evaluate("""() => [...Bokeh.documents[0].all_models].filter((m) => m.type.endsWith('Tabs'))
                              .map((m) => m.tabs.map((t) => t.title))""")
    assert tabs == [["Similarity"]]
    # iframe-resizer sized the frame to the explorer's content: in the text column (narrower than a desktop: the side
    # bar below the map, app/layout.py), taller than the directive's 700 px, as tall and as wide as the page inside
    # it, the whole explorer in it (its layout grows in shadow roots, which iframe-resizer does not watch: boot.js
    # tells it)
    size = "(() => { const f = document.getElementById('%s'); return [f.offsetWidth, f.offsetHeight]; })()" % FRAME
    inner = ("[document.documentElement.scrollWidth, document.body.offsetHeight,"
             " document.getElementById('app-root').getBoundingClientRect().bottom]")
    deadline = time.monotonic() + 60
    while True:
        (w, h), (cw, ch, bottom) = page.evaluate(size), frame.evaluate(inner)
        if (h > 700 and abs(h - ch) <= 2 and abs(w - cw) <= 2 and bottom <= h + 2) or time.monotonic() > deadline:
            break
        page.wait_for_timeout(200)
    assert h > 700 and abs(h - ch) <= 2 and abs(w - cw) <= 2 and bottom <= h + 2, ((w, h), (cw, ch, bottom))
    assert frame.evaluate("document.documentElement.clientWidth") == w  # nothing of it cut off
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "docs-embedding.png"), full_page=True)


def test_the_docs_page_moves_the_explorer_by_message_and_a_message_of_another_version_is_refused(page, server, site):
    frame = open_docs_explorer(page, server)
    store = site / "data" / "2024.zarr"
    row, col = interior_valid(store, "utm31")
    lon, lat = pixel_lonlat(store, "utm31", row, col)
    before = frame.evaluate("location.hash")
    assert f"lon={lon:.7f}" not in before
    # a command from the docs page, through the page script the directive added (contract version 1)
    px = page.evaluate("""async ([lon, lat]) => {
        await tesseraExplorer.send('embedding-demo', 'view', lon, lat, 2000);
        return await tesseraExplorer.send('embedding-demo', 'select', lon, lat); }""", [lon, lat])
    assert (px["zone"], px["row"], px["col"], px["valid"]) == ("utm31", row, col, True)
    frame.wait_for_function(f"location.hash.includes('lon={lon:.7f}') && location.hash.includes('span=2000.000')",
                            timeout=30_000)
    moved = frame.evaluate("location.hash")
    # the same command in another version of the contract: one console line, no action, no reply
    with page.expect_console_message(lambda m: "refused a message of contract version 2" in m.text,
                                     timeout=30_000) as msg:
        page.evaluate("""([lon, lat]) => {
            window.replies = [];
            addEventListener('message', (e) => { if (e.data && e.data.id === 'v2') window.replies.push(e.data); });
            document.getElementById('embedding-demo').contentWindow.postMessage(
                {tessera: 2, id: 'v2', cmd: 'view', args: [lon + 0.01, lat, 9000]}, location.origin); }""", [lon, lat])
    text = msg.value.text
    assert text == (f"tessera: refused a message of contract version 2 from {server.rstrip('/')} "
                    "(this explorer speaks version 1)")
    # a version-1 message sent after it is answered, so the refused one was handled (dropped) before it
    pins = page.evaluate("() => tesseraExplorer.send('embedding-demo', 'pin')")
    assert pins == 1
    assert frame.evaluate("location.hash").split("&pins=")[0] == moved.split("&pins=")[0]  # the view did not move
    assert page.evaluate("window.replies") == []
