"""The tools' side bar (Panel/Bokeh): the labels' tab, each tool's tab (its `panel`, app/tools/tool.py), the tool
layer over the map; bound to their states in app/tools/."""
from __future__ import annotations

import io
import json

import panel as pn
from bokeh.models import ColumnDataSource

from app import geo, page, views
from app.layout import HALF_W, PANE_W, TABS_CSS
from app.state import TOOL_TABS
from app.tools import labelfiles, labels as lab, panes
from app.tools.polygon_ui import PolygonUI


LABELLING = "Labelling: on, click to stop"


def mode_look(on: bool) -> dict:
    """The label-mode toggle's text and colour, on and off."""
    return dict(name=LABELLING if on else "Click to label", button_type="warning" if on else "success")


class ToolsUI:
    def __init__(self, state, fig, tabs=None):
        """`tabs`: the names of the tool tabs shown (the link's `tools=`, in app/state.py TOOL_TABS' order; None:
        every tab: TOOL_TABS' order, then any tool's tab it does not name yet, in the registry's order)."""
        self.state = state
        t = state.tools
        L = t.labels
        self.tool_src = ColumnDataSource(dict(views.EMPTY_IMAGE), name="tool-source")
        self.label_src = ColumnDataSource(dict(x=[], y=[], color=[], cls=[]), name="label-source")
        self.tool_layer = fig.image_rgba(image="image", x="x", y="y", dw="dw", dh="dh", source=self.tool_src,
                                         name="tool-layer")
        fig.scatter("x", "y", source=self.label_src, size=8, marker="square", fill_color="color",
                    line_color="black", name="labels")
        self.labels_pane = pn.pane.HTML(panes.labels_html(L), name="labels-list", width=PANE_W)
        self.polygon = PolygonUI(state, fig)  # the map's polygon tool and its "Label inside" button
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
        # The tabs are dynamic (a hidden tab is not in the document) and the tabs but the first are built when
        # first opened, not while the explorer starts: their widgets and figures cost Python's start-up nothing.
        later = lambda build: pn.param.ParamFunction(build, lazy=True)
        every = {"labels": ("Labels", pn.Column(self.label_mode, self.polygon.button,
                                                pn.widgets.TextInput.from_param(L.param.new_name), add, self.active,
                                                self.colour, pn.Row(self.rename_to, rename), delete, self.labels_pane,
                                                export, export_csv, export_kml, self.upload, self.import_pane))}
        rank = {name: i for i, name in enumerate(TOOL_TABS)}
        for tool in sorted(t.all, key=lambda tool: rank.get(tool.tab, len(rank))):
            build = tool.panel(fig)  # every tool's set-up runs (its sources, its links to the map), shown or not
            if build is not None and tool.tab:
                every[tool.tab] = (tool.title, later(build))
        tabs = list(every) if tabs is None else tabs
        self.panel = pn.Tabs(*(every[name] for name in tabs), name="tools", width=PANE_W + 10, dynamic=True,
                             stylesheets=[TABS_CSS])
        # "Exact (full vectors)" and the line saying what the tools and similarity read (side by side with the tool
        # layer's select in the Layers card: app/main.py)
        self.exact = pn.widgets.Toggle.from_param(state.param.exact, button_type="primary", width=HALF_W, align="end")
        self.cost = pn.pane.HTML(views.html("{}", state.cost), name="read-cost", width=PANE_W)
        state.param.watch(lambda e: setattr(self.cost, "object", views.html("{}", e.new)), "cost")
        self.layer_select = pn.widgets.Select.from_param(t.param.shown, width=HALF_W)
        L.param.watch(self._draw_labels, ["classes", "points", "active"])
        t.param.watch(self._draw_layer, ["shown"])
        for tool in t.all:
            tool.param.watch(self._draw_layer, [tool.layer_param])
        state.param.watch(self._draw_layer, ["base"])

    def _guard(self, fn) -> None:
        try:
            fn()
        except ValueError as e:  # a bad class name: one line in the status, never a traceback
            self.state.status = views.html("<b>Labels:</b> {}", e)

    def import_labels(self, data, filename=None):
        """The files chosen in "Import labels". One GeoJSON file replaces the labels (a refusal is the status line's:
        labels.Labels.import_geojson); several files, or CSV / KML, load together (app/tools/labelfiles.py), with
        one line per bad file in the side bar. The status line counts each file's items as it is read."""
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
                    await L.import_geojson(files[0][1], files[0][0])
                except ValueError:
                    pass  # said in the status line
            return self.state.spawn(one())
        classes, pts, problems = labelfiles.read_many(files, L.reading)  # the status line says how far each got
        self.import_pane.object = panes.import_problems_html(problems)
        if problems:
            self.state.status = views.html("<b>Import refused:</b> {}", problems[0]) if len(problems) == 1 else \
                views.html("<b>Import:</b> {} of {} files refused (listed under Labels).", len(problems), len(files))
        if not pts:
            if not problems:  # read, and nothing in them: the status line no longer counts their items
                self.state.status = views.html("<b>Import:</b> no labels in the {}.", "file" if len(files) == 1
                                               else "files")
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

    def _draw_layer(self, *events) -> None:
        s = self.state
        v = s.base[0] if s.base else s.render_view()
        layer = s.tools.layer(s.tools.shown)
        self.tool_src.data = views.image_data(layer.image(v) if layer is not None else None, v)


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
