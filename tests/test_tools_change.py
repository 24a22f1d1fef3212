"""Change between two years over the view (two year stores) against plain numpy on zarr-python reads."""
from __future__ import annotations

import numpy as np
import pytest

from builder import demo
from conftest import PLACES, PX, run_cli, run_async
from tools_util import centre_of_data, opened, pixel_lonlat, zone_vectors


@pytest.fixture(scope="module")
def store_2023(tmp_path_factory, world):
    root = tmp_path_factory.mktemp("tiles2023")
    for lon, lat in PLACES:
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
        # the two stores' zone grids may differ: align them by ground position (pixel centres' lon/lat)
        rr, cc = np.nonzero(np.isfinite(layer.values))
        assert len(rr) > 1000
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
