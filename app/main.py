"""The explorer UI: Panel + Bokeh in Pyodide.  State lives in `Explorer` (param);
the map, the spectrum plot, the comparison table and the URL are views of it.
"""
from __future__ import annotations

import asyncio
import html
import json
import math
import numbers

import numpy as np
import panel as pn
import param
from bokeh.events import Tap
from bokeh.models import ColumnDataSource, CustomJS, HoverTool, Range1d
from bokeh.plotting import figure

from app import geo, render
from app.catalog import parse_catalog
from app.export import to_csv, to_npy
from app.model import Pixel, StoreModel, cosine_table
from app.reader import JSSource, SourceError
from app.state import UrlState
from builder import convention as conv

MAP_W, MAP_H = 760, 520
COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


class Explorer(param.Parameterized):
    year = param.Selector(objects=[], doc="year store shown")
    status = param.String("")
    threshold = param.Number(0.8, bounds=(-1.0, 1.0), step=0.01, doc="similarity threshold")
    similarity_on = param.Boolean(False)

    def __init__(self, catalog: list[dict], url_state: UrlState, source_factory=JSSource, **kw):
        super().__init__(**kw)
        self.catalog = catalog
        self.url_state = url_state
        self.source_factory = source_factory
        self.model: StoreModel | None = None
        self.selected: Pixel | None = None
        self.pins: list[Pixel] = []
        self.sim: tuple | None = None  # (zone, window, map)
        self.years_model: StoreModel | None = None
        self.chunk_cache: dict = {}
        self.zone_cache: dict = {}
        self._draw_task = None
        self._redraw_pending = False
        self.param["year"].objects = _year_options(catalog)
        self.base_src = ColumnDataSource(dict(image=[], x=[], y=[], dw=[], dh=[]), name="base-source")
        self.over_src = ColumnDataSource(dict(image=[], x=[], y=[], dw=[], dh=[]), name="overlay-source")
        self.pin_src = ColumnDataSource(dict(x=[], y=[], color=[], label=[]), name="pin-source")
        self.sel_src = ColumnDataSource(dict(x=[], y=[]), name="selected-source")
        self.spec_src = ColumnDataSource(dict(xs=[], ys=[], color=[], label=[]), name="spectrum-source")
        self._build_views()

    # ------------------------------------------------------------ views --
    def _build_views(self) -> None:
        self.x_range = Range1d(-2e7, 2e7, name="map-x")
        self.y_range = Range1d(-1.2e7, 1.6e7, name="map-y")
        fig = figure(width=MAP_W, height=MAP_H, x_range=self.x_range, y_range=self.y_range,
                     x_axis_type="mercator", y_axis_type="mercator", tools="pan,wheel_zoom,reset",
                     active_scroll="wheel_zoom", name="map", toolbar_location="above", match_aspect=True)
        fig.image_rgba(image="image", x="x", y="y", dw="dw", dh="dh", source=self.base_src)
        fig.image_rgba(image="image", x="x", y="y", dw="dw", dh="dh", source=self.over_src)
        fig.scatter("x", "y", source=self.pin_src, size=11, marker="circle", fill_color="color",
                    line_color="white", line_width=2)
        fig.scatter("x", "y", source=self.sel_src, size=16, marker="cross", line_color="black", line_width=3)
        fig.background_fill_color = "#dfe6ea"
        # Taps reach Python as a data change of a small source (Bokeh UI events are not
        # forwarded to Python in Pyodide's standalone documents; model changes are).
        self.tap_src = ColumnDataSource(dict(x=[], y=[]), name="tap-source")
        fig.js_on_event(Tap, CustomJS(args=dict(src=self.tap_src), code="src.data = {x: [cb_obj.x], y: [cb_obj.y]};"))
        self.tap_src.on_change("data", self._on_tap)
        self.x_range.on_change("end", self._on_range)
        self.y_range.on_change("end", self._on_range)
        self.map_fig = fig
        spec = figure(width=MAP_W, height=260, title="Embedding (dequantised)", name="spectrum",
                      x_axis_label="band", y_axis_label="value", tools="pan,wheel_zoom,reset,save")
        spec.multi_line("xs", "ys", source=self.spec_src, line_color="color", line_width=2, legend_field="label")
        spec.legend.location = "top_right"
        spec.add_tools(HoverTool(tooltips=[("pixel", "@label")]))
        self.spec_fig = spec
        self.years_src = ColumnDataSource(dict(xs=[], ys=[], color=[], label=[]), name="years-source")
        self.change_src = ColumnDataSource(dict(year=[], cosine=[], label=[]), name="change-source")
        yfig = figure(width=MAP_W, height=240, title="The selected pixel across years (multi-year index)",
                      name="years", x_axis_label="band", y_axis_label="value", tools="pan,wheel_zoom,reset,save")
        yfig.multi_line("xs", "ys", source=self.years_src, line_color="color", line_width=2, legend_field="label")
        cfig = figure(width=380, height=240, title="Change: cosine similarity to the previous year", name="change",
                      x_axis_label="year", y_axis_label="cosine", tools="save", y_range=(-1.05, 1.05))
        cfig.line("year", "cosine", source=self.change_src, line_width=2)
        cfig.scatter("year", "cosine", source=self.change_src, size=9)
        cfig.xaxis.ticker.desired_num_ticks = 4
        self.years_fig, self.change_fig = yfig, cfig
        # Every text pane is HTML built by `_html`, which escapes every value: text from a store,
        # a catalog, an index or an error message is data and is never rendered as markup.
        self.info = pn.pane.HTML("Click the map to read a pixel's embedding.", name="info", width=380)
        self.table = pn.pane.HTML("", name="compare", width=380)
        self.status_pane = pn.pane.HTML("", name="status", width=380)
        self.pin_btn = pn.widgets.Button(name="Pin pixel", button_type="primary", disabled=True)
        self.clear_btn = pn.widgets.Button(name="Clear pins")
        self.sim_btn = pn.widgets.Toggle(name="Similarity search", value=False, disabled=True)
        self.slider = pn.widgets.FloatSlider.from_param(self.param.threshold, name="Similarity threshold")
        self.year_sel = pn.widgets.Select.from_param(self.param.year, name="Year")
        self.csv_btn = pn.widgets.FileDownload(callback=lambda: _bytes_io(to_csv(self.pins)), filename="pins.csv",
                                               label="Download pins (CSV)", embed=False)
        self.npy_btn = pn.widgets.FileDownload(callback=lambda: _bytes_io(to_npy(self.pins)), filename="pins.npy",
                                               label="Download pins (.npy)", embed=False)
        self.pin_btn.on_click(lambda e: self.pin())
        self.clear_btn.on_click(lambda e: self.clear_pins())
        self.sim_btn.param.watch(lambda e: self.set_similarity(e.new), "value")
        self.param.watch(lambda e: self._update_overlay(), "threshold")
        self.param.watch(lambda e: _spawn(self.switch_year(e.new)), "year")

    def layout(self):
        side = pn.Column(self.year_sel, self.info, pn.Row(self.pin_btn, self.clear_btn), self.sim_btn, self.slider,
                         self.table, pn.Row(self.csv_btn, self.npy_btn), self.status_pane, width=400)
        main = [pn.pane.Bokeh(self.map_fig), pn.pane.Bokeh(self.spec_fig)]
        if self.years_model is not None:
            main.append(pn.pane.Bokeh(self.years_fig))
            side.append(pn.pane.Bokeh(self.change_fig))
        return pn.Row(pn.Column(*main), side)

    async def open_years_index(self, url: str) -> None:
        """Open the multi-year virtual index; failures only disable the across-years views."""
        model = StoreModel(self.source_factory(url))
        try:
            await model.open()
            if model.years is None:
                raise SourceError("invalid", f"{url} is a single-year store, not a multi-year index")
        except SourceError as e:
            self.set_status("<b>Multi-year index unavailable:</b> {}", e)
            return
        self.years_model = model
        versions = sorted({z.model_version for z in model.zones.values()})
        self.set_status("Multi-year index: years {}; model {}.", ", ".join(map(str, model.years)), ", ".join(versions))

    async def refresh_years(self) -> None:
        px = self.selected
        if self.years_model is None:
            return
        try:
            res = await self.years_model.pixel_years(px.lon, px.lat) if px is not None else None
        except SourceError as e:
            self.set_status("<b>Multi-year index read failed:</b> {}", e)
            res = None
        if res is None:
            self.years_src.data = dict(xs=[], ys=[], color=[], label=[])
            self.change_src.data = dict(year=[], cosine=[], label=[])
            return
        zone, row, col, vecs = res
        years = self.years_model.years
        lines = [(y, v) for y, v in zip(years, vecs) if v is not None]
        self.years_src.data = dict(xs=[list(range(len(v))) for _, v in lines], ys=[[float(x) for x in v] for _, v in lines],
                                   color=[COLORS[i % len(COLORS)] for i in range(len(lines))],
                                   label=[f"{y} ({zone.name} r{row} c{col} of the index)" for y, _ in lines])
        pts = []
        for (y0, v0), (y1, v1) in zip(lines, lines[1:]):
            pts.append((y1, float(cosine_table([v0, v1])[0, 1]), f"{y0}->{y1}"))
        self.change_src.data = dict(year=[p[0] for p in pts], cosine=[p[1] for p in pts], label=[p[2] for p in pts])

    # ------------------------------------------------------------ store --
    async def open_year(self, year: int) -> None:
        entry = next(c for c in self.catalog if c["year"] == year)
        model = StoreModel(self.source_factory(entry["url"]))
        await model.open()
        self.model = model
        self.chunk_cache.clear()
        self.zone_cache.clear()

    async def switch_year(self, year) -> None:
        if self.model is not None and self.model.year == year:
            return
        try:
            await self.open_year(year)
        except SourceError as e:
            self.set_status("<b>Cannot open {}:</b> {}", year, e)
            if self.model is not None:
                self.year = self.model.year  # the selector goes back to the year the map shows
            return
        self.sim = None
        self.over_src.data = dict(image=[], x=[], y=[], dw=[], dh=[])
        pins = [(p.lon, p.lat) for p in self.pins]
        sel = (self.selected.lon, self.selected.lat) if self.selected else None
        self.pins = []
        for lon, lat in pins:
            px = await self.model.pixel_at(lon, lat)
            if px is not None:
                self.pins.append(px)
        if sel:
            await self.select(*sel)
        self._refresh_pixels()
        await self.redraw()
        if self.similarity_on:
            await self.compute_similarity()

    def fit_zones(self) -> None:
        """Fit the first cluster of zones (zones whose boxes lie within 2 degrees of the first)."""
        zones = sorted(self.model.zones.values(), key=lambda z: z.name)
        w0, s0, e0, n0 = zones[0].lonlat
        near = [z.lonlat for z in zones if z.lonlat[0] < e0 + 2 and z.lonlat[2] > w0 - 2 and z.lonlat[1] < n0 + 2
                and z.lonlat[3] > s0 - 2]
        ws, ss, es, ns = zip(*near)
        self.set_view(min(ws), min(ss), max(es), max(ns))

    def set_view(self, w, s, e, n) -> None:
        x0, y0 = geo.lonlat_to_merc(w, s)
        x1, y1 = geo.lonlat_to_merc(e, n)
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        half_w = max(x1 - x0, (y1 - y0) * MAP_W / MAP_H) / 2 * 1.1
        half_h = half_w * MAP_H / MAP_W
        self.x_range.update(start=float(cx - half_w), end=float(cx + half_w))
        self.y_range.update(start=float(cy - half_h), end=float(cy + half_h))

    def centre_view(self, lon: float, lat: float, span_m: float) -> None:
        cx, cy = geo.lonlat_to_merc(lon, lat)
        half_w = span_m / 2 / math.cos(math.radians(lat))
        half_h = half_w * MAP_H / MAP_W
        self.x_range.update(start=float(cx - half_w), end=float(cx + half_w))
        self.y_range.update(start=float(cy - half_h), end=float(cy + half_h))

    # ------------------------------------------------------------ map --
    def view(self) -> render.View:
        return render.View(self.x_range.start, self.x_range.end, self.y_range.start, self.y_range.end, MAP_W, MAP_H)

    def _on_range(self, attr, old, new) -> None:
        self._schedule_redraw()

    def _schedule_redraw(self) -> None:
        if self._draw_task is not None and not self._draw_task.done():
            self._redraw_pending = True
            return
        self._draw_task = _spawn(self._redraw_loop())

    async def _redraw_loop(self) -> None:
        while True:
            self._redraw_pending = False
            await self.redraw()
            if not self._redraw_pending:
                break
        self._write_url()

    async def redraw(self) -> None:
        if self.model is None:
            return
        v = self.view()
        lon, lat = v.lonlat_grid()
        img = np.zeros((v.height, v.width, 4), dtype=np.uint8)
        lvl = render.choose_level(self.model.levels, v)
        if lvl is not None:
            chunks = {}
            for ci, cj in render.chunks_in_view(lvl, v):
                key = (self.model.year, lvl.index, ci, cj)
                if key not in self.chunk_cache:
                    c = lvl.chunk
                    self.chunk_cache[key] = await self.model.source.read(
                        f"global_rgb/{lvl.index}/rgb", [(ci * c, min((ci + 1) * c, lvl.height)),
                                                        (cj * c, min((cj + 1) * c, lvl.width)), None], whole=True)
                data = self.chunk_cache[key]
                if data.shape[0] < lvl.chunk or data.shape[1] < lvl.chunk:
                    pad = np.zeros((lvl.chunk, lvl.chunk, 4), np.uint8)
                    pad[: data.shape[0], : data.shape[1]] = data
                    data = pad
                chunks[(ci, cj)] = data
            img = render.sample_level(lvl, chunks, lon, lat)
        if v.metres_per_pixel() <= render.ZONE_ZOOM_M:
            native = np.zeros_like(img)
            for z in self.model.zones.values():
                if not z.has_rgb:
                    continue
                win = render.zone_window(z, lon, lat)
                if win is None:
                    continue
                row, col, r0, r1, c0, c1, inside = win
                key = (self.model.year, z.name, r0, r1, c0, c1)
                if key not in self.zone_cache:
                    self.zone_cache = {key: await self.model.region(z, "rgb", r0, r1, c0, c1)}
                render.sample_window(self.zone_cache[key], r0, c0, row, col, inside & (native[..., 3] == 0), native)
            img = render.composite(img, native)
        self.base_src.data = dict(image=[render.to_bokeh_image(img)], x=[v.x0], y=[v.y0],
                                  dw=[v.x1 - v.x0], dh=[v.y1 - v.y0])
        self._update_overlay(v)

    def _update_overlay(self, v: render.View | None = None) -> None:
        if not self.sim or not self.similarity_on:
            self.over_src.data = dict(image=[], x=[], y=[], dw=[], dh=[])
            return
        v = v or self.view()
        zone, (r0, r1, c0, c1), sim = self.sim
        lon, lat = v.lonlat_grid()
        row, col = zone.to_rowcol(lon, lat)
        layer = render.similarity_rgba(sim, self.threshold)
        out = np.zeros((v.height, v.width, 4), np.uint8)
        render.sample_window(layer, r0, c0, row, col, np.ones(row.shape, bool), out)
        self.over_src.data = dict(image=[render.to_bokeh_image(out)], x=[v.x0], y=[v.y0],
                                  dw=[v.x1 - v.x0], dh=[v.y1 - v.y0])
        self._write_url()

    # ------------------------------------------------------------ pixels --
    def _on_tap(self, attr, old, new) -> None:
        if not new.get("x"):
            return
        lon, lat = geo.merc_to_lonlat(new["x"][0], new["y"][0])
        _spawn(self.select(float(lon), float(lat)))

    async def select(self, lon: float, lat: float) -> Pixel | None:
        if self.model is None:
            return None
        try:
            px = await self.model.pixel_at(lon, lat)
        except SourceError as e:
            self.set_status("<b>Read failed:</b> {}", e)
            return None
        self.selected = px
        if px is None:
            self.info.object = _html("<b>{:.5f}, {:.5f}</b>: outside the zones of this store.", lon, lat)
        self._refresh_pixels()
        await self.refresh_years()
        if self.similarity_on:
            await self.compute_similarity()
        self._write_url()
        return px

    def pin(self) -> None:
        if self.selected is not None and self.selected.valid and all(
                (p.zone, p.row, p.col) != (self.selected.zone, self.selected.row, self.selected.col) for p in self.pins):
            self.pins.append(self.selected)
            self._refresh_pixels()
            self._write_url()

    def clear_pins(self) -> None:
        self.pins = []
        self._refresh_pixels()
        self._write_url()

    def set_similarity(self, on: bool) -> None:
        self.similarity_on = on
        if on:
            _spawn(self.compute_similarity())
        else:
            self._update_overlay()
            self._write_url()

    async def compute_similarity(self) -> None:
        px = self.selected
        if px is None or not px.valid:
            self.set_status("Select a pixel with data first.")
            return
        zone = self.model.zones[px.zone]
        v = self.view()
        lon, lat = v.lonlat_grid()
        win = render.zone_window(zone, lon, lat, pad=0)
        view_box = (win[2], win[3], win[4], win[5]) if win else None
        window = self.model.similarity_window(zone, px.row, px.col, view_box)
        import time
        t0 = time.perf_counter()
        sim = await self.model.similarity(zone, px.vector, window)
        ms = (time.perf_counter() - t0) * 1000
        self.sim = (zone, window, sim)
        n = int(np.isfinite(sim).sum())
        self.set_status("Similarity to {}: {:,} valid pixels in rows {}-{}, cols {}-{} of {} ({:.0f} ms).",
                        px.label(), n, window[0], window[1], window[2], window[3], zone.name, ms)
        self._update_overlay()

    def _refresh_pixels(self) -> None:
        px = self.selected
        lines = []
        for i, p in enumerate(self.pins):
            lines.append((p, COLORS[(i + 1) % len(COLORS)], f"pin {i + 1}: {p.label()}"))
        if px is not None and px.valid:
            lines.insert(0, (px, COLORS[0], f"selected: {px.label()}"))
        self.spec_src.data = dict(xs=[list(range(len(p.vector))) for p, _, _ in lines],
                                  ys=[[float(v) for v in p.vector] for p, _, _ in lines],
                                  color=[c for _, c, _ in lines], label=[lab for _, _, lab in lines])
        xs, ys = geo.lonlat_to_merc([p.lon for p in self.pins], [p.lat for p in self.pins])
        self.pin_src.data = dict(x=list(np.atleast_1d(xs)), y=list(np.atleast_1d(ys)),
                                 color=[COLORS[(i + 1) % len(COLORS)] for i in range(len(self.pins))],
                                 label=[p.label() for p in self.pins])
        if px is not None:
            x, y = geo.lonlat_to_merc(px.lon, px.lat)
            self.sel_src.data = dict(x=[float(x)], y=[float(y)])
            z = self.model.zones[px.zone]
            where = _html("<b>{:.6f}, {:.6f}</b> (lon, lat)<br>{} ({}) E {:.1f} N {:.1f}<br>row {}, col {}, year {}<br>"
                          "<span class='store'>model {}, build {}</span>", px.lon, px.lat, z.name,
                          conv.proj_code(z.zone, z.south), px.easting, px.northing, px.row, px.col, self.model.year,
                          z.model_version, z.build_version)
            if px.valid:
                self.info.object = where + _html("<br>scale {:.6g}, |v| = {:.3f}", px.scale,
                                                 float(np.linalg.norm(px.vector)))
            else:
                self.info.object = where + "<br><b>No data</b> at this pixel (water or no coverage): its scale is NaN."
        else:
            self.sel_src.data = dict(x=[], y=[])
        self.pin_btn.disabled = not (px is not None and px.valid)
        self.sim_btn.disabled = not (px is not None and px.valid)
        self.table.object = self._table_html()

    def _table_html(self) -> str:
        items = ([("selected", self.selected)] if self.selected is not None and self.selected.valid else [])
        items += [(f"pin {i + 1}", p) for i, p in enumerate(self.pins)]
        if len(items) < 2:
            return "<i>Pin pixels to compare them (cosine similarity).</i>"
        m = cosine_table([p.vector for _, p in items])
        head = "".join(f"<th>{html.escape(n)}</th>" for n, _ in items)
        rows = "".join(f"<tr><th>{html.escape(n)}</th>" + "".join(f"<td>{m[i, j]:.3f}</td>" for j in range(len(items)))
                       + "</tr>" for i, (n, _) in enumerate(items))
        return f"<table class='cosine' id='cosine-table'><tr><th>cosine</th>{head}</tr>{rows}</table>"

    def set_status(self, template: str, *values) -> None:
        self.status = _html(template, *values)
        self.status_pane.object = self.status

    # ------------------------------------------------------------ URL --
    def current_state(self) -> UrlState:
        v = self.view()
        w, s, e, n = v.lonlat_box()
        lon, lat = (w + e) / 2, (s + n) / 2
        span = v.metres_per_pixel() * v.width
        entry = next((c for c in self.catalog if self.model and c["year"] == self.model.year), None)
        return UrlState(store=self.url_state.store, year=self.model.year if self.model else None, lon=lon, lat=lat,
                        span=span, sel=(self.selected.lon, self.selected.lat) if self.selected else None,
                        pins=[(p.lon, p.lat) for p in self.pins],
                        sim=self.threshold if self.similarity_on else None, embed=self.url_state.embed) if entry else self.url_state

    def _write_url(self) -> None:
        try:
            import js
            js.history.replaceState(None, "", js.location.pathname + js.location.search + self.current_state().to_hash())
        except ImportError:
            pass


