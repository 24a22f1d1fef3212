"""The Python reader and `python -m builder sample` against hostile stores, catalogs and outputs.

Stores are hand-written metadata (tests/test_validate_hostile.py's writer) that claim 10^9 bands, a chunk
edge of 0, a grid larger than their arrays, or whose root zarr.json is 50,000 levels deep or 300 MB.  The
CLI runs as a real child process whose wall time and peak RSS are bounded (test_validate_hostile's
run_bounded kills it the moment it exceeds either); every refusal is one line, exit 2.  Catalogs are
served over HTTP by the real dev server on 127.0.0.1.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from pyproj import Transformer

from browser_util import free_port
from builder.reader import open_store
from conftest import PLACES, run_cli, tree_digest
from test_serve import running_server, serve_cmd
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


# ------------------------------------------------------------------ outputs --
@pytest.mark.parametrize("out", ["out.xlsx", "table.parquet", "missing/out.parquet", "."])
def test_sample_refuses_an_output_it_cannot_write_in_one_line(store, tmp_path, out):
    (tmp_path / "table.parquet").mkdir()  # a directory with a table's name
    (tmp_path / "table.parquet" / "part-0.parquet").write_bytes(b"PAR1 someone's table")
    target, pts = tmp_path / out, points_csv(tmp_path)
    before = tree_digest(tmp_path)
    p = run_cli("sample", str(store), str(pts), "-o", str(target), check=False)
    assert p.returncode == 2 and one_line(p.stderr).startswith(f"error: {target}"), p.stderr
    assert tree_digest(tmp_path) == before and not (tmp_path / "missing").exists()


# ----------------------------------------------------------------- catalogs --
@pytest.fixture(scope="module")
def origins(tmp_path_factory, store):
    """Two dev servers on 127.0.0.1: `site` serves the catalogs under test, `other` a copy of the session's store."""
    site, other = tmp_path_factory.mktemp("cat-site"), tmp_path_factory.mktemp("cat-other")
    for root in (site, other):
        (root / "index.html").write_text("stores for tests/test_reader_hostile.py")
    shutil.copytree(store, other / "2024.zarr")
    p1, p2 = free_port(), free_port()
    with running_server(serve_cmd(site, p1), f"http://127.0.0.1:{p1}/index.html"), \
            running_server(serve_cmd(other, p2), f"http://127.0.0.1:{p2}/index.html"):
        yield site, f"http://127.0.0.1:{p1}/", f"http://127.0.0.1:{p2}/"


@pytest.mark.parametrize("entry", ["local path", "file URL", "another origin"])
def test_a_remote_catalog_points_only_at_its_own_origin_unless_allowed(origins, store, tmp_path, entry):
    site, base, other = origins
    listed, allow = {"local path": (str(store), str(store.parent)),
                     "file URL": (f"file://{store}", f"file://{store.parent}/"),
                     "another origin": (f"{other}2024.zarr", other)}[entry]
    name = entry.replace(" ", "-")
    (site / name).mkdir(exist_ok=True)
    (site / name / "catalog.json").write_text(json.dumps({"stores": [{"year": 2024, "url": listed}]}))
    cat = f"{base}{name}/catalog.json"
    pts = [PLACES[0], PLACES[1]]
    pd.DataFrame({"lon": [x for x, _ in pts], "lat": [y for _, y in pts]}).to_csv(tmp_path / "p.csv", index=False)
    out = tmp_path / "out.parquet"
    p = run_cli("sample", cat, str(tmp_path / "p.csv"), "-o", str(out), check=False)
    assert p.returncode == 2 and not out.exists(), p.stdout + p.stderr
    line = one_line(p.stderr)
    assert line.startswith(f"error: {cat}: store 2024 -> {listed} is outside {base}") and "--allow" in line, line
    with pytest.raises(ValueError, match="is outside"):
        open_store(cat)
    # the caller's consent: the store is read, the same values as opening it directly
    run_cli("sample", cat, str(tmp_path / "p.csv"), "-o", str(out), "--allow", allow)
    want = open_store(str(store)).sample_points(pts, 2024)
    pd.testing.assert_frame_equal(pd.read_parquet(out), want)
    assert (want["status"] == "valid").any()
    pd.testing.assert_frame_equal(open_store(cat, allow=[allow]).sample_points(pts, 2024), want)
    with pytest.raises(ValueError, match="is outside"):  # the xarray engine: the same rule, the same consent
        xr.open_dataset(cat, engine="tessera", group="utm30")
    np.testing.assert_array_equal(xr.open_dataset(cat, engine="tessera", group="utm30", allow=[allow]).scales.values,
                                  xr.open_dataset(str(store), engine="tessera", group="utm30").scales.values)


def test_a_catalog_entry_is_data_in_the_error_line(origins, tmp_path):
    """A listed URL with a newline and 10 KB of text: still one line, cut short, the newline escaped."""
    site, base, _ = origins
    (site / "odd").mkdir(exist_ok=True)
    (site / "odd" / "catalog.json").write_text(json.dumps({"stores": [{"year": 2024, "url": "/x\nerror: " + "y" * 10_000}]}))
    pd.DataFrame({"lon": [0.0], "lat": [50.0]}).to_csv(tmp_path / "p.csv", index=False)
    p = run_cli("sample", f"{base}odd/catalog.json", str(tmp_path / "p.csv"), "-o", str(tmp_path / "o.csv"), check=False)
    line = one_line(p.stderr)
    assert p.returncode == 2 and "\\n" in line and len(line) < 2000, line
