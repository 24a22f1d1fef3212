"""Across years: a classifier trained on the labels made in 2024 applied to the 2023 store's vectors of the view,
against scikit-learn fitted here on zarr-python reads (the 2024 labels' pixels, the 2023 window); the train and test
years in the status and in the URL (app/tools/share.py)."""
from __future__ import annotations

import numpy as np

from app.tools import share
from conftest import run_async
from test_tools_change import store_2023  # noqa: F401  (the 2023 store fixture)
from test_tools_share import reopened, same_layer
from tools_util import centre_of_data, opened, pixel_lonlat, training_pixels, zone_vectors


def test_train_on_2024_labels_apply_to_2023(store, store_2023, world):  # noqa: F811
    from sklearn.neighbors import KNeighborsClassifier
    catalog = [{"year": 2023, "url": str(store_2023), "label": "2023"}, {"year": 2024, "url": str(store), "label": "2024"}]

    async def run():
        state = await opened(store, 2024, catalog=catalog)
        state.centre_view(*centre_of_data(store, "utm30"), 2500)
        await state.settle()
        train = training_pixels(store, "utm30", world, 2024, per_class=6)
        for r, c, k in train:
            await state.tools.labels.add(*pixel_lonlat(store, "utm30", r, c), cls=f"class {k}")
        layer = await state.tools.classify.classify("k-NN", train_year=2024, test_year=2023)
        return state, train, layer
    state, train, layer = run_async(run())
    assert layer is not None, state.status
    assert "Trained on the labels of 2024, applied to 2023." in state.status
    names = state.tools.classify.names
    v24, v23 = zone_vectors(store, "utm30"), zone_vectors(store_2023, "utm30")
    X = np.stack([v24[r, c] for r, c, _ in train])
    y = np.array([names.index(f"class {k}") for _, _, k in train])
    r0, r1, c0, c1 = layer.window
    sub = v23[r0:r1, c0:c1]  # the layer lies on the 2023 store's grid
    valid = np.isfinite(sub[..., 0])
    want = KNeighborsClassifier(n_neighbors=5).fit(X, y).predict(sub[valid])
    assert valid.sum() > 1000 and np.isnan(layer.values[~valid]).all()
    assert float((layer.values[valid].astype(int) == want).mean()) >= 0.99
    # the 2023 grid differs from 2024's (an extra tile to the west): the window is not the 2024 one
    assert v23.shape != v24.shape
    # the URL holds both years
    text = share.encode(state.tools)
    assert "train_year:2024" in text and "test_year:2023" in text
    # and a fresh explorer opened from the link re-runs it: the same years, the same map on the 2023 grid
    again, back, restored = run_async(reopened(state, store, catalog))
    assert (again.tools.classify.train_year, again.tools.classify.test_year) == (2024, 2023)
    assert restored is not None and "Trained on the labels of 2024, applied to 2023." in again.status
    same_layer(restored, layer)
    # a link naming a year the catalog does not hold is ignored in one line
    bad = back.tool.replace("test_year:2023", "test_year:2019")
    assert run_async(share.restore(again, bad)) is None
    assert "Tool layer in the URL ignored:" in again.status and "2019" in again.status
    # labels of a year without labels: too few classes, said in one line
    state.tools.classify.train_year = 2023
    assert run_async(state.tools.classify.classify()) is None and "at least two classes" in state.status
