"""A host under load: the explorer's reads survive what busy CDNs do (429 and 5xx answers, dropped connections) by
retrying with backoff (app/js/fetching.js RETRY), and a host that never recovers is one line naming the file and
the attempts. The host is the project's own Range server (builder/serve.py) wrapped, in this process, by a fault
injector on 127.0.0.1."""
from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager

import numpy as np
from aiohttp import web

from browser_util import all_text, free_port, wait_http, wait_state
from builder.serve import make_app
from test_browser import demo_pixel, truth, wait_spectrum

FAULTS = ("503", "429", "drop")


def each_first_try_fails():
    """A `fail` for faulty_server: every request's first try fails, in turn with each of FAULTS; a retry passes."""
    tried: dict = {}

    def fail(key):
        if key in tried:
            return None
        tried[key] = FAULTS[len(tried) % len(FAULTS)]
        return tried[key]
    return fail


@contextmanager
def faulty_server(root, fail, hold: threading.Event | None = None, paths: tuple[str, ...] = (".zarr/",),
                  delay_s: float = 0.0):
    """builder/serve.py's app on a free port, where `fail(key)` (key: path and Range of a request for a path holding
    one of `paths`) names the fault to answer with ("503", "429", "drop": the connection closed without an answer),
    "hold" (served once `hold` is set; "hold503": answered 503 then) or None to serve it. `delay_s`: each of those
    requests is answered that much later (a distant host's round trip: benchmarks/fetching.py). Yields (base URL,
    the log of (path, range, fault or 'ok'), logged as each request arrives)."""
    log: list[tuple[str, str, str]] = []

    @web.middleware
    async def inject(request, handler):
        key = (request.path, request.headers.get("Range", ""))
        fault = fail(key) if any(p in request.path for p in paths) else None
        log.append((*key, fault or "ok"))
        if delay_s and any(p in request.path for p in paths):
            await asyncio.sleep(delay_s)
        if fault is not None and fault.startswith("hold"):
            await asyncio.get_running_loop().run_in_executor(None, hold.wait, 60)
            fault = fault[len("hold"):] or None
        if fault == "drop":
            request.transport.abort()
            raise ConnectionResetError("dropped by the test's fault injector")
        if fault is not None:
            extra = {"Retry-After": "0"} if fault == "429" else {}
            return web.Response(status=int(fault), text="busy",
                                headers={"Access-Control-Allow-Origin": "*", **extra})
        return await handler(request)

    app = make_app(root)
    app.middlewares.append(inject)  # before the app is frozen by its runner
    port = free_port()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)

    def run():
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}/"
    try:
        wait_http(base + "index.html")
        yield base, log
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)



def test_reads_retry_through_busy_answers_and_dropped_connections(page, site):
    """Every store request fails at its first try, in turn with 503, 429 (Retry-After: 0) and a dropped
    connection: the explorer still opens, and a click plots the pixel's exact vector; each failed request was
    asked again and answered (failed before: no request was asked again)."""
    store = site / "data" / "2024.zarr"
    row, col, lon, lat, x, y = demo_pixel(site, 0)
    first_try_fails = each_first_try_fails()

    with faulty_server(site, first_try_fails) as (base, log):
        page.goto(base + "index.html")
        assert wait_state(page) == "ready"
        page.evaluate("async ([lon, lat]) => { await tesseraApi.view(lon, lat, 7600); await tesseraApi.select(lon, lat); }",
                      [lon, lat])
        data = wait_spectrum(page, 1, f"utm30 r{row} c{col}")
        np.testing.assert_allclose(np.array(data["ys"][0], dtype=np.float64), truth(store, "utm30", row, col),
                                   rtol=1e-6)
        faults = {f for *_, f in log if f != "ok"}
        assert faults == set(FAULTS), faults
        answered = {(p, r) for p, r, f in log if f == "ok"}
        failed = [(p, r) for p, r, f in log if f != "ok"]
        assert len(failed) >= 10 and all(k in answered for k in failed), "a failed request was not asked again"


def test_a_host_that_never_recovers_is_one_line_naming_the_file_and_the_attempts(page, site):
    """Every request for the store's shards answers 503: the page's error names the file, the status and the
    attempts, after RETRY.attempts tries (5) of each range by each reader, and no more."""
    def shards_fail(key):
        return "503" if "/c/" in key[0] else None

    with faulty_server(site, shards_fail) as (base, log):
        page.goto(base + "index.html")
        state = wait_state(page)
        text = page.locator("#error").inner_text() if state == "error" else all_text(page)
        assert "HTTP 503 for" in text and "after 5 attempts" in text, text[-600:]
        # each reader (the page's preview, Python's worker) tries a failing range 5 times, then gives it up
        tries = {}
        for p, r, f in log:
            if f == "503":
                tries[(p, r)] = tries.get((p, r), 0) + 1
        assert tries and max(tries.values()) <= 2 * 5 and any(n >= 5 for n in tries.values()), tries
