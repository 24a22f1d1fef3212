"""Change between two years over the view: 1 - cosine of each pixel's two vectors, read from the two
years' stores when the catalog has both (their zone grids lie on the same 10 m lattice, so one is the
other shifted by whole pixels), else from the multi-year index (one zone grid for every year).
"""
from __future__ import annotations

import numpy as np
import param

from app import render, views
from app.model import StoreModel, cosine_pairs
from app.reader import SourceError
from app.tools import region as reg

BINS = 40


def change_rgba(values: np.ndarray, threshold: float) -> np.ndarray:
    """Change coloured on [0, 1] (more is brighter), transparent below the threshold and where NaN."""
    return render.ramp_rgba(values, threshold, 0.0, 1.0)


def histogram(values: np.ndarray) -> dict:
    """Counts of 1 - cosine over [0, 2] in BINS bins (a quad glyph's columns)."""
    v = values[np.isfinite(values)]
    counts, edges = np.histogram(v, bins=BINS, range=(0.0, 2.0))
    return dict(left=edges[:-1].tolist(), right=edges[1:].tolist(), count=counts.tolist())


def shifted(window, zone_from, zone_to):
    """The same ground as `window` of zone_from, in zone_to's rows/cols (grids on one 10 m lattice)."""
    dr = int(round((zone_to.origin_n - zone_from.origin_n) / 10.0))
    dc = int(round((zone_from.origin_e - zone_to.origin_e) / 10.0))
    r0, r1, c0, c1 = window
    return r0 + dr, r1 + dr, c0 + dc, c1 + dc


class Change(param.Parameterized):
    y0 = param.Selector(objects=[], label="From year")
    y1 = param.Selector(objects=[], label="To year")
    threshold = param.Number(0.1, bounds=(0.0, 2.0), step=0.01, label="Change threshold (1 - cosine)")
    result = param.Parameter(None, doc="region.Layer of 1 - cosine, or None")
    hist = param.Dict(dict(left=[], right=[], count=[]))
    run = param.Action(lambda self: self.app.spawn(self.compute()), label="Change between the years")

    def __init__(self, app, **kw):
        super().__init__(**kw)
        self.app = app
        self._stores: dict = {}
        self.param.watch(lambda e: self._recolour(), "threshold")

    def years(self) -> list[int]:
        ym = self.app.years_model
        return list(ym.years) if ym is not None else sorted(c["year"] for c in self.app.catalog)

    def offer(self) -> None:
        ys = self.years()
        self.param.y0.objects = self.param.y1.objects = ys
        if ys:
            self.param.update(y0=ys[0] if self.y0 not in ys else self.y0, y1=ys[-1] if self.y1 not in ys else self.y1)

    async def _store(self, year: int) -> StoreModel:
        if year not in self._stores:
            entry = next((c for c in self.app.catalog if c["year"] == year), None)
            if entry is None:
                raise SourceError("notfound", f"no store for {year} in the catalog")
            # open(year): a geoemb: store lists every year under one URL and shows the one asked for
            self._stores[year] = await StoreModel(self.app.source_factory(entry["url"])).open(year)
        return self._stores[year]

    async def read(self, y0: int, y1: int):
        """(zone, window, full window, vectors of y0, vectors of y1) over the tool's window (the view's, or a link's)."""
        ym = self.app.years_model
        stored = {c["year"] for c in self.app.catalog}
        # Year stores first: their region reads fetch whole shards (an index's references are per inner chunk).
        # A geoemb: store holds both years itself: read them from its time axis, never open it again.
        if ym is not None and y0 in ym.years and y1 in ym.years and (ym.layout.time_axis or not {y0, y1} <= stored):
            w = reg.tool_window(self.app, ym)
            if w is None:
                return None
            zone, window, full = w
            a = await reg.read_window(ym, zone, window, ym.years.index(y0))
            b = await reg.read_window(ym, zone, window, ym.years.index(y1))
            return zone, window, full, a, b
        m0, m1 = await self._store(y0), await self._store(y1)
        w = reg.tool_window(self.app, m0)
        if w is None or w[0].name not in m1.zones:
            return None
        zone, window, full = w
        z1 = m1.zones[zone.name]
        return zone, window, full, await reg.read_window(m0, zone, window), \
            await reg.read_window(m1, z1, shifted(window, zone, z1))

    async def compute(self, y0=None, y1=None) -> reg.Layer | None:
        app = self.app
        y0 = int(y0 if y0 is not None else self.y0)
        y1 = int(y1 if y1 is not None else self.y1)
        try:
            got = await self.read(y0, y1)
        except SourceError as e:
            app.status = views.html("<b>Change unavailable:</b> {}", e)
            return None
        if got is None:
            app.status = views.html("The view shows no zone with data in both {} and {}.", y0, y1)
            return None
        zone, window, full, a, b = got
        values = (1.0 - cosine_pairs(a, b)).astype(np.float32)
        self.hist = histogram(values)
        self.result = reg.Layer("change", zone, window, values, change_rgba(values, self.threshold))
        n = int(np.isfinite(values).sum())
        region = reg.Region(zone, window, full, a)
        app.status = views.html("Change {} -> {} (1 - cosine): {}; {:,} pixels with data in both years, {:,} "
                                "above {:.2f}.", y0, y1, reg.describe(region), n,
                                int((np.nan_to_num(values, nan=-1) >= self.threshold).sum()), self.threshold)
        return self.result

    def _recolour(self) -> None:
        r = self.result
        if r is not None:
            self.result = reg.Layer(r.name, r.zone, r.window, r.values, change_rgba(r.values, self.threshold))
