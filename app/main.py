"""The explorer's UI: Panel + Bokeh in Pyodide, bound to the state in app/session.py.

Widgets are built from the state's parameters (`from_param`); the plots and panes are redrawn
by watchers from the pure views in app/views.py; one watcher writes the URL.
"""
from __future__ import annotations

import asyncio
import io
import itertools

import numpy as np

import panel as pn
from bokeh.events import Tap
from bokeh.models import (ColorBar, ColumnDataSource, CustomJS, HoverTool, LinearColorMapper, Range1d, Title,
                          WMTSTileSource)
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from app import api, footprints, geo, layout, legend, messages, page, places, views
from app.downloads import ExportButtons
from app.figures import change_figure, lines_figure
from app.catalog import absolute, load_catalog
from app.export import to_csv, to_npy
from builder.core.source import SourceError
from app.reader import bridge
from app.session import MAP_H, MAP_W, Explorer, fit_box, image_size, year_options
from app.state import UrlState
from app.tools import share
from app.tools.labels import BrowserStorage
from app.tools.ui import ToolsUI


# A tap on the map: the page shows the spectrum sent ahead for the pixel there, when there is one (app/web/press.js
# answers the event), and Python gets the tap, with the id of what the page shows (ExplorerUI._on_tap).
TAP_JS = """
if (cb_obj.origin?.toolbar?.tools.some((t) => t.name === "polygon-draw" && t.active)) return;  // taps draw a polygon (app/tools/polygon_ui.py)
const tap = {x: cb_obj.x, y: cb_obj.y, ahead: null};
document.dispatchEvent(new CustomEvent("tessera-tap", {detail: tap}));
src.data = tap.ahead === null ? {x: [tap.x], y: [tap.y]} : {x: [tap.x], y: [tap.y], ahead: [tap.ahead]};
"""
# The map's size on screen reaches Python as a data change of a small source, as the taps do: BokehJS sets the plot's
# inner_width/height at each layout (the window resized, the side bar folded), with the screen's devicePixelRatio.
SIZE_JS = """
src.data = {w: [fig.inner_width], h: [fig.inner_height], dpr: [window.devicePixelRatio || 1]};
"""
AHEADS_KEPT = 16  # spectra sent ahead that a tap may still name (the page holds the last one)


