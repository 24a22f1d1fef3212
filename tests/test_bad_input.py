"""Each bad input gets a one-line error naming the file, exit code 2, and an existing store stays intact."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from builder import demo
from builder.geotiff import write_geotiff
from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR
from conftest import PX, run_cli, tree_digest

GOOD = (-0.05, 50.85)
NAME = "grid_-0.05_50.85"


@pytest.fixture(scope="module")
def built(tmp_path_factory, world):
    """A valid store built once from one tile, and that tile beside a second one (the directory to break)."""
    good = tmp_path_factory.mktemp("good")
    demo.write_tile(good, 2024, *GOOD, PX, world=world)
    out = tmp_path_factory.mktemp("out")
    run_cli("build", str(good), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q", "--no-global")
    bad = tmp_path_factory.mktemp("bad")
    shutil.copytree(good, bad, dirs_exist_ok=True)
    demo.write_tile(bad, 2024, 0.05, 50.85, PX, world=world)
    return bad, out


@pytest.fixture()
def setup(built, tmp_path):
    """This test's own copies of `built`'s two directories (to break, and to write into): one build for the module
    instead of one a test, the same inputs (copytree keeps file times, as the tile's copy into `bad` always did)."""
    return tuple(shutil.copytree(src, tmp_path / name) for src, name in zip(built, ("bad", "out")))


def tile_dir(root: Path, name: str, year=2024) -> Path:
    return root / EMBEDDINGS_DIR / str(year) / name


def refused(p, needle: str) -> str:
    """The one-line error of a refused build: exit 2, `error: <file>: <what>`, no traceback."""
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert needle in lines[0], lines[0]
    assert "Traceback" not in p.stderr
    return lines[0]


def expect_error(root: Path, out: Path, needle: str, *extra: str, year: str = "2024") -> str:
    before = tree_digest(out)
    p = run_cli("build", str(root), "--year", year, "--out", str(out), "--scheduler", "sync", "-q", *extra, check=False)
    msg = refused(p, needle)
    assert tree_digest(out) == before  # nothing in the existing store changed
    return msg


def expect_first_build_refused(root: Path, out: Path, needle: str) -> str:
    p = run_cli("build", str(root), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q", check=False)
    msg = refused(p, needle)
    assert not (out / "2024.zarr").exists() and not (out / "2024.zarr.build").exists()
    return msg


def test_mismatched_band_counts(setup):
    bad, out = setup
    d = tile_dir(bad, "grid_0.05_50.85")
    np.save(d / "grid_0.05_50.85.npy", np.load(d / "grid_0.05_50.85.npy")[..., :64])
    msg = expect_error(bad, out, "64 bands")
    assert "grid_0.05_50.85.npy" in msg


def test_wrong_dtype(setup):
    bad, out = setup
    d = tile_dir(bad, "grid_0.05_50.85")
    np.save(d / "grid_0.05_50.85.npy", np.load(d / "grid_0.05_50.85.npy").astype(np.float32))
    assert "grid_0.05_50.85.npy" in expect_error(bad, out, "must be int8, got float32")


def test_inf_in_scales(setup):
    bad, out = setup
    d = tile_dir(bad, "grid_0.05_50.85")
    s = np.load(d / "grid_0.05_50.85_scales.npy")
    s[10, 11] = np.inf
    np.save(d / "grid_0.05_50.85_scales.npy", s)
    assert "_scales.npy" in expect_error(bad, out, "scales contain inf (pixel row 10, col 11)")


def test_float_embeddings_with_nan_are_refused(setup):
    bad, out = setup
    d = tile_dir(bad, "grid_0.05_50.85")
    e = np.load(d / "grid_0.05_50.85.npy").astype(np.float32)
    e[0, 0, 0] = np.nan
    np.save(d / "grid_0.05_50.85.npy", e)
    expect_error(bad, out, "must be int8")


def test_unknown_crs(setup):
    bad, out = setup
    lm = bad / LANDMASKS_DIR / "grid_0.05_50.85.tiff"
    write_geotiff(str(lm), np.ones((PX, PX), np.uint8), 3857, 5000.0, 6000000.0)
    assert "grid_0.05_50.85.tiff" in expect_error(bad, out, "unknown CRS")


def test_landmask_without_geokeys(setup):
    """ModelPixelScale and ModelTiepoint but no GeoKeyDirectory: the tile has no CRS, said in one line."""
    import tifffile
    bad, out = setup
    lm = bad / LANDMASKS_DIR / "grid_0.05_50.85.tiff"
    tifffile.imwrite(lm, np.ones((PX, PX), np.uint8), extratags=[
        (33550, "d", 3, (10.0, 10.0, 0.0), True), (33922, "d", 6, (0, 0, 0, 500000.0, 5650000.0, 0), True)])
    assert "grid_0.05_50.85.tiff" in expect_error(bad, out, "landmask has no projected CRS")


def test_truncated_file(setup):
    bad, out = setup
    f = tile_dir(bad, "grid_0.05_50.85") / "grid_0.05_50.85.npy"
    f.write_bytes(f.read_bytes()[:5000])
    assert "grid_0.05_50.85.npy" in expect_error(bad, out, "truncated")


def test_missing_landmask(setup):
    bad, out = setup
    (bad / LANDMASKS_DIR / "grid_0.05_50.85.tiff").unlink()
    expect_error(bad, out, "landmask GeoTIFF not found")


def test_overlapping_tiles_with_overlap_error(tmp_path, world):
    root = tmp_path / "t"
    demo.write_tile(root, 2024, *GOOD, PX, world=world)
    o = demo.tile_origin(*GOOD, PX, 32630)
    demo.write_tile(root, 2024, *GOOD, PX, world=world, origin=(o[0] + 300, o[1] - 200), name="grid_-0.05_50.86")
    out = tmp_path / "out"
    out.mkdir()
    msg = expect_error(root, out, "overlaps tile grid_-0.05_50.85", "--overlap", "error")
    assert "grid_-0.05_50.86" in msg
    assert not (out / "2024.zarr").exists()


def test_overlap_last_wins_where_the_later_tile_has_data(tmp_path, world):
    import zarr
    root = tmp_path / "t"
    demo.write_tile(root, 2024, *GOOD, PX, world=world)
    o = demo.tile_origin(*GOOD, PX, 32630)
    d = demo.write_tile(root, 2024, *GOOD, PX, world=world, origin=(o[0] + 300, o[1] - 200), name="grid_-0.05_50.86",
                        gap=False)
    # make the later tile recognisable: constant vectors, and a no-data hole where the first tile has data
    np.save(d / "grid_-0.05_50.86.npy", np.full((PX, PX, 128), 7, np.int8))
    s = np.full((PX, PX), 0.5, np.float32)
    s[0:5, 0:5] = np.nan
    np.save(d / "grid_-0.05_50.86_scales.npy", s)
    out = tmp_path / "out"
    run_cli("build", str(root), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q", "--no-global")
    z = zarr.open_group(out / "2024.zarr" / "utm30", mode="r")
    t = z.attrs["spatial:transform"]
    r, c = round((t[5] - (o[1] - 200)) / 10), round((o[0] + 300 - t[2]) / 10)
    first = np.load(tile_dir(root, NAME) / f"{NAME}.npy")
    land = z["scales"][r + 10, c + 10] == 0.5
    if land:
        assert (z["embeddings"][r + 10, c + 10] == 7).all()  # later tile wins
    e = z["embeddings"][r:r + 5, c:c + 5]
    np.testing.assert_array_equal(np.where(np.isnan(z["scales"][r:r + 5, c:c + 5])[..., None], 0, e),
                                  np.where(np.isnan(z["scales"][r:r + 5, c:c + 5])[..., None], 0, first[20:25, 30:35]))


def test_year_given_twice(setup):
    bad, out = setup
    before = tree_digest(out)
    p = run_cli("build", str(bad), "--year", "2024", "--year", "2024", "--out", str(out), check=False)
    assert p.returncode == 2 and "year 2024 given twice" in p.stderr
    assert tree_digest(out) == before


def write_root_attrs(out, **attrs) -> None:
    """Set attributes of the built 2024 store's root zarr.json (`only=`: replace them all)."""
    meta = out / "2024.zarr" / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"] = attrs.pop("only") if "only" in attrs else {**doc["attributes"], **attrs}
    meta.write_text(json.dumps(doc))


def test_store_of_another_dataset_version_or_model(setup):
    bad, out = setup
    write_root_attrs(out, **{"tessera:dataset_version": "v2"})
    expect_error(bad, out, "tessera:dataset_version='v2'")
    write_root_attrs(out, **{"tessera:dataset_version": "v1"})
    expect_error(bad, out, "refusing to mix in '2.0'", "--model-version", "2.0")


def test_store_whose_root_breaks_the_schema_or_is_another_layout(setup):
    """The builder reads an existing root with describe(): the same one line as the explorer and readers."""
    bad, out = setup
    write_root_attrs(out, **{"tessera:year": "2024"})
    msg = expect_error(bad, out, f"error: {out / '2024.zarr'}: tessera:year: '2024' is not of type 'integer'")
    assert msg.count(str(out / "2024.zarr")) == 1
    write_root_attrs(out, only={"zarr_conventions": [{"name": "geoemb:", "uuid": "0123"}]})
    expect_error(bad, out, "'schema_url' is a required property")
    # a geoemb: root (its uuid: builder/core/layout.py GEOEMB_UUID)
    write_root_attrs(out, only={"zarr_conventions": [{"name": "geoemb:", "uuid": "61c12cc5-0e28-4056-999a-480cf3fb7e4c"}]})
    expect_error(bad, out, "not a tessera: v1 year store but a geoemb: root")


def test_store_for_another_year(setup):
    bad, out = setup
    shutil.copytree(tile_dir(bad, NAME).parent, bad / EMBEDDINGS_DIR / "2023")
    (out / "2024.zarr").rename(out / "2023.zarr")
    expect_error(bad, out, "store is for year 2024, not 2023", year="2023")


def test_unwritable_target(setup, tmp_path):
    bad, _ = setup
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = run_cli("build", str(bad), "--year", "2024", "--store", str(blocker / "2024.zarr"), "--scheduler", "sync",
                check=False)
    assert p.returncode == 2 and "cannot create the store" in p.stderr and str(blocker) in p.stderr
    not_a_store = tmp_path / "stuff"
    not_a_store.mkdir()
    (not_a_store / "keep.txt").write_text("precious")
    p = run_cli("build", str(bad), "--year", "2024", "--store", str(not_a_store), "--scheduler", "sync", check=False)
    assert p.returncode == 2 and "not a Zarr store" in p.stderr
    assert sorted(x.name for x in not_a_store.iterdir()) == ["keep.txt"]


def test_missing_year_directory(setup):
    bad, out = setup
    p = run_cli("build", str(bad), "--year", "1999", "--out", str(out), check=False)
    assert p.returncode == 2 and "no tiles for year 1999" in p.stderr


# ------------------------------------------------ georeferencing, before any write --
BAD = "grid_0.05_50.85"


def relocate(root: Path, epsg: int, origin: tuple[float, float], pixel: float = 10.0) -> Path:
    """Give tile BAD's landmask another CRS, origin or pixel size (its pixels unchanged)."""
    import tifffile
    lm = root / LANDMASKS_DIR / f"{BAD}.tiff"
    mask = tifffile.imread(lm)
    write_geotiff(str(lm), mask, epsg, *origin, pixel=pixel)
    return lm


@pytest.mark.parametrize("bad_origin", [(float("nan"), 0), (0, float("inf")), (float("-inf"), float("nan"))])
def test_non_finite_origin(setup, tmp_path, bad_origin):
    bad, out = setup
    o = demo.tile_origin(0.05, 50.85, PX, 32631)
    relocate(bad, 32631, (o[0] if bad_origin[0] == 0 else bad_origin[0], o[1] if bad_origin[1] == 0 else bad_origin[1]))
    assert f"{BAD}.tiff" in expect_error(bad, out, "origin")
    assert f"{BAD}.tiff" in expect_first_build_refused(bad, tmp_path / "first", "is not finite")


@pytest.mark.parametrize("how", ["crs of another zone", "crs of the other hemisphere", "origin 0.2 degree north",
                                 "origin 0.15 degree west"])
def test_georeferencing_that_contradicts_the_tiles_name(setup, tmp_path, how):
    bad, out = setup
    o = demo.tile_origin(0.05, 50.85, PX, 32631)
    epsg, origin = {"crs of another zone": (32632, o), "crs of the other hemisphere": (32731, o),
                    "origin 0.2 degree north": (32631, (o[0], o[1] + 0.2 * 111_200)),
                    "origin 0.15 degree west": (32631, (o[0] - 0.15 * 70_200, o[1]))}[how]
    relocate(bad, epsg, origin)
    needle = "from the centre its name gives (0.05, 50.85)"
    assert f"{BAD}.tiff" in expect_error(bad, out, needle)
    assert f"{BAD}.tiff" in expect_first_build_refused(bad, tmp_path / "first", needle)


def test_a_tile_within_a_tenth_of_a_degree_of_its_name_is_accepted(setup):
    bad, out = setup
    o = demo.tile_origin(0.05, 50.85, PX, 32631)
    relocate(bad, 32631, (o[0] + 3000, o[1] - 3000))  # about 0.04 degree off: the tile still names its cell
    run_cli("build", str(bad), "--year", "2024", "--out", str(out), "--scheduler", "sync", "-q", "--no-global")


@pytest.mark.parametrize("pixel", [20.0, float("nan")])
def test_pixel_size_other_than_10m(setup, tmp_path, pixel):
    bad, out = setup
    relocate(bad, 32631, demo.tile_origin(0.05, 50.85, PX, 32631), pixel=pixel)
    assert f"{BAD}.tiff" in expect_error(bad, out, "v1 requires 10 m")
    expect_first_build_refused(bad, tmp_path / "first", "v1 requires 10 m")


def test_negative_scales(setup, tmp_path):
    bad, out = setup
    d = tile_dir(bad, BAD)
    s = np.load(d / f"{BAD}_scales.npy")
    s[10, 11] = -0.01
    np.save(d / f"{BAD}_scales.npy", s)
    assert "_scales.npy" in expect_error(bad, out, "scales contain a negative value (pixel row 10, col 11)")
    expect_first_build_refused(bad, tmp_path / "first", "scales contain a negative value")



def test_catalog_of_a_missing_or_storeless_directory(tmp_path):
    """`catalog` names the directory in one line instead of an internal error, and writes nothing."""
    p = run_cli("catalog", str(tmp_path / "nowhere"), check=False)
    assert "nowhere" in refused(p, "no such directory")
    (tmp_path / "empty").mkdir()
    p = run_cli("catalog", str(tmp_path / "empty"), check=False)
    assert "empty" in refused(p, "no tessera store")
    assert not (tmp_path / "empty" / "catalog.json").exists()


# ------------------------------------------------ tile names, pickled arrays --
def test_a_tile_name_with_a_trailing_newline_is_ignored_like_any_other_junk_name(tmp_path, world):
    """Only a directory named exactly grid_<lon>_<lat> is a tile.  `grid_-0.05_50.75\\n` (its files and landmask
    named the same way) is junk, like `grid_-0.05_50.75.bak`, `grid_-0.05_50.75 ` or `notes`: the store equals
    the one built without them."""
    good = tmp_path / "good"
    demo.write_tile(good, 2024, *GOOD, PX, world=world)
    junk = tmp_path / "junk"
    shutil.copytree(good, junk)
    for name in ("grid_-0.05_50.75\n", "grid_-0.05_50.75.bak", "grid_-0.05_50.75 "):
        demo.write_tile(junk, 2024, -0.05, 50.75, PX, world=world, name=name)
    tile_dir(junk, "notes").mkdir()
    assert "grid_-0.05_50.75\n" in {p.name for p in (junk / EMBEDDINGS_DIR / "2024").iterdir()}
    for root in (good, junk):
        run_cli("build", str(root), "--year", "2024", "--out", str(tmp_path / f"{root.name}-out"), "--scheduler", "sync",
                "-q", "--no-global")
    assert tree_digest(tmp_path / "junk-out" / "2024.zarr") == tree_digest(tmp_path / "good-out" / "2024.zarr")


@pytest.mark.parametrize("which", ["embeddings", "scales"])
def test_a_pickled_npy_is_refused_as_pickled_not_as_truncated(setup, which):
    """np.save(allow_pickle=True) of an object array: its header says dtype object ('|O'); refused for what it is."""
    bad, out = setup
    f = tile_dir(bad, BAD) / (f"{BAD}.npy" if which == "embeddings" else f"{BAD}_scales.npy")
    np.save(f, np.load(f).astype(object), allow_pickle=True)
    assert np.load(f, allow_pickle=True).dtype == object  # numpy itself wrote a pickled array
    assert f.name in expect_error(bad, out, "pickled object arrays are refused")
