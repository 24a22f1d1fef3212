"""Embedding scatter: the view's valid pixels projected to 2-D (PCA or UMAP), linked to the map both ways.

At most `max_points` pixels are drawn (a seeded sample when the view has more: Bokeh stays responsive
and the fit is quick); the projection is fitted on those points, and the page says so. Brushing points
selects them: their pixels become the "scatter" map layer and can be labelled as a class; tapping a
point also selects its pixel on the map. A map pixel (hovered or tapped) is placed in the scatter by the
fit: PCA projects it, UMAP puts it on its nearest drawn point (in the embedding space).

PCA is numpy's (below); UMAP is umap-js in a Web Worker of its own (app/tools/umapjs.py): umap-learn needs numba,
which has no Pyodide/wasm build (see docs/explorer.md, "Analysis tools").
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import numpy as np
import param

from app import views
from app.tools import region as reg
from app.tools import umapjs
from app.state import SHOWN
from app.tools.cluster import fit_sample
from app.tools.labels import skipped
from app.tools.tool import Tool
from app.tools.urlvalues import integer, number
from app.tools.verbs import zones

MAX_POINTS = 20_000
HIGHLIGHT = (255, 0, 255, 255)  # selected pixels on the map: opaque magenta


async def pca(X: np.ndarray, n: int = 2, rows: int = 2048) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean (B,), components (n, B), explained variance ratio (n,)) of the rows of X.

    numpy's eigh of the B x B covariance (B: the vectors' length, 128 full, 16 at depth 16) is the whole fit:
    scikit-learn's PCA would load scikit-learn (and scipy) on first use for the same numbers. The covariance is
    summed in blocks of `rows`, yielding to the event loop between blocks (the page stays responsive). Each
    component's sign is fixed so its largest loading is positive (a stable picture between runs)."""
    mean = np.asarray(X, np.float64).mean(axis=0)
    cov = np.zeros((X.shape[1], X.shape[1]))
    for i in range(0, len(X), rows):
        block = np.asarray(X[i:i + rows], np.float64) - mean
        cov += block.T @ block
        await asyncio.sleep(0)
    w, V = np.linalg.eigh(cov / max(len(X) - 1, 1))
    order = np.argsort(w)[::-1][:n]
    comps = V[:, order].T
    comps *= np.sign(comps[np.arange(len(order)), np.abs(comps).argmax(axis=1)])[:, None]
    total = w.sum()
    return mean, comps, (w[order] / total if total > 0 else np.zeros(len(order)))


class PCAFit:
    """A linear projection on the first two principal components of the sample."""

    def __init__(self, mean: np.ndarray, components: np.ndarray, explained: np.ndarray):
        self.mean, self.components, self.explained = mean, components, explained

    @classmethod
    async def fit(cls, X: np.ndarray, tool, step=None) -> tuple[PCAFit, np.ndarray]:
        """(the fit, the rows' 2-D coordinates)."""
        f = cls(*await pca(X))
        return f, f.project(X)

    def project(self, vectors: np.ndarray) -> np.ndarray:
        return ((np.asarray(vectors, np.float64) - self.mean) @ self.components.T).astype(np.float32)

    running = "projecting up to {:,} points on their first two principal components"  # its step's line
    settings: dict = {}

    def describe(self) -> str:
        return "PCA, {:.1%} + {:.1%} of the variance".format(*self.explained)

    def axes(self) -> str:
        return "axes: components 1 and 2 ({:.1%}, {:.1%} of the variance)".format(*self.explained)


