"""Analysis at any zoom (tessera-ovr:): a zoomed-out view runs on an overview level's compact code, checked
against zarr-python reads of utmNN/overviews/k/... + numpy (+ scikit-learn, pyproj); a zoomed-in view keeps
the full 10 m vectors."""
from __future__ import annotations

import io

import numpy as np
import tifffile
from pyproj import Transformer

from app import layers
from app.tools import region
from conftest import run_async
from tools_util import centre_of_data, level_vectors, opened, zone_vectors

SPAN = 20_000  # metres across the 760 px map: 26 m per screen pixel -> level 2 (40 m)


def cos(sub, t):
    sub, t = sub.astype(np.float64), t.astype(np.float64)
    return sub @ t / (np.linalg.norm(sub, axis=-1) * np.linalg.norm(t))


def test_zoomed_out_similarity_and_kmeans_run_on_the_overview_code(store, monkeypatch):
    # the view's full level-2 vectors would fit the read budget on the small test data: a real screen's do not
    monkeypatch.setattr("app.budgets.REGION_BYTES", 1000)
    from sklearn.cluster import KMeans

    async def run():
        state = await opened(store)
        lon, lat = centre_of_data(store, "utm30")
        await state.select(lon, lat)
        state.centre_view(lon, lat, SPAN)
        state.tools.similarity.param.update(sim_from="selection", on=True)
        await state.settle()
        got = state.tools.similarity.result
        zone, (r0, r1, c0, c1), sim = got.zone, got.window, got.values
        assert (zone.name, zone.level, zone.pixel) == ("utm30", 2, 40.0)
        assert "overview level 2 (40 m pixels), the 8-d compact code" in state.status
        vec, t, epsg = level_vectors(store, "utm30", 2)
        want = cos(vec[r0:r1, c0:c1], state.selected.vector)
        np.testing.assert_allclose(sim, want, rtol=0, atol=1e-5, equal_nan=True)
        assert np.isfinite(want).sum() > 300  # the whole view's data, at 40 m
        # the layer lies on level 2's grid: a level pixel's centre (pyproj) reads back that pixel's value
        to_ll = Transformer.from_crs(epsg, 4326, always_xy=True)
        rows, cols = np.nonzero(np.isfinite(want))
        for i in (0, len(rows) // 2, len(rows) - 1):
            r, c = int(rows[i]) + r0, int(cols[i]) + c0
            plon, plat = to_ll.transform(t[2] + (c + 0.5) * t[0], t[5] + (r + 0.5) * t[4])
            assert abs(state.tools.similarity.result.value_at(plon, plat) - want[r - r0, c - c0]) < 1e-5
        # the GeoTIFF export: level 2's pixel size and corner, the same values
        tif = tifffile.TiffFile(io.BytesIO((await layers.layer(state, "similarity")).geotiff()))
        tags = {t.code: t.value for t in tif.pages[0].tags.values()}
        assert tuple(tags[33550][:2]) == (40.0, 40.0)
        assert tuple(tags[33922][3:5]) == (t[2] + c0 * 40.0, t[5] - r0 * 40.0)
        np.testing.assert_allclose(tif.pages[0].asarray(), want, rtol=0, atol=1e-5, equal_nan=True)
        # the view crosses the Greenwich meridian: similarity runs in utm31 too, on its own level-2 grid
        (other,) = state.tools.similarity.result.parts
        vec31, t31, epsg31 = level_vectors(store, "utm31", 2)
        (a0, a1, b0, b1) = other.window
        want31 = cos(vec31[a0:a1, b0:b1], state.selected.vector)
        assert (other.zone.name, other.zone.level) == ("utm31", 2) and np.isfinite(want31).sum() > 300
        np.testing.assert_allclose(other.values, want31, rtol=0, atol=1e-5, equal_nan=True)
        to_ll31 = Transformer.from_crs(epsg31, 4326, always_xy=True)
        rows, cols = np.nonzero(np.isfinite(want31))
        for i in (0, len(rows) // 2, len(rows) - 1):
            r, c = int(rows[i]) + a0, int(cols[i]) + b0
            plon, plat = to_ll31.transform(t31[2] + (c + 0.5) * t31[0], t31[5] + (r + 0.5) * t31[4])
            assert plon > 0 and abs(state.tools.similarity.result.value_at(plon, plat) - want31[r - a0, c - b0]) < 1e-5
        # the utm31 part covers the view east of the meridian: its pixels at the view's east edge are in it
        x1 = state.render_view().x1
        elon, elat = np.degrees(x1 / 6378137.0), lat
        er, ec = Transformer.from_crs(4326, epsg31, always_xy=True).transform(elon, elat)
        er, ec = int((t31[5] - ec) // 40.0), int((er - t31[2]) // 40.0)
        assert a0 <= er < a1 and b0 <= ec <= b1
        # k-means on the same view, over both zones' pixels: the level's reconstructed vectors, as scikit-learn
        # clusters them
        layer = await state.tools.cluster.cluster(k=3, seed=5)
        assert layer.zone.level == 2 and layer.window == (r0, r1, c0, c1) and layer.parts[0].window == other.window
        X = np.concatenate([vec[r0:r1, c0:c1][np.isfinite(want)], vec31[a0:a1, b0:b1][np.isfinite(want31)]])
        km = KMeans(n_clusters=3, random_state=5, n_init=3).fit(X)
        assert abs(state.tools.cluster.inertia - km.inertia_) <= 0.01 * km.inertia_
        got = np.concatenate([layer.values[np.isfinite(want)], layer.parts[0].values[np.isfinite(want31)]])
        pairs = set(zip(got.astype(int).tolist(), km.labels_.tolist()))
        assert len(pairs) == 3  # the same partition, up to the cluster numbering
    run_async(run())


def test_zoomed_in_view_reads_full_vectors(store):
    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm30"), 2500)
        reg = (await region.read(state.model, state.render_view())).primary
        assert reg.zone.level == 0 and not reg.coded and not reg.capped
        r0, r1, c0, c1 = reg.window
        np.testing.assert_array_equal(reg.vectors, zone_vectors(store, "utm30")[r0:r1, c0:c1])
        assert "overview level 0 (10 m pixels), full 128-d vectors" in region.describe(reg)
    run_async(run())
