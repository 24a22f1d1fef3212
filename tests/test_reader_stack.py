"""The Python reader opens our multi-year index (years.json, tessera-stack:) as a kind of its own, and reads the
values of each year store it references."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import zarr
from pyproj import Transformer

from builder.reader import open_store
from builder.reader.stack import StackStore
from browser_util import static_server
from conftest import run_cli


def pixels_of(store_path, zone: str, n: int, seed: int):
    """`n` pixels of a year store's zone, drawn with their values by zarr-python: (lon, lat, vectors, scales)."""
    g = zarr.open_group(str(store_path / zone), mode="r")
    t, scl = g.attrs["spatial:transform"], g["scales"][:]
    valid = np.argwhere(~np.isnan(scl))
    nodata = np.argwhere(np.isnan(scl))
    rng = np.random.default_rng(seed)
    picked = np.concatenate([valid[rng.choice(len(valid), n)], nodata[rng.choice(len(nodata), 2)]])
    rows, cols = picked[:, 0], picked[:, 1]
    to_ll = Transformer.from_crs(g.attrs["proj:code"], "EPSG:4326", always_xy=True)
    lon, lat = to_ll.transform(t[2] + (cols + 0.5) * t[0], t[5] + (rows + 0.5) * t[4])
    q = g["embeddings"].vindex[rows[:, None], cols[:, None], np.arange(g["embeddings"].shape[2])[None]]
    return lon, lat, q.astype(np.float32) * scl[rows, cols][:, None], scl[rows, cols]


def test_the_multi_year_index_reads_the_values_of_each_year_store(site):
    data = site / "data"
    idx = open_store(str(data / "years.json"))
    assert isinstance(idx, StackStore) and idx.layout == "tessera:v1"
    assert idx.years == [2023, 2024]
    for year in idx.years:
        zones = sorted(n for n in zarr.open_group(str(data / f"{year}.zarr"), mode="r").group_keys()
                       if n.startswith("utm"))
        assert set(zones) <= set(idx.zones(year))
        for k, zone in enumerate(zones):
            lon, lat, want, scales = pixels_of(data / f"{year}.zarr", zone, 40, seed=year + k)
            got = idx.sample_points(np.column_stack([lon, lat]), year)
            assert list(got["zone"]) == [zone] * len(lon)
            assert list(got["status"]) == ["valid"] * (len(lon) - 2) + ["nodata"] * 2
            bands = got[[c for c in got.columns if c.startswith("b")]].to_numpy()
            np.testing.assert_array_equal(bands[:-2], want[:-2])
            np.testing.assert_array_equal(got["scale"].to_numpy()[:-2], scales[:-2])


def test_a_year_the_index_does_not_hold_is_one_line(site):
    idx = open_store(str(site / "data" / "years.json"))
    with pytest.raises(ValueError, match=r"year 2019 is not in .*years\.json \(years \[2023, 2024\]\)"):
        idx.view("utm30", 2019)


@pytest.fixture(scope="module")
def served_index(site, tmp_path_factory):
    """The site's two year stores and its JSON index, a Parquet index of them written beside it by the CLI, all
    served by `builder serve` (HTTP Range) on 127.0.0.1."""
    root = tmp_path_factory.mktemp("served-index")
    for name in ("2023.zarr", "2024.zarr", "years.json"):
        (shutil.copytree if name.endswith(".zarr") else shutil.copy)(site / "data" / name, root / name)
    run_cli("index", "years", str(root / "2023.zarr"), str(root / "2024.zarr"), "-o", str(root / "years.parquet"),
            "--template-base", "{{base}}")
    (root / "index.html").write_text("<p>the test's index directory</p>")  # what static_server waits for
    (root / "nested.json").write_text('{"refs": ' + "[" * 100 + "]" * 100 + "}")
    (root / "broken.json").write_text('{"refs": {"zarr.json": ')
    with static_server(root) as base:
        yield root, base


@pytest.mark.parametrize("name", ["years.json", "years.parquet"])
def test_the_multi_year_index_reads_the_same_over_http(served_index, name):
    root, base = served_index
    idx = open_store(base + name)
    assert isinstance(idx, StackStore) and idx.years == [2023, 2024]
    for year in idx.years:
        lon, lat, want, scales = pixels_of(root / f"{year}.zarr", "utm30", 30, seed=year)
        got = idx.sample_points(np.column_stack([lon, lat]), year)
        assert list(got["status"]) == ["valid"] * (len(lon) - 2) + ["nodata"] * 2
        bands = got[[c for c in got.columns if c.startswith("b")]].to_numpy()
        np.testing.assert_array_equal(bands[:-2], want[:-2])
        np.testing.assert_array_equal(got["scale"].to_numpy()[:-2], scales[:-2])


@pytest.mark.parametrize("name,says", [("nested.json", "nested deeper than 64 levels"),
                                       ("broken.json", "not valid JSON"), ("absent.json", "no such file")])
def test_a_remote_index_that_cannot_be_read_is_one_line_naming_it(served_index, name, says):
    _, base = served_index
    with pytest.raises(ValueError) as e:
        open_store(base + name)
    assert says in str(e.value) and base + name in str(e.value) and "\n" not in str(e.value)