class UMAPFit:
    """A UMAP layout of the sample (umap-js); other vectors are placed on their nearest sampled vector's point."""

    explained = np.zeros(0)

    def __init__(self, X: np.ndarray, xy: np.ndarray, n_neighbors: int, min_dist: float, seed: int):
        self.X, self.xy = np.asarray(X, np.float64), xy
        self.n_neighbors, self.min_dist, self.seed = n_neighbors, min_dist, seed

    @classmethod
    async def fit(cls, X: np.ndarray, tool, step=None) -> tuple[UMAPFit, np.ndarray]:
        """(the fit, the rows' 2-D coordinates); `step` (app/tools/steps.py) counts umap-js's epochs."""
        if len(X) <= tool.n_neighbors:
            raise umapjs.UMAPFailed(f"{len(X)} points are too few for {tool.n_neighbors} neighbours")
        xy = await umapjs.embed(X, tool.n_neighbors, tool.min_dist, tool.seed, step)
        return cls(X, xy, tool.n_neighbors, tool.min_dist, tool.seed), xy

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """The point of each vector's nearest sampled vector (squared Euclidean distance, in float64)."""
        return self.xy[[int(((self.X - v) ** 2).sum(axis=1).argmin()) for v in np.asarray(vectors, np.float64)]]

    running = "laying out up to {:,} points (umap-js, in a Web Worker)"  # its step's line

    @property
    def settings(self) -> dict:
        return {"n_neighbors": self.n_neighbors, "min_dist": self.min_dist, "seed": self.seed}

    def describe(self) -> str:
        return f"UMAP, {self.n_neighbors} neighbours, minimum distance {self.min_dist:g}, seed {self.seed}"

    def axes(self) -> str:
        return (f"UMAP's axes have no units ({self.n_neighbors} neighbours, minimum distance {self.min_dist:g}, "
                f"seed {self.seed}; umap-js in a Web Worker)")


FITS = {"PCA": PCAFit, "UMAP": UMAPFit}
METHODS = list(FITS)


@dataclass
class Projection:
    """The drawn points: pixels (part: the zone's index in the region; rows, cols in that zone's window) and their
    2-D coordinates, by `fit`."""

    region: reg.Regions
    method: str
    part: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    xy: np.ndarray  # float32 (n, 2)
    fit: PCAFit | UMAPFit | None
    n_valid: int
    n_bands: int

    @property
    def explained(self) -> np.ndarray:
        """The variance ratio of each axis (PCA); empty for UMAP."""
        return self.fit.explained

    def project(self, vectors: np.ndarray) -> np.ndarray:
        return self.fit.project(vectors)

    def highlight(self, indices) -> reg.Layer:
        """The map layer of the pixels of points `indices`: 1 there, 0 on the region's other pixels with data
        (drawn or not), NaN where there is no data; only the 1s are coloured."""
        idx = np.asarray(indices, np.intp)
        values = []
        for i, r in enumerate(self.region.parts):
            v = np.where(r.valid, np.float32(0), np.float32(np.nan))
            mine = idx[self.part[idx] == i]
            v[self.rows[mine], self.cols[mine]] = 1.0
            values.append(v)

        def colour(v):
            rgba = np.zeros(v.shape + (4,), np.uint8)
            rgba[v == 1] = HIGHLIGHT
            return rgba
        return self.region.layer("scatter", values, colour)

    def in_box(self, x0: float, x1: float, y0: float, y1: float) -> list[int]:
        x, y = self.xy[:, 0], self.xy[:, 1]
        return np.nonzero((x >= min(x0, x1)) & (x <= max(x0, x1)) & (y >= min(y0, y1)) & (y <= max(y0, y1)))[0].tolist()

    def at(self, lon: float, lat: float) -> dict | None:
        """The map pixel under lon/lat in the scatter: its projection and its point's index (None when the
        pixel was not sampled); None outside the region or where there is no data."""
        for i, r in enumerate(self.region.parts):
            row, col = r.zone.to_rowcol(float(lon), float(lat))
            rr, cc = int(row) - r.window[0], int(col) - r.window[2]
            if not (0 <= rr < r.valid.shape[0] and 0 <= cc < r.valid.shape[1]) or not r.valid[rr, cc]:
                continue
            hit = np.nonzero((self.part == i) & (self.rows == rr) & (self.cols == cc))[0]
            x, y = self.xy[hit[0]] if len(hit) else self.project(r.at([rr], [cc]))[0]
            return {"index": int(hit[0]) if len(hit) else None, "x": float(x), "y": float(y), "zone": r.zone.name,
                    "row": rr + r.window[0], "col": cc + r.window[2]}
        return None

    def vectors(self, idx: np.ndarray) -> np.ndarray:
        """(n, B) vectors of points `idx`."""
        out = np.empty((len(idx), self.n_bands), np.float32)
        for i, r in enumerate(self.region.parts):
            mine = self.part[idx] == i
            if mine.any():
                out[mine] = r.at(self.rows[idx[mine]], self.cols[idx[mine]])
        return out


