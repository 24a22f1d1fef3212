"""Real servers and real headless Chromium for the browser tests and benchmarks."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def static_server(root: Path, *flags: str):
    """`python -m builder serve` on a free port of 127.0.0.1; yields its base URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "builder", "serve", "--root", str(root), "--port", str(port), *flags],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/"
    try:
        wait_http(base + "index.html", proc)
        yield base
    finally:
        proc.terminate()
        proc.wait()


@contextmanager
def counting_proxy(upstream: str):
    """A logging HTTP proxy: every request that reaches the wire as (path, Range header, status, body bytes).
    By hand because the dev server keeps no access log and fsspec has no request hook."""
    log: list[tuple[str, str | None, int, int]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            rng = self.headers.get("Range")
            r = requests.get(upstream + self.path.lstrip("/"), headers={"Range": rng} if rng else {}, timeout=30)
            body = r.content
            log.append((self.path, rng, r.status_code, len(body)))
            self.send_response(r.status_code)
            for k in ("Content-Type", "Content-Range", "Accept-Ranges", "ETag"):
                if k in r.headers:
                    self.send_header(k, r.headers[k])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_HEAD(self):
            r = requests.head(upstream + self.path.lstrip("/"), timeout=30)
            log.append((self.path, "HEAD", r.status_code, 0))
            self.send_response(r.status_code)
            for k in ("Content-Length", "Accept-Ranges", "ETag"):
                if k in r.headers:
                    self.send_header(k, r.headers[k])
            self.end_headers()

        def log_message(self, *a):
            pass

    with serving(Handler) as base:
        yield base + "/", log


def chunk_bytes(log, start: int) -> dict[str, int]:
    """Bytes of the inner-chunk reads of each utm30 array in counting_proxy's `log` since its entry `start` (shard
    data and indexes)."""
    out: dict[str, int] = {}
    for path, _rng, _status, n in log[start:]:
        if "/utm30/" in path and "/c/" in path:
            name = path.split("/utm30/")[1].split("/c/")[0]
            out[name] = out.get(name, 0) + n
    return out


@contextmanager
def serving(handler):
    """A threaded HTTP server of `handler` (a BaseHTTPRequestHandler class) on a free port of 127.0.0.1; yields its
    base URL, without a trailing slash."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def wait_http(url: str, proc: subprocess.Popen | None = None, deadline_s: float = 60.0) -> None:
    """Wait until `url` answers (any status); refused connections and read timeouts both mean "not yet".
    Raises after the deadline, or at once if the server process has exited."""
    end = time.monotonic() + deadline_s
    last: Exception | None = None
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server for {url} exited with code {proc.returncode} before answering")
        try:
            requests.get(url, timeout=2)
            return
        except requests.RequestException as e:  # ConnectionError, ReadTimeout, ...
            last = e
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {deadline_s:.0f} s (last error: {last})")


def build_test_site(dest: Path, work: Path, px: int = 256, dense: bool = False) -> Path:
    """The real site (python -m builder site) with demo stores of `px` px tiles in data/ (the benchmarks use it too);
    the dense site's whole tiles too when `dense` (the benchmarks'; the tests keep to the small tiles)."""
    run = lambda *a: subprocess.run([sys.executable, "-m", "builder", *a], cwd=REPO, check=True,
                                    capture_output=True, text=True)
    run("site", "--out", str(dest), "-q")
    run("demo", "--out", str(dest / "data"), "--tiles", str(work / "tiles"), "--record", str(work / "record"),
        "--px", str(px), "--scheduler", "threads", "-q", *([] if dense else ["--no-dense"]))
    return dest


# The page's text including what Bokeh/Panel render inside shadow roots.
_PAGE_TEXT = """(() => {
    const parts = [];
    const walk = (node) => {
        if (node.nodeType === Node.TEXT_NODE) parts.push(node.textContent);
        if (node.shadowRoot) walk(node.shadowRoot);
        for (const c of node.childNodes) walk(c);
    };
    walk(document.body);
    return parts.join(' ');
})()"""


def wait_text(page, text: str, timeout_ms: int = 60_000) -> None:
    """Wait until `text` is part of the page's text (shadow roots included)."""
    page.wait_for_function(f"(want) => {_PAGE_TEXT}.includes(want)", arg=text, timeout=timeout_ms)


