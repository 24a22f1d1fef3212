"""`python -m builder validate` on hostile stores: bounded time and memory, one line per problem.

Every store here is hand-written zarr.json documents (no data at all): the metadata alone claims
huge shapes and chunk counts, escapes the store through consolidated keys, is not JSON, is nested
100000 levels deep, or is hundreds of megabytes.  The validator runs as the real CLI in a child
process whose wall time and peak RSS are measured (the child is killed the moment it exceeds
either bound, so a regression costs seconds, not the machine).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from builder.core import convention as conv
from conftest import REPO

MAX_SECONDS = 5.0  # the bounds, asserted exactly
MAX_RSS = 300 * 2**20


# The child runs under a small launcher that reports the child's own peak RSS (wait4): a child forked
# straight from pytest would inherit pytest's high-water mark in ru_maxrss.
LAUNCHER = """
import os, subprocess, sys
p = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(p.pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss * 1024))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run_bounded(*args: str, tmp: Path, argv: list[str] | None = None):
    """Run `python -m builder ARGS` (or `python ARGV`); return (exit code, stdout, stderr, seconds, peak RSS bytes).
    The child is killed as soon as it exceeds MAX_SECONDS or MAX_RSS (polled every 10 ms)."""
    out, err, peak_file = tmp / "stdout.txt", tmp / "stderr.txt", tmp / "peak_rss.txt"
    cmd = [sys.executable, *(argv or ["-m", "builder", *args])]
    with open(out, "w") as fo, open(err, "w") as fe:
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(peak_file), *cmd], stdout=fo, stderr=fe, cwd=REPO)
        launcher = psutil.Process(p.pid)
        peak, killed = 0, None
        while p.poll() is None:
            try:
                for c in launcher.children():
                    peak = max(peak, c.memory_info().rss)
            except psutil.NoSuchProcess:
                pass
            elapsed = time.monotonic() - t0
            if killed is None and (elapsed > MAX_SECONDS or peak > MAX_RSS):
                killed = f"killed after {elapsed:.1f}s at {peak / 2**20:.0f} MB RSS"
                for c in launcher.children():
                    c.kill()
            time.sleep(0.01)
        elapsed = time.monotonic() - t0
    stdout, stderr = out.read_text(), err.read_text()
    assert killed is None, f"{killed}: {' '.join(cmd)}\n{stdout[-2000:]}\n{stderr[-2000:]}"
    peak = max(peak, int(peak_file.read_text()))
    return p.returncode, stdout, stderr, elapsed, peak


def _write(path: Path, doc) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))


def _array(shape, dtype, chunks, dims, fill=0, shards=None, inner=None) -> dict:
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}}]
    if shards is not None:
        codecs = [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(inner), "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                                   {"name": "blosc", "configuration": {
                                                       "typesize": 1, "cname": "zstd", "clevel": 3,
                                                       "shuffle": "bitshuffle", "blocksize": 0}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": "end"}}]
        chunks = shards
    return {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill, "codecs": codecs, "attributes": {}, "dimension_names": dims}


def hostile_store(root: Path, h: int, w: int, nb: int, coord_chunk: int | None, inner: int = 4,
                  consolidate: bool = True) -> Path:
    """A year store of metadata only: one zone utm30 of h x w pixels and nb bands; coordinate arrays
    in chunks of `coord_chunk` values (None: one chunk each); no chunk file exists."""
    store = root / "2024.zarr"
    nodes = {"utm30": {"zarr_format": 3, "node_type": "group", "attributes": conv.zone_attrs(
        year=2024, zone=30, south=False, n_bands=nb, n_tiles=1, model_version="1.0", build_version="x",
        has_rgb=False, origin_e=500_000.0, origin_n=5_700_000.0, height=h, width=w)}}
    sh = conv.SHARD
    nodes["utm30/embeddings"] = _array((h, w, nb), "int8", None, ["northing", "easting", "band"],
                                       shards=(sh, sh, nb), inner=(inner, inner, nb))
    nodes["utm30/scales"] = _array((h, w), "float32", None, ["northing", "easting"], fill="NaN",
                                   shards=(sh, sh), inner=(inner, inner))
    for name, n, dtype in (("easting", w, "float64"), ("northing", h, "float64"), ("band", nb, "int32")):
        nodes[f"utm30/{name}"] = _array((n,), dtype, (coord_chunk or n,), [name], fill=0)
    for key, doc in nodes.items():
        _write(store / key / "zarr.json", doc)
    rootdoc = {"zarr_format": 3, "node_type": "group", "attributes": conv.root_attrs(2024)}
    if consolidate:
        rootdoc["consolidated_metadata"] = {"kind": "inline", "must_understand": False, "metadata": nodes}
    _write(store / "zarr.json", rootdoc)
    return store