def _year_options(catalog: list[dict]) -> dict:
    """The year selector's options: catalog labels (shown as text by the widget) to years."""
    return {str(c.get("label", c["year"])): c["year"] for c in catalog}


def _html(template: str, *values) -> str:
    """`template` (trusted markup written here) filled with `values`, each escaped: the one way text reaches a pane."""
    return template.format(*(v if isinstance(v, numbers.Number) else html.escape(str(v)) for v in values))


def _bytes_io(b: bytes):
    import io
    return io.BytesIO(b)


_tasks: set = set()


def _spawn(coro):
    task = asyncio.ensure_future(coro)
    _tasks.add(task)
    task.add_done_callback(_done)
    return task


def _done(task) -> None:
    _tasks.discard(task)
    if not task.cancelled() and task.exception() is not None:
        import traceback
        traceback.print_exception(task.exception())


async def load_catalog(state: UrlState) -> list[dict]:
    """Stores to offer: the one named in the URL, or the catalog (data/catalog.json next to the app, or ?catalog=URL).

    Store and index URLs in a catalog are relative to the catalog's own URL."""
    if state.store:
        return [{"year": state.year or 0, "url": _absolute(state.store)}]
    import js
    res = json.loads(await js.tesseraJS.fetchJSON(state.catalog))  # size and depth checked in JS
    if not res["ok"]:
        if res["error"]["kind"] == "notfound":
            raise SourceError("notfound", f"no store given (?store=URL) and no catalog at {state.catalog}")
        raise SourceError(res["error"]["kind"], f"{state.catalog}: {res['error']['message']}")
    base = str(js.URL.new(state.catalog, js.location.href).href)
    stores, multiyear = parse_catalog(res["value"])
    if multiyear and not state.multiyear:  # ?years=URL wins over the catalog's index
        state.multiyear = str(js.URL.new(multiyear, base).href)
    return [dict(s, url=str(js.URL.new(s["url"], base).href).rstrip("/")) for s in stores]


