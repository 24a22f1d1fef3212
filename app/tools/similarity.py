"""Pixel similarity, the explorer's overlay (tool.Overlay): over the whole view (its region: an overview level's full
vectors or compact code, or, without overviews, 10 m vectors capped at MAX_REGION per side), in every zone the view
shows, the cosine to the selection and/or the pins (Region.cosines), combined by mean or max; coloured from its
threshold to 1 (app/render.py similarity_range), transparent below.

Its controls are the side bar's toggle, threshold, source and mode; it runs again when turned on, when the source or
mode changes, on a new selection and when the tools' representation changes (exact). Its URL parts:

    #...&sim=0.60&sim_from=pins&sim_mode=max   (written while it is on; a link with sim= turns it on again)
"""
from __future__ import annotations

import math
import time

import numpy as np
import param

from app import render, views
from app.state import SHOWN, clip
from app.tools import region as reg
from app.tools.tool import Overlay

SOURCES = ["selection", "pins", "selection and pins"]
MODES = ["mean", "max"]


def checked(threshold: float | None, **choices: str | None) -> dict:
    """The settings among `threshold` and `choices` (sim_from, sim_mode) that are given, each checked: ValueError
    (one line) for a threshold outside -1..1 or a source or mode unknown."""
    settings = {}
    if threshold is not None:
        if not (math.isfinite(threshold) and -1 <= threshold <= 1):
            raise ValueError(f"threshold {threshold} is not between -1 and 1")
        settings["threshold"] = threshold
    for key, allowed in (("sim_from", SOURCES), ("sim_mode", MODES)):
        value = choices.get(key)
        if value is not None and value not in allowed:
            raise ValueError(f"{key} {value[:SHOWN]!r} is not one of {', '.join(allowed)}")
        if value is not None:
            settings[key] = value
    return settings


def targets(selected, pins, source: str) -> list:
    sel = [selected] if selected is not None and selected.valid else []
    return {"selection": sel, "pins": list(pins), "selection and pins": sel + list(pins)}[source]


def combine(region: reg.Region, targets: list[np.ndarray], mode: str) -> np.ndarray:
    """Mean or max over the targets of each pixel's cosine (NaN where a pixel has no data), in one zone."""
    sims = np.stack([region.cosines(t) for t in targets])
    return (sims.mean(axis=0) if mode == "mean" else sims.max(axis=0)).astype(np.float32)


