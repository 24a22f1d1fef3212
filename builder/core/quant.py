"""Quantisation of embeddings and the cosine similarities the explorer computes (pure core: stdlib + numpy).

Dequantisation is fixed by the convention, not recorded in metadata; builder/core/convention.py re-exports
dequantise, valid_mask and quantise.
"""
from __future__ import annotations

import numpy as np


def dequantise(embeddings: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """float32 = int8 * scale, per pixel.  NaN scale (no data) gives NaN vectors.

    Works on one pixel (B,) with a scalar scale, or on (..., B) with (...).
    """
    e = np.asarray(embeddings)
    s = np.asarray(scales, dtype=np.float32)
    if e.dtype != np.int8:
        raise TypeError(f"embeddings must be int8, got {e.dtype}")
    return e.astype(np.float32) * s[..., None]


def valid_mask(scales: np.ndarray) -> np.ndarray:
    return ~np.isnan(np.asarray(scales))


def quantise(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of `dequantise` as TESSERA quantises: per vector (last axis), scale = max|v| / 127
    (float32), q = round(v / scale) as int8; an all-zero vector gets scale 0.0 and q = 0.  Finite
    input only (callers keep no-data out and give it a NaN scale themselves)."""
    amax = np.maximum(v.max(axis=-1), -v.min(axis=-1))  # max|v| without an |v| copy of the input
    np.abs(amax, out=amax)  # an all-zero vector: +0.0, not the -0.0 that -min gives
    scale = (amax / 127.0).astype(np.float32)
    safe = np.where(scale > 0, scale, 1.0)
    t = v / safe[..., None]
    np.clip(np.round(t, out=t), -127, 127, out=t)  # in place: the build quantises whole shards
    return t.astype(np.int8), scale


def project(ints: np.ndarray, scales: np.ndarray, mean: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """(v - mean) @ axes.T for the dequantised vectors v = ints * scale (float32 (N, B) int8 values, (N,) scales),
    projected before scaling: no (N, B) float copy of v (the build projects whole shards, 65,536 x 128)."""
    return (ints @ axes.T) * scales[:, None] - mean @ axes.T


def cosine_map(vectors: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Cosine similarity of every (H, W, B) vector with `target` (B,); NaN where a vector is NaN or zero."""
    t = np.asarray(target, dtype=np.float32)
    tn = np.linalg.norm(t)
    norms = np.linalg.norm(vectors, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        sim = (vectors @ t) / (norms * tn)
    sim[~np.isfinite(sim)] = np.nan
    return sim.astype(np.float32)


def cosine_map_code(coords: np.ndarray, basis: np.ndarray, mean: np.ndarray, target: np.ndarray) -> np.ndarray:
    """cosine_map of the vectors `coords @ basis + mean` (a compact code's reconstructions, coords (H, W, D))
    computed in the code's D dimensions, never forming the (H, W, B) vectors: v.t = z.(basis t) + mean.t and
    |v|^2 = z G z + 2 z.(basis mean) + |mean|^2 with G = basis basis^T."""
    b, m = np.asarray(basis, np.float64), np.asarray(mean, np.float64)
    t = np.asarray(target, np.float64)
    z = np.asarray(coords, np.float32)
    dot = z @ (b @ t).astype(np.float32) + np.float32(m @ t)
    norm2 = np.einsum("...i,...i->...", z @ (b @ b.T).astype(np.float32), z) + 2 * (z @ (b @ m).astype(np.float32)) \
        + np.float32(m @ m)
    with np.errstate(invalid="ignore", divide="ignore"):
        sim = dot / (np.sqrt(np.maximum(norm2, 0)) * np.float32(np.linalg.norm(t)))
    sim[~np.isfinite(sim)] = np.nan
    return sim.astype(np.float32)


def cosine_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of a[..., :] with b[..., :] pixel by pixel; NaN where either is NaN or zero."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        c = (a64 * b64).sum(-1) / (np.linalg.norm(a64, axis=-1) * np.linalg.norm(b64, axis=-1))
    c[~np.isfinite(c)] = np.nan
    return c.astype(np.float32)


def cosine_pairs_code(za: np.ndarray, basis_a: np.ndarray, mean_a: np.ndarray,
                      zb: np.ndarray, basis_b: np.ndarray, mean_b: np.ndarray) -> np.ndarray:
    """cosine_pairs of two codes' reconstructions va = za @ basis_a + mean_a and vb = zb @ basis_b + mean_b
    (coords (..., Da) and (..., Db), each on its own basis) computed in the codes' dimensions, never forming the
    B-d vectors: va.vb = za (Ba Bb^T) zb + za.(Ba mb) + zb.(Bb ma) + ma.mb, and |v|^2 the same with one code.
    Exact for any two bases (the same one included); NaN where either is NaN or zero."""
    ba, ma, bb, mb = (np.asarray(x, np.float64) for x in (basis_a, mean_a, basis_b, mean_b))
    za, zb = np.asarray(za, np.float64), np.asarray(zb, np.float64)

    def dot(z1, b1, m1, z2, b2, m2):
        return np.einsum("...i,...i->...", z1 @ (b1 @ b2.T), z2) + z1 @ (b1 @ m2) + z2 @ (b2 @ m1) + m1 @ m2

    with np.errstate(invalid="ignore", divide="ignore"):
        c = dot(za, ba, ma, zb, bb, mb) / np.sqrt(np.maximum(dot(za, ba, ma, za, ba, ma), 0)
                                                  * np.maximum(dot(zb, bb, mb, zb, bb, mb), 0))
    c[~np.isfinite(c)] = np.nan
    return c.astype(np.float32)


def cosine_table(vectors: list[np.ndarray]) -> np.ndarray:
    m = np.stack([np.asarray(v, dtype=np.float64) for v in vectors])
    n = np.linalg.norm(m, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (m @ m.T) / np.outer(n, n)
