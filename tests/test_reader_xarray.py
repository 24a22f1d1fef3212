"""The xarray engine on the upstream distributions: a DataTree of one node per UTM zone, guessing by the root's
convention registration (not the name), and vectorised (pointwise) indexing.

Stores come from tests/distributions.py (zarr-python, its own random arrays); expected values are the
writer's arrays.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import xarray as xr
import zarr

from distributions import write_dclimate, write_geoemb_v2


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("xr")
    return {"geoemb": write_geoemb_v2(root / "geoemb-v2.zarr"), "dclimate": write_dclimate(root / "dclimate.zarr")}


def test_open_datatree_gives_one_node_per_zone(stores):
    dc = stores["dclimate"]
    tree = xr.open_datatree(dc.path, engine="tessera")
    assert sorted(tree.children) == ["utm31", "utm34"]
    assert tree.attrs["layout"] == "geoemb:" and tree.attrs["years"] == [2024, 2025]
    for name, z in dc.zones.items():
        node = tree[name].to_dataset()
        assert node.attrs["proj:code"] == f"EPSG:326{name[3:]}"
        assert list(node.time.values) == [2024, 2025]
        got = node.scales.isel(time=0, y=slice(250, 262), x=slice(0, 9)).values
        assert got.tobytes() == z.scales[0, 250:262, 0:9].tobytes()
        # 2025 is not in years_complete: no data, whatever its arrays hold
        assert np.isposinf(node.scales.isel(time=1, y=slice(250, 262), x=slice(0, 9)).values).all()


def test_open_datatree_of_one_year(stores):
    g = stores["geoemb"]
    tree = xr.open_datatree(g.path, engine="tessera", year=2023)
    assert list(tree.children) == ["utm30"] and tree["utm30"].attrs["year"] == 2023
    got = tree["utm30"].to_dataset().embeddings.isel(y=100, x=200).values
    want = g.zones["utm30"].emb[0, :, 100, 200].astype(np.float32) * g.zones["utm30"].scales[0, 100, 200]
    np.testing.assert_array_equal(got, want)


def test_guess_can_open_reads_the_convention_not_the_name(stores, tmp_path):
    plain = tmp_path / "plain.zarr"  # a Zarr store of no convention of ours, with the suffix
    zarr.open_group(str(plain), mode="w").create_array("a", shape=(2,), dtype="i1")
    renamed = tmp_path / "embeddings-without-suffix"
    shutil.copy(stores["geoemb"].path / "zarr.json", tmp_path / "zarr.json")  # the root document alone
    renamed.mkdir()
    shutil.copy(tmp_path / "zarr.json", renamed / "zarr.json")
    engine = xr.backends.plugins.list_engines()["tessera"]
    assert engine.guess_can_open(str(stores["geoemb"].path)) and engine.guess_can_open(stores["dclimate"].path)
    assert engine.guess_can_open(str(renamed))
    assert not engine.guess_can_open(str(plain)) and not engine.guess_can_open(str(tmp_path / "absent.zarr"))
    (tmp_path / "huge").mkdir()
    (tmp_path / "huge" / "zarr.json").write_bytes(b"{" + b" " * (17 << 20) + b"}")  # beyond the root bound
    assert not engine.guess_can_open(str(tmp_path / "huge"))
    assert xr.backends.plugins.guess_engine(str(stores["dclimate"].path)) == "tessera"


@pytest.mark.parametrize("kind", ["geoemb", "dclimate"])
def test_vectorised_indexing_reads_the_named_pixels(stores, kind):
    truth = stores[kind]
    name, z = next(iter(truth.zones.items()))
    ds = xr.open_dataset(truth.path, engine="tessera", group=name)
    rows, cols = np.array([3, 300, 511, 300]), np.array([5, 480, 511, 480])
    times = np.array([0, 0, 0, 1]) if kind == "geoemb" else np.array([0, 0, 0, 0])
    sel = dict(time=xr.DataArray(times, dims="p"), y=xr.DataArray(rows, dims="p"), x=xr.DataArray(cols, dims="p"))
    got = ds.embeddings.isel(**sel)
    assert got.dims == ("p", "band")
    s = z.scales[times, rows, cols]
    with np.errstate(invalid="ignore"):  # inf * 0 where there is no data, masked by the where
        want = np.where(np.isfinite(s)[:, None], z.emb[times, :, rows, cols].astype(np.float32) * s[:, None], np.nan)
    np.testing.assert_array_equal(got.values, want.astype(np.float32))
    assert ds.scales.isel(**sel).values.tobytes() == s.tobytes()
    # a 2-D indexer with a band subset: shapes follow xarray's rules, values the writer's
    grid = ds.embeddings.isel(time=0, y=xr.DataArray([[10, 20], [30, 40]], dims=("a", "b")),
                              x=xr.DataArray([[50, 60], [70, 80]], dims=("a", "b")), band=[0, 7])
    assert grid.dims == ("a", "b", "band") and grid.shape == (2, 2, 2)
    r, c = np.array([[10, 20], [30, 40]]), np.array([[50, 60], [70, 80]])
    w = z.emb[0][:, r, c][[0, 7]].transpose(1, 2, 0).astype(np.float32) * z.scales[0, r, c][..., None]
    np.testing.assert_array_equal(grid.values, np.where(np.isfinite(z.scales[0, r, c])[..., None], w, np.nan))


def test_depth_opens_the_nested_depth_arrays(stores):
    g = stores["geoemb"]
    z = g.zones["utm30"]
    tree = xr.open_datatree(g.path, engine="tessera", depth=16)
    ds = tree["utm30"].to_dataset()
    assert ds.embeddings.shape == (2, 512, 512, 16) and ds.attrs["depth"] == 16 and list(ds.band.values) == list(range(16))
    win = ds.embeddings.isel(time=1, y=slice(250, 260), x=slice(30, 36)).values
    s = z.scales[1, 250:260, 30:36]
    want = np.where(np.isfinite(s)[..., None], np.moveaxis(z.emb[1, :16, 250:260, 30:36], 0, -1) * s[..., None], np.nan)
    np.testing.assert_array_equal(win, want.astype(np.float32))
    pts = ds.embeddings.isel(time=0, y=xr.DataArray([100, 300], dims="p"), x=xr.DataArray([200, 400], dims="p")).values
    np.testing.assert_array_equal(pts, z.emb[0, :16, [100, 300], [200, 400]].astype(np.float32)
                                  * z.scales[0, [100, 300], [200, 400]][:, None])
    with pytest.raises(ValueError, match=r"^utm30: no depth-8 array \(embeddings_d\{D\} depths: 4, 16\)$"):
        xr.open_dataset(g.path, engine="tessera", group="utm30", depth=8)