def _violations(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if ln.strip()]


# --------------------------------------------------------------- huge shapes --
HUGE = {
    # 1e10 pixels per plane; easting claims 1e10 values in one chunk (80 GB of float64 if read)
    "1e10 elements": dict(h=256, w=10**10 // 256 * 256, nb=128, coord_chunk=None),
    # 1e8 chunks per coordinate array (one value each), 1e8 bands
    "1e8 chunks": dict(h=10**8 // 256 * 256, w=256, nb=10**8, coord_chunk=1),
    # inner chunks of one pixel: 256*256 inner chunks per shard, 1.5e14 in the array
    "1e14 inner chunks": dict(h=10**7 // 256 * 256, w=10**7 // 256 * 256, nb=128, coord_chunk=1, inner=1),
}


@pytest.mark.parametrize("deep", [False, True], ids=["plain", "deep"])
@pytest.mark.parametrize("case", list(HUGE))
def test_huge_claimed_shapes_are_reported_in_bounded_time_and_memory(tmp_path, case, deep):
    store = hostile_store(tmp_path, **HUGE[case])
    assert sum(f.stat().st_size for f in store.rglob("*") if f.is_file()) < 40_000  # metadata only
    code, out, err, secs, rss = run_bounded("validate", str(store), *(["--deep"] if deep else []), tmp=tmp_path)
    print(f"{case} deep={deep}: {secs:.2f} s, {rss / 2**20:.0f} MB")
    assert secs < MAX_SECONDS and rss < MAX_RSS
    assert code == 1 and "Traceback" not in err, err
    lines = _violations(out)
    too_big = [ln for ln in lines if "too large to check" in ln]
    # each coordinate array that claims more values than the validator reads is named, with its shape
    spec = HUGE[case]
    for name, n in (("easting", spec["w"]), ("northing", spec["h"]), ("band", spec["nb"])):
        if n > 10**6:
            assert any(ln.startswith(f"utm30/{name}:") and str(n) in ln for ln in too_big), lines


def test_bounded_validate_still_checks_small_coordinates(tmp_path):
    """The caps do not switch checking off: a small zone's wrong coordinates are still caught."""
    store = hostile_store(tmp_path, h=256, w=256, nb=8, coord_chunk=None)
    import numpy as np
    (store / "utm30" / "easting" / "c").mkdir(parents=True)
    (store / "utm30" / "easting" / "c" / "0").write_bytes(np.arange(256, dtype="<f8").tobytes())
    code, out, err, secs, rss = run_bounded("validate", str(store), tmp=tmp_path)
    assert code == 1 and "utm30/easting: values are not origin + (i + 0.5) * 10" in out, out + err
    assert "too large" not in out


# ---------------------------------------------------- consolidated escapes --
@pytest.mark.parametrize("key", ["../outside", "../../etc", "/etc", "utm30/../../outside", "utm30/./band"])
def test_consolidated_keys_outside_the_store_are_violations_and_never_followed(tmp_path, key):
    work = tmp_path / "w"
    store = hostile_store(work, h=256, w=256, nb=8, coord_chunk=None)
    # a zarr.json outside the store that the old validator read (and compared) through the bad key
    planted = work / "outside" / "zarr.json"
    _write(planted, {"zarr_format": 3, "node_type": "group", "attributes": {"planted": True}})
    doc = json.loads((store / "zarr.json").read_text())
    doc["consolidated_metadata"]["metadata"][key] = {"zarr_format": 3, "node_type": "group", "attributes": {}}
    _write(store / "zarr.json", doc)
    log = tmp_path / "opened.txt"
    probe = ("import sys\n"
             f"log = open({str(log)!r}, 'w')\n"
             "def hook(event, args):\n"
             "    if event in ('open', 'os.listdir', 'os.scandir') and isinstance(args[0], str):\n"
             "        log.write(str(args[0]) + '\\n'); log.flush()\n"
             "sys.addaudithook(hook)\n"
             "from builder.cli import main\n"
             f"sys.exit(main(['validate', {str(store)!r}]))\n")
    code, out, err, secs, rss = run_bounded(tmp=tmp_path, argv=["-c", probe])
    assert code == 1 and "Traceback" not in err, out + err
    bad = [ln for ln in _violations(out) if repr(key) in ln]
    assert len(bad) == 1 and "not followed" in bad[0], out
    opened = [Path(p) for p in log.read_text().splitlines()]
    outside = [p for p in opened if p.is_absolute() and str(p.resolve()).startswith(str(work))
               and not str(p.resolve()).startswith(str(store))]
    assert not outside, outside
    assert not any("etc" in p.parts and "zarr.json" in p.parts for p in opened)


# ------------------------------------------------------------ unreadable JSON --
@pytest.mark.parametrize("node", ["zarr.json", "utm30/zarr.json", "utm30/easting/zarr.json"])
def test_unreadable_json_is_one_line_naming_the_file(tmp_path, node):
    store = hostile_store(tmp_path / "w", h=256, w=256, nb=8, coord_chunk=None, consolidate=False)
    (store / node).write_text('{"zarr_format": 3, "node_type": ')
    code, out, err, secs, rss = run_bounded("validate", str(store), tmp=tmp_path)
    assert code == 1 and "Traceback" not in err and "internal" not in err, out + err
    named = [ln for ln in _violations(out) if node in ln]
    assert len(named) == 1 and "not valid JSON" in named[0], out


# ------------------------------------------------------------ deep nesting --
@pytest.mark.parametrize("depth", [100_000, 900])
@pytest.mark.parametrize("node", ["zarr.json", "utm30/zarr.json", "utm30/band/zarr.json"])
def test_deeply_nested_metadata_is_a_violation_not_a_recursion_error(tmp_path, node, depth):
    store = hostile_store(tmp_path / "w", h=256, w=256, nb=8, coord_chunk=None)
    path = store / node
    doc = json.loads(path.read_text())
    doc["attributes"]["deep"] = "DEEP"  # 100000 levels of nested lists in an attribute
    path.write_text(json.dumps(doc).replace('"DEEP"', "[" * depth + "]" * depth))
    code, out, err, secs, rss = run_bounded("validate", str(store), tmp=tmp_path)
    assert code == 1 and "Traceback" not in err and "RecursionError" not in out + err, out + err
    named = [ln for ln in _violations(out) if node in ln]
    assert len(named) == 1 and "nested deeper than" in named[0], out


# ------------------------------------------------------------- huge files --
@pytest.mark.parametrize("node,size", [("zarr.json", 300 * 2**20), ("utm30/zarr.json", 300 * 2**20),
                                       ("utm30/zarr.json", 2 * 2**20)])
def test_huge_zarr_json_is_reported_without_reading_it(tmp_path, node, size):
    store = hostile_store(tmp_path / "w", h=256, w=256, nb=8, coord_chunk=None)
    path = store / node
    with open(path, "r+b") as f:  # valid JSON start, then a sparse tail of NUL bytes
        f.truncate(size)
    code, out, err, secs, rss = run_bounded("validate", str(store), tmp=tmp_path)
    assert secs < MAX_SECONDS and rss < MAX_RSS
    assert code == 1 and "Traceback" not in err, out + err
    named = [ln for ln in _violations(out) if node in ln]
    assert len(named) == 1 and f"{size} bytes" in named[0] and "larger than" in named[0], out
