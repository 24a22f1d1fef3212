"""One way to add a tool (app/tools/tool.py, app/tools/registry.py): a tool declared in one class, here in the test
itself, appears in the tool layers, the exports, the URL (and comes back from it), the page API and the tabs, with
its values checked against zarr-python + numpy. Also: the registered tools' names, layers, verbs and tabs are
distinct, and a tool receives its context, never the Explorer."""
from __future__ import annotations

import numpy as np
import param
import pytest

from app import layers
from app.session import Explorer
from app.state import UrlState
from app.tools import api, registry, share
from app.tools.tool import Context, Tool
from app.tools.urlvalues import number
from conftest import run_async
from tools_util import centre_of_data, opened, pixel_lonlat, zone_vectors


class Norm(Tool):
    """A tiny tool: each pixel's vector length times `scale`."""

    tool_name, layer_name = "norm", "norm"
    url_settings = {"scale": number}
    tab, title = "norm", "Norm"

    scale = param.Number(1.0, bounds=(0.0, 100.0), label="Scale")

    async def compute(self, scale=None):
        if scale is not None:
            self.scale = scale
        region = await self.ctx.region()
        values = np.linalg.norm(region.pixels(), axis=1).astype(np.float32) * np.float32(self.scale)
        self.result = region.layer("norm", region.spread(values))
        return self.result

    async def rerun(self, extra):
        return await self.compute()

    def verbs(self, api):
        return {"norm": lambda scale=1.0: api.run(lambda: self.compute(float(scale))),
                "normSummary": lambda: api.summary(self.result)}

    def panel(self, fig):
        import panel as pn
        return lambda: pn.Param(self.param, show_name=False, parameters=["scale"], name="norm-panel")


@pytest.fixture
def with_norm(monkeypatch):
    monkeypatch.setattr(registry, "TOOLS", registry.TOOLS + [Norm])


def expected(store, layer, scale):
    r0, r1, c0, c1 = layer.window
    sub = zone_vectors(store, "utm31")[r0:r1, c0:c1]
    return np.linalg.norm(sub.astype(np.float64), axis=2) * scale  # NaN where no data


def test_a_tool_from_one_class_is_a_layer_a_link_verbs_and_a_tab(store, with_norm):
    async def run():
        state = await opened(store)
        assert registry.layers()[-1] == "norm" and list(state.tools.param.shown.objects)[-1] == "norm"
        assert "norm" in layers.providers()
        tool = state.tools.norm
        assert isinstance(tool.ctx, Context) and not any(isinstance(v, Explorer) for v in vars(tool).values())

        state.centre_view(*centre_of_data(store, "utm31"), 2500)
        cmds = api.commands(state)
        layer = await cmds["norm"](2.5)
        assert state.tools.shown == "norm" and state.tools.layer("norm") is layer
        want = expected(store, layer, 2.5)
        np.testing.assert_allclose(layer.values, want, rtol=1e-5)
        assert cmds["normSummary"]()["valid"] == int(np.isfinite(want).sum()) > 0
        lon, lat = pixel_lonlat(store, "utm31", *[int(x) for x in np.argwhere(np.isfinite(want))[0] +
                                                  np.array(layer.window)[[0, 2]]])
        assert cmds["value"]("norm", lon, lat) == pytest.approx(float(want[np.isfinite(want)][0]), rel=1e-5)
        assert (await layers.layer(state, "norm")).values.dtype == np.float32
        assert "norm" in layers.available(state)

        # the link: a fresh explorer re-runs it with its setting on its window, wherever its view is
        text = share.encode(state.tools)
        assert text.startswith("norm,scale:2.5,win:")
        again = await opened(store)
        back = await share.restore(again, UrlState.from_url("", state.url().to_hash()).tool)
        assert again.tools.norm.scale == 2.5 and again.tools.shown == "norm"
        np.testing.assert_array_equal(back.values, layer.values)
        assert await share.restore(again, text.replace("scale:2.5", "scale:1000")) is None  # over its bounds
        assert "Tool layer in the URL ignored" in again.status and "scale" in again.status
        assert again.tools.norm.scale == 2.5
    run_async(run())


def titles_of(ui) -> list[str]:
    """The tabs' titles, as the page's document holds them (Bokeh's TabPanel titles)."""
    return [p.title for p in ui.panel.get_root().tabs]


