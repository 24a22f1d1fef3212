"""A real build of real tile files: exact round trip, sparsity, zones, incremental and resumable builds."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tifffile
import xarray as xr
import zarr

from builder import demo
from builder.geotiff import write_geotiff
from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR
from conftest import PLACES, PX, REPO, run_cli, tree_digest


def tile_truth(root: Path, year: int, name: str):
    """What the store must hold for one tile, computed from the files alone."""
    d = root / EMBEDDINGS_DIR / str(year) / name
    emb = np.load(d / f"{name}.npy")
    scl = np.load(d / f"{name}_scales.npy").astype(np.float32)
    with tifffile.TiffFile(root / LANDMASKS_DIR / f"{name}.tiff") as t:
        land = t.pages[0].asarray() != 0
        tie = t.pages[0].tags[33922].value
        epsg = [v for i, v in enumerate(t.pages[0].tags[34735].value) if i >= 4 and i % 4 == 3][2]
    scl = np.where(land, scl, np.nan).astype(np.float32)
    return emb, scl, (tie[3], tie[4]), int(epsg)


def zone_window(zone: zarr.Group, origin, shape):
    t = zone.attrs["spatial:transform"]
    r = round((t[5] - origin[1]) / 10)
    c = round((origin[0] - t[2]) / 10)
    return r, c


@pytest.mark.parametrize("lon,lat", PLACES)
def test_round_trip_is_exact_for_every_tile(store, tiles_root, lon, lat):
    name = f"grid_{lon:.2f}_{lat:.2f}"
    emb, scl, origin, epsg = tile_truth(tiles_root, 2024, name)
    root = zarr.open_group(store, mode="r")
    zone = root[f"utm{epsg % 100:02d}"]
    assert zone.attrs["proj:code"] == f"EPSG:{epsg}"
    r, c = zone_window(zone, origin, emb.shape)
    got_e = zone["embeddings"][r:r + PX, c:c + PX]
    got_s = zone["scales"][r:r + PX, c:c + PX]
    np.testing.assert_array_equal(got_s, scl)  # NaN where water or no coverage
    valid = ~np.isnan(scl)
    np.testing.assert_array_equal(got_e[valid], emb[valid])
    assert (got_e[~valid] == 0).all()
    # dequantisation through the store equals dequantisation of the source
    want = emb[valid].astype(np.float32) * scl[valid][:, None]
    np.testing.assert_array_equal(got_e[valid].astype(np.float32) * got_s[valid][:, None], want)
    assert (~valid).any()  # every tile has water or its cloud gap


def test_sparse_shards_only_where_data(store):
    root = zarr.open_group(store, mode="r")
    for name in ("utm30", "utm31", "utm34"):
        scales = root[name]["scales"]
        h, w = scales.shape
        for sr in range(h // 256):
            for sc in range(w // 256):
                f = store / name / "scales" / "c" / str(sr) / str(sc)
                has = not np.isnan(scales[sr * 256:(sr + 1) * 256, sc * 256:(sc + 1) * 256]).all()
                assert f.exists() == has, (name, sr, sc)
                assert (store / name / "embeddings" / "c" / str(sr) / str(sc) / "0").exists() == has
    # the grid between the two utm30 tiles (11 km apart) is empty: shards without files
    files = list((store / "utm30" / "scales" / "c").rglob("*"))
    assert len([f for f in files if f.is_file()]) < (root["utm30"]["scales"].shape[0] // 256) * (root["utm30"]["scales"].shape[1] // 256)
    # each sharded zone array records the shards that have a file (builder/core/chunkruns.py), so that readers ask
    # for no other; utm30's record leaves out the empty shards between its tiles
    # (and so do the overview arrays of each level: the tools read them a shard at a time too)
    for name in ("utm30", "utm31", "utm34"):
        for arr in RECORDED:
            assert _recorded(store, f"{name}/{arr}") == _shard_set(store / name / arr), (name, arr)
    assert len(_recorded(store, "utm30/scales")) == len([f for f in files if f.is_file()])


RECORDED = ("embeddings", "scales", "rgb", "overviews/0/code", "overviews/0/code_scales", "overviews/1/embeddings",
            "overviews/3/code", "overviews/8/scales")


def _shard_set(array) -> set[tuple[int, int]]:
    return {(int(f.relative_to(array).parts[1]), int(f.relative_to(array).parts[2]))
            for f in (array / "c").rglob("*") if f.is_file()}


def _recorded(store, path: str) -> set[tuple[int, int]]:
    """The shards an array's zarr.json records, as the consolidated root also lists them."""
    runs = json.loads((store / path / "zarr.json").read_text())["attributes"]["chunks_present"]
    root = json.loads((store / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
    assert root[path]["attributes"]["chunks_present"] == runs
    return {(i, j) for i, a, b in runs for j in range(a, b)}


def test_zones_hemispheres_and_metadata(store):
    root = zarr.open_group(store, mode="r")
    assert root.attrs["tessera:year"] == 2024 and root.attrs["tessera:dataset_version"] == "v1"
    assert sorted(root.group_keys()) == ["global_rgb", "utm30", "utm31", "utm34"]
    z34 = root["utm34"]
    assert z34.attrs["proj:code"] == "EPSG:32734"
    n0, n1 = z34.attrs["spatial:bbox"][1], z34.attrs["spatial:bbox"][3]
    assert 6_000_000 < n0 < n1 < 6_300_000  # Cape Town with the 10,000,000 m false northing
    assert root["utm30"].attrs["tessera:n_tiles"] == 2 and root["utm31"].attrs["tessera:n_tiles"] == 1
    for name in ("utm30", "utm31", "utm34"):
        z = root[name]
        a = z.attrs
        assert a["tessera:n_bands"] == 128 == z["embeddings"].shape[2] == z["band"].shape[0]
        assert a["tessera:model_version"] == "1.0" and a["tessera:has_rgb_preview"] is True
        e = z["embeddings"]
        assert e.shards == (256, 256, 128) and e.chunks == (4, 4, 128)
        assert e.metadata.dimension_names == ("northing", "easting", "band")
        assert np.isnan(z["scales"].fill_value) and e.fill_value == 0
        north = z["northing"][:]
        assert (np.diff(north) == -10).all() and north[0] == a["spatial:transform"][5] - 5
        assert a["spatial:transform"][2] % 2560 == 0 and a["spatial:transform"][5] % 2560 == 0


def test_xarray_and_zarr_read_identical_values(store):
    root = zarr.open_group(store, mode="r")
    # The convention names rgb's last dimension "band" too (size 4 against 128),
    # so xarray needs rgb dropped to build one Dataset; see docs/stores.md.
    ds = xr.open_zarr(store, group="utm30", consolidated=False, drop_variables=["rgb"])
    assert ds["embeddings"].dims == ("northing", "easting", "band")
    sel = ds["scales"].isel(northing=slice(100, 200), easting=slice(0, 300)).values
    np.testing.assert_array_equal(sel, root["utm30"]["scales"][100:200, 0:300])
    np.testing.assert_array_equal(ds["easting"].values, root["utm30"]["easting"][:])
    e = ds["embeddings"].isel(northing=150, easting=40).values
    np.testing.assert_array_equal(e, root["utm30"]["embeddings"][150, 40])


def test_rgb_preview_alpha_marks_valid_pixels(store):
    z = zarr.open_group(store, mode="r")["utm30"]
    rgb = z["rgb"][:]
    valid = ~np.isnan(z["scales"][:])
    assert ((rgb[..., 3] == 255) == valid).all()
    assert (rgb[~valid] == 0).all()
    # the preview has structure: several distinct colours, not one
    assert len(np.unique(rgb[valid][:, :3] // 32, axis=0)) > 5


def test_straddling_tile_lands_in_the_zone_of_its_own_crs(tmp_path, world):
    # A tile centred on the 0 degree meridian, in zone 30's CRS, crossing into zone 31.
    demo.write_tile(tmp_path, 2024, 0.0, 52.2, PX, world=world, epsg=32630, name="grid_0.00_52.20")
    demo.write_tile(tmp_path, 2024, 0.05, 52.25, PX, world=world)  # an ordinary zone-31 tile
    out = tmp_path / "out"
    run_cli("build", str(tmp_path), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q", "--no-global")
    root = zarr.open_group(out / "2024.zarr", mode="r")
    assert root["utm30"].attrs["tessera:n_tiles"] == 1 and root["utm31"].attrs["tessera:n_tiles"] == 1
    bbox = root["utm30"].attrs["spatial:bbox"]
    from pyproj import Transformer
    edge_e, _ = Transformer.from_crs(4326, 32630, always_xy=True).transform(0.0, 52.2)
    assert bbox[2] > edge_e + 200  # the zone-30 grid extends east of the zone's 0 degree edge


def _copy_tiles(src: Path, dst: Path, names: list[str], year=2024):
    import shutil
    for n in names:
        shutil.copytree(src / EMBEDDINGS_DIR / str(year) / n, dst / EMBEDDINGS_DIR / str(year) / n)
        (dst / LANDMASKS_DIR).mkdir(parents=True, exist_ok=True)
        shutil.copy(src / LANDMASKS_DIR / f"{n}.tiff", dst / LANDMASKS_DIR / f"{n}.tiff")


def test_incremental_build_adds_tiles_without_rewriting_untouched_shards(tmp_path, tiles_root, store):
    tiles = tmp_path / "tiles"
    _copy_tiles(tiles_root, tiles, ["grid_-0.05_50.75", "grid_18.45_-33.95"])
    out = tmp_path / "out"
    args = ["build", str(tiles), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q"]
    run_cli(*args)
    s = out / "2024.zarr"
    before = {p: p.stat().st_ino for p in (s / "utm34").rglob("*") if p.is_file() and "/c/" in str(p)}
    # add a tile to the north of utm30 (grid grows north: shards move) and a new zone (utm31)
    _copy_tiles(tiles_root, tiles, ["grid_-0.05_50.85", "grid_0.05_50.85"])
    p = run_cli(*args)
    assert "2 new/changed of 4 tiles" in p.stdout
    after = {p: p.stat().st_ino for p in (s / "utm34").rglob("*") if p.is_file() and "/c/" in str(p)}
    assert before == after  # utm34 shard files were not rewritten (same inodes)
    # the result is identical, value for value, to a from-scratch build of the same four tiles
    a, b = zarr.open_group(s, mode="r"), zarr.open_group(store, mode="r")
    for name in ("utm30", "utm31", "utm34"):
        assert dict(a[name].attrs) == dict(b[name].attrs) | {"tessera:build_version": a[name].attrs["tessera:build_version"]}
        for arr in ("embeddings", "scales"):
            np.testing.assert_array_equal(a[name][arr][:], b[name][arr][:])
        # colours come from the PCA fitted at the first build (kept for later shards), so
        # only the alpha channel must agree with a build that saw all tiles at once
        np.testing.assert_array_equal(a[name]["rgb"][..., 3], b[name]["rgb"][..., 3])
    assert run_cli("validate", str(s)).returncode == 0
    # each global_rgb level's record of its chunks is the from-scratch build's, and its files' (validate --deep)
    for k in range(len(list((store / "global_rgb").glob("[0-9]*")))):
        rec = lambda root: zarr.open_array(root / "global_rgb" / str(k) / "rgb", mode="r").attrs["chunks_present"]
        assert rec(s) == rec(store), k
    # each zone array's record of its shards is its files' (utm30's moved north with the grid: shard rows shifted)
    for name in ("utm30", "utm31", "utm34"):
        for arr in RECORDED:
            assert _recorded(s, f"{name}/{arr}") == _shard_set(s / name / arr) == _recorded(store, f"{name}/{arr}"), \
                (name, arr)
    assert run_cli("validate", "--deep", str(s)).returncode == 0
    # a third run with nothing new writes nothing
    p = run_cli(*args)
    assert "0 shards written" in p.stdout and "0 new/changed" in p.stdout


def wait_until(condition, seconds: float, what: str, proc: subprocess.Popen | None = None) -> None:
    """Poll `condition` until true; raise when `seconds` pass (or `proc` exits) first."""
    deadline = time.monotonic() + seconds
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) before: {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds}s: {what}")
        time.sleep(0.02)


def test_interrupted_build_leaves_no_partial_shard_and_resumes(tmp_path, world):
    tiles = tmp_path / "tiles"
    for lon in (-0.05, -0.15, -0.25):
        demo.write_tile(tiles, 2024, lon, 50.95, 384, world=world)
    out = tmp_path / "out"
    args = [sys.executable, "-m", "builder", "build", str(tiles), "--year", "2024", "--out", str(out),
            "--scheduler", "sync", "--no-global"]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = out / "2024.zarr.build" / "utm30.done"  # one entry per shard done: <plan>/<row>_<col>

    def journalled() -> set[str]:
        entries = [p for p in journal.rglob("*") if p.is_file()] if journal.exists() else []
        return {p.name.replace("_", ",") for p in entries if re.fullmatch(r"\d+_\d+", p.name)}

    try:
        wait_until(lambda: len(journalled()) >= 2, 120, "two shards journalled as done", proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done = journalled()
    shard_dir = out / "2024.zarr" / "utm30" / "embeddings" / "c"
    written = [p for p in shard_dir.rglob("*") if p.is_file() and ".partial" not in p.name]
    # every journalled shard is on disk, and every shard file visible under its key is complete:
    # zarr reads it and its checksum holds
    assert {f"{p.parts[-3]},{p.parts[-2]}" for p in written} >= done
    z = zarr.open_group(out / "2024.zarr" / "utm30", mode="r")
    for p in written:
        sr, sc = int(p.parts[-3]), int(p.parts[-2])
        z["embeddings"][sr * 256:(sr + 1) * 256, sc * 256:(sc + 1) * 256]
    p = run_cli("build", str(tiles), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q", "--no-global")
    written, empty, skipped = map(int, re.search(r"(\d+) shards written, (\d+) empty \(no file\), (\d+) already done",
                                                 p.stdout).groups())
    assert skipped == len(done) >= 2  # the journalled shards were not recomputed
    assert written + empty > 0  # and the kill did land mid-way: the re-run did the rest
    assert not list((out / "2024.zarr").rglob("*.partial"))
    assert run_cli("validate", str(out / "2024.zarr")).returncode == 0
    fresh = tmp_path / "fresh"
    run_cli("build", str(tiles), "--year", "2024", "--out", str(fresh), "--scheduler", "sync", "-q", "--no-global")
    assert tree_digest(out / "2024.zarr") == tree_digest(fresh / "2024.zarr")  # every file, byte for byte


def _keep_size_and_mtime(path: Path, rewrite) -> None:
    """Rewrite `path` in place, then prove its size and mtime are what they were and its bytes are not."""
    st, before = path.stat(), path.read_bytes()
    rewrite(path)
    assert path.stat().st_size == st.st_size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.read_bytes() != before


def _negate_embeddings(d: Path, name: str) -> None:
    _keep_size_and_mtime(d / f"{name}.npy", lambda p: np.save(p, -np.load(p)))


def _double_scales(d: Path, name: str) -> None:
    _keep_size_and_mtime(d / f"{name}_scales.npy", lambda p: np.save(p, np.load(p) * 2))


def _flood_landmask(lm: Path, name: str) -> None:
    with tifffile.TiffFile(lm) as t:
        land, tie = t.pages[0].asarray(), t.pages[0].tags[33922].value
    rows, cols = np.nonzero(land)
    r, c = rows[len(rows) // 2], cols[len(cols) // 2]
    flooded = land.copy()
    flooded[max(0, r - 20):r + 20, max(0, c - 20):c + 20] = 0  # forty land rows become water
    assert (flooded != land).sum() > 100
    _keep_size_and_mtime(lm, lambda p: write_geotiff(str(p), flooded, 32630, tie[3], tie[4], compression=None))


def _move_landmask(lm: Path, name: str) -> None:
    """Move the tile two shards (5120 m) east: the store must lose its pixels where it no longer is."""
    with tifffile.TiffFile(lm) as t:
        land, tie = t.pages[0].asarray(), t.pages[0].tags[33922].value
    _keep_size_and_mtime(lm, lambda p: write_geotiff(str(p), land, 32630, tie[3] + 5120, tie[4], compression=None))


def _shard_files(array_dir: Path, dr: int = 0, dc: int = 0) -> dict[tuple[str, ...], bytes]:
    base = array_dir / "c"
    return {(str(int(p.relative_to(base).parts[0]) + dr), str(int(p.relative_to(base).parts[1]) + dc),
             *p.relative_to(base).parts[2:]): p.read_bytes() for p in base.rglob("*") if p.is_file()}


def assert_same_zone_shards(got: Path, want: Path) -> None:
    """`got` holds exactly `want`'s shard files, byte for byte, where its grid puts them (grids may differ
    by whole shards: an incremental grid only grows), and no other shard file."""
    ta, tb = (json.loads((z / "zarr.json").read_text())["attributes"]["spatial:transform"] for z in (got, want))
    dr, dc = round((ta[5] - tb[5]) / 2560), round((tb[2] - ta[2]) / 2560)
    for arr in ("embeddings", "scales", "rgb"):
        a, b = _shard_files(got / arr), _shard_files(want / arr, dr, dc)
        assert a.keys() == b.keys(), (arr, sorted(a.keys() ^ b.keys()))
        assert sorted(k for k in a if a[k] != b[k]) == [], arr


@pytest.mark.parametrize("change", ["embeddings", "scales", "landmask", "origin"])
def test_a_tile_changed_in_place_with_its_size_and_mtime_is_rebuilt(tmp_path, tiles_root, change):
    name = "grid_-0.05_50.85"
    tiles = tmp_path / "tiles"
    _copy_tiles(tiles_root, tiles, [name, "grid_0.05_50.85"])
    lm = tiles / LANDMASKS_DIR / f"{name}.tiff"
    with tifffile.TiffFile(lm) as t:  # uncompressed, so that a changed mask keeps the file's size
        land, tie = t.pages[0].asarray(), t.pages[0].tags[33922].value
    write_geotiff(str(lm), land, 32630, tie[3], tie[4], compression=None)
    out = tmp_path / "out"
    args = ["build", str(tiles), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q"]
    run_cli(*args)
    first = tree_digest(out / "2024.zarr")
    d = tiles / EMBEDDINGS_DIR / "2024" / name
    {"embeddings": lambda: _negate_embeddings(d, name), "scales": lambda: _double_scales(d, name),
     "landmask": lambda: _flood_landmask(lm, name), "origin": lambda: _move_landmask(lm, name)}[change]()
    p = run_cli(*args)
    assert "1 new/changed of 2 tiles" in p.stdout, p.stdout
    # a clean build of the changed tiles, with the colour and code models the first build fitted (kept)
    clean = tmp_path / "clean"
    record = json.loads((out / "2024.zarr.build" / "record.json").read_text())
    (clean / "2024.zarr.build").mkdir(parents=True)
    (clean / "2024.zarr.build" / "record.json").write_text(json.dumps(
        {"model_version": "1.0", "rgb": record["rgb"], "overviews": record["overviews"]}))
    run_cli("build", str(tiles), "--year", "2024", "--out", str(clean), "--scheduler", "sync", "-q")
    got, want = tree_digest(out / "2024.zarr"), tree_digest(clean / "2024.zarr")
    assert sorted(k for k in got if got[k] != first.get(k))  # the change did reach the store
    assert_same_zone_shards(out / "2024.zarr" / "utm30", clean / "2024.zarr" / "utm30")
    if change == "origin":  # the grid grew east to hold the moved tile: compare all but utm30 file for file
        got = {k: v for k, v in got.items() if not k.startswith("utm30/") and k != "zarr.json"}
        want = {k: v for k, v in want.items() if not k.startswith("utm30/") and k != "zarr.json"}
    assert got.keys() == want.keys()
    assert sorted(k for k in got if got[k] != want[k]) == []  # every file, global_rgb included


def test_local_worker_processes_build_the_same_store(tmp_path, tiles_root, store):
    out = tmp_path / "local"
    run_cli("build", str(tiles_root), "--year", "2024", "--out", str(out), "--scheduler", "local", "--workers", "2", "-q")
    assert tree_digest(out / "2024.zarr") == tree_digest(store)  # every file, overviews and global_rgb included


def test_a_build_prints_no_library_warning(tmp_path, tiles_root):
    """zarr-python warns (ZarrUserWarning) that consolidated metadata is not in the Zarr v3 spec; the user of the
    CLI gets no library warning, from this process or from its worker processes (the default scheduler)."""
    p = run_cli("build", str(tiles_root), "--year", "2024", "--out", str(tmp_path / "out"), "--workers", "2", "-q")
    assert "warning" not in p.stderr.lower(), p.stderr
    assert p.stderr == "", p.stderr  # -q: nothing at all on stderr


def test_a_worker_process_that_dies_fails_the_build_in_one_line_and_a_rerun_resumes(tmp_path, tiles_root, store):
    """A worker SIGKILLed in a shard task (out of memory, say): one line naming it, exit 2, no traceback; the
    same command then finishes the store, equal to an uninterrupted build file for file."""
    out = tmp_path / "local"
    args = ("build", str(tiles_root), "--year", "2024", "--out", str(out), "--scheduler", "local", "--workers", "2", "-q")
    p = run_cli(*args, check=False, env={"TESSERA_TEST_KILL_AT": "shard-written"})
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "a worker process died during 'utm" in p.stderr and "run the same build again" in p.stderr, p.stderr
    run_cli(*args)
    assert tree_digest(out / "2024.zarr") == tree_digest(store)


def _run_watching_processes(cmd: list[str], env: dict) -> tuple[int, str, dict]:
    """Run the build CLI in a session of its own, with Ctrl-C's default action whatever this run inherited; (its exit
    code, its stderr, the processes seen below it while it ran, by pid)."""
    import psutil
    import tempfile
    # A run started in the background of a shell inherits SIGINT ignored, and a Python started so never turns
    # Ctrl-C into KeyboardInterrupt (rightly: a background build is not the terminal's to stop): the same process
    # (execv keeps its pid) sets SIGINT's default first, as a build started from a terminal has it.
    default_int = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                   "os.execv(sys.argv[1], sys.argv[1:])"]
    with tempfile.TemporaryFile("w+") as err:  # a file, not a pipe: nobody reads a pipe while the loop samples
        proc = subprocess.Popen(default_int + cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
        main = psutil.Process(proc.pid)
        seen: dict = {}
        try:
            while proc.poll() is None:  # the processes below the build, sampled while it runs
                try:
                    for c in main.children(recursive=True):
                        seen.setdefault(c.pid, c)
                except psutil.NoSuchProcess:
                    break
                time.sleep(0.01)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=60)
        err.seek(0)
        return proc.returncode, err.read(), seen


def _outlived(seen: dict) -> list:
    """The processes of `seen` still running 30 s on (a zombie, which holds nothing, counts as gone); killed."""
    import psutil
    _, alive = psutil.wait_procs(list(seen.values()), timeout=30)
    alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    for p in alive:
        p.kill()
    return alive


def test_a_killed_build_leaves_no_worker_process_behind(tmp_path, tiles_root):
    """SIGKILL the build's process (here at its own test hook, after the shards): its forkserver and worker
    processes, seen while it ran, all exit (a worker watches the build's process; it would otherwise wait on its
    task queue for ever, and the forkserver with it)."""
    env = dict(os.environ, TESSERA_TEST_KILL_AT="zone-recorded")
    cmd = [sys.executable, "-m", "builder", "build", str(tiles_root), "--year", "2024", "--out", str(tmp_path / "k"),
           "--scheduler", "local", "--workers", "2", "-q"]
    rc, _, seen = _run_watching_processes(cmd, env)
    assert rc == -signal.SIGKILL
    assert len(seen) >= 3, f"expected a forkserver and 2 workers below the build, saw {len(seen)}"
    alive = _outlived(seen)
    assert not alive, f"{len(alive)} of {len(seen)} processes outlived the killed build"


def test_ctrl_c_stops_a_build_in_one_line_and_the_same_command_finishes_it(tmp_path, tiles_root, store):
    """Ctrl-C (SIGINT to the build's process group, here at its test hook once the shards are written): the one
    line "interrupted; ..." and exit 130, no traceback from the idle workers (they ignore it; the build shuts
    them down), no process left; the same command then finishes the store, equal to an uninterrupted build."""
    out = tmp_path / "c"
    cmd = [sys.executable, "-m", "builder", "build", str(tiles_root), "--year", "2024", "--out", str(out),
           "--scheduler", "local", "--workers", "2", "-q"]
    env = dict(os.environ, TESSERA_TEST_KILL_AT="zone-recorded", TESSERA_TEST_INTERRUPT="1")
    rc, err, seen = _run_watching_processes(cmd, env)
    assert rc == 130 and err.strip() == "interrupted; re-run the same command to resume", (rc, err)
    assert len(seen) >= 3, f"expected a forkserver and 2 workers below the build, saw {len(seen)}"
    alive = _outlived(seen)
    assert not alive, f"{len(alive)} of {len(seen)} processes outlived the interrupted build"
    run_cli(*cmd[3:])
    assert tree_digest(out / "2024.zarr") == tree_digest(store)


def test_build_on_an_existing_dask_cluster(tmp_path, tiles_root, store):
    """--scheduler tcp://...: a separately started dask scheduler and worker do the work."""
    from browser_util import free_port
    port = free_port()
    sched = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                              "--port", str(port), "--no-dashboard"], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", f"tcp://127.0.0.1:{port}",
                               "--nthreads", "1", "--no-dashboard"], cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        out = tmp_path / "cluster"
        run_cli("build", str(tiles_root), "--year", "2024", "--out", str(out), "--scheduler",
                f"tcp://127.0.0.1:{port}", "-q", "--no-global")
        assert tree_digest(out / "2024.zarr" / "utm30" / "embeddings") == tree_digest(store / "utm30" / "embeddings")
    finally:
        for p in (worker, sched):
            p.terminate()
            p.wait(timeout=30)
