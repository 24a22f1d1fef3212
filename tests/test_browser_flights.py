"""Reads in flight shared (app/js/flights.js), in real Chromium against builder/serve.py on 127.0.0.1 wrapped by the
fault injector of test_browser_flaky: a read of a range already in flight sends no request of its own and fails
with the same error when that request fails; byte ranges of one file asked for together become one request when
their gaps are at most 64 KiB and the merged request at most 8 MiB (the limits flights.js documents), and every
caller gets exactly its own bytes, busy answers and dropped connections included. Counts are the server's."""
from __future__ import annotations

import hashlib
import shutil
import threading

import numpy as np
import pytest
import zarr

from browser_util import open_bridge
from test_browser_flaky import each_first_try_fails, faulty_server

pytestmark = pytest.mark.browser
GAP = 64 * 1024  # the documented limits, restated here: the test checks the code against them
CAP = 8 * 2 ** 20
BLOB = "data/flights/blob.bin"


@pytest.fixture(scope="module")
def files(site):
    """A 12 MiB file of random bytes and a sharded Zarr array (64x64 int16, one shard of 8x8 inner chunks),
    written by zarr-python, inside the served site."""
    root = site / "data" / "flights"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    blob = np.random.default_rng(35).integers(0, 256, 12 * 2 ** 20, dtype=np.uint8).tobytes()
    (root / "blob.bin").write_bytes(blob)
    values = np.random.default_rng(36).integers(-3000, 3000, (64, 64), dtype=np.int16)
    g = zarr.open_group(root / "s.zarr", mode="w", zarr_format=3)
    g.create_array("a", shape=(64, 64), shards=(64, 64), chunks=(8, 8), dtype="int16")[:] = values
    return {"blob": blob, "values": values}


def digests(page, url, ranges) -> list[str]:
    """SHA-256 (hex) of each range as the page's data path read them, all asked for at once; raises its error."""
    return page.evaluate("""async ([url, ranges]) => {
        const r = await window.tesseraJS.readBytes(url, ranges);
        if (!r.ok) throw new Error(r.error.kind + ": " + r.error.message);
        const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
        return Promise.all(r.value.map(async (bytes) => hex(await crypto.subtle.digest("SHA-256", bytes))));
    }""", [url, ranges])


def want(blob, ranges) -> list[str]:
    return [hashlib.sha256(blob[o:o + n]).hexdigest() for o, n in ranges]


def neighbours() -> tuple[list[list[int]], set[str]]:
    """Ranges asked for together, and the requests they must become under the limits."""
    c = 2500 + GAP + 1                     # just over the gap limit after [0, 2500): a request of its own...
    d = c + 10 + GAP                       # ...then a gap of exactly the limit: merged with c
    e = d + 5 * 2 ** 20                    # right after d, but c..e's end would exceed 8 MiB: its own request
    ranges = [[0, 1000], [1500, 1000], [1500, 200], [c, 10], [d, 5 * 2 ** 20], [e, 4 * 2 ** 20]]
    assert e + 4 * 2 ** 20 - c > CAP and e - c <= CAP
    return ranges, {"bytes=0-2499", f"bytes={c}-{e - 1}", f"bytes={e}-{e + 4 * 2 ** 20 - 1}"}


def blob_requests(log) -> list[str]:
    return [r for p, r, f in log if p.endswith("/blob.bin")]


def test_neighbouring_ranges_asked_together_are_one_request_within_the_limits(page, site, files):
    """Six ranges asked for at once are three requests (one merged over a 500-byte gap, one over a gap of exactly
    64 KiB, one left alone because merging it would exceed 8 MiB); each caller gets its own bytes. With sharing
    off (the benchmark's baseline), the same reads are six requests."""
    ranges, merged = neighbours()
    with faulty_server(site, lambda key: None, paths=("/flights/",)) as (base, log):
        open_bridge(page, base)
        assert digests(page, base + BLOB, ranges) == want(files["blob"], ranges)
        assert sorted(blob_requests(log)) == sorted(merged), blob_requests(log)
        log.clear()
        open_bridge(page, base, {"sharedFlights": False})
        assert digests(page, base + BLOB, ranges) == want(files["blob"], ranges)
        assert len(blob_requests(log)) == len(ranges), blob_requests(log)


def test_a_range_read_while_the_same_range_is_in_flight_shares_its_request(page, site, files):
    """The first read's request is held by the server; a read of the same range and one of a part of it, asked for
    while it is held, send nothing: the server sees one request, and all three callers get their exact bytes."""
    held, arrived = threading.Event(), threading.Event()

    def hold_first(key):
        arrived.set()
        return "hold"

    first, part = [100_000, 300_000], [150_000, 1000]
    with faulty_server(site, hold_first, hold=held, paths=("/flights/",)) as (base, log):
        open_bridge(page, base)
        page.evaluate("([url, r]) => { window.first = window.tesseraJS.readBytes(url, [r]); }", [base + BLOB, first])
        assert arrived.wait(30), "the first read's request never reached the server"
        page.evaluate("""([url, a, b]) => { window.later = window.tesseraJS.readBytes(url, [a, b]); }""",
                      [base + BLOB, first, part])
        page.wait_for_function("window.tesseraJS.flightStats.joined >= 2", timeout=30_000)
        held.set()
        got = page.evaluate("""async () => {
            const hex = async (b) => Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", b)),
                                                (x) => x.toString(16).padStart(2, "0")).join("");
            const [a, b] = [await window.first, await window.later];
            if (!a.ok || !b.ok) throw new Error(JSON.stringify([a.error, b.error]));
            return Promise.all([...a.value, ...b.value].map(hex)); }""")
        assert got == want(files["blob"], [first, first, part])
        assert blob_requests(log) == [f"bytes={first[0]}-{first[0] + first[1] - 1}"]


