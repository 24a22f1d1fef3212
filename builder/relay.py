"""Tiles from a store: `python -m builder build --from-store URL --bbox W,S,E,N --year Y --out DIR`.

Re-lays a region of any store builder.reader opens (a `geoemb:` store, the dClimate plain copy, a
`tessera:` v1 store) as TESSERA tiles in the geotessera layout (builder/tiles.py) in a cache, so the
ordinary build turns them into a `tessera:` v1 year store with overviews and `global_rgb`: the same path
as tiles on disk or from an HTTP mirror (builder/mirror/), whose per-bbox view this reuses.

A tile is one TILE_PX x TILE_PX block of the source zone's own grid (rows and columns from its origin),
so its content does not depend on the bbox and two bboxes sharing a block write the same tile; the region
built is the bbox rounded out to those blocks.  Blocks with no valid pixel are not written.  A block of a
geoemb: zone grid (EPSG:326NN extended south) that crosses the equator is cut in two, and its southern
part becomes a tile in EPSG:327NN, as a tessera: v1 store keeps southern data.  What a tile holds:

* embeddings int8 (h, w, 128), 0 where there is no data; scales float32, finite on valid pixels and NaN
  elsewhere (the tile format has no +inf);
* a land mask (its GeoTIFF carries the CRS and origin): 0 where the source says water, 1 elsewhere.

Each file is written whole or not at all (builder/atomic.py).
"""
from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import numpy as np
from pyproj import Transformer

from builder.core import convention as conv
from builder.atomic import write_bytes
from builder.errors import BuildError
from builder.geotiff import write_geotiff
from builder.core.layout import VALID, WATER
from builder.tiles import EMBEDDINGS_DIR, LANDMASKS_DIR, grid_name

TILE_PX = 512
SOUTH = 10_000_000.0  # false northing of EPSG:327NN
NAME_STEPS = 9  # a tile whose rounded centre names another zone's tile moves its name 0.01 degree north, at most this


def _save_npy(path: Path, a: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, a)
    write_bytes(path, buf.getvalue())


