"""The models of the tools' panel beyond k-NN and logistic regression, run in real headless Chromium (Pyodide,
scikit-learn 1.6.1 from the site's Pyodide lock) through the page API, each against scikit-learn 1.6.1 in CPython
fitted on zarr-python reads of the same labelled pixels with the parameters app/tools/classify.py and
app/tools/regress.py give: the MLP, random-forest and gradient-boosting class maps and their held-out accuracy; the
ridge, random-forest and gradient-boosting regression maps and their held-out R²; k-NN trained on the 2024 labels
applied to the 2023 store; similarity by positive and negative examples against numpy."""
from __future__ import annotations

import json

import numpy as np
import pytest

from browser_util import all_text, wait_state
from builder import demo
from test_browser_tools import call
from tools_util import pixel_lonlat, training_pixels, zone_vectors

pytestmark = pytest.mark.browser
SEED = 3
VALUE = {k: 10 * k + 5 for k in range(256)}  # each demo class's number: the label's class name, its value


def layer_10m(page, name):
    """(window, values) of a tool's layer in utm30 at 10 m (level 0): the grid the zarr-python reads below share."""
    d = json.loads(page.evaluate("(n) => window.tesseraApi.layerArray(n)", name))
    assert (d["zone"], d["level"]) == ("utm30", 0), (name, d["zone"], d["level"])
    r0, r1, c0, c1 = d["window"]
    vals = np.array([np.nan if x is None else x for x in d["values"]], np.float64).reshape(r1 - r0, c1 - c0)
    return (r0, r1, c0, c1), vals


def on_window(vectors, window, vals):
    """The window's vectors (N, B) where the zarr-python read has data, after checking the layer is NaN elsewhere."""
    r0, r1, c0, c1 = window
    sub = vectors[r0:r1, c0:c1]
    valid = np.isfinite(sub[..., 0])
    assert valid.sum() > 10_000 and np.isnan(vals[~valid]).all(), valid.sum()
    return sub[valid], valid