def test_the_new_tool_has_its_tab_beside_the_others(store, with_norm, monkeypatch):
    from bokeh.plotting import figure

    from app import page, state as url_rules
    from app.tools.ui import ToolsUI
    monkeypatch.setattr(page, "on", lambda kind, handler: None)  # the page's messages: there is no page on CPython

    async def run():
        state = await opened(store)
        ui = ToolsUI(state, figure())
        titles = titles_of(ui)
        assert titles == ["Labels", "Classify", "Regression", "Clusters", "Change", "Similarity", "Scatter", "Norm"]
        tab = ui.panel[-1]  # built when first opened: its builder is the tool's panel
        built = tab.object()
        assert built.name == "norm-panel" and built.parameters == ["scale"] and built.object is state.tools.norm
        # a link names it once TOOL_TABS (the URL's words, which the docs' directive reads) does
        assert UrlState.from_url("?tools=norm,labels", "").tools is None
        monkeypatch.setattr(url_rules, "TOOL_TABS", url_rules.TOOL_TABS + ("norm",))
        tabs = UrlState.from_url("?tools=norm,labels", "").tools
        assert tabs == ["labels", "norm"]
        assert titles_of(ToolsUI(state, figure(), tabs)) == ["Labels", "Norm"]
    run_async(run())


def test_registered_tools_have_distinct_names_layers_tabs_and_verbs(store):
    tools = registry.TOOLS
    for attr in ("tool_name", "layer_name", "tab"):
        got = [getattr(t, attr) for t in tools]
        assert len(set(got)) == len(got), attr
    from app.state import TOOL_TABS
    assert sorted(t.tab for t in tools) == sorted(TOOL_TABS[1:])  # every tab a link can name, the labels' first
    assert all(issubclass(t, Tool) for t in tools)

    async def run():
        state = await opened(store)
        every = api.commands(state)  # raises if one tool's verb hid another's
        for verb in ("classify", "regress", "cluster", "clusterToClass", "change", "examples", "scatter",
                     "scatterPoints", "scatterSelect", "scatterAt", "scatterToClass", "label", "value", "show"):
            assert verb in every, verb
    run_async(run())


def test_pixel_similarity_is_a_tool_of_the_registry_like_the_others(store):
    """Pixel similarity is declared in one class (app/tools/similarity.py), an Overlay of the registry: its name and
    layer are distinct from every other tool's, its layer is exported (listed before the base layer, as before) but
    is no "Tool layer" choice (it lies under the tool layer), its verbs come from the registry, and it receives its
    context, never the Explorer."""
    from app.tools.similarity import Similarity
    from app.tools.tool import Overlay
    every = registry.every()
    assert Similarity in registry.OVERLAYS and issubclass(Similarity, Overlay) and issubclass(Similarity, Tool)
    for attr in ("tool_name", "layer_name"):
        got = [getattr(t, attr) for t in every]
        assert len(set(got)) == len(got), attr
    assert list(layers.providers())[:2] == ["similarity", "base"] and "similarity" not in registry.layers()

    async def run():
        state = await opened(store)
        tool = state.tools.similarity
        assert state.tools.tool("similarity") is tool and tool in state.tools.all and tool in state.tools.overlays
        assert isinstance(tool.ctx, Context) and not any(isinstance(v, Explorer) for v in vars(tool).values())
        assert "similarity" not in state.tools.param.shown.objects
        cmds = api.commands(state)
        assert {"similarity", "simAt"} <= set(cmds) and set(tool.verbs(None)) == {"similarity", "simAt"}
        valid = np.argwhere(np.isfinite(zone_vectors(store, "utm31")[..., 0]))
        here = pixel_lonlat(store, "utm31", *map(int, valid[len(valid) // 2]))
        state.centre_view(*here, 2500)
        await state.select(*here)
        summary = await cmds["similarity"]("selection", "mean", 0.5)
        layer = state.tools.layer("similarity")
        assert tool.on and tool.threshold == 0.5 and summary["valid"] == int(np.isfinite(layer.values_all()).sum()) > 0
        assert cmds["value"]("similarity", *here) == pytest.approx(1.0, abs=1e-5)
        assert "similarity" in layers.available(state)
    run_async(run())
