"""The explorer's state and what the user can do to it, free of any UI (runs on CPython in the tests).

`Explorer` is one `param.Parameterized`: the year, the map view, the selected pixel, the pins
and the status line are parameters (the tools' settings are their own: app/tools/); the UI (app/main.py) builds its
widgets from them with `from_param` and draws the views (app/views.py) as functions of them.
Actions are coroutines that read the store through the model and set parameters.
"""
from __future__ import annotations

import math

import jsonschema
import param

from app import basemap, footprints, geo, layers, places, render, tiles, views
from app.tools import Tools, share
from builder.core.pixel import Pixel
from builder.core.reader import StoreModel
from app.bigreads import PURPOSE, BigReads
from app.reader import JSSource
from builder.core.source import SourceError
from app.tools.region import TooLarge
from app.state import UrlState

MAP_W, MAP_H = 760, 520
MAP_PX_MAX = 2_400_000  # the most pixels the map's image is computed at (a 1920x1250 pane: a 4K screen's at 1.5x)
SCREEN_PX_MAX = 16_384  # a width or height from the page beyond this is not a screen's
WORLD = (-2e7, 2e7, -1.2e7, 1.6e7)  # x0, x1, y0, y1 in Web Mercator metres
GOTO_SPAN_M = 20_000  # ground width of the view after a go-to by lon,lat


