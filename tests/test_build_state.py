"""The build's typed state: the build record as dataclasses (builder/record.py), the per-shard products registry
(builder/products.py) and the one level scheduler of the overviews and the pyramid (builder/levels.py)."""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import zarr

from builder import levels
from builder import products
from builder.cli import main
from builder.parallel import Runner
from builder.record import BuildRecord, OverviewsRecord, ZoneRecord, load_record
from builder.sink import LocalSink
from conftest import run_cli


# ------------------------------------------------------------------ record --
def test_a_build_record_is_typed_and_reads_back_to_the_same_document(store):
    """The record a build left, read as a BuildRecord: its zones, models and layout are typed objects, and written
    back it is the same JSON document (a record an earlier build left is read as it is)."""
    doc = json.loads((Path(f"{store}.build") / "record.json").read_text())
    rec = load_record(LocalSink(Path(f"{store}.build")))
    assert isinstance(rec, BuildRecord) and isinstance(rec.overviews, OverviewsRecord)
    assert sorted(rec.zones) == sorted(doc["zones"]) and len(rec.zones) >= 2
    for name, z in rec.zones.items():
        assert isinstance(z, ZoneRecord) and not z.creating
        assert z.grid.__dict__ == doc["zones"][name]["grid"]
        assert z.tiles == doc["zones"][name]["tiles"]
    assert rec.n_bands == doc["n_bands"] == 128
    assert rec.to_json() == doc


def test_a_record_that_is_not_a_build_record_is_one_line(tmp_path, tiles_root, store):
    """A record.json whose zone has no grid (hand-edited, or another tool's): one line naming it, exit 2, the store
    left as it was."""
    out = tmp_path / "out"
    shutil.copytree(store, out / "2024.zarr")
    shutil.copytree(f"{store}.build", out / "2024.zarr.build")
    record = out / "2024.zarr.build" / "record.json"
    doc = json.loads(record.read_text())
    del doc["zones"]["utm30"]["grid"]
    record.write_text(json.dumps(doc))
    p = run_cli("build", str(tiles_root), "--year", "2024", "--out", str(out), "--scheduler", "sync", check=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith(f"error: {record}: not a build record (KeyError"), lines[0]


# ---------------------------------------------------------------- products --
@dataclass(frozen=True)
class CountValid(products.ShardProduct):
    """A product of this test: the number of valid pixels of each shard, one file per shard."""
    where: str

    @classmethod
    def for_build(cls, cfg, record, quarters):
        return cls(str(CountValid.target)) if CountValid.target else None

    def write(self, d: products.ShardData) -> None:
        out = Path(self.where) / d.name / f"{d.shard[0]}_{d.shard[1]}"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(str(int(d.ints.shape[0])))


CountValid.target = None


def test_a_registered_product_is_given_every_shard_the_build_writes(tmp_path, tiles_root, monkeypatch):
    """A product registered as the built-in ones are is handed every shard the build computes, with its pixels:
    the shard task names no product.  Its counts equal the valid pixels zarr-python reads from the stored shards."""
    monkeypatch.setattr(products, "PRODUCTS", [*products.PRODUCTS, CountValid.for_build])
    monkeypatch.setattr(CountValid, "target", tmp_path / "counts")
    out = tmp_path / "out"
    assert main(["build", str(tiles_root), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q"]) == 0
    root = zarr.open_group(out / "2024.zarr", mode="r")
    seen = 0
    for name in sorted(n for n in root.group_keys() if n.startswith("utm")):
        scales = root[name]["scales"]
        s0, s1 = scales.shards
        counted = {tuple(map(int, f.name.split("_"))): int(f.read_text()) for f in (tmp_path / "counts" / name).iterdir()}
        for (r, c), n in counted.items():
            assert n == int((~np.isnan(scales[r * s0:(r + 1) * s0, c * s1:(c + 1) * s1])).sum()), (name, r, c)
        stored = {(int(p.parent.name), int(p.name)) for p in (out / "2024.zarr" / name / "scales" / "c").glob("*/*")}
        assert stored and stored <= set(counted), (name, sorted(stored - set(counted)))
        seen += len(counted)
    assert seen >= 2


def test_the_built_in_products_follow_the_build_options(tiles_root, tmp_path):
    """--no-rgb drops the preview, --no-overviews the code and the quarters; a default build takes all three, in
    their registration order."""
    from builder.build import BuildConfig
    from builder.record import BuildRecord
    rec = BuildRecord(rgb={"x": 1}, overviews=OverviewsRecord(8, 8, {"m": 1}))
    q = LocalSink(tmp_path)

    def kinds(**kw):
        cfg = BuildConfig(tiles="", store=tmp_path / "s.zarr", year=2024, **kw)
        return [type(p).__name__ for p in products.for_build(cfg, rec, q)]
    assert kinds() == ["RGBPreview", "Level0Code", "OverviewQuarter"]
    assert kinds(rgb=False) == ["Level0Code", "OverviewQuarter"]
    assert kinds(overviews=False) == ["RGBPreview"]


# ------------------------------------------------------------------ levels --
def _double(batch: tuple, add: int = 0) -> list:
    return [2 * u + add for u in batch]


def _pairs(units: list) -> list[tuple]:
    return [tuple(units[i:i + 2]) for i in range(0, len(units), 2)]


@pytest.mark.parametrize("scheduler", ["sync", "threads", "local"])
def test_the_level_scheduler_runs_levels_in_order_and_chains_the_small_ones(scheduler):
    """Levels with more than `small` units are one map each (batched as asked), in order; from the first with at
    most `small` units the rest run in one task: every level's results come back in unit order, and every level's
    checkpoint is passed, finest first."""
    lv = [levels.Level(0, _double, list(range(9)), {"add": 1}, batches=_pairs),
          levels.Level(1, _double, list(range(5))),
          levels.Level(2, _double, [7, 8], {"add": 3}),
          levels.Level(3, _double, [1])]
    passed = []
    with Runner(scheduler, 2, quiet=True) as runner:
        out = levels.run(runner, "test", "units", lv, checkpoint=passed.append)
    assert out == [[1, 3, 5, 7, 9, 11, 13, 15, 17], [0, 2, 4, 6, 8], [17, 19], [2]]
    assert passed == ["test-level0", "test-level1", "test-level2", "test-level3"]
