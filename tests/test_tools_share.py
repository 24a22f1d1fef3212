"""The tool layer in the URL hash on CPython: a fresh explorer opened from a state's URL re-runs the same tool
with the same settings on the same window (same values), and hostile or broken tool= values are ignored
with one escaped line."""
from __future__ import annotations

import html
from urllib.parse import quote

import numpy as np
import pytest

from app.state import UrlState
from app.tools import region, share
from conftest import run_async
from test_session import year_copy
from tools_util import centre_of_data, cosines, opened, pin_three, pixel_lonlat, training_pixels, zone_vectors

HOSTILE = "<img src=x onerror=alert(1)>"


async def reopened(state, store, catalog=None):
    """A new explorer from `state`'s URL hash, as app/main.py starts one: view, labels, then the tool layer."""
    back = UrlState.from_url("", state.url().to_hash())
    again = await opened(store, state.model.year, catalog=catalog)
    again.centre_view(back.lon, back.lat, back.span)
    again.tools.change.offer()
    await again.tools.labels.restore(back.labels)
    return again, back, await share.restore(again, back.tool)


def same_layer(a, b) -> None:
    assert (a.zone.name, tuple(a.window)) == (b.zone.name, tuple(b.window))
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.rgba, b.rgba)


def test_view_round_trip_keeps_the_tools_window(store):
    async def run():
        state = await opened(store)
        again = await opened(store)
        rng = np.random.default_rng(4)
        lon, lat = centre_of_data(store, "utm31")
        for i in range(300):  # views of arbitrary centre and span: the URL brings back the same box to 1 cm ...
            state.centre_view(lon + rng.uniform(-0.02, 0.02), lat + rng.uniform(-0.02, 0.02), rng.uniform(800, 9000))
            back = UrlState.from_url("", state.url().to_hash())
            again.centre_view(back.lon, back.lat, back.span)
            np.testing.assert_allclose(again.view, state.view, rtol=0, atol=0.01)
            if i % 30 == 0:  # ... so the tools sample the same zone window (a 10 m pixel's edge is rarely that close)
                assert region.view_window(again.model, again.render_view()) == \
                    region.view_window(state.model, state.render_view())
    run_async(run())


def test_cluster_and_scatter_come_back_from_the_url(store):
    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm31"), 2500)
        first = await state.tools.cluster.cluster(4, 3)
        h = state.url().to_hash()
        r0, r1, c0, c1 = first.window
        assert f"tool=cluster,k:4,seed:3,win:{r0}_{r1}_{c0}_{c1},zone:utm31" in h
        again, back, layer = await reopened(state, store)
        assert again.tools.shown == "cluster" and (again.tools.cluster.k, again.tools.cluster.seed) == (4, 3)
        same_layer(layer, first)
        assert again.tools.cluster.inertia == pytest.approx(state.tools.cluster.inertia, rel=1e-6)
        assert "another" not in again.status

        sc = state.tools.scatter
        p = await sc.compute(max_points=700, seed=9)
        brushed = [0, 1, 2, 3, 10, 40, 41, 699]
        brush = sc.select(brushed)
        assert state.tools.shown == "scatter"
        h = state.url().to_hash()
        assert "tool=scatter,max_points:700,seed:9,method:PCA,n_neighbors:15,min_dist:0.1,sel:0-3;10;40-41;699,win:" in h
        again, back, layer = await reopened(state, store)
        assert again.tools.shown == "scatter" and again.tools.scatter.selected == brushed
        same_layer(layer, sc.highlight)
        # the highlighted pixels are the brushed points' pixels (lon/lat by pyproj from the store's grid)
        for i in brushed:
            lon, lat = pixel_lonlat(store, "utm31", p.region.primary.window[0] + int(p.rows[i]),
                                    p.region.primary.window[2] + int(p.cols[i]))
            assert again.tools.layer("scatter").value_at(lon, lat) == 1.0
        # a brush too long for the URL is left out, the scatter and its settings stay
        big = await sc.compute(max_points=3000, seed=9)
        assert len(big.rows) > 1200  # every other index of these is over 2000 characters as ranges
        sc.select(list(range(0, len(big.rows), 2)))
        h_long = state.url().to_hash()
        assert "tool=scatter,max_points:3000,seed:9,method:PCA,n_neighbors:15,min_dist:0.1,win:" in h_long and "sel:" not in h_long
        again, back, layer = await reopened(state, store)  # the same points, none brushed, so no map layer yet
        assert layer is None and again.tools.scatter.selected == [] and "ignored" not in again.status
        np.testing.assert_array_equal(again.tools.scatter.result.rows, big.rows)
        np.testing.assert_array_equal(again.tools.scatter.result.cols, big.cols)
        # opened on another view: the scatter re-runs on the link's window, so the same sample and brush
        moved = UrlState.from_url("", h)
        other = await opened(store)
        other.centre_view(moved.lon + 0.01, moved.lat, moved.span)
        assert region.view_window(other.model, other.render_view())[1] != tuple(brush.window)
        same_layer(await share.restore(other, moved.tool), brush)
        assert other.tools.scatter.selected == brushed
    run_async(run())


