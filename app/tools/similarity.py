"""Similarity over the whole view (its region: an overview level's full vectors or compact code, or, without
overviews, 10 m vectors capped at MAX_REGION per side), in every zone the view shows, from the selection and/or the pins: the cosine to each
(Region.cosines), combined by mean or max."""
from __future__ import annotations

import math
import time

import numpy as np

from app import views
from app.state import SHOWN
from app.tools import region as reg

SOURCES = ["selection", "pins", "selection and pins"]
MODES = ["mean", "max"]


def targets(selected, pins, source: str) -> list:
    sel = [selected] if selected is not None and selected.valid else []
    return {"selection": sel, "pins": list(pins), "selection and pins": sel + list(pins)}[source]


def combine(region: reg.Region, targets: list[np.ndarray], mode: str) -> np.ndarray:
    """Mean or max over the targets of each pixel's cosine (NaN where a pixel has no data), in one zone."""
    sims = np.stack([region.cosines(t) for t in targets])
    return (sims.mean(axis=0) if mode == "mean" else sims.max(axis=0)).astype(np.float32)


async def compute(app) -> None:
    """Set app.sim to the similarity Layer over the view (every zone it shows; coloured by the threshold when
    drawn), or say in the status why not."""
    tg = targets(app.selected, app.pins, app.sim_from)
    if not tg:
        app.status = views.html("Select a pixel with data first." if app.sim_from == "selection"
                                else "Pin pixels with data first.")
        return
    t0 = time.perf_counter()
    region = await reg.read(app.model, app.render_view(), app.exact)
    if region is None:
        app.status = views.html("The view shows no zone of this store.")
        return
    vectors = [p.vector for p in tg]
    app.sim = region.layer("similarity", [combine(part, vectors, app.sim_mode) for part in region.parts])
    what = tg[0].label() if len(tg) == 1 else f"{app.sim_mode} of {len(tg)} pixels"
    app.status = views.html("Similarity to {}: {} ({:.0f} ms).", what, reg.describe(region),
                            (time.perf_counter() - t0) * 1000)


async def restore(app, url) -> None:
    """The link's similarity (app/state.py: sim = threshold, sim_from, sim_mode), turned on, and so re-run, when
    the link had it on and its pixels are here. A value out of range or unknown is ignored with one line."""
    try:
        settings = {}
        if url.sim is not None:
            if not (math.isfinite(url.sim) and -1 <= url.sim <= 1):
                raise ValueError(f"threshold {url.sim} is not between -1 and 1")
            settings["threshold"] = url.sim
        for key, allowed in (("sim_from", SOURCES), ("sim_mode", MODES)):
            value = getattr(url, key)
            if value is not None and value not in allowed:
                raise ValueError(f"{key} {value[:SHOWN]!r} is not one of {', '.join(allowed)}")
            if value is not None:
                settings[key] = value
    except ValueError as e:
        app.status = views.html("<b>Similarity settings in the URL ignored:</b> {}", e)
        return
    app.param.update(**settings)
    if url.sim is not None and targets(app.selected, app.pins, app.sim_from):
        app.similarity_on = True  # the state's watcher runs the search
