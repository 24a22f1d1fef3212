"""Helpers of the tools' CPython tests: an explorer over a real store, and independent zarr-python reads."""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import zarr
from pyproj import Transformer

from builder.reader.source import ZarrSource
from app.session import Explorer
from app.state import UrlState


async def opened(store: Path, year: int = 2024, catalog=None, **url) -> Explorer:
    catalog = catalog or [{"year": year, "url": str(store), "label": str(year)}]
    state = Explorer(catalog, UrlState(**url), source_factory=ZarrSource)
    await state.open_year(year)
    state.year = year
    await state.settle()
    return state


def read_array(array: Path) -> np.ndarray:
    """All of a Zarr array by zarr-python, read-only. zarr-python decodes each 4x4-px inner chunk in Python,
    seconds for a zone of the session's store, and the tests ask for the same arrays again and again: a read is
    kept while no file of the array changes (path, size and mtime of each, so a rebuilt store is read anew)."""
    files = tuple(sorted((str(f), st.st_size, st.st_mtime_ns) for f in Path(array).rglob("*") if f.is_file()
                         for st in [f.stat()]))
    return _read_array(str(array), files)


@functools.lru_cache(maxsize=64)
def _read_array(array: str, files: tuple) -> np.ndarray:
    a = zarr.open_array(array, mode="r")[:]
    a.flags.writeable = False
    return a


def zone_vectors(store: Path, zone: str) -> np.ndarray:
    """The zone's dequantised embeddings (H, W, B), NaN where there is no data (plain zarr-python + numpy)."""
    g = Path(store) / zone
    return read_array(g / "embeddings").astype(np.float32) * read_array(g / "scales")[..., None]


def level_vectors(store: Path, zone: str, k: int):
    """Overview level k by zarr-python + numpy: (its code's reconstructed vectors (H, W, B) float32, NaN where
    no data; the level's spatial:transform; the zone's EPSG code)."""
    g = zarr.open_group(store / zone, mode="r")
    item = next(it for it in g.attrs["tessera-ovr:levels"] if it["level"] == k)
    o = Path(store) / zone / "overviews"
    coords = read_array(o / f"{k}/code").astype(np.float32) * read_array(o / f"{k}/code_scales")[..., None]
    vec = coords @ read_array(o / "code_basis") + read_array(o / "code_mean")
    return vec, item["spatial:transform"], int(g.attrs["proj:code"].split(":")[1])


def level_full(store: Path, zone: str, k: int):
    """Overview level k by zarr-python + numpy: (its full vectors (H, W, B) float32, NaN where no data; the
    level's spatial:transform; the zone's EPSG code). Level 0 is the zone's own arrays."""
    g = zarr.open_group(Path(store) / zone, mode="r")
    epsg = int(g.attrs["proj:code"].split(":")[1])
    if k == 0:
        return zone_vectors(store, zone), g.attrs["spatial:transform"], epsg
    item = next(it for it in g.attrs["tessera-ovr:levels"] if it["level"] == k)
    o = Path(store) / zone / "overviews" / str(k)
    vec = read_array(o / "embeddings").astype(np.float32) * read_array(o / "scales")[..., None]
    return vec, item["spatial:transform"], epsg


def level_change(on: Path, other: Path, zone: str, k: int, window, read=level_vectors) -> np.ndarray:
    """1 - cosine of level k's vectors as `read` gives them (level_vectors: the code's reconstructions; level_full:
    the full vectors; zarr-python + numpy) of two year stores over `window` of the store `on`'s level grid; the
    other store's level grid is aligned by its spatial:transform (NaN off it)."""
    va, ta, _ = read(on, zone, k)
    vb, tb, _ = read(other, zone, k)
    dr, dc = round((tb[5] - ta[5]) / ta[0]), round((ta[2] - tb[2]) / ta[0])
    r0, r1, c0, c1 = window
    b = np.full((r1 - r0, c1 - c0, vb.shape[-1]), np.nan)
    rows, cols = np.arange(r0, r1) + dr, np.arange(c0, c1) + dc
    ri, ci = (rows >= 0) & (rows < vb.shape[0]), (cols >= 0) & (cols < vb.shape[1])
    b[np.ix_(ri, ci)] = vb[np.ix_(rows[ri], cols[ci])]
    a = va[r0:r1, c0:c1].astype(np.float64)
    with np.errstate(invalid="ignore"):
        return 1 - (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def pixel_lonlat(store: Path, zone: str, row: int, col: int) -> tuple[float, float]:
    g = zarr.open_group(store / zone, mode="r")
    t = g.attrs["spatial:transform"]
    epsg = int(g.attrs["proj:code"].split(":")[1])
    e, n = t[2] + (col + 0.5) * 10, t[5] - (row + 0.5) * 10
    lon, lat = Transformer.from_crs(epsg, 4326, always_xy=True).transform(e, n)
    return float(lon), float(lat)


def centre_of_data(store: Path, zone: str) -> tuple[float, float]:
    v = zone_vectors(store, zone)
    rows, cols = np.nonzero(np.isfinite(v[..., 0]))
    return pixel_lonlat(store, zone, int(rows.mean()), int(cols.mean()))


def training_pixels(store: Path, zone: str, world, year: int, per_class: int = 8, seed: int = 1):
    """(rows, cols, class) of labelled pixels: `per_class` valid pixels of each demo class present (true classes)."""
    v = zone_vectors(store, zone)
    rows, cols = np.nonzero(np.isfinite(v[..., 0]))
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(rows), min(len(rows), 600), replace=False)
    rows, cols = rows[pick], cols[pick]
    ll = np.array([pixel_lonlat(store, zone, int(r), int(c)) for r, c in zip(rows, cols)])
    cls = world.classes(ll[:, 0], ll[:, 1], year)
    out = []
    for k in np.unique(cls):
        idx = np.nonzero(cls == k)[0][:per_class]
        if len(idx) >= 3:
            out += [(int(rows[i]), int(cols[i]), int(k)) for i in idx]
    return out


def cosines(sub: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Cosine of every vector of `sub` (..., B) with `t` (numpy, independent of the explorer)."""
    return sub @ t / (np.linalg.norm(sub, axis=-1) * np.linalg.norm(t))


async def pin_three(state, store: Path, zone: str = "utm30") -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Pin three valid pixels of `zone` (the 10th, 500th and 900th in row-major order); (zone vectors, their rows/cols)."""
    v = zone_vectors(store, zone)
    rc = [tuple(map(int, x)) for x in np.argwhere(np.isfinite(v[..., 0]))[[10, 500, 900]]]
    for r, c in rc:
        await state.select(*pixel_lonlat(store, zone, r, c))
        state.pin()
    return v, rc
