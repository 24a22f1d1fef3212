"""Similarity from positive and negative examples (labels of one class, and of another or of all the others): the
cosine of every pixel of the view to q = 2 x mean(positives) - mean(negatives), checked against numpy on zarr-python
reads of the same pixels."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import run_async
from tools_util import centre_of_data, cosines, opened, pixel_lonlat, training_pixels, zone_vectors


async def labelled(store, world):
    state = await opened(store)
    state.centre_view(*centre_of_data(store, "utm30"), 2500)
    await state.settle()
    train = training_pixels(store, "utm30", world, 2024, per_class=6)
    for r, c, k in train:
        await state.tools.labels.add(*pixel_lonlat(store, "utm30", r, c), cls=f"class {k}")
    return state, train


@pytest.mark.parametrize("negative", ["one class", "all other classes", "none"])
def test_positive_and_negative_examples_query(store, world, negative):
    state, train = run_async(labelled(store, world))
    ks = sorted({k for _, _, k in train})
    pos_k, neg_k = ks[0], ks[1]
    neg = {"one class": f"class {neg_k}", "all other classes": "all other classes", "none": "none"}[negative]
    layer = run_async(state.tools.examples.search(f"class {pos_k}", neg))
    assert layer is not None, state.status
    assert state.tools.shown == "examples"
    v = zone_vectors(store, "utm30")
    pos = np.stack([v[r, c] for r, c, k in train if k == pos_k]).astype(np.float64)
    negs = [v[r, c] for r, c, k in train if (k == neg_k if negative == "one class" else k != pos_k)]
    q = 2 * pos.mean(0) - np.stack(negs).astype(np.float64).mean(0) if negative != "none" else pos.mean(0)
    r0, r1, c0, c1 = layer.window
    want = cosines(v[r0:r1, c0:c1].astype(np.float64), q)
    np.testing.assert_allclose(layer.values, want, atol=1e-5, equal_nan=True)
    assert state.tools.examples.counts == (len(pos), 0 if negative == "none" else len(negs))
    assert f"class {pos_k}" in state.status


def test_examples_need_a_positive_class_with_labels(store, world):
    state, _ = run_async(labelled(store, world))
    assert run_async(state.tools.examples.search("<b>nope</b>", "none")) is None
    assert "&lt;b&gt;nope&lt;/b&gt;" in state.status and "<b>nope" not in state.status
    assert run_async(state.tools.examples.search("class 0", "class 0")) is None
    assert "differ" in state.status
