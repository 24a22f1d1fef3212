"""The scatter's figure (PCA or UMAP) and its links to the map (Bokeh), bound to the state in app/tools/scatter.py.

Brushing (box or lasso select) changes the points' Selection model, which reaches Python as a model
change; the selected points become the "scatter" map layer. A tap on a point (Bokeh's TapTool) selects
it the same way and writes the tapped points and place to a small source, so Python also selects that
point's pixel on the map. The mouse over the map (debounced in JS) and a tapped map pixel are written to
small sources the same way, and their projection is marked (ringed) in the scatter.
"""
from __future__ import annotations

import panel as pn
from bokeh.events import MouseMove
from bokeh.models import ColumnDataSource, CustomJS, TapTool
from bokeh.plotting import figure

from app import geo, page, views
from app.layout import PANE_W

# The map's mouse position reaches Python once the mouse rests for 40 ms (not on every move).
HOVER_JS = """
clearTimeout(window.__tesseraHoverTimer);
const x = cb_obj.x, y = cb_obj.y;
window.__tesseraHoverTimer = setTimeout(() => { src.data = {x: [x], y: [y]}; }, 40);
"""
# A tap that hit points (TapTool runs its callback after selecting them): the hit points and where the tap was.
TAP_JS = """
src.data = {i: Array.from(cb_data.source.selected.indices), x: [cb_data.geometries.x], y: [cb_data.geometries.y]};
"""


def points_data(p) -> dict:
    if p is None:
        return dict(x=[], y=[])
    return dict(x=p.xy[:, 0].astype(float), y=p.xy[:, 1].astype(float))


def cursor_data(hover) -> dict:
    return dict(x=[hover["x"]], y=[hover["y"]]) if hover else dict(x=[], y=[])


def note_html(p) -> str:
    """What the scatter shows (numbers and settings only, escaped all the same)."""
    if p is None:
        return "<i>Project the view's pixels, then brush points (box or lasso) to see them on the map.</i>"
    sample = (views.html(" (a seeded random sample of the view's {:,} valid pixels; the {} is fitted on them)",
                         p.n_valid, p.method) if len(p.rows) < p.n_valid else "")
    return views.html("{} of {:,} points drawn{}; {}.", p.method, len(p.rows), sample, p.fit.axes())


class ScatterUI:
    def __init__(self, tool, map_fig):
        self.tool = sc = tool
        self.points = ColumnDataSource(dict(x=[], y=[]), name="scatter-source")
        self.cursor = ColumnDataSource(dict(x=[], y=[]), name="scatter-cursor")
        self.mouse = ColumnDataSource(dict(x=[], y=[]), name="hover-source")
        self.tapped = ColumnDataSource(dict(i=[], x=[], y=[]), name="scatter-tap", tags=[page.EVERY_CHANGE])
        self.note = pn.pane.HTML(note_html(None), name="scatter-note", width=PANE_W)
        self.points.selected.on_change("indices", self._on_brush)
        map_fig.js_on_event(MouseMove, CustomJS(args=dict(src=self.mouse), code=HOVER_JS))
        self.mouse.on_change("data", self._on_mouse)
        self.tapped.on_change("data", self._on_tap)
        sc.param.watch(self._draw_points, "result")
        sc.param.watch(self._draw_selection, "selected")
        sc.param.watch(lambda e: setattr(self.cursor, "data", cursor_data(e.new)), "hover")
        sc.ctx.watch_pixel(self._on_selected_pixel)

    def view(self):
        """The tab: the scatter's settings, its note and its figure (built when the tab is first opened)."""
        fig = figure(width=PANE_W, height=PANE_W, name="scatter", tools="box_select,lasso_select,pan,wheel_zoom,reset,save",
                     active_drag="box_select", title="Embedding scatter")
        dots = fig.scatter("x", "y", source=self.points, size=3, fill_color="#4c72b0", line_color=None,
                           alpha=0.6, selection_fill_color="#ff00ff", selection_alpha=1.0,
                           nonselection_fill_alpha=0.25, name="scatter-points")
        fig.add_tools(TapTool(renderers=[dots], callback=CustomJS(args=dict(src=self.tapped), code=TAP_JS)))
        fig.scatter("x", "y", source=self.cursor, size=14, marker="circle", fill_color=None, line_color="black",
                    line_width=2, name="scatter-hover")
        params = ["method", "max_points", "seed", "n_neighbors", "min_dist", "run", "class_name", "per_class",
                  "to_label"]
        return pn.Column(pn.Param(self.tool.param, show_name=False, parameters=params), self.note,
                         pn.pane.Bokeh(fig))

    # ------------------------------------------------------------ browser -> state --
    def _on_brush(self, attr, old, new) -> None:
        self.tool.select(list(new))

    def _on_tap(self, attr, old, new) -> None:
        if new.get("i") and new.get("x"):
            self.tool.ctx.spawn(self.tool.tap(list(new["i"]), float(new["x"][0]), float(new["y"][0])))

    def _on_mouse(self, attr, old, new) -> None:
        if new.get("x") and self.tool.result is not None:
            lon, lat = geo.merc_to_lonlat(new["x"][0], new["y"][0])
            self.tool.hover_at(float(lon), float(lat))

    def _on_selected_pixel(self, px) -> None:
        if px is not None and self.tool.result is not None:
            self.tool.hover_at(px.lon, px.lat)

    # ------------------------------------------------------------ state -> browser --
    def _draw_points(self, event) -> None:
        self.points.selected.indices = []
        self.points.data = points_data(event.new)
        self.note.object = note_html(event.new)

    def _draw_selection(self, event) -> None:
        if list(self.points.selected.indices) != list(event.new):
            self.points.selected.indices = list(event.new)
