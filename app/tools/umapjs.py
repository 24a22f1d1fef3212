"""UMAP of a sample's vectors by umap-js (npm), in a Web Worker of its own (app/js/umap.js, app/js/umap-worker.js).

umap-learn cannot run in the browser (it needs numba, which has no WebAssembly build); umap-js is the same algorithm
in JavaScript. Each run starts a worker, so neither the page's thread nor Python's (itself a worker) computes the
layout: Python awaits the answer as it awaits a read. The layout is a function of the vectors and the settings: every
random draw of umap-js comes from a generator seeded with `seed`. The worker reports each epoch of the layout's
optimisation as it ends; a step's counter (app/tools/steps.py) shows them: "epoch 200 of 500".
"""
from __future__ import annotations

import numpy as np


class UMAPFailed(Exception):
    """umap-js could not lay the points out (its one-line reason)."""


async def embed(X: np.ndarray, n_neighbors: int, min_dist: float, seed: int, step=None) -> np.ndarray:
    """float32 (n, 2): the UMAP layout of the rows of X (n, d); `step` counts its epochs."""
    try:
        import js
    except ImportError:
        raise UMAPFailed("UMAP runs in the browser (umap-js in a Web Worker), not in this Python") from None
    X = np.ascontiguousarray(X, np.float32)
    n, d = X.shape
    vectors = js.Float32Array.new(n * d)
    vectors.assign(X.reshape(-1))
    count = None

    def epoch(done, total) -> None:  # called by JavaScript as each epoch ends (app/js/umap.js)
        nonlocal count
        if step is not None:
            if count is None:
                count = step.counter(int(total), "epoch")
            count.at(int(done))
    from pyodide.ffi import create_proxy
    told = create_proxy(epoch)
    try:
        res = await js.tesseraJS.umap(vectors, n, d, int(n_neighbors), float(min_dist), int(seed), told)
    finally:
        told.destroy()
    if count is not None:
        count.end()
    if not res.ok:
        raise UMAPFailed(str(res.error.message))
    xy = np.frombuffer(res.value.to_bytes(), np.float32).reshape(n, 2).copy()
    if not np.isfinite(xy).all():  # never drawn silently wrong
        raise UMAPFailed("umap-js returned coordinates that are not finite")
    return xy
