"""Classification of the view from the labels: k-NN (default), logistic regression or random forest
(scikit-learn, loaded on first use), trained on the labelled pixels' vectors, applied to every valid
pixel of the view's region. The result is a class-map `Layer` (values: class index, NaN where none)
with a per-pixel confidence (the winning class's probability); pixels below the threshold are transparent.
"""
from __future__ import annotations

import time

import numpy as np
import param

from app import views
from app.tools import lazy, region as reg

METHODS = ["k-NN", "logistic regression", "random forest"]
PIXEL_KM2 = 1e-4  # a 10 m x 10 m pixel


def estimator(method: str, n_train: int, k: int = 5, seed: int = 0):
    """The scikit-learn estimator for `method` (the same construction a CPython check uses)."""
    if method == "k-NN":
        from sklearn.neighbors import KNeighborsClassifier
        return KNeighborsClassifier(n_neighbors=max(1, min(k, n_train)))
    if method == "logistic regression":
        from sklearn.linear_model import LogisticRegression
        return LogisticRegression(max_iter=1000, random_state=seed)
    if method == "random forest":
        from sklearn.ensemble import RandomForestClassifier
        return RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=1)
    raise ValueError(f"unknown classification method {method!r} (one of {', '.join(METHODS)})")


async def fit_predict(method, X, y, pixels, k=5, seed=0):
    """(class index, confidence) for every row of `pixels`."""
    await lazy.sklearn()
    model = estimator(method, len(X), k, seed).fit(X, y)
    proba = await lazy.chunked(model.predict_proba, pixels)
    idx = np.argmax(proba, axis=1)
    return model.classes_[idx].astype(np.int64), proba[np.arange(len(idx)), idx].astype(np.float32)


def class_rgba(values: np.ndarray, conf: np.ndarray, colours: list[str], threshold: float) -> np.ndarray:
    """Class colours where a class was given with confidence >= threshold; transparent elsewhere."""
    table = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] + [215] for c in colours] or [[0, 0, 0, 0]], np.uint8)
    out = np.zeros(values.shape + (4,), np.uint8)
    ok = np.isfinite(values) & (np.nan_to_num(conf, nan=-1) >= threshold)
    out[ok] = table[values[ok].astype(np.int64)]
    return out


def summary(values: np.ndarray, conf: np.ndarray, names: list[str], threshold: float) -> list[tuple[str, int, float]]:
    """(class, pixels, km²) of the pixels shown at this threshold."""
    ok = np.isfinite(values) & (np.nan_to_num(conf, nan=-1) >= threshold)
    counts = np.bincount(values[ok].astype(np.intp), minlength=len(names))  # intp: int32 on wasm32
    return [(n, int(c), float(c) * PIXEL_KM2) for n, c in zip(names, counts)]


class Classifier(param.Parameterized):
    method = param.Selector(objects=METHODS, default="k-NN", label="Method")
    k = param.Integer(5, bounds=(1, 100), label="k (k-NN)")
    seed = param.Integer(0, bounds=(0, None), label="Seed")
    threshold = param.Number(0.0, bounds=(0.0, 1.0), step=0.05, label="Confidence threshold")
    result = param.Parameter(None, doc="region.Layer of class indices, or None")
    run = param.Action(lambda self: self.app.spawn(self.classify()), label="Classify the view")

    def __init__(self, app, **kw):
        super().__init__(**kw)
        self.app = app
        self.conf = None  # (H, W) confidence of the last result
        self.names: list[str] = []
        self.colours: list[str] = []
        self.param.watch(lambda e: self.recolour(), "threshold")

    async def classify(self, method=None, **params) -> reg.Layer | None:
        app = self.app
        self.param.update(**{k: v for k, v in dict(params, method=method or self.method).items() if v is not None})
        X, y, names = app.tools.labels.training()
        if len(names) < 2:
            app.status = views.html("Label pixels of at least two classes first.")
            return None
        t0 = time.perf_counter()
        region = await reg.read_tool(app)
        if region is None:
            app.status = views.html("The view shows no zone of this store.")
            return None
        t1 = time.perf_counter()
        idx, conf = await fit_predict(self.method, X, y, region.pixels(), self.k, self.seed)
        self.names, self.colours = names, [app.tools.labels.colour(n) for n in names]
        self.conf = region.spread(conf)
        values = region.spread(idx.astype(np.float32))
        self.timing = {"read_ms": (t1 - t0) * 1000, "compute_ms": (time.perf_counter() - t1) * 1000}
        self.result = reg.Layer("class", region.zone, region.window, values,
                                class_rgba(values, self.conf, self.colours, self.threshold))
        app.status = views.html("Classified ({}, {} labels, {} classes): {} in {:.0f} ms.", self.method, len(X),
                                len(names), reg.describe(region), self.timing["read_ms"] + self.timing["compute_ms"])
        return self.result

    def recolour(self) -> None:
        r = self.result
        if r is not None:
            self.result = reg.Layer(r.name, r.zone, r.window, r.values,
                                    class_rgba(r.values, self.conf, self.colours, self.threshold))

    def legend(self) -> list[tuple[str, str, int, float]]:
        """(class, colour, pixels, km²) of the shown class map."""
        if self.result is None:
            return []
        rows = summary(self.result.values, self.conf, self.names, self.threshold)
        return [(n, c, k, a) for (n, k, a), c in zip(rows, self.colours)]
