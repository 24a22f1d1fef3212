"""`build --from URL --bbox`: tiles fetched from a real HTTP mirror on 127.0.0.1 (no mocks).

The mirror serves demo tiles in geotessera's layout with a manifest.parquet (server paths, like
geotessera's scan) and a landmasks.parquet.  A plan function decides, per path and per attempt
(deterministic by request count), whether a request is answered, dropped, answered 503/404, slowly,
with a truncated body, or left hanging mid-body; or how it lies: a body without Content-Length that never
ends, a body trickled a byte at a time, a redirect to another host.  The server counts the bytes it sends
per path.  Builds run the real CLI in a subprocess.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from builder import demo
from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR, grid_name
from browser_util import free_port, wait_http
from conftest import PX, REPO, run_cli

YEAR = 2024
MIRROR_PLACES = [(-0.05, 50.85), (0.05, 50.85), (-0.05, 50.75), (18.45, -33.95)]
BBOX = "-0.1,50.7,0.1,50.9"  # the three Sussex tiles, not the Cape
IN_BBOX = [grid_name(lon, lat) for lon, lat in MIRROR_PLACES[:3]]
ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "TESSERA_MIRROR_BACKOFF": "0.02"}
DEADLINE = 120.0
ENDLESS = 64 << 20  # an "endless" body stops after this many bytes (a test's own bound, far above any limit checked)
TRICKLE_S = 0.25  # a "trickle" body sends one byte per this many seconds


def tile_files(names, year=YEAR) -> set[str]:
    out = set()
    for n in names:
        out |= {f"/v1/{EMBEDDINGS_DIR}/{year}/{n}/{n}.npy", f"/v1/{EMBEDDINGS_DIR}/{year}/{n}/{n}_scales.npy",
                f"/v1/{LANDMASKS_DIR}/{n}.tiff"}
    return out


# ---------------------------------------------------------------- server --
class Mirror:
    """A threaded HTTP server over `root`; `plan(path, attempt)` picks each response."""

    def __init__(self, root: Path, plan=None):
        self.root, self.plan = root, plan
        self.requests: list[str] = []
        self.counts: Counter = Counter()
        self.sent: Counter = Counter()  # body bytes written to the socket, per path
        self.lock = threading.Lock()
        self.hung = threading.Event()  # a "hang" response has sent half its body
        self.release = threading.Event()
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def send(self, path: str, data: bytes) -> None:
                self.wfile.write(data)
                self.wfile.flush()
                with mirror.lock:
                    mirror.sent[path] += len(data)

            def lie(self, action: str, path: str, data: bytes) -> None:
                """The lying answers: the server goes on until the client hangs up (or the test moves on)."""
                self.close_connection = True
                release = mirror.release
                if action.startswith("redirect "):
                    self.send_response(302)
                    self.send_header("Location", action.split(" ", 1)[1])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                if action == "trickle":
                    self.send_header("Content-Length", str(len(data)))
                else:  # "endless": no Content-Length, the file and then zeros, until the connection closes
                    self.send_header("Connection", "close")
                self.end_headers()
                try:
                    if action == "trickle":
                        for i in range(len(data)):
                            self.send(path, data[i:i + 1])
                            if release.wait(TRICKLE_S):
                                return
                    else:
                        self.send(path, data)
                        zeros, n = bytes(1 << 16), len(data)
                        while n < ENDLESS and not release.is_set():
                            self.send(path, zeros)
                            n += len(zeros)
                except OSError:  # the client hung up
                    pass

            def do_GET(self):
                path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
                with mirror.lock:
                    mirror.requests.append(path)
                    mirror.counts[path] += 1
                    attempt = mirror.counts[path]
                action = mirror.plan(path, attempt) if mirror.plan else "ok"
                f = mirror.root / path.lstrip("/")
                if action == "drop":
                    self.close_connection = True
                    return
                if action in ("503", "404") or not f.is_file():
                    code = 404 if action == "404" or not f.is_file() else 503
                    body = b"no"
                    self.send_response(code)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                data = f.read_bytes()
                if action in ("endless", "trickle") or action.startswith("redirect "):
                    return self.lie(action, path, data)
                if action == "slow":
                    time.sleep(0.3)
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if action in ("truncate", "hang"):
                    self.send(path, data[: len(data) // 2])
                    if action == "hang":
                        mirror.hung.set()
                        mirror.release.wait(DEADLINE)
                    self.close_connection = True
                    return
                self.send(path, data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def tile_requests(self) -> list[str]:
        with self.lock:
            return [p for p in self.requests if not p.endswith(".parquet")]

    def reset(self, plan=None):
        with self.lock:
            self.release.set()  # free a request left hanging by an earlier test
            self.hung, self.release = threading.Event(), threading.Event()
            self.requests.clear()
            self.counts.clear()
            self.sent.clear()
            self.plan = plan


@contextmanager
def serve(root: Path, plan=None, probe: str = "/v1/manifest.parquet"):
    m = Mirror(root, plan)
    t = threading.Thread(target=m.httpd.serve_forever, daemon=True)
    t.start()
    try:
        wait_http(f"http://127.0.0.1:{m.httpd.server_address[1]}{probe}", deadline_s=30)
        m.reset(plan)
        yield m
    finally:
        m.release.set()
        m.httpd.shutdown()
        m.httpd.server_close()


def wait_until(cond, what: str, deadline_s: float = DEADLINE):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise TimeoutError(f"{what}: not within {deadline_s:.0f} s")


# -------------------------------------------------------------- fixtures --
def write_manifest(v1: Path, sizes_wrong: str | None = None, change: dict | None = None) -> None:
    """geotessera's manifest of the tiles below v1 (server paths); `change` maps a tile name to the values its
    row takes instead (a lying size, a path with '..')."""
    rows = []
    for d in sorted((v1 / EMBEDDINGS_DIR).glob("*/grid_*")):
        lon, lat = (float(x) for x in d.name.split("_")[1:])
        g, s = d / f"{d.name}.npy", d / f"{d.name}_scales.npy"
        rows.append({"year": int(d.parent.name), "lon": lon, "lat": lat, "directory": str(d.resolve()),
                     "grid_path": str(g.resolve()), "scales_path": str(s.resolve()),
                     "grid_size": g.stat().st_size + (7 if d.name == sizes_wrong else 0),
                     "scales_size": s.stat().st_size, **(change or {}).get(d.name, {})})
    pd.DataFrame(rows).to_parquet(v1 / "manifest.parquet", index=False)
    import hashlib
    lms = []
    for f in sorted((v1 / LANDMASKS_DIR).glob("*.tiff")):
        lon, lat = (float(x) for x in f.stem.split("_")[1:])
        lms.append({"lon": lon, "lat": lat, "file_size": f.stat().st_size,
                    "hash": hashlib.sha256(f.read_bytes()).hexdigest()})
    pd.DataFrame(lms).to_parquet(v1 / "landmasks.parquet", index=False)


@pytest.fixture(scope="module")
def mirror_root(tmp_path_factory, world) -> Path:
    root = tmp_path_factory.mktemp("mirror")
    v1 = root / "v1"
    for lon, lat in MIRROR_PLACES:
        demo.write_tile(v1, YEAR, lon, lat, PX, world=world)
    demo.write_tile(v1, 2023, *MIRROR_PLACES[0], PX, world=world)  # another year: never fetched for 2024
    write_manifest(v1)
    return root


@pytest.fixture(scope="module")
def reference(tmp_path_factory, mirror_root) -> Path:
    """A local build of exactly the bbox tiles, the ordinary way."""
    tiles = tmp_path_factory.mktemp("ref-tiles")
    for n in IN_BBOX:
        shutil.copytree(mirror_root / "v1" / EMBEDDINGS_DIR / str(YEAR) / n, tiles / EMBEDDINGS_DIR / str(YEAR) / n)
        (tiles / LANDMASKS_DIR).mkdir(exist_ok=True)
        shutil.copy(mirror_root / "v1" / LANDMASKS_DIR / f"{n}.tiff", tiles / LANDMASKS_DIR)
    out = tmp_path_factory.mktemp("ref-out")
    run_cli("build", str(tiles), "--year", str(YEAR), "--out", str(out), "--scheduler", "threads", "-q", env=ENV)
    return out / f"{YEAR}.zarr"


def build_from(base: str, out: Path, cache: Path, *extra: str, check=True, bbox=BBOX):
    """The real CLI; `--bbox W,S,E,N` as two arguments, so a negative west edge must get through argparse
    (the resume test uses the `--bbox=...` form)."""
    return run_cli("build", "--from", base, "--bbox", bbox, "--year", str(YEAR), "--out", str(out),
                   "--cache", str(cache), "--scheduler", "threads", "-q", *extra, check=check, env=ENV)


def values(store: Path) -> dict[str, np.ndarray]:
    import zarr
    g = zarr.open_group(str(store), mode="r")
    out = {}
    for name, grp in sorted(g.groups()):
        if name.startswith("utm"):
            for a in ("embeddings", "scales", "rgb", "easting", "northing", "band"):
                out[f"{name}/{a}"] = grp[a][...]
    top = max(int(k) for k, _ in g["global_rgb"].groups())
    out["global_rgb/top"] = g[f"global_rgb/{top}/rgb"][...]
    return out


def assert_same_values(a: Path, b: Path, skip: tuple[str, ...] = ()) -> None:
    va, vb = values(a), values(b)
    assert sorted(va) == sorted(vb)
    for k in va:
        if k.endswith(skip):
            continue
        np.testing.assert_array_equal(va[k], vb[k], err_msg=k)


# ----------------------------------------------------------------- tests --
@pytest.fixture(scope="module")
def mirror(mirror_root):
    """One server for the module (tests that share a cache see the same URL)."""
    with serve(mirror_root) as m:
        yield m


@pytest.fixture()
def m(mirror):
    mirror.reset()
    yield mirror
    mirror.reset()


@pytest.fixture(scope="module")
def first_build(tmp_path_factory, mirror):
    cache, out = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("out")
    mirror.reset()
    p = build_from(mirror.base, out, cache)
    return out, cache, mirror.tile_requests(), p


def test_build_from_mirror_equals_local_build(first_build, reference):
    out, _, _, p = first_build
    assert "valid tessera:" in p.stdout
    assert_same_values(out / f"{YEAR}.zarr", reference)


def test_only_tiles_meeting_the_bbox_are_requested(first_build):
    _, _, reqs, _ = first_build
    assert set(reqs) == tile_files(IN_BBOX)
    assert len(reqs) == len(set(reqs)) == 9  # each file once, no other year, not the Cape


def test_second_run_reuses_the_cache(first_build, m, reference, tmp_path):
    _, cache, _, _ = first_build
    build_from(m.base, tmp_path / "out2", cache)
    assert m.tile_requests() == []
    assert_same_values(tmp_path / "out2" / f"{YEAR}.zarr", reference)
    assert not list(cache.rglob("*.partial-*"))


def test_a_smaller_bbox_selects_one_tile(m, tmp_path):
    # the point (0.06, 50.86) lies in grid_0.05_50.85 only
    build_from(m.base, tmp_path / "out", tmp_path / "cache", bbox="0.06,50.86,0.06,50.86")
    assert set(m.tile_requests()) == tile_files([grid_name(0.05, 50.85)])


FAULTS = ["drop", "503", "truncate", "slow"]
FIRST = {p: FAULTS[i % len(FAULTS)] for i, p in enumerate(sorted(tile_files(IN_BBOX)))}


def flaky_plan(path: str, attempt: int) -> str:
    """Deterministic by request count: every file's first request is dropped, answered 503, truncated
    or slow (in turn, by path); the second of every other file is slow too; manifests first get a 503."""
    if path.endswith(".parquet"):
        return "503" if attempt == 1 else "ok"
    if attempt == 1:
        return FIRST.get(path, "ok")
    return "slow" if attempt == 2 and len(path) % 2 else "ok"


def test_flaky_mirror_still_builds_the_same_store(m, reference, tmp_path):
    m.reset(flaky_plan)
    build_from(m.base, tmp_path / "out", tmp_path / "cache", "--jobs", "3")
    counts = Counter(m.tile_requests())
    for p in tile_files(IN_BBOX):
        assert counts[p] == (1 if flaky_plan(p, 1) == "slow" else 2), (p, counts[p])
    assert_same_values(tmp_path / "out" / f"{YEAR}.zarr", reference)


def test_resume_after_sigkill_fetches_only_what_is_missing(m, reference, tmp_path):
    hang = f"/v1/{EMBEDDINGS_DIR}/{YEAR}/{IN_BBOX[1]}/{IN_BBOX[1]}.npy"
    cache, out = tmp_path / "cache", tmp_path / "out"

    def partial_of_hung_file():
        for p in cache.rglob(f"{IN_BBOX[1]}.npy.partial-*"):
            try:
                if p.stat().st_size > 0:
                    return p
            except FileNotFoundError:
                pass

    def complete():
        return {p for p in cache.rglob("*") if p.is_file() and ".partial-" not in p.name and "views" not in p.parts}

    m.reset(lambda p, a: "hang" if p == hang and a == 1 else "ok")
    proc = subprocess.Popen([sys.executable, "-m", "builder", "build", "--from", m.base, f"--bbox={BBOX}",
                             "--year", str(YEAR), "--out", str(out), "--cache", str(cache),
                             "--scheduler", "threads", "-q", "--jobs", "2"],
                            cwd=REPO, env=dict(os.environ) | ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        if not m.hung.wait(DEADLINE):
            raise TimeoutError("the hanging request never arrived")
        wait_until(partial_of_hung_file, "half a body in a .partial file")
        wait_until(lambda: len(complete()) >= 2, "two other files complete in the cache")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=DEADLINE)
    m.release.set()
    assert proc.returncode == -signal.SIGKILL
    done = {"/v1/" + p.relative_to(next(cache.iterdir())).as_posix() for p in complete()}
    assert hang not in done and done < tile_files(IN_BBOX)
    assert not (out / f"{YEAR}.zarr").exists()

    m.reset()
    build_from(m.base, out, cache)
    assert sorted(m.tile_requests()) == sorted(tile_files(IN_BBOX) - done)
    assert not list(cache.rglob("*.partial-*"))
    assert_same_values(out / f"{YEAR}.zarr", reference)


@pytest.fixture(scope="module")
def wrong_size_root(tmp_path_factory, mirror_root) -> Path:
    root = tmp_path_factory.mktemp("mirror-wrong")
    shutil.copytree(mirror_root / "v1", root / "v1")
    write_manifest(root / "v1", sizes_wrong=IN_BBOX[0])
    return root


BAD = f"/v1/{EMBEDDINGS_DIR}/{YEAR}/{IN_BBOX[2]}/{IN_BBOX[2]}_scales.npy"


@pytest.mark.parametrize("case, plan, expect", [
    ("404", lambda p, a: "404" if p == BAD else "ok", [BAD, "not found on the mirror (HTTP 404)"]),
    ("503", lambda p, a: "503" if p == BAD else "ok", [BAD, "failed after 5 attempts (last: HTTP 503)"]),
    ("truncated", lambda p, a: "truncate" if p == BAD else "ok", [BAD, "failed after 5 attempts"]),
    ("manifest-503", lambda p, a: "503" if p.endswith("manifest.parquet") else "ok",
     ["/v1/manifest.parquet", "failed after 5 attempts (last: HTTP 503)"]),
    ("wrong-size", None, [f"{IN_BBOX[0]}.npy", "the manifest says"]),
    ("empty-bbox", None, ["/v1/manifest.parquet", "no tiles for year(s) 2024 meet bbox 10,10,11,11"]),
    ("refused", None, ["/v1/manifest.parquet", "failed after 5 attempts"]),
    ("bad-bbox", None, ["--bbox", "W,S,E,N"]),
])
def test_errors_are_one_line_exit_2_and_leave_no_store(case, plan, expect, m, wrong_size_root, tmp_path):
    bbox = {"empty-bbox": "10,10,11,11", "bad-bbox": "1,2,3"}.get(case, BBOX)
    out = tmp_path / "out"
    if case == "wrong-size":
        with serve(wrong_size_root) as w:
            p = build_from(w.base, out, tmp_path / "cache", check=False, bbox=bbox)
    else:
        m.reset(plan)
        base = m.base if case != "refused" else f"http://127.0.0.1:{free_port()}/v1"
        p = build_from(base, out, tmp_path / "cache", check=False, bbox=bbox)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    for e in expect:
        assert e in lines[0], lines[0]
    assert not (out / f"{YEAR}.zarr").exists()
    assert not list((tmp_path / "cache").rglob("*.partial-*"))


def test_cache_inside_a_store_is_refused(m, tmp_path):
    store = tmp_path / "x.zarr"
    store.mkdir()
    p = build_from(m.base, tmp_path / "out", store / "cache", check=False)
    assert p.returncode == 2 and "inside a Zarr store" in p.stderr
    assert not (store / "cache").exists()


def test_later_bboxes_extend_the_store_keeping_its_tiles(m, reference, tmp_path):
    """A build --from into an existing store also takes the tiles its record holds (from the cache, or
    fetched again), so shards they share with new tiles keep their pixels."""
    out = tmp_path / "out"
    a, b, c = "-0.09,50.81,-0.01,50.89", "0.01,50.81,0.09,50.89", "-0.09,50.71,-0.01,50.79"
    build_from(m.base, out, tmp_path / "cache-a", bbox=a)
    build_from(m.base, out, tmp_path / "cache-b", bbox=b)
    m.reset()
    build_from(m.base, out, tmp_path / "cache-a", bbox=c)
    assert set(m.tile_requests()) == tile_files(IN_BBOX[1:])  # IN_BBOX[0] is in cache-a already
    # the RGB PCA is fitted on a store's first tiles and kept, so only the previews differ
    assert_same_values(out / f"{YEAR}.zarr", reference, skip=("rgb", "global_rgb/top"))


# ------------------------------------------------- registry.parquet fallback --
@pytest.fixture(scope="module")
def registry_root(tmp_path_factory, mirror_root) -> Path:
    """The same tiles served by a mirror that has no manifest.parquet, only geotessera's registry.parquet
    (year, lon, lat, file_size, scales_size, hash, scales_hash) with the files at their canonical paths."""
    import hashlib
    root = tmp_path_factory.mktemp("mirror-registry")
    v1 = root / "v1"
    shutil.copytree(mirror_root / "v1", v1)
    (v1 / "manifest.parquet").unlink()
    sha = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
    rows = []
    for d in sorted((v1 / EMBEDDINGS_DIR).glob("*/grid_*")):
        lon, lat = (float(x) for x in d.name.split("_")[1:])
        g, s = d / f"{d.name}.npy", d / f"{d.name}_scales.npy"
        rows.append({"year": int(d.parent.name), "lon": lon, "lat": lat, "file_size": g.stat().st_size,
                     "scales_size": s.stat().st_size, "hash": sha(g), "scales_hash": sha(s)})
    pd.DataFrame(rows).to_parquet(v1 / "registry.parquet", index=False)
    return root


def test_a_mirror_with_only_a_registry_builds_the_same_store(registry_root, reference, tmp_path):
    """Then the same mirror moved to another port reuses the cache (keyed by the URL's path, not its host),
    except a cached file whose bytes no longer match the registry's sha256 (same size): only that is fetched."""
    out, cache = tmp_path / "out", tmp_path / "cache"
    with serve(registry_root) as r:
        build_from(r.base, out, cache)
        assert sorted(r.tile_requests()) == sorted(tile_files(IN_BBOX))
        assert {"/v1/manifest.parquet", "/v1/registry.parquet"} <= set(r.requests)
        first = r.base
    assert_same_values(out / f"{YEAR}.zarr", reference)

    rel = f"{EMBEDDINGS_DIR}/{YEAR}/{IN_BBOX[2]}/{IN_BBOX[2]}_scales.npy"
    (cached,) = [p for p in cache.rglob(Path(rel).name) if "views" not in p.parts]
    data = bytearray(cached.read_bytes())
    data[-1] ^= 0xFF
    cached.write_bytes(bytes(data))
    with serve(registry_root) as r2:
        assert r2.base != first
        build_from(r2.base, tmp_path / "out2", cache)
        assert r2.tile_requests() == [f"/v1/{rel}"]
    assert_same_values(tmp_path / "out2" / f"{YEAR}.zarr", reference)


def test_a_file_that_differs_from_the_registry_hash_is_refused(registry_root, tmp_path):
    """Same size, one byte changed: only the registry's sha256 can tell; one line, no store, no partial file."""
    bad_root = tmp_path / "bad"
    shutil.copytree(registry_root, bad_root)
    f = bad_root / "v1" / EMBEDDINGS_DIR / str(YEAR) / IN_BBOX[1] / f"{IN_BBOX[1]}.npy"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    out = tmp_path / "out"
    with serve(bad_root) as r:
        p = build_from(r.base, out, tmp_path / "cache", check=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert f"{IN_BBOX[1]}.npy" in lines[0] and "sha256" in lines[0], lines[0]
    assert not (out / f"{YEAR}.zarr").exists()
    assert not list((tmp_path / "cache").rglob("*.partial-*"))


# ------------------------------------------------------------ a lying mirror --
# Each attack runs the real CLI once, measured: exit code, its one line, seconds, peak memory, and the bytes
# the server sent.  The CLI's address space is capped (MEMORY), so that an unbounded read fails fast instead
# of taking the machine's memory.
TILE = f"/v1/{EMBEDDINGS_DIR}/{YEAR}/{IN_BBOX[0]}/{IN_BBOX[0]}.npy"
SLACK = 16 << 20  # bytes socket buffers may hold between the server's writes and the moment the reader stops
MEMORY = 3 << 30


@dataclass
class Attack:
    returncode: int
    stderr: str
    seconds: float
    max_rss: int  # bytes: the CLI's peak resident memory (VmHWM)


# The CLI with its address space capped, reporting its peak memory as it ends (VmHWM of its own process, which
# counts from its exec: the rusage of a child also counts the test process it was forked from).
CAPPED_CLI = """
import resource, runpy, sys
resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))
report, sys.argv = sys.argv[1], ["builder", *sys.argv[2:]]
try:
    runpy.run_module("builder", run_name="__main__", alter_sys=True)
finally:
    with open("/proc/self/status") as f, open(report, "w") as out:
        out.write(next(line.split()[1] for line in f if line.startswith("VmHWM:")))
"""


def attack(base: str, work: Path, *extra: str, env: dict | None = None, timeout: float = 90.0) -> Attack:
    """`build --from base` (the real CLI) into work/out with cache work/cache; fails the test if it is still
    running after `timeout` seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "rss"
        args = [sys.executable, "-c", CAPPED_CLI.format(memory=MEMORY), str(report), "build", "--from", base,
                f"--bbox={BBOX}", "--year", str(YEAR), "--out", str(work / "out"), "--cache", str(work / "cache"),
                "--scheduler", "threads", "-q", *extra]
        t0 = time.monotonic()
        try:
            p = subprocess.run(args, cwd=REPO, env=dict(os.environ) | ENV | (env or {}), capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the build was still reading from the mirror after {timeout:.0f} s")
        a = Attack(p.returncode, p.stderr, time.monotonic() - t0, int(report.read_text()) * 1024)
    print(f"\n{os.environ.get('PYTEST_CURRENT_TEST', '').split(' ')[0]}: exit {a.returncode} in {a.seconds:.1f} s, "
          f"peak RSS {a.max_rss / 2**20:.0f} MiB: {a.stderr.strip()[:300]}")
    return a


def assert_refused(a: Attack, work: Path, *needles: str) -> str:
    """One line, exit 2, no store and no partial file left in the cache."""
    lines = a.stderr.strip().splitlines()
    assert a.returncode == 2, a.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), a.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    assert not (work / "out" / f"{YEAR}.zarr").exists()
    assert not [p for p in (work / "cache").rglob("*") if ".partial" in p.name]
    return lines[0]


def test_a_body_longer_than_the_manifest_says_is_cut_at_that_size(m, mirror_root, tmp_path):
    """No Content-Length and no end (geotessera's manifest says 1.2 MB): read up to the manifest's size and
    one byte more, then refused."""
    size = (mirror_root / TILE.lstrip("/")).stat().st_size
    m.reset(lambda p, a: "endless" if p == TILE else "ok")
    a = attack(m.base, tmp_path)
    print(f"bytes sent: {m.sent[TILE]} of a {size} byte file")
    assert m.sent[TILE] <= size + SLACK
    assert_refused(a, tmp_path, IN_BBOX[0], f"more than the {size} bytes")


@pytest.fixture(scope="module")
def huge_root(tmp_path_factory, mirror_root) -> Path:
    """The mirror, its manifest saying one tile's grid is 50 GB."""
    root = tmp_path_factory.mktemp("mirror-huge")
    shutil.copytree(mirror_root / "v1", root / "v1")
    write_manifest(root / "v1", change={IN_BBOX[0]: {"grid_size": 50 * 10**9}})
    return root


def test_a_file_the_manifest_says_is_larger_than_the_limit_is_never_requested(huge_root, tmp_path):
    with serve(huge_root, lambda p, a: "endless" if p == TILE else "ok") as w:
        a = attack(w.base, tmp_path)
        assert TILE not in w.requests and w.sent[TILE] == 0
    assert_refused(a, tmp_path, IN_BBOX[0], "50000000000 bytes", "--max-file-size")


def test_an_endless_manifest_is_cut_at_the_manifest_limit(m, tmp_path):
    m.reset(lambda p, a: "endless" if p.endswith("manifest.parquet") else "ok")
    a = attack(m.base, tmp_path, env={"TESSERA_MIRROR_MAX_MANIFEST_SIZE": str(4 << 20)})
    print(f"bytes sent: {m.sent['/v1/manifest.parquet']} with a limit of {4 << 20}")
    assert m.sent["/v1/manifest.parquet"] <= (4 << 20) + SLACK
    assert_refused(a, tmp_path, "/v1/manifest.parquet", "--max-manifest-size")
    assert m.tile_requests() == []


MANY_ROWS = 200_000_000


@pytest.fixture(scope="module")
def many_rows_root(tmp_path_factory, mirror_root) -> Path:
    """The mirror with a manifest of 2x10^8 rows (all null: a few MB of Parquet that claim it in their footer)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    root = tmp_path_factory.mktemp("mirror-rows")
    shutil.copytree(mirror_root / "v1", root / "v1")
    schema = pq.read_schema(root / "v1" / "manifest.parquet")
    n = 5_000_000
    block = pa.table([pa.nulls(n, f.type) for f in schema], schema=schema)
    with pq.ParquetWriter(root / "v1" / "manifest.parquet", schema, compression="zstd") as w:
        for _ in range(MANY_ROWS // n):
            w.write_table(block, row_group_size=n)
    assert pq.ParquetFile(root / "v1" / "manifest.parquet").metadata.num_rows == MANY_ROWS
    return root


def test_a_manifest_whose_footer_claims_too_many_rows_is_refused_before_it_is_read(many_rows_root, tmp_path):
    size = (many_rows_root / "v1" / "manifest.parquet").stat().st_size
    with serve(many_rows_root) as w:
        a = attack(w.base, tmp_path)
        assert w.sent["/v1/manifest.parquet"] == size and w.tile_requests() == []
    print(f"a {size} byte manifest of {MANY_ROWS} rows")
    assert a.max_rss < 1 << 30
    assert_refused(a, tmp_path, "/v1/manifest.parquet", f"{MANY_ROWS} rows", "--max-manifest-rows")


def test_a_file_trickled_a_byte_at_a_time_is_given_up_at_its_deadline(m, tmp_path):
    """One byte every 0.25 s keeps each socket read under any per-read timeout; the file's deadline (2 s here)
    bounds the whole download, retries included."""
    m.reset(lambda p, a: "trickle" if p == TILE else "ok")
    a = attack(m.base, tmp_path, env={"TESSERA_MIRROR_FILE_TIMEOUT": "2"}, timeout=60)
    print(f"bytes sent: {m.sent[TILE]}")
    assert m.sent[TILE] <= 2 * 2 / TRICKLE_S  # the bytes of twice the deadline (the watchdog may be late on a busy machine)
    assert_refused(a, tmp_path, IN_BBOX[0], "not complete within 2 s", "--file-timeout")


@pytest.mark.parametrize("flag, needle", [("--max-manifest-size=1000", "more than the limit of 1000 bytes"),
                                          ("--max-manifest-rows=3", "5 rows, more than the limit of 3"),
                                          ("--max-file-size=1000", "more than the limit of 1000 bytes")])
def test_each_limit_is_a_flag(m, tmp_path, flag, needle):
    """Lowered here: each refused in one line naming its flag, before any tile is requested."""
    a = attack(m.base, tmp_path, flag)
    assert_refused(a, tmp_path, needle, flag.split("=")[0])
    assert m.tile_requests() == []


def test_a_flag_raises_a_limit_set_in_the_environment(m, reference, tmp_path):
    a = attack(m.base, tmp_path, "--max-file-size", "2M", env={"TESSERA_MIRROR_MAX_FILE_SIZE": "1000"})
    assert a.returncode == 0, a.stderr
    assert_same_values(tmp_path / "out" / f"{YEAR}.zarr", reference)


def test_a_redirect_to_the_same_host_is_followed(m, reference, tmp_path):
    m.reset(lambda p, a: f"redirect {m.base}{p[len('/v1'):]}" if p == TILE and a == 1 else "ok")
    build_from(m.base, tmp_path / "out", tmp_path / "cache")
    assert m.counts[TILE] == 2
    assert_same_values(tmp_path / "out" / f"{YEAR}.zarr", reference)


def test_a_redirect_to_another_host_is_refused_unless_allowed(m, mirror_root, reference, tmp_path):
    """The other host: a second server, named `localhost` where the mirror is `127.0.0.1`."""
    with serve(mirror_root) as other:
        there = other.base.replace("127.0.0.1", "localhost") + TILE[len("/v1"):]
        m.reset(lambda p, a: f"redirect {there}" if p == TILE else "ok")
        a = attack(m.base, tmp_path / "refused")
        assert other.requests == []
        assert_refused(a, tmp_path / "refused", IN_BBOX[0], "redirected to another host", "localhost",
                       "--allow-other-hosts")
        m.reset(lambda p, a: f"redirect {there}" if p == TILE else "ok")
        build_from(m.base, tmp_path / "allowed", tmp_path / "allowed-cache", "--allow-other-hosts")
        assert other.requests == [TILE]
    assert_same_values(tmp_path / "allowed" / f"{YEAR}.zarr", reference)


@pytest.mark.parametrize("column, value", [
    ("grid_path", f"{EMBEDDINGS_DIR}/{YEAR}/../../../secret/{{n}}.npy"),  # below the layout's anchor
    ("scales_path", "{base}/../secret/{n}_scales.npy"),  # a URL below the mirror's own
    ("landmask_path", f"{LANDMASKS_DIR}/%2e%2e/%2E%2E/secret/{{n}}.tiff"),  # percent-encoded
])
def test_a_manifest_path_with_dotdot_is_refused(column, value, mirror_root, tmp_path):
    """Each path leads out of the mirror's root to `secret/`, which holds true copies of the tile's files: only
    the path can tell.  Refused before any tile is requested."""
    root = tmp_path / "mirror"
    shutil.copytree(mirror_root, root)
    n = IN_BBOX[0]
    (root / "secret").mkdir()
    for f in (root / "v1" / EMBEDDINGS_DIR / str(YEAR) / n).iterdir():
        shutil.copy(f, root / "secret")
    shutil.copy(root / "v1" / LANDMASKS_DIR / f"{n}.tiff", root / "secret")
    with serve(root) as w:
        write_manifest(root / "v1", change={n: {column: value.format(n=n, base=w.base)}})
        a = attack(w.base, tmp_path / "run")
        assert not [r for r in w.requests if "secret" in r]
        assert w.tile_requests() == []
    assert_refused(a, tmp_path / "run", column, "'..'")


# ------------------------------------------------------------ the cache folder --
@pytest.mark.parametrize("path", ["/..", "/.", "/../..", "/./", "/%2e%2e", "/a/..", "/..%2f..", "/" + "x" * 5000],
                         ids=lambda p: p if len(p) < 20 else f"{len(p)} characters")
def test_the_cache_folder_of_any_mirror_url_is_one_folder_inside_the_cache(tmp_path, path):
    from builder.mirror import cache_dir_for
    d = cache_dir_for(tmp_path / "cache", f"http://127.0.0.1:8000{path}")
    assert d.parent == tmp_path / "cache" and d.name not in (".", "..") and len(d.name) <= 255


def test_a_mirror_at_dotdot_keeps_its_files_inside_the_cache(mirror_root, reference, tmp_path_factory):
    """`--from http://host/..` (a server that answers for /..) made the cache folder `..`: the tiles went to the
    cache's parent."""
    srv = tmp_path_factory.mktemp("mirror-dotdot")
    shutil.copytree(mirror_root / "v1", srv, dirs_exist_ok=True)
    write_manifest(srv)
    (srv / "x").mkdir()  # the server's root: /.. is srv
    work = tmp_path_factory.mktemp("work")
    with serve(srv / "x", probe="/../manifest.parquet") as w:
        base = f"http://127.0.0.1:{w.httpd.server_address[1]}/.."
        build_from(base, work / "out", work / "cache")
        assert set(w.tile_requests()) == {"/.." + p[len("/v1"):] for p in tile_files(IN_BBOX)}
    assert sorted(p.name for p in work.iterdir()) == ["cache", "out"]
    assert_same_values(work / "out" / f"{YEAR}.zarr", reference)
