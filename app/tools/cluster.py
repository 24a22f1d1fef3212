"""k-means over the view's valid pixels (scikit-learn KMeans, loaded on first use), seeded.

The centres are fitted on at most MAX_FIT pixels (a seeded sample when the view has more: k-means in
the browser's single thread on every pixel of a 768 x 768 view takes too long), then every valid
pixel is assigned to its nearest centre. A cluster can be turned into a label class.
"""
from __future__ import annotations

import time

import numpy as np
import param

from app import views
from app.tools import lazy, panes, region as reg
from app.tools.classify import class_rgba, legend_rows
from app.tools.labels import PALETTE, skipped
from app.tools.tool import Tool
from app.tools.urlvalues import integer

MAX_FIT = 65_536
N_INIT = 3


def fit_sample(n: int, seed: int, max_fit: int = MAX_FIT) -> np.ndarray:
    """Indices of the pixels the centres are fitted on: all, or a seeded sample of max_fit (sorted)."""
    if n <= max_fit:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, max_fit, replace=False))


async def kmeans(pixels: np.ndarray, k: int, seed: int, step=None) -> tuple[np.ndarray, np.ndarray, float]:
    """(labels (N,), centres (k, B), inertia over all pixels); `step` (app/tools/steps.py) counts the blocks of
    pixels assigned."""
    await lazy.sklearn()
    from sklearn.cluster import KMeans
    km = KMeans(n_clusters=k, random_state=seed, n_init=N_INIT).fit(pixels[fit_sample(len(pixels), seed)])
    centres = km.cluster_centers_.astype(np.float32)
    inertia = 0.0

    def assign(block: np.ndarray) -> np.ndarray:  # each block's labels, and its share of the inertia
        nonlocal inertia
        labels = km.predict(block)
        inertia += float(((block - centres[labels]).astype(np.float64) ** 2).sum())
        return labels
    labels = await lazy.chunked(assign, pixels, step=step)
    return labels, centres, inertia


def colours(k: int) -> list[str]:
    return [PALETTE[i % len(PALETTE)] for i in range(k)]


