"""A class map scored against the demo's ground truth in real headless Chromium: the demo's reference labels
(labels_2024.geojson) imported, k-NN run through the page API, and its ground_truth block (accuracy and confusion
matrix) checked against numpy over the page's own layer values (layerArray) and the truth store read by zarr-python,
for the shown year and for the model applied to 2023 (scored against 2023's truth); the side bar shows it. A
catalog whose truth URL holds no store: one line in its place, and the class map stands."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
import zarr

from browser_util import all_text, wait_state, wait_text
from builder import demo
from test_browser_tools import call
from tools_util import pixel_lonlat

pytestmark = pytest.mark.browser


def parts(page) -> list[dict]:
    d = json.loads(page.evaluate("(n) => window.tesseraApi.layerArray(n)", "class"))
    return d["parts"]


def expected(page, truth_store, names: list[str], classes: list[dict]) -> tuple[float, list, int]:
    """numpy: the page's class layer (every zone's window, level 0) against the truth read by zarr-python."""
    by_name = {c["name"].strip().casefold(): c["class"] for c in classes}
    to_t = np.array([by_name[n.strip().casefold()] for n in names])
    yp, yt = [], []
    for p in parts(page):
        assert p["level"] == 0, p["level"]
        r0, r1, c0, c1 = p["window"]
        vals = np.array([np.nan if x is None else x for x in p["values"]], np.float64).reshape(r1 - r0, c1 - c0)
        t = zarr.open_array(truth_store / p["zone"] / "classes", mode="r")[r0:r1, c0:c1]
        ok = np.isfinite(vals) & (t != 255)
        yp.append(to_t[vals[ok].astype(int)])
        yt.append(t[ok])
    yp, yt = np.concatenate(yp), np.concatenate(yt)
    cm = [[int(((yt == to_t[i]) & (yp == to_t[j])).sum()) for j in range(len(names))] for i in range(len(names))]
    return float((yp == yt).mean()), cm, len(yt)


def view_utm30(page, store):
    s = zarr.open_array(store / "utm30" / "scales", mode="r")[:]
    rows, cols = np.nonzero(np.isfinite(s))
    lonlat = pixel_lonlat(store, "utm30", int(rows.mean()), int(cols.mean()))
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 5000)", list(lonlat))


def test_the_class_map_is_scored_against_the_ground_truth(page, server, site, site_work):
    data, gt_dir = site / "data", site_work / "tiles" / demo.TRUTH_DIR
    cat = json.loads((data / "catalog.json").read_text())
    assert [s.get("truth") for s in cat["stores"]] == ["truth/2023.zarr", "truth/2024.zarr"]
    classes = json.loads((gt_dir / "classes.json").read_text())
    page.goto(server + "index.html")
    assert wait_state(page) == "ready"
    view_utm30(page, data / "2024.zarr")
    labels = (gt_dir / "labels_2024.geojson").read_text()
    n_labels = len(json.loads(labels)["features"])
    assert call(page, "importLabels", labels, "labels_2024.geojson") == n_labels

    res = call(page, "classify", "k-NN", {"seed": 0})
    assert res is not None, all_text(page)[-500:]
    names, gt = res["names"], res["evaluation"]["ground_truth"]
    acc, cm, n = expected(page, data / "truth" / "2024.zarr", names, classes)
    print(f"\nground truth 2024: accuracy {gt['accuracy']:.4f} over {gt['pixels']} px (numpy {acc:.4f} over {n})")
    assert n > 10_000 and gt["year"] == 2024 and gt["pixels"] == n
    assert gt["accuracy"] == pytest.approx(acc, abs=1e-12) and gt["confusion"] == cm
    assert gt["unmatched"] == {"map": [], "truth": [], "pixels": 0}  # the reference labels name every class
    # the GIS export's evaluation JSON carries the same block
    from test_browser_exports import api_bytes
    with zipfile.ZipFile(io.BytesIO(api_bytes(page, "exportGIS", "class")[0])) as z:
        assert json.loads(z.read("tessera-2024-class-evaluation.json"))["ground_truth"] == gt
    page.locator(".bk-tab", has_text="Classify").click()
    wait_text(page, "Against ground truth: accuracy")
    shown = " ".join(all_text(page).split())  # the page's text nodes, spaces collapsed (the figure is in bold)
    assert f"Against ground truth: accuracy {acc:.3f} over {n:,} pixels (2024 truth)" in shown

    # the 2024 labels' model applied to 2023: scored against 2023's truth, on 2023's grid
    res = call(page, "classify", "k-NN", {"seed": 0, "train_year": 2024, "test_year": 2023})
    assert res is not None, all_text(page)[-500:]
    gt = res["evaluation"]["ground_truth"]
    acc23, cm23, n23 = expected(page, data / "truth" / "2023.zarr", res["names"], classes)
    assert gt["year"] == 2023 and gt["pixels"] == n23 > 10_000
    assert gt["accuracy"] == pytest.approx(acc23, abs=1e-12) and gt["confusion"] == cm23
    # and 2024's truth would score it otherwise: the check tells the two years apart
    assert expected(page, data / "truth" / "2024.zarr", res["names"], classes)[1] != cm23


def test_a_catalog_whose_truth_is_absent_gives_one_line_and_the_map(page, server, site):
    data = site / "data"
    bad = data / "truth-absent"
    bad.mkdir(exist_ok=True)
    (bad / "catalog.json").write_text(json.dumps({"stores": [
        {"year": 2024, "url": "../2024.zarr", "truth": "nowhere/<b>2024</b>.zarr"}]}))
    page.goto(server + "index.html?catalog=data/truth-absent/catalog.json")
    assert wait_state(page) == "ready"
    view_utm30(page, data / "2024.zarr")
    store = data / "2024.zarr"
    s = zarr.open_array(store / "utm30" / "scales", mode="r")[:]
    rows, cols = np.nonzero(np.isfinite(s))
    for i, k in enumerate(np.linspace(0, len(rows) - 1, 12).astype(int)):
        assert call(page, "label", *pixel_lonlat(store, "utm30", int(rows[k]), int(cols[k])), f"c{i % 2}") is True
    res = call(page, "classify", "k-NN", {"seed": 0})
    assert res is not None and res["evaluation"]["folds"] >= 2, all_text(page)[-500:]
    gt = res["evaluation"]["ground_truth"]
    assert set(gt) == {"year", "store", "error"} and "\n" not in gt["error"] and "no Zarr store" in gt["error"]
    assert parts(page)  # the class map stands
    page.locator(".bk-tab", has_text="Classify").click()
    wait_text(page, "Against ground truth (2024 truth): no Zarr store at")
