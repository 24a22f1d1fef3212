"""Change between two years over the view (two year stores) against plain numpy on zarr-python reads: at 10 m,
and zoomed out at an overview level (both stores' level arrays, each store's code on its own basis)."""
from __future__ import annotations

import numpy as np
import pytest
import zarr

from app.state import UrlState
from app.tools import region, share
from builder import demo
from conftest import PLACES, PX, run_cli, run_async
from test_session import year_copy
from tools_util import centre_of_data, level_change, level_vectors, opened, pixel_lonlat, zone_vectors


@pytest.fixture(scope="module")
def store_2023(tmp_path_factory, world):
    root = tmp_path_factory.mktemp("tiles2023")
    for lon, lat in PLACES + [(-0.2, 50.85)]:  # one more tile, to the west: this year's zone grid is wider
        demo.write_tile(root, 2023, lon, lat, PX, world=world)
    out = tmp_path_factory.mktemp("stores2023")
    run_cli("build", str(root), "--year", "2023", "--out", str(out), "--scheduler", "threads", "-q")
    return out / "2023.zarr"


def test_change_between_two_year_stores(store, store_2023):
    catalog = [{"year": 2023, "url": str(store_2023), "label": "2023"}, {"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        state = await opened(store, 2024, catalog=catalog)
        state.centre_view(*centre_of_data(store, "utm30"), 3000)
        ch = state.tools.change
        ch.offer()
        assert ch.param.y0.objects == [2023, 2024]
        layer = await ch.compute(2023, 2024)
        assert layer is not None and state.tools.shown == "change"
        r0, r1, c0, c1 = layer.window
        a = zone_vectors(store_2023, "utm30").astype(np.float64)
        b = zone_vectors(store, "utm30").astype(np.float64)
        # the two stores' zone grids differ (the extra 2023 tile): align them by ground position (pixel centres'
        # lon/lat); the layer lies on the shown (2024) store's grid
        rr, cc = np.nonzero(np.isfinite(layer.values))
        assert len(rr) > 1000 and a.shape != b.shape
        ll = [pixel_lonlat(store, "utm30", r0 + r, c0 + c) for r, c in zip(rr[::97], cc[::97])]
        for (lon, lat), r, c in zip(ll, rr[::97], cc[::97]):
            hit = state.tools.change._stores[2023].locate(lon, lat)
            va, vb = a[hit[1], hit[2]], b[r0 + r, c0 + c]
            want = 1 - va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb))
            assert layer.value_at(lon, lat) == pytest.approx(want, abs=1e-5)
        h = ch.hist
        assert sum(h["count"]) == np.isfinite(layer.values).sum() and len(h["left"]) == 40
        cut = float(np.nanmedian(layer.values))
        ch.threshold = cut
        shown = ch.result.rgba[..., 3] > 0
        assert (shown == (np.nan_to_num(layer.values, nan=-1) >= cut)).all() and 0 < shown.sum()
    run_async(run())


SPAN = 20_000  # metres across the 760 px map: 26 m per screen pixel -> overview level 2 (40 m)