async def project_region(region: reg.Regions, tool, step=None) -> Projection:
    """The projection of `tool`'s method (and settings) of a seeded sample of at most tool.max_points valid pixels
    (`step`: the tool's step, app/tools/steps.py)."""
    where = [np.nonzero(r.valid) for r in region.parts]
    part = np.concatenate([np.full(len(w[0]), i) for i, w in enumerate(where)])
    rows = np.concatenate([w[0] for w in where])
    cols = np.concatenate([w[1] for w in where])
    pick = fit_sample(len(rows), tool.seed, tool.max_points)
    p = Projection(region, tool.method, part[pick], rows[pick], cols[pick], np.zeros((len(pick), 2), np.float32),
                   None, len(rows), region.primary.bands)
    X = p.vectors(np.arange(len(pick)))
    p.fit, p.xy = await FITS[tool.method].fit(X, tool, step)
    return p


def ranges(indices) -> str:
    """Sorted indices as ranges: [3, 4, 5, 7] -> '3-5;7'."""
    out, idx = [], sorted(indices)
    i = 0
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and idx[j + 1] == idx[j] + 1:
            j += 1
        out.append(str(idx[i]) if i == j else f"{idx[i]}-{idx[j]}")
        i = j + 1
    return ";".join(out)


def parse_ranges(text: str, limit: int) -> list[int]:
    out: list[int] = []
    for part in filter(None, text.split(";")):
        a, _, b = part.partition("-")
        lo, hi = int(a), int(b or a)
        if not 0 <= lo <= hi < limit or len(out) + hi - lo >= limit:
            raise ValueError(f"brushed points {part[:SHOWN]!r} out of range")
        out.extend(range(lo, hi + 1))
    return out


