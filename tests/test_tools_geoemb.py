"""The analysis tools on an official-layout geoemb: store (CPython, zarr-python Source): labels, classification,
k-means, change between the years of its time axis, the PCA scatter and a class-map GeoTIFF, each against scikit-learn /
numpy on direct zarr-python reads of the store written by tests/geoemb_writer.py (not the builder)."""
from __future__ import annotations

import io

import numpy as np
import zarr

from app import layers
from builder.reader.source import ZarrSource
from app.session import Explorer
from app.state import UrlState
from app.tools import region, share
from conftest import run_async


def vectors(path, zone: str, t: int) -> np.ndarray:
    """Dequantised (H, W, B) at time index t, NaN where the scale is not finite (water or no data)."""
    g = zarr.open_group(str(path / zone), mode="r")
    q, s = g["embeddings"][t].astype(np.float32), g["scales"][t]
    with np.errstate(invalid="ignore"):
        v = np.moveaxis(q, 0, -1) * s[..., None]
    v[~np.isfinite(s)] = np.nan
    return v


async def opened_at(url: str, row: int, col: int, span_m: float) -> Explorer:
    """The explorer on the geoemb: store at `url`, year 2024, its view centred on utm30 (row, col), span_m wide."""
    state = Explorer([{"year": 0, "url": url}], UrlState(store=url), source_factory=ZarrSource)
    await state.open_year(0)
    state.year = 2024
    await state.settle()
    state.centre_view(*state.model.zones["utm30"].centre_lonlat(row, col), span_m)
    await state.settle()
    return state


def test_labels_classify_cluster_change_scatter_and_export_on_a_geoemb_store(geoemb_store):
    import tifffile
    from sklearn.cluster import KMeans
    from sklearn.neighbors import KNeighborsClassifier
    url = str(geoemb_store)
    g = zarr.open_group(url + "/utm30", mode="r")
    t = g.attrs["spatial:transform"]
    v1, v0 = vectors(geoemb_store, "utm30", 1), vectors(geoemb_store, "utm30", 0)  # 2024, 2023
    rows, cols = np.nonzero(np.isfinite(v1[..., 0]))
    r_mid, c_mid = int(rows.mean()), int(cols.mean())

    async def run():
        state = await opened_at(url, r_mid, c_mid, 2500)
        zone = state.model.zones["utm30"]
        # labels: two classes from two far-apart groups of valid pixels (first and last rows of data)
        rng = np.random.default_rng(5)
        picks = {"north": rng.choice(np.nonzero(rows < np.percentile(rows, 20))[0], 6, replace=False),
                 "south": rng.choice(np.nonzero(rows > np.percentile(rows, 80))[0], 6, replace=False)}
        for name, idx in picks.items():
            for i in idx:
                assert await state.tools.labels.add(*zone.centre_lonlat(int(rows[i]), int(cols[i])), cls=name)
        layer = await state.tools.classify.classify("k-NN", seed=1)
        r0, r1, c0, c1 = layer.window
        sub = v1[r0:r1, c0:c1]
        valid = np.isfinite(sub[..., 0])
        names = state.tools.labels.names()
        X = np.stack([v1[rows[i], cols[i]] for n in picks for i in picks[n]])
        y = np.array([names.index(n) for n in picks for _ in picks[n]])
        want = KNeighborsClassifier(n_neighbors=5).fit(X, y).predict(sub[valid])
        assert valid.sum() > 1000 and float((layer.values[valid].astype(int) == want).mean()) >= 0.99
        assert np.isnan(layer.values[~valid]).all()
        # k-means on the same region
        km_layer = await state.tools.cluster.cluster(k=3, seed=2)
        assert km_layer.window == layer.window
        km = KMeans(n_clusters=3, random_state=2, n_init=3).fit(sub[valid])
        assert abs(state.tools.cluster.inertia - km.inertia_) <= 0.01 * km.inertia_
        # change 2023 -> 2024 from the one store's time axis
        ch = await state.tools.change.compute(2023, 2024)
        a, b = v0[r0:r1, c0:c1], v1[r0:r1, c0:c1]
        with np.errstate(invalid="ignore"):
            cos = (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
        np.testing.assert_allclose(ch.values, 1 - cos, rtol=0, atol=1e-5, equal_nan=True)
        # scatter: PCA of every valid pixel of the region vs scikit-learn (a component's sign is arbitrary)
        from sklearn.decomposition import PCA
        sp = await state.tools.scatter.compute(max_points=100_000)
        assert sp.region.primary.window == layer.window and len(sp.rows) == valid.sum()
        X = sub[sp.rows, sp.cols].astype(np.float64)
        xy = PCA(n_components=2).fit_transform(X)
        xy *= np.sign((sp.xy * xy).sum(axis=0))
        np.testing.assert_allclose(sp.xy, xy, rtol=0, atol=1e-4 * np.abs(xy).max())
        # the class map as a GeoTIFF on the zone's grid
        tif = (await layers.layer(state, "class")).geotiff()
        with tifffile.TiffFile(io.BytesIO(tif)) as f:
            meta, data = f.geotiff_metadata, f.asarray()
        assert int(meta["ProjectedCSTypeGeoKey"]) == 32630
        assert meta["ModelTiepoint"][3:5] == [t[2] + c0 * 10, t[5] - r0 * 10]
        np.testing.assert_array_equal(data[valid], want.astype(np.uint8))
        assert (data[~valid] == 255).all()
    run_async(run())


def test_zoomed_out_change_on_a_geoemb_store_reads_its_capped_10m_window(geoemb_store, monkeypatch):
    """A geoemb: store carries no overviews: zoomed out, change runs on the same capped 10 m window as the other
    tools (region.plan), both years from its time axis, and the status says the view was capped."""
    monkeypatch.setattr("app.budgets.MAX_REGION", 128)  # the demo's data is smaller than the real cap
    url = str(geoemb_store)
    v1, v0 = vectors(geoemb_store, "utm30", 1), vectors(geoemb_store, "utm30", 0)  # 2024, 2023
    rows, cols = np.nonzero(np.isfinite(v1[..., 0]))

    async def run():
        state = await opened_at(url, int(rows.mean()), int(cols.mean()), 20_000)
        zone = state.model.zones["utm30"]
        state.tools.change.offer()  # as app/main.py does once the store is open
        layer = await state.tools.change.compute(2023, 2024)
        plan = region.plan(state.model, state.render_view())
        assert (layer.zone.level, layer.window, plan[1], plan[3]) == (0, plan[1], layer.window, "vectors")
        r0, r1, c0, c1 = layer.window
        assert (r1 - r0, c1 - c0) == (128, 128) and plan[2] != plan[1]
        a, b = v0[r0:r1, c0:c1].astype(np.float64), v1[r0:r1, c0:c1].astype(np.float64)
        with np.errstate(invalid="ignore"):
            want = 1 - (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
        assert np.isfinite(want).sum() > 1000
        np.testing.assert_allclose(layer.values, want, rtol=0, atol=1e-5, equal_nan=True)
        assert "capped at 128 px per side around its centre" in state.status
        # the link re-runs it on that window
        link = UrlState.from_url("", state.url().to_hash())
        assert ",lvl:" not in link.tool and f"win:{r0}_{r1}_{c0}_{c1},zone:utm30" in link.tool
        state.centre_view(link.lon + 0.01, link.lat, link.span)
        again = await share.restore(state, link.tool)
        assert again is not None, state.status
        np.testing.assert_array_equal(again.values, layer.values)
    run_async(run())
