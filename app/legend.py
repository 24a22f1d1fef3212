"""The map's legend: a colour bar for the continuous layer shown, a key of swatches for a categorical one (class
names, cluster numbers), and a caption naming the year, the layer and the representation it was computed from. Pure functions of the explorer's state (app/main.py draws them on the
map: a Bokeh ColorBar and Label, whose text is drawn on the canvas, never parsed as HTML)."""
from __future__ import annotations


def colour_bar(state) -> tuple[str, float, float] | None:
    """(title, low, high) of the continuous layer on top, or None: the tool layer shown when it is continuous (its
    Tool.colour_bar: change, a regression, search by examples), else the top overlay drawn (similarity, over the
    range it shows)."""
    shown = state.tools.tool(state.tools.shown)
    drawn = [t for t in state.tools.overlays if t.drawn()]
    for tool in ([shown] if shown is not None else []) + drawn[::-1]:
        bar = tool.colour_bar()
        if bar is not None:
            return bar
    return None


def key(state) -> list[tuple[str, str]]:
    """(name, '#rrggbb') of each colour of the categorical tool layer shown: the classes by name (as the classifier
    coloured them), or the clusters by the number "Cluster to label" takes; [] for any other layer."""
    tool = state.tools.tool(state.tools.shown)
    return tool.legend_key() if tool is not None else []


def caption(state) -> str:
    """E.g. "2024 · similarity · full 128-d vectors (10 m)": what the map shows, and from what."""
    from app.session import representation
    layers = [t.layer_name for t in state.tools.overlays if t.drawn()]
    if state.tools.shown and state.tools.layer(state.tools.shown) is not None:
        layers.append(str(state.tools.shown))
    what = representation(state.model, state.render_view(), state.exact) if state.model is not None else ""
    text = " · ".join(str(p) for p in (state.year, " + ".join(layers) or "embedding preview", what) if p != "")
    labels = state.tools.labels
    if labels.mode:  # a click on the map labels a pixel rather than selecting it
        text += f" · LABELLING: a click labels a pixel as {labels.active or 'class 1'}"
    return text
