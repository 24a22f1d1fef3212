"""The map's legend: a colour bar for the continuous layer shown, and a caption naming the year, the layer and
the representation it was computed from. Pure functions of the explorer's state (app/main.py draws them on the
map: a Bokeh ColorBar and Label, whose text is drawn on the canvas, never parsed as HTML)."""
from __future__ import annotations


def colour_bar(state) -> tuple[str, float, float] | None:
    """(title, low, high) of the continuous layer on top, or None: a tool's change layer when it is shown,
    else the similarity layer when it is on. Both are coloured over the range they show (app/render.py ramp_rgba):
    similarity from the threshold to 1, change from 0 to 1."""
    t = state.tools
    if t.shown == "change" and t.change.result is not None:
        return "change (1 - cosine)", 0.0, 1.0
    if state.similarity_on and state.sim is not None:
        return "cosine similarity", float(state.threshold), 1.0
    return None


def caption(state) -> str:
    """E.g. "2024 · similarity · full 128-d vectors (10 m)": what the map shows, and from what."""
    from app.session import representation
    layers = []
    if state.similarity_on and state.sim is not None:
        layers.append("similarity")
    if state.tools.shown and state.tools.layer(state.tools.shown) is not None:
        layers.append(str(state.tools.shown))
    what = representation(state.model, state.render_view(), state.exact) if state.model is not None else ""
    return " · ".join(str(p) for p in (state.year, " + ".join(layers) or "embedding preview", what) if p != "")
