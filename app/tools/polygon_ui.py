"""Drawing a polygon on the map to label the pixels inside it: Bokeh's PolyDrawTool in the map's toolbar and a
button in the Labels tab that labels inside the last polygon drawn (app/tools/polygon.py), then clears it.

PolyDrawTool: a long press on the map starts a polygon, each tap adds a corner, Esc ends it (so does a long press
on the last corner);
the map's taps select or label nothing while the tool is active (app/main.py TAP_JS).
"""
from __future__ import annotations

import panel as pn
from bokeh.models import ColumnDataSource, PolyDrawTool

from app import geo, views
from app.tools import polygon

NAME = "polygon-draw"  # the tool's name, which the map's tap handler looks for


class PolygonUI:
    def __init__(self, state, fig):
        self.state = state
        self.src = ColumnDataSource(dict(xs=[], ys=[]), name="polygon-source")
        patches = fig.patches("xs", "ys", source=self.src, fill_color="#ffd60a", fill_alpha=0.2, line_color="#222222",
                              line_width=2, line_dash="dashed", name="polygon")
        fig.add_tools(PolyDrawTool(renderers=[patches], name=NAME, num_objects=1,
                                   description="Draw a polygon to label (long press, taps, Esc)"))
        self.button = pn.widgets.Button(name="Label inside the drawn polygon", button_type="primary")
        self.button.on_click(lambda e: state.spawn(self.label()))

    def coords(self) -> list | None:
        """The last drawn polygon's vertices as [[lon, lat], ...] (None: none drawn)."""
        xs, ys = self.src.data.get("xs") or [], self.src.data.get("ys") or []
        if not xs or len(xs[-1]) < 3:
            return None
        lon, lat = geo.merc_to_lonlat([float(x) for x in xs[-1]], [float(y) for y in ys[-1]])
        return [[float(a), float(b)] for a, b in zip(lon, lat)]

    async def label(self) -> dict | None:
        coords = self.coords()
        if coords is None:
            self.state.status = views.html("Draw a polygon on the map first (the polygon tool in the map's toolbar: a "
                                           "long press starts it, taps add corners, Esc ends it).")
            return None
        try:
            out = await polygon.label(self.state, coords)
        except ValueError:  # the status says why
            return None
        self.src.data = dict(xs=[], ys=[])
        return out
