"""Kills lose nothing: a build SIGKILLed at any moment, then re-run, equals a clean build, global_rgb included.

Two kinds of kill, both by SIGKILL on the real CLI process:
  * at named phases, through the build's test hook TESSERA_TEST_KILL_AT (deterministic: every window
    between two durable steps that we know of);
  * at seeded random points of its writes: once a random share of the files an uninterrupted build writes
    exist with a modification time from this run (finds windows nobody named).  Progress, not time: a kill
    after a delay drawn from a clean build's duration missed the build when that one had run on a busier machine.
The re-run must then leave every file of the store byte for byte equal to the uninterrupted build's
(shards, zarr.json with attributes and consolidated metadata, global_rgb chunks), and an equal record.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from builder import demo
from conftest import PX, REPO, tree_digest

KILL_ENV = "TESSERA_TEST_KILL_AT"
# BLAS threads oversubscribe a loaded 2-core machine (the RGB PCA takes 3 s instead of 0.2 s).
ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
SEED = 20250
NORTH = (-0.05, 50.95)  # added north of grid_-0.05_50.85 (land): utm30 grows north, its shard files move
FRESH_PHASES = ["zone-created", "shard-written", "zone-recorded", "overviews-level1", "overviews-level4",
                "pyramid-level0", "consolidated"]
ADD_PHASES = ["regrid-staged", "regrid-moved", "regrid-recorded", "zone-recorded", "overviews-level1"]
N_RANDOM = 2
# File times come from the kernel's coarse clock, a tick behind time.time_ns(); copied stores keep older times.
MTIME_SLACK_NS = 20_000_000


def written_since(out: Path, t0_ns: int) -> int:
    """How many files under `out` were written (created or replaced) at or after `t0_ns`, while a build runs
    there: os.walk passes over a directory removed while it walks (Path.rglob raised), and a file renamed
    or removed between the listing and its stat is not counted."""
    n = 0
    for folder, _, files in os.walk(out):
        for name in files:
            try:
                n += os.stat(os.path.join(folder, name)).st_mtime_ns >= t0_ns
            except FileNotFoundError:
                pass
    return n


def build(tiles: Path, out: Path, *, phase: str | None = None, writes: int | None = None) -> tuple[int, str]:
    """Run the build CLI; kill it at `phase` (hook) or once it has written `writes` files.  (returncode, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != KILL_ENV} | ENV
    if phase:
        env[KILL_ENV] = phase
    cmd = [sys.executable, "-m", "builder", "build", str(tiles), "--year", "2024", "--out", str(out),
           "--scheduler", "threads", "-q"]
    t0 = time.time_ns() - MTIME_SLACK_NS
    with tempfile.TemporaryFile("w+") as err:  # a file, not a pipe: nobody reads a pipe while the loop polls
        p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err, text=True)
        try:
            if writes is not None:
                while p.poll() is None and written_since(out, t0) < writes:
                    time.sleep(0.01)
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
            p.wait(timeout=300)
        finally:  # a test that fails here leaves no build running into its directory
            if p.poll() is None:
                p.kill()
                p.wait()
        err.seek(0)
        return p.returncode, err.read()


def completed(tiles: Path, out: Path) -> int:
    """Build without interruption; the number of files the build wrote."""
    t0 = time.time_ns() - MTIME_SLACK_NS
    rc, err = build(tiles, out)
    assert rc == 0, err
    return written_since(out, t0)


def copy_build(src: Path, dst: Path) -> Path:
    for name in ("2024.zarr", "2024.zarr.build"):
        shutil.copytree(src / name, dst / name)
    return dst


def assert_same_build(out: Path, ref: Path) -> None:
    a, b = tree_digest(out / "2024.zarr"), tree_digest(ref / "2024.zarr")
    assert a.keys() == b.keys(), (f"only after the kill: {sorted(a.keys() - b.keys())[:6]}; "
                                  f"only in the clean build: {sorted(b.keys() - a.keys())[:6]}")
    differ = sorted(k for k in a if a[k] != b[k])
    assert not differ, f"{len(differ)} of {len(a)} files differ from the clean build: {differ[:6]}"
    rec = out / "2024.zarr.build"
    assert sorted(p.name for p in rec.rglob("*") if p.is_file()) == ["record.json"]
    assert json.loads((rec / "record.json").read_text()) == json.loads((ref / "2024.zarr.build" / "record.json").read_text())


def kill_then_rerun(tiles: Path, out: Path, *, phase: str | None = None, writes: int | None = None) -> None:
    rc, err = build(tiles, out, phase=phase, writes=writes)
    assert rc == -signal.SIGKILL, f"the build was not killed ({'phase ' + phase if phase else f'after {writes} files'}): " \
                                  f"exit {rc}\n{err[-2000:]}"
    rc, err = build(tiles, out)
    assert rc == 0, f"the re-run after the kill failed ({rc}):\n{err[-2000:]}"


