"""The region tools on a geoemb: store with nested-depth arrays, over HTTP with Range (CPython, zarr-python Source):
similarity and classification read `embeddings_d16` only and say "depth 16 of 128"; the exact result reads
`embeddings`; a store without depth arrays reads `embeddings` as before.

The stores are written by tests/distributions.py with zarr-python (not the builder); every expected value is numpy /
scikit-learn on direct zarr-python reads of the files; which arrays a result read is counted on the wire by the
logging proxy in front of `python -m builder serve`.
"""
from __future__ import annotations

import numpy as np
import pytest
import zarr

from builder.reader.source import ZarrSource
from app.session import Explorer
from app.state import UrlState
from browser_util import chunk_bytes, counting_proxy, static_server
from conftest import run_async
from distributions import add_depth_array, write_geoemb_v2

ROW, COL = 256, 200  # the selected pixel of utm30 (valid in both years), the view's centre


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("depth")
    write_geoemb_v2(root / "v2.zarr")
    write_geoemb_v2(root / "v2-whole.zarr", depths=())
    write_geoemb_v2(root / "v2-d016.zarr", depth_names={16: "embeddings_d016"})
    for name, bands in (("embeddings_d0", 0), ("embeddings_d128", 128), ("embeddings_d200", 200)):
        add_depth_array(root / "v2-d016.zarr", name, bands)  # no nested depth: none, all or more than all bands
    (root / "index.html").write_text("stores for tests/test_tools_depth.py")
    with static_server(root) as base, counting_proxy(base) as (url, log):
        yield root, url, log


def vectors(path, array: str, t: int = 1) -> np.ndarray:
    """Dequantised (H, W, D) of `array` at time index t (1: 2024) read by zarr-python, NaN where the scale is not
    finite."""
    g = zarr.open_group(str(path / "utm30"), mode="r")
    q, s = g[array][t].astype(np.float32), g["scales"][t]
    with np.errstate(invalid="ignore"):
        v = np.moveaxis(q, 0, -1) * s[..., None]
    v[~np.isfinite(s)] = np.nan
    return v


def cosines(v: np.ndarray, target: np.ndarray) -> np.ndarray:
    v, target = v.astype(np.float64), target.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return v @ target / (np.linalg.norm(v, axis=-1) * np.linalg.norm(target))


async def opened(url: str) -> Explorer:
    """The explorer on the store at `url`, year 2024, the view 2 km wide on utm30 (ROW, COL), that pixel selected."""
    state = Explorer([{"year": 0, "url": url}], UrlState(store=url), source_factory=ZarrSource)
    await state.open_year(0)
    state.year = 2024
    await state.settle()
    lonlat = state.model.zones["utm30"].centre_lonlat(ROW, COL)
    state.centre_view(*lonlat, 2000)
    await state.settle()
    assert (await state.select(*lonlat)).valid
    return state


def test_similarity_reads_depth_16_first_and_the_full_vectors_when_exact(served):
    root, base, log = served
    d16, full = vectors(root / "v2.zarr", "embeddings_d16"), vectors(root / "v2.zarr", "embeddings")

    async def run():
        state = await opened(base + "v2.zarr")
        start = len(log)
        layer = await state.tools.similarity.compute()
        read = chunk_bytes(log, start)
        assert set(read) == {"embeddings_d16", "scales"}, read
        r0, r1, c0, c1 = layer.window
        want = cosines(d16, d16[ROW, COL])[r0:r1, c0:c1]
        assert np.isfinite(want).sum() > 20_000
        np.testing.assert_allclose(layer.values, want, rtol=0, atol=1e-5, equal_nan=True)
        assert layer.read == "depth 16 of 128" and "; depth 16 of 128 (the exact result" in state.status
        assert "Tools read depth 16 of 128 (10 m), an approximate answer" in state.cost

        state.exact = True
        await state.settle()
        start = len(log)
        exact = await state.tools.similarity.compute()
        read_full = chunk_bytes(log, start)
        assert set(read_full) == {"embeddings", "scales"}, read_full
        assert exact.window == layer.window
        np.testing.assert_allclose(exact.values, cosines(full, full[ROW, COL])[r0:r1, c0:c1], rtol=0, atol=1e-5,
                                   equal_nan=True)
        assert exact.read == "full 128-d vectors" and "; full 128-d vectors" in state.status
        assert "depth" not in state.status
        print(f"\nsimilarity over {r1 - r0} x {c1 - c0} px: depth 16 reads {read['embeddings_d16']:,} B of vectors "
              f"+ {read['scales']:,} B of scales; full vectors {read_full['embeddings']:,} B + "
              f"{read_full['scales']:,} B")
        assert read["embeddings_d16"] * 4 < read_full["embeddings"]
    run_async(run())


