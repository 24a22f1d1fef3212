"""Deterministic functions of world position for the synthetic landscape: lattice hashing, smooth value noise
and jittered-lattice Voronoi parcels.

Everything here is a function of world metres (x east, y north, from `world_xy`) and a seed, evaluated
pixel by pixel: adjacent tiles, and the two UTM zones either side of a zone boundary, see the same landscape
where they meet.  Why by hand: the noise libraries on PyPI draw on a grid of their own (or per call), not at
arbitrary world points with a stable seed, and these few lines vectorise over whole tiles with numpy.
"""
from __future__ import annotations

import numpy as np

M_PER_DEG_LAT = 110_540.0
M_PER_DEG_LON = 111_320.0
_TABLE = 4096  # random values per table: lattice points index it by their hash


def world_xy(lon: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Metres east and north on a sinusoidal projection: continuous everywhere, within 1 % of the ground
    distance over a demo site."""
    lon = np.asarray(lon, dtype=np.float64)
    lat = np.asarray(lat, dtype=np.float64)
    return lon * M_PER_DEG_LON * np.cos(np.radians(lat)), lat * M_PER_DEG_LAT


def lattice_hash(i: np.ndarray, j: np.ndarray, seed: int) -> np.ndarray:
    """A well-mixed uint64 of integer lattice coordinates and a seed (splitmix64's finaliser)."""
    with np.errstate(over="ignore"):
        h = (np.asarray(i, dtype=np.int64).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
             ^ np.asarray(j, dtype=np.int64).astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)
             ^ np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * np.uint64(0x165667B19E3779F9))
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


def unit(h: np.ndarray) -> np.ndarray:
    """A hash as a float in [0, 1)."""
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)


class ValueNoise:
    """Smooth noise with `channels` independent channels at one spacing: normal values at the lattice points,
    blended with a smoothstep; scaled to unit variance (a blend of four normals has less)."""

    def __init__(self, spacing: float, channels: int, seed: int):
        self.spacing, self.channels, self.seed = float(spacing), channels, seed
        self.table = np.random.default_rng(seed).normal(0, 1, (_TABLE, channels)).astype(np.float32)
        # variance of sum(w_k v_k) with smoothstep weights, averaged over the cell: normalise to 1
        t = (np.arange(64) + 0.5) / 64
        s = t * t * (3 - 2 * t)
        self.norm = np.float32(1 / np.mean(s**2 + (1 - s) ** 2))  # 1 / sqrt(mean_x * mean_y), the two alike

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        gx, gy = x / self.spacing, y / self.spacing
        ix, iy = np.floor(gx), np.floor(gy)
        fx, fy = gx - ix, gy - iy
        sx, sy = (fx * fx * (3 - 2 * fx)).astype(np.float32), (fy * fy * (3 - 2 * fy)).astype(np.float32)
        ix, iy = ix.astype(np.int64), iy.astype(np.int64)
        out = np.zeros(x.shape + (self.channels,), np.float32)
        for dx, dy, w in ((0, 0, (1 - sx) * (1 - sy)), (1, 0, sx * (1 - sy)), (0, 1, (1 - sx) * sy), (1, 1, sx * sy)):
            idx = (lattice_hash(ix + dx, iy + dy, self.seed) % np.uint64(_TABLE)).astype(np.intp)
            out += self.table[idx] * w[..., None]
        out *= self.norm
        return out


class Fractal:
    """Octaves of value noise, each half the spacing and `gain` times the amplitude of the one before."""

    def __init__(self, spacing: float, octaves: int, channels: int, seed: int, gain: float = 0.5):
        self.layers = [(gain**k, ValueNoise(spacing / 2**k, channels, seed + 7919 * k)) for k in range(octaves)]
        self.norm = np.float32(1 / np.sqrt(sum(a * a for a, _ in self.layers)))

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return sum(a * n(x, y) for a, n in self.layers) * self.norm


class Parcels:
    """Voronoi cells of a jittered square lattice: each pixel's nearest and second-nearest lattice point.
    `ids` names a parcel by its lattice point (stable across tiles and zones); `edge` is the pixel's distance
    in metres to its parcel's boundary (half the difference of the two distances: exact on the bisector)."""

    def __init__(self, spacing: float, seed: int, jitter: float = 0.8):
        self.spacing, self.seed, self.jitter = float(spacing), seed, jitter

    def point(self, i: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        h = lattice_hash(i, j, self.seed)
        u = unit(h)
        v = unit(lattice_hash(i, j, self.seed + 1))
        off = (1 - self.jitter) / 2
        return (i + off + self.jitter * u) * self.spacing, (j + off + self.jitter * v) * self.spacing

    def __call__(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ci, cj = np.floor(x / self.spacing).astype(np.int64), np.floor(y / self.spacing).astype(np.int64)
        best = np.full(x.shape, np.inf)
        second = np.full(x.shape, np.inf)
        bi, bj = ci.copy(), cj.copy()
        for di in (-1, 0, 1):
            for dj in (-1, 0, 1):
                i, j = ci + di, cj + dj
                px, py = self.point(i, j)
                d = np.hypot(x - px, y - py)
                closer = d < best
                second = np.where(closer, best, np.minimum(second, d))
                best = np.where(closer, d, best)
                bi, bj = np.where(closer, i, bi), np.where(closer, j, bj)
        return lattice_hash(bi, bj, self.seed + 2), (second - best) / 2
