"""Principal axes of a sample of vectors: the RGB preview's colours and the overviews' compact code fit them.

From the eigenvectors of the sample's covariance (B x B) rather than an SVD of the (N, B) sample: the same
axes to float precision, ten times faster for the build's samples (4,000 x 128: 5 ms against 55 ms), and
the fit sits on the build's serial path before any shard is written.
"""
from __future__ import annotations

import numpy as np


def principal_axes(sample: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(float64 mean (B,), float64 (k, B) axes by decreasing variance) of an (N, B) sample; each axis' sign
    is fixed so its largest loading is positive.  Rows past min(N - 1, B) are zero (a sample of N vectors
    spans at most N - 1 directions about its mean); a sample short of that rank in fact (repeated vectors,
    a constant band) still gets unit axes for the directions without variance, as an SVD would."""
    x = np.asarray(sample, dtype=np.float64)
    mean = x.mean(axis=0)
    c = x - mean
    var, vec = np.linalg.eigh(c.T @ c)  # ascending
    rank = min(x.shape[0] - 1, x.shape[1])  # axes past the rank have no variance: left zero
    axes = np.zeros((k, x.shape[1]))
    n = min(k, max(rank, 0))
    axes[:n] = vec[:, ::-1][:, :n].T
    signs = np.sign(axes[np.arange(k), np.abs(axes).argmax(axis=1)])
    axes *= np.where(signs == 0, 1, signs)[:, None]
    return mean, axes
