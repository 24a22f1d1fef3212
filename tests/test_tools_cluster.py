"""k-means on CPython: inertia against scikit-learn KMeans fitted on the same pixels (zarr-python reads)."""
from __future__ import annotations

import numpy as np

from conftest import run_async
from tools_util import centre_of_data, opened, zone_vectors


def test_kmeans_inertia_within_one_percent_and_cluster_to_class(store):
    from sklearn.cluster import KMeans

    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm31"), 2500)
        layer = await state.tools.cluster.cluster(k=4, seed=7)
        assert layer is not None and state.tools.shown == "cluster"
        r0, r1, c0, c1 = layer.window
        sub = zone_vectors(store, "utm31")[r0:r1, c0:c1]
        valid = np.isfinite(sub[..., 0])
        X = sub[valid]
        km = KMeans(n_clusters=4, random_state=7, n_init=3).fit(X)
        assert abs(state.tools.cluster.inertia - km.inertia_) <= 0.01 * km.inertia_, (state.tools.cluster.inertia,
                                                                                       km.inertia_)
        got = layer.values[valid].astype(int)
        assert set(np.unique(got)) <= set(range(4)) and np.isnan(layer.values[~valid]).all()
        # cluster 2 -> a label class of pixels that all lie in cluster 2
        name = await state.tools.cluster.to_class(2, count=12)
        pts = [p for p in state.tools.labels.points if p.cls == name]
        assert name == "cluster 2" and len(pts) == 12
        assert all(layer.value_at(p.lon, p.lat) == 2 for p in pts)
        for p in pts:
            hit = state.model.locate(p.lon, p.lat)
            np.testing.assert_array_equal(p.vector, zone_vectors(store, "utm31")[hit[1], hit[2]])
    run_async(run())
