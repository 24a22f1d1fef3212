"""Change between two years over the view: 1 - cosine of each pixel's two vectors, read from the two
years' stores when the catalog has both, else from the multi-year index or a geoemb: store's time axis (one
zone grid for every year).  Like the other tools (app/tools/region.py plan) the view is read whole at its
overview level (tessera-ovr:), as full vectors or the compact code, the same level and window for both years
(two stores' grids of a level lie on one lattice, so one is the other shifted by whole pixels); a zone without
overviews (an index, geoemb:, --no-overviews) is read at 10 m, capped at budgets.MAX_REGION per side.
"""
from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np
import param

from app import render, views
from builder.core.reader import StoreModel
from builder.core.quant import cosine_pairs
from builder.core.source import SourceError
from app.tools import region as reg
from app.tools.tool import Tool
from app.tools.urlvalues import integer, number

BINS = 40
RANGE = (0.0, 1.0)  # 1 - cosine coloured from no change to orthogonal vectors (more is brighter; above 1 is clipped)


def change_rgba(values: np.ndarray, threshold: float) -> np.ndarray:
    """Change coloured over RANGE, transparent below the threshold and where NaN."""
    return render.ramp_rgba(values, threshold, *RANGE)


def histogram(values: np.ndarray) -> dict:
    """Counts of 1 - cosine over [0, 2] in BINS bins (a quad glyph's columns)."""
    v = values[np.isfinite(values)]
    counts, edges = np.histogram(v, bins=BINS, range=(0.0, 2.0))
    return dict(left=edges[:-1].tolist(), right=edges[1:].tolist(), count=counts.tolist())


def shifted(window, zone_from, zone_to):
    """The same ground as `window` of zone_from, in zone_to's rows/cols (both on one level's grid: grids of a zone
    lie on one lattice of that level's pixels, docs/extensions.md "Embedding overviews", so they differ by whole pixels)."""
    dr = int(round((zone_to.origin_n - zone_from.origin_n) / zone_from.pixel))
    dc = int(round((zone_from.origin_e - zone_to.origin_e) / zone_from.pixel))
    r0, r1, c0, c1 = window
    return r0 + dr, r1 + dr, c0 + dc, c1 + dc


def change_values(a: reg.Region, b: reg.Region) -> np.ndarray:
    """1 - cosine of each pixel's two years (NaN where either has no data)."""
    if a.coded and b.coded:
        # Each year store fits its own code model (builder/codefit.py), so two years' codes are coordinates on
        # different axes or centroids: a cosine of the raw codes would compare unrelated numbers.  This is the cosine
        # of the reconstructed B-d vectors (the space both years share), computed in the codes' own terms where
        # they can (builder/core/codes.py `pairs`); exact whether the models differ or not.
        return 1.0 - a.code.pairs(a.coords, b.code, b.coords)
    return 1.0 - cosine_pairs(a.vectors, b.vectors)


async def read_year(model: StoreModel, zone, window, full, use: str, overview: bool) -> reg.Region:
    """One year's region: an overview level's code or vectors (read_level), else 10 m vectors (read_window)."""
    if overview:
        return await reg.read_level(model, zone, window, use)
    return reg.Region(zone, window, full, await reg.read_window(model, zone, window))


