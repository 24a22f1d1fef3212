"""The explorer's state and views on CPython, against real stores (no browser, no Panel)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import zarr

from app import render, views
from conftest import run_async
from tools_util import level_vectors, read_array
from builder.reader.source import ZarrSource
from app.session import Explorer
from app.state import UrlState


def year_copy(store, dst, year: int):
    """The same data as another year's store (root and consolidated tessera:year rewritten)."""
    shutil.copytree(store, dst)
    doc = json.loads((dst / "zarr.json").read_text())
    doc["attributes"]["tessera:year"] = year
    for meta in doc["consolidated_metadata"]["metadata"].values():
        if "tessera:year" in meta.get("attributes", {}):
            meta["attributes"]["tessera:year"] = year
    (dst / "zarr.json").write_text(json.dumps(doc))
    return dst


def valid_pixel(store, zone: str, k: int):
    s = read_array(store / zone / "scales")
    r, c = np.argwhere(~np.isnan(s))[k]
    return int(r), int(c)


async def opened(catalog, year, **url):
    state = Explorer(catalog, UrlState(**url), source_factory=ZarrSource)
    await state.open_year(year)
    state.year = year
    await state.settle()
    return state


def test_year_switch_keeps_pins_and_selection_at_the_same_place(store, tmp_path):
    s23 = year_copy(store, tmp_path / "2023.zarr", 2023)
    catalog = [{"year": 2023, "url": str(s23), "label": "2023"}, {"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        state = await opened(catalog, 2024)
        state.fit_zones()
        zone = state.model.zones["utm30"]
        pts = [zone.centre_lonlat(*valid_pixel(store, "utm30", k)) for k in (3, 40)]
        await state.select(*pts[0])
        state.pin()
        await state.select(*pts[1])
        assert state.param.pin_selected.constant is False  # a valid selection can be pinned
        state.year = 2023
        await state.settle()
        assert state.model.year == 2023
        assert [(p.row, p.col) for p in state.pins] == [valid_pixel(store, "utm30", 3)]
        assert (state.selected.row, state.selected.col) == valid_pixel(store, "utm30", 40)
        assert state.base is not None and state.base[1].shape == (520, 760, 4)
        # a year whose store cannot be opened: reported, and the selector goes back
        catalog.append({"year": 2025, "url": str(tmp_path / "missing.zarr"), "label": "2025"})
        state.param["year"].objects = {c["label"]: c["year"] for c in catalog}
        state.year = 2025
        await state.settle()
        assert state.year == 2023 and state.model.year == 2023 and "Cannot open 2025" in state.status
        return state
    run_async(run())


def test_url_round_trip_restores_the_state(store):
    catalog = [{"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        state = await opened(catalog, 2024)
        zone = state.model.zones["utm31"]
        lon, lat = zone.centre_lonlat(*valid_pixel(store, "utm31", 7))
        state.centre_view(lon, lat, 3000)
        await state.select(lon, lat)
        state.pin()
        state.tools.similarity.threshold = 0.5
        state.tools.similarity.on = True
        await state.settle()
        url = state.url()
        back = UrlState.from_url("", url.to_hash())
        assert back.year == 2024 and back.parts["sim"] == "0.50" and back.span == pytest.approx(3000, abs=1)
        assert back.sel == pytest.approx((lon, lat), abs=1e-6) and len(back.pins) == 1
        # a new state from that URL shows the same view
        again = await opened(catalog, 2024)
        again.centre_view(back.lon, back.lat, back.span)
        np.testing.assert_allclose(again.view, state.view, rtol=0, atol=0.5)
    run_async(run())


def test_redraw_picks_the_level_for_the_view_and_draws_the_zone_previews(store):
    catalog = [{"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        state = await opened(catalog, 2024)
        state.centre_view(0.0, 20.0, 3.0e7)
        await state.settle()
        world = state.render_view()
        assert render.choose_level(state.model.levels, world).index == len(state.model.levels) - 1
        zone = state.model.zones["utm30"]
        r, c = valid_pixel(store, "utm30", 100)
        lon, lat = zone.centre_lonlat(r, c)
        state.centre_view(lon, lat, 2000)  # 2.6 m per screen pixel: the zone's own preview
        await state.settle()
        assert state.render_view().metres_per_pixel() < render.ZONE_ZOOM_M
        rgb = zarr.open_group(store / "utm30", mode="r")["rgb"][r, c]
        centre = state.base[1][260, 380]
        assert tuple(centre) == tuple(rgb)  # the pixel under the view's centre is the zone's own colour
    run_async(run())


@pytest.mark.parametrize("where", ["top-left", "bottom-right"])
def test_similarity_window_is_clipped_at_zone_edges(store, where, monkeypatch):
    # the compact code's path: the view's full level vectors would fit the read budget on the small test data
    monkeypatch.setattr("app.budgets.REGION_BYTES", 1000)
    catalog = [{"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        state = await opened(catalog, 2024)
        zone = state.model.zones["utm34"]
        s = zarr.open_group(store / "utm34", mode="r")["scales"][:]
        valid = np.argwhere(~np.isnan(s))
        r, c = map(int, valid[0] if where == "top-left" else valid[-1])
        lon, lat = zone.centre_lonlat(r, c)
        state.centre_view(lon, lat, 50_000)
        await state.select(lon, lat)
        tool = state.tools.similarity
        tool.on = True
        await state.settle()
        z, (r0, r1, c0, c1), sim = tool.result.zone, tool.result.window, tool.result.values
        assert z.level == 3  # 66 m per map pixel: overview level 3's grid (80 m), clipped at its edges
        vec, _, _ = level_vectors(store, "utm34", 3)
        assert 0 <= r0 < r1 <= vec.shape[0] and 0 <= c0 < c1 <= vec.shape[1] and sim.shape == (r1 - r0, c1 - c0)
        v = zarr.open_group(store / "utm34", mode="r")
        t = v["embeddings"][r, c].astype(np.float32) * v["scales"][r, c]
        emb = vec[r0:r1, c0:c1]
        want = emb @ t / (np.linalg.norm(emb, axis=-1) * np.linalg.norm(t))
        np.testing.assert_allclose(sim, want, rtol=0, atol=1e-5, equal_nan=True)
        assert np.isfinite(want).any()
        tool.threshold = -1.0
        img = views.overlay_image(state.tools.overlays, state.render_view())
        assert img is not None and (img[..., 3] > 0).any()
    run_async(run())


def test_views_escape_text_and_describe_pixels(store):
    catalog = [{"year": 2024, "url": str(store), "label": "2024"}]
    hostile = "<img src=x onerror=alert(1)>"
    assert views.html("<b>{}</b> {:.1f}", hostile, 2.25) == "<b>&lt;img src=x onerror=alert(1)&gt;</b> 2.2"

    async def run():
        state = await opened(catalog, 2024)
        zone = state.model.zones["utm30"]
        r, c = valid_pixel(store, "utm30", 5)
        px = await state.select(*zone.centre_lonlat(r, c))
        info = views.info_html(state.model, px, None)
        assert f"row {r}, col {c}, year 2024" in info and "EPSG:32630" in info
        spec = views.spectrum_data(px, [])
        np.testing.assert_array_equal(np.array(spec["ys"][0]), px.vector.astype(np.float64))
        assert "outside the zones" in views.info_html(state.model, None, (100.0, 10.0))
    run_async(run())


def test_a_selected_pixel_outside_the_view_is_said_so_and_go_to_selected_centres_the_map_on_it(store):
    """The pixel pane kept describing a pixel from another continent as if it were on the map (issue 38)."""
    from pyproj import Transformer
    catalog = [{"year": 2024, "url": str(store), "label": "2024"}]
    to_merc = Transformer.from_crs(4326, 3857, always_xy=True)

    async def run():
        state = await opened(catalog, 2024)
        r, c = valid_pixel(store, "utm30", 5)
        px = await state.select(*state.model.zones["utm30"].centre_lonlat(r, c))
        state.centre_view(px.lon, px.lat, 6000)
        assert f"row {r}, col {c}" in views.info_html(state.model, px, None, state.view)
        state.centre_view(px.lon + 20, px.lat, 6000)
        away = views.info_html(state.model, px, None, state.view)
        assert "The selected pixel is outside the view" in away and f"row {r}" not in away
        state.go_to_selected()
        x, y = to_merc.transform(px.lon, px.lat)
        x0, x1, y0, y1 = state.view
        assert x0 < x < x1 and y0 < y < y1 and abs((x0 + x1) / 2 - x) < 1 and abs((y0 + y1) / 2 - y) < 1
        assert f"row {r}, col {c}" in views.info_html(state.model, px, None, state.view)
    run_async(run())


def test_a_zoomed_in_redraw_projects_the_views_pixels_only_into_the_zones_it_shows(store, monkeypatch):
    """Zoomed in to the zones' previews, each zone the view misses costs the projection of the view's edges alone
    (2 (W + H) points), not of its W x H pixels: with a global store's many zones, every redraw paid for each."""
    from builder.core.zone import Zone
    catalog = [{"year": 2024, "url": str(store), "label": "2024"}]
    projected = []
    to_rowcol = Zone.to_rowcol

    def counted(self, lon, lat):
        projected.append((self.name, np.size(lon)))
        return to_rowcol(self, lon, lat)

    async def run():
        state = await opened(catalog, 2024)
        r, c = valid_pixel(store, "utm30", 100)
        lon, lat = state.model.zones["utm30"].centre_lonlat(r, c)
        state.centre_view(lon, lat, 2000)  # 2.6 m per screen pixel, inside utm30 (the centre: inside pixel r, c)
        await state.settle()
        v = state.render_view()
        assert v.metres_per_pixel() <= render.ZONE_ZOOM_M
        projected.clear()
        monkeypatch.setattr(Zone, "to_rowcol", counted)
        await state.redraw()
        rgb = zarr.open_group(store / "utm30", mode="r")["rgb"][r, c]
        assert tuple(state.base[1][v.height // 2, v.width // 2]) == tuple(rgb)  # the centre pixel: its own colour
        return v.width, v.height
    w, h = run_async(run())
    most = {}
    for name, n in projected:
        most[name] = max(most.get(name, 0), n)
    assert 0 < most.pop("utm30") <= w * h  # at most the screen: the part its window covers
    assert set(most) == {"utm31", "utm34"} and max(most.values()) <= 2 * (w + h), most


class GatedSource(ZarrSource):
    """zarr-python reads that, while `gate` is closed, wait for it once started; the paths of those started."""

    def __init__(self, url: str, gate, started: list):
        super().__init__(url)
        self.gate, self.started = gate, started

    async def read(self, path, box, hint="pixel"):
        self.started.append(path)
        await self.gate.wait()
        return await super().read(path, box, hint)


def test_a_zoomed_in_redraw_reads_the_level_chunks_and_the_zones_previews_at_once(store):
    """A pan zoomed in needs global_rgb chunks and the zones' previews it has not read yet: both are asked for
    together (one round trip on a slow link), not the previews once the chunks have come."""
    import asyncio
    catalog = [{"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        gate, started = asyncio.Event(), []
        gate.set()
        state = Explorer(catalog, UrlState(), source_factory=lambda u: GatedSource(u, gate, started))
        await state.open_year(2024)
        state.year = 2024
        await state.settle()
        r, c = valid_pixel(store, "utm30", 100)
        lon, lat = state.model.zones["utm30"].centre_lonlat(r, c)
        gate.clear()
        started.clear()
        state.centre_view(lon, lat, 7600)  # 10 m per screen pixel: nothing of it read yet
        for _ in range(2000):  # up to 10 s, until the draw asks for a zone's preview while no byte has come back
            await asyncio.sleep(0.005)
            if any(p.endswith("/rgb") and not p.startswith("global_rgb") for p in started):
                break
        asked = list(started)
        gate.set()
        await state.settle()
        return asked, state.base[1]
    asked, image = run_async(run())
    assert any(p.startswith("global_rgb/") for p in asked), asked
    assert any(p == "utm30/rgb" for p in asked), asked  # asked while no level chunk had come
    assert image[..., 3].any()


class GatedOpen(ZarrSource):
    """zarr-python, whose root document waits for `gate` (a store slow to open)."""

    def __init__(self, url: str, gate):
        super().__init__(url)
        self.gate = gate

    async def meta(self):
        await self.gate.wait()
        return await super().meta()


def test_a_pixel_read_ahead_while_another_year_opens_is_not_offered_for_that_year(store, tmp_path):
    """A pixel read ahead (a resting mouse) is the year's shown, for the page to show at a tap there
    (Explorer.ahead, app/web/press.js). One read ahead while another year's store opens is of the year being left:
    once the new year shows, no pixel is offered until one is read ahead there. Before, the left year's pixel stayed
    offered, and a tap there showed that year's vector."""
    import asyncio
    s23 = year_copy(store, tmp_path / "2023.zarr", 2023)
    catalog = [{"year": 2023, "url": str(s23), "label": "2023"}, {"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        gate = asyncio.Event()
        gate.set()
        state = Explorer(catalog, UrlState(), source_factory=lambda u: GatedOpen(u, gate))
        await state.open_year(2024)
        state.year = 2024
        await state.settle()
        lon, lat = state.model.zones["utm30"].centre_lonlat(*valid_pixel(store, "utm30", 50))
        state.centre_view(lon, lat, 7600)  # zoomed in as far as a rest reads its pixel ahead
        await state.settle()
        gate.clear()
        state.year = 2023  # its store opens slowly
        await asyncio.sleep(0.05)
        state.hover(lon, lat)
        for _ in range(2000):  # up to 10 s, until the rest's pixel is read, 2023 still opening
            await asyncio.sleep(0.005)
            if state.ahead is not None:
                break
        read_ahead = state.ahead
        gate.set()
        await state.settle()
        return read_ahead, state.model.year, state.ahead
    read_ahead, year, ahead = run_async(run())
    assert read_ahead is not None and year == 2023
    assert ahead is None


def test_the_layers_offered_for_export_are_those_computed_the_newest_chosen(store):
    """"Layer to export" offered "similarity" (and every tool's layer) before any was computed: a click on GeoTIFF
    then failed. Now it offers the embedding preview, and each layer once it exists, chosen as it comes."""
    catalog = [{"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        state = await opened(catalog, 2024)
        assert state.param["export_layer"].objects == ["base"] and state.export_layer == "base"
        zone = state.model.zones["utm31"]
        lon, lat = zone.centre_lonlat(*valid_pixel(store, "utm31", 7))
        state.centre_view(lon, lat, 3000)
        await state.select(lon, lat)
        state.tools.similarity.on = True
        await state.settle()
        assert state.param["export_layer"].objects == ["similarity", "base"] and state.export_layer == "similarity"
        state.export_layer = "base"  # the user's choice stands while its layer does
        state.pin()
        await state.settle()
        assert state.export_layer == "base"
        state.tools.similarity.result = None  # as a year switch leaves it
        assert state.param["export_layer"].objects == ["base"] and state.export_layer == "base"
    run_async(run())