def wait_state(page, timeout_ms: int = 120_000) -> str:
    """The page's state once it has booted: "ready" or "error" (not "map", the preview shown while Python loads)."""
    page.wait_for_function("document.body.dataset.state && document.body.dataset.state !== 'map'", timeout=timeout_ms)
    return page.evaluate("document.body.dataset.state")


def map_click_point(page, x: float, y: float, figure: str = "map") -> tuple[float, float]:
    """Page coordinates of the point (x, y) in data units on a figure (the map: Web Mercator), scrolled into view."""
    return tuple(page.evaluate("""([x, y, name]) => {
        const m = Bokeh.documents[0].get_model_by_name(name);
        const v = Bokeh.index.find_one(m);
        v.el.scrollIntoView({block: 'nearest'});
        const r = v.el.getBoundingClientRect(), f = v.frame.bbox;
        const xr = m.x_range, yr = m.y_range;
        return [r.left + f.left + (x - xr.start) / (xr.end - xr.start) * f.width,
                r.top + f.top + (yr.end - y) / (yr.end - yr.start) * f.height];
    }""", [x, y, figure]))


def model_data(page, name: str) -> dict:
    return page.evaluate("""(name) => {
        const d = Bokeh.documents[0].get_model_by_name(name).data;
        const out = {};
        for (const [k, v] of (d instanceof Map ? d.entries() : Object.entries(d)))
            out[k] = Array.from(v, (x) => (ArrayBuffer.isView(x) || Array.isArray(x)) ? Array.from(x) : x);
        return out;
    }""", name)


def all_text(page) -> str:
    """The page's text including what Bokeh/Panel render inside shadow roots."""
    return page.evaluate(_PAGE_TEXT)


def wait_async(page, fn: str, arg=None, timeout_ms: int = 60_000):
    """Wait until the page's async function `fn` (source text, called with `arg`) resolves to a truthy value,
    and return it; raise when it has not within the timeout. (Playwright's wait_for_function takes a
    Promise for a truthy answer, and the explorer's API answers with Promises: Python runs in a worker.)"""
    return page.evaluate("""async ([src, arg, timeout]) => {
        const fn = (0, eval)(src), end = performance.now() + timeout;
        for (;;) {
            const v = await fn(arg);
            if (v) return v;
            if (performance.now() > end) throw new Error(`not true within ${timeout} ms: ${src}`);
            await new Promise((ok) => setTimeout(ok, 50));
        }
    }""", [fn, arg, timeout_ms])


HOVER_IN_PYTHON = """import gc, json
from bokeh.models import ColumnDataSource
json.dumps([list(o.data.get("x", [])) for o in gc.get_objects()
            if isinstance(o, ColumnDataSource) and o.name == "hover-source"])"""


def rest_mouse(page, x: float, y: float, view: list[float]) -> None:
    """Move the mouse onto the map's point (x, y) and wait until Python has the resting place, then until the
    explorer settled (tesseraApi.view of the view shown, [lon, lat, span]: it awaits every action set off).
    Python's resting place is emptied first, so that an earlier rest near (x, y) is not taken for this one."""
    _place_in_python(page, x, view, lambda: page.mouse.move(*map_click_point(page, x, y)))


def touch_down(page, cdp, x: float, y: float, view: list[float]) -> None:
    """Put a finger on the map's point (x, y) (CDP touchStart; `cdp`: the page's CDP session) and wait, the finger
    still down, until Python has the pressed place, then until the explorer settled, as rest_mouse does."""
    def down():
        px, py = map_click_point(page, x, y)
        cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": px, "y": py}]})
    _place_in_python(page, x, view, down)


