"""A small Bokeh document of the kinds of models the explorer's first document holds, built when the site is built.

The first document BokehJS builds in a page costs about four times what the same document costs the second time
(measured in headless Chromium: ~490 ms, then ~125 ms): its code runs for the first time (compiled lazily by the
JavaScript engine), its stylesheets are parsed, its fonts measured. The page (app/web/boot.js `warmUp`) builds this
one off screen, and removes it, while Python imports Panel in the worker (two seconds in which the page's thread is
idle), so the explorer's own document, which comes later, is built at the second time's cost.

`python -m builder site` runs `document_json` in the site's own Pyodide under node (builder/warmup.mjs), so the JSON
is of the very Panel and Bokeh versions the browser runs; tests/test_browser.py checks that every kind of model in
the explorer's first document and its plots is here too. The values are placeholders: nothing here is shown.
"""
from __future__ import annotations

import json


def layout():
    """Map, plots and side bar in miniature: the same layouts, glyphs, tools and widgets (app/main.py ExplorerUI,
    app/layout.py, app/figures.py, app/tools/ui.py, app/downloads.py)."""
    import numpy as np
    import panel as pn
    from bokeh.events import Tap
    from bokeh.models import (ColorBar, ColumnDataSource, CustomJS, FixedTicker, HoverTool, LinearColorMapper,
                              PolyDrawTool, Range1d, Title)
    from bokeh.plotting import figure

    img = ColumnDataSource(dict(image=[np.zeros((2, 2), np.uint32)], x=[0.0], y=[0.0], dw=[1.0], dh=[1.0]))
    xy = ColumnDataSource(dict(x=[0.0, 1.0], y=[0.0, 1.0], color=["#000000", "#ffffff"], label=["a", "b"]))
    lines = ColumnDataSource(dict(xs=[[0, 1]], ys=[[0, 1]], color=["#000000"], label=["a"]))
    m = figure(width=300, height=200, x_range=Range1d(0, 1), y_range=Range1d(0, 1), x_axis_type="mercator",
               y_axis_type="mercator", tools="pan,wheel_zoom,reset", active_scroll="wheel_zoom",
               toolbar_location="above", match_aspect=True)
    m.image_rgba(image="image", x="x", y="y", dw="dw", dh="dh", source=img)
    m.line("x", "y", source=xy, line_dash="dashed")
    m.segment("x", "y", "y", "x", source=xy)
    m.text("x", "y", text="label", source=xy, text_font_size="11px")
    m.scatter("x", "y", source=xy, size=8, marker="square", fill_color="color", level="overlay")
    m.scatter("x", "y", source=xy, size=16, marker="cross", level="overlay")
    m.js_on_event(Tap, CustomJS(args=dict(src=xy), code=""))
    m.multi_line("xs", "ys", source=lines)
    m.add_tools(PolyDrawTool(renderers=[m.patches("xs", "ys", source=lines)]))  # the polygon labels' tool
    m.add_layout(ColorBar(color_mapper=LinearColorMapper(palette=["#000000", "#ffffff"], low=0, high=1),
                          orientation="horizontal", width=50, height=5))
    m.add_layout(Title(text="t", align="left"), "above")
    spectrum = figure(width=300, height=150, title="t", x_axis_label="x", y_axis_label="y",
                      tools="pan,wheel_zoom,reset,save")
    spectrum.multi_line("xs", "ys", source=lines, line_color="color", legend_field="label")
    spectrum.add_tools(HoverTool(tooltips=[("pixel", "@label")]))
    change = figure(width=200, height=150, title="t", tools="save", y_range=Range1d(-1, 1))
    change.line("x", "y", source=xy)
    change.scatter("x", "y", source=xy)
    change.quad(left="x", right="y", top="y", bottom=0, source=xy)
    change.xaxis.ticker = FixedTicker(ticks=[0, 1])
    side = pn.Column(
        pn.widgets.TextInput(name="t", placeholder="p"), pn.Row(pn.widgets.Checkbox(name="c")),
        pn.widgets.FloatSlider(name="s", start=0, end=1), pn.widgets.Select(name="s", options=["a", "b"]),
        pn.pane.HTML("<b>x</b>", width=100), pn.Row(pn.widgets.Button(name="b", button_type="primary")),
        pn.widgets.Toggle(name="t", button_type="success"),
        pn.widgets.FileDownload(callback=lambda: None, filename="x", label="d", embed=False),
        pn.widgets.FileInput(accept=".json"), pn.widgets.ColorPicker(name="c", value="#000000"),
        pn.Tabs(("a", pn.Column(pn.widgets.Button(name="b", button_type="danger"))), ("b", pn.Column()),
                dynamic=True),
        width=200)
    toggle = pn.widgets.Toggle(name="t", value=True, button_type="light")
    cards = pn.Column(pn.Card(side, title="t"), pn.Card(pn.pane.Bokeh(spectrum), pn.pane.Bokeh(change), title="t",
                                                       collapsed=True))
    toggle.jslink(cards, value="visible")
    return pn.Row(pn.Column(pn.pane.Bokeh(m)), pn.Column(toggle, cards, scroll="y-auto"))


def document_json() -> str:
    """{docs_json, render_items, root_ids} of the layout: the JSON strings the page's `render` takes (app/page.py)."""
    from app.page import document
    _, docs_json, render_items, root_ids = document(layout())
    return json.dumps({"docs_json": docs_json, "render_items": render_items, "root_ids": root_ids})
