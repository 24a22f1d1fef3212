"""Deterministic SYNTHETIC TESSERA tiles over real places, with their ground truth (the embedded default).

The tiles are written in the real geotessera layout (see builder.tiles) and then built through exactly the
same code path as real tiles.  They are not model output: the stores built from them say so in
tessera:model_version.  The land/water mask is real (global-land-mask, from GLOBE's 1 km grid).

Places: the Sussex coast either side of the Greenwich meridian (UTM zones 30 and 31, north) and the Cape
Peninsula (zone 34, south, false northing), as small tiles; and the dense site, three whole 0.1 degree
tiles side by side inland in Sussex (either side of the meridian), where data fill a 1600 x 1000 screen at
10 m per screen pixel.

The vectors come from the realistic world (builder/synth/): fields, woods, towns, roads, rivers and hedges,
with embeddings calibrated to behave like real TESSERA vectors (docs/demo.md).  `--easy` writes
the earlier generator's tiles instead (builder/synth/easy.py: nearly low-rank, cleanly separable classes).

Ground truth is written beside the tiles, in ROOT/ground_truth/:
    {year}/grid_{lon}_{lat}_classes.tiff      uint8 land-cover class per pixel (255: water, no data), the
                                              tile's CRS and grid
    {year}/grid_{lon}_{lat}_parcels.tiff      uint32 parcel number (0: water, or a world without parcels)
    change_{y0}_{y1}/grid_{lon}_{lat}.tiff    uint8 1 where the class changed from y0 to y1, 0 where not, 255 water
    labels_{year}.geojson                     reference labels: LABELS_PER_CLASS points of each class, stratified
                                              over the tiles, in the explorer's label file format
    classes.json                              the class names and colours, in class order
"""
from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
from global_land_mask import globe
from pyproj import Transformer

from builder.core import convention as conv
from builder.core.truthclasses import NO_DATA  # the demo's class rasters use the truth stores' no-class value
from builder.atomic import write_bytes
from builder.geotiff import write_geotiff
from builder.synth.easy import EasyWorld
from builder.synth.embedding import World
from builder.synth.landscape import CLASS_COLOURS, CLASSES
from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR, grid_name

MODEL_VERSION = "synthetic-demo-2"  # the realistic world
EASY_MODEL_VERSION = "synthetic-demo-1"  # the easy one (builder/synth/easy.py)
YEARS = (2023, 2024)
PLACES = [(-0.05, 50.85), (0.05, 50.85), (-0.05, 50.75), (0.05, 50.75), (18.45, -33.95), (18.45, -34.05)]
DENSE = [(-0.15, 50.95), (-0.05, 50.95), (0.05, 50.95)]  # whole 0.1 degree tiles: the dense site
TRUTH_DIR = "ground_truth"
LABELS_PER_CLASS = 100
BLOCK_ROWS = 128

__all__ = ["World", "EasyWorld", "MODEL_VERSION", "EASY_MODEL_VERSION", "YEARS", "PLACES", "DENSE", "write_tile",
           "write_demo_tiles", "tile_origin", "cell_shape"]


def _utm_epsg(lon: float, lat: float) -> int:
    zone = max(1, min(60, int(np.floor((lon + 180) / 6)) + 1))
    return conv.epsg_for_zone(zone, lat < 0)


