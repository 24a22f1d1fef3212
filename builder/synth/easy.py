"""The easy synthetic world (the demo's generator before builder/synth/embedding.py): a few colour blobs plus
noise, nearly low-rank.  Kept behind `builder demo --easy` and for tests that need cleanly separable classes;
the realistic world is the default.
"""
from __future__ import annotations

import numpy as np

N_CLASSES = 6
SEED = 20240
FIRST_YEAR = 2023


def _waves(rng: np.random.Generator, n: int, lo: float, hi: float) -> np.ndarray:
    """n random plane waves: (kx, ky, phase), wavelengths between lo and hi metres."""
    wl = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    ang = rng.uniform(0, 2 * np.pi, n)
    return np.stack([2 * np.pi / wl * np.cos(ang), 2 * np.pi / wl * np.sin(ang), rng.uniform(0, 2 * np.pi, n)], 1)


def _field(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    for kx, ky, ph in w:
        out += np.sin(kx * x + ky * y + ph)
    return out / np.sqrt(len(w))


class EasyWorld:
    """The easy synthetic world: six land-cover prototypes plus three texture directions plus a little noise, so
    its vectors are nearly 9-dimensional and its classes separate cleanly (tests that need separable classes)."""

    def __init__(self, n_bands: int = 128, seed: int = SEED):
        rng = np.random.default_rng(seed)
        self.n_bands = n_bands
        self.class_waves = [_waves(rng, 10, 600, 6000) for _ in range(N_CLASSES)]
        self.texture_waves = [_waves(rng, 6, 150, 1500) for _ in range(3)]
        self.prototypes = rng.normal(0, 1, (N_CLASSES, n_bands)).astype(np.float32)
        self.directions = rng.normal(0, 0.35, (3, n_bands)).astype(np.float32)
        self.change_waves = _waves(rng, 4, 2000, 8000)

    class_names = tuple(f"class {i}" for i in range(N_CLASSES))

    def draw(self, lon: np.ndarray, lat: np.ndarray, year: int) -> tuple[np.ndarray, np.ndarray, None]:
        """(vectors, classes, no parcels): what builder/demo.py writes."""
        return (*self.vectors(lon, lat, year), None)

    def classes(self, lon: np.ndarray, lat: np.ndarray, year: int) -> np.ndarray:
        x = lon * 111_320.0 * np.cos(np.radians(lat))
        y = lat * 110_540.0
        f = np.stack([_field(w, x, y) for w in self.class_waves])
        # Year change: class 0 grows into a band of land where a slow field is high.
        f[0] += (year - FIRST_YEAR) * 1.5 * (_field(self.change_waves, x, y) > 0.8)
        return f.argmax(axis=0)

    def vectors(self, lon: np.ndarray, lat: np.ndarray, year: int) -> tuple[np.ndarray, np.ndarray]:
        """(float32 (..., B) vectors, class index (...))."""
        cls = self.classes(lon, lat, year)
        x = lon * 111_320.0 * np.cos(np.radians(lat))
        y = lat * 110_540.0
        v = self.prototypes[cls].copy()
        for i, w in enumerate(self.texture_waves):
            v += _field(w, x, y)[..., None] * self.directions[i]
        noise = np.random.default_rng(abs(hash((round(float(lon.flat[0]), 4), year))) % 2**32)
        v += noise.normal(0, 0.05, v.shape).astype(np.float32)
        return v.astype(np.float32), cls