class Explorer(param.Parameterized):
    year = param.Selector(objects=[], label="Year", doc="year store shown")
    view = param.NumericTuple(WORLD, length=4, doc="the map's Web Mercator box (x0, x1, y0, y1)")
    selected = param.ClassSelector(class_=Pixel, allow_None=True, doc="the pixel last clicked")
    ahead = param.ClassSelector(class_=Pixel, allow_None=True,
                                doc="the pixel last read ahead (a resting mouse, a press: hover), of the year shown")
    outside = param.Parameter(None, doc="lon/lat of a click outside every zone")
    pins = param.List([], item_type=Pixel, doc="pinned pixels (valid ones only)")
    base = param.Parameter(None, doc="(render.View, RGBA image): the map's base layer and the view it was drawn for")
    image_px = param.NumericTuple((MAP_W, MAP_H), length=2,
                                  doc="the map image's size in pixels: the map's on screen (image_size; app/main.py)")
    years_pixel = param.Parameter(None, doc="the selected pixel across years: (zone, row, col, vectors)")
    status = param.String("", doc="status line (HTML made by views.html: every value escaped)")
    reading = param.Boolean(False, doc="a read of big chunks is under way (app/bigreads.py): Cancel shows")
    running = param.String("", doc="the tool step under way, as its status line names it ('': none; "
                                   "app/tools/steps.py): the page counts its seconds")
    cancel_read = param.Action(lambda self: self.big_reads.cancel(), label="Cancel read")
    pin_selected = param.Action(lambda self: self.pin(), label="Pin pixel", constant=True)
    clear_pins = param.Action(lambda self: self.param.update(pins=[]), label="Clear pins")
    # Geography: world-atlas coastlines and borders, an optional XYZ tile layer, the go-to box.
    show_coast = param.Boolean(True, label="Coastlines")
    show_borders = param.Boolean(True, label="Country borders")
    geo_opacity = param.Number(0.8, bounds=(0.0, 1.0), step=0.05, label="Coast/border opacity")
    show_tiles = param.Boolean(False, label="Web tiles")
    tiles_opacity = param.Number(1.0, bounds=(0.0, 1.0), step=0.05, label="Web tile opacity")
    embedding_opacity = param.Number(1.0, bounds=(0.0, 1.0), step=0.05, label="Embedding layer opacity")
    goto_text = param.String("", label="Go to (lon,lat or country)")
    places = param.Dict({}, doc="country name -> lon/lat box (w, s, e, n), from world-atlas once loaded")
    tiles_url = param.String(None, allow_None=True, doc="XYZ tile URL template ({X}/{Y}/{Z}), None when not set")
    export_layer = param.Selector(objects=["base"], default="base", label="Layer to export",
                                  doc="a name of app/layers.providers() whose layer exists (_offer_exports)")
    exact = param.Boolean(False, label="Exact (full vectors)",
                          doc="the tools read every zone's full vectors at the view's level, not its compact code")
    cost = param.String("", doc="what the tools read over the view, and what the exact result costs (plain text)")

    def __init__(self, catalog: list[dict], url_state: UrlState, source_factory=None, **kw):
        super().__init__(**kw)
        self.catalog = catalog
        self.url_state = url_state
        self.big_reads = BigReads(self)
        self.source_factory = source_factory or (lambda url: JSSource(url, self.big_reads))
        self.model: StoreModel | None = None
        self.years_model: StoreModel | None = None
        self.param["year"].objects = year_options(catalog)
        self._tasks: set = set()
        self._drawing = None
        self._redraw_pending = False
        self._warming = None  # the task warming the shard indexes of the settled view (warm_view)
        self._hovering = None  # the task reading ahead the pixel under the resting mouse (hover)
        self._hover_at = None  # where the mouse rests, while that task has not read it yet
        self.geography = None  # the task loading coastlines, borders and place names (app/main.py)
        self.tool_window = None  # [(zone name, overview level, window), ...]: a link's tools run on these instead of the view's (app/tools/share.py)
        self.tools = Tools(self)  # the labels and the analysis tools (app/tools/)
        self.param.watch(self._on_selected, "selected")
        # The layers to export are those there are (layers.available): a new one is chosen as it comes.
        for tool in self.tools.all:
            tool.param.watch(self._offer_exports, tool.layer_param)
        # What a change of state sets off: a year switch, a redraw (coalesced).
        self.param.watch(lambda e: self.spawn(self.switch_year(e.new)), "year")
        self.param.watch(lambda e: self.schedule_redraw(), ["view", "image_px"])
        self.param.watch(self._on_exact, "exact")
        self.param.watch(lambda e: self.goto(e.new) if e.new.strip() else None, "goto_text")
        try:
            self.tiles_url = tiles.check_template(url_state.basemap)
        except ValueError as e:
            self.status = views.html("<b>Web tiles off:</b> {}", e)

    # ------------------------------------------------------------ tasks --
    def spawn(self, coro):
        """Run an action in the background; its failure is never lost: a store that cannot be read (SourceError: a
        corrupt chunk, a host gone) is one line in the status, anything else is printed (a traceback in the console)."""
        import asyncio
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task) -> None:
        self._tasks.discard(task)
        if task.cancelled() or task.exception() is None:
            return
        if isinstance(task.exception(), SourceError):
            self.status = views.html("<b>Read failed:</b> {}", task.exception())
            return
        if isinstance(task.exception(), TooLarge):
            self.status = views.html("<b>No exact result:</b> {}", task.exception())
            return
        import traceback
        traceback.print_exception(task.exception())

    async def settle(self) -> None:
        """Wait until every action this state set off has finished."""
        import asyncio
        # Done tasks are left out even before their done callback ran: in Pyodide that callback is a later macrotask,
        # while awaiting finished tasks resolves at once, so counting them would spin here for ever.
        while others := [t for t in self._tasks if not t.done() and t is not asyncio.current_task()]:
            await asyncio.gather(*others, return_exceptions=True)

    async def let_actions_start(self) -> None:
        """Let the actions just set off (the map's draw, after a change of view) send their reads, which then go on in
        the browser while the caller holds Python: the start-up builds the UI next, for ~0.4 s. Two turns of the
        event loop: one for an action to start its reads' tasks, one for those to call into JavaScript."""
        import asyncio
        for _ in range(2):
            await asyncio.sleep(0)

    def schedule_redraw(self) -> None:
        if self._warming is not None and not self._warming.done():
            self._warming = self.spawn(self.model.source.prefetch([]))  # the view moved on: drop what is left
        if self._drawing is not None and not self._drawing.done():
            self._redraw_pending = True  # the running loop draws once more with the newest view
            return
        self._drawing = self.spawn(self._redraw_loop())

    async def _redraw_loop(self) -> None:
        while True:
            self._redraw_pending = False
            await self.redraw()
            if not self._redraw_pending:
                break
        self._warming = self.spawn(self.warm_view())

    def zoomed_to_pixels(self) -> bool:
        """The map is zoomed in as far as the zones' 10 m previews (render.ZONE_ZOOM_M): few shards in view, where a
        click's reads are warmed ahead (warm_view, hover)."""
        return self.model is not None and self.render_view().metres_per_pixel() <= render.ZONE_ZOOM_M

    def hover(self, lon: float, lat: float) -> None:
        """The mouse rests over lon/lat (for 40 ms: app/tools/scatter_ui.py HOVER_JS). Zoomed to pixels, the pixel there
        and its years are read now, as a click reads them: a click there then finds its bytes in the browser's range
        cache (app/js/ranges.js), or joins those reads in flight, and waits for no request of its own. One read-ahead
        at a time; a rest meanwhile replaces the one waiting. A failure is left to the click, which reports it."""
        if not self.zoomed_to_pixels():
            return
        self._hover_at = (lon, lat)
        if self._hovering is None or self._hovering.done():
            self._hovering = self.spawn(self._read_ahead())

    async def _read_ahead(self) -> None:
        import asyncio
        while self._hover_at is not None:
            (lon, lat), self._hover_at = self._hover_at, None
            model = self.model
            reads = [model.pixel_at(lon, lat)]
            if self.years_model is not None and not self.tools.labels.mode:  # a label's click reads no years
                reads.append(self.years_model.pixel_years(lon, lat))
            got = await asyncio.gather(*reads, return_exceptions=True)
            for r in got:  # a bug still surfaces (spawn prints it)
                if isinstance(r, BaseException) and not isinstance(r, SourceError):
                    raise r
            if self.model is model and isinstance(got[0], Pixel):  # not when the year changed meanwhile
                self.ahead = got[0]

    async def warm_view(self):
        """Once the view has settled zoomed in (10 m previews: few shards in view), warm the shard indexes of the
        pixels in view, so that a click there costs one round trip (Source.prefetch): the year store's first (the
        spectrum), then the multi-year index's (the years plot; its year shown shares the year store's files, so
        only the other years cost requests).  One after the other: a prefetch call supersedes an unfinished one.
        Returns the year store's prefetch figures."""
        if not self.zoomed_to_pixels():
            return None
        v = self.render_view()
        try:
            done = await self.model.warm_pixels(render.view_windows(self.model.zones.values(), v))
            # The years' indexes: of a multi-year index (a geoemb: store's time axis was warmed with its year shown),
            # unless the view moved on meanwhile (its own warm_view warms what it shows).
            index = self.years_model
            if (index is not None and index.source is not self.model.source and not (done or {}).get("superseded")
                    and self.render_view() == v):
                await index.warm_pixels(render.view_windows(index.all_zones.values(), v))
            return done
        except SourceError:  # an optimisation only: a click reads (and reports) what it needs
            return None

    # ------------------------------------------------------------ stores --
    async def open_year(self, year: int) -> None:
        """Show `year`: the open store, when the catalog names it for that year and it shows that year itself
        (a geoemb: store's time axis: builder/core/kinds.py showing), else the catalog's store for that year.

        A store that shows years itself lists them (own_years): they replace its one catalog entry (the year
        selector), and it is also the store the "selected pixel across years" plot reads."""
        m = self.model
        shown = m.kind.showing(m, year) if m is not None else None
        if shown is not None and any(c["url"] == m.source.url and c["year"] == year for c in self.catalog):
            self.model = shown
            self.ahead = None  # a pixel of the year shown before
            return
        entry = next(c for c in self.catalog if c["year"] == year)
        model = StoreModel(self.source_factory(entry["url"]), jsonschema=jsonschema)
        model = await model.open(year)
        own = model.kind.own_years(model)
        if own:
            others = [c for c in self.catalog if c["url"] != entry["url"] and c["year"] not in own]
            truths = {c["year"]: c["truth"] for c in self.catalog if c["url"] == entry["url"] and "truth" in c}
            mine = [{"year": y, "url": entry["url"], "label": str(y), **({"truth": truths[y]} if y in truths else {})}
                    for y in own]
            self.catalog = sorted(others + mine, key=lambda c: c["year"])
            self.param["year"].objects = year_options(self.catalog)
            self.years_model = model
            self.status = views.store_message(model)
        self.model = model
        self.ahead = None  # a pixel of the year shown before (read ahead while this one opened, too)

    async def switch_year(self, year) -> None:
        """Open `year`'s store and re-read the selection and pins at the same lon/lat there."""
        if self.model is not None and self.model.year == year:
            return
        try:
            await self.open_year(year)
        except SourceError as e:
            self.status = views.html("<b>Cannot open {}:</b> {}", year, e)
            if self.model is not None:
                self.year = self.model.year  # the selector goes back to the year the map shows
            return
        pins = []
        for p in self.pins:
            px = await self.model.pixel_at(p.lon, p.lat)
            if px is not None and px.valid:
                pins.append(px)
        self.pins = pins
        if self.selected is not None:
            await self.select(self.selected.lon, self.selected.lat)
        await self.redraw()

    async def open_years_index(self, url: str, opening=None) -> None:
        """Open the multi-year virtual index; a failure only leaves the across-years views out. `opening`: the same
        url's `years_index(url)` under way already (the start-up reads it beside the year's store)."""
        try:
            model = await (opening if opening is not None else self.years_index(url))
        except SourceError as e:
            self.status = views.html("<b>Multi-year index unavailable:</b> {}", e)
            return
        self.years_model = model
        versions = sorted({z.model_version for z in model.zones.values()})
        self.status = views.html("Multi-year index: years {}; model {}.", ", ".join(map(str, model.years)),
                                 ", ".join(versions))

    async def years_index(self, url: str) -> StoreModel:
        """The multi-year index at `url`, opened (SourceError if it cannot be, or is a single year's store)."""
        model = await StoreModel(self.source_factory(url), jsonschema=jsonschema).open()
        if not model.kind.across_years():
            raise SourceError("invalid", f"{url} is a single-year store, not a multi-year index")
        return model

    def _offer_exports(self, *events) -> None:
        names = layers.available(self)
        came = [n for n in names if n not in self.param["export_layer"].objects]
        self.param["export_layer"].objects = names
        if came or self.export_layer not in names:
            self.export_layer = came[0] if came else names[0]

    # ------------------------------------------------------------ view --
    def render_view(self) -> render.View:
        """The view on the tools' grid (MAP_W x MAP_H): what they read and compute over, whatever the screen."""
        return render.View(*self.view, MAP_W, MAP_H)

    def image_view(self) -> render.View:
        """The view at the map's size on screen (image_px): what the base layer and the overlays are drawn at."""
        return render.View(*self.view, *self.image_px)

    def fit_zones(self) -> None:
        """Fit the largest group of zones (app/footprints.py first_box: the JS preview frames by the same rule)."""
        self.view = fit_box(*footprints.first_box([z.lonlat for z in self.model.zones.values()]))

    def centre_view(self, lon: float, lat: float, span_m: float) -> None:
        self.view = centred_box(lon, lat, span_m)

    def go_to_selected(self, widest_m: float = 20_000) -> None:
        """Centre the map on the selected pixel, as wide on the ground as the view is there, at most `widest_m`."""
        px = self.selected
        if px is None:
            return
        wide = (self.view[1] - self.view[0]) * math.cos(math.radians(px.lat))
        self.centre_view(px.lon, px.lat, min(wide, widest_m))

    def goto(self, text: str):
        """Move the map to what the go-to box says (lon,lat or a country name); else say why not."""
        result = places.resolve(text, self.places)
        if result[0] == "point":
            self.centre_view(result[1], result[2], GOTO_SPAN_M)
        elif result[0] == "box":
            self.view = fit_box(*result[2])
        self.status = views.goto_message(result)
        return result

    async def redraw(self) -> None:
        if self.model is not None:
            v = self.image_view()
            self.base = (v, await basemap.draw(self.model, v))
            self.cost = read_cost(self.model, self.render_view(), self.exact)



    # ------------------------------------------------------------ pixels --
    async def select(self, lon: float, lat: float) -> Pixel | None:
        if self.model is None:
            return None
        import asyncio
        # The pixel and its years are read at once (one wait for both; the browser's range cache lets the
        # multi-year index share the shard indexes and chunks the year store is reading, app/js/ranges.js).
        purpose = PURPOSE.set("this pixel")  # a big chunk's read says what it is for (app/bigreads.py)
        try:
            years = asyncio.ensure_future(self._years_at(lon, lat))
            try:
                px = await self.model.pixel_at(lon, lat)
            except SourceError as e:
                self.status = views.html("<b>Read cancelled:</b> {}" if e.kind == "cancelled" else "<b>Read failed:</b> {}", e)
                # Cancelled (a cancelled click reads no year afterwards), with a callback of its own: Pyodide reports a
                # cancelled task whose one done callback is its loop's as an unhandled error.
                years.add_done_callback(lambda f: None)
                years.cancel()
                return None
        finally:
            PURPOSE.reset(purpose)
        self.selected = px  # first: the spectrum a tap showed ahead is the selection's, not drawn without it
        self.outside = None if px is not None else (lon, lat)
        yp = await years
        if self.years_model is not None:
            self.years_pixel = yp if px is not None else None
        return px

    def _on_selected(self, event) -> None:
        self.param.pin_selected.constant = not (event.new is not None and event.new.valid)  # the button's disabled state

    def pin(self) -> None:
        px = self.selected
        if px is not None and px.valid and all((p.zone, p.row, p.col) != (px.zone, px.row, px.col) for p in self.pins):
            self.pins = [*self.pins, px]

    async def refresh_years(self) -> None:
        if self.years_model is None:
            return
        px = self.selected
        self.years_pixel = await self._years_at(px.lon, px.lat) if px is not None else None

    async def _years_at(self, lon: float, lat: float):
        """The pixel under lon/lat across the years (None without a multi-year source, or when its read failed:
        the status line says why)."""
        if self.years_model is None:
            return None
        try:
            return await self.years_model.pixel_years(lon, lat)
        except SourceError as e:
            self.status = views.html("<b>Multi-year index read failed:</b> {}", e)
            return None

    def _on_exact(self, e) -> None:
        """The tools' representation changed: say what they read now."""
        if self.model is not None:
            self.cost = read_cost(self.model, self.render_view(), self.exact)

    def click(self, lon: float, lat: float):
        """A map click: labels the pixel in label mode, else selects it."""
        return self.spawn(self.tools.labels.add(lon, lat) if self.tools.labels.mode else self.select(lon, lat))

    # ------------------------------------------------------------ URL --
    def url(self) -> UrlState:
        """What the URL hash holds for the current state."""
        if self.model is None:
            return self.url_state
        v = self.render_view()
        lon, lat = v.centre_lonlat()  # what centre_view takes back
        return UrlState(store=self.url_state.store, year=self.model.year, lon=lon, lat=lat,
                        span=v.metres_per_pixel() * v.width,
                        sel=(self.selected.lon, self.selected.lat) if self.selected else None,
                        pins=[(p.lon, p.lat) for p in self.pins],
                        parts=self.tools.url_parts(), embed=self.url_state.embed,
                        labels=self.tools.labels.compact(), tool=share.encode(self.tools))


