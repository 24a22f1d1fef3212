"""The tools' widgets, panes and map layers (Panel/Bokeh), bound to their states in app/tools/."""
from __future__ import annotations

import io
import json

import panel as pn
from bokeh.models import ColumnDataSource
from bokeh.plotting import figure

from app import geo, page, views
from app.layout import PANE_W, TABS_CSS
from app.state import TOOL_TABS
from app.tools import labelfiles, labels as lab, panes
from app.tools.polygon_ui import PolygonUI
from app.tools.scatter_ui import ScatterUI


LABELLING = "Labelling: on, click to stop"


def mode_look(on: bool) -> dict:
    """The label-mode toggle's text and colour, on and off."""
    return dict(name=LABELLING if on else "Click to label", button_type="warning" if on else "success")


class ToolsUI:
    def __init__(self, state, fig, tabs=TOOL_TABS):
        """`tabs`: the names of the tool tabs shown (app/state.py TOOL_TABS, in that order; the link's `tools=`)."""
        self.state = state
        t = state.tools
        L = t.labels
        self.tool_src = ColumnDataSource(dict(views.EMPTY_IMAGE), name="tool-source")
        self.label_src = ColumnDataSource(dict(x=[], y=[], color=[], cls=[]), name="label-source")
        self.hist_src = ColumnDataSource(dict(left=[], right=[], count=[]), name="hist-source")
        self.tool_layer = fig.image_rgba(image="image", x="x", y="y", dw="dw", dh="dh", source=self.tool_src,
                                         name="tool-layer")
        fig.scatter("x", "y", source=self.label_src, size=8, marker="square", fill_color="color",
                    line_color="black", name="labels")
        self.labels_pane = pn.pane.HTML(panes.labels_html(L), name="labels-list", width=PANE_W)
        self.polygon = PolygonUI(state, fig)  # the map's polygon tool and its "Label inside" button
        self.legend_pane = pn.pane.HTML("", name="class-legend", width=PANE_W)
        self.active = pn.widgets.Select(name="Active class", options=L.names())
        self.active.param.watch(lambda e: setattr(L, "active", e.new or ""), "value")
        # The active class's colour: the user's choice recolours its labels and the class map at once.
        self.colour = pn.widgets.ColorPicker(name="Colour of the active class", value="#000000")
        self.colour.param.watch(lambda e: self._guard(lambda: L.recolour(L.active, e.new))
                                if L.active and e.new != dict(L.classes).get(L.active) else None, "value")
        self.rename_to = pn.widgets.TextInput(name="Rename the active class to", width=PANE_W - 110)
        add = pn.widgets.Button(name="Add class")
        add.on_click(lambda e: self._guard(lambda: L.add_class(L.new_name)))
        rename = pn.widgets.Button(name="Rename", width=80, align="end")
        rename.on_click(lambda e: self._guard(lambda: L.rename(L.active, self.rename_to.value)))
        delete = pn.widgets.Button(name="Delete class", button_type="danger")
        delete.on_click(lambda e: L.delete(L.active))
        export = pn.widgets.FileDownload(callback=lambda: io.BytesIO(json.dumps(lab.to_geojson(L.classes, L.points))
                                                                      .encode()),
                                         filename="labels.geojson", label="Export labels (GeoJSON)", embed=False)
        export_csv = pn.widgets.FileDownload(callback=lambda: io.BytesIO(labelfiles.to_csv(L.points).encode()),
                                             filename="labels.csv", label="Export labels (CSV)", embed=False)
        export_kml = pn.widgets.FileDownload(callback=lambda: io.BytesIO(labelfiles.to_kml(L.classes, L.points)
                                                                         .encode()),
                                             filename="labels.kml", label="Export labels (KML)", embed=False)
        self.upload = pn.widgets.FileInput(accept=".geojson,.json,.csv,.kml", multiple=True,
                                           name="Import labels (GeoJSON, CSV, KML)")
        self.upload.param.watch(lambda e: self.import_labels(e.new, self.upload.filename) if e.new else None, "value")
        self.import_pane = pn.pane.HTML("", name="import-problems", width=PANE_W)
        # a file over the size limit is not sent by the page (app/web/boot.js oversizedFile); it says so
        page.on("file-refused", lambda msg: setattr(state, "status", views.html(
            "<b>Import refused:</b> the labels file is {:,} bytes; files over {:,} bytes are refused",
            int(msg.bytes), int(msg.limit))))
        # "Click to label" says whether it is on, in its text and colour (the map's caption says so too: app/legend.py)
        self.label_mode = pn.widgets.Toggle.from_param(L.param.mode, **mode_look(L.mode))
        L.param.watch(lambda e: self.label_mode.param.update(**mode_look(e.new)), "mode")
        c, k, ch = t.classify, t.cluster, t.change
        self.scatter = ScatterUI(state, fig)
        w = lambda p, **kw: pn.Param(p, show_name=False, **kw)
        # The tabs are dynamic (a hidden tab is not in the document) and the tabs but the first are built when
        # first opened, not while the explorer starts: their widgets and figures cost Python's start-up nothing.
        later = lambda build: pn.param.ParamFunction(build, lazy=True)
        every = dict(zip(TOOL_TABS, (
            ("Labels", pn.Column(self.label_mode, self.polygon.button,
                                 pn.widgets.TextInput.from_param(L.param.new_name), add, self.active, self.colour,
                                 pn.Row(self.rename_to, rename), delete, self.labels_pane, export, export_csv,
                                 export_kml, self.upload, self.import_pane)),
            ("Classify", later(lambda: pn.Column(w(c.param, parameters=["method", "k", "seed", "threshold", "train_year",
                                                                      "test_year", "run"]),
                                                 self.legend_pane, pn.pane.HTML(pn.bind(panes.evaluation_html,
                                                 c.param.evaluation), name="evaluation", width=PANE_W)))),
            ("Regression", later(lambda: pn.Column(w(t.regress.param, parameters=["method", "seed", "run"]),
                                                   pn.pane.HTML(pn.bind(panes.regression_html, t.regress.param.evaluation,
                                                                        t.regress.param.result), name="regression",
                                                                width=PANE_W)))),
            ("Clusters", later(lambda: w(k.param, parameters=["k", "seed", "run", "which", "per_class", "to_label"]))),
            ("Change", later(lambda: pn.Column(w(ch.param, parameters=["y0", "y1", "threshold", "run"]),
                                               self._histogram()))),
            # similarity to pixels is the side bar's (its toggle, threshold, source and mode: app/main.py); this tab's
            # is similarity to label classes
            ("Similarity", later(lambda: w(t.examples.param, parameters=["positive", "negative", "threshold", "run"]))),
            ("Scatter", later(lambda: self.scatter.view())))))
        self.panel = pn.Tabs(*(every[name] for name in tabs), name="tools", width=PANE_W + 10, dynamic=True,
                             stylesheets=[TABS_CSS])
        self.exact = pn.Column(pn.widgets.Toggle.from_param(state.param.exact, button_type="primary"),
                               pn.pane.HTML(views.html("{}", state.cost), name="read-cost", width=PANE_W))
        state.param.watch(lambda e: setattr(self.exact[1], "object", views.html("{}", e.new)), "cost")
        self.layer_select = pn.widgets.Select.from_param(t.param.shown)
        L.param.watch(self._draw_labels, ["classes", "points", "active"])
        t.param.watch(self._draw_layer, ["shown"])
        for tool in (c, k, ch, t.regress, t.examples):
            tool.param.watch(self._draw_layer, ["result"])
        t.scatter.param.watch(self._draw_layer, ["highlight"])
        state.param.watch(self._draw_layer, ["base"])
        ch.param.watch(lambda e: setattr(self.hist_src, "data", dict(e.new)), "hist")

    def _histogram(self):
        # Counts on a logarithmic axis: on a linear one, the bin of the unchanged pixels dwarfed the rest. A bar
        # starts at 0.5, so that a bin of one pixel shows too.
        hist = figure(width=PANE_W, height=200, title="Change histogram (1 - cosine)", name="change-hist", tools="save",
                      y_axis_type="log", y_axis_label="pixels")
        hist.quad(left="left", right="right", top="count", bottom=0.5, source=self.hist_src)
        from app.figures import anchor
        anchor(hist, 1.0)  # no "could not set initial ranges" before a change is computed
        return hist

    def _guard(self, fn) -> None:
        try:
            fn()
        except ValueError as e:  # a bad class name: one line in the status, never a traceback
            self.state.status = views.html("<b>Labels:</b> {}", e)

    def import_labels(self, data, filename=None):
        """The files chosen in "Import labels". One GeoJSON file replaces the labels (a refusal is the status line's:
        labels.Labels.import_geojson); several files, or CSV / KML, load together (app/tools/labelfiles.py), with
        one line per bad file in the side bar."""
        L = self.state.tools.labels
        datas = data if isinstance(data, list) else [data]
        # the widget's value and filename reach Python as separate changes: a name that is missing, or left from
        # the files chosen before, never decides how a file is read: its first character does (kind_name)
        names = filename if isinstance(filename, list) and len(filename) == len(datas) else \
            [filename if isinstance(filename, str) and not isinstance(data, list) else None] * len(datas)
        files = [(kind_name(n, d), d) for n, d in zip(names, datas)]
        if len(files) == 1 and files[0][0].lower().endswith((".geojson", ".json")):
            async def one() -> None:
                try:
                    await L.import_geojson(files[0][1])
                except ValueError:
                    pass  # said in the status line
            return self.state.spawn(one())
        classes, pts, problems = labelfiles.read_many(files)
        self.import_pane.object = panes.import_problems_html(problems)
        if problems:
            self.state.status = views.html("<b>Import refused:</b> {}", problems[0]) if len(problems) == 1 else \
                views.html("<b>Import:</b> {} of {} files refused (listed under Labels).", len(problems), len(files))
        if not pts:
            return None
        return self.state.spawn(L.load(classes, pts))

    def _draw_labels(self, *events) -> None:
        L = self.state.tools.labels
        xs, ys = geo.lonlat_to_merc([p.lon for p in L.points], [p.lat for p in L.points])
        colours = dict(L.classes)
        self.label_src.data = dict(x=[float(x) for x in xs] if L.points else [],
                                   y=[float(y) for y in ys] if L.points else [],
                                   color=[colours.get(p.cls, "#000000") for p in L.points],
                                   cls=[p.cls for p in L.points])
        self.labels_pane.object = panes.labels_html(L)
        self.active.options = L.names()
        self.active.value = L.active or None
        self.colour.value = dict(L.classes).get(L.active, self.colour.value)
        self.legend_pane.object = panes.legend_html(self.state.tools.classify.legend())

    def _draw_layer(self, *events) -> None:
        s = self.state
        v = s.base[0] if s.base else s.render_view()
        layer = s.tools.layer(s.tools.shown)
        self.tool_src.data = views.image_data(layer.image(v) if layer is not None else None, v)
        self.legend_pane.object = panes.legend_html(s.tools.classify.legend()) if s.tools.shown == "class" else ""


def kind_name(name, data) -> str:
    """A label file's name for reading it (app/tools/labelfiles.py reads by the name's ending): `name` when its
    ending agrees with the file's first character ('{' or '[': GeoJSON, '<': KML, anything else: CSV), else
    labels.geojson, labels.kml or labels.csv."""
    head = (data[:4096].decode("utf-8", "replace") if isinstance(data, (bytes, bytearray)) else str(data)[:4096])
    first = head.lstrip("\ufeff \t\r\n")[:1]
    ends = (".geojson", ".json") if first in ("{", "[") else (".kml",) if first == "<" else (".csv",)
    if isinstance(name, str) and name.lower().endswith(ends):
        return name
    return "labels" + ends[0]
