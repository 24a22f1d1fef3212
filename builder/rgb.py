"""RGBA previews of embeddings: a 3-component PCA, robustly stretched.

The PCA is fitted once per store on a sample of dequantised pixels and kept
in the build record, so that shards added later get the same colours.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from builder.core import convention as conv
from builder.core.quant import project
from builder.pca import principal_axes


@dataclass(frozen=True)
class RGBModel:
    mean: np.ndarray  # (B,)
    components: np.ndarray  # (3, B)
    lo: np.ndarray  # (3,) 2nd percentile of each projection
    hi: np.ndarray  # (3,) 98th percentile

    @classmethod
    def fit(cls, sample: np.ndarray) -> "RGBModel":
        """Fit on float32 (N, B) dequantised vectors (N >= 3)."""
        x = np.asarray(sample, dtype=np.float64)
        if x.shape[0] < 3:
            raise ValueError("need at least 3 valid pixels to fit an RGB preview")
        mean, comps = principal_axes(x, 3)
        proj = (x - mean) @ comps.T
        lo, hi = np.percentile(proj, 2, axis=0), np.percentile(proj, 98, axis=0)
        hi = np.where(hi - lo < 1e-12, lo + 1.0, hi)
        return cls(mean.astype(np.float32), comps.astype(np.float32), lo.astype(np.float32), hi.astype(np.float32))

    def apply(self, embeddings: np.ndarray, scales: np.ndarray, ints: np.ndarray | None = None) -> np.ndarray:
        """uint8 (h, w, 4); alpha 255 where the scale is valid, 0 (and RGB 0) elsewhere.  `ints`: the valid
        pixels' int8 vectors as float32 (`embeddings[valid]`), when the caller has them."""
        valid = conv.valid_mask(scales)
        out = np.zeros(scales.shape + (4,), dtype=np.uint8)
        if valid.any():
            x = embeddings[valid].astype(np.float32) if ints is None else ints
            p = project(x, scales[valid], self.mean, self.components)
            rgb = np.clip((p - self.lo) / (self.hi - self.lo), 0.0, 1.0)
            out[valid, :3] = np.round(rgb * 255).astype(np.uint8)
            out[valid, 3] = 255
        return out

    def to_json(self) -> dict:
        return {k: getattr(self, k).tolist() for k in ("mean", "components", "lo", "hi")}

    @classmethod
    def from_json(cls, d: dict) -> "RGBModel":
        return cls(*(np.asarray(d[k], dtype=np.float32) for k in ("mean", "components", "lo", "hi")))