def year_options(catalog: list[dict]) -> dict:
    """The year selector's options: catalog labels (shown as text by the widget) to years."""
    return {str(c.get("label", c["year"])): c["year"] for c in catalog}


def image_size(width, height, dpr) -> tuple[int, int] | None:
    """The map image's size for a map of `width` x `height` CSS pixels on a screen of `dpr` device pixels to one:
    width x height x dpr, scaled down to at most MAP_PX_MAX pixels; None for sizes that are not a screen's
    (they come from the page)."""
    ok = lambda v, hi: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 < v <= hi
    if not (ok(width, SCREEN_PX_MAX) and ok(height, SCREEN_PX_MAX) and ok(dpr, 8)):
        return None
    scale = min(dpr, math.sqrt(MAP_PX_MAX / (width * height)))
    return max(1, round(width * scale)), max(1, round(height * scale))


def fit_box(w: float, s: float, e: float, n: float) -> tuple[float, float, float, float]:
    """The Mercator view (of the map's aspect) that shows the lon/lat box with a 10 % margin."""
    x0, y0 = geo.lonlat_to_merc(w, s)
    x1, y1 = geo.lonlat_to_merc(e, n)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    half_w = max(x1 - x0, (y1 - y0) * MAP_W / MAP_H) / 2 * 1.1
    half_h = half_w * MAP_H / MAP_W
    return float(cx - half_w), float(cx + half_w), float(cy - half_h), float(cy + half_h)