class ExplorerUI(pn.viewable.Viewer):
    """The map, the plots and the side bar, as views of one `Explorer` state."""

    def __init__(self, state: Explorer, **params):
        super().__init__(**params)
        self.state = state
        self._showing = False
        self.sources = {name: ColumnDataSource(dict(data), name=name) for name, data in (
            ("base-source", self._base_data()), ("overlay-source", views.EMPTY_IMAGE),
            ("pin-source", dict(x=[], y=[], color=[], label=[])), ("selected-source", dict(x=[], y=[])),
            ("spectrum-source", dict(xs=[], ys=[], color=[], label=[])),
            ("years-source", dict(xs=[], ys=[], color=[], label=[])),
            ("change-source", dict(year=[], cosine=[], label=[])), ("tap-source", dict(x=[], y=[])),
            ("map-size-source", dict(w=[], h=[], dpr=[])),
            ("coast-source", dict(x=[], y=[])), ("border-source", dict(x=[], y=[])),
            ("scale-source", views.scale_bar_data(state.view)),
            ("footprint-source", dict(xs=[], ys=[], name=[])), ("footprint-marker-source", dict(x=[], y=[], name=[])),
            ("key-source", dict(x=[], y=[], color=[], label=[])))}
        self.map_fig = self._map_figure()
        tabs = state.url_state.tools
        self.tools_ui = ToolsUI(state, self.map_fig, tabs)  # app/tools/: the link's tools= (None: every tab)
        # Where the mouse rests over the map (the scatter's hover source: after 40 ms at rest), its pixel is read ahead.
        state.tools.scatter.ui.mouse.on_change("data", self._on_hover)
        # The plots' sources are in the first document (the map figure's tags hold them), so selections made before
        # the plots are shown (show_plots, once the map is interactive) land in them as they do later.
        self.map_fig.tags = [self.sources[n] for n in ("spectrum-source", "years-source", "change-source")]
        # The spectrum, the pixel across years and its change: a card of the side bar, opened by each selection.
        self.plots = layout.card("Spectrum and years", name="plots", collapsed=True)
        # Every pane's HTML is made by views.html, which escapes every value.
        self.info = pn.pane.HTML(views.info_html(None, None, None), name="info", width=layout.PANE_W)
        self.table = pn.pane.HTML(views.table_html(None, []), name="compare", width=layout.PANE_W)
        self.status = pn.pane.HTML(state.param.status, name="status", width=layout.SIDE_W)  # follows the state
        self.csv_btn = pn.widgets.FileDownload(callback=lambda: io.BytesIO(to_csv(state.pins)), filename="pins.csv",
                                               label="Download pins (CSV)", embed=False)
        self.npy_btn = pn.widgets.FileDownload(callback=lambda: io.BytesIO(to_npy(state.pins)), filename="pins.npy",
                                               label="Download pins (.npy)", embed=False)
        self.exports = ExportButtons(state)
        self.notebook = pn.pane.HTML("", name="notebook", width=layout.PANE_W)  # the view's notebook link (_write_url_now)
        # description=None: Panel shows a parameter's doc, written for developers, as the widget's tooltip (through
        # markdown-it, which the start-up then imports); the side bar's labels say enough.
        self.widgets = dict(
            year=pn.widgets.Select.from_param(state.param.year, description=None),
            pin=pn.widgets.Button.from_param(state.param.pin_selected, button_type="primary"),
            clear=pn.widgets.Button.from_param(state.param.clear_pins),
            goto=pn.widgets.TextInput.from_param(state.param.goto_text, placeholder="lon,lat or country name",
                                                 name="Go to (lon,lat or country)"),
            coast=pn.widgets.Checkbox.from_param(state.param.show_coast),
            borders=pn.widgets.Checkbox.from_param(state.param.show_borders),
            geo_opacity=pn.widgets.FloatSlider.from_param(state.param.geo_opacity),
            embedding_opacity=pn.widgets.FloatSlider.from_param(state.param.embedding_opacity),
            cancel=pn.widgets.Button.from_param(state.param.cancel_read, visible=False, name="Cancel read"),
            # shown while the selected pixel is outside the view (_draw_info)
            go_selected=pn.widgets.Button(name="Go to it", button_type="primary", visible=False))
        self.widgets["go_selected"].on_click(lambda e: state.go_to_selected())
        state.param.watch(lambda e: setattr(self.widgets["cancel"], "visible", e.new), ["reading"])
        # a tool's step under way: the page counts its seconds (app/web/busy.js), on its own thread
        state.param.watch(lambda e: page.post({"type": "busy", "what": e.new}), ["running"])
        if state.tiles_url:  # the web tile layer's controls exist only when a deployment set a template
            self.widgets.update(tiles=pn.widgets.Checkbox.from_param(state.param.show_tiles),
                                tiles_opacity=pn.widgets.FloatSlider.from_param(state.param.tiles_opacity))
        self._plotted = None  # the selection whose plots were last opened (_draw_pixel_marks)
        self._url_due = False  # a URL write waits for the page's next paint (_write_url)
        state.param.watch(self._draw_base, ["base"])
        state.param.watch(self._draw_overlay, ["base"])
        for overlay in state.tools.overlays:
            overlay.param.watch(self._draw_overlay, ["on", overlay.layer_param])
        state.param.watch(self._draw_pixels, ["selected", "pins", "outside"])
        state.param.watch(self._draw_years, ["years_pixel"])
        self._aheads = {}  # the spectra last sent ahead to the page, by their ids: (data, spectra sent before it)
        self._spectra_sent = 0  # the spectrum source's changes sent to the page (_draw_pixels)
        self._ahead_ids = itertools.count()
        state.param.watch(self._send_ahead, ["ahead", "pins"])
        state.tools.labels.param.watch(self._send_ahead, ["mode"])
        state.tools.labels.param.watch(self._draw_legend, ["mode", "active"])  # the caption says when clicks label
        state.param.watch(self._show_view, ["view"])
        state.tools.param.watch(self._draw_legend, ["shown"])
        for tool in state.tools.all:
            tool.param.watch(self._draw_legend, [tool.layer_param])
        state.param.watch(self._draw_layers, ["show_coast", "show_borders", "geo_opacity", "show_tiles",
                                              "tiles_opacity", "embedding_opacity"])
        state.param.watch(self._write_url, ["year", "view", "selected", "pins"])
        state.tools.labels.param.watch(self._write_url, ["points", "classes"])
        share.watch(state.tools, self._write_url)  # the tool layer shown and its settings

    def _map_figure(self):
        x0, x1, y0, y1 = self.state.view  # the view the state holds when the UI is built
        self.x_range = Range1d(x0, x1, name="map-x")
        self.y_range = Range1d(y0, y1, name="map-y")
        fig = figure(width=MAP_W, height=MAP_H, x_range=self.x_range, y_range=self.y_range,
                     x_axis_type="mercator", y_axis_type="mercator", tools="pan,wheel_zoom,reset",
                     active_scroll="wheel_zoom", name="map", toolbar_location="above", match_aspect=True,
                     sizing_mode="stretch_both", stylesheets=[layout.MAP_CSS])  # scaled to its space (app/layout.py)
        self.layers = {}
        if self.state.tiles_url:  # no renderer, so no request, unless a deployment set a template
            self.layers["tiles"] = fig.add_tile(WMTSTileSource(url=self.state.tiles_url, name="tiles-source"),
                                                name="tiles")
        self.layers["embedding"] = fig.image_rgba(image="image", x="x", y="y", dw="dw", dh="dh",
                                                  source=self.sources["base-source"], name="embedding")
        fig.image_rgba(image="image", x="x", y="y", dw="dw", dh="dh", source=self.sources["overlay-source"])
        # Coastlines and borders: one line glyph each over flat x/y arrays (NaN between lines).
        self.layers["coast"] = fig.line("x", "y", source=self.sources["coast-source"], line_color="#1d3557",
                                        line_width=1.2, name="coast")
        self.layers["borders"] = fig.line("x", "y", source=self.sources["border-source"], line_color="#6d2e46",
                                          line_width=1, line_dash="dashed", name="borders")
        scale = self.sources["scale-source"]
        fig.segment("x0", "y", "x1", "y", source=scale, line_color="black", line_width=3, name="scale-bar")
        fig.text("lx", "ly", text="label", source=scale, text_align="center", text_font_size="11px",
                 name="scale-label")
        # The zones' footprints (app/footprints.py): outlines at every zoom, a marker where a zone is a few pixels.
        self.sources["footprint-source"].data = footprints.outlines(self._zones())
        self.sources["footprint-marker-source"].data = footprints.markers(self._zones(), self.state.view, MAP_W)
        fig.multi_line("xs", "ys", source=self.sources["footprint-source"], line_color="#e76f00", line_width=1.5,
                       name="footprints")
        fig.scatter("x", "y", source=self.sources["footprint-marker-source"], size=12, marker="square",
                    fill_color="#e76f00", fill_alpha=0.6, line_color="#7a3b00", name="footprint-markers")
        # The legend (app/legend.py): a colour bar for the continuous layer on top, a caption of what the map shows.
        self.legend_mapper = LinearColorMapper(palette=Viridis256, low=0.0, high=1.0, name="legend-mapper")
        self.colour_bar = ColorBar(color_mapper=self.legend_mapper, name="legend-colorbar", location="top_right",
                                   orientation="horizontal", width=180, height=10, title="", visible=False,
                                   background_fill_alpha=0.8, title_text_font_size="11px")
        fig.add_layout(self.colour_bar)
        self.caption = Title(text=legend.caption(self.state), name="map-caption", text_font_size="11px",
                             text_font_style="normal", align="left")  # above the map, beside its tools
        fig.add_layout(self.caption, "above")
        # The key of a categorical tool layer (app/legend.py key): a swatch per row of its source, placed nowhere on the
        # map (NaN), named in a Bokeh legend (text drawn on the canvas, never parsed as HTML).
        fig.scatter("x", "y", source=self.sources["key-source"], marker="square", size=11, fill_color="color",
                    line_color="#333333", legend_field="label", name="legend-key")
        self.key = fig.legend[0]
        self.key.update(name="map-key", location="bottom_right", visible=False, label_text_font_size="11px",
                        glyph_height=12, glyph_width=12, label_height=12, spacing=1, padding=4, margin=6,
                        background_fill_alpha=0.8)
        self._draw_layers()
        # The pins and the selection marker on the overlay level: BokehJS paints that level on a canvas of its own,
        # so a click repaints them alone, not the map's images and coastlines below (the primary canvas).
        fig.scatter("x", "y", source=self.sources["pin-source"], size=11, marker="circle", fill_color="color",
                    line_color="white", line_width=2, level="overlay", name="pins")
        fig.scatter("x", "y", source=self.sources["selected-source"], size=16, marker="cross", line_color="black",
                    line_width=3, level="overlay", name="selected")
        fig.background_fill_color = "#dfe6ea"
        # Taps reach Python as a data change of a small source (Bokeh UI events are not
        # forwarded to Python in Pyodide's standalone documents; model changes are).
        tap = self.sources["tap-source"]
        tap.tags = [page.EVERY_CHANGE]
        fig.js_on_event(Tap, CustomJS(args=dict(src=tap), code=TAP_JS))
        tap.on_change("data", self._on_tap)
        size = self.sources["map-size-source"]
        size.tags = [page.SENT_AFTER_RENDER]  # its first data is set as BokehJS lays the map out, before the page syncs
        fig.js_on_change("inner_width", CustomJS(args=dict(src=size, fig=fig), code=SIZE_JS))
        fig.js_on_change("inner_height", CustomJS(args=dict(src=size, fig=fig), code=SIZE_JS))
        size.on_change("data", self._on_map_size)
        self.x_range.on_change("end", self._on_range)
        self.y_range.on_change("end", self._on_range)
        return fig

    def _on_map_size(self, attr, old, new) -> None:
        """The map's image follows the map's size on screen (session.image_size); a size that is not one is ignored."""
        first = lambda k: new[k][0] if isinstance(new.get(k), (list, tuple)) and len(new[k]) == 1 else None
        got = image_size(first("w"), first("h"), first("dpr"))
        if got is not None and got != tuple(self.state.image_px):
            self.state.image_px = got

    def _zones(self) -> list:
        return list(self.state.model.zones.values()) if self.state.model is not None else []

    def __panel__(self):
        w, t = self.widgets, self.tools_ui
        view = [w["goto"], w["year"], pn.Row(w["coast"], w["borders"]), w["geo_opacity"], w["embedding_opacity"]]
        if "tiles" in w:
            view += [w["tiles"], w["tiles_opacity"]]
        tools = bool(t.panel.objects)
        cards = [layout.card("View", *view, name="view-card"),
                 layout.card("Layers", *(c for overlay in self.state.tools.overlays for c in overlay.controls()),
                             pn.Row(t.layer_select, t.exact) if tools else t.exact, t.cost,
                             name="layers-card"),
                 # "Go to it" in a column of its own: a card opened again shows each of its own children (Panel's
                 # card sets them visible), which showed the button with no pixel away from the view
                 layout.card("Pixel", pn.Row(w["pin"], w["clear"]), self.info, pn.Column(w["go_selected"], margin=0),
                             self.table, name="pixel-card"),
                 self.plots]
        if tools:
            cards.append(layout.card("Tools", t.panel, name="tools-card"))
        cards.append(layout.card("Export", pn.Row(self.csv_btn, self.npy_btn), self.exports, self.notebook,
                                 name="export-card"))
        # the cancel button shows while a big read runs
        status = pn.Column(self.status, w["cancel"], name="status-line", margin=0)
        return layout.page(pn.pane.Bokeh(self.map_fig, sizing_mode="stretch_both"), cards, status)

    def show_plots(self) -> None:
        """The spectrum, years and change plots: built after the map is interactive (building their views holds the
        page's thread for a while; the map, its controls and clicks work without them)."""
        spec = lines_figure(self.sources["spectrum-source"], "spectrum", "Embedding (dequantised)", 260, layout.PANE_W)
        spec.add_tools(HoverTool(tooltips=[("pixel", "@label")],  # Bokeh shows field values as text
                                 renderers=list(spec.select(name="spectrum-lines"))))
        plots = [pn.pane.Bokeh(spec)]
        if self.state.years_model is not None:
            plots += [pn.pane.Bokeh(lines_figure(self.sources["years-source"], "years",
                                                 "The selected pixel across years", 240, layout.PANE_W)),
                      pn.pane.Bokeh(change_figure(self.sources["change-source"], self.state.years_model.years,
                                                  layout.PANE_W))]
        self.plots.objects = plots
        if self.state.selected is not None:  # selected while they were built (the link's pixel)
            layout.open_plots(self.plots)

    # ------------------------------------------------------------ browser -> state --
    def _on_tap(self, attr, old, new) -> None:
        if new.get("x"):
            # The page shows the spectrum sent ahead for this pixel already: Python's copy of the source says so too
            # (set as the page's own change: not sent back). The selection's spectrum then differs from it only if
            # the state changed meanwhile, and is sent as any change is.
            # Not when a spectrum went to the page after the one sent ahead: it may have come after the tap there.
            ahead = self._aheads.get(new["ahead"][0]) if new.get("ahead") else None
            shown = ahead[0] if ahead is not None and ahead[1] == self._spectra_sent else None
            if shown is not None:
                self.sources["spectrum-source"].set_from_json("data", shown, setter="js")
            zone = footprints.zone_at(self._zones(), self.state.view, MAP_W, new["x"][0], new["y"][0])
            if zone is not None:  # a zone a few pixels wide: the tap zooms to it
                self.state.view = fit_box(*zone.lonlat)
                return
            lon, lat = geo.merc_to_lonlat(new["x"][0], new["y"][0])
            self.state.click(float(lon), float(lat))  # selects, or labels in label mode
            if shown is not None and self.state.tools.labels.mode:  # a label selects nothing: the selection's again
                self._draw_pixels(None)

    def _on_hover(self, attr, old, new) -> None:
        if new.get("x"):
            lon, lat = geo.merc_to_lonlat(new["x"][0], new["y"][0])
            self.state.hover(float(lon), float(lat))

    def _on_range(self, attr, old, new) -> None:
        box = (self.x_range.start, self.x_range.end, self.y_range.start, self.y_range.end)
        if not self._showing and box != tuple(self.state.view):
            self.state.view = box

    # ------------------------------------------------------------ state -> browser --
    def _show_view(self, event) -> None:
        x0, x1, y0, y1 = event.new
        self.sources["scale-source"].data = views.scale_bar_data(event.new)
        self.sources["footprint-marker-source"].data = footprints.markers(self._zones(), event.new, MAP_W)
        self._showing = True  # the ranges' own change callbacks must not write a half-updated view back
        try:
            self.x_range.update(start=x0, end=x1)
            self.y_range.update(start=y0, end=y1)
        finally:
            self._showing = False
        self._draw_info()

    def _draw_info(self) -> None:
        """The pixel pane, and "Go to it" while the selected pixel is outside the view."""
        s = self.state
        text = views.info_html(s.model, s.selected, s.outside, s.view)
        if self.info.object != text:  # not sent again at every move of the map
            self.info.object = text
        self.widgets["go_selected"].visible = s.selected is not None and not views.in_view(s.selected, s.view)

    def _draw_layers(self, *events) -> None:  # several at once when set together (param.update)
        s, lay = self.state, self.layers
        lay["coast"].visible = s.show_coast
        lay["borders"].visible = s.show_borders
        lay["coast"].glyph.line_alpha = lay["borders"].glyph.line_alpha = s.geo_opacity
        lay["embedding"].glyph.global_alpha = s.embedding_opacity
        if "tiles" in lay:
            lay["tiles"].visible = s.show_tiles
            lay["tiles"].alpha = s.tiles_opacity

    async def load_geography(self, url: str) -> None:
        """Coastlines, borders and place names (world-atlas, decoded and projected in JS), after the first draw."""
        try:
            g = await bridge("loadGeography", url)
        except SourceError as e:  # the map works without geography
            self.state.status = views.html("<b>Coastlines and borders unavailable:</b> {}", e)
            return
        flat = lambda a: np.asarray(a.to_py(), dtype=np.float64)  # Float64Array -> memoryview -> numpy
        self.sources["coast-source"].data = dict(x=flat(g.coast_x), y=flat(g.coast_y))
        self.sources["border-source"].data = dict(x=flat(g.border_x), y=flat(g.border_y))
        self.state.places = places.parse_places(str(g.places))

    def _base_data(self) -> dict:
        """The map's base layer: the state's last draw (one may have ended before the UI was built), else none."""
        if self.state.base is None:
            return dict(views.EMPTY_IMAGE)
        v, rgba = self.state.base
        return views.image_data(rgba, v)

    def _draw_base(self, event) -> None:
        self.sources["base-source"].data = self._base_data()

    def _draw_overlay(self, event) -> None:
        s = self.state
        v = s.base[0] if s.base else s.render_view()  # drawn for the same view as the base layer
        self.sources["overlay-source"].data = views.image_data(views.overlay_image(s.tools.overlays, v), v)
        self._draw_legend()

    def _draw_legend(self, *events) -> None:
        bar = legend.colour_bar(self.state)
        if bar is not None:
            self.colour_bar.title = bar[0]
            self.legend_mapper.update(low=bar[1], high=bar[2])
        self.colour_bar.visible = bar is not None
        rows = legend.key(self.state)
        self.sources["key-source"].data = dict(x=[float("nan")] * len(rows), y=[float("nan")] * len(rows),
                                               color=[c for _, c in rows], label=[n for n, _ in rows])
        self.key.visible = bool(rows)
        self.caption.text = legend.caption(self.state)

    def _draw_pixels(self, event) -> None:
        """The spectrum goes to the page alone; the map's marker and pins and the side bar's text follow its frame.
        Sent with it, the marker's and pins' patches (each a Bokeh patch of its own, which the worker encodes and the
        page applies) and the URL's (_write_url) would share its frame (docs/internals.md, "The data path"; the
        figures: benchmarks/README.md)."""
        s = self.state
        spectrum, data = self.sources["spectrum-source"], views.spectrum_data(s.selected, s.pins)
        if data != dict(spectrum.data):  # equal after a tap that showed it ahead (_on_tap): sent again, it is painted again
            spectrum.data = data
            self._spectra_sent += 1
        self._after_paint(self._draw_pixel_marks)

    def _send_ahead(self, event) -> None:
        """The spectrum a tap on the pixel read ahead would show (the state's `ahead`), sent to the page before the tap
        with the pixel's footprint: a tap inside it shows that spectrum at once (app/web/press.js), in the frame after
        the tap, rather than after Python has the tap, selects and sends it back (the page handles no message from
        this worker before it has painted a frame after an input: Chromium defers them). None in label mode, whose
        taps select nothing."""
        s = self.state
        px = s.ahead
        if px is None or s.model is None or s.tools.labels.mode or px.zone not in s.model.zones:
            page.post({"type": "ahead", "id": None})
            return
        data = views.spectrum_data(px, s.pins)
        ahead = next(self._ahead_ids)
        self._aheads[ahead] = (data, self._spectra_sent)
        while len(self._aheads) > AHEADS_KEPT:
            self._aheads.pop(min(self._aheads))
        page.post({"type": "ahead", "id": ahead, "quad": views.pixel_quad(s.model.zones[px.zone], px.row, px.col),
                   "data": data})

    def _draw_pixel_marks(self) -> None:
        s = self.state
        if s.selected is not None and s.selected is not self._plotted:  # a new selection opens the plots
            self._plotted = s.selected
            layout.open_plots(self.plots)
        self.sources["pin-source"].data = views.pins_data(s.pins)
        self.sources["selected-source"].data = views.selected_data(s.selected)
        self._draw_info()
        self.table.object = views.table_html(s.selected, s.pins)

    def _draw_years(self, event) -> None:
        self._after_paint(self._draw_years_now)

    def _draw_years_now(self) -> None:
        spectra, change = views.years_data(self.state.years_model.years if self.state.years_model else None,
                                           self.state.years_pixel)
        self.sources["years-source"].data = spectra
        self.sources["change-source"].data = change

    def _after_paint(self, draw) -> None:
        """`draw()` once the page has painted what was sent before: a click's spectrum then makes its frame alone.
        Painting the years and change plots and laying out the side bar's new text in that same frame made it
        overrun its 16.7 ms (software canvas: the spectrum ~8 ms, the years ~5, the change ~3.5), so the vector
        showed a whole frame later. `draw` reads the state when it runs: after quick clicks, the last one."""
        async def later() -> None:
            try:
                await page.after_paint()
            finally:  # drawn all the same if the page could not answer (the failure is printed: State.spawn)
                draw()
        self.state.spawn(later())

    def _write_url(self, *events) -> None:  # several at once when set together (param.update)
        """The URL follows the state once the page has painted what changed (see _draw_pixels): one write for
        all the changes made until then."""
        if not self._url_due:
            self._url_due = True
            self._after_paint(self._write_url_now)

    def _write_url_now(self) -> None:
        self._url_due = False
        url = self.state.url()
        page.set_hash(url.to_hash())
        model = self.state.model
        self.notebook.object = views.notebook_html(model.source.url if model is not None else None, url)