def random_points(writes: int, salt: int) -> list[int]:
    """Seeded kill points: a number of files written, between 2 % and 90 % of an uninterrupted build's."""
    rng = random.Random(SEED + salt)
    return [max(1, round(rng.uniform(0.02, 0.9) * writes)) for _ in range(N_RANDOM)]


# ------------------------------------------------------------ a first build --
@pytest.fixture(scope="module")
def fresh(tmp_path_factory, tiles_root):
    """The four conftest tiles, their uninterrupted build and the number of files it wrote."""
    ref = tmp_path_factory.mktemp("clean")
    writes = completed(tiles_root, ref)
    return tiles_root, ref, writes


@pytest.mark.parametrize("phase", FRESH_PHASES)
def test_kill_at_a_phase_of_a_first_build(fresh, tmp_path, phase):
    tiles, ref, _ = fresh
    kill_then_rerun(tiles, tmp_path, phase=phase)
    assert_same_build(tmp_path, ref)


def test_quarter_files_an_older_builder_left_are_not_read(fresh, tmp_path):
    """A build killed before its overviews leaves each shard's 2x2 means (its quarter file) in the record; the
    older builder wrote them as the int8 vectors of every pixel, then the scales.  Rewritten so, the re-run
    must not read them as this builder's (magic, scales, the vectors with data only) and equals a clean build."""
    from builder import overviews as ovr
    tiles, ref, _ = fresh
    rc, err = build(tiles, tmp_path, phase="zone-recorded")
    assert rc == -signal.SIGKILL, err[-2000:]
    quarters = [p for p in (tmp_path / "2024.zarr.build" / "overview-quarters").rglob("*") if p.is_file()]
    full = [p for p in quarters if p.stat().st_size]
    assert full, "the killed build left quarters with data"
    for p in full:
        emb, scl = ovr.load_quarter(p, 128, 128)
        p.write_bytes(emb.tobytes() + scl.tobytes())  # the older builder's layout
        with pytest.raises(ValueError):
            ovr.load_quarter(p, 128, 128)
    rc, err = build(tiles, tmp_path)
    assert rc == 0, err[-2000:]
    assert_same_build(tmp_path, ref)


def test_temporary_files_a_killed_write_left_are_removed_by_the_next_build(fresh, tmp_path):
    """A kill between a temporary file's write and its rename (builder/atomic.py) leaves `<name>.<pid>.partial`
    beside the target: in the store, and in the build record (record.json, *.done). The next build removes them
    all (the record's were left for ever before: a later pid never overwrites them)."""
    tiles, ref, _ = fresh
    out = copy_build(ref, tmp_path)
    stale = [out / "2024.zarr.build" / "record.json.99999.partial", out / "2024.zarr.build" / "utm30.done.99999.partial",
             out / "2024.zarr" / "utm30" / "embeddings" / "c" / "0" / "0" / "0.99999.partial"]
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"half a file")
    assert completed(tiles, out) > 0
    assert not [p for p in stale if p.exists()]
    assert_same_build(out, ref)


@pytest.mark.parametrize("i", range(N_RANDOM))
def test_kill_at_a_random_moment_of_a_first_build(fresh, tmp_path, i):
    tiles, ref, writes = fresh
    kill_then_rerun(tiles, tmp_path, writes=random_points(writes, 0)[i])
    assert_same_build(tmp_path, ref)


# ------------------------------------------------- a build that adds a tile --
@pytest.fixture(scope="module")
def adding(tmp_path_factory, tiles_root, world):
    """A store of the four tiles, the tile set with a fifth added, and the uninterrupted second build."""
    base = tmp_path_factory.mktemp("base")
    completed(tiles_root, base)
    more = tmp_path_factory.mktemp("more-tiles")
    shutil.copytree(tiles_root, more, dirs_exist_ok=True)
    demo.write_tile(more, 2024, *NORTH, PX, world=world)
    ref = copy_build(base, tmp_path_factory.mktemp("added"))
    writes = completed(more, ref)
    return more, base, ref, writes


def test_the_uninterrupted_build_that_adds_a_tile_equals_a_clean_build(adding, tmp_path):
    """The reference for the kills below, checked: a clean build of all five tiles (with the colour
    and overview code models the first build fitted, which later shards keep) has the same files,
    global_rgb and overviews included."""
    more, base, ref, _ = adding
    record = json.loads((base / "2024.zarr.build" / "record.json").read_text())
    (tmp_path / "2024.zarr.build").mkdir()
    (tmp_path / "2024.zarr.build" / "record.json").write_text(json.dumps(
        {"model_version": "1.0", "rgb": record["rgb"], "overviews": record["overviews"]}))
    completed(more, tmp_path)
    assert_same_build(ref, tmp_path)