def centred_box(lon: float, lat: float, span_m: float) -> tuple[float, float, float, float]:
    """The Mercator view centred on lon/lat that is `span_m` metres wide on the ground."""
    cx, cy = geo.lonlat_to_merc(lon, lat)
    half_w = span_m / 2 / math.cos(math.radians(lat))
    half_h = half_w * MAP_H / MAP_W
    return float(cx - half_w), float(cx + half_w), float(cy - half_h), float(cy + half_h)


def read_cost(model: StoreModel, v: render.View, exact: bool) -> str:
    """What a tool over view `v` reads (app/tools/region.py plans), and what its exact result would cost, as one
    plain line (the caller escapes it)."""
    from app.tools import region as reg
    ps = reg.plans(model, v, exact)
    if not ps:
        return "The view shows no zone of this store."
    now, full = reg.cost(ps)
    coded = [p for p in ps if p[3] != "vectors"]  # the compact code or a nested depth
    what = f"{_read_as(ps)}, an approximate answer" if coded else f"{_read_as(ps)}, exact"
    text = f"Tools read {what}: about {now / 1e6:.1f} MB."
    if coded:
        text += f" The exact result reads about {full / 1e6:.1f} MB."
    return text


def _read_as(ps) -> str:
    """The representation a tool reads for plans `ps` (app/tools/region.py plans), in region.read_words' words: the
    compact code at a level when any zone is read so, else the primary zone's depth or full vectors; with the pixel."""
    from app.tools import region as reg
    coded = [p for p in ps if p[3] == "code"]
    zone, _, _, use = coded[0] if coded else ps[0]
    if use == "code":
        words = reg.read_words(use, zone.n_bands, zone.code_dims, zone.code_kind)
        return f"{words} at level {zone.level} ({zone.pixel:g} m)"
    return f"{reg.read_words(use, zone.n_bands, reg.plan_depth(zone, use))} ({zone.pixel:g} m)"


def representation(model: StoreModel, v: render.View, exact: bool) -> str:
    """What the tools' layers over view `v` are computed from (the map's caption), '' where the view shows no zone."""
    from app.tools import region as reg
    ps = reg.plans(model, v, exact)
    return _read_as(ps) if ps else ""