class Change(Tool):
    tool_name, layer_name = "change", "change"
    url_settings = {"y0": integer, "y1": integer, "threshold": number}
    tab, title = "change", "Change"

    y0 = param.Selector(objects=[], label="From year")
    y1 = param.Selector(objects=[], label="To year")
    # 0.05: on the realistic demo it finds 96 % of the parcels that changed class with full vectors, flagging 0.5 %
    # of unchanged ones; 0.1 found 56 % (benchmarks/accuracy.py)
    threshold = param.Number(0.05, bounds=(0.0, 2.0), step=0.01, label="Change threshold (1 - cosine)")
    result = param.Parameter(None, doc="region.Layer of 1 - cosine, or None")
    hist = param.Dict(dict(left=[], right=[], count=[]))
    run = param.Action(lambda self: self.ctx.spawn(self.compute()), label="Change between the years")

    def __init__(self, ctx, **kw):
        super().__init__(ctx, **kw)
        self.param.watch(lambda e: self._recolour(), "threshold")

    @property
    def _stores(self) -> dict:
        """The year stores read so far, by year (the context's: cross-year models read them too)."""
        return self.ctx.stores

    def years(self) -> list[int]:
        ym = self.ctx.years_model
        return list(ym.years) if ym is not None else sorted(c["year"] for c in self.ctx.catalog)

    def offer(self) -> None:
        ys = self.years()
        self.param.y0.objects = self.param.y1.objects = ys
        if ys:
            self.param.update(y0=ys[0] if self.y0 not in ys else self.y0, y1=ys[-1] if self.y1 not in ys else self.y1)

    async def read(self, y0: int, y1: int) -> tuple[reg.Regions, reg.Regions] | None:
        """The two years' regions over the tool's region (the view's, or a link's; app/tools/region.py tool_plans),
        in every zone it shows that both years hold: the same overview level and window for both, read as full
        vectors or the code like the other tools."""
        ctx, ym = self.ctx, self.ctx.years_model
        stored = {c["year"] for c in ctx.catalog}
        # Year stores first: their region reads fetch whole shards (an index's references are per inner chunk).
        # A store that shows both years itself (geoemb:): read them from it, never open it again.
        both_years = {y0, y1}
        if ym is not None and both_years <= set(ym.years) and \
                (both_years <= set(ym.kind.own_years(ym)) or not both_years <= stored):
            # a multi-year index and a geoemb: store carry no overviews: their plan is the 10 m window (capped)
            ps = ctx.plans(ym)
            if not ps:
                return None

            async def both(zone, window, full, use):
                depth = reg.plan_depth(zone, use)  # a geoemb: zone's depth array first
                a, b = await asyncio.gather(reg.read_window(ym, zone, window, y0, depth),
                                            reg.read_window(ym, zone, window, y1, depth))
                return reg.Region(zone, window, full, a, depth=depth), reg.Region(zone, window, full, b, depth=depth)
            pairs = await asyncio.gather(*(both(*p) for p in ps))
        else:
            m0, m1 = await ctx.store(y0), await ctx.store(y1)
            # the windows every tool reads on this view, on the shown store's grids
            ps = [p for p in ctx.plans() if all(p[0].name in m.zones for m in (m0, m1))]
            if not ps:
                return None
            pairs = await asyncio.gather(*(self._read_zone(p, m0, m1, y0, y1) for p in ps))
        return reg.Regions([a for a, _ in pairs]), reg.Regions([b for _, b in pairs])

    async def _read_zone(self, p, m0: StoreModel, m1: StoreModel, y0: int, y1: int):
        """Both year stores' regions of one zone's plan; each year store's own grid of that level is the same
        ground shifted by whole pixels."""
        zone, window, full, use = p
        overview = reg.overviews(zone)
        if overview and not all(reg.overviews(z) and zone.level < len(z.levels)
                                for z in (m0.zones[zone.name], m1.zones[zone.name])):
            # a year store without that level (built with --no-overviews): both years at 10 m, capped
            if self.ctx.linked and (zone.level or use == "code"):
                raise SourceError("notfound", f"the {y0} or {y1} store has no overview level {zone.level} "
                                              f"of {zone.name}")
            (zone, window, full), use, overview = next(w for w in self.ctx.windows() if w[0].name == zone.name), \
                "vectors", False

        def year(m: StoreModel):
            z = m.zones[zone.name].at_level(zone.level) if overview else m.zones[zone.name]
            return read_year(m, z, shifted(window, zone, z), shifted(full, zone, z), use, overview)

        a, b = await asyncio.gather(year(m0), year(m1))
        return replace(a, zone=zone, window=window, full=full), b

    async def compute(self, y0=None, y1=None) -> reg.Layer | None:
        ctx = self.ctx
        y0 = int(y0 if y0 is not None else self.y0)
        y1 = int(y1 if y1 is not None else self.y1)
        async with ctx.step(f"Change {y0} -> {y1}", "reading both years over the view"):
            try:
                got = await self.read(y0, y1)
            except SourceError as e:
                ctx.status = views.html("<b>Change unavailable:</b> {}", e)
                return None
            if got is None:
                ctx.status = views.html("The view shows no zone with data in both {} and {}.", y0, y1)
                return None
            a, b = got
            if y0 in self.param.y0.objects and y1 in self.param.y1.objects:
                self.param.update(y0=y0, y1=y1)  # the selectors (and a link, app/tools/share.py) say the layer's years
            values = [change_values(pa, pb).astype(np.float32) for pa, pb in zip(a.parts, b.parts)]
            self.result = a.layer("change", values, lambda v: change_rgba(v, self.threshold))
            every = self.result.values_all()
            self.hist = histogram(every)
            n = int(np.isfinite(every).sum())
            ctx.status = views.html("Change {} -> {} (1 - cosine): {}; {:,} pixels with data in both years, {:,} "
                                    "above {:.2f}.", y0, y1, reg.describe(a), n,
                                    int((np.nan_to_num(every, nan=-1) >= self.threshold).sum()), self.threshold)
        return self.result

    def _recolour(self) -> None:
        r = self.result
        if r is not None:
            self.result = r.recoloured(lambda v: change_rgba(v, self.threshold))

    async def rerun(self, extra: dict):
        return await self.compute()

    def colour_bar(self) -> tuple[str, float, float] | None:
        return ("change (1 - cosine)", *RANGE) if self.result is not None else None

    def verbs(self, api) -> dict:
        def change(y0, y1):
            async def go():
                return api.summary(await self.compute(int(y0), int(y1)))
            return api.run(go)
        return {"change": change}

    def panel(self, fig):
        import panel as pn
        from bokeh.models import ColumnDataSource
        hist = ColumnDataSource(dict(left=[], right=[], count=[]), name="hist-source")
        self.param.watch(lambda e: setattr(hist, "data", dict(e.new)), "hist")
        return lambda: pn.Column(pn.Param(self.param, show_name=False, parameters=["y0", "y1", "threshold", "run"]),
                                 histogram_figure(hist))


def histogram_figure(source):
    """The change histogram's figure. Counts on a logarithmic axis: on a linear one, the bin of the unchanged pixels
    dwarfed the rest. A bar starts at 0.5, so that a bin of one pixel shows too."""
    from bokeh.plotting import figure

    from app.figures import anchor
    from app.layout import PANE_W
    hist = figure(width=PANE_W, height=200, title="Change histogram (1 - cosine)", name="change-hist", tools="save",
                  y_axis_type="log", y_axis_label="pixels")
    hist.quad(left="left", right="right", top="count", bottom=0.5, source=source)
    anchor(hist, 1.0)  # no "could not set initial ranges" before a change is computed
    return hist
