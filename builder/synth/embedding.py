"""Synthetic 128-d embeddings of the synthetic landscape, calibrated to behave like real TESSERA vectors.

A pixel's vector is a sum of parts, each drawn in a fixed random orthonormal basis of the 128 dimensions with
its own power-law spectrum (variance of basis direction i proportional to i^-p), so that no small set of
directions holds the data:
- its class's mean (p = 1.6: the classes differ mostly in a few leading directions);
- its parcel's own offset (p = 0.7: every field differs a little, in many directions), drifting a little from
  year to year;
- the gradients (elevation, moisture) along two fixed directions;
- texture: smooth noise of ~60 m inside fields, 24 channels spread over the dimensions (p = 0.9);
- per-pixel noise, new each year (p = 0.25: nearly white).
Line features (roads, rivers, hedges) mix their class's vector into the pixel by their cover fraction.

The weights of the parts are calibrated so that, on a 128 x 128 window of the demo (tests/test_realism.py
measures it), the first 16 principal components hold at most about 60 % of the variance,
a 16-d PCA summary keeps at most half of each pixel's 100 nearest cosine neighbours, and the int8 vectors
compress losslessly by at most about 1.5x with the store's codec: the facts measured on real TESSERA stores.
"""
from __future__ import annotations

import numpy as np

from builder.synth.landscape import BROADLEAF, BUILT, CLASSES, GROUPS, N_CLASSES, WET, Ground, Landscape
from builder.synth.noise import Fractal, lattice_hash, world_xy

_TABLE = 8192  # parcel offsets: a table of random vectors indexed by the parcel's hash

# Standard deviations of the parts (per dimension, on average) and their spectra's exponents.
CLASS_SD, CLASS_P = 1.15, 0.8  # the groups of classes (landscape.GROUPS)
SIBLING_SD = 0.4  # a class within its group
PARCEL_SD, PARCEL_P = 0.6, 0.4
DRIFT_SD = 0.2  # the parcel offset's change per year
GRADIENT_SD = 0.35
TEXTURE_SD, TEXTURE_P, TEXTURE_CHANNELS = 0.2, 0.9, 24  # coarse texture (~250 m), in every direction
FINE_SD, FINE_CHANNELS, FINE_FROM = 1.4, 64, 16  # fine texture (~40 m), in the directions after the first FINE_FROM
NOISE_SD, NOISE_P = 0.3, 0.25


def _spectrum(n: int, p: float) -> np.ndarray:
    """Standard deviations along n directions, variance ~ i^-p, mean variance 1."""
    var = np.arange(1, n + 1, dtype=np.float64) ** -p
    return np.sqrt(var / var.mean()).astype(np.float32)


class World:
    """The realistic synthetic world: a deterministic function of (lon, lat, year) to a vector and its truth."""

    def __init__(self, n_bands: int = 128, seed: int = 20240, first_year: int = 2023):
        self.n_bands, self.seed, self.first_year = n_bands, seed, first_year
        rng = np.random.default_rng(seed)
        self.landscape = Landscape(seed)
        basis = np.linalg.qr(rng.normal(size=(n_bands, n_bands)))[0].astype(np.float32)
        spec = _spectrum(n_bands, CLASS_P)
        groups = (rng.normal(size=(len(GROUPS), n_bands)) * spec) @ basis.T * CLASS_SD
        siblings = (rng.normal(size=(N_CLASSES, n_bands)) * spec) @ basis.T * SIBLING_SD
        self.class_means = groups[[next(g for g, members in enumerate(GROUPS) if c in members)
                                   for c in range(N_CLASSES)]] + siblings
        self.parcel_table = (rng.normal(size=(_TABLE, n_bands)).astype(np.float32)
                             * _spectrum(n_bands, PARCEL_P)) @ basis.T
        self.gradient_dirs = rng.normal(size=(2, n_bands)).astype(np.float32) @ basis.T * GRADIENT_SD
        mix = rng.normal(size=(TEXTURE_CHANNELS, n_bands)) * _spectrum(n_bands, TEXTURE_P)
        self.texture_mix = (mix / np.sqrt(TEXTURE_CHANNELS)).astype(np.float32) @ basis.T * TEXTURE_SD
        self.texture = Fractal(250.0, 2, TEXTURE_CHANNELS, seed + 11)
        tail = basis[:, FINE_FROM:]
        self.fine_mix = (rng.normal(size=(FINE_CHANNELS, tail.shape[1])) / np.sqrt(FINE_CHANNELS)).astype(np.float32) @ tail.T * FINE_SD
        self.fine = Fractal(40.0, 2, FINE_CHANNELS, seed + 12)
        self.noise_basis = (_spectrum(n_bands, NOISE_P)[:, None] * basis.T * NOISE_SD).astype(np.float32)
        self.class_means = self.class_means.astype(np.float32)

    class_names = CLASSES

    def ground(self, lon, lat, year: int) -> Ground:
        x, y = world_xy(lon, lat)
        return self.landscape.ground(x, y, year - self.first_year)

    def classes(self, lon, lat, year: int) -> np.ndarray:
        """The ground-truth land-cover class of each point (builder/synth/landscape.py CLASSES)."""
        return self.ground(lon, lat, year).classes()

    def vectors(self, lon, lat, year: int) -> tuple[np.ndarray, np.ndarray]:
        """(float32 (..., B) vectors, ground-truth class (...)).  The per-pixel noise is drawn from a seed of the
        year and the first point, so the same call gives the same vectors."""
        v, cls, _ = self.draw(lon, lat, year)
        return v, cls

    def draw(self, lon, lat, year: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(vectors, ground-truth classes, parcel numbers (uint32, never 0)) of the points."""
        lon, lat = np.asarray(lon, np.float64), np.asarray(lat, np.float64)
        x, y = world_xy(lon, lat)
        k = year - self.first_year
        gr = self.landscape.ground(x, y, k)
        pid = gr.parcel.astype(np.int64)
        offset = self.parcel_table[(lattice_hash(pid, 0, self.seed) % np.uint64(_TABLE)).astype(np.intp)] * PARCEL_SD
        for yy in range(1, k + 1):  # a drift each year
            offset += self.parcel_table[(lattice_hash(pid, yy, self.seed + 1) % np.uint64(_TABLE)).astype(np.intp)] * DRIFT_SD
        v = self.class_means[gr.base] + offset
        v += gr.elevation[..., None] * self.gradient_dirs[0] + gr.moisture[..., None] * self.gradient_dirs[1]
        v += self.texture(x, y) @ self.texture_mix
        v += self.fine(x, y) @ self.fine_mix
        for cover, cls in ((gr.hedge, BROADLEAF), (gr.river, WET), (gr.road, BUILT)):
            w = cover[..., None]
            v = v * (1 - w) + self.class_means[cls] * w
        seed = lattice_hash(np.int64(round(float(lon.flat[0]) * 1e5)), np.int64(round(float(lat.flat[0]) * 1e5)),
                            self.seed + year)
        rng = np.random.default_rng(int(seed))
        v += rng.standard_normal(v.shape, dtype=np.float32) @ self.noise_basis
        parcels = (gr.parcel & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        parcels[parcels == 0] = 1
        return v.astype(np.float32), gr.classes(), parcels