def tile_origin(lon: float, lat: float, px: int | tuple[int, int], epsg: int) -> tuple[float, float]:
    """Top-left corner (10 m aligned) of a px x px (or rows x cols) window centred on the cell centre."""
    rows, cols = (px, px) if isinstance(px, int) else px
    e, n = Transformer.from_crs(4326, epsg, always_xy=True).transform(lon, lat)
    return float(np.round(e / 10) * 10 - cols // 2 * 10), float(np.round(n / 10) * 10 + rows // 2 * 10)


def cell_shape(lon: float, lat: float, margin: int = 2) -> tuple[int, int]:
    """(rows, cols) of a window centred on a 0.1 degree cell that covers all of it in its UTM CRS, with `margin`
    pixels more on each side, so that tiles of adjacent cells overlap instead of leaving a gap."""
    epsg = _utm_epsg(lon, lat)
    t = Transformer.from_crs(4326, epsg, always_xy=True)
    e, n = t.transform([lon - 0.05, lon + 0.05, lon - 0.05, lon + 0.05], [lat - 0.05, lat - 0.05, lat + 0.05, lat + 0.05])
    ce, cn = t.transform(lon, lat)
    half_w = max(abs(x - ce) for x in e)
    half_h = max(abs(y - cn) for y in n)
    return 2 * (math.ceil(half_h / 10) + margin), 2 * (math.ceil(half_w / 10) + margin)


def write_tile(root: Path, year: int, lon: float, lat: float, px: int | tuple[int, int] = 384, *,
               world: World | EasyWorld | None = None, epsg: int | None = None,
               origin: tuple[float, float] | None = None, name: str | None = None, gap: bool = True,
               truth: bool = False) -> Path:
    """Write one synthetic tile (embeddings, scales, landmask) in the geotessera layout; `px` is the edge of a
    square tile or (rows, cols), e.g. cell_shape(lon, lat) for a whole 0.1 degree tile.  With `truth`, its
    ground-truth class and parcel rasters too (ROOT/ground_truth/{year}/)."""
    world = world or World()
    epsg = epsg or _utm_epsg(lon, lat)
    oe, on = origin or tile_origin(lon, lat, px, epsg)
    name = name or grid_name(lon, lat)
    rows, cols = (px, px) if isinstance(px, int) else px
    e = oe + (np.arange(cols) + 0.5) * 10
    n = on - (np.arange(rows) + 0.5) * 10
    q = np.zeros((rows, cols, world.n_bands), np.int8)
    scale = np.zeros((rows, cols), np.float32)
    cls = np.zeros((rows, cols), np.uint8)
    parcels = np.zeros((rows, cols), np.uint32)
    land = np.zeros((rows, cols), bool)
    to_lonlat = Transformer.from_crs(epsg, 4326, always_xy=True)
    for r in range(0, rows, BLOCK_ROWS):  # a block of rows at a time: a whole tile's float vectors are ~400 MB
        ee, nn = np.meshgrid(e, n[r:r + BLOCK_ROWS])
        glon, glat = to_lonlat.transform(ee, nn)
        land[r:r + BLOCK_ROWS] = globe.is_land(glat, glon)
        v, cls[r:r + BLOCK_ROWS], p = world.draw(glon, glat, year)
        q[r:r + BLOCK_ROWS], scale[r:r + BLOCK_ROWS] = conv.quantise(v)
        if p is not None:
            parcels[r:r + BLOCK_ROWS] = p
    scale[~land] = 0.0  # the model writes water too; the mask removes it
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
    if truth:
        t = root / TRUTH_DIR / str(year)
        t.mkdir(parents=True, exist_ok=True)
        write_geotiff(str(t / f"{name}_classes.tiff"), np.where(land, cls, NO_DATA).astype(np.uint8), epsg, oe, on)
        write_geotiff(str(t / f"{name}_parcels.tiff"), np.where(land, parcels, 0).astype(np.uint32), epsg, oe, on)
    return d


def _save_npy(path: Path, a: np.ndarray) -> None:
    """np.save, whole or not at all (builder/atomic.py): a killed demo never leaves a truncated tile."""
    buf = io.BytesIO()
    np.save(buf, a)
    write_bytes(path, buf.getvalue())


def _write_job(item) -> Path:
    root, world, (year, lon, lat, shape) = item
    return write_tile(root, year, lon, lat, shape, world=world, truth=True)


def write_demo_tiles(root: Path, years=YEARS, px: int = 384, places=PLACES, dense: bool = True,
                     easy: bool = False, workers: int = 1) -> list[Path]:
    """The demo's tiles (the small ones at `places`, and the dense site's whole tiles unless `dense` is False),
    with their ground truth: class and parcel rasters, change rasters between consecutive years, and reference
    labels per year; on `workers` processes."""
    root = Path(root)
    world = EasyWorld() if easy else World()
    tiles = [(lon, lat, px) for lon, lat in places] + ([(lon, lat, cell_shape(lon, lat)) for lon, lat in DENSE]
                                                       if dense else [])
    jobs = [(y, lon, lat, shape) for y in years for lon, lat, shape in tiles]
    if len(jobs) > 1 and workers > 1:  # tiles are independent: one per core (a whole tile takes seconds)
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=multiprocessing.get_context("spawn")) as pool:
            out = list(pool.map(_write_job, [(root, world, job) for job in jobs]))
    else:
        out = [_write_job((root, world, job)) for job in jobs]
    write_truth(root, sorted(years), [grid_name(lon, lat) for lon, lat, _ in tiles],
                getattr(world, "class_names", CLASSES))
    return out


