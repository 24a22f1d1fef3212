"""The exact result: on data as high-dimensional as real embeddings (the demo's) a view too large for the read budget
is first answered from the compact code, which the status line and the cost line say; asking for the exact result
reads every zone's full vectors at the view's level, and the tools then agree with scikit-learn and numpy run on
the same full vectors (zarr-python reads), at 10 m and at an overview level."""
from __future__ import annotations

import numpy as np
import pytest

from app import budgets
from conftest import run_async
from tools_util import centre_of_data, cosines, level_full, opened, pixel_lonlat, training_pixels, zone_vectors


async def labelled_view(store, world, span):
    state = await opened(store)
    state.centre_view(*centre_of_data(store, "utm30"), span)
    await state.settle()
    train = training_pixels(store, "utm30", world, 2024)
    for r, c, k in train:
        await state.tools.labels.add(*pixel_lonlat(store, "utm30", r, c), cls=f"class {k}")
    return state, train


@pytest.mark.parametrize("span,level", [(2500, 0), (20_000, 2)])
def test_the_exact_result_agrees_with_scikit_learn_on_the_full_vectors(store, world, monkeypatch, span, level):
    from sklearn.cluster import KMeans
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    monkeypatch.setattr(budgets, "REGION_BYTES", 1000)  # every view is too large for the budget: the code first

    async def run():
        state, train = await labelled_view(store, world, span)
        assert "compact code" in state.cost and "The exact result reads about" in state.cost
        quick = await state.tools.classify.classify("k-NN")
        assert quick.zone.level == level and "compact code" in state.status
        state.exact = True
        assert "exact" in state.cost and "full 128-d vectors" in state.cost
        v = zone_vectors(store, "utm30")
        X = np.stack([v[r, c] for r, c, _ in train])
        names = state.tools.labels.names()
        y = np.array([names.index(f"class {k}") for _, _, k in train])
        full = level_full(store, "utm30", level)[0]
        for method, est in (("k-NN", KNeighborsClassifier(5)), ("logistic regression",
                                                                 LogisticRegression(max_iter=1000, random_state=3)),
                            ("random forest", RandomForestClassifier(100, random_state=3))):
            layer = await state.tools.classify.classify(method, seed=3)
            assert layer.zone.level == level and f"full 128-d vectors" in state.status, state.status
            r0, r1, c0, c1 = layer.window
            sub = full[r0:r1, c0:c1]
            ok = np.isfinite(sub[..., 0])
            want = est.fit(X, y).predict(sub[ok])
            agree = float((layer.values[ok].astype(int) == want).mean())
            # deterministic models agree; a seeded forest's is another draw of the same model: within a few %
            assert agree >= (0.99 if method != "random forest" else 0.9), (method, agree)
        km = await state.tools.cluster.cluster(k=4, seed=5)
        parts = []  # every zone the view shows, as the tool clusters them together (a wide view crosses 0 deg)
        for part in km.all:
            r0, r1, c0, c1 = part.window
            sub = level_full(store, part.zone.name, level)[0][r0:r1, c0:c1]
            parts.append(sub[np.isfinite(sub[..., 0])])
        ref = KMeans(4, random_state=5, n_init=3).fit(np.concatenate(parts))
        assert abs(state.tools.cluster.inertia - ref.inertia_) <= 0.01 * ref.inertia_
        lon, lat = centre_of_data(store, "utm30")
        await state.select(lon, lat)
        state.tools.similarity.param.update(sim_from="selection", on=True)
        await state.settle()
        assert "full 128-d vectors" in state.status
        r0, r1, c0, c1 = state.tools.similarity.result.window
        np.testing.assert_allclose(state.tools.similarity.result.values, cosines(full[r0:r1, c0:c1].astype(np.float64),
                                                             state.selected.vector.astype(np.float64)),
                                   rtol=0, atol=1e-5, equal_nan=True)
    run_async(run())


def test_an_exact_result_past_the_pixel_cap_is_refused_in_one_line(store, monkeypatch):
    monkeypatch.setattr(budgets, "EXACT_PIXELS", 1000)

    async def run():
        state = await opened(store)
        state.centre_view(*centre_of_data(store, "utm30"), 2500)
        state.exact = True
        await state.settle()
        state.tools.cluster.run(state.tools.cluster)  # a button's way: spawned, its failure a status line
        await state.settle()
        assert state.status.startswith("<b>No exact result:</b> the exact result of this view needs")
        assert state.tools.cluster.result is None
    run_async(run())


def test_a_zoomed_out_view_whose_level_vectors_fit_the_budget_is_exact_at_once(store):
    """At any level, not only at 10 m, the full vectors are read when they fit budgets.REGION_BYTES."""
    async def run():
        state = await opened(store)
        lon, lat = centre_of_data(store, "utm30")
        state.centre_view(lon, lat, 20_000)  # level 2 (40 m): the small test data's window fits the budget
        await state.select(lon, lat)
        state.tools.similarity.param.update(sim_from="selection", on=True)
        await state.settle()
        assert state.tools.similarity.result.zone.level == 2
        assert "overview level 2 (40 m pixels), full 128-d vectors" in state.status, state.status
        assert state.cost.startswith("Tools read full 128-d vectors (40 m), exact")
        r0, r1, c0, c1 = state.tools.similarity.result.window
        full = level_full(store, "utm30", 2)[0][r0:r1, c0:c1]
        want = cosines(full.astype(np.float64), state.selected.vector.astype(np.float64))
        np.testing.assert_allclose(state.tools.similarity.result.values, want, rtol=0, atol=1e-5, equal_nan=True)
    run_async(run())