def leaf(n: int) -> int:
    """Gradient boosting's leaf for n labels, as docs/explorer.md states it: a tenth of them, 1 to 20."""
    return max(1, min(20, n // 10))


def held_out(make, X, y, cv):
    """Each fold's predictions by a model `make(n_train)` fitted on the rest (scikit-learn's folds)."""
    pred = np.empty_like(y)
    for train, test in cv.split(X, y):
        pred[test] = make(len(train)).fit(X[train], y[train]).predict(X[test])
    return pred


def held_out_accuracy(make, X, y):
    """scikit-learn's seeded stratified k-fold accuracy (k = 5, fewer when a class has fewer labels)."""
    from sklearn.model_selection import StratifiedKFold
    k = min(5, int(np.bincount(y).min()))
    return float((held_out(make, X, y, StratifiedKFold(k, shuffle=True, random_state=SEED)) == y).mean())


def test_models_agree_with_scikit_learn_in_cpython(page, server, site):
    from sklearn.ensemble import (HistGradientBoostingClassifier, HistGradientBoostingRegressor,
                                  RandomForestClassifier, RandomForestRegressor)
    from sklearn.linear_model import Ridge
    from sklearn.metrics import r2_score
    from sklearn.model_selection import KFold
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier

    store, old = site / "data" / "2024.zarr", site / "data" / "2023.zarr"
    page.goto(server + "index.html")
    assert wait_state(page) == "ready"
    v = zone_vectors(store, "utm30")
    rows, cols = np.nonzero(np.isfinite(v[..., 0]))
    page.evaluate("async ([lon, lat]) => await window.tesseraApi.view(lon, lat, 5000)",
                  list(pixel_lonlat(store, "utm30", int(rows.mean()), int(cols.mean()))))

    # one set of labels for every model: demo classes' pixels, each class named by its number
    train = training_pixels(store, "utm30", demo.World(), 2024, per_class=6)
    for r, c, k in train:
        assert call(page, "label", *pixel_lonlat(store, "utm30", r, c), str(VALUE[k])) is True
    X = np.stack([v[r, c] for r, c, _ in train])
    figures = []
    say = lambda line: (figures.append(line), print(line))  # shown as each is measured (-s)

    # ---- classifiers: the page's class map and held-out accuracy against scikit-learn's, same seed and version
    for method, make in (("MLP", lambda n: MLPClassifier(hidden_layer_sizes=(64,), max_iter=500, random_state=SEED)),
                         ("random forest", lambda n: RandomForestClassifier(n_estimators=100, random_state=SEED,
                                                                            n_jobs=1)),
                         ("gradient boosting", lambda n: HistGradientBoostingClassifier(min_samples_leaf=leaf(n),
                                                                                        random_state=SEED))):
        res = call(page, "classify", method, {"seed": SEED})
        assert res is not None, all_text(page)[-500:]
        y = np.array([res["names"].index(str(VALUE[k])) for _, _, k in train])
        window, got = layer_10m(page, "class")
        Xv, valid = on_window(v, window, got)
        agree = float((got[valid].astype(int) == make(len(y)).fit(X, y).predict(Xv)).mean())
        want_acc, page_acc = held_out_accuracy(make, X, y), res["evaluation"]["accuracy"]
        say(f"{method}: {agree:.4f} of {valid.sum()} px agree; held-out accuracy page {page_acc:.3f}, "
                       f"scikit-learn {want_acc:.3f}")
        assert agree >= 0.99, figures[-1]
        assert abs(page_acc - want_acc) <= 0.01, figures[-1]

    # ---- across years: k-NN trained on the 2024 labels, applied to the 2023 store's vectors (on 2023's grid)
    res = call(page, "classify", "k-NN", {"seed": SEED, "train_year": 2024, "test_year": 2023})
    assert res is not None, all_text(page)[-500:]
    assert "Trained on the labels of 2024, applied to 2023." in all_text(page)
    y = np.array([res["names"].index(str(VALUE[k])) for _, _, k in train])
    window, got = layer_10m(page, "class")
    knn = KNeighborsClassifier(n_neighbors=5).fit(X, y)
    Xv, valid = on_window(zone_vectors(old, "utm30"), window, got)
    agree = float((got[valid].astype(int) == knn.predict(Xv)).mean())
    # the same model on 2024's vectors of that window: how far a map of the shown year instead would agree
    r0, r1, c0, c1 = window
    both = valid & np.isfinite(v[r0:r1, c0:c1, 0])
    shown = float((got[both].astype(int) == knn.predict(v[r0:r1, c0:c1][both])).mean())
    say(f"k-NN 2024 -> 2023: {agree:.4f} of {valid.sum()} px agree (with 2024's vectors: {shown:.4f})")
    assert agree >= 0.99 and shown < 0.99, figures[-1]  # and the check tells the two years' maps apart

    # ---- similarity by examples: cosine to q = 2 mean(positives) - mean(negatives), numpy on the same pixels
    classes = sorted({k for _, _, k in train})
    for neg in (str(VALUE[classes[1]]), "all other classes"):
        pos = str(VALUE[classes[0]])
        res = call(page, "examples", pos, neg)
        assert res is not None, all_text(page)[-500:]
        is_pos = np.array([str(VALUE[k]) == pos for _, _, k in train])
        is_neg = np.array([str(VALUE[k]) == neg for _, _, k in train]) if neg != "all other classes" else ~is_pos
        assert (res["positives"], res["negatives"]) == (is_pos.sum(), is_neg.sum())
        q = 2 * X[is_pos].astype(np.float64).mean(0) - X[is_neg].astype(np.float64).mean(0)
        window, got = layer_10m(page, "examples")
        r0, r1, c0, c1 = window
        sub = v[r0:r1, c0:c1].astype(np.float64)
        want = sub @ q / (np.linalg.norm(sub, axis=-1) * np.linalg.norm(q))
        assert np.isfinite(want).sum() > 10_000
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5, equal_nan=True)

    # ---- regression on the same labels' numbers: the page's map against scikit-learn's, and the held-out R²
    yv = np.array([VALUE[k] for _, _, k in train], np.float64)
    for method, make in (("ridge", lambda n: Ridge(alpha=1.0)),
                         ("random forest", lambda n: RandomForestRegressor(n_estimators=100, random_state=SEED,
                                                                           n_jobs=1)),
                         ("gradient boosting", lambda n: HistGradientBoostingRegressor(min_samples_leaf=leaf(n),
                                                                                       random_state=SEED))):
        res = call(page, "regress", method, {"seed": SEED})
        assert res is not None, all_text(page)[-500:]
        window, got = layer_10m(page, "regression")
        Xv, valid = on_window(v, window, got)
        want = make(len(yv)).fit(X, yv).predict(Xv)
        fit = float(r2_score(want, got[valid]))
        pred = held_out(make, X, yv, KFold(min(5, len(yv)), shuffle=True, random_state=SEED))
        want_r2, page_r2 = float(r2_score(yv, pred)), res["evaluation"]["r2"]
        say(f"regression {method}: R² of the page's map on scikit-learn's {fit:.6f}, largest difference "
                       f"{np.abs(got[valid] - want).max():.3g} (values {yv.min():.0f}..{yv.max():.0f}); held-out R² "
                       f"page {page_r2:.4f}, scikit-learn {want_r2:.4f}")
        assert fit >= 0.99, figures[-1]
        np.testing.assert_allclose(got[valid], want, rtol=0, atol=1e-3 * np.ptp(yv))
        assert abs(page_r2 - want_r2) <= 0.01, figures[-1]
    print("\n" + "\n".join(figures))
