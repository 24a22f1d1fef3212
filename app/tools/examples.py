"""Similarity from positive and negative examples: the labels of one class are the positives, those of another
class (or of all the other classes, or none) the negatives; the view's map is every pixel's cosine to the query
q = 2 x mean(positives) - mean(negatives) (mean(positives) without negatives), computed like similarity search
(Region.cosines: on the full vectors, on a nested depth's first values (the labels' vectors cut to them), or on
the compact code itself), in every zone the view shows.
"""
from __future__ import annotations

import time

import numpy as np
import param

from app import render, views
from app.tools import region as reg
from app.tools.tool import Tool

ALL_OTHERS = "all other classes"
NONE = "none"


def query(X: np.ndarray, y: np.ndarray, pos: int, neg: int | str) -> tuple[np.ndarray, int, int]:
    """(q, number of positives, number of negatives) from labelled vectors X, class indices y."""
    p = X[y == pos].astype(np.float64)
    if neg == NONE:
        return p.mean(0), len(p), 0
    n = X[(y != pos) if neg == ALL_OTHERS else (y == neg)].astype(np.float64)
    if not len(n):
        return p.mean(0), len(p), 0
    return 2 * p.mean(0) - n.mean(0), len(p), len(n)


class Examples(Tool):
    tool_name, layer_name = "examples", "examples"
    # similarity to pixels is the side bar's (its toggle, threshold, source and mode: app/tools/similarity.py); this
    # tab's is similarity to label classes
    tab, title = "similarity", "Similarity"

    positive = param.String("", label="Positive class")
    negative = param.String(ALL_OTHERS, label=f"Negative class (a class, '{ALL_OTHERS}' or '{NONE}')")
    threshold = param.Number(0.0, bounds=(-1.0, 1.0), step=0.05, label="Threshold")
    result = param.Parameter(None, doc="region.Layer of cosines to the query, or None")
    run = param.Action(lambda self: self.ctx.spawn(self.search()), label="Search by examples")

    def __init__(self, ctx, **kw):
        super().__init__(ctx, **kw)
        self.counts = (0, 0)
        self.param.watch(lambda e: self.recolour(), "threshold")

    async def search(self, positive=None, negative=None) -> reg.Layer | None:
        ctx = self.ctx
        self.param.update(**{k: str(v) for k, v in (("positive", positive), ("negative", negative)) if v is not None})
        if self.positive == self.negative:
            ctx.status = views.html("Positive and negative classes must differ ({} is both).", self.positive)
            return None
        X, y, names = ctx.labels.training()
        if self.positive not in names:
            ctx.status = views.html("No labels of class {} for positive examples.", self.positive)
            return None
        if self.negative not in (ALL_OTHERS, NONE) and self.negative not in names:
            ctx.status = views.html("No labels of class {} for negative examples.", self.negative)
            return None
        neg = self.negative if self.negative in (ALL_OTHERS, NONE) else names.index(self.negative)
        q, *self.counts = query(X, y, names.index(self.positive), neg)
        self.counts = tuple(self.counts)
        async with ctx.step("Search by examples", f"{self.counts[0]} positives, {self.counts[1]} negatives, cosine "
                                                  "to the query over the view"):
            t0 = time.perf_counter()
            region = await ctx.view_region()
            if region is None:
                ctx.status = views.html("The view shows no zone of this store.")
                return None
            q = q.astype(np.float32)
            self.result = region.layer("examples", [p.cosines(q).astype(np.float32) for p in region.parts],
                                       lambda v: render.similarity_rgba(v, self.threshold))
            ctx.status = views.html("Examples: {} positives ({}), {} negatives ({}); q = 2 x mean(positives) - "
                                    "mean(negatives): {} ({:.0f} ms).", self.counts[0], self.positive, self.counts[1],
                                    self.negative, reg.describe(region), (time.perf_counter() - t0) * 1000)
        return self.result

    def recolour(self) -> None:
        if self.result is not None:
            self.result = reg.joined([reg.replace(p, rgba=render.similarity_rgba(p.values, self.threshold))
                                      for p in self.result.all])

    def colour_bar(self) -> tuple[str, float, float] | None:
        return ("cosine similarity to the examples", *render.similarity_range(self.threshold)) \
            if self.result is not None else None

    def verbs(self, api) -> dict:
        def examples(positive, negative=ALL_OTHERS):
            """Similarity to q = 2 x mean(positives) - mean(negatives): the labels of class `positive`, and of class
            `negative` (or "all other classes", or "none")."""
            async def go():
                layer = await self.search(str(positive), str(negative))
                return api.summary(layer, {"positives": self.counts[0], "negatives": self.counts[1]})
            return api.run(go)
        return {"examples": examples}

    def panel(self, fig):
        import panel as pn
        return lambda: pn.Param(self.param, show_name=False, parameters=["positive", "negative", "threshold", "run"])