def test_class_map_and_change_come_back_from_the_url(store, world, tmp_path):
    s23 = year_copy(store, tmp_path / "2023.zarr", 2023)
    catalog = [{"year": 2023, "url": str(s23), "label": "2023"}, {"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        state = await opened(store, catalog=catalog)
        state.centre_view(*centre_of_data(store, "utm30"), 2500)
        for r, c, k in training_pixels(store, "utm30", world, 2024, per_class=5):
            await state.tools.labels.add(*pixel_lonlat(store, "utm30", r, c), cls=f"class {k}")
        first = await state.tools.classify.classify("logistic regression", seed=2, threshold=0.4)
        assert "tool=class,method:logistic%20regression,k:5,seed:2,threshold:0.4,win:" in state.url().to_hash()
        again, _, layer = await reopened(state, store, catalog)
        c = again.tools.classify
        assert (again.tools.shown, c.method, c.seed, c.threshold) == ("class", "logistic regression", 2, 0.4)
        same_layer(layer, first)

        ch = state.tools.change
        ch.offer()
        first = await ch.compute(2023, 2024)
        ch.threshold = 0.25
        assert "tool=change,y0:2023,y1:2024,threshold:0.25,win:" in state.url().to_hash()
        again, _, layer = await reopened(state, store, catalog)
        assert again.tools.shown == "change" and again.tools.change.threshold == 0.25
        same_layer(layer, ch.result)
    run_async(run())


def test_a_links_tool_layer_runs_on_the_links_window_not_the_view(store):
    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm31"), 2500)
        first = await state.tools.cluster.cluster(3, 7)
        link = UrlState.from_url("", state.url().to_hash())
        other = await opened(store)  # the link opened on another view (the map moved after the tool ran)
        other.centre_view(link.lon + 0.01, link.lat - 0.005, link.span)
        assert region.view_window(other.model, other.render_view())[1] != tuple(first.window)
        layer = await share.restore(other, link.tool)
        assert (layer.zone.name, tuple(layer.window)) == ("utm31", tuple(first.window)) and other.tool_window is None
        r0, r1, c0, c1 = first.window  # k-means by scikit-learn on the window read by zarr-python
        from sklearn.cluster import KMeans
        v = zone_vectors(store, "utm31")[r0:r1, c0:c1]
        ok = np.isfinite(v[..., 0])
        want = np.full(ok.shape, np.nan, np.float32)
        want[ok] = KMeans(n_clusters=3, random_state=7, n_init=3).fit(v[ok]).predict(v[ok])
        np.testing.assert_array_equal(layer.values, want)
        assert "capped" not in other.status and "utm31 rows" in other.status
    run_async(run())


def test_a_link_to_an_overview_level_layer_re_runs_on_that_level(store):
    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm31"), 20_000)  # zoomed out: an overview level's code
        first = await state.tools.cluster.cluster(3, 7)
        assert first.zone.level >= 1
        again, back, layer = await reopened(state, store)
        assert f"lvl:{first.zone.level}" in back.tool
        other = await opened(store)  # and on a view that moved after the tool ran
        other.centre_view(back.lon + 0.05, back.lat - 0.02, back.span * 2)
        moved = await share.restore(other, back.tool)
        for got in (layer, moved):
            same_layer(got, first)
            assert (got.zone.level, got.zone.pixel) == (first.zone.level, first.zone.pixel)
    run_async(run())


HOSTILE_TOOLS = [
    (HOSTILE, f"unknown tool '{HOSTILE}'"),
    ("cluster,k:999", "Tool layer in the URL ignored"),
    ("cluster,k:abc", "cluster: bad setting 'k:abc'"),
    ("cluster,seed:-1", "Tool layer in the URL ignored"),
    ("cluster,seed:99999999999", "bad setting 'seed:99999999999'"),
    (f"class,method:{HOSTILE}", "Tool layer in the URL ignored"),
    ("change,threshold:nan", "bad setting 'threshold:nan'"),
    ("cluster,k:5,win:1_2", "bad setting 'win:1_2'"),
    ("cluster,win:0_10_0_10,zone:" + HOSTILE, f"no zone '{HOSTILE}' in this store"),
    ("cluster,win:5_2_0_10,zone:utm31", "window 5_2_0_10 is not inside utm31's grid"),
    ("cluster,win:-1_10_0_10,zone:utm31", "is not inside utm31's grid"),
    ("cluster,win:0_10_0_999999,zone:utm31", "is not inside utm31's grid"),
    ("change,win:0_257_0_10,zone:utm31", "window 0_257_0_10 is larger than the region cap (256 px per side)"),
    ("scatter,win:0_257_0_10,zone:utm31", "window 0_257_0_10 is larger than the region cap (256 px per side)"),
    ("cluster,win:0_10_0_10,zone:utm31,lvl:99", "no overview level 99 in utm31"),
    ("change,win:0_10_0_10,zone:utm31,lvl:9", "no overview level 9 in utm31"),
    ("cluster,win:0_10_0_10,zone:utm31,lvl:x", "bad setting 'lvl:x'"),
    (f"cluster,{HOSTILE}:1", f"bad setting '{HOSTILE}:1'"),
    ("scatter,sel:0-99999999", "out of range"),
    ("scatter,sel:5-2", "out of range"),
    ("cluster," + "k:5," * 600, "longer than 2000"),
]


def test_hostile_tool_values_are_ignored_in_one_escaped_line(store, monkeypatch):
    monkeypatch.setattr("app.budgets.MAX_REGION", 128)  # the demo's zones are smaller than the real caps
    monkeypatch.setattr("app.budgets.MAX_CODE_SIDE", 256)

    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm31"), 2500)
        for text, why in HOSTILE_TOOLS:
            url = UrlState.from_url("", UrlState(year=2024, tool=text).to_hash())
            assert url.tool == text  # the hash carries it verbatim (quoted)
            assert await share.restore(state, url.tool) is None
            assert why in html.unescape(state.status) and "\n" not in state.status
            assert HOSTILE not in state.status and (HOSTILE not in text or "&lt;img" in state.status)  # escaped
            assert "Traceback" not in state.status and state.tools.shown in ("none", "scatter")
            assert state.tools.layer("scatter") is None
    run_async(run())


def test_similarity_source_and_mode_come_back_from_the_url(store):
    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm30"), 3000)
        v, rc = await pin_three(state, store)
        await state.select(*centre_of_data(store, "utm31"))  # a selection elsewhere: the link is on the pins
        state.tools.similarity.param.update(sim_from="pins", sim_mode="max", threshold=0.6, on=True)
        await state.settle()
        h = state.url().to_hash()
        assert "sim=0.60&sim_from=pins&sim_mode=max" in h
        back = UrlState.from_url("", h)
        again = await opened(store)  # as app/main.py starts: view, pins, selection, then the similarity
        again.centre_view(back.lon, back.lat, back.span)
        again.pins = [await again.model.pixel_at(*p) for p in back.pins]
        await again.select(*back.sel)
        tool = again.tools.similarity
        await tool.restore(back)
        await again.settle()
        assert (tool.on, tool.sim_from, tool.sim_mode, tool.threshold) == (True, "pins", "max", 0.6)
        zone, (r0, r1, c0, c1), sim = tool.result.zone, tool.result.window, tool.result.values
        first = state.tools.similarity.result
        assert (zone.name, (r0, r1, c0, c1)) == (first.zone.name, tuple(first.window))
        sub = v[r0:r1, c0:c1].astype(np.float64)  # the max of the pins' cosines, from zarr-python + numpy
        want = np.stack([cosines(sub, v[r, c].astype(np.float64)) for r, c in rc]).max(0)
        np.testing.assert_allclose(sim, want, rtol=0, atol=1e-5, equal_nan=True)

        for key, text, why in (("sim_from", HOSTILE, "sim_from '<img"), ("sim_mode", "median", "sim_mode 'median'"),
                               ("sim", "5", "threshold 5.0"), ("sim", "nan", "threshold nan")):
            other = await opened(store)
            other.pins = list(again.pins)
            url = UrlState.from_url("", "#year=2024&sim=0.50" + f"&{key}=" + quote(text))
            tool = other.tools.similarity
            await tool.restore(url)
            await other.settle()
            assert "Similarity settings in the URL ignored" in other.status and why in html.unescape(other.status)
            assert "\n" not in other.status and HOSTILE not in other.status and not tool.on
            assert (tool.sim_from, tool.sim_mode, tool.threshold) == ("selection", "mean", 0.8)
    run_async(run())


def test_an_old_form_similarity_link_opens_to_the_same_similarity_layer(store):
    """A link of the form written before similarity became a tool of the registry (#...&sim=0.60&sim_from=pins
    &sim_mode=max), typed here by hand: opened as app/main.py opens one (view, pins, selection, then the overlays'
    restore), it turns similarity on with those settings over the link's view, the max of the pins' cosines by
    zarr-python + numpy, and writes itself back in the same form. A threshold that is not a number is one of the
    link's problems (the page shows them under "Ignored in the link:"), quoted at most 60 characters."""
    async def run():
        v = zone_vectors(store, "utm30")
        rc = [tuple(map(int, x)) for x in np.argwhere(np.isfinite(v[..., 0]))[[10, 500, 900]]]
        lon, lat = centre_of_data(store, "utm30")
        pins = ";".join("{:.6f},{:.6f}".format(*pixel_lonlat(store, "utm30", r, c)) for r, c in rc)
        sel = "{:.6f},{:.6f}".format(*centre_of_data(store, "utm31"))
        link = (f"#year=2024&lon={lon:.7f}&lat={lat:.7f}&span=3000.000&sel={sel}&pins={pins}"
                "&sim=0.60&sim_from=pins&sim_mode=max")

        async def open_link(text):
            url = UrlState.from_url("", text)
            state = await opened(store)
            state.centre_view(url.lon, url.lat, url.span)
            state.pins = [await state.model.pixel_at(*p) for p in url.pins]
            await state.select(*url.sel)
            for overlay in state.tools.overlays:
                await overlay.restore(url)
            await state.settle()
            return state, url

        state, url = await open_link(link)
        tool = state.tools.similarity
        assert (tool.on, tool.sim_from, tool.sim_mode, tool.threshold) == (True, "pins", "max", 0.6)
        layer = state.tools.layer("similarity")
        r0, r1, c0, c1 = layer.window
        assert layer.zone.name == "utm30" and layer.zone.level == 0 and not layer.parts and url.problems == []
        sub = v[r0:r1, c0:c1].astype(np.float64)
        want = np.stack([cosines(sub, v[r, c].astype(np.float64)) for r, c in rc]).max(0)
        np.testing.assert_allclose(layer.values, want, rtol=0, atol=1e-5, equal_nan=True)
        assert np.isfinite(want).sum() > 5000
        assert "&sim=0.60&sim_from=pins&sim_mode=max" in state.url().to_hash()

        for text, shown in (("abc", "abc"), ("x" * 500, "x" * 60 + "...")):
            other, url = await open_link(link.replace("sim=0.60", "sim=" + text))
            assert url.problems == [f"sim {shown!r} is not a number"] and not other.tools.similarity.on
            assert other.tools.layer("similarity") is None
    run_async(run())