def _place_in_python(page, x: float, view: list[float], act) -> None:
    """Empty Python's place of the map's mouse or press (the hover source), `act()`, wait until that place is x (within
    two screen pixels: events sit on whole pixels), then until the explorer settled (`view`, as rest_mouse)."""
    page.evaluate("Bokeh.documents[0].get_model_by_name('hover-source').data = {x: [], y: []}")
    wait_async(page, """async () => JSON.parse(await window.tesseraWorker.python(`%s`))
        .some((xs) => xs.length === 0)""" % HOVER_IN_PYTHON, None, 30_000)
    act()
    wait_async(page, """async (x) => {
        const m = Bokeh.documents[0].get_model_by_name('map'), f = Bokeh.index.find_one(m).frame.bbox;
        const tol = 2 * (m.x_range.end - m.x_range.start) / f.width;
        return JSON.parse(await window.tesseraWorker.python(`%s`))
            .some((xs) => xs.length === 1 && Math.abs(xs[0] - x) <= tol); }""" % HOVER_IN_PYTHON, x, 30_000)
    page.evaluate("async ([lon, lat, span]) => await window.tesseraApi.view(lon, lat, span)", view)


# The explorer's data path alone (app/js/tessera.js, as the site bundles it) on a page of the served site, without
# Pyodide: `open_bridge(page, base)` serves this page at base + "bridge.html" (through Playwright, so nothing is
# written into the site) and opens it; `options` become window.tesseraBridgeOptions (a benchmark's baseline).
BRIDGE_HTML = """<!doctype html><html><body><script type="module">
window.tesseraBridgeOptions = JSON.parse(new URLSearchParams(location.search).get("options") || "{}");
const t = await import("./vendor/tessera.mjs");
t.loadCodecs();
window.tesseraJS = t;
document.body.dataset.state = "ready";
</script></body></html>"""


def open_bridge(page, base: str, options: dict | None = None) -> None:
    import json
    from urllib.parse import quote
    page.route(base + "bridge.html*", lambda r: r.fulfill(status=200, content_type="text/html", body=BRIDGE_HTML))
    page.goto(base + "bridge.html" + (f"?options={quote(json.dumps(options))}" if options else ""))
    page.wait_for_function("document.body.dataset.state === 'ready'", timeout=60_000)


# The page's controls and their boxes, shadow roots included: what a user can operate (inputs but hidden ones, selects,
# buttons, text areas, sliders), each with its bounding box and whether it can be seen and reached in the viewport
# without scrolling: inside the window, and the topmost element at its centre (not clipped by a scrolled side bar,
# nor covered), or a label or part of it.
_CONTROLS = """(() => {
    const sel = 'input:not([type=hidden]), select, button, textarea, [role=slider]';
    const found = [];
    const walk = (root) => {
        for (const el of root.querySelectorAll(sel)) found.push(el);
        for (const el of root.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot);
    };
    walk(document);
    const top = (x, y) => {
        let el = document.elementFromPoint(x, y);
        while (el && el.shadowRoot) {
            const inner = el.shadowRoot.elementFromPoint(x, y);
            if (!inner || inner === el) break;
            el = inner;
        }
        return el;
    };
    const W = window.innerWidth, H = window.innerHeight;
    return found.map((el) => {
        const r = el.getBoundingClientRect();
        const cx = r.left + r.width / 2, cy = r.top + r.height / 2;
        let seen = r.width > 0 && r.height > 0 && cx >= 0 && cy >= 0 && cx < W && cy < H;
        if (seen) {
            const hit = top(cx, cy);
            seen = !!hit && (hit === el || el.contains(hit) || (hit.tagName === 'LABEL' && hit.contains(el))
                             || (el.tagName === 'INPUT' && hit.tagName === 'LABEL'));
        }
        return {tag: el.tagName.toLowerCase(), seen, box: [r.left, r.top, r.width, r.height]};
    });
})()"""


def visible_controls(page) -> int:
    """How many of the page's controls (_CONTROLS) can be seen and reached in the viewport without scrolling."""
    return sum(c["seen"] for c in page.evaluate(_CONTROLS))


def scroll_height(page) -> int:
    """The page's own scrolling height in CSS pixels (what a user scrolls through, not a side bar's inner scroll)."""
    return int(page.evaluate("Math.max(document.documentElement.scrollHeight, document.body.scrollHeight)"))