def test_a_depth_array_is_read_by_the_name_the_store_gives_it_and_arrays_of_no_depth_are_ignored(served):
    """`embeddings_d016` is depth 16 and is what the tools read; arrays named as depths of 0, all 128 or 200 bands
    are no nested depth of 128-band vectors (builder/core/layout.py's rule, the Python reader's too)."""
    root, base, log = served
    d16 = vectors(root / "v2-d016.zarr", "embeddings_d016")

    async def run():
        state = await opened(base + "v2-d016.zarr")
        assert state.model.zones["utm30"].depths == ((4, "embeddings_d4"), (16, "embeddings_d016"))
        start = len(log)
        layer = await state.tools.similarity.compute()
        assert set(chunk_bytes(log, start)) == {"embeddings_d016", "scales"}
        r0, r1, c0, c1 = layer.window
        want = cosines(d16, d16[ROW, COL])[r0:r1, c0:c1]
        assert np.isfinite(want).sum() > 20_000
        np.testing.assert_allclose(layer.values, want, rtol=0, atol=1e-5, equal_nan=True)
        assert layer.read == "depth 16 of 128"
    run_async(run())


def test_classification_on_depth_16_equals_knn_on_the_depth_array(served):
    from sklearn.neighbors import KNeighborsClassifier
    root, base, log = served
    d16 = vectors(root / "v2.zarr", "embeddings_d16")

    async def run():
        state = await opened(base + "v2.zarr")
        zone = state.model.zones["utm30"]
        picks = {"north": [(ROW - 80 + 7 * i, COL - 60 + 11 * i) for i in range(6)],
                 "south": [(ROW + 60 + 5 * i, COL + 50 - 13 * i) for i in range(6)]}
        for name, pixels in picks.items():
            for r, c in pixels:
                assert await state.tools.labels.add(*zone.centre_lonlat(r, c), cls=name)
        start = len(log)
        layer = await state.tools.classify.classify("k-NN", seed=1)
        assert set(chunk_bytes(log, start)) == {"embeddings_d16", "scales"}
        names = state.tools.labels.names()
        X = np.stack([d16[r, c] for n in picks for r, c in picks[n]])
        y = np.array([names.index(n) for n in picks for _ in picks[n]])
        r0, r1, c0, c1 = layer.window
        sub = d16[r0:r1, c0:c1]
        valid = np.isfinite(sub[..., 0])
        want = KNeighborsClassifier(n_neighbors=5).fit(X, y).predict(sub[valid])
        assert valid.sum() > 20_000 and float((layer.values[valid].astype(int) == want).mean()) >= 0.999
        assert np.isnan(layer.values[~valid]).all()
        assert layer.read == "depth 16 of 128" and "depth 16 of 128" in state.status
    run_async(run())


def test_a_store_without_depth_arrays_reads_the_full_vectors(served):
    root, base, log = served
    full = vectors(root / "v2-whole.zarr", "embeddings")

    async def run():
        state = await opened(base + "v2-whole.zarr")
        start = len(log)
        layer = await state.tools.similarity.compute()
        assert set(chunk_bytes(log, start)) == {"embeddings", "scales"}
        r0, r1, c0, c1 = layer.window
        np.testing.assert_allclose(layer.values, cosines(full, full[ROW, COL])[r0:r1, c0:c1], rtol=0, atol=1e-5,
                                   equal_nan=True)
        assert layer.read == "full 128-d vectors" and "depth" not in state.status
        assert "Tools read full 128-d vectors (10 m), exact" in state.cost
    run_async(run())


