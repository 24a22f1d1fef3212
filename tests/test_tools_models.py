"""More models, each against scikit-learn fitted here on zarr-python reads of the same labelled pixels:
MLP and HistGradientBoosting classifiers; regression (ridge, random forest, gradient boosting) from labels whose
class names are numbers, drawn as a continuous layer, with held-out R², RMSE and predicted-against-actual pairs."""
from __future__ import annotations

import numpy as np
import pytest

from app.tools import regress
from conftest import run_async
from tools_util import centre_of_data, opened, pixel_lonlat, training_pixels, zone_vectors

VALUE = {k: 3.5 * k - 2.0 for k in range(20)}  # a number per demo class: the labels' values


async def labelled(store, world, name):
    state = await opened(store)
    state.centre_view(*centre_of_data(store, "utm30"), 2500)
    await state.settle()
    train = training_pixels(store, "utm30", world, 2024, per_class=10)
    for r, c, k in train:
        await state.tools.labels.add(*pixel_lonlat(store, "utm30", r, c), cls=name(k))
    return state, train


def leaf(n: int) -> int:
    """Gradient boosting's leaf for n labels, as docs/explorer.md states it: a tenth of them, 1 to 20."""
    return max(1, min(20, n // 10))


def held_out(make, X, y, splits):
    """Each fold's predictions by a model `make(n_train)` fitted on the rest of the labels (or the fold's cut)."""
    pred = np.empty(len(y), dtype=np.float64)
    for train, test in splits:
        pred[test] = make(len(train)).fit(X[train], y[train]).predict(X[test])
    return pred


def window_vectors(store, layer):
    v = zone_vectors(store, "utm30")
    r0, r1, c0, c1 = layer.window
    sub = v[r0:r1, c0:c1]
    return sub, np.isfinite(sub[..., 0])


@pytest.mark.parametrize("method", ["MLP", "gradient boosting"])
def test_mlp_and_gradient_boosting_class_maps_agree_with_scikit_learn(store, world, method):
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.neural_network import MLPClassifier

    state, train = run_async(labelled(store, world, lambda k: f"class {k}"))
    layer = run_async(state.tools.classify.classify(method, seed=4))
    assert layer is not None, state.status
    names = state.tools.classify.names
    v = zone_vectors(store, "utm30")
    X = np.stack([v[r, c] for r, c, _ in train])
    y = np.array([names.index(f"class {k}") for _, _, k in train])
    est = (MLPClassifier(hidden_layer_sizes=(64,), max_iter=500, random_state=4) if method == "MLP"
           else HistGradientBoostingClassifier(min_samples_leaf=leaf(len(y)), random_state=4)).fit(X, y)
    sub, valid = window_vectors(store, layer)
    agree = float((layer.values[valid].astype(int) == est.predict(sub[valid])).mean())
    assert agree >= 0.99, agree
    ev = state.tools.classify.evaluation
    assert ev["method"] == method and ev["folds"] == min(5, int(np.bincount(y).min())) and 0.0 <= ev["accuracy"] <= 1.0


@pytest.mark.parametrize("method", regress.METHODS)
def test_regression_from_numeric_labels_agrees_with_scikit_learn(store, world, method):
    from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
    from sklearn.linear_model import Ridge
    from sklearn.metrics import mean_squared_error, r2_score
    from sklearn.model_selection import KFold

    state, train = run_async(labelled(store, world, lambda k: f"{VALUE[k]:g}"))
    layer = run_async(state.tools.regress.regress(method, seed=5))
    assert layer is not None, state.status
    assert state.tools.shown == "regression"
    v = zone_vectors(store, "utm30")
    X = np.stack([v[r, c] for r, c, _ in train])
    y = np.array([VALUE[k] for _, _, k in train])
    make = {"ridge": lambda n: Ridge(alpha=1.0),
            "random forest": lambda n: RandomForestRegressor(n_estimators=100, random_state=5, n_jobs=1),
            "gradient boosting": lambda n: HistGradientBoostingRegressor(min_samples_leaf=leaf(n),
                                                                         random_state=5)}[method]
    sub, valid = window_vectors(store, layer)
    want = make(len(y)).fit(X, y).predict(sub[valid])
    got = layer.values[valid]
    assert np.isnan(layer.values[~valid]).all() and valid.sum() > 1000
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * np.ptp(y))
    # held-out: a seeded 5-fold's predictions, R² and RMSE as scikit-learn gives them
    ev = state.tools.regress.evaluation
    pred = held_out(make, X, y, KFold(5, shuffle=True, random_state=5).split(X))
    assert ev["folds"] == 5 and ev["labels"] == len(y)
    assert ev["r2"] == pytest.approx(r2_score(y, pred), abs=0.01)
    assert ev["rmse"] == pytest.approx(mean_squared_error(y, pred) ** 0.5, rel=0.01)
    np.testing.assert_allclose(sorted(ev["actual"]), sorted(y))
    assert len(ev["predicted"]) == len(y)
    # the continuous layer's colours: a ramp over the map's range, transparent where no data
    assert (layer.rgba[..., 3] > 0).sum() == valid.sum()
    lo, hi = state.tools.regress.range
    assert lo == pytest.approx(float(np.nanmin(layer.values))) and hi == pytest.approx(float(np.nanmax(layer.values)))


def test_regression_refuses_labels_that_are_not_numbers(store, world):
    state, train = run_async(labelled(store, world, lambda k: f"{VALUE[k]:g}"))
    for bad in ("water", "<i>7</i>"):
        run_async(state.tools.labels.add(*pixel_lonlat(store, "utm30", *train[0][:2]), cls=bad))
        assert run_async(state.tools.regress.regress("ridge")) is None
        assert "number" in state.status and (bad in state.status if bad == "water" else
                                             "<i>" not in state.status and "&lt;i&gt;7" in state.status)
        state.tools.labels.delete(bad)
    assert run_async(state.tools.regress.regress("ridge")) is not None


def reference_curve(make, X, y, seed, fractions=(0.2, 0.4, 0.6, 0.8, 1.0)):
    """[(mean training labels, held-out R²)] by scikit-learn's cross_val_predict over a seeded shuffled 5-fold whose
    training folds are cut to a seeded fraction (numpy's default_rng(seed), drawn fraction by fraction and fold by
    fold, as docs/explorer.md states the scheme)."""
    from sklearn.metrics import r2_score
    from sklearn.model_selection import KFold
    splits = list(KFold(5, shuffle=True, random_state=seed).split(X))
    rng = np.random.default_rng(seed)
    out = []
    for frac in fractions:
        cut = [(np.sort(rng.permutation(tr)[:max(2, int(round(frac * len(tr))))]) if frac < 1.0 else tr, te)
               for tr, te in splits]
        pred = held_out(make, X, y, cut)
        out.append((int(round(np.mean([len(tr) for tr, _ in cut]))), r2_score(y, pred)))
    return out


@pytest.mark.parametrize("method", regress.METHODS)
def test_regression_learning_curve_is_in_the_page_api_side_bar_and_export(store, world, tmp_path, method):
    import io
    import json
    import zipfile

    from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
    from sklearn.linear_model import Ridge

    from app import layers
    from app.tools import api, panes

    state, train = run_async(labelled(store, world, lambda k: f"{VALUE[k]:g}"))
    got = run_async(api.commands(state)["regress"](method, {"seed": 7}))  # the page API's verb
    assert got is not None, state.status
    ev = state.tools.regress.evaluation
    assert got["evaluation"] == ev and "learning_curve" in ev
    v = zone_vectors(store, "utm30")
    X = np.stack([v[r, c] for r, c, _ in train])
    y = np.array([VALUE[k] for _, _, k in train])
    make = {"ridge": lambda n: Ridge(alpha=1.0),
            "random forest": lambda n: RandomForestRegressor(n_estimators=100, random_state=7, n_jobs=1),
            "gradient boosting": lambda n: HistGradientBoostingRegressor(min_samples_leaf=leaf(n),
                                                                         random_state=7)}[method]
    want = reference_curve(make, X, y, 7)
    curve = ev["learning_curve"]
    assert [pt["labels"] for pt in curve] == [n for n, _ in want]
    np.testing.assert_allclose([pt["r2"] for pt in curve], [r2 for _, r2 in want], atol=0.01)
    assert curve[-1]["r2"] == pytest.approx(ev["r2"])  # all of each fold's labels: the headline held-out R²
    # the side bar shows the curve beside R² and RMSE
    text = panes.regression_html(ev)
    assert "learning curve" in text and f"{curve[0]['labels']}: {curve[0]['r2']:.3f}" in text
    # the GIS bundle carries the evaluation (R², RMSE, the curve) beside the map, as a class map's does
    file, data, _, _ = run_async(layers.download(state, "regression", "gis"))
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert "tessera-2024-regression-evaluation.json" in z.namelist(), z.namelist()
        exported = json.loads(z.read("tessera-2024-regression-evaluation.json"))
    assert exported == json.loads(json.dumps(ev))
    assert {"r2", "rmse", "learning_curve"} <= set(exported) and len(exported["learning_curve"]) == len(want)
