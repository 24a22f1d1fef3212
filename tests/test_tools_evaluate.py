"""Every classification reports held-out performance, checked against scikit-learn run here on zarr-python reads
of the same labelled pixels: a seeded stratified k-fold's predictions (accuracy, per-class precision, recall, F1,
confusion matrix) and a learning curve (held-out accuracy against the number of training labels)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from app.tools import panes
from conftest import run_async
from tools_util import centre_of_data, opened, pixel_lonlat, training_pixels, zone_vectors

HOSTILE = "<script>window.__pwned=1</script>"


async def labelled(store, world, per_class=10):
    state = await opened(store)
    state.centre_view(*centre_of_data(store, "utm30"), 2500)
    await state.settle()
    train = training_pixels(store, "utm30", world, 2024, per_class=per_class)
    for r, c, k in train:
        await state.tools.labels.add(*pixel_lonlat(store, "utm30", r, c), cls=HOSTILE if k == train[0][2] else f"class {k}")
    return state, train


def reference(method, X, y, n_classes, seed, folds):
    """Held-out predictions of the same estimator by scikit-learn's own cross_val_predict."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.neighbors import KNeighborsClassifier
    est = {"k-NN": KNeighborsClassifier(n_neighbors=5),
           "logistic regression": LogisticRegression(max_iter=1000, random_state=seed),
           "random forest": RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=1)}[method]
    return cross_val_predict(est, X, y, cv=StratifiedKFold(folds, shuffle=True, random_state=seed))


@pytest.mark.parametrize("method", ["k-NN", "logistic regression", "random forest"])
def test_held_out_scores_agree_with_scikit_learn(store, world, method):
    from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support

    async def run():
        state, train = await labelled(store, world)
        layer = await state.tools.classify.classify(method, seed=2)
        assert layer is not None
        return state, train
    state, train = run_async(run())
    ev = state.tools.classify.evaluation
    names = state.tools.classify.names
    v = zone_vectors(store, "utm30")
    X = np.stack([v[r, c] for r, c, _ in train])
    y = np.array([names.index(HOSTILE if k == train[0][2] else f"class {k}") for _, _, k in train])
    folds = min(5, int(np.bincount(y).min()))  # stratified: no more folds than the rarest class has labels
    assert folds >= 3 and ev["folds"] == folds and ev["labels"] == len(y) and ev["seed"] == 2 and ev["method"] == method
    pred = reference(method, X, y, len(names), 2, folds)
    assert ev["accuracy"] == pytest.approx(accuracy_score(y, pred), abs=0.01)
    p, r, f, s = precision_recall_fscore_support(y, pred, labels=range(len(names)), zero_division=0)
    got = ev["classes"]
    assert [c["name"] for c in got] == names and [c["support"] for c in got] == list(s)
    for key, want in (("precision", p), ("recall", r), ("f1", f)):
        np.testing.assert_allclose([c[key] for c in got], want, atol=0.01 if method == "random forest" else 1e-9)
    cm = np.array(ev["confusion"])
    if method != "random forest":  # deterministic: the same held-out predictions
        np.testing.assert_array_equal(cm, confusion_matrix(y, pred, labels=range(len(names))))
    assert cm.sum() == len(y)
    # the learning curve: held-out accuracy at growing numbers of training labels, the last all of each fold's
    curve = ev["learning_curve"]
    sizes = [pt["labels"] for pt in curve]
    assert sizes == sorted(sizes) and len(sizes) >= 3 and sizes[-1] == round(len(y) * (folds - 1) / folds)
    assert curve[-1]["accuracy"] == pytest.approx(ev["accuracy"], abs=0.05)
    assert all(0.0 <= pt["accuracy"] <= 1.0 for pt in curve)
    # the side bar's table shows the names as text, and the page API's answer is JSON
    text = panes.evaluation_html(ev)
    assert HOSTILE not in text and "&lt;script&gt;" in text and "held-out" in text
    json.dumps(ev)


def test_too_few_labels_for_a_held_out_score_says_so(store, world):
    async def run():
        state, _ = await labelled(store, world, per_class=3)
        names = state.tools.classify  # 3 labels a class: a 3-fold split
        await names.classify("k-NN")
        ev = state.tools.classify.evaluation
        assert ev["folds"] == 3
        # a class with a single label: no stratified split is possible
        await state.tools.labels.add(*pixel_lonlat(store, "utm30", *np.argwhere(np.isfinite(
            zone_vectors(store, "utm30")[..., 0]))[7]), cls="lonely")
        assert await state.tools.classify.classify("k-NN") is not None
        ev = state.tools.classify.evaluation
        assert "lonely" in ev["error"] and "at least 2 labels" in ev["error"]
        assert "at least 2 labels" in panes.evaluation_html(ev)
    run_async(run())