class Clusters(Tool):
    tool_name, layer_name, continuous = "cluster", "cluster", False
    url_settings = {"k": integer, "seed": integer}
    tab, title = "clusters", "Clusters"

    k = param.Integer(5, bounds=(2, 32), label="Clusters (k)")
    seed = param.Integer(0, bounds=(0, None), label="Seed")
    result = param.Parameter(None, doc="region.Layer of cluster numbers, or None")
    which = param.Integer(0, bounds=(0, None), label="Cluster to label")
    per_class = param.Integer(20, bounds=(1, 1000), label="Pixels to label")
    run = param.Action(lambda self: self.ctx.spawn(self.cluster()), label="Cluster the view")
    to_label = param.Action(lambda self: self.ctx.spawn(self.to_class(self.which)), label="Cluster -> label class")

    def __init__(self, ctx, **kw):
        super().__init__(ctx, **kw)
        self.inertia = None
        self.region = None
        self.key: list[tuple[str, str]] = []  # the result's colours by cluster number: ("cluster 0", "#rrggbb"), ...

    async def cluster(self, k=None, seed=None) -> reg.Layer | None:
        ctx = self.ctx
        self.param.update(**{n: v for n, v in (("k", k), ("seed", seed)) if v is not None})
        async with ctx.step(f"k-means (k={self.k})", "reading the view") as step:
            region = await ctx.region()
            if region is None or region.n_valid < self.k:
                ctx.status = views.html("Too few pixels with data in the view for {} clusters.", self.k)
                return None
            t0 = time.perf_counter()
            pixels = region.pixels()
            n = len(pixels)
            step.say(f"fitting {self.k} centres on {min(n, MAX_FIT):,} pixels ({N_INIT} starts), then assigning "
                     f"{n:,} pixels")
            await lazy.sklearn(step)  # the first time: "…: loading scikit-learn…" in the status line
            labels, _, self.inertia = await kmeans(pixels, self.k, self.seed, step)
            self.region = region
            self.key = [(f"cluster {i}", c) for i, c in enumerate(colours(self.k))]
            self.result = region.layer("cluster", region.spread(labels.astype(np.float32)),
                                       lambda v: class_rgba(v, np.ones_like(v), colours(self.k), 0.0))
            ctx.status = views.html("k-means (k={}, seed {}){}: {}; inertia {:.6g} ({:.0f} ms).", self.k, self.seed,
                                    f", centres fitted on {MAX_FIT:,} sampled pixels" if n > MAX_FIT else "",
                                    reg.describe(region), self.inertia, (time.perf_counter() - t0) * 1000)
        return self.result

    async def to_class(self, which: int, name: str | None = None, count: int | None = None) -> str | None:
        """Label `count` pixels of cluster `which` (a seeded sample over all the layer's zones) as a new class
        (default 'cluster N')."""
        ctx, r = self.ctx, self.result
        if r is None:
            ctx.status = views.html("Run k-means first.")
            return None
        hits = [np.nonzero(p.values == which) for p in r.all]  # (rows, cols) in each zone's window
        part = np.concatenate([np.full(len(h[0]), i) for i, h in enumerate(hits)])
        if not len(part):
            ctx.status = views.html("Cluster {} has no pixels.", which)
            return None
        pick = np.sort(np.random.default_rng(self.seed).choice(len(part), min(count or self.per_class, len(part)),
                                                               replace=False))
        index = np.concatenate([np.arange(len(h[0])) for h in hits])
        name = name or f"cluster {which}"
        model, added = self.region.model, 0  # the store at the year clustered, whatever the year shown now
        for i, (p, region) in enumerate(zip(r.all, self.region.parts)):
            mine = index[pick[part[pick] == i]]
            if len(mine):
                rows, cols, vectors = await region.label_vectors(model, hits[i][0][mine], hits[i][1][mine],
                                                                 ctx.labels.progress)
                name = ctx.labels.add_pixels(name, p.zone, p.window, rows, cols, vectors, model.year)
                added += len(rows)
        ctx.status = views.html("Cluster {} -> class <b>{}</b>: {} labels{}.", which, name, added,
                                skipped(len(pick) - added))
        return name

    async def rerun(self, extra: dict):
        return await self.cluster()

    def classes(self):
        k = int(np.nanmax([np.nanmax(p.values) for p in self.result.all])) + 1
        return tuple(f"cluster {i}" for i in range(k)), colours(k)

    def legend_key(self) -> list[tuple[str, str]]:
        return list(self.key) if self.result is not None else []

    def legend(self) -> list[tuple[str, str, int, float]]:
        """(cluster, colour, pixels, km²) of the result, over all its zones: the tab's key."""
        if self.result is None:
            return []
        parts = [(p, reg.replace(p, values=np.ones_like(p.values))) for p in self.result.all]
        return legend_rows(parts, [n for n, _ in self.key], [c for _, c in self.key], 0.0)

    def verbs(self, api) -> dict:
        def cluster(k=5, seed=0):
            async def go():
                layer = await self.cluster(int(k), int(seed))
                return api.summary(layer, {"inertia": self.inertia})
            return api.run(go)

        def cluster_to_class(which, name=None, count=None):
            return api.run(lambda: self.to_class(int(which), name, None if count is None else int(count)))
        return {"cluster": cluster, "clusterToClass": cluster_to_class}

    def panel(self, fig):
        import panel as pn
        from app.layout import PANE_W
        # the key (each cluster's number, colour and pixels) between the run and "Cluster to label", which asks for
        # a number
        return lambda: pn.Column(
            pn.Param(self.param, show_name=False, parameters=["k", "seed", "run"]),
            pn.pane.HTML(pn.bind(lambda r: panes.legend_html(self.legend(), "cluster-key"), self.param.result),
                         width=PANE_W),
            pn.Param(self.param, show_name=False, parameters=["which", "per_class", "to_label"]))