def test_a_failed_shared_read_fails_every_caller_with_the_same_error_after_one_retry_sequence(page, site, files):
    """Every request answers 503; a second read of the range joins the first while its first try is held: both
    callers get the same one-line error (HTTP 503, after 5 attempts) and the server saw 5 requests, not 10."""
    held, arrived = threading.Event(), threading.Event()

    def always_503(key):
        if not arrived.is_set():
            arrived.set()
            return "hold503"
        return "503"

    with faulty_server(site, always_503, hold=held, paths=("/flights/",)) as (base, log):
        open_bridge(page, base)
        page.evaluate("([url]) => { window.first = window.tesseraJS.readBytes(url, [[0, 4096]]); }", [base + BLOB])
        assert arrived.wait(30)
        page.evaluate("([url]) => { window.later = window.tesseraJS.readBytes(url, [[0, 4096]]); }", [base + BLOB])
        page.wait_for_function("window.tesseraJS.flightStats.joined >= 1", timeout=30_000)
        held.set()
        errors = page.evaluate("async () => [(await window.first).error, (await window.later).error]")
        assert errors[0] == errors[1], errors
        assert errors[0]["kind"] == "http" and "HTTP 503" in errors[0]["message"] and "after 5 attempts" in errors[0]["message"], errors
        assert len(blob_requests(log)) == 5, log


def test_a_flaky_host_still_gives_every_caller_its_exact_bytes(page, site, files):
    """Every request fails at its first try, in turn with 503, 429 and a dropped connection: the neighbouring
    ranges still come back exact and as three answered requests, and a box of 16 inner chunks of a shard reads
    the values zarr-python wrote, with two answered requests for the shard file (its index, then its 16 chunks
    as one range)."""
    first_try_fails = each_first_try_fails()

    ranges, merged = neighbours()
    with faulty_server(site, first_try_fails, paths=("/flights/",)) as (base, log):
        open_bridge(page, base)
        assert digests(page, base + BLOB, ranges) == want(files["blob"], ranges)
        assert sorted(r for p, r, f in log if p.endswith("/blob.bin") and f == "ok") == sorted(merged)
        got = page.evaluate("""async (url) => { const r = await window.tesseraJS.read(url, "a", [[0, 16], [0, 64]], "pixel");
            if (!r.ok) throw new Error(r.error.message); return [Array.from(r.value.data), r.value.shape]; }""",
                            base + "data/flights/s.zarr")
        assert got[1] == [16, 64]
        np.testing.assert_array_equal(np.array(got[0]).reshape(16, 64), files["values"][:16])
        shard = [(r, f) for p, r, f in log if p.endswith("/s.zarr/a/c/0/0")]
        assert len([r for r, f in shard if f == "ok"]) == 2, shard  # each also failed once, first
        assert len([r for r, f in shard if f != "ok"]) == 2, shard


TABLE = 256  # the documented bound of the table of shared requests (SHARING.flights), restated


def test_beyond_256_shared_requests_in_flight_a_read_gets_its_own_unshared_request(page, site, files):
    """257 ranges of one file, each more than 64 KiB from the next, are asked for at once and held by the server:
    257 requests, of which the table keeps 256.  While they are held, a read of the first range joins its request,
    and a read of the 257th (left out of the table) sends one of its own: the server sees that range twice and
    the first once, and every caller gets its exact bytes."""
    wide = np.random.default_rng(37).integers(0, 256, 24 * 2 ** 20, dtype=np.uint8).tobytes()
    (site / "data" / "flights" / "wide.bin").write_bytes(wide)
    ranges = [[k * 80_000, 100] for k in range(TABLE + 1)]  # gaps of 79,900 bytes: never one request
    held, arrived = threading.Event(), threading.Event()

    def hold_all(key):
        arrived.set()
        return "hold"

    key = lambda r: f"bytes={r[0]}-{r[0] + r[1] - 1}"
    with faulty_server(site, hold_all, hold=held, paths=("/flights/",)) as (base, log):
        url = base + "data/flights/wide.bin"
        open_bridge(page, base)
        page.evaluate("([url, rs]) => { window.all = window.tesseraJS.readBytes(url, rs); }", [url, ranges])
        assert arrived.wait(30), "no request reached the server"
        page.wait_for_function(f"window.tesseraJS.flightStats.flights >= {TABLE + 1}", timeout=30_000)
        stats = page.evaluate("({...window.tesseraJS.flightStats})")
        page.evaluate("([url, a, b]) => { window.again = window.tesseraJS.readBytes(url, [a, b]); }",
                      [url, ranges[0], ranges[-1]])
        page.wait_for_function(f"window.tesseraJS.flightStats.flights >= {stats['flights'] + 1}", timeout=30_000)
        after = page.evaluate("({...window.tesseraJS.flightStats})")
        assert (after["flights"] - stats["flights"], after["joined"] - stats["joined"]) == (1, 1), (stats, after)
        held.set()
        got = page.evaluate("""async () => {
            const hex = async (b) => Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", b)),
                                                (x) => x.toString(16).padStart(2, "0")).join("");
            const [a, b] = [await window.all, await window.again];
            if (!a.ok || !b.ok) throw new Error(JSON.stringify([a.error, b.error]));
            return Promise.all([...a.value, ...b.value].map(hex)); }""")
        assert got == want(wide, ranges + [ranges[0], ranges[-1]])
        asked = [r for p, r, f in log if p.endswith("/wide.bin")]
        assert len(asked) == TABLE + 2 and asked.count(key(ranges[-1])) == 2 and asked.count(key(ranges[0])) == 1
