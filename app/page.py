"""The page, seen from Python: the one module through which the explorer's Python touches the browser page.

Python runs in a Web Worker (app/web/worker.js), so the page's UI thread never waits on it. A worker has
no DOM, no localStorage and no window: each page call here is a message to the main thread
(app/web/boot.js), which does it. The worker's JavaScript side is `self.tesseraPage` (worker.js):

    info                  what the page told the worker at boot: href, search, hash, origin, framed, host,
                          and a copy of the page's localStorage entries of ours
    post(msg)             one message to the page, nothing back
    call(method, args)    a Promise of the page's answer (render the document, the preview's handover,
                          the preview's decoded coastlines)

Message types (worker -> page) are the names used below; boot.js has the matching handlers.
"""
from __future__ import annotations

from functools import partial

_storage: dict | None = None

# Tag a model whose every change must reach Python (a tap: each one a click). The page coalesces queued
# changes of the same property while Python is busy (boot.js sendChange), except on models with this tag.
EVERY_CHANGE = "every-change"
# Tag a source whose data BokehJS sets while it builds the document (the map's size on screen: app/main.py SIZE_JS),
# before the page sends changes to Python: the page sends its data once the document is connected (boot.js render).
SENT_AFTER_RENDER = "sent-after-render"


def _page():
    import js
    return js.tesseraPage


def post(msg: dict, transfer=None) -> None:
    import js
    from pyodide.ffi import to_js
    m = to_js(msg, dict_converter=js.Object.fromEntries)
    if transfer:
        _page().post(m, to_js(transfer))
    else:
        _page().post(m)


def post_answer(msg: dict, failed) -> None:
    """Post `msg`, an answer something waits on; when it cannot be sent (a value the page cannot receive),
    post `failed(exception)` instead, so that the wait still ends."""
    try:
        post(msg)
    except Exception as e:
        post(failed(e))


def _js_object(**values):
    """A plain JS object of `values` (strings, numbers or JS values, passed as they are)."""
    import js
    o = js.Object.new()
    for k, v in values.items():
        setattr(o, k, v)
    return o


def info(key: str) -> str:
    """One of the page's boot facts (href, search, hash, origin, host) as text ('' when absent)."""
    v = getattr(_page().info, key, None)
    return "" if v is None else str(v)


def framed() -> bool:
    """True when the page is inside a frame (a host page embeds it)."""
    return bool(_page().info.framed)


def url(relative: str) -> str:
    """`relative` resolved against the page's own URL."""
    import js
    return str(js.URL.new(relative, info("href")).href)


def set_hash(text: str) -> None:
    """Replace the page's URL hash (history.replaceState: no navigation, no new history entry)."""
    post({"type": "hash", "hash": text})


def mark(name: str) -> None:
    """Record a boot moment in the page's window.tesseraTimings (the benchmarks read it)."""
    import js
    post({"type": "mark", "name": name, "at": float(js.performance.timeOrigin + js.performance.now())})


def set_state(name: str) -> None:
    """document.body.dataset.state (map, ready, error: what tests and benchmarks wait for)."""
    post({"type": "state", "state": name})


def show_error(title: str, message: str) -> None:
    post({"type": "error", "title": title, "message": message})


async def preview(method: str):
    """Call the JS preview's `method` (app/web/preview.js: handover, close); None when there is no preview."""
    v = await _page().call("preview", method)
    return None if v is None else v.to_py() if hasattr(v, "to_py") else v


async def after_paint() -> None:
    """Wait until the page has applied the changes sent so far and painted the frame that shows them (at once in
    a hidden page, which paints no frame; after 1 s where frames are held back: an iframe out of view)."""
    await _page().call("afterPaint")


async def plots_painted() -> None:
    """Wait until the page has applied the changes sent so far and every figure in its document has been painted
    (then one more frame)."""
    await _page().call("plotsPainted")


def download(data: bytes, filename: str, mime: str) -> None:
    """Hand `data` to the page as a download named `filename` (its bytes move to the page, not copied)."""
    import js
    buf = js.Uint8Array.new(len(data))
    buf.assign(memoryview(data))
    post({"type": "download", "name": filename, "mime": mime, "data": buf}, [buf.buffer])


def storage_get(key: str) -> str | None:
    global _storage
    if _storage is None:
        s = _page().info.storage
        _storage = {} if s is None else dict(s.to_py())
    v = _storage.get(key)
    return None if v is None else str(v)


def storage_set(key: str, value: str) -> None:
    storage_get(key)  # the boot copy first
    _storage[key] = value
    post({"type": "storage", "key": key, "value": value})


def storage_remove(key: str) -> None:
    storage_get(key)
    _storage.pop(key, None)
    post({"type": "storage", "key": key, "value": None})


def on(kind: str, handler) -> None:
    """Have `handler(msg)` called for each message of `kind` from the page (api, host)."""
    from pyodide.ffi import create_proxy
    _page().on(kind, create_proxy(handler))


def document(obj):
    """(doc, docs_json, render_items, root_ids): the Panel object `obj` as a held Bokeh document, and that document
    as the JSON strings BokehJS embeds (Panel's worker glue, panel.io.pyodide._doc_json): what the page's `render`
    takes (boot.js `embed`), and what app/warmup.py writes at site build."""
    from bokeh.document import Document
    from panel.io.pyodide import _doc_json
    from panel.pane import panel as as_panel
    doc = Document()
    doc.hold()
    as_panel(obj).server_doc(doc=doc, location=False)
    return (doc, *_doc_json(doc))


async def render(obj, target: str) -> None:
    """Show the Panel object `obj` in the page's element `target`, kept in sync both ways.

    The Bokeh document is built here and sent whole as JSON; the page embeds it with BokehJS and answers
    once it is laid out (boot.js `render`). From then on each side sends the other its changes as JSON
    patches (Bokeh's own format, binary columns as buffers): Python's through Panel's worker link, the
    page's applied here, one at a time, each answered with `idle` so that the page sends the next.
    The document is held until linked, so changes made meanwhile go out then, none lost.
    Panel 1.7.5's worker glue (panel.io.pyodide: _doc_json, _link_docs_worker, _convert_json_patch; and
    state._schedule_on_load, which its server calls when a document is ready) is private API; the site pins
    Panel (builder/sitepkgs.py), and tests/test_browser*.py exercise it."""
    from panel.io.pyodide import _convert_json_patch, _link_docs_worker
    from panel.io.state import state as pn_state
    doc, docs_json, render_items, root_ids = document(obj)

    def receive(msg) -> None:
        try:
            doc.apply_json_patch(_convert_json_patch(msg.patch), setter="js")
        finally:
            post({"type": "idle"})

    on("patch", receive)
    await _page().call("render", _js_object(docs_json=docs_json, render_items=render_items, root_ids=root_ids,
                                            target=target))

    def send(patch, buffers, msg_id=None) -> None:  # patch and buffers are JS values already
        _page().post(_js_object(type="patch", patch=patch, buffers=buffers))

    # As Panel's server does (panel.io.application): the document counts as loaded once it is ready. Until
    # then Panel's `hold` never releases a layout's changes (a dynamic tab opened, children replaced): held
    # events wait for ever, and every later change with them.
    doc.on_event("document_ready", partial(pn_state._schedule_on_load, doc))
    _link_docs_worker(doc, send, setter="js")
