"""The arrays' records of their chunks (builder/core/chunkruns.py) fit a store-wide budget in the root's consolidated
metadata (STORE_RUNS_MAX), so that a large, fragmented store never writes a root its own readers refuse (the
root's bounds, builder/core/bounds.py).  Over the budget, the records with the most runs are left out; those
arrays read as arrays without a record do (every shard asked for, a missing one fill), with the same values."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from builder.core.bounds import JSON_VALUES_MAX, ROOT_JSON_MAX
from builder.core.chunkruns import ATTR, STORE_RUNS_MAX
from builder.sink import LocalSink
from builder.store import consolidate
from builder.tiles import EMBEDDINGS_DIR
from conftest import PX, run_cli
from test_build import tile_truth, zone_window

SHARD = 16  # small shards: the tiles' water and cloud gaps fragment every array's record into many runs


@pytest.fixture(scope="module")
def fragmented(tmp_path_factory, tiles_root) -> Path:
    out = tmp_path_factory.mktemp("fragmented")
    run_cli("build", str(tiles_root), "--year", "2024", "--out", str(out), "--scheduler", "threads", "-q",
            "--shard", str(SHARD))
    return out / "2024.zarr"


def array_runs(store: Path) -> dict[str, int]:
    """Runs of every array's own record (its zarr.json), by path."""
    out = {}
    for doc in store.rglob("zarr.json"):
        if doc.parent == store:
            continue
        runs = json.loads(doc.read_text()).get("attributes", {}).get(ATTR)
        if runs is not None:
            out[str(doc.parent.relative_to(store))] = len(runs)
    return out


def root_runs(store: Path) -> dict[str, int]:
    meta = json.loads((store / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
    return {p: len(m["attributes"][ATTR]) for p, m in meta.items() if ATTR in m.get("attributes", {})}


def test_the_budget_is_well_inside_the_roots_bounds(fragmented, tmp_path):
    """What a run costs in the root, measured on a real root (its bytes and JSON values with every record and
    with none), times STORE_RUNS_MAX, with 5-digit chunk numbers: under a quarter of each of the root's bounds,
    leaving the rest for the arrays' other metadata."""
    store = tmp_path / "2024.zarr"
    shutil.copytree(fragmented, store)
    doc = (store / "zarr.json").read_bytes()
    runs = sum(root_runs(store).values())
    assert runs > 300, runs
    consolidate(LocalSink(store), runs_max=0)
    bare = (store / "zarr.json").read_bytes()
    assert root_runs(store) == {} and array_runs(store) == {}
    values = (lambda b: b.count(b",") + b.count(b"[") + b.count(b"{"))  # as bounds.parse_json counts them
    per_run_bytes = (len(doc) - len(bare)) / runs + 3 * 4  # up to 4 more digits in each of a run's numbers
    per_run_values = (values(doc) - values(bare)) / runs
    assert STORE_RUNS_MAX * per_run_bytes < ROOT_JSON_MAX / 4, per_run_bytes
    assert STORE_RUNS_MAX * per_run_values < JSON_VALUES_MAX / 4, per_run_values


def test_records_over_the_budget_leave_out_those_with_most_runs(fragmented, tiles_root, tmp_path):
    store = tmp_path / "2024.zarr"
    shutil.copytree(fragmented, store)
    before = array_runs(store)
    total = sum(before.values())
    assert len(before) > 40 and max(before.values()) > 5, before
    budget = total // 3
    consolidate(LocalSink(store), runs_max=budget)
    kept = root_runs(store)
    assert 0 < sum(kept.values()) <= budget, (sum(kept.values()), budget)
    assert array_runs(store) == kept  # each array's zarr.json says what the root says
    dropped = set(before) - set(kept)
    assert dropped and max(kept.values()) <= min(before[p] for p in dropped), (kept, dropped)
    assert {p: before[p] for p in kept} == kept
    # the store opens with the Python reader and zarr-python, and every tile reads back its values
    root = zarr.open_group(store, mode="r")
    for name in sorted(p.name for p in (tiles_root / EMBEDDINGS_DIR / "2024").iterdir()):
        emb, scl, origin, epsg = tile_truth(tiles_root, 2024, name)
        zone = f"utm{epsg % 100:02d}"
        r, c = zone_window(root[zone], origin, emb.shape)
        valid = ~np.isnan(scl)
        ds = xr.open_dataset(store, engine="tessera", group=zone)  # the Python reader (builder/reader)
        got = ds.embeddings.isel(y=slice(r, r + PX), x=slice(c, c + PX)).transpose("y", "x", "band").values
        want = np.where(valid[..., None], emb.astype(np.float32) * scl[..., None], np.float32(np.nan))
        np.testing.assert_array_equal(got, want, err_msg=f"{name} through the Python reader")
        np.testing.assert_array_equal(root[zone]["scales"][r:r + PX, c:c + PX], scl, err_msg=name)
        np.testing.assert_array_equal(root[zone]["embeddings"][r:r + PX, c:c + PX][valid], emb[valid], err_msg=name)
    p = run_cli("validate", str(store), "--deep", check=False)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