def _blocks(a: int, b: int) -> range:
    """Indexes of the TILE_PX blocks that pixels a:b meet."""
    return range(a // TILE_PX, (b - 1) // TILE_PX + 1) if b > a else range(0)


def _pieces(grid, r0: int, r1: int):
    """(r0, r1, epsg, top northing) of rows r0:r1 of a zone grid: one piece, or two when a northern-CRS grid
    crosses the equator (its rows below northing 0 go to EPSG:327NN)."""
    n0 = grid.origin_n - r0 * grid.pixel
    if grid.south:
        return [(r0, r1, 32700 + grid.zone, n0)]
    eq = int(round(grid.origin_n / grid.pixel))  # the first row whose top is at or below northing 0
    out = []
    if r0 < min(r1, eq):
        out.append((r0, min(r1, eq), 32600 + grid.zone, n0))
    if max(r0, eq) < r1:
        out.append((max(r0, eq), r1, 32700 + grid.zone, grid.origin_n - max(r0, eq) * grid.pixel + SOUTH))
    return out


def _name(epsg: int, e0: float, n0: float, h: int, w: int, taken: dict, owner) -> str:
    half = conv.PIXEL_SIZE / 2
    lon, lat = Transformer.from_crs(epsg, 4326, always_xy=True).transform(e0 + w * half, n0 - h * half)
    for step in range(NAME_STEPS + 1):
        name = grid_name(lon, lat + 0.01 * step)
        if taken.setdefault(name, owner) == owner:
            return name
    raise BuildError(f"no free tile name near {grid_name(lon, lat)} (tiles of {NAME_STEPS + 1} zones meet there)")


def write_tiles(store, bbox, year: int, root: Path) -> list[tuple[int, str]]:
    """Write the tiles of `store`'s region `bbox` for `year` under `root`; (year, name) of each."""
    from builder.reader.region import window
    zones = store.zones(year)
    hits = {n: w for n, z in zones.items() if (w := window(z, bbox)) is not None}
    if not hits:
        raise BuildError(f"bbox {bbox} covers no zone of the store in {year} (zones {', '.join(zones)})", store.url)
    taken: dict[str, object] = {}
    out = []
    for zname, (r0, r1, c0, c1) in sorted(hits.items()):
        view = store.view(zname, year)
        grid = zones[zname].grid
        for bi in _blocks(r0, r1):
            for bj in _blocks(c0, c1):
                rows = (bi * TILE_PX, min((bi + 1) * TILE_PX, grid.height))
                cols = (bj * TILE_PX, min((bj + 1) * TILE_PX, grid.width))
                for a, b, epsg, n0 in _pieces(grid, *rows):
                    q, s = view.box(slice(a, b), slice(*cols))
                    status = view.layout.classify(s)
                    valid = status == VALID
                    if not valid.any():
                        continue
                    e0 = grid.origin_e + cols[0] * grid.pixel
                    name = _name(epsg, e0, n0, b - a, cols[1] - cols[0], taken, (zname, bi, bj, epsg))
                    d = root / EMBEDDINGS_DIR / str(year) / name
                    d.mkdir(parents=True, exist_ok=True)
                    _save_npy(d / f"{name}.npy", np.where(valid[..., None], q, np.int8(0)).astype(np.int8))
                    _save_npy(d / f"{name}_scales.npy", np.where(valid, s, np.float32(np.nan)).astype(np.float32))
                    (root / LANDMASKS_DIR).mkdir(parents=True, exist_ok=True)
                    write_geotiff(str(root / LANDMASKS_DIR / f"{name}.tiff"), (status != WATER).astype(np.uint8),
                                  epsg, e0, n0)
                    out.append((year, name))
    if not out:
        raise BuildError(f"no pixel with data in bbox {bbox} in {year}", store.url)
    return out


def prepare(url: str, bbox, years: list[int], cache: Path, quiet: bool = False,
            keep: dict[int, set[str]] | None = None) -> Path:
    """Re-lay the bbox of each year of the store at `url` into the cache; return the tile root the build reads
    (the mirror's per-bbox view: these tiles and the ones each year's store already holds, `keep`)."""
    from builder.mirror import _refuse_inside_store, cache_dir_for, make_view
    from builder.reader import open_store
    t0 = time.time()
    try:
        store = open_store(url)
        for y in years:
            store.year(y)
    except ValueError as e:
        raise BuildError(str(e)) from None
    cache = Path(cache)
    _refuse_inside_store(cache)
    root = cache_dir_for(cache, url)
    try:
        tiles = [t for y in years for t in write_tiles(store, bbox, y, root)]
    except ValueError as e:  # the reader's one-line refusals (a zone's arrays, a depth, ...)
        raise BuildError(str(e), url) from None
    kept = [(y, n) for y, names in (keep or {}).items() for n in names]
    if not quiet:
        print(f"{url}: {len(tiles)} tiles re-laid from its {store.layout} zones into {root} "
              f"in {time.time() - t0:.1f}s", file=sys.stderr)
    return make_view(root, bbox, sorted(set(tiles) | set(kept)))


def tiles_from_args(a, default_cache: Path, records: dict) -> str:
    """cli glue: the tile root for `build --from-store URL --bbox W,S,E,N`; `records`: each year's build record
    (a builder.sink.Sink), whose tiles the view keeps."""
    from builder.mirror import FLAGS, stored_tiles
    from builder.mirror.manifest import parse_bbox
    if a.tiles is not None or a.mirror is not None:
        raise BuildError("give one of TILES, --from URL or --from-store URL")
    if any(getattr(a, name) for name in FLAGS):
        raise BuildError(f"{', '.join(FLAGS.values())} go with --from URL, not --from-store")
    if not a.bbox:
        raise BuildError("--from-store needs --bbox W,S,E,N")
    cache = Path(a.cache) if a.cache else default_cache / "relay"
    return str(prepare(a.from_store, parse_bbox(a.bbox), list(a.year), cache, quiet=a.quiet,
                       keep=stored_tiles(records)))