class Scatter(Tool):
    tool_name, layer_name, layer_param, continuous = "scatter", "scatter", "highlight", False
    # PCA or UMAP and its settings; the brushed points as index ranges (sel:3-7;10;12), left out of a link when
    # too long
    url_settings = {"max_points": integer, "seed": integer, "method": str, "n_neighbors": integer,
                    "min_dist": number}
    url_extra_keys = ("sel",)
    url_watch = ("result", "selected")
    missing = "brush points in the scatter first"
    tab, title = "scatter", "Scatter"

    method = param.Selector(objects=METHODS, default="PCA", label="Projection")
    max_points = param.Integer(MAX_POINTS, bounds=(100, 100_000), label="Points drawn (at most)")
    seed = param.Integer(0, bounds=(0, 2 ** 31 - 1), label="Seed (the sample, UMAP)")
    n_neighbors = param.Integer(15, bounds=(2, 200), label="UMAP neighbours")
    min_dist = param.Number(0.1, bounds=(0.0, 1.0), label="UMAP minimum distance")
    result = param.Parameter(None, doc="Projection of the view's pixels, or None")
    selected = param.List([], doc="indices of the brushed points")
    highlight = param.Parameter(None, doc="region.Layer of the brushed points' pixels, or None")
    hover = param.Parameter(None, doc="the map pixel under the mouse (Projection.at), or None")
    class_name = param.String("", label="Class name for the brushed points")
    per_class = param.Integer(50, bounds=(1, 1000), label="Pixels to label")
    run = param.Action(lambda self: self.ctx.spawn(self.compute()), label="Project the view")
    to_label = param.Action(lambda self: self.ctx.spawn(self.to_class()), label="Brushed points -> label class")

    async def compute(self, method=None, max_points=None, seed=None, n_neighbors=None,
                      min_dist=None) -> Projection | None:
        """Project the view's pixels with these settings (None: as they are). A setting out of range or not among the
        choices is refused in one status line (ValueError of that line), the settings left as they were."""
        ctx = self.ctx
        given = {n: v for n, v in (("method", method), ("max_points", max_points), ("seed", seed),
                                   ("n_neighbors", n_neighbors), ("min_dist", min_dist)) if v is not None}
        before = {n: getattr(self, n) for n in given}
        try:
            self.param.update(**given)  # param's bounds and choices
        except ValueError as e:
            self.param.update(**before)
            line = (str(e).splitlines() or ["bad setting"])[0][:200]
            ctx.status = views.html("<b>Scatter refused:</b> {}", line)
            raise ValueError(line) from None
        async with ctx.step(f"Scatter ({self.method})", FITS[self.method].running.format(self.max_points)) as step:
            region = await ctx.region()
            if region is None or region.n_valid < 3:
                ctx.status = views.html("Too few pixels with data in the view for a scatter.")
                return None
            t0 = time.perf_counter()
            try:
                p = await project_region(region, self, step)
            except umapjs.UMAPFailed as e:
                ctx.status = views.html("<b>UMAP failed:</b> {}", (str(e).splitlines() or [""])[0][:200])
                return None
            self.param.update(result=p, selected=[], highlight=None, hover=None)
            ctx.status = views.html("Scatter ({}): {:,} points drawn{}; {} ({:.0f} ms).", p.fit.describe(),
                                    len(p.rows), f", a seeded sample (seed {self.seed}) of {p.n_valid:,} valid pixels, "
                                    f"on which the {self.method} is fitted" if len(p.rows) < p.n_valid else "",
                                    reg.describe(region), (time.perf_counter() - t0) * 1000)
        return p

    def select(self, indices) -> reg.Layer | None:
        """Brush the points `indices`: their pixels become the highlight layer."""
        p = self.result
        if p is None:
            return None
        idx = sorted({int(i) for i in indices if 0 <= int(i) < len(p.rows)})
        if idx != self.selected or (idx and self.highlight is None):
            self.param.update(selected=idx, highlight=p.highlight(idx) if idx else None)
        return self.highlight

    async def tap(self, indices, x: float, y: float) -> int | None:
        """A tap on the scatter at (x, y) hit the points `indices`: the nearest one's pixel becomes the map's
        selected pixel (its marker, info and spectrum; the scatter rings the point). Returns that point."""
        p = self.result
        idx = [int(i) for i in indices if 0 <= int(i) < len(p.rows)] if p is not None else []
        if not idx:
            return None
        k = min(idx, key=lambda i: float((p.xy[i, 0] - x) ** 2 + (p.xy[i, 1] - y) ** 2))
        r = p.region.parts[int(p.part[k])]
        lon, lat = r.zone.centre_lonlat(int(p.rows[k]) + r.window[0], int(p.cols[k]) + r.window[2])
        await self.ctx.select(float(lon), float(lat))
        return k

    def hover_at(self, lon: float, lat: float) -> dict | None:
        self.hover = self.result.at(lon, lat) if self.result is not None else None
        return self.hover

    async def to_class(self, name: str | None = None, count: int | None = None) -> str | None:
        """Label `count` of the brushed points' pixels (a seeded sample) as class `name` (default 'scatter N')."""
        ctx, p = self.ctx, self.result
        if p is None or not self.selected:
            ctx.status = views.html("Brush points in the scatter first.")
            return None
        idx = np.asarray(self.selected)
        pick = np.sort(np.random.default_rng(self.seed).choice(len(idx), min(count or self.per_class, len(idx)),
                                                               replace=False))
        labels = ctx.labels
        name = name or self.class_name or f"scatter {len(labels.classes) + 1}"
        model, added = p.region.model, 0  # the store at the year projected, whatever the year shown now
        for i, r in enumerate(p.region.parts):
            mine = idx[pick][p.part[idx[pick]] == i]
            if len(mine):
                rows, cols, vectors = await r.label_vectors(model, p.rows[mine], p.cols[mine], labels.progress)
                name = labels.add_pixels(name, r.zone, r.window, rows, cols, vectors, model.year)
                added += len(rows)
        ctx.status = views.html("{} brushed points -> class <b>{}</b>: {} labels{}.", len(idx), name, added,
                                skipped(len(pick) - added))
        return name

    async def rerun(self, extra: dict):
        sel = extra.get("sel")
        if await self.compute() is None or sel is None:
            return None
        try:
            return self.select(parse_ranges(sel, len(self.result.rows)))
        except ValueError as e:
            self.ctx.status = views.html("<b>Brushed points in the URL ignored:</b> {}", e)
            return None

    def url_extra(self) -> list[str]:
        return [f"sel:{ranges(self.selected)}"]

    def verbs(self, api) -> dict:
        def scatter(method="PCA", params=None):
            """Project the view's valid pixels to 2-D (method "PCA" or "UMAP"; params max_points, seed, n_neighbors,
            min_dist); resolves to its summary (points drawn, variance explained by PCA's axes, UMAP's settings)."""
            if not isinstance(params or {}, dict):
                raise ValueError("scatter takes its settings as {max_points, seed, n_neighbors, min_dist}")
            p = {k: v for k, v in dict(params or {}).items() if k in ("max_points", "seed", "n_neighbors", "min_dist")}

            async def go():
                t0 = time.perf_counter()
                res = await self.compute(str(method), **p)
                if res is None:
                    return None
                return {**zones(res.region.parts), "status": api.status,
                        "ms": (time.perf_counter() - t0) * 1000, "method": res.method, "points": len(res.rows),
                        "valid": res.n_valid, "explained": [float(x) for x in res.explained], **res.fit.settings}
            return api.run(go)

        def scatter_points():
            """The drawn points as JSON: their pixels (zone rows/cols) and 2-D coordinates, for checks against
            CPython."""
            res = self.result
            if res is None:
                return None
            parts = res.region.parts
            r0 = np.array([p.window[0] for p in parts])[res.part]
            c0 = np.array([p.window[2] for p in parts])[res.part]
            return json.dumps({"zone": parts[0].zone.name, "zones": [parts[i].zone.name for i in res.part],
                               "rows": (res.rows + r0).tolist(), "cols": (res.cols + c0).tolist(),
                               "x": res.xy[:, 0].tolist(), "y": res.xy[:, 1].tolist(), "selected": list(self.selected)})

        def scatter_select(which):
            """Brush points: {"box": [x0, x1, y0, y1]} in scatter coordinates, or {"indices": [...]}; resolves to the
            number of points selected and of pixels highlighted on the map."""
            res = self.result
            if res is None:
                raise ValueError("scatterSelect: run the scatter first")
            if not isinstance(which, dict) or not ({"box", "indices"} & set(which)):
                raise ValueError('scatterSelect takes {"box": [x0, x1, y0, y1]} or {"indices": [...]}')
            idx = res.in_box(*map(float, which["box"])) if "box" in which else list(which["indices"])

            async def go():
                hl = self.select(idx)
                return {"selected": len(self.selected),
                        "highlighted": 0 if hl is None else int((hl.values_all() == 1).sum())}
            return api.run(go)

        return {"scatter": scatter, "scatterPoints": scatter_points, "scatterSelect": scatter_select,
                "scatterAt": lambda lon, lat: self.hover_at(float(lon), float(lat)),
                "scatterToClass": lambda name=None, count=None: api.run(lambda: self.to_class(
                    None if name is None else str(name), None if count is None else int(count)))}

    def panel(self, fig):
        from app.tools.scatter_ui import ScatterUI
        self.ui = ScatterUI(self, fig)
        return lambda: self.ui.view()