def test_kmeans_on_depth_16_and_its_labels_keep_the_full_vectors(served):
    from sklearn.cluster import KMeans
    root, base, log = served
    d16, full = vectors(root / "v2.zarr", "embeddings_d16"), vectors(root / "v2.zarr", "embeddings")

    async def run():
        state = await opened(base + "v2.zarr")
        start = len(log)
        layer = await state.tools.cluster.cluster(k=3, seed=2)
        assert set(chunk_bytes(log, start)) == {"embeddings_d16", "scales"}
        r0, r1, c0, c1 = layer.window
        sub = d16[r0:r1, c0:c1]
        km = KMeans(n_clusters=3, random_state=2, n_init=3).fit(sub[np.isfinite(sub[..., 0])])
        assert abs(state.tools.cluster.inertia - km.inertia_) <= 0.01 * km.inertia_
        assert layer.read == "depth 16 of 128"
        # labels from a cluster hold their pixels' full 128 values (not the region's 16), so any later region fits them
        name = await state.tools.cluster.to_class(0, count=5)
        zone = state.model.zones["utm30"]
        points = [p for p in state.tools.labels.points if p.cls == name]
        assert len(points) == 5
        for p in points:
            r, c = (int(x) for x in zone.to_rowcol(p.lon, p.lat))
            assert layer.values[r - r0, c - c0] == 0
            np.testing.assert_array_equal(p.vector, full[r, c])
    run_async(run())


def test_labels_from_a_depth_16_cluster_keep_the_clustered_years_full_vectors_after_a_year_switch(served):
    """k-means at depth 16 in 2024, the year then switched to 2023: labels made from the (kept) cluster result hold
    their pixels' full 2024 vectors, as zarr-python reads them, and say 2024; none is lost or read from 2023."""
    root, base, log = served
    full_2024, full_2023 = vectors(root / "v2.zarr", "embeddings", 1), vectors(root / "v2.zarr", "embeddings", 0)

    async def run():
        state = await opened(base + "v2.zarr")
        layer = await state.tools.cluster.cluster(k=3, seed=2)
        assert layer.read == "depth 16 of 128"
        r0, r1, c0, c1 = layer.window
        state.year = 2023
        await state.settle()
        assert state.model.year == 2023 and state.tools.cluster.result is layer
        name = await state.tools.cluster.to_class(1, count=40)
        zone = layer.zone
        points = [p for p in state.tools.labels.points if p.cls == name]
        assert len(points) == 40, state.status
        differ = 0
        for p in points:
            r, c = (int(x) for x in zone.to_rowcol(p.lon, p.lat))
            assert layer.values[r - r0, c - c0] == 1 and p.year == 2024
            np.testing.assert_array_equal(p.vector, full_2024[r, c])
            differ += not np.array_equal(np.nan_to_num(full_2023[r, c]), full_2024[r, c])
        assert differ == len(points)  # the two years' vectors differ at these pixels: the test tells them apart
    run_async(run())


def test_change_between_two_years_of_the_store_reads_depth_16_first_and_the_full_vectors_when_exact(served):
    """Change between 2023 and 2024, both on the store's time axis: 1 - cosine of each pixel's two depth-16 vectors
    (the d16 array only on the wire), then of its full vectors when exact."""
    root, base, log = served
    path = root / "v2.zarr"
    pairs = {"embeddings_d16": (vectors(path, "embeddings_d16", 0), vectors(path, "embeddings_d16", 1)),
             "embeddings": (vectors(path, "embeddings", 0), vectors(path, "embeddings", 1))}

    def one_minus_cos(a, b):
        a, b = a.astype(np.float64), b.astype(np.float64)
        with np.errstate(invalid="ignore"):
            return 1 - (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))

    async def run():
        state = await opened(base + "v2.zarr")
        for exact, array, said in ((False, "embeddings_d16", "depth 16 of 128"), (True, "embeddings", "full 128-d")):
            state.exact = exact
            await state.settle()
            start = len(log)
            layer = await state.tools.change.compute(2023, 2024)
            assert set(chunk_bytes(log, start)) == {array, "scales"}, chunk_bytes(log, start)
            r0, r1, c0, c1 = layer.window
            want = one_minus_cos(*pairs[array])[r0:r1, c0:c1]
            assert np.isfinite(want).sum() > 20_000
            np.testing.assert_allclose(layer.values, want, rtol=0, atol=1e-5, equal_nan=True)
            assert said in state.status, state.status
    run_async(run())
