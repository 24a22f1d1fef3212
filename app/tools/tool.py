"""What an analysis tool is: `Tool`, the base every tool module's class derives from, and `Context`, all a tool sees
of the explorer.

A tool module declares, on one class:
  * its parameters (param's, on the class itself) and its compute on the tool's region (read through the context);
  * `tool_name` (its attribute on `Tools` and its key in the registry, app/tools/registry.py), `layer_name` (its map
    layer: the "Tool layer" selector, the exports, value() and layerArray() in the page API);
  * its URL encoding: `url_settings` (the settings written to the `tool=` hash part, with their parsers: an empty
    dict keeps the layer out of the URL), `url_extra`/`url_extra_keys` (more parts, e.g. the scatter's brush) and
    `rerun` (the compute a link sets off);
  * `verbs` (its window.tesseraApi / postMessage commands) and `panel` (its tab: `tab`, `title`).
An `Overlay` is the other kind: its layer lies under the tool layer while its toggle is on, its controls are in the
side bar's Layers card and its settings are URL parts of their own (pixel similarity, app/tools/similarity.py).
The registry's order is the order of the layers; app/state.py TOOL_TABS orders the tabs and lists the names a
link's ?tools= may give (the docs' directive reads it without importing the tools); a tab it does not name yet
comes last.
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar

import jsonschema
import param

from app.tools import region as reg
from app.tools.steps import Step, Steps


class Context:
    """What a tool may use of the explorer (app/session.py Explorer): the labels, the status line, its task runner,
    the tool's region (the view's, or a link's windows), the year stores (and their ground truth), and the selected
    pixel; never the Explorer itself."""

    def __init__(self, app, labels, tools):
        self._app, self.labels, self._tools = app, labels, tools
        self.stores: dict = {}  # the year stores opened so far (store), by year
        self._steps = Steps(app)

    def step(self, title: str, what: str) -> Step:
        """The step a tool's compute runs in (`async with`): its progress in the status line and on the page, from
        its start to its end (app/tools/steps.py)."""
        return self._steps(title, what)

    @property
    def status(self) -> str:
        return self._app.status

    @status.setter
    def status(self, text: str) -> None:
        self._app.status = text

    def spawn(self, coro):
        return self._app.spawn(coro)

    @property
    def model(self):
        """The shown store (builder/core/reader.py StoreModel), or None before one is open."""
        return self._app.model

    @property
    def shown(self) -> str:
        """The tool layer on the map now."""
        return self._tools.shown

    def watch_shown(self, callback: Callable[[], Any]) -> None:
        self._tools.param.watch(lambda e: callback(), "shown")

    @shown.setter
    def shown(self, name: str) -> None:
        self._tools.shown = name

    def watch_pixel(self, callback: Callable[[Any], Any]) -> None:
        """callback(pixel) whenever the map's selected pixel changes (None: none)."""
        self._app.param.watch(lambda e: callback(e.new), "selected")

    def watch_exact(self, callback: Callable[[], Any]) -> None:
        """callback() whenever the tools' representation changes (full vectors or the compact code)."""
        self._app.param.watch(lambda e: callback(), "exact")

    def watch_year(self, callback: Callable[[], Any]) -> None:
        """callback() when the user asks for another year (its store opens next)."""
        self._app.param.watch(lambda e: callback(), "year")

    @property
    def selected(self):
        """The selected pixel (builder/core/reader.py Pixel), or None."""
        return self._app.selected

    @property
    def pins(self) -> list:
        return list(self._app.pins)

    async def select(self, lon: float, lat: float):
        return await self._app.select(lon, lat)

    async def region(self) -> reg.Regions | None:
        """The tool's region: a link's windows while its layer is re-run, else the view's (app/tools/region.py)."""
        return await reg.read_tool(self._app)

    async def view_region(self) -> reg.Regions | None:
        """The view's region, as similarity search reads it."""
        return await reg.read(self._app.model, self._app.render_view(), self._app.exact)

    def plans(self, model=None) -> list:
        """region.tool_plans: what the tool's region reads, on `model`'s grids (None: the shown store's)."""
        return reg.tool_plans(self._app, model)

    def windows(self) -> list:
        """region.tool_windows: the tool's region at 10 m."""
        return reg.tool_windows(self._app)

    @property
    def linked(self) -> bool:
        """Whether the tool runs on a link's windows (a re-run from the URL) rather than the view's."""
        return self._app.tool_window is not None

    @property
    def years_model(self):
        """The multi-year store (an index or a geoemb: store), or None."""
        return self._app.years_model

    @property
    def catalog(self) -> list[dict]:
        return self._app.catalog

    async def store(self, year: int):
        """The store of `year` from the catalog, opened once and kept (change and cross-year models read it)."""
        from builder.core.reader import StoreModel
        from builder.core.source import SourceError
        if year not in self.stores:
            entry = next((c for c in self._app.catalog if c["year"] == year), None)
            if entry is None:
                raise SourceError("notfound", f"no store for {year} in the catalog")
            # open(year): a geoemb: store lists every year under one URL and shows the one asked for
            model = StoreModel(self._app.source_factory(entry["url"]), jsonschema=jsonschema)
            self.stores[year] = await model.open(year)
        return self.stores[year]


    def truth(self, year: int):
        """(Source, URL) of `year`'s ground-truth store, as the catalog names it ("truth"; builder/truth.py), or
        None when it names none."""
        entry = next((c for c in self._app.catalog if c["year"] == year), None)
        url = entry.get("truth") if entry else None
        return None if url is None else (self._app.source_factory(url), url)