class Similarity(Overlay):
    tool_name, layer_name = "similarity", "similarity"
    missing = "select a pixel and turn similarity search on"

    on = param.Boolean(False, label="Similarity search")
    threshold = param.Number(0.8, bounds=(-1.0, 1.0), step=0.01, label="Similarity threshold")
    sim_from = param.Selector(objects=SOURCES, default="selection", label="Similarity to")
    sim_mode = param.Selector(objects=MODES, default="mean", label="Combine (several pixels)")
    result = param.Parameter(None, doc="region.Layer of cosines over the view, or None")

    url_watch = ("on", "threshold", "sim_from", "sim_mode")

    def __init__(self, ctx, **kw):
        super().__init__(ctx, **kw)
        self._search = None  # the last search set off by a change (_again), a task
        self.param.watch(self._again, ["on", "sim_from", "sim_mode"])
        ctx.watch_pixel(lambda px: self._again())
        ctx.watch_exact(self._again)
        ctx.watch_year(lambda: setattr(self, "result", None))  # the new year's selection runs it again
        self.param.watch(lambda e: self._recolour(), "threshold")

    def _colour(self, values: np.ndarray) -> np.ndarray:
        return render.similarity_rgba(values, self.threshold)

    def _again(self, *events) -> None:
        """Search again, once for a change however many of its settings it changed (param calls a watcher once per
        batch of changes), while on. Turned on: take a tool layer off the map too (drawn above this one, it would
        hide it; the "Tool layer" selector shows it again)."""
        if not self.on:
            return
        if any(e.name == "on" for e in events):
            self.ctx.shown = "none"
        self._search = self.ctx.spawn(self.compute())

    def _recolour(self) -> None:
        if self.result is not None:
            self.result = self.result.recoloured(self._colour)

    async def compute(self) -> reg.Layer | None:
        """The similarity Layer over the view (every zone it shows), or None with the reason in the status."""
        ctx = self.ctx
        tg = targets(ctx.selected, ctx.pins, self.sim_from)
        if not tg:
            ctx.status = views.html("Select a pixel with data first." if self.sim_from == "selection"
                                    else "Pin pixels with data first.")
            return None
        what = tg[0].label() if len(tg) == 1 else f"{self.sim_mode} of {len(tg)} pixels"
        async with ctx.step("Similarity", "reading the view"):
            t0 = time.perf_counter()
            region = await ctx.view_region()
            if region is None:
                ctx.status = views.html("The view shows no zone of this store.")
                return None
            vectors = [p.vector for p in tg]
            self.result = region.layer("similarity",
                                       [combine(part, vectors, self.sim_mode) for part in region.parts], self._colour)
            ctx.status = views.html("Similarity to {}: {} ({:.0f} ms).", what, reg.describe(region),
                                    (time.perf_counter() - t0) * 1000)
        return self.result

    def colour_bar(self) -> tuple[str, float, float] | None:
        return ("cosine similarity", *render.similarity_range(self.threshold)) if self.drawn() else None

    # ---------------------------------------------------------------- URL --
    def url_parts(self) -> list[tuple[str, str]]:
        if not self.on:
            return []
        return [("sim", f"{self.threshold:.2f}"), ("sim_from", self.sim_from), ("sim_mode", self.sim_mode)]

    async def restore(self, url) -> None:
        """The link's threshold, source and mode, turned on, and so re-run, when the link had it on and its pixels are
        here. A threshold that is not a number is one of the link's problems; one out of range, or a source or mode
        unknown, is ignored with one line in the status."""
        text = url.parts.get("sim")
        try:
            sim = None if not text else float(text)
        except ValueError:
            url.problems.append(f"sim {clip(text)!r} is not a number")
            sim = None
        try:
            settings = checked(sim, sim_from=url.parts.get("sim_from"), sim_mode=url.parts.get("sim_mode"))
        except ValueError as e:
            self.ctx.status = views.html("<b>Similarity settings in the URL ignored:</b> {}", e)
            return
        self.param.update(**settings)
        if sim is not None and targets(self.ctx.selected, self.ctx.pins, self.sim_from):
            self.on = True  # its watcher runs the search

    # ---------------------------------------------------------------- page API --
    def verbs(self, api) -> dict:
        async def switch(on):
            if on and self.on:
                await self.compute()  # again, for the current selection and view
            self.on = bool(on)
            return True

        async def search(source, mode, threshold):
            """Set the source and mode and turn it on: a change of either searches (_again), and that is this
            search; nothing changed, it searches itself (the selection and view are the current ones)."""
            t0 = time.perf_counter()
            settings = checked(None if threshold is None else float(threshold), sim_from=str(source),
                               sim_mode=str(mode))  # all of them, before any is set (param sets them one by one)
            before = self._search
            self.param.update(**settings, on=True)
            layer = await (self._search if self._search is not before else self.compute())
            return api.summary(layer, {"ms": (time.perf_counter() - t0) * 1000})

        def similarity(on=True, mode="mean", threshold=None):
            """similarity(true | false): the side bar's toggle (on again: a new search for the selection and view);
            similarity(source, mode, threshold): over the view from the selection and/or pins (mean or max), resolving
            to its summary."""
            return api.run(lambda: switch(on) if isinstance(on, bool) else search(on, mode, threshold))

        def sim_at(lon, lat):
            """The similarity map's value under lon/lat (null outside it or where there is no data)."""
            return self.result.value_at(float(lon), float(lat)) if self.result is not None else None
        return {"similarity": similarity, "simAt": sim_at}

    def controls(self) -> list:
        import panel as pn

        from app import layout
        return [pn.widgets.Toggle.from_param(self.param.on),
                pn.widgets.FloatSlider.from_param(self.param.threshold),
                pn.Row(pn.widgets.Select.from_param(self.param.sim_from, description=None, width=layout.HALF_W),
                       pn.widgets.Select.from_param(self.param.sim_mode, description=None, width=layout.HALF_W))]