def test_zoomed_out_change_reads_both_year_stores_at_the_views_overview_level(store, store_2023, monkeypatch):
    # the view's full level-2 vectors would fit the read budget on the small test data: a real screen's do not
    monkeypatch.setattr("app.budgets.REGION_BYTES", 1000)
    catalog = [{"year": 2023, "url": str(store_2023), "label": "2023"}, {"year": 2024, "url": str(store), "label": "2024"}]
    bases = [zarr.open_group(s / "utm30/overviews", mode="r")["code_basis"][:] for s in (store_2023, store)]
    assert not np.allclose(*bases, atol=1e-3)  # each store fits its own PCA basis: raw codes are not comparable

    async def run():
        state = await opened(store, 2024, catalog=catalog)
        state.centre_view(*centre_of_data(store, "utm30"), SPAN)
        ch = state.tools.change
        ch.offer()
        layer = await ch.compute(2023, 2024)
        assert (layer.zone.name, layer.zone.level, layer.zone.pixel) == ("utm30", 2, 40.0)
        plan = region.plan(state.model, state.render_view())  # the window the other tools read on this view
        assert (plan[0].level, plan[1], plan[3]) == (2, layer.window, "code")
        shift = np.subtract(level_vectors(store, "utm30", 2)[1], level_vectors(store_2023, "utm30", 2)[1])
        assert shift[2] > 0  # the extra 2023 tile moved that store's level grid west: the years' grids differ
        want = level_change(store, store_2023, "utm30", 2, layer.window)
        assert np.isfinite(want).sum() > 300  # the whole view's data, at 40 m
        np.testing.assert_allclose(layer.values, want, rtol=0, atol=1e-5, equal_nan=True)
        assert "Change 2023 -> 2024 (1 - cosine): 2 zones: utm30 rows" in state.status
        assert "overview level 2 (40 m pixels), the 8-d compact code" in state.status
        # the view crosses the meridian: utm31's part, on its own level-2 grid, against zarr-python + numpy
        (east,) = layer.parts
        want31 = level_change(store, store_2023, "utm31", 2, east.window)
        assert east.zone.name == "utm31" and np.isfinite(want31).sum() > 300 and "+ utm31 rows" in state.status
        np.testing.assert_allclose(east.values, want31, rtol=0, atol=1e-5, equal_nan=True)
        lon, lat = east.zone.centre_lonlat(*(np.argwhere(np.isfinite(want31))[0] + [east.window[0], east.window[2]]))
        assert layer.value_at(lon, lat) == pytest.approx(want31[np.isfinite(want31)][0], abs=1e-5)
        # drawn on level 2's grid: a level pixel's centre reads back that pixel's value
        rows, cols = np.nonzero(np.isfinite(want))
        r0, c0 = layer.window[0], layer.window[2]
        for i in (0, len(rows) // 2, len(rows) - 1):
            lon, lat = layer.zone.centre_lonlat(r0 + int(rows[i]), c0 + int(cols[i]))
            assert layer.value_at(lon, lat) == pytest.approx(want[rows[i], cols[i]], abs=1e-5)
        assert sum(ch.hist["count"]) == np.isfinite(want).sum() + np.isfinite(want31).sum()  # both zones
        cut = float(np.nanmedian(want))
        ch.threshold = cut
        shown = ch.result.rgba[..., 3] > 0
        assert (shown == (np.nan_to_num(layer.values, nan=-1) >= cut)).all() and 0 < shown.sum()
        assert ((ch.result.parts[0].rgba[..., 3] > 0) == (np.nan_to_num(east.values, nan=-1) >= cut)).all()  # recoloured too
        assert ch.result.image(state.render_view())[..., 3].any()  # drawn into the view
        # the link re-runs it on level 2's window, also from a view that moved
        link = UrlState.from_url("", state.url().to_hash())
        w = layer.window
        e = east.window
        assert link.tool == (f"change,y0:2023,y1:2024,threshold:{cut},win:{w[0]}_{w[1]}_{w[2]}_{w[3]},zone:utm30,lvl:2,"
                             f"also:utm31~2~{e[0]}_{e[1]}_{e[2]}_{e[3]}")
        other = await opened(store, 2024, catalog=catalog)
        other.centre_view(link.lon + 0.05, link.lat - 0.02, link.span / 4)
        other.tools.change.offer()
        again = await share.restore(other, link.tool)
        assert (again.zone.level, again.window, other.tools.change.threshold) == (2, layer.window, cut)
        np.testing.assert_array_equal(again.values, layer.values)
        np.testing.assert_array_equal(again.rgba, ch.result.rgba)
        assert again.parts[0].window == east.window
        np.testing.assert_array_equal(again.parts[0].values, east.values)
        assert "overview level 2 (40 m pixels)" in other.status
    run_async(run())


def test_zoomed_out_change_between_stores_of_one_basis_is_zero(store, tmp_path):
    """Two stores of the same data (and so the same basis): 1 - cosine of each level pixel with itself."""
    s23 = year_copy(store, tmp_path / "2023.zarr", 2023)
    catalog = [{"year": 2023, "url": str(s23), "label": "2023"}, {"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        state = await opened(store, 2024, catalog=catalog)
        state.centre_view(*centre_of_data(store, "utm31"), SPAN * 4)
        layer = await state.tools.change.compute(2023, 2024)
        assert layer.zone.level >= 3
        want = level_change(s23, store, "utm31", layer.zone.level, layer.window)
        assert np.isfinite(want).sum() > 10 and np.nanmax(np.abs(want)) < 1e-5
        np.testing.assert_allclose(layer.values, want, rtol=0, atol=1e-5, equal_nan=True)
    run_async(run())


def test_a_year_store_without_overviews_gives_the_capped_10m_window(store, plain_store, monkeypatch):
    """The 2023 store built with --no-overviews: zoomed out, change falls back to both years' 10 m vectors on the
    view's capped window (said in the status line); a link to a level window says in one line why it cannot run."""
    monkeypatch.setattr("app.budgets.MAX_REGION", 128)  # the demo's data is smaller than the real cap
    catalog = [{"year": 2023, "url": str(plain_store), "label": "2023"}, {"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        state = await opened(store, 2024, catalog=catalog)
        state.centre_view(*centre_of_data(store, "utm30"), SPAN)
        state.tools.change.offer()
        layer = await state.tools.change.compute(2023, 2024)
        zone, window, full = region.view_window(state.model, state.render_view())
        assert (layer.zone.level, layer.window) == (0, window) and window != full
        r0, r1, c0, c1 = window
        a, b = (zone_vectors(s, "utm30")[r0:r1, c0:c1].astype(np.float64) for s in (plain_store, store))
        with np.errstate(invalid="ignore"):
            want = 1 - (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
        assert np.isfinite(want).sum() > 1000
        np.testing.assert_allclose(layer.values, want, rtol=0, atol=1e-5, equal_nan=True)
        assert "capped at 128 px per side around its centre" in state.status
        assert await share.restore(state, "change,y0:2023,y1:2024,win:0_10_0_10,zone:utm30,lvl:2") is None
        assert "Change unavailable:</b> the 2023 or 2024 store has no overview level 2 of utm30" in state.status
    run_async(run())
