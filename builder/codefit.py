"""Fitting the overviews' compact code (builder/core/codes.py) to a sample of a store's vectors, once per store.

`fit(method, sample, dims)`: PCA (builder/pca.py) for "pca-int8"; k-means per sub-space (scikit-learn, a fixed
seed: the same sample gives the same codebook) for "pq-uint8".  `check` refuses, in one line, dims a method
cannot have for vectors of B bands (the CLI refuses dims < 1 itself), before anything is written.
"""
from __future__ import annotations

import numpy as np

from builder.core import codes
from builder.errors import BuildError
from builder.pca import principal_axes

SEED = 0        # k-means' random_state
PQ_ITER = 50    # k-means iterations per sub-space (benchmarks/codes.py: the recall it measures)


def check(method: str, dims: int, n_bands: int) -> None:
    """BuildError (one line) when a code of `method` cannot have `dims` for B = n_bands."""
    if not codes.kind(method).fits(dims, n_bands):  # only the PQ code has a rule
        raise BuildError(f"--code-dims {dims} must divide the tiles' {n_bands} bands for the PQ code "
                         f"(one sub-vector of {n_bands}/M bands per byte)")


def _pca(sample: np.ndarray, dims: int) -> codes.PCACode:
    """PCA of float (N, B) dequantised vectors; signs fixed so each axis' largest loading is positive."""
    mean, basis = principal_axes(sample, dims)
    return codes.PCACode(basis, mean)


def _pq(sample: np.ndarray, dims: int) -> codes.PQCode:
    """256 k-means centroids in each of the M = dims sub-spaces of the sample's unit vectors.  A sample of fewer
    distinct sub-vectors than that has them all as centroids, the rest repeating the first (never nearer)."""
    from sklearn.cluster import KMeans
    x = np.asarray(sample, np.float64)
    size = np.linalg.norm(x, axis=1)
    x = x[size > 0] / size[size > 0, None]
    books = []
    for part in np.split(x, dims, axis=1):
        distinct = np.unique(part, axis=0)
        if len(distinct) <= codes.CENTROIDS:
            centres = distinct
        else:
            centres = KMeans(codes.CENTROIDS, n_init=1, max_iter=PQ_ITER, random_state=SEED).fit(part).cluster_centers_
        book = np.repeat(centres[:1], codes.CENTROIDS, axis=0) if len(centres) else np.zeros((codes.CENTROIDS, part.shape[1]))
        book[:len(centres)] = centres
        books.append(book)
    return codes.PQCode(np.stack(books).astype(np.float32))


FITS = {codes.PCACode.method: _pca, codes.PQCode.method: _pq}


def fit(method: str, sample: np.ndarray, dims: int) -> codes.Code:
    return FITS[method](sample, dims)
