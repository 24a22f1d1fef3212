"""Regression of the view from labels with a numeric value: ridge, random forest or gradient boosting
(HistGradientBoosting) (scikit-learn, loaded on first use).

A label's value is its class name read as a number ("12.5", "-3", "1e3"): label pixels with classes named by their
values (or import a CSV whose class column holds numbers).  Every label class must be a number, else the tool says
which is not.  The model is fitted on the labelled pixels' vectors and applied to every valid pixel of the view's
region: a continuous `Layer` (float32, NaN where no data) coloured by the map's ramp over its own range (`range`,
the colour bar's ends).  Held-out: a seeded shuffled k-fold (KFold, evaluate.FOLDS folds, fewer with fewer
labels)'s predictions of each label by a model fitted without it: R², RMSE, the (actual, predicted) pairs of the
predicted-against-actual plot and the learning curve (R² against the number of training labels), by
app/tools/evaluate.py's rule; `report()` puts them in the GIS export.
"""
from __future__ import annotations

import math
import time

import numpy as np
import param

from app import render, views
from app.tools import boosting, evaluate, lazy, panes, region as reg
from app.tools.tool import Tool

METHODS = ["ridge", "random forest", "gradient boosting"]


def estimator(method: str, n_train: int, seed: int = 0):
    """The scikit-learn regressor for `method` fitted on `n_train` labels (the same construction a CPython check
    uses)."""
    if method == "ridge":
        from sklearn.linear_model import Ridge
        return Ridge(alpha=1.0)
    if method == "random forest":
        from sklearn.ensemble import RandomForestRegressor
        return RandomForestRegressor(n_estimators=100, random_state=seed, n_jobs=1)
    if method == "gradient boosting":
        return boosting.regressor(n_train, seed)  # its leaf sized for the labels given
    raise ValueError(f"unknown regression method {method!r} (one of {', '.join(METHODS)})")


def values_of(names: list[str]) -> tuple[np.ndarray | None, str | None]:
    """(the number each class name holds, None) or (None, the first name that is not a finite number)."""
    out = []
    for n in names:
        try:
            x = float(n)
        except ValueError:
            x = math.nan
        if not math.isfinite(x):
            return None, n
        out.append(x)
    return np.array(out, np.float64), None


def folds(n: int) -> int:
    """The held-out evaluation's folds for n labels (0: too few for one)."""
    k = min(evaluate.FOLDS, n)
    return k if k >= 2 else 0


async def held_out(method: str, X: np.ndarray, y: np.ndarray, seed: int, step=None) -> dict:
    """R², RMSE and (actual, predicted) of each label predicted by a model fitted on the other folds, and the
    learning curve (held-out R² against the number of training labels: app/tools/evaluate.py's rule); `step` (the
    tool's, app/tools/steps.py) is told each fit."""
    from sklearn.metrics import mean_squared_error, r2_score
    from sklearn.model_selection import KFold
    k = folds(len(y))
    base = {"method": method, "seed": int(seed), "labels": int(len(y))}
    if not k:
        return dict(base, error="no held-out score: at least 2 labels are needed")
    splits = list(KFold(k, shuffle=True, random_state=seed).split(X))
    pred, curve = await evaluate.learning_curve(
        lambda train, test: estimator(method, len(train), seed).fit(X[train], y[train]).predict(X[test]),
        splits, len(y), seed, lambda p: r2_score(y, p), "r2", step)
    return dict(base, folds=k, r2=float(r2_score(y, pred)), rmse=float(mean_squared_error(y, pred) ** 0.5),
                actual=y.tolist(), predicted=pred.tolist(), learning_curve=curve)


class Regressor(Tool):
    tool_name, layer_name = "regress", "regression"
    tab, title = "regression", "Regression"

    method = param.Selector(objects=METHODS, default="ridge", label="Regression")
    seed = param.Integer(0, bounds=(0, None), label="Seed")
    result = param.Parameter(None, doc="region.Layer of predicted values, or None")
    evaluation = param.Dict(None, allow_None=True, doc="the last fit's held-out R², RMSE, pairs and learning curve")
    run = param.Action(lambda self: self.ctx.spawn(self.regress()), label="Regress the view")

    def __init__(self, ctx, **kw):
        super().__init__(ctx, **kw)
        self.range = (0.0, 1.0)  # the colour bar's ends: the map's lowest and highest value

    async def regress(self, method=None, seed=None) -> reg.Layer | None:
        ctx = self.ctx
        self.param.update(**{k: v for k, v in (("method", method), ("seed", seed)) if v is not None})
        X, cls, names = ctx.labels.training()
        values, bad = values_of(names)
        if bad is not None:
            ctx.status = views.html("Regression needs labels whose class names are numbers: {} is not a number.", bad)
            return None
        if len(X) < 2:
            ctx.status = views.html("Label at least two pixels with numeric classes first.")
            return None
        y = values[cls]
        async with ctx.step(f"Regression ({self.method})", evaluate.plan(len(y), folds(len(y)))) as step:
            t0 = time.perf_counter()
            region = await ctx.region()
            if region is None:
                ctx.status = views.html("The view shows no zone of this store.")
                return None
            await lazy.sklearn(step)  # the first time: "…: loading scikit-learn…" in the status line
            X = region.fit(X)  # the labels' vectors as the region holds its pixels' (a nested depth: their first D)
            model = estimator(self.method, len(y), self.seed).fit(X, y)
            pred = (await lazy.chunked(model.predict, region.pixels(), step=step)).astype(np.float32)
            lo, hi = (float(pred.min()), float(pred.max())) if len(pred) else (0.0, 1.0)
            self.range = (lo, hi if hi > lo else lo + 1.0)
            self.evaluation = await held_out(self.method, X, y, self.seed, step)
            self.result = region.layer("regression", region.spread(pred),
                                       lambda v: render.ramp_rgba(v, -np.inf, *self.range))
            ev = self.evaluation
            ctx.status = views.html("Regression ({}, {} labels): {}; held-out {} ({:.0f} ms).", self.method, len(X),
                                    reg.describe(region), f"R² {ev['r2']:.3f}, RMSE {ev['rmse']:.4g}" if "r2" in ev
                                    else ev["error"], (time.perf_counter() - t0) * 1000)
        return self.result

    def report(self) -> dict | None:
        return self.evaluation or None

    def colour_bar(self) -> tuple[str, float, float] | None:
        return ("predicted value", *self.range) if self.result is not None else None

    def verbs(self, api) -> dict:
        def regress(method="ridge", params=None):
            p = dict(params or {})

            async def go():
                t0 = time.perf_counter()
                layer = await self.regress(str(method), **{k: int(v) for k, v in p.items() if k == "seed"})
                return api.summary(layer, {"ms": (time.perf_counter() - t0) * 1000, "range": list(self.range),
                                           "evaluation": self.evaluation})
            return api.run(go)
        return {"regress": regress}

    def panel(self, fig):
        import panel as pn
        from app.layout import PANE_W
        return lambda: pn.Column(pn.Param(self.param, show_name=False, parameters=["method", "seed", "run"]),
                                 pn.pane.HTML(pn.bind(panes.regression_html, self.param.evaluation, self.param.result),
                                              name="regression", width=PANE_W))