# ---------------------------------------------------------------- boot --
async def _preview_handover() -> tuple[float, float, float] | None:
    """(lon, lat, span) of the JS preview's view when the user moved it or it framed the data itself (no view in
    the hash), else None (the hash's view, or no preview: Python places the map)."""
    v = await page.preview("handover")
    return None if v is None else (float(v["lon"]), float(v["lat"]), float(v["span"]))


async def start(target: str) -> Explorer | None:
    page.mark("panel_imported")
    url = UrlState.from_url(page.info("search"), page.info("hash"))
    index = None  # the multi-year index, read beside the year's store (one wait for both)
    try:
        catalog = await load_catalog(url)
        state = Explorer(catalog, url)
        if url.multiyear:
            index = asyncio.ensure_future(state.years_index(absolute(url.multiyear)))
            # Its failure is reported where it is awaited (open_years_index), not as unhandled by Pyodide's loop, which
            # says so of a task that fails while nothing waits for it yet; nor by a cancelled start-up, below.
            index.add_done_callback(lambda t: t.cancelled() or t.exception())
        year = url.year if url.year in [c["year"] for c in catalog] else catalog[-1]["year"]
        await state.open_year(year)
        if state.model.kind.own_years(state.model):  # a store listing its own years (geoemb:): open_year took them
            year = state.model.year
        elif url.store and catalog[0]["year"] == 0:  # a store given by URL: learn its year from the store
            catalog[0]["year"] = year = state.model.year
            state.param["year"].objects = year_options(catalog)
        state.year = year
    except SourceError as e:
        page.show_error(e.title, str(e))
        if index is not None:  # not wanted now
            index.cancel()
        return None
    page.mark("store_opened")
    if index is not None:  # its status line follows the year store's
        await state.open_years_index(absolute(url.multiyear), index)
    moved = await _preview_handover()
    if moved is not None:  # the JS preview's view: moved by the user, or its framing of the data (app/web/preview.js)
        state.centre_view(*moved)
    elif url.lon is not None and url.lat is not None:
        state.centre_view(url.lon, url.lat, url.span or 20_000)
    else:
        state.fit_zones()
    await state.let_actions_start()  # the map's first draw: its reads are under way while the UI is built
    state.tools.labels.storage = BrowserStorage()  # labels persist in localStorage
    state.tools.change.offer()
    ui = ExplorerUI(state)
    page.mark("ui")
    await page.render(ui.__panel__(), target)  # answered once BokehJS has laid it out
    page.mark("rendered")
    pins = [await state.model.pixel_at(lon, lat) for lon, lat in url.pins]
    state.pins = [p for p in pins if p is not None and p.valid]
    if url.sel:
        await state.select(*url.sel)
    for overlay in state.tools.overlays:  # each overlay's own parts (similarity's); on again if the link had it on
        await overlay.restore(url)
    page.mark("labels_restoring")
    await state.tools.labels.restore(url.labels)  # from the URL hash, else localStorage
    page.mark("labels_restored")  # benchmarks/browser.py times a stored label set's restore by these two
    await share.restore(state, url.tool)  # the link's tool layer, re-run on its view (after the labels it may use)
    await state.settle()
    if url.problems:  # before any message the restores left, which stays below it
        state.status = views.html("<b>Ignored in the link:</b> {}", "; ".join(url.problems)) + \
            (f"<br>{state.status}" if state.status else "")
    import js  # the worker's boot facts (app/web/worker.js)
    state.geography = state.spawn(ui.load_geography(str(js.tesseraBoot.geography)))  # after the first draw (boot.json names it)
    origins, bad = messages.allowed_origins(page.info("origin"), url.origins, url.embed_origins)
    if bad:
        state.status = views.html("<b>Ignored embedding origins</b> (not scheme://host[:port]): {}", ", ".join(bad))
    api.expose(state, origins, ui.tools_ui)
    await page.preview("close")  # the Panel map, drawn below it, is now interactive
    page.mark("interactive")
    page.set_state("ready")
    try:  # the map works without the plots: a failure here is reported, it does not undo the start-up
        ui.show_plots()
        await page.plots_painted()
        page.mark("plots")
    except Exception as e:  # noqa: BLE001 (any failure: the explorer is already interactive)
        import traceback
        traceback.print_exception(e)
        state.status = views.html("<b>The plots could not be shown:</b> {}", e)
    return state