class Tool(param.Parameterized):
    """An analysis tool: its parameters, compute, layer, URL encoding, page-API verbs and panel (module docstring)."""

    tool_name: ClassVar[str]  # (param reserves `name`)
    layer_name: ClassVar[str]
    layer_param: ClassVar[str] = "result"  # the parameter holding the map layer (a region.Layer or None)
    url_settings: ClassVar[dict[str, Callable[[str], Any]]] = {}
    url_extra_keys: ClassVar[tuple[str, ...]] = ()
    url_watch: ClassVar[tuple[str, ...]] = ("result",)  # what changes the tool= part, besides the layer shown
    continuous: ClassVar[bool] = True  # exported as float32 (NaN: no data); else as class indices (uint8, 255)
    missing: ClassVar[str] = "run the {name} tool first"  # why there is no layer to export yet
    tab: ClassVar[str | None] = None  # its tab's name (app/state.py TOOL_TABS); None: no tab
    title: ClassVar[str] = ""

    result = param.Parameter(None, doc="region.Layer, or None")

    def __init__(self, ctx: Context, **kw):
        super().__init__(**kw)
        self.ctx = ctx

    @property
    def layer(self):
        return getattr(self, self.layer_param)

    async def rerun(self, extra: dict):
        """Run with the settings a link set (share.restore); `extra`: its url_extra_keys' texts. Returns the layer."""
        raise NotImplementedError

    async def link_store(self, settings: dict):
        """The store whose grids a link's windows with these settings lie on (share.restore checks them there);
        None: the store shown."""
        return None

    def url_extra(self) -> list[str]:
        """More parts of the tool= value (left out when the value would be too long)."""
        return []

    def verbs(self, api) -> dict:
        """{name: callable} added to window.tesseraApi and postMessage (api: app/tools/verbs.py Verbs)."""
        return {}

    def panel(self, fig) -> Callable[[], Any] | None:
        """Set up what the tab needs now (fig: the map figure) and return the builder of its content, called when
        the tab is first opened; None: no tab."""
        return None

    def classes(self) -> tuple[tuple[str, ...] | None, list | None]:
        """(names, colours) of a class layer's values 0..n-1, for its exports; (None, None) otherwise."""
        return None, None

    def legend_key(self) -> list[tuple[str, str]]:
        """(name, '#rrggbb') of each colour of the layer, for the map's legend ([]: none)."""
        return []

    def colour_bar(self) -> tuple[str, float, float] | None:
        """(title, low, high) of the map legend's colour bar for this layer; None: none."""
        return None

    def report(self) -> dict | None:
        """A document exported beside the layer's GIS files (the held-out evaluation), or None."""
        return None


class Overlay(Tool):
    """A tool whose layer lies under the tool layer (the map's overlay) while its toggle `on` is on: not among the
    "Tool layer" choices, its controls a row of the side bar's Layers card rather than a tab, and its settings hash
    parts of their own (`url_parts`, `restore`), beside the tool= part of the tool layer shown."""

    on = param.Boolean(False)

    def drawn(self) -> bool:
        """Whether its layer is on the map."""
        return self.on and self.layer is not None

    def url_parts(self) -> list[tuple[str, str]]:
        """(key, text) of the hash parts it writes now (app/state.py UrlState.parts)."""
        return []

    async def restore(self, url) -> None:
        """Apply a link's parts (url: app/state.py UrlState; a part that does not parse may join url.problems)."""

    def controls(self) -> list:
        """Its widgets in the side bar's Layers card."""
        return []