def _absolute(url: str) -> str:
    import js
    return str(js.URL.new(url, js.location.href).href).rstrip("/")


def _mark(name: str) -> None:
    import js
    setattr(js.tesseraTimings, name, js.performance.now())


async def start(target: str) -> Explorer | None:
    import js
    from panel.io.pyodide import write
    _mark("panel_imported")
    state = UrlState.from_url(str(js.location.search), str(js.location.hash))
    try:
        catalog = await load_catalog(state)
        exp = Explorer(catalog, state)
        year = state.year if state.year in [c["year"] for c in catalog] else catalog[-1]["year"]
        await exp.open_year(year)
        if state.store and catalog[0]["year"] == 0:  # a store given by URL: learn its year from the store
            catalog[0]["year"] = exp.model.year
            exp.param["year"].objects = _year_options(catalog)
            year = exp.model.year
        exp.year = year
    except SourceError as e:
        titles = {"notfound": "Store not found", "range": "The server does not support HTTP Range requests",
                  "network": "The store could not be reached (network or CORS)",
                  "version": "Unsupported tessera dataset version", "invalid": "Not a tessera store",
                  "refused": "A reference was refused"}
        js.tesseraShowError(titles.get(e.kind, "Cannot open the store"), str(e))
        return None
    _mark("store_opened")
    if getattr(state, "multiyear", None):
        await exp.open_years_index(_absolute(state.multiyear))
    if state.lon is not None and state.lat is not None:
        exp.centre_view(state.lon, state.lat, state.span or 20_000)
    else:
        exp.fit_zones()
    if state.sim is not None:
        exp.threshold = state.sim
    await write(target, exp.layout())
    _mark("rendered")
    for lon, lat in state.pins:
        px = await exp.model.pixel_at(lon, lat)
        if px is not None and px.valid:
            exp.pins.append(px)
    if state.sel:
        await exp.select(*state.sel)
    exp._refresh_pixels()
    await exp.redraw()
    if state.sim is not None and exp.selected is not None and exp.selected.valid:
        exp.sim_btn.value = True
        await exp.compute_similarity()
    _expose(exp)
    global EXPLORER
    EXPLORER = exp
    js.document.body.dataset.state = "ready"
    return exp


