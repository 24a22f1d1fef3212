"""How much a set of embeddings behaves like real TESSERA vectors: the measures of the demo's calibration, with
numpy, scikit-learn's PCA and numcodecs only (tests/test_realism.py asserts
them).  The facts they are held against were measured on real stores (docs/demo.md):
- the first 16 principal components of a 128 x 128 window hold at most about 60 % of its variance;
- a 16-d linear summary of a window keeps at most half of each pixel's 100 nearest cosine neighbours (a real v2
  store's first 16 dimensions keep 39 %);
- the int8 vectors compress losslessly by at most about 1.5x (a real tile: 1.34x with DEFLATE and a predictor).
"""
from __future__ import annotations

import zlib

import numpy as np


def pc_share(vectors: np.ndarray, k: int = 16) -> float:
    """Share of the variance of (N, B) vectors that their first k principal components hold."""
    c = vectors.astype(np.float64) - vectors.mean(0)
    ev = np.linalg.eigvalsh(c.T @ c)[::-1]
    return float(ev[:k].sum() / ev.sum())


def neighbour_overlap(vectors: np.ndarray, k: int = 16, n: int = 100, queries: int = 300, seed: int = 0) -> float:
    """Mean share of a pixel's n nearest cosine neighbours (among the N) that its k-d PCA reconstruction (PCA fitted
    on these vectors) keeps among the reconstructions' n nearest; over `queries` pixels drawn with `seed`."""
    from sklearn.decomposition import PCA
    f = vectors.astype(np.float64)
    rec = PCA(k, svd_solver="full").fit(f)
    r = rec.inverse_transform(rec.transform(f))
    fn = f / np.linalg.norm(f, axis=1, keepdims=True)
    rn = r / np.linalg.norm(r, axis=1, keepdims=True)
    kept = []
    for i in np.random.default_rng(seed).choice(len(f), min(queries, len(f)), replace=False):
        a = set(np.argpartition(-(fn @ fn[i]), n + 1)[:n + 1]) - {i}
        b = set(np.argpartition(-(rn @ rn[i]), n + 1)[:n + 1]) - {i}
        kept.append(len(a & b) / n)
    return float(np.mean(kept))


def store_codec_ratio(q: np.ndarray, chunk: int = 4) -> float:
    """Raw over compressed bytes of (H, W, B) int8 vectors with the store's codec: Blosc zstd level 3 with bit
    shuffle, each chunk x chunk x B inner chunk on its own (tessera: v1's layout)."""
    import numcodecs
    codec = numcodecs.Blosc("zstd", 3, numcodecs.Blosc.BITSHUFFLE)
    raw = packed = 0
    for r in range(0, q.shape[0] - chunk + 1, chunk):
        for c in range(0, q.shape[1] - chunk + 1, chunk):
            block = np.ascontiguousarray(q[r:r + chunk, c:c + chunk])
            raw += block.nbytes
            packed += len(codec.encode(block))
    return raw / packed


def deflate_ratio(q: np.ndarray) -> float:
    """Raw over compressed bytes of (H, W, B) int8 vectors with DEFLATE (level 6) after a horizontal predictor
    (each value minus the same band's value in the pixel to its left, as TIFF's predictor 2): how the real tile's
    1.34x was measured."""
    d = q.astype(np.int16)
    d[:, 1:] -= q[:, :-1].astype(np.int16)
    return q.nbytes / len(zlib.compress((d & 0xFF).astype(np.uint8).tobytes(), 6))
