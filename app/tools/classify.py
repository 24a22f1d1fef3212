"""Classification of the view from the labels: k-NN (default), logistic regression, random forest, MLP (one
hidden layer of 64) or gradient boosting (HistGradientBoosting) (scikit-learn, loaded on first use), trained on
the labelled pixels' vectors, applied to every valid pixel of the view's region; every fit also reports its
held-out performance (app/tools/evaluate.py), and where the catalog gives the year's ground truth, its score
against it (app/tools/truth.py). The result is a class-map `Layer` (values: class index, NaN where none)
with a per-pixel confidence (the winning class's probability); pixels below the threshold are transparent.
"""
from __future__ import annotations

import time

import numpy as np
import param

from app import views
from app.tools import boosting, crossyear, evaluate, lazy, panes, region as reg, truth
from app.tools.tool import Tool
from app.tools.urlvalues import integer, number

METHODS = ["k-NN", "logistic regression", "random forest", "MLP", "gradient boosting"]


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
    if method == "MLP":
        from sklearn.neural_network import MLPClassifier
        return MLPClassifier(hidden_layer_sizes=(64,), max_iter=500, random_state=seed)
    if method == "gradient boosting":
        return boosting.classifier(n_train, seed)  # its leaf sized for the labels given
    raise ValueError(f"unknown classification method {method!r} (one of {', '.join(METHODS)})")


async def fit_predict(method, X, y, pixels, k=5, seed=0, step=None):
    """(class index, confidence) for every row of `pixels`; `step` (app/tools/steps.py) counts the blocks predicted."""
    await lazy.sklearn()
    model = estimator(method, len(X), k, seed).fit(X, y)
    proba = await lazy.chunked(model.predict_proba, pixels, step=step)
    idx = np.argmax(proba, axis=1)
    return model.classes_[idx].astype(np.int64), proba[np.arange(len(idx)), idx].astype(np.float32)


def class_rgba(values: np.ndarray, conf: np.ndarray, colours: list[str], threshold: float) -> np.ndarray:
    """Class colours where a class was given with confidence >= threshold; transparent elsewhere."""
    table = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] + [215] for c in colours] or [[0, 0, 0, 0]], np.uint8)
    out = np.zeros(values.shape + (4,), np.uint8)
    ok = np.isfinite(values) & (np.nan_to_num(conf, nan=-1) >= threshold)
    out[ok] = table[values[ok].astype(np.int64)]
    return out


def summary(values: np.ndarray, conf: np.ndarray, names: list[str], threshold: float,
            pixel_m: float = 10.0) -> list[tuple[str, int, float]]:
    """(class, pixels, km²) of the pixels shown at this threshold; pixels of `pixel_m` metres a side (an overview
    level's pixel is 10 x 2^k m)."""
    ok = np.isfinite(values) & (np.nan_to_num(conf, nan=-1) >= threshold)
    counts = np.bincount(values[ok].astype(np.intp), minlength=len(names))  # intp: int32 on wasm32
    return [(n, int(c), float(c) * (pixel_m / 1000.0) ** 2) for n, c in zip(names, counts)]


def legend_rows(parts, names: list[str], colours: list[str], threshold: float) -> list[tuple[str, str, int, float]]:
    """(class, colour, pixels, km²) shown of a class layer over all its zones; `parts`: each zone's (values,
    confidence) layer parts."""
    per_zone = [summary(p.values, c.values, names, threshold, p.zone.pixel) for p, c in parts]
    return [(n, colour, sum(z[i][1] for z in per_zone), sum(z[i][2] for z in per_zone))
            for i, (n, colour) in enumerate(zip(names, colours))]


