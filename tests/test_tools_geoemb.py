"""The analysis tools on an official-layout geoemb: store (CPython, zarr-python Source): labels, classification,
k-means, change between the years of its time axis, the PCA scatter and a class-map GeoTIFF, each against scikit-learn /
numpy on direct zarr-python reads of the store written by tests/geoemb_writer.py (not the builder)."""
from __future__ import annotations

import io

import numpy as np
import zarr

from app import layers
from app.reader import ZarrSource
from app.session import Explorer
from app.state import UrlState
from conftest import run_async


def vectors(path, zone: str, t: int) -> np.ndarray:
    """Dequantised (H, W, B) at time index t, NaN where the scale is not finite (water or no data)."""
    g = zarr.open_group(str(path / zone), mode="r")
    q, s = g["embeddings"][t].astype(np.float32), g["scales"][t]
    with np.errstate(invalid="ignore"):
        v = np.moveaxis(q, 0, -1) * s[..., None]
    v[~np.isfinite(s)] = np.nan
    return v


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
        state = Explorer([{"year": 0, "url": url}], UrlState(store=url), source_factory=ZarrSource)
        await state.open_year(0)
        state.year = 2024
        await state.settle()
        zone = state.model.zones["utm30"]
        state.centre_view(*zone.centre_lonlat(r_mid, c_mid), 2500)
        await state.settle()
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
        assert sp.region.window == layer.window and len(sp.rows) == valid.sum()
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
