"""Ground truth: the demo's class rasters as a Zarr store per year (builder/truth.py) listed in the catalog, and a
class map scored against it (app/tools/truth.py): the builder's stores read by zarr-python against the demo's
GeoTIFFs read by tifffile; the scores against scikit-learn's metrics on arrays with known answers; a classification
on CPython against numpy over zarr-python reads of the map's window and the truth; a truth store that is absent or
hostile is one line and the classification stands."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr

from app.tools import panes, truth
from builder import demo
from builder.errors import BuildError
from builder.geotiff import read_geoinfo
from builder.truth import write_truth_store
from conftest import run_async, run_cli
from tools_util import opened, pixel_lonlat

PLACES_ARGS = ["--px", "96", "--no-dense", "--years", "2024", "--scheduler", "threads", "-q"]


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory) -> tuple[Path, Path]:
    """(the demo's data directory, its tiles) of `builder demo` with small tiles, 2024 only."""
    base = tmp_path_factory.mktemp("truth-demo")
    run_cli("demo", "--out", str(base / "data"), "--tiles", str(base / "tiles"), "--record", str(base / "record"),
            *PLACES_ARGS)
    return base / "data", base / "tiles"


# ------------------------------------------------------------------------------------------------ the builder --
def test_the_truth_store_holds_the_demos_class_rasters_on_the_year_stores_grid(demo_data):
    data, tiles = demo_data
    store, gt = zarr.open_group(data / "2024.zarr", mode="r"), zarr.open_group(data / "truth" / "2024.zarr", mode="r")
    classes = json.loads((tiles / demo.TRUTH_DIR / "classes.json").read_text())
    assert gt.attrs["ground_truth"] == {"year": 2024, "classes": classes, "no_data": 255,
                                        "model_version": demo.MODEL_VERSION}
    rasters = sorted((tiles / demo.TRUTH_DIR / "2024").glob("*_classes.tiff"))
    assert len(rasters) == len(demo.PLACES)
    zones = sorted(n for n, g in store.groups() if "scales" in g)
    assert sorted(n for n, _ in gt.groups()) == zones
    checked = 0
    for path in rasters:
        info, want = read_geoinfo(str(path)), tifffile.imread(path)
        zone = next(z for z in zones if store[z].attrs["proj:code"] == f"EPSG:{info.epsg}")
        g, s = gt[zone], store[zone]
        for k in ("proj:code", "spatial:transform", "spatial:shape"):
            assert g.attrs[k] == s.attrs[k], k
        a, scales = g["classes"], s["scales"]
        assert (a.dtype, a.fill_value, a.shape) == (np.uint8, 255, scales.shape)
        # the year store's shards, each one chunk: a uint8 class is a byte, so the year store's 4 x 4 inner chunks
        # would give each shard an index as large as its data and a read thousands of chunks to decode
        assert (a.shards, a.chunks) == (scales.shards, scales.shards)
        t = s.attrs["spatial:transform"]
        r, c = round((t[5] - info.origin_y) / 10), round((info.origin_x - t[2]) / 10)
        got = a[r:r + want.shape[0], c:c + want.shape[1]]
        np.testing.assert_array_equal(got, want)
        checked += int((want != 255).sum())
    assert checked > 10_000


def test_the_catalog_lists_each_years_truth(demo_data):
    data, _ = demo_data
    cat = json.loads((data / "catalog.json").read_text())
    assert cat["stores"] == [{"year": 2024, "url": "2024.zarr", "truth": "truth/2024.zarr"}]


def test_a_truth_store_of_another_store_of_that_year_is_not_listed(demo_data, tmp_path):
    """Truth written for one year store says no more once another store of that year takes its place (a real store
    built into the demo's directory, say): the catalog lists it only beside the store it was made from."""
    from builder.catalog import write_catalog
    data = tmp_path / "data"
    shutil.copytree(demo_data[0], data)
    for _, zone in zarr.open_group(data / "2024.zarr", mode="r+").groups():
        zone.attrs["tessera:model_version"] = "another-model"
    zarr.consolidate_metadata(str(data / "2024.zarr"))
    write_catalog(data)
    assert json.loads((data / "catalog.json").read_text())["stores"] == [{"year": 2024, "url": "2024.zarr"}]


def test_a_rasters_no_data_never_overwrites_a_class_an_earlier_raster_laid():
    """Where class rasters overlap, a later one's 255 leaves the earlier one's class, as a no-data pixel of a
    later tile never overwrites data in the build."""
    from builder.core.grid import ZoneGrid
    from builder.truth import zone_classes
    grid = ZoneGrid(30, False, 600_000.0, 5_000_000.0, 4, 6, 256)
    first = np.array([[1, 1, 1, 1]] * 4, np.uint8)
    later = np.array([[255, 2, 2, 2]] * 4, np.uint8)  # 2 columns to the right of the first
    got = zone_classes(grid, [(30, False, 600_000.0, 5_000_000.0, first), (30, False, 600_020.0, 5_000_000.0, later)])
    assert got.tolist() == [[1, 1, 1, 2, 2, 2]] * 4


def test_a_refused_truth_store_leaves_the_old_one_whole(demo_data, tmp_path):
    data, tiles = demo_data
    out = tmp_path / "truth.zarr"
    shutil.copytree(data / "truth" / "2024.zarr", out)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bad = tmp_path / "bad_classes.tiff"
    good = sorted((tiles / demo.TRUTH_DIR / "2024").glob("*_classes.tiff"))
    from builder.geotiff import write_geotiff
    info = read_geoinfo(str(good[0]))
    write_geotiff(str(bad), np.zeros((8, 8), np.float32), info.epsg, info.origin_x, info.origin_y)
    with pytest.raises(BuildError, match="not uint8"):
        write_truth_store(data / "2024.zarr", 2024, [*good, bad], [{"class": 0, "name": "x", "color": "#000000"}], out)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad_classes.tiff", "truth.zarr"]  # no partial left


def test_truth_classes_of_one_name_are_refused_on_write_in_one_line_and_the_old_store_stands(demo_data, tmp_path):
    data, tiles = demo_data
    out = tmp_path / "truth.zarr"
    shutil.copytree(data / "truth" / "2024.zarr", out)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    rasters = sorted((tiles / demo.TRUTH_DIR / "2024").glob("*_classes.tiff"))
    classes = [{"class": 1, "name": "Wood", "color": "#000000"}, {"class": 2, "name": "town", "color": "#111111"},
               {"class": 3, "name": " WOOD", "color": "#222222"}]
    with pytest.raises(BuildError) as e:
        write_truth_store(data / "2024.zarr", 2024, rasters, classes, out)
    assert str(e.value) == f"{out}: ground_truth class 2 has the name of class 0 (trimmed, case-insensitive)"
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["truth.zarr"]  # no partial left


# ------------------------------------------------------------------------------------------------ the scores --
NAMES = {0: "water meadow", 1: "Wood", 2: "town", 3: "road"}


def test_scores_equal_scikit_learns_on_known_arrays():
    from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support
    # the map's classes: "wood " and " TOWN" match the truth's names trimmed and case-folded; "sea" has no match;
    # the truth's "water meadow" and "road" none on the map
    names = ["wood ", " TOWN", "sea"]
    pred = np.array([0, 0, 1, 1, 1, np.nan, 2, 0, 1, 0, 1, 2], np.float32)
    true = np.array([1, 2, 2, 2, 1, 1, 1, 255, 0, 3, 2, 2], np.uint8)
    got = truth.score(pred, true, names, NAMES)
    # by hand: pixels where both have a class: all but 5 (no map class) and 7 (no truth); of those, scored where
    # both classes are matched: 0, 1, 2, 3, 4, 10 (6 and 11 predicted "sea"; 8 truth "water meadow", 9 "road")
    keep = [0, 1, 2, 3, 4, 10]
    yt = np.array(["wood ", " TOWN"])[[{1: 0, 2: 1}[int(x)] for x in true[keep]]]
    yp = np.array(names)[pred[keep].astype(int)]
    assert got["pixels"] == 6 and got["unmatched"] == {"map": ["sea"], "truth": ["water meadow", "road"], "pixels": 4}
    assert got["accuracy"] == pytest.approx(accuracy_score(yt, yp)) == pytest.approx(4 / 6)
    p, r, f, s = precision_recall_fscore_support(yt, yp, labels=["wood ", " TOWN"], zero_division=0)
    assert [c["name"] for c in got["classes"]] == ["wood ", " TOWN"]
    np.testing.assert_allclose([[c[k] for k in ("precision", "recall", "f1")] for c in got["classes"]],
                               np.stack([p, r, f], 1))
    assert [c["support"] for c in got["classes"]] == list(s) == [2, 4]
    assert got["confusion"] == confusion_matrix(yt, yp, labels=["wood ", " TOWN"]).tolist() == [[1, 1], [1, 3]]


def test_random_maps_score_as_scikit_learn_says():
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support
    rng = np.random.default_rng(5)
    pred = rng.integers(0, 3, 5000).astype(np.float32)
    pred[rng.random(5000) < 0.1] = np.nan
    true = rng.choice([1, 2, 255], 5000, p=[0.5, 0.4, 0.1]).astype(np.uint8)
    got = truth.score(pred, true, ["wood", "town", "sea"], NAMES)
    ok = np.isfinite(pred) & (true != 255) & (pred != 2)
    yt, yp = np.where(true[ok] == 1, 0, 1), pred[ok].astype(int)
    assert got["pixels"] == ok.sum() and got["accuracy"] == pytest.approx((yt == yp).mean())
    assert got["confusion"] == confusion_matrix(yt, yp, labels=[0, 1]).tolist()
    p, r, f, s = precision_recall_fscore_support(yt, yp, labels=[0, 1], zero_division=0)
    np.testing.assert_allclose([c["f1"] for c in got["classes"]], f)


def test_map_classes_of_one_name_are_scored_as_one_class_and_said_so():
    """"Forest" and "forest " are one truth class: every pixel of either is scored as that class, under the first
    name, and the document lists them as merged."""
    pred = np.array([0, 1, 1, 2, 0, 2], np.float32)  # Forest, forest , forest , town, Forest, town
    true = np.array([1, 1, 2, 2, 1, 1], np.uint8)  # forest, forest, town, town, forest, forest
    got = truth.score(pred, true, ["Forest", "forest ", "town"], {1: "forest", 2: "town"})
    # by hand: as one class, pixels 0, 1, 3, 4 right, 2 (forest for town) and 5 (town for forest) wrong;
    # truth forest (0, 1, 4, 5): forest 3 times, town once; truth town (2, 3): forest once, town once
    assert got["pixels"] == 6 and got["accuracy"] == pytest.approx(4 / 6)
    assert got["confusion"] == [[3, 1], [1, 1]]
    assert [(c["name"], c["support"]) for c in got["classes"]] == [("Forest", 4), ("town", 2)]
    assert [c["precision"] for c in got["classes"]] == pytest.approx([3 / 4, 1 / 2])
    assert [c["recall"] for c in got["classes"]] == pytest.approx([3 / 4, 1 / 2])
    assert got["merged"] == [["Forest", "forest "]]
    assert got["unmatched"] == {"map": [], "truth": [], "pixels": 0}
    assert "Scored as one class: Forest = forest" in panes.ground_truth_html(dict(got, year=2024))


def test_truth_classes_of_one_name_are_refused_in_one_line():
    meta = {"attributes": {"ground_truth": {"classes": [{"class": 1, "name": "Wood"}, {"class": 2, "name": "town"},
                                                        {"class": 3, "name": " WOOD"}]}}}
    with pytest.raises(truth.TruthError) as e:
        truth.truth_classes(meta, "t.zarr")
    assert str(e.value) == "t.zarr: ground_truth class 2 has the name of class 0 (trimmed, case-insensitive)"


def test_no_shared_class_is_one_line_not_a_score():
    got = truth.score(np.array([0.0, 1.0]), np.array([1, 2], np.uint8), ["sea", "sky"], NAMES)
    assert got["pixels"] == 0 and "accuracy" not in got and got["error"].count("\n") == 0
    assert got["unmatched"]["pixels"] == 2


def test_a_coarse_maps_pixel_takes_its_blocks_most_frequent_class():
    t = np.array([[1, 1, 2, 255], [1, 2, 255, 255], [255, 255, 3, 3], [255, 255, 2, 3]], np.uint8)
    np.testing.assert_array_equal(truth.mode_blocks(t, 2), [[1, 2], [255, 3]])


# ------------------------------------------------------------------------------------------------ the explorer --
def reference_labels(tiles: Path, per_class: int = 12):
    """The first `per_class` of each class of the demo's reference labels (labels_2024.geojson) west of the
    meridian in Sussex (UTM zone 30): (lon, lat, class name)."""
    doc = json.loads((tiles / demo.TRUTH_DIR / "labels_2024.geojson").read_text())
    out, seen = [], {}
    for f in doc["features"]:
        (lon, lat), cls = f["geometry"]["coordinates"], f["properties"]["class"]
        if lon < 0 < lat and seen.get(cls, 0) < per_class:
            seen[cls] = seen.get(cls, 0) + 1
            out.append((lon, lat, cls))
    return out


def centre(store: Path):
    """A pixel of the first Sussex tile of utm30 with data."""
    v = zarr.open_array(store / "utm30" / "scales", mode="r")[:]
    rows, cols = np.nonzero(np.isfinite(v))
    return pixel_lonlat(store, "utm30", int(rows[len(rows) // 4]), int(cols[len(rows) // 4]))


def classified(data: Path, catalog: list[dict], labels, centre, **params):
    async def run():
        state = await opened(data / "2024.zarr", catalog=catalog)
        state.centre_view(*centre, 2500)
        await state.settle()
        for lon, lat, cls in labels:
            await state.tools.labels.add(lon, lat, cls=cls)
        layer = await state.tools.classify.classify("k-NN", seed=1, **params)
        return state, layer
    return run_async(run())


def expected(layer, gt_store: Path, names: list[str], classes: list[dict]) -> tuple[float, list, int, int]:
    """numpy over the layer's values and zarr-python's read of the truth under its windows (level 0): (accuracy,
    confusion matrix, pixels scored, pixels of truth classes the map does not name)."""
    ix = {c["name"].strip().casefold(): c["class"] for c in classes}
    to_t = np.array([ix[n.strip().casefold()] for n in names])
    pairs, apart = [], 0
    for p in layer.all:
        assert p.zone.level == 0
        r0, r1, c0, c1 = p.window
        t = zarr.open_array(gt_store / p.zone.name / "classes", mode="r")[r0:r1, c0:c1]
        ok = np.isfinite(p.values) & (t != 255)
        named = np.isin(t, to_t)
        apart += int((ok & ~named).sum())
        pairs.append((to_t[p.values[ok & named].astype(int)], t[ok & named]))
    yp, yt = (np.concatenate(x) for x in zip(*pairs))
    cm = [[int(((yt == to_t[i]) & (yp == to_t[j])).sum()) for j in range(len(names))] for i in range(len(names))]
    return float((yp == yt).mean()), cm, len(yt), apart


def test_a_classification_is_scored_against_the_truth_of_its_year(demo_data):
    data, tiles = demo_data
    classes = json.loads((tiles / demo.TRUTH_DIR / "classes.json").read_text())
    catalog = [{"year": 2024, "url": str(data / "2024.zarr"), "label": "2024", "truth": str(data / "truth" / "2024.zarr")}]
    state, layer = classified(data, catalog, reference_labels(tiles), centre(data / "2024.zarr"))
    assert layer is not None
    names = state.tools.classify.names
    gt = state.tools.classify.evaluation["ground_truth"]
    acc, cm, n, apart = expected(layer, data / "truth" / "2024.zarr", names, classes)
    assert n > 5000 and gt["pixels"] == n and gt["year"] == 2024
    assert gt["accuracy"] == pytest.approx(acc) and gt["confusion"] == cm
    # the labels name the classes of the western tiles only: the others are listed, their pixels not scored
    missing = [c["name"] for c in classes if c["name"] not in names]
    assert missing and gt["unmatched"] == {"map": [], "truth": missing, "pixels": apart}
    side = panes.evaluation_html(state.tools.classify.evaluation)
    assert f"Against ground truth: accuracy <b>{acc:.3f}</b> over {n:,} pixels" in side
    assert state.tools.classify.report()["ground_truth"] == gt  # what the GIS export writes beside the layer


@pytest.mark.parametrize("case,want", [
    ("absent", "no Zarr store at"),
    ("no classes", "no ground_truth classes"),
    ("hostile names", "has no name of 1 to 200 characters"),
    ("float classes", "is not a uint8 array of the zone's shape"),
])
def test_a_truth_store_absent_or_hostile_is_one_line_and_the_map_stands(demo_data, tmp_path, case, want):
    data, tiles = demo_data
    bad = tmp_path / "truth.zarr"
    if case != "absent":
        shutil.copytree(data / "truth" / "2024.zarr", bad)
        root = json.loads((bad / "zarr.json").read_text())
        if case == "no classes":
            root["attributes"]["ground_truth"] = {"year": 2024, "classes": "<script>x</script>"}
        if case == "hostile names":
            root["attributes"]["ground_truth"]["classes"][0]["name"] = "<b>" * 1000
        if case == "float classes":
            for z in ("utm30", "utm31", "utm34"):
                m = json.loads((bad / z / "classes" / "zarr.json").read_text())
                m["data_type"] = "float32"
                (bad / z / "classes" / "zarr.json").write_text(json.dumps(m))
                root["consolidated_metadata"]["metadata"][f"{z}/classes"]["data_type"] = "float32"
        (bad / "zarr.json").write_text(json.dumps(root))
    catalog = [{"year": 2024, "url": str(data / "2024.zarr"), "label": "2024", "truth": str(bad)}]
    state, layer = classified(data, catalog, reference_labels(tiles), centre(data / "2024.zarr"))
    assert layer is not None and state.tools.shown == "class"  # the map and its held-out score stand
    ev = state.tools.classify.evaluation
    assert "accuracy" in ev and set(ev["ground_truth"]) == {"year", "store", "error"}
    line = ev["ground_truth"]["error"]
    assert want in line and "\n" not in line and len(line) <= 300, line
    assert "<b>" not in panes.evaluation_html(ev).split("Against ground truth")[1]


def block_modes(t: np.ndarray, f: int) -> np.ndarray:
    """Each f x f block's most frequent class by np.bincount (the lowest on a tie; 255 where the block has none)."""
    h, w = t.shape[0] // f, t.shape[1] // f
    out = np.full((h, w), 255, np.uint8)
    for i in range(h):
        for j in range(w):
            counts = np.bincount(t[i * f:(i + 1) * f, j * f:(j + 1) * f].ravel(), minlength=256)[:255]
            if counts.any():
                out[i, j] = counts.argmax()
    return out


def test_a_zoomed_out_map_is_scored_against_the_truth_under_each_of_its_pixels(demo_data):
    data, tiles = demo_data
    classes = json.loads((tiles / demo.TRUTH_DIR / "classes.json").read_text())
    catalog = [{"year": 2024, "url": str(data / "2024.zarr"), "label": "2024", "truth": str(data / "truth" / "2024.zarr")}]
    state, _ = classified(data, catalog, reference_labels(tiles), centre(data / "2024.zarr"))

    async def zoom_out():
        state.centre_view(*centre(data / "2024.zarr"), 20_000)
        await state.settle()
        return await state.tools.classify.classify("k-NN", seed=1)
    layer = run_async(zoom_out())
    names, gt = state.tools.classify.names, state.tools.classify.evaluation["ground_truth"]
    by_name = {c["name"]: c["class"] for c in classes}
    to_t = np.array([by_name[n] for n in names])
    yp, yt = [], []
    for p in layer.all:
        k = p.zone.level
        assert k >= 1, k  # an overview level: pixels of 10 x 2^k m
        g = zarr.open_group(data / "truth" / "2024.zarr" / p.zone.name, mode="r")
        t0 = g.attrs["spatial:transform"]
        r0, r1, c0, c1 = p.window
        px = 10 * 2 ** k
        # the window's top-left corner on the truth's 10 m grid, from the level grid's corner
        R, C = round((t0[5] - (p.zone.grid.origin_n - r0 * px)) / 10), round((p.zone.grid.origin_e + c0 * px - t0[2]) / 10)
        full = np.full(((r1 - r0) * 2 ** k, (c1 - c0) * 2 ** k), 255, np.uint8)
        a = g["classes"][:]
        rows, cols = np.arange(full.shape[0]) + R, np.arange(full.shape[1]) + C
        ri, ci = (rows >= 0) & (rows < a.shape[0]), (cols >= 0) & (cols < a.shape[1])
        full[np.ix_(ri, ci)] = a[np.ix_(rows[ri], cols[ci])]
        t = block_modes(full, 2 ** k)
        ok = np.isfinite(p.values) & (t != 255)
        named = np.isin(t, to_t)
        yp.append(to_t[p.values[ok & named].astype(int)])
        yt.append(t[ok & named])
    yp, yt = np.concatenate(yp), np.concatenate(yt)
    assert len(yt) > 200 and gt["pixels"] == len(yt)
    assert gt["accuracy"] == pytest.approx(float((yp == yt).mean()))