class Classifier(Tool):
    tool_name, layer_name, continuous = "classify", "class", False
    url_settings = {"method": str, "k": integer, "seed": integer, "threshold": number, "train_year": integer,
                    "test_year": integer}
    tab, title = "classify", "Classify"

    method = param.Selector(objects=METHODS, default="k-NN", label="Method")
    k = param.Integer(5, bounds=(1, 100), label="k (k-NN)")
    seed = param.Integer(0, bounds=(0, None), label="Seed")
    threshold = param.Number(0.0, bounds=(0.0, 1.0), step=0.05, label="Confidence threshold")
    result = param.Parameter(None, doc="region.Layer of class indices, or None")
    evaluation = param.Dict(None, allow_None=True, doc="the last fit's held-out report (app/tools/evaluate.py)")
    train_year = param.Integer(None, allow_None=True, label="Train on the labels of year (blank: all)")
    test_year = param.Integer(None, allow_None=True, label="Apply to year (blank: the year shown)")
    run = param.Action(lambda self: self.ctx.spawn(self.classify()), label="Classify the view")

    def __init__(self, ctx, **kw):
        super().__init__(ctx, **kw)
        self.conf = None  # region.Layer of the last result's confidence (the same zones and windows)
        self.names: list[str] = []
        self.colours: list[str] = []
        self.param.watch(lambda e: self.recolour(), "threshold")
        ctx.labels.param.watch(lambda e: self.take_colours(ctx.labels), "classes")

    async def classify(self, method=None, **params) -> reg.Layer | None:
        ctx, labels = self.ctx, self.ctx.labels
        self.param.update(**{k: v for k, v in dict(params, method=method or self.method).items() if v is not None})
        revision = labels.revision  # the class set it trains on: changed before it ends, the result is not shown
        X, y, names = labels.training(self.train_year)
        if len(names) < 2:
            ctx.status = views.html("Label pixels of at least two classes first.")
            return None
        k, _ = evaluate.folds_for(y, names)
        async with ctx.step(f"Classification ({self.method})", evaluate.plan(len(X), k)) as step:
            t0 = time.perf_counter()
            region = await crossyear.read(ctx, self.test_year)
            if region is None:
                ctx.status = views.html("The view shows no zone of this store.")
                return None
            t1 = time.perf_counter()
            await lazy.sklearn(step)  # the first time: "…: loading scikit-learn…" in the status line
            X = region.fit(X)  # the labels' vectors as the region holds its pixels' (a nested depth: their first D)
            idx, conf = await fit_predict(self.method, X, y, region.pixels(), self.k, self.seed, step)
            t2 = time.perf_counter()
            evaluation = await evaluate.classification(lambda n: estimator(self.method, n, self.k, self.seed),
                                                       X, y, names, self.seed, self.method, step)
            if labels.revision != revision:
                ctx.status = views.html("Classification stopped: the label classes changed while it ran; run it "
                                        "again.")
                return None
            t3 = time.perf_counter()
            self.names, self.colours = names, [labels.colour(n) for n in names]
            conf = region.spread(conf)
            # the confidence rides in the class layer's zones as a second layer of the same windows
            self.conf = region.layer("confidence", conf)
            layer = region.layer("class", region.spread(idx.astype(np.float32)))
            t4 = time.perf_counter()
            year = self.test_year if self.test_year is not None else ctx.model.year
            found = ctx.truth(year)  # scored against the ground truth of the year the map is of, when it has one
            if found is not None:
                evaluation = dict(evaluation, ground_truth=await truth.against(*found, layer, names, year))
            self.evaluation = evaluation
            self.timing = {"read_ms": (t1 - t0) * 1000, "compute_ms": (t2 - t1) * 1000 + (t4 - t3) * 1000,
                           "evaluate_ms": (t3 - t2) * 1000 + (time.perf_counter() - t4) * 1000}
            self.result = self.coloured(layer)
            ctx.status = views.html("Classified ({}, {} labels, {} classes): {} in {:.0f} ms.", self.method, len(X),
                                    len(names), reg.describe(region),
                                    self.timing["read_ms"] + self.timing["compute_ms"]) + \
                crossyear.describe(ctx, self.train_year, self.test_year) + \
                views.html(" Held-out: {}.", f"accuracy {evaluation['accuracy']:.3f} ({evaluation['folds']}-fold)"
                           if "accuracy" in evaluation else evaluation["error"])
        return self.result

    def coloured(self, layer: reg.Layer) -> reg.Layer:
        """The class layer coloured at the threshold, each zone by its own confidence (self.conf's zones)."""
        return reg.joined([reg.replace(p, rgba=class_rgba(p.values, c.values, self.colours, self.threshold))
                           for p, c in zip(layer.all, self.conf.all)])

    def take_colours(self, labels) -> None:
        """The class map in the label classes' colours now: a class given another colour is redrawn in it at once."""
        now = [labels.colour(n) if n in labels.names() else c for n, c in zip(self.names, self.colours)]
        if now != self.colours:
            self.colours = now
            self.recolour()

    def recolour(self) -> None:
        if self.result is not None:
            self.result = self.coloured(self.result)

    def legend(self) -> list[tuple[str, str, int, float]]:
        """(class, colour, pixels, km²) of the shown class map, over all its zones."""
        if self.result is None:
            return []
        return legend_rows(zip(self.result.all, self.conf.all), self.names, self.colours, self.threshold)

    async def rerun(self, extra: dict):
        return await self.classify()

    def classes(self):
        return tuple(self.names), list(self.colours)

    def legend_key(self) -> list[tuple[str, str]]:
        return list(zip(self.names, self.colours)) if self.result is not None else []

    def report(self) -> dict | None:
        return self.evaluation or None

    async def link_store(self, settings: dict):
        """Applied to another year, the layer lies on that year's grid (app/tools/crossyear.py)."""
        year, model = settings.get("test_year"), self.ctx.model
        return None if year is None or model is None or year == model.year else await self.ctx.store(int(year))

    def verbs(self, api) -> dict:
        def classify(method="k-NN", params=None):
            p = dict(params or {})

            async def go():
                t0 = time.perf_counter()
                layer = await self.classify(str(method), **{k: v for k, v in p.items() if k in (
                    "k", "seed", "threshold", "train_year", "test_year")})
                return api.summary(layer, {"ms": (time.perf_counter() - t0) * 1000, "names": self.names,
                                           "evaluation": self.evaluation, **getattr(self, "timing", {})})
            return api.run(go)
        return {"classify": classify}

    def panel(self, fig):
        import panel as pn
        from app.layout import PANE_W

        def build():
            legend = pn.pane.HTML("", name="class-legend", width=PANE_W)

            def draw(*e):  # the class map's legend while it is the layer shown
                legend.object = panes.legend_html(self.legend()) if self.ctx.shown == self.layer_name else ""
            draw()
            self.ctx.labels.param.watch(draw, ["classes", "points", "active"])
            self.param.watch(draw, ["result"])
            self.ctx.watch_shown(draw)
            return pn.Column(pn.Param(self.param, show_name=False, parameters=[
                "method", "k", "seed", "threshold", "train_year", "test_year", "run"]), legend,
                pn.pane.HTML(pn.bind(panes.evaluation_html, self.param.evaluation), name="evaluation", width=PANE_W))
        return build
