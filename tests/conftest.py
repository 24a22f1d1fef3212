"""Shared fixtures: small real tile trees on disk and stores built from them by the real CLI."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder import demo

REPO = Path(__file__).resolve().parent.parent
PX = 96  # small tiles keep the suite fast; the code path is the one real tiles take

# Sussex either side of the zone 30/31 boundary (with sea) and the Cape (zone 34 south).
PLACES = [(-0.05, 50.85), (0.05, 50.85), (-0.05, 50.75), (18.45, -33.95)]


# The test files, slowest first, so that the two processes (xdist, whole files to each, in this order:
# --no-loadscope-reorder in pyproject) do not end with one long file running alone while the other
# process is idle. Seconds per file, one process, --durations=0 on a 2-core machine (2026-12-05):
# test_browser 788, test_mirror 380, test_tools_zones 317, test_build 270, test_browser_tools 224 (one
# test of 165), test_tools_share 202, test_browser_hostile 185, test_overviews 184, test_kills 179,
# test_bad_input 167. Files not named here follow, in collection order.
SLOWEST_FIRST = (
    "test_browser.py", "test_mirror.py", "test_browser_tools.py", "test_tools_zones.py", "test_build.py",
    "test_tools_share.py", "test_browser_hostile.py", "test_overviews.py", "test_kills.py",
    "test_bad_input.py", "test_tools_classify.py", "test_virtual.py", "test_browser_geography.py",
    "test_browser_exports.py", "test_browser_models.py", "test_exports.py", "test_tools_scatter.py",
    "test_virtual_parquet.py",
    "test_validate.py", "test_tools_change.py", "test_publish.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's own order is kept


def run_async(coro):
    """Run a coroutine to completion in a thread of its own: the session's Playwright (sync API)
    keeps an event loop running in the main thread, where asyncio.run() is refused."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def run_cli(*args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-m", "builder", *args], capture_output=True, text=True, cwd=REPO, env=e)
    if check and p.returncode != 0:
        raise AssertionError(f"builder {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def run_node(tmp_path: Path, module: Path, script: str, data, node_modules: Path | None = None):
    """The JSON `script` (an ES module run by node beside a copy of the app's JS `module`, its input file's name as
    its argument) prints for the input `data`; `node_modules`: packages the module imports."""
    import json
    shutil.copy(module, tmp_path / module.name)
    if node_modules is not None:
        (tmp_path / "node_modules").symlink_to(node_modules)
    (tmp_path / "run.mjs").write_text(script)
    (tmp_path / "input.json").write_text(json.dumps(data))
    p = subprocess.run(["node", "run.mjs", "input.json"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def tree_digest(path: Path) -> dict[str, str]:
    """sha256 of every file below `path` (to prove a store was not touched)."""
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(path).rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def world() -> demo.World:
    return demo.World()


@pytest.fixture(scope="session")
def tiles_root(tmp_path_factory, world) -> Path:
    root = tmp_path_factory.mktemp("tiles")
    for lon, lat in PLACES:
        demo.write_tile(root, 2024, lon, lat, PX, world=world)
    return root


@pytest.fixture(scope="session")
def store(tmp_path_factory, tiles_root) -> Path:
    out = tmp_path_factory.mktemp("stores")
    run_cli("build", str(tiles_root), "--year", "2024", "--out", str(out), "--scheduler", "threads", "-q")
    return out / "2024.zarr"


@pytest.fixture(scope="session")
def pq_store(tmp_path_factory, tiles_root) -> Path:
    """The session's tiles built with the product-quantisation compact code (--code pq, 8 bytes)."""
    out = tmp_path_factory.mktemp("pq")
    run_cli("build", str(tiles_root), "--year", "2024", "--out", str(out), "--scheduler", "threads", "-q",
            "--code", "pq", "--code-dims", "8")
    return out / "2024.zarr"


@pytest.fixture(scope="session")
def plain_store(tmp_path_factory, tiles_root) -> Path:
    """The session's tiles built with --no-overviews (no tessera-ovr:): the explorer's capped 10 m regions."""
    out = tmp_path_factory.mktemp("plain")
    run_cli("build", str(tiles_root), "--year", "2024", "--out", str(out), "--scheduler", "threads", "-q",
            "--no-overviews", "--no-global")
    return out / "2024.zarr"


@pytest.fixture(scope="session")
def tiles2(tmp_path_factory, tiles_root, world):
    """The session's 2024 demo tiles plus 2023 tiles of the same places (two years for geoemb: and catalogs)."""
    root = tmp_path_factory.mktemp("rd-tiles") / "tiles"
    shutil.copytree(tiles_root, root)
    for lon, lat in PLACES:
        demo.write_tile(root, 2023, lon, lat, PX, world=world)
    return root


@pytest.fixture(scope="session")
def geoemb_store(tmp_path_factory, tiles2) -> Path:
    """A geoemb: store of both years of `tiles2`, written by tests/geoemb_writer.py (not the builder)."""
    from geoemb_writer import YEARS, write_geoemb
    return write_geoemb(tiles2, YEARS, tmp_path_factory.mktemp("geoemb") / "geoemb.zarr")


# ---------------------------------------------------------------- browser --
@pytest.fixture(scope="session")
def site_work(tmp_path_factory) -> Path:
    """Where the session's site keeps its demo tiles (with their ground truth, tiles/ground_truth/) and records."""
    return tmp_path_factory.mktemp("site-work")


@pytest.fixture(scope="session")
def site(tmp_path_factory, site_work) -> Path:
    from browser_util import build_test_site
    return build_test_site(tmp_path_factory.mktemp("site"), site_work)


@pytest.fixture(scope="session")
def server(site):
    from browser_util import static_server
    with static_server(site) as base:
        yield base


@pytest.fixture(scope="session")
def chromium():
    from playwright.sync_api import sync_playwright
    from browser_util import CHROMIUM, CHROMIUM_ARGS
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(chromium):
    """A fresh page that records every request and fails the test on Python errors or off-machine requests."""
    yield from _checked_page(chromium)


@pytest.fixture()
def touch_page(chromium):
    """`page`, on a touch screen (its `cdp` attribute: the page's CDP session, for Input.dispatchTouchEvent)."""
    yield from _checked_page(chromium, has_touch=True)


def _checked_page(chromium, **options):
    ctx = chromium.new_context(viewport={"width": 1300, "height": 950}, accept_downloads=True, **options)
    pg = ctx.new_page()
    pg.cdp = ctx.new_cdp_session(pg) if options.get("has_touch") else None
    pg.requests_seen = []
    pg.python_errors = []  # where each traceback starts in the console's lines (Pyodide writes one line per message)
    lines = []
    pg.on("request", lambda r: pg.requests_seen.append(r.url))

    def console(m):
        if "Traceback" in m.text:
            pg.python_errors.append(len(lines))
        lines.append(m.text)
    pg.on("console", console)
    yield pg
    ctx.close()
    outside = [u for u in pg.requests_seen if not u.startswith(("http://127.0.0.1", "data:", "blob:"))]
    assert not outside, f"requests left the machine: {outside[:5]}"
    assert not pg.python_errors, "\n---\n".join("\n".join(lines[i:i + 40]) for i in pg.python_errors)[:6000]
