"""Deterministic SYNTHETIC TESSERA tiles over a few real places (the embedded default).

The tiles are written in the real geotessera layout (see builder.tiles) and
then built through exactly the same code path as real tiles.  They are not
model output: the stores built from them say so in tessera:model_version.

Places: the Sussex coast either side of the Greenwich meridian (UTM zones 30
and 31, north) and the Cape Peninsula (zone 34, south, false northing).  The
land/water mask is real (global-land-mask, from GLOBE's 1 km grid); the
embeddings are smooth random "land cover" fields in world coordinates, so
adjacent tiles and zones continue each other, PCA previews look like land
cover and similarity search finds the other patches of the same class.
Between years a part of one class changes, for change plots.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from global_land_mask import globe
from pyproj import Transformer

from builder import convention as conv
from builder.atomic import write_bytes
from builder.geotiff import write_geotiff
from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR, grid_name

MODEL_VERSION = "synthetic-demo-1"
YEARS = (2023, 2024)
PLACES = [(-0.05, 50.85), (0.05, 50.85), (-0.05, 50.75), (0.05, 50.75), (18.45, -33.95), (18.45, -34.05)]
N_CLASSES = 6
SEED = 20240


def _utm_epsg(lon: float, lat: float) -> int:
    zone = max(1, min(60, int(np.floor((lon + 180) / 6)) + 1))
    return conv.epsg_for_zone(zone, lat < 0)


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


class World:
    """The synthetic world: a deterministic function from (lon, lat, year) to a 128-d vector."""

    def __init__(self, n_bands: int = conv.N_BANDS, seed: int = SEED):
        rng = np.random.default_rng(seed)
        self.n_bands = n_bands
        self.class_waves = [_waves(rng, 10, 600, 6000) for _ in range(N_CLASSES)]
        self.texture_waves = [_waves(rng, 6, 150, 1500) for _ in range(3)]
        self.prototypes = rng.normal(0, 1, (N_CLASSES, n_bands)).astype(np.float32)
        self.directions = rng.normal(0, 0.35, (3, n_bands)).astype(np.float32)
        self.change_waves = _waves(rng, 4, 2000, 8000)

    def classes(self, lon: np.ndarray, lat: np.ndarray, year: int) -> np.ndarray:
        x = lon * 111_320.0 * np.cos(np.radians(lat))
        y = lat * 110_540.0
        f = np.stack([_field(w, x, y) for w in self.class_waves])
        # Year change: class 0 grows into a band of land where a slow field is high.
        f[0] += (year - YEARS[0]) * 1.5 * (_field(self.change_waves, x, y) > 0.8)
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


def tile_origin(lon: float, lat: float, px: int | tuple[int, int], epsg: int) -> tuple[float, float]:
    """Top-left corner (10 m aligned) of a px x px (or rows x cols) window centred on the cell centre."""
    rows, cols = (px, px) if isinstance(px, int) else px
    e, n = Transformer.from_crs(4326, epsg, always_xy=True).transform(lon, lat)
    return float(np.round(e / 10) * 10 - cols // 2 * 10), float(np.round(n / 10) * 10 + rows // 2 * 10)


def write_tile(root: Path, year: int, lon: float, lat: float, px: int | tuple[int, int] = 384, *, world: World | None = None,
               epsg: int | None = None, origin: tuple[float, float] | None = None, name: str | None = None,
               gap: bool = True) -> Path:
    """Write one synthetic tile (embeddings, scales, landmask) in the geotessera layout; `px` is the edge of
    a square tile or (rows, cols), e.g. (1113, 685) for a real 0.1 degree tile at 52 N."""
    world = world or World()
    epsg = epsg or _utm_epsg(lon, lat)
    oe, on = origin or tile_origin(lon, lat, px, epsg)
    name = name or grid_name(lon, lat)
    rows, cols = (px, px) if isinstance(px, int) else px
    e = oe + (np.arange(cols) + 0.5) * 10
    n = on - (np.arange(rows) + 0.5) * 10
    ee, nn = np.meshgrid(e, n)
    glon, glat = Transformer.from_crs(epsg, 4326, always_xy=True).transform(ee, nn)
    land = globe.is_land(glat, glon)
    v, _ = world.vectors(glon, glat, year)
    q, scale = conv.quantise(v)
    scale = np.where(land, scale, 0.0).astype(np.float32)  # the model writes water too; the mask removes it
    q[~land] = 0
    if gap:  # a small cloud gap on land: NaN scale, no data
        g0 = min(rows, cols) // 3
        scale[g0:g0 + 6, g0:g0 + 9] = np.nan
    d = root / EMBEDDINGS_DIR / str(year) / name
    d.mkdir(parents=True, exist_ok=True)
    _save_npy(d / f"{name}.npy", q)
    _save_npy(d / f"{name}_scales.npy", scale)
    (root / LANDMASKS_DIR).mkdir(parents=True, exist_ok=True)
    lm = root / LANDMASKS_DIR / f"{name}.tiff"
    if not lm.exists():
        write_geotiff(str(lm), land.astype(np.uint8), epsg, oe, on)
    return d


def _save_npy(path: Path, a: np.ndarray) -> None:
    """np.save, whole or not at all (builder/atomic.py): a killed demo never leaves a truncated tile."""
    buf = io.BytesIO()
    np.save(buf, a)
    write_bytes(path, buf.getvalue())


def write_demo_tiles(root: Path, years=YEARS, px: int = 384, places=PLACES) -> list[Path]:
    world = World()
    return [write_tile(Path(root), y, lon, lat, px, world=world) for y in years for lon, lat in places]