def write_truth(root: Path, years: list[int], names: list[str], class_names) -> None:
    """The change rasters and reference labels (from the class rasters write_tile wrote) and classes.json."""
    from builder.geotiff import read_geoinfo
    import tifffile
    base = root / TRUTH_DIR
    colours = dict(zip(CLASSES, CLASS_COLOURS))
    classes = [{"class": i, "name": c, "color": colours.get(c, CLASS_COLOURS[i % len(CLASS_COLOURS)])}
               for i, c in enumerate(class_names)]
    write_bytes(base / "classes.json", json.dumps(classes, indent=1).encode())
    for y0, y1 in zip(years, years[1:]):
        d = base / f"change_{y0}_{y1}"
        d.mkdir(parents=True, exist_ok=True)
        for name in names:
            a = tifffile.imread(base / str(y0) / f"{name}_classes.tiff")
            b = tifffile.imread(base / str(y1) / f"{name}_classes.tiff")
            info = read_geoinfo(str(base / str(y1) / f"{name}_classes.tiff"))
            change = np.where((a == NO_DATA) | (b == NO_DATA), NO_DATA, (a != b).astype(np.uint8)).astype(np.uint8)
            write_geotiff(str(d / f"{name}.tiff"), change, info.epsg, info.origin_x, info.origin_y)
    for y in years:
        write_bytes(base / f"labels_{y}.geojson", json.dumps(reference_labels(base, y, names, classes)).encode())


def reference_labels(base: Path, year: int, names: list[str], classes: list[dict]) -> dict:
    """LABELS_PER_CLASS points of each class (fewer where a class has fewer pixels), drawn with a fixed seed from
    every tile's pixels of the class, as a GeoJSON FeatureCollection the explorer imports (class, year, color)."""
    import tifffile
    from builder.geotiff import read_geoinfo
    rng = np.random.default_rng(year)
    pts: dict[int, list] = {c["class"]: [] for c in classes}
    for name in names:
        path = base / str(year) / f"{name}_classes.tiff"
        cls = tifffile.imread(path)
        info = read_geoinfo(str(path))
        to_lonlat = Transformer.from_crs(info.epsg, 4326, always_xy=True)
        for c in pts:
            rows, cols = np.nonzero(cls == c)
            if len(rows):
                pick = rng.choice(len(rows), min(len(rows), LABELS_PER_CLASS), replace=False)
                e = info.origin_x + (cols[pick] + 0.5) * 10
                n = info.origin_y - (rows[pick] + 0.5) * 10
                pts[c].extend(zip(*to_lonlat.transform(e, n)))
    features = []
    for c in classes:
        found = pts[c["class"]]
        for i in (rng.choice(len(found), min(len(found), LABELS_PER_CLASS), replace=False) if found else []):
            lon, lat = found[i]
            features.append({"type": "Feature", "geometry": {"type": "Point", "coordinates": [round(lon, 7), round(lat, 7)]},
                             "properties": {"class": c["name"], "year": year, "color": c["color"]}})
    return {"type": "FeatureCollection", "features": features}