@pytest.mark.parametrize("phase", ADD_PHASES)
def test_kill_at_a_phase_of_a_build_that_adds_a_tile(adding, tmp_path, phase):
    more, base, ref, _ = adding
    out = copy_build(base, tmp_path)
    kill_then_rerun(more, out, phase=phase)
    assert_same_build(out, ref)


@pytest.mark.parametrize("first", [True, False], ids=["first-build", "adds-a-tile"])
def test_a_kill_after_the_last_shard_before_the_records_loses_no_shard(fresh, adding, tmp_path, first):
    """Killed once every shard of a zone is journalled but before its arrays' records are written, the re-run has
    no shard left to write; it must still bring the records up to date, or readers skip the shards the killed run
    wrote (the added tile's shards were never shown).  After the re-run every recorded array names exactly its
    shard files, and every pixel of every tile reads back its value through the Python reader and zarr-python."""
    import xarray as xr
    import zarr

    from builder.tiles import EMBEDDINGS_DIR
    from test_build import RECORDED, _recorded, _shard_set, tile_truth, zone_window
    tiles = fresh[0] if first else adding[0]
    out = tmp_path if first else copy_build(adding[1], tmp_path)
    kill_then_rerun(tiles, out, phase="zone-shards-written")
    store = out / "2024.zarr"
    root = zarr.open_group(store, mode="r")
    zones = sorted(k for k in root.group_keys() if k.startswith("utm"))
    for zone in zones:
        for arr in RECORDED:
            assert _recorded(store, f"{zone}/{arr}") == _shard_set(store / zone / arr), (zone, arr)
    names = sorted(p.name for p in (tiles / EMBEDDINGS_DIR / "2024").iterdir())
    assert len(names) == (4 if first else 5)
    for name in names:
        emb, scl, origin, epsg = tile_truth(tiles, 2024, name)
        zone = f"utm{epsg % 100:02d}"
        r, c = zone_window(root[zone], origin, emb.shape)
        valid = ~np.isnan(scl)
        want = np.where(valid[..., None], emb.astype(np.float32) * scl[..., None], np.float32(np.nan))
        ds = xr.open_dataset(store, engine="tessera", group=zone)  # the Python reader (builder/reader)
        window = dict(y=slice(r, r + PX), x=slice(c, c + PX))
        np.testing.assert_array_equal(ds.embeddings.isel(**window).transpose("y", "x", "band").values, want,
                                      err_msg=f"{name} through the Python reader")
        np.testing.assert_array_equal(root[zone]["scales"][r:r + PX, c:c + PX], scl, err_msg=name)
        got = root[zone]["embeddings"][r:r + PX, c:c + PX]
        np.testing.assert_array_equal(got[valid], emb[valid], err_msg=f"{name} through zarr-python")
    assert_same_build(out, fresh[1] if first else adding[2])


def test_kill_at_a_random_moment_of_a_build_that_adds_a_tile(adding, tmp_path):
    more, base, ref, writes = adding
    out = copy_build(base, tmp_path)
    kill_then_rerun(more, out, writes=random_points(writes, 1)[0])
    assert_same_build(out, ref)


def test_global_rgb_attributes_are_written_in_one_piece(tiles_root, tmp_path, monkeypatch):
    """Every version of global_rgb/zarr.json a build writes is a state a kill may leave, and a re-run keeps a
    group whose attributes name its levels (multiscales).  So no version may name them without the rest: the
    attributes were once written a key at a time (zarr's attrs.update), and a kill between two of those
    writes left a store that validation refused after the re-run.  The group is written through zarr-python or
    the build's sink: both are watched."""
    import json as json_

    import zarr

    from builder.cli import main
    from builder.sink import LocalSink
    versions = []
    set_, write = zarr.storage.LocalStore.set, LocalSink.write

    async def recording_set(self, key, value):  # written by zarr-python
        if key == "zarr.json" and str(self.root).endswith("global_rgb"):
            versions.append(json_.loads(value.to_bytes()).get("attributes", {}))
        return await set_(self, key, value)

    def recording_write(self, key, data):  # written through the build's sink (builder/sink.py)
        if key == "zarr.json" and str(self.root).endswith("global_rgb"):
            versions.append(json_.loads(data).get("attributes", {}))
        return write(self, key, data)
    monkeypatch.setattr(zarr.storage.LocalStore, "set", recording_set)
    monkeypatch.setattr(LocalSink, "write", recording_write)
    assert main(["build", str(tiles_root), "--year", "2024", "--out", str(tmp_path), "--scheduler", "sync", "-q"]) == 0
    named = [sorted(v) for v in versions if "multiscales" in v]
    assert named, f"no version of global_rgb/zarr.json named its levels ({len(versions)} written)"
    everything = sorted(["zarr_conventions", "multiscales", "proj:code", "spatial:dimensions", "spatial:bbox"])
    assert all(keys == everything for keys in named), f"versions naming the levels: {named}"
