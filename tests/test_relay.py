"""`python -m builder build --from-store URL --bbox W,S,E,N --year Y --out DIR`: a region of a geoemb: v2 store
and of the dClimate plain copy (north and south of the equator) re-laid into tessera: v1 year stores.

The sources are written by tests/distributions.py (zarr-python, its own random arrays); the built stores are
read back with zarr-python directly and compared pixel for pixel with the writer's arrays; `validate`
passes on each; bad input is one line, exit 2, and no store.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import zarr
from pyproj import Transformer

from conftest import run_cli
from distributions import write_dclimate, write_geoemb_v2


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("relay-src")
    return {"geoemb": write_geoemb_v2(root / "geoemb-v2.zarr"), "dclimate": write_dclimate(root / "dclimate.zarr")}


def bbox_inside(z, rows=(100, 400), cols=(100, 400)) -> str:
    """A lon/lat bbox well inside a writer's zone (its pixel rows x cols)."""
    num = int(z.name[3:])
    (e0, n1), (e1, n0) = z.pixel_centre(rows[0], cols[0]), z.pixel_centre(rows[1], cols[1])
    south = n1 < 0
    to = Transformer.from_crs((32700 if south else 32600) + num, 4326, always_xy=True)
    off = 10_000_000 if south else 0
    w, s = to.transform(e0, n0 + off)
    e, n = to.transform(e1, n1 + off)
    return f"{w:.5f},{s:.5f},{e:.5f},{n:.5f}"


def build(src, bbox: str, year: int, out, cache, check=True):
    return run_cli("build", "--from-store", str(src), "--bbox", bbox, "--year", str(year), "--out", str(out),
                   "--cache", str(cache), "--scheduler", "threads", "-q", check=check)


def assert_relaid(store, z, t: int):
    """Every pixel of the writer's zone (one 512-px block, all of it re-laid) equals the v1 store's pixel at the
    same place: the int8 vector and the scale where the source is valid, no data (NaN, zero vector) elsewhere."""
    g = zarr.open_group(str(store), mode="r")[z.name]
    south = z.y1 <= 0
    assert g.attrs["proj:code"] == f"EPSG:{(32700 if south else 32600) + int(z.name[3:])}"
    tr = g.attrs["spatial:transform"]
    dr = round((tr[5] - (z.y1 + (10_000_000 if south else 0))) / 10)
    dc = round((z.x0 - tr[2]) / 10)
    H, W = z.scales.shape[1:]
    emb = np.asarray(g["embeddings"][dr:dr + H, dc:dc + W, :])
    scl = np.asarray(g["scales"][dr:dr + H, dc:dc + W])
    src_s = z.scales[t]
    valid = np.isfinite(src_s)
    assert scl[valid].tobytes() == src_s[valid].tobytes() and np.isnan(scl[~valid]).all()
    np.testing.assert_array_equal(emb[valid], np.moveaxis(z.emb[t], 0, -1)[valid])
    assert (emb[~valid] == 0).all()
    return g


def test_geoemb_v2_region_becomes_a_valid_v1_store(sources, tmp_path):
    g = sources["geoemb"]
    z = g.zones["utm30"]
    p = build(g.path, bbox_inside(z), 2024, tmp_path / "out", tmp_path / "cache")
    store = tmp_path / "out" / "2024.zarr"
    assert_relaid(store, z, 1)
    grp = zarr.open_group(str(store), mode="r")
    assert "overviews" in grp["utm30"].group_keys() and "global_rgb" in grp.group_keys()
    assert run_cli("validate", str(store)).returncode == 0
    assert json.loads((tmp_path / "out" / "catalog.json").read_text())["stores"][0]["year"] == 2024
    assert "valid tessera:v1 store" in p.stdout
    # a tessera: v1 store is a source too: re-laying the one just built gives the same zone, bit for bit
    build(store, bbox_inside(z), 2024, tmp_path / "again", tmp_path / "cache2")
    a, b = (zarr.open_group(str(d / "2024.zarr"), mode="r")["utm30"] for d in (tmp_path / "out", tmp_path / "again"))
    assert a.attrs["spatial:transform"] == b.attrs["spatial:transform"]
    for name in ("embeddings", "scales"):
        assert np.asarray(a[name][:]).tobytes() == np.asarray(b[name][:]).tobytes()


def test_dclimate_regions_north_and_south_into_one_store(sources, tmp_path):
    dc = sources["dclimate"]
    out, cache = tmp_path / "out", tmp_path / "cache"
    build(dc.path, bbox_inside(dc.zones["utm34"]), 2024, out, cache)  # the Cape: negative northings upstream
    build(dc.path, bbox_inside(dc.zones["utm31"]), 2024, out, cache)  # a second bbox extends the same store
    store = out / "2024.zarr"
    for z in dc.zones.values():
        assert_relaid(store, z, 0)
    assert run_cli("validate", str(store)).returncode == 0


BAD = [  # (arguments, given the dClimate store, a missing path and a bbox inside utm31; what the error says)
    (lambda dc, missing, bb: ["--from-store", missing, "--bbox", bb, "--year", "2024"], "no zarr.json and no catalog.json"),
    (lambda dc, missing, bb: ["--from-store", dc, "--bbox", "1,2,3", "--year", "2024"], "expected four numbers"),
    (lambda dc, missing, bb: ["--from-store", dc, "--bbox", "100,10,101,11", "--year", "2024"], "covers no zone"),
    (lambda dc, missing, bb: ["--from-store", dc, "--bbox", bb, "--year", "2019"], "year 2019 is not in"),
    # 2025 is on the time axis with values written, but not in years_complete
    (lambda dc, missing, bb: ["--from-store", dc, "--bbox", bb, "--year", "2025"], "no pixel with data"),
    (lambda dc, missing, bb: [dc, "--from-store", dc, "--bbox", bb, "--year", "2024"], "give one of TILES"),
    (lambda dc, missing, bb: ["--from-store", dc, "--year", "2024"], "--from-store needs --bbox"),
]


@pytest.mark.parametrize("args, says", BAD, ids=["url", "bbox", "nozone", "year", "incomplete", "tiles", "nobbox"])
def test_bad_input_is_one_line_and_no_store(sources, tmp_path, args, says):
    dc = sources["dclimate"]
    argv = args(str(dc.path), str(tmp_path / "missing.zarr"), bbox_inside(dc.zones["utm31"]))
    p = run_cli("build", *argv, "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"), "-q", check=False)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: ") and says in p.stderr, p.stderr
    assert not list(tmp_path.glob("out/*.zarr"))
