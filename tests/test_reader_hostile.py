"""The Python reader and `python -m builder sample` against hostile stores.

Stores are hand-written metadata (tests/test_validate_hostile.py's writer) that claim 10^9 bands, a chunk
edge of 0, a grid larger than their arrays, or whose root zarr.json is 50,000 levels deep or 300 MB.  The
CLI runs as a real child process whose wall time and peak RSS are bounded (test_validate_hostile's
run_bounded kills it the moment it exceeds either); every refusal is one line, exit 2.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from pyproj import Transformer

from builder.reader import open_store
from test_validate_hostile import MAX_RSS, hostile_store, run_bounded

# Two points of the hostile stores' zone utm30 (grid corner 500000 E, 5700000 N, 256 x 256 px): one on its
# arrays, one on the 2560 x 2560 px grid the "grid larger than its arrays" store claims.
UTM30 = Transformer.from_crs("EPSG:32630", "EPSG:4326", always_xy=True)
POINTS = [UTM30.transform(501_000, 5_699_000), UTM30.transform(510_000, 5_690_000)]


def _edit(store: Path, key: str, fn) -> None:
    """Change node `key`'s document in its own zarr.json and in the root's consolidated metadata alike."""
    path = store / key / "zarr.json"
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))
    root = json.loads((store / "zarr.json").read_text())
    fn(root["consolidated_metadata"]["metadata"][key])
    (store / "zarr.json").write_text(json.dumps(root))


def _bands(root: Path) -> Path:
    return hostile_store(root, h=256, w=256, nb=10**9, coord_chunk=None)


def _chunk_zero(root: Path) -> Path:
    store = hostile_store(root, h=256, w=256, nb=8, coord_chunk=None)
    _edit(store, "utm30/embeddings", lambda d: d["chunk_grid"]["configuration"].update(chunk_shape=[0, 0, 8]))
    return store


def _deep_root(root: Path) -> Path:
    store = hostile_store(root, h=256, w=256, nb=8, coord_chunk=None)
    doc = json.loads((store / "zarr.json").read_text())
    doc["attributes"]["deep"] = "DEEP"
    (store / "zarr.json").write_text(json.dumps(doc).replace('"DEEP"', "[" * 50_000 + "]" * 50_000))
    return store


def _grid_beyond_arrays(root: Path) -> Path:
    store = hostile_store(root, h=256, w=256, nb=8, coord_chunk=None)
    _edit(store, "utm30", lambda d: d["attributes"].update({"spatial:shape": [2560, 2560]}))
    return store


def _huge_root(root: Path) -> Path:
    store = hostile_store(root, h=256, w=256, nb=8, coord_chunk=None)
    with open(store / "zarr.json", "r+b") as f:  # valid JSON start, then a sparse tail of NUL bytes
        f.truncate(300 * 2**20)
    return store


HOSTILE = {"1e9 bands": _bands, "chunk_shape 0": _chunk_zero, "50000-deep root": _deep_root,
           "grid beyond its arrays": _grid_beyond_arrays, "300 MB root": _huge_root}


def points_csv(tmp_path: Path) -> Path:
    p = tmp_path / "points.csv"
    pd.DataFrame({"lon": [x for x, _ in POINTS], "lat": [y for _, y in POINTS]}).to_csv(p, index=False)
    return p


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "internal" not in lines[0], stderr
    return lines[0]


# ------------------------------------------------------------ hostile stores --
@pytest.mark.parametrize("case", list(HOSTILE))
def test_sample_refuses_a_hostile_store_in_one_line_and_bounded_memory(tmp_path, case):
    store = HOSTILE[case](tmp_path / "w")
    out = tmp_path / "out.parquet"
    code, _, err, secs, rss = run_bounded("sample", str(store), str(points_csv(tmp_path)), "-o", str(out), tmp=tmp_path)
    print(f"{case}: {secs:.2f} s, {rss / 2**20:.0f} MB")
    assert code == 2 and one_line(err).startswith(f"error: {store}"), err
    assert rss < MAX_RSS and not out.exists()


@pytest.mark.parametrize("case", list(HOSTILE))
def test_open_store_refuses_a_hostile_store_with_a_clear_value_error(tmp_path, case):
    store = HOSTILE[case](tmp_path / "w")
    with pytest.raises(ValueError) as e:
        open_store(str(store))
    assert str(e.value).startswith(str(store)) and "\n" not in str(e.value), str(e.value)


def test_sample_on_a_directory_of_hostile_stores_names_the_store(tmp_path):
    """The issue's `sample DIR`: the directory's stores are read within the bounds (it read a 300 MB zarr.json,
    766 MB RSS, then met the 50,000-deep one)."""
    stores = tmp_path / "stores"
    stores.mkdir()
    shutil.move(_huge_root(tmp_path / "a"), stores / "2023.zarr")
    shutil.move(_deep_root(tmp_path / "b"), stores / "2024.zarr")
    code, _, err, secs, rss = run_bounded("sample", str(stores), str(points_csv(tmp_path)), "-o",
                                          str(tmp_path / "out.parquet"), "--year", "2024", tmp=tmp_path)
    assert code == 2 and one_line(err).startswith(f"error: {stores / '2023.zarr' / 'zarr.json'}: more than"), err
    assert rss < MAX_RSS
