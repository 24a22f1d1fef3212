"""Embedding scatter: the view's valid pixels projected to 2-D (PCA), linked to the map both ways.

At most `max_points` pixels are drawn (a seeded sample when the view has more: Bokeh stays responsive
and the fit is quick); the PCA is fitted on those points, and the page says so. Brushing points
selects them: their pixels become the "scatter" map layer and can be labelled as a class; tapping a
point also selects its pixel on the map. A map pixel (hovered or tapped) is projected with the same fit
and marked in the scatter.

UMAP is not offered: umap-learn needs numba (and pynndescent, also numba), which has no
Pyodide/wasm build (none in the Pyodide 0.27.7 lock, none on PyPI); see docs/explorer.md, "Analysis tools".
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import numpy as np
import param

from app import views
from app.tools import region as reg
from app.tools.cluster import fit_sample

METHODS = ["PCA"]
MAX_POINTS = 20_000
HIGHLIGHT = (255, 0, 255, 255)  # selected pixels on the map: opaque magenta


async def pca(X: np.ndarray, n: int = 2, rows: int = 2048) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean (B,), components (n, B), explained variance ratio (n,)) of the rows of X.

    numpy's eigh of the B x B covariance (B = 128) is the whole fit: scikit-learn's PCA would load
    scikit-learn (and scipy) on first use for the same numbers. The covariance is summed in blocks of
    `rows`, yielding to the event loop between blocks (the page stays responsive). Each component's sign
    is fixed so its largest loading is positive (a stable picture between runs)."""
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


@dataclass
class Projection:
    """The drawn points: pixels (part: the zone's index in the region; rows, cols in that zone's window) and their
    2-D coordinates."""

    region: reg.Regions
    method: str
    part: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    xy: np.ndarray  # float32 (n, 2)
    mean: np.ndarray
    components: np.ndarray
    explained: np.ndarray
    n_valid: int

    def project(self, vectors: np.ndarray) -> np.ndarray:
        return ((np.asarray(vectors, np.float64) - self.mean) @ self.components.T).astype(np.float32)

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
            x, y = self.project(r.at([rr], [cc]))[0]
            return {"index": int(hit[0]) if len(hit) else None, "x": float(x), "y": float(y), "zone": r.zone.name,
                    "row": rr + r.window[0], "col": cc + r.window[2]}
        return None

    def vectors(self, idx: np.ndarray) -> np.ndarray:
        """(n, B) vectors of points `idx`."""
        out = np.empty((len(idx), self.mean.shape[0]), np.float32)
        for i, r in enumerate(self.region.parts):
            mine = self.part[idx] == i
            if mine.any():
                out[mine] = r.at(self.rows[idx[mine]], self.cols[idx[mine]])
        return out


async def project_region(region: reg.Regions, method: str, max_points: int, seed: int) -> Projection:
    where = [np.nonzero(r.valid) for r in region.parts]
    part = np.concatenate([np.full(len(w[0]), i) for i, w in enumerate(where)])
    rows = np.concatenate([w[0] for w in where])
    cols = np.concatenate([w[1] for w in where])
    pick = fit_sample(len(rows), seed, max_points)
    p = Projection(region, method, part[pick], rows[pick], cols[pick], np.zeros((len(pick), 2), np.float32),
                   np.zeros(region.primary.zone.n_bands), None, None, len(rows))
    X = p.vectors(np.arange(len(pick)))
    p.mean, p.components, p.explained = await pca(X)
    p.xy = p.project(X)
    return p


class Scatter(param.Parameterized):
    method = param.Selector(objects=METHODS, default="PCA", label="Projection")
    max_points = param.Integer(MAX_POINTS, bounds=(100, 100_000), label="Points drawn (at most)")
    seed = param.Integer(0, bounds=(0, None), label="Sample seed")
    result = param.Parameter(None, doc="Projection of the view's pixels, or None")
    selected = param.List([], doc="indices of the brushed points")
    highlight = param.Parameter(None, doc="region.Layer of the brushed points' pixels, or None")
    hover = param.Parameter(None, doc="the map pixel under the mouse (Projection.at), or None")
    class_name = param.String("", label="Class name for the brushed points")
    per_class = param.Integer(50, bounds=(1, 1000), label="Pixels to label")
    run = param.Action(lambda self: self.app.spawn(self.compute()), label="Project the view")
    to_label = param.Action(lambda self: self.app.spawn(self.to_class()), label="Brushed points -> label class")

    def __init__(self, app, **kw):
        super().__init__(**kw)
        self.app = app

    async def compute(self, method=None, max_points=None, seed=None) -> Projection | None:
        app = self.app
        self.param.update(**{n: v for n, v in (("method", method), ("max_points", max_points), ("seed", seed))
                             if v is not None})
        region = await reg.read_tool(app)
        if region is None or region.n_valid < 3:
            app.status = views.html("Too few pixels with data in the view for a scatter.")
            return None
        t0 = time.perf_counter()
        p = await project_region(region, self.method, self.max_points, self.seed)
        self.param.update(result=p, selected=[], highlight=None, hover=None)
        app.status = views.html("Scatter ({}, {:.1%} + {:.1%} of the variance): {:,} points drawn{}; {} "
                                "({:.0f} ms).", self.method, *p.explained, len(p.rows),
                                f", a seeded sample (seed {self.seed}) of {p.n_valid:,} valid pixels, on which the "
                                f"PCA is fitted" if len(p.rows) < p.n_valid else "", reg.describe(region),
                                (time.perf_counter() - t0) * 1000)
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
        await self.app.select(float(lon), float(lat))
        return k

    def hover_at(self, lon: float, lat: float) -> dict | None:
        self.hover = self.result.at(lon, lat) if self.result is not None else None
        return self.hover

    async def to_class(self, name: str | None = None, count: int | None = None) -> str | None:
        """Label `count` of the brushed points' pixels (a seeded sample) as class `name` (default 'scatter N')."""
        app, p = self.app, self.result
        if p is None or not self.selected:
            app.status = views.html("Brush points in the scatter first.")
            return None
        idx = np.asarray(self.selected)
        pick = np.sort(np.random.default_rng(self.seed).choice(len(idx), min(count or self.per_class, len(idx)),
                                                               replace=False))
        labels = app.tools.labels
        name = name or self.class_name or f"scatter {len(labels.classes) + 1}"
        for i, r in enumerate(p.region.parts):
            mine = idx[pick][p.part[idx[pick]] == i]
            if len(mine):
                name = labels.add_pixels(name, r.zone, r.window, p.rows[mine], p.cols[mine],
                                         r.at(p.rows[mine], p.cols[mine]), app.model.year)
        app.status = views.html("{} brushed points -> class <b>{}</b>: {} labels.", len(idx), name, len(pick))
        return name
