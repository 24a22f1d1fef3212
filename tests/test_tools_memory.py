"""The tools on a screen full of coded pixels (a 1600 x 1000 view read as an overview level's compact code) stay
within a bounded amount of memory: Pyodide's heap cannot give the (N, 128) vectors of such a view at once
(1.6 million pixels: 0.8 GB as float32, 1.6 GB as float64).  Measured with tracemalloc in CPython, against
answers the test computes itself from the code, block by block."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from app.tools import classify, cluster, region as reg
from builder.core.codes import PCACode
from conftest import run_async

H, W, D, B = 800, 1000, 16, 128  # a smaller screen than 1600 x 1000 keeps the test quick; the bound scales
BOUND = 250e6  # bytes: under 0.41 GB, the view's vectors as float32 (k-means' fit on its 65,536-pixel sample
# alone peaks at about 190 MB, whatever the view)


@pytest.fixture(scope="module")
def screen():
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((6, D)).astype(np.float32) * 3
    coords = centres[rng.integers(0, 6, H * W)].reshape(H, W, D) + rng.standard_normal((H, W, D), dtype=np.float32)
    coords[:100, :300] = np.nan  # no data there
    basis = np.linalg.qr(rng.standard_normal((B, D)))[0].T.astype(np.float32)  # (D, B), orthonormal rows
    mean = rng.standard_normal(B).astype(np.float32)
    whole = (0, H, 0, W)
    return reg.Regions([reg.Region(None, whole, whole, coords=coords, code=PCACode(basis, mean))]), coords, basis, mean


def vectors_of(coords, basis, mean, rows):
    """The test's own reconstruction of valid pixels `rows` (a slice or indices, in row-major order)."""
    z = coords[np.isfinite(coords[..., 0])][rows].astype(np.float64)
    return z @ basis.astype(np.float64) + mean.astype(np.float64)


def peak_of(fn):
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_k_means_of_a_screen_of_coded_pixels_stays_bounded_and_its_inertia_is_exact(screen):
    regions, coords, basis, mean = screen
    (labels, centres, inertia), peak = peak_of(lambda: run_async(cluster.kmeans(regions.pixels(), 5, 0)))
    assert peak < BOUND, f"k-means took {peak / 1e6:.0f} MB at its peak"
    n = int(np.isfinite(coords[..., 0]).sum())
    assert len(labels) == n
    want, nearest = 0.0, []
    for lo in range(0, n, 100_000):
        v = vectors_of(coords, basis, mean, slice(lo, lo + 100_000))
        c = centres.astype(np.float64)
        d = (v ** 2).sum(1)[:, None] - 2 * v @ c.T + (c ** 2).sum(1)[None]
        nearest.append(d.argmin(1))
        want += float(d[np.arange(len(v)), labels[lo:lo + 100_000]].sum())
    assert np.mean(np.concatenate(nearest) == labels) > 0.999  # each pixel at its nearest centre (float32 ties aside)
    assert inertia == pytest.approx(want, rel=1e-4)


def test_classifying_a_screen_of_coded_pixels_stays_bounded_and_equals_the_classifier_on_the_vectors(screen):
    regions, coords, basis, mean = screen
    rng = np.random.default_rng(1)
    n = int(np.isfinite(coords[..., 0]).sum())
    picks = rng.choice(n, 60, replace=False)
    X = vectors_of(coords, basis, mean, picks).astype(np.float32)
    y = (X[:, 0] > np.median(X[:, 0])).astype(np.int64) + 2 * (X[:, 1] > np.median(X[:, 1]))
    (idx, conf), peak = peak_of(lambda: run_async(classify.fit_predict("k-NN", X, y, regions.pixels(), 5, 0)))
    assert peak < BOUND, f"classification took {peak / 1e6:.0f} MB at its peak"
    from sklearn.neighbors import KNeighborsClassifier
    model = KNeighborsClassifier(5).fit(X, y)
    sample = np.sort(rng.choice(n, 20_000, replace=False))
    v = vectors_of(coords, basis, mean, sample)
    assert np.mean(model.predict(v.astype(np.float32)) == idx[sample]) > 0.99
