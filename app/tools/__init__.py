"""The explorer's analysis tools: each is a module declaring one `Tool` (app/tools/tool.py), listed in
app/tools/registry.py; `Tools` holds the labels and one instance of each for the Explorer (app/session.py).

share.py writes the shown tool layer to the URL, api.py puts the tools' verbs on window.tesseraApi, ui.py draws
their tabs and app/layers.py exports their layers: each by iterating the registry.
"""
from __future__ import annotations

import param

from app.tools import registry
from app.tools.labels import Labels
from app.tools.tool import Context


class Tools(param.Parameterized):
    """The labels and the tools' states (each also as an attribute by its `tool_name`; `overlays`: the
    tool.Overlay ones); `shown` is the tool layer drawn over the map (and over the overlays)."""

    shown = param.Selector(objects=["none"], default="none", label="Tool layer")

    def __init__(self, app, **kw):
        super().__init__(**kw)
        self.param.shown.objects = registry.layers()
        self.labels = Labels(app)
        ctx = Context(app, self.labels, self)
        self.overlays = [cls(ctx) for cls in registry.OVERLAYS]
        chosen = [cls(ctx) for cls in registry.TOOLS]
        self.all = self.overlays + chosen
        self._by_layer = {t.layer_name: t for t in self.all}
        for tool in self.all:
            setattr(self, tool.tool_name, tool)
        for tool in chosen:
            tool.param.watch(lambda e, name=tool.layer_name: self._on_layer(name, e.new), tool.layer_param)

    def _on_layer(self, name: str, layer) -> None:
        """A new tool layer is shown; a layer gone takes itself off the map."""
        if layer is not None:
            self.shown = name
        elif self.shown == name:
            self.shown = "none"

    def tool(self, layer_name: str):
        """The tool whose layer is `layer_name`, or None."""
        return self._by_layer.get(layer_name)

    def layer(self, name: str):
        """The tool layer `name` (a region.Layer), or None when it has not been computed."""
        tool = self._by_layer.get(name)
        return None if tool is None else tool.layer

    def url_parts(self) -> dict[str, str]:
        """The overlays' hash parts (app/state.py UrlState.parts)."""
        return {k: v for tool in self.overlays for k, v in tool.url_parts()}
