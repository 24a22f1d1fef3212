"""Embedding overviews (tessera-ovr:): values, incremental update, code accuracy, validation, cross-reader reads.

Every expected value is recomputed here from zarr-python reads of the stored arrays, dequantised with plain
numpy (not with the builder's functions); the lattice offsets between levels come from the levels' own
spatial:transform.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from sklearn.cluster import KMeans
from sklearn.neighbors import KNeighborsClassifier

from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR
from conftest import REPO, run_cli, tree_digest

ZONES = ("utm30", "utm31", "utm34")


def floats(emb: np.ndarray, scl: np.ndarray) -> np.ndarray:
    """float64 vectors, NaN where the scale is NaN (the convention's formula, written out here)."""
    return emb.astype(np.float64) * scl.astype(np.float64)[..., None]


def level_arrays(zone: zarr.Group, k: int) -> tuple[np.ndarray, np.ndarray]:
    g = zone if k == 0 else zone[f"overviews/{k}"]
    return g["embeddings"][...], g["scales"][...]


def children_view(parent_t: list, child_t: list, child: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The child level laid out on the parent's pixels: (h, w, 2, 2, ...) with NaN outside the child grid."""
    p = child_t[0]
    assert parent_t[0] == 2 * p
    dr, dc = round((parent_t[5] - child_t[5]) / p), round((child_t[2] - parent_t[2]) / p)
    assert dr >= 0 and dc >= 0
    h, w = shape
    out = np.full((2 * h, 2 * w, *child.shape[2:]), np.nan)
    ch, cw = child.shape[:2]
    out[dr:dr + ch, dc:dc + cw] = child
    return out.reshape(h, 2, w, 2, *child.shape[2:]).swapaxes(1, 2)


def test_levels_sit_on_the_shard_lattice_and_cover_the_zone(store):
    for name in ZONES:
        z = zarr.open_group(store / name, mode="r")
        levels = z.attrs["tessera-ovr:levels"]
        assert z.attrs["tessera-ovr:version"] == 1 and [x["level"] for x in levels] == list(range(9))
        e0, n0 = z.attrs["spatial:transform"][2], z.attrs["spatial:transform"][5]
        h0, w0 = z.attrs["spatial:shape"]
        for x in levels:
            k, t, (h, w) = x["level"], x["spatial:transform"], x["spatial:shape"]
            step = 256 * 10 * 2**k
            assert t[0] == 10 * 2**k and t[4] == -t[0]
            assert t[2] % step == 0 and t[5] % step == 0 and h % 256 == 0 and w % 256 == 0
            assert t[2] <= e0 and t[5] >= n0 and t[2] + w * t[0] >= e0 + w0 * 10 and t[5] - h * t[0] <= n0 - h0 * 10
            assert t[2] > e0 - step and t[5] < n0 + step  # the smallest such grid
            g = z[x["path"]]
            for a in x["arrays"]:
                assert g[a].shape[:2] == (h, w)
        assert z["overviews/1/embeddings"].dtype == np.int8 and z["overviews/1/scales"].dtype == np.float32
        assert z["overviews/0/code"].shape[2] == z.attrs["tessera-ovr:code"]["dims"]


def test_overview_values_are_2x2_means_of_the_level_below(store):
    """Each level within half its quantisation step of the 2x2 mean of the stored level below, and within
    the accumulated steps of the recursive mean of the full-resolution float vectors; no data exactly where
    no child has data."""
    for name in ZONES:
        z = zarr.open_group(store / name, mode="r")
        levels = z.attrs["tessera-ovr:levels"]
        e, s = level_arrays(z, 0)
        exact, bound, below = floats(e, s), np.zeros(s.shape), floats(e, s)
        checked = 0
        for k in range(1, len(levels)):
            pt, ct = levels[k]["spatial:transform"], levels[k - 1]["spatial:transform"]
            ek, sk = level_arrays(z, k)
            got = floats(ek, sk)
            shape = sk.shape
            kids = children_view(pt, ct, below, shape).reshape(*shape, 4, -1)
            n = (~np.isnan(kids[..., 0])).sum(axis=2)
            assert ((n == 0) == np.isnan(sk)).all(), (name, k)
            with np.errstate(invalid="ignore"):
                mean_below = np.nansum(kids, axis=2) / n[..., None]
            ok = n > 0
            step = sk[ok].astype(np.float64)[:, None]
            assert (np.abs(got[ok] - mean_below[ok]) <= 0.5 * step * 1.0001 + 1e-6).all(), (name, k)
            # against the full-resolution floats, with the error bound carried up from every level
            kx = children_view(pt, ct, exact, shape).reshape(*shape, 4, -1)
            kb = children_view(pt, ct, bound, shape).reshape(*shape, 4)
            with np.errstate(invalid="ignore"):
                exact = np.nansum(kx, axis=2) / n[..., None]
            bound = 0.5 * np.nan_to_num(sk.astype(np.float64)) * 1.0001 + np.nanmax(np.where(np.isnan(kb), -1, kb), axis=2).clip(0)
            assert (np.abs(got[ok] - exact[ok]) <= bound[ok][:, None] + 1e-6).all(), (name, k)
            exact[~ok] = np.nan
            below = got
            checked += int(ok.sum())
        assert checked > 100


def test_codes_encode_their_levels_vectors(store):
    for name in ZONES:
        z = zarr.open_group(store / name, mode="r")
        mean, basis = z["overviews/code_mean"][...].astype(np.float64), z["overviews/code_basis"][...].astype(np.float64)
        np.testing.assert_allclose(basis @ basis.T, np.eye(basis.shape[0]), atol=1e-5)
        for x in z.attrs["tessera-ovr:levels"][:4]:
            k = x["level"]
            e, s = level_arrays(z, k)
            code, cs = z[f"overviews/{k}/code"][...], z[f"overviews/{k}/code_scales"][...]
            assert (np.isnan(cs) == np.isnan(s)).all()
            ok = ~np.isnan(s)
            proj = (floats(e, s)[ok] - mean) @ basis.T
            got = floats(code, cs)[ok]
            assert (np.abs(got - proj) <= 0.5 * cs[ok].astype(np.float64)[:, None] * 1.0001 + 1e-5).all(), (name, k)


def _valid_vectors(z: zarr.Group, k: int):
    e, s = level_arrays(z, k)
    code, cs = z[f"overviews/{k}/code"][...], z[f"overviews/{k}/code_scales"][...]
    ok = ~np.isnan(s)
    mean, basis = z["overviews/code_mean"][...].astype(np.float64), z["overviews/code_basis"][...].astype(np.float64)
    return floats(e, s)[ok], floats(code, cs)[ok] @ basis + mean


def _cos(m: np.ndarray, q: np.ndarray) -> np.ndarray:
    return m @ q / (np.linalg.norm(m, axis=1) * np.linalg.norm(q) + 1e-30)


@pytest.fixture(scope="module")
def easy_store(tmp_path_factory):
    """The session's places built from the easy generator's tiles (builder/synth/easy.py: nearly low-rank)."""
    from builder import demo
    from conftest import PLACES, PX
    root = tmp_path_factory.mktemp("easy-tiles")
    world = demo.EasyWorld()
    for lon, lat in PLACES:
        demo.write_tile(root, 2024, lon, lat, PX, world=world)
    out = tmp_path_factory.mktemp("easy")
    run_cli("build", str(root), "--year", "2024", "--out", str(out), "--scheduler", "threads", "-q")
    return out / "2024.zarr"


@pytest.mark.parametrize("k", [0, 1, 2])
def test_compact_code_encodes_nearly_low_rank_vectors_almost_exactly(easy_store, k):
    """On data that an 8-d code can hold (the easy generator's: 6 classes, 3 texture directions, noise), the code
    must give it back: recall of the 1% most similar pixels (cosine) >= 90%, k-means and k-NN class maps >= 95% the
    same.  A wrong basis, scale or level would fail this.  On data as high-dimensional as real embeddings (the
    demo's) the code is only a first, approximate answer: benchmarks/accuracy.py measures how approximate, and
    the tools offer the exact, full-vector result (tests/test_tools_exact.py)."""
    parts = [_valid_vectors(zarr.open_group(easy_store / name, mode="r"), k) for name in ZONES]
    full = np.concatenate([p[0] for p in parts])
    approx = np.concatenate([p[1] for p in parts])
    assert len(full) >= 1000
    rng = np.random.default_rng(1)
    top = max(len(full) // 100, 5)
    recalls = []
    for q in rng.choice(len(full), 20, replace=False):
        a = set(np.argsort(-_cos(full, full[q]))[:top])
        b = set(np.argsort(-_cos(approx, approx[q]))[:top])
        recalls.append(len(a & b) / top)
    assert np.mean(recalls) >= 0.9, recalls
    km = KMeans(6, n_init=3, random_state=0).fit(full)
    assert (km.predict(approx) == km.labels_).mean() >= 0.95
    train = rng.choice(len(full), min(500, len(full) // 2), replace=False)
    knn = KNeighborsClassifier(5).fit(full[train], km.labels_[train])
    assert (knn.predict(approx) == knn.predict(full)).mean() >= 0.95


# ------------------------------------------------------------ incremental --
def _copy_tiles(src: Path, dst: Path, names: list[str], year=2024):
    for n in names:
        shutil.copytree(src / EMBEDDINGS_DIR / str(year) / n, dst / EMBEDDINGS_DIR / str(year) / n)
        (dst / LANDMASKS_DIR).mkdir(parents=True, exist_ok=True)
        shutil.copy(src / LANDMASKS_DIR / f"{n}.tiff", dst / LANDMASKS_DIR / f"{n}.tiff")


def _ancestors(zone_dir: Path, shards: set[tuple[int, int]]) -> set[str]:
    """Overview shard files (paths relative to overviews/) above the level-0 shards `shards` of the zone,
    from the attributes."""
    attrs = json.loads((zone_dir / "zarr.json").read_text())["attributes"]
    t0 = attrs["spatial:transform"]
    lat = {(round(-t0[5] / 2560) + r, round(t0[2] / 2560) + c) for r, c in shards}
    out = set()
    for x in attrs["tessera-ovr:levels"]:
        k, t = x["level"], x["spatial:transform"]
        r0, c0 = round(-t[5] / (2560 * 2**k)), round(t[2] / (2560 * 2**k))
        for r, c in {(r // 2**k, c // 2**k) for r, c in lat}:
            for a in x["arrays"]:
                tail = "/0" if a in ("embeddings", "code") else ""
                out.add(f"{x['level']}/{a}/c/{r - r0}/{c - c0}{tail}")  # relative to overviews/
    return out


def test_a_changed_tile_rewrites_only_the_overview_shards_above_it(tmp_path, tiles_root):
    name = "grid_-0.05_50.85"
    tiles = tmp_path / "tiles"
    _copy_tiles(tiles_root, tiles, [name, "grid_-0.05_50.75"])
    out = tmp_path / "out"
    args = ["build", str(tiles), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q", "--no-global"]
    run_cli(*args)
    zone = out / "2024.zarr" / "utm30"
    before = tree_digest(zone / "overviews")
    d = tiles / EMBEDDINGS_DIR / "2024" / name
    np.save(d / f"{name}.npy", -np.load(d / f"{name}.npy"))
    run_cli(*args)
    after = tree_digest(zone / "overviews")
    # the level-0 shards the tile covers, from its place in the zone
    z = zarr.open_group(zone, mode="r")
    t = z.attrs["spatial:transform"]
    from conftest import PX
    import tifffile
    with tifffile.TiffFile(tiles / LANDMASKS_DIR / f"{name}.tiff") as tf:
        tie = tf.pages[0].tags[33922].value
    r, c = round((t[5] - tie[4]) / 10), round((tie[3] - t[2]) / 10)
    shards = {(sr, sc) for sr in range(r // 256, (r + PX - 1) // 256 + 1) for sc in range(c // 256, (c + PX - 1) // 256 + 1)}
    changed = {k for k in after.keys() | before.keys() if after.get(k) != before.get(k)}
    assert changed, "the change did not reach the overviews"
    assert changed <= _ancestors(zone, shards), sorted(changed - _ancestors(zone, shards))[:5]
    # and the result equals a clean build of the changed tiles (same colour and code models), file for file
    clean = tmp_path / "clean"
    record = json.loads((out / "2024.zarr.build" / "record.json").read_text())
    (clean / "2024.zarr.build").mkdir(parents=True)
    (clean / "2024.zarr.build" / "record.json").write_text(json.dumps(
        {"model_version": "1.0", "rgb": record["rgb"], "overviews": record["overviews"]}))
    run_cli("build", str(tiles), "--year", "2024", "--out", str(clean), "--scheduler", "sync", "-q", "--no-global")
    assert tree_digest(out / "2024.zarr") == tree_digest(clean / "2024.zarr")


def test_a_store_built_without_overviews_gains_them_and_refuses_to_lose_them(tmp_path, tiles_root, store):
    tiles = tmp_path / "tiles"
    names = ["grid_-0.05_50.85", "grid_-0.05_50.75"]
    _copy_tiles(tiles_root, tiles, names)
    out = tmp_path / "out"
    args = ["build", str(tiles), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q", "--no-global"]
    run_cli(*args, "--no-overviews")
    s = out / "2024.zarr"
    assert not (s / "utm30" / "overviews").exists()
    assert "tessera-ovr:version" not in zarr.open_group(s / "utm30", mode="r").attrs
    run_cli(*args)  # nothing new: the overviews of every stored shard are built
    z = zarr.open_group(s / "utm30", mode="r")
    assert z.attrs["tessera-ovr:version"] == 1
    a = zarr.open_group(store / "utm30", mode="r")
    assert (np.isnan(z["overviews/1/scales"][...]).sum() > 0) and not np.isnan(z["overviews/3/scales"][...]).all()
    assert run_cli("validate", str(s), "--deep").returncode == 0
    p = run_cli(*args, "--no-overviews", check=False)
    assert p.returncode == 2 and "has embedding overviews" in p.stderr
    assert a.attrs["tessera-ovr:code"] == z.attrs["tessera-ovr:code"]


def test_a_zone_built_without_overviews_can_grow(tmp_path, tiles_root):
    """A second build whose tile grows the zone's grid, on a store built with --no-overviews (it crashed with an
    internal KeyError: regridding looked for the overviews' code model the store never had)."""
    tiles = tmp_path / "tiles"
    _copy_tiles(tiles_root, tiles, ["grid_-0.05_50.85"])
    out = tmp_path / "out"
    args = ["build", str(tiles), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q", "--no-global",
            "--no-overviews"]
    run_cli(*args)
    before = zarr.open_group(out / "2024.zarr" / "utm30", mode="r")["scales"].shape
    _copy_tiles(tiles_root, tiles, ["grid_-0.05_50.75"])  # the tile south of it: the zone grows
    p = run_cli(*args, check=False)
    assert p.returncode == 0, p.stderr
    z = zarr.open_group(out / "2024.zarr" / "utm30", mode="r")
    assert z["scales"].shape[0] > before[0] and not (out / "2024.zarr" / "utm30" / "overviews").exists()
    assert run_cli("validate", str(out / "2024.zarr")).returncode == 0


# ------------------------------------------------------------- validation --
def _copy_store(store: Path, dst: Path) -> Path:
    shutil.copytree(store, dst / "2024.zarr")
    return dst / "2024.zarr"


def _edit_zone_attrs(s: Path, fn) -> None:
    p = s / "utm30" / "zarr.json"
    doc = json.loads(p.read_text())
    fn(doc["attributes"])
    p.write_text(json.dumps(doc))
    run_cli("validate", str(s), check=False)


def test_validate_accepts_the_overviews_and_checks_them_deeply(store):
    p = run_cli("validate", str(store), "--deep")
    assert p.returncode == 0, p.stdout


@pytest.mark.parametrize("edit,expect", [
    (lambda a: a.update({"tessera-ovr:version": 2}), "tessera-ovr:version"),
    (lambda a: a["tessera-ovr:levels"][2]["spatial:shape"].__setitem__(0, 9999), "level 2 grid"),
    (lambda a: a["tessera-ovr:code"].update({"dims": 5}), "overviews/code_basis"),
    (lambda a: a["zarr_conventions"].pop(), "tessera-ovr:"),
])
def test_validate_refuses_bad_overview_metadata(tmp_path, store, edit, expect):
    s = _copy_store(store, tmp_path)
    p = s / "utm30" / "zarr.json"
    doc = json.loads(p.read_text())
    edit(doc["attributes"])
    p.write_text(json.dumps(doc))
    out = run_cli("validate", str(s), check=False)
    assert out.returncode == 1 and expect in out.stdout, out.stdout


def test_validate_deep_finds_a_level_that_is_not_the_mean_of_the_one_below(tmp_path, store):
    """Overwrite a level-1 shard with valid, checksummed, but wrong values: only --deep's sample sees it."""
    from builder.arrayfiles import ShardedArrayFiles
    s = _copy_store(store, tmp_path)
    arr = ShardedArrayFiles(s / "utm30" / "overviews" / "1" / "embeddings")
    files = sorted(f for f in (s / "utm30" / "overviews" / "1" / "embeddings" / "c").rglob("*") if f.is_file())
    assert 0 < len(files) <= 8  # --deep samples up to 8 shards per level: every one here
    for f in files:
        sr, sc = int(f.parts[-3]), int(f.parts[-2])
        data = arr.read(sr, sc)
        arr.write(sr, sc, np.where(data != 0, np.clip(data.astype(np.int16) // 2 + 20, -127, 127), 0).astype(np.int8))
    assert run_cli("validate", str(s)).returncode == 0
    out = run_cli("validate", str(s), "--deep", check=False)
    assert out.returncode == 1 and "2x2 means of level 0" in out.stdout, out.stdout


# ----------------------------------------------------------- cross-reader --
def test_xarray_reads_a_level_as_a_dataset(store):
    z = zarr.open_group(store / "utm30", mode="r")
    for k in (0, 1, 3):
        ds = xr.open_zarr(store, group=f"utm30/overviews/{k}", consolidated=False)
        assert ds["code"].dims == ("northing", "easting", "code")
        np.testing.assert_array_equal(ds["code"].values, z[f"overviews/{k}/code"][...])
        np.testing.assert_array_equal(ds["code_scales"].values, z[f"overviews/{k}/code_scales"][...])
        if k:
            np.testing.assert_array_equal(ds["embeddings"].values, z[f"overviews/{k}/embeddings"][...])


ZARRITA_JS = r"""
import * as zarr from "zarrita";
const [base, ...paths] = process.argv.slice(2);
const root = zarr.root(new zarr.FetchStore(base));
const out = {};
for (const p of paths) {
  const a = await zarr.open.v3(root.resolve(p), { kind: "array" });
  const c = await zarr.get(a);
  out[p] = { shape: c.shape, dtype: a.dtype, data: Array.from(c.data, (x) => Number.isNaN(x) ? null : Number(x)) };
}
console.log(JSON.stringify(out));
"""


def test_zarrita_in_node_reads_the_overview_arrays(tmp_path, store):
    """zarrita (the npm package the site bundles, from the site build's npm cache) over HTTP with Range."""
    from browser_util import static_server
    from builder.site import _npm
    node_modules = _npm(REPO / ".cache")
    script = tmp_path / "read.mjs"
    script.write_text(ZARRITA_JS)
    (tmp_path / "node_modules").symlink_to(node_modules)
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("ok")
    shutil.copytree(store, site / "2024.zarr")
    paths = ["utm31/overviews/0/code", "utm31/overviews/0/code_scales", "utm31/overviews/2/embeddings",
             "utm31/overviews/2/scales", "utm31/overviews/code_basis"]
    with static_server(site) as base:
        p = subprocess.run(["node", str(script), base + "2024.zarr", *paths], capture_output=True, text=True,
                           timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout)
    z = zarr.open_group(store, mode="r")
    for path in paths:
        want = z[path][...]
        assert got[path]["shape"] == list(want.shape)
        have = np.array([np.nan if x is None else x for x in got[path]["data"]], dtype=np.float64).reshape(want.shape)
        np.testing.assert_array_equal(have, want.astype(np.float64))


def test_code_dims_are_chosen_per_store_and_kept(tmp_path, tiles_root):
    tiles = tmp_path / "tiles"
    _copy_tiles(tiles_root, tiles, ["grid_18.45_-33.95"])
    args = ["build", str(tiles), "--year", "2024", "--out", str(tmp_path / "out"), "--scheduler", "sync", "-q",
            "--no-global"]
    run_cli(*args, "--code-dims", "4")
    z = zarr.open_group(tmp_path / "out" / "2024.zarr" / "utm34", mode="r")
    assert z.attrs["tessera-ovr:code"]["dims"] == 4 and z["overviews/2/code"].shape[2] == 4
    assert z["overviews/code_basis"].shape == (4, 128)
    p = run_cli(*args, check=False)  # the default 8 would not match the store's 4
    assert p.returncode == 2 and "4-d code" in p.stderr, p.stderr