def _expose(exp: Explorer) -> None:
    """window.tesseraApi: the hooks tests and embedding pages use (the same code paths as the UI)."""
    import js
    from pyodide.ffi import create_proxy, to_js

    def select(lon, lat):
        async def run():
            px = await exp.select(float(lon), float(lat))
            return None if px is None else to_js({"zone": px.zone, "row": px.row, "col": px.col, "valid": px.valid,
                                                  "scale": px.scale}, dict_converter=js.Object.fromEntries)
        return _spawn(run())

    def similarity(on):
        async def run():
            exp.sim_btn.value = bool(on)
            if on:
                await exp.compute_similarity()
            return True
        return _spawn(run())

    def pin():
        exp.pin()
        return len(exp.pins)

    def sim_at(lon, lat):
        if not exp.sim:
            return None
        zone, (r0, r1, c0, c1), sim = exp.sim
        row, col = zone.to_rowcol(float(lon), float(lat))
        if not (r0 <= row < r1 and c0 <= col < c1):
            return None
        v = sim[int(row) - r0, int(col) - c0]
        return None if not np.isfinite(v) else float(v)

    def view(lon, lat, span):
        exp.centre_view(float(lon), float(lat), float(span))
        return _spawn(exp.redraw())

    def time_similarity(zone_name, r0, r1, c0, c1):
        async def run():
            import time
            zone = exp.model.zones[str(zone_name)]
            t0 = time.perf_counter()
            emb, scl = await asyncio.gather(exp.model.region(zone, "embeddings", r0, r1, c0, c1),
                                            exp.model.region(zone, "scales", r0, r1, c0, c1))
            t1 = time.perf_counter()
            from app.model import cosine_map
            from builder.convention import dequantise
            v = dequantise(emb, scl)
            valid = np.argwhere(np.isfinite(scl))
            sim = cosine_map(v, v[tuple(valid[len(valid) // 2])])
            t2 = time.perf_counter()
            return to_js({"fetch_ms": (t1 - t0) * 1000, "compute_ms": (t2 - t1) * 1000,
                          "valid": int(np.isfinite(sim).sum())}, dict_converter=js.Object.fromEntries)
        return _spawn(run())

    api = {"select": select, "timeSimilarity": time_similarity, "similarity": similarity, "pin": pin, "simAt": sim_at, "view": view,
           "redraw": lambda: _spawn(exp.redraw())}
    proxies = {k: create_proxy(v) for k, v in api.items()}
    js.window.tesseraApi = to_js(proxies, dict_converter=js.Object.fromEntries)
