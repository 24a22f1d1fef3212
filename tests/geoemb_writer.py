"""A small test-only writer of `geoemb:` stores (the official multi-year layout: the
geo-embeddings `embeddings-zarr-convention` v1, as builder/core/layout.py reads it).

It writes straight through zarr-python from tiles in the geotessera layout, sharing nothing with the
builder's store code (builder/store.py, build.py, shardio.py): a reader bug that mirrored a builder bug
would otherwise go unseen.  What it keeps from the layout:

* root: `zarr_conventions` with the geoemb: uuid, geoemb:* attributes, consolidated metadata (optional);
* zone groups `utmNN` with only proj:/spatial: attributes, always the northern code EPSG:326NN, southern
  data at northings minus 10,000,000 m (negative y);
* `embeddings` int8 (T, 128, H, W) dims (time, band, y, x), fill 0; `scales` float32 (T, H, W), fill +inf;
  NaN = water (land mask), +inf = land without data; coordinate arrays x, y (pixel centres), time (years),
  band, Blosc-compressed and unsharded.

For test speed the shards are smaller than the note's 4096 (default 256, inner chunks 32 as published);
the (T, 128, H, W) order, the sentinels and the time axis are the note's.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BloscCodec

from pyproj import Transformer

from builder.geotiff import read_band, read_geoinfo

UUID = "61c12cc5-0e28-4056-999a-480cf3fb7e4c"
CONVENTION = {
    "uuid": UUID,
    "name": "geoemb:",
    "schema_url": "https://raw.githubusercontent.com/geo-embeddings/embeddings-zarr-convention/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/geo-embeddings/embeddings-zarr-convention/blob/v1/README.md",
    "description": "Geospatial embeddings",
}
GSD = 10.0
YEARS = [2023, 2024]  # the years of the conftest `tiles2` tree
SOUTH = 10_000_000.0


def read_tiles(root: Path, year: int) -> list[dict]:
    """Every tile of `year` under `root`: int8 q (H, W, B), float32 scales, land mask, EPSG and top-left corner."""
    out = []
    for d in sorted((Path(root) / "global_0.1_degree_representation" / str(year)).iterdir()):
        info = read_geoinfo(str(Path(root) / "global_0.1_degree_tiff_all" / f"{d.name}.tiff"))
        out.append({"name": d.name, "q": np.load(d / f"{d.name}.npy"), "scales": np.load(d / f"{d.name}_scales.npy"),
                    "land": read_band(str(Path(root) / "global_0.1_degree_tiff_all" / f"{d.name}.tiff")) != 0,
                    "epsg": info.epsg, "e0": info.origin_x, "n0": info.origin_y})
    return out


def northern(t: dict) -> tuple[int, float]:
    """(zone, top northing in EPSG:326NN) of a tile: southern tiles move down by the false northing."""
    epsg = t["epsg"]
    zone = epsg % 100
    return zone, t["n0"] - (SOUTH if epsg // 100 == 327 else 0.0)


def geoemb_scales(t: dict) -> np.ndarray:
    """The note's sentinels from a tile: finite on land with data, NaN on water, +inf on land without data."""
    s = np.asarray(t["scales"], dtype=np.float32).copy()
    s[t["land"] & ~np.isfinite(s)] = np.inf
    s[~t["land"]] = np.nan
    return s


def geoemb_root(out: Path):
    """An empty geoemb: root group (the note's root attributes)."""
    root = zarr.open_group(zarr.storage.LocalStore(out), mode="w", zarr_format=3)
    root.attrs.update({
        "zarr_conventions": [CONVENTION], "geoemb:type": "pixel", "geoemb:dimensions": 128,
        "geoemb:model": "https://example.org/tessera/v1.0", "geoemb:data_type": "int8", "geoemb:gsd": GSD,
        "geoemb:spatial_layout": "utm_zones", "geoemb:build_version": "tests/geoemb_writer",
        "geoemb:quantization": {"method": "per_pixel_scale", "original_dtype": "float32", "quantized_dtype": "int8",
                                "scale": {"type": "array", "array_name": "scales", "nodata": "+inf"}}})
    return root


def geoemb_zone(root, zone: int, x0: float, y1: float, H: int, W: int, years: list[int], *, shard: int = 256,
                chunk: int = 32):
    """Zone group `utmNN` (top-left corner x0, y1 in EPSG:326NN) with its coordinate arrays; returns the
    (embeddings, scales) arrays, nothing written (every pixel reads as +inf: no data)."""
    blosc = BloscCodec(cname="zstd", clevel=3)
    T = len(years)
    g = root.create_group(f"utm{zone:02d}")
    g.attrs.update({"proj:code": f"EPSG:{32600 + zone}", "spatial:dimensions": ["y", "x"],
                    "spatial:transform": [GSD, 0.0, x0, 0.0, -GSD, y1],
                    "spatial:bbox": [x0, y1 - H * GSD, x0 + W * GSD, y1],
                    "spatial:shape": [H, W], "spatial:registration": "pixel"})
    emb = g.create_array("embeddings", shape=(T, 128, H, W), dtype="int8", fill_value=0,
                         shards=(1, 128, shard, shard), chunks=(1, 128, chunk, chunk), compressors=[blosc],
                         dimension_names=["time", "band", "y", "x"], config={"write_empty_chunks": False})
    scl = g.create_array("scales", shape=(T, H, W), dtype="float32", fill_value=np.inf,
                         shards=(1, shard, shard), chunks=(1, chunk, chunk), compressors=[blosc],
                         dimension_names=["time", "y", "x"], config={"write_empty_chunks": False})
    for name, values in (("x", x0 + (np.arange(W) + 0.5) * GSD), ("y", y1 - (np.arange(H) + 0.5) * GSD),
                         ("time", np.array(years, dtype=np.int32)), ("band", np.arange(128, dtype=np.int32))):
        a = g.create_array(name, shape=values.shape, dtype=values.dtype, chunks=values.shape, compressors=[blosc],
                           dimension_names=[name])
        a[:] = values
    return emb, scl


def write_geoemb(tiles_root: Path, years: list[int], out: Path, *, shard: int = 256, chunk: int = 32,
                 consolidated: bool = True) -> Path:
    tiles = {y: read_tiles(tiles_root, y) for y in years}
    step = shard * GSD
    zones: dict[int, list[tuple[float, float, float, float]]] = {}
    for ts in tiles.values():
        for t in ts:
            zone, n0 = northern(t)
            h, w = t["q"].shape[:2]
            zones.setdefault(zone, []).append((t["e0"], n0 - h * GSD, t["e0"] + w * GSD, n0))
    root = geoemb_root(out)
    for zone, boxes in sorted(zones.items()):
        x0 = math.floor(min(b[0] for b in boxes) / step) * step
        y1 = math.ceil(max(b[3] for b in boxes) / step) * step
        x1 = math.ceil(max(b[2] for b in boxes) / step) * step
        y0 = math.floor(min(b[1] for b in boxes) / step) * step
        H, W = round((y1 - y0) / GSD), round((x1 - x0) / GSD)
        emb, scl = geoemb_zone(root, zone, x0, y1, H, W, years, shard=shard, chunk=chunk)
        for ti, y in enumerate(years):
            e_full = np.zeros((128, H, W), dtype=np.int8)
            s_full = np.full((H, W), np.inf, dtype=np.float32)
            for t in tiles[y]:  # in name order; a later tile's data wins where both have data
                z, n0 = northern(t)
                if z != zone:
                    continue
                h, w = t["q"].shape[:2]
                r, c = round((y1 - n0) / GSD), round((t["e0"] - x0) / GSD)
                s = geoemb_scales(t)
                has = np.isfinite(s) | ~np.isfinite(s_full[r:r + h, c:c + w])
                s_full[r:r + h, c:c + w] = np.where(has, s, s_full[r:r + h, c:c + w])
                q = np.where(np.isfinite(s)[..., None], t["q"], 0).transpose(2, 0, 1)
                e_full[:, r:r + h, c:c + w] = np.where(has[None], q, e_full[:, r:r + h, c:c + w])
            emb[ti] = e_full
            scl[ti] = s_full
    if consolidated:
        zarr.consolidate_metadata(zarr.storage.LocalStore(out))
    return out


def tile_points(tiles_root: Path, year: int, layout: str) -> list[dict]:
    """Pixel centres of the tiles with what a reader must return there, straight from the tile files:
    valid land pixels, the land gap (NaN scale on land: no data) and water (v1: nodata, geoemb: water)."""
    rng = np.random.default_rng(year)
    pts = []
    for t in read_tiles(tiles_root, year):
        land, s = t["land"], t["scales"]
        valid = np.argwhere(land & np.isfinite(s))
        picks = [("valid", tuple(valid[k])) for k in rng.choice(len(valid), min(4, len(valid)), replace=False)]
        gap = np.argwhere(land & np.isnan(s))
        water = np.argwhere(~land)
        if len(gap):
            picks.append(("nodata", tuple(gap[0])))
        if len(water):
            picks.append(("water" if layout == "geoemb:" else "nodata", tuple(water[len(water) // 2])))
        to_ll = Transformer.from_crs(t["epsg"], 4326, always_xy=True)
        for status, (i, j) in picks:
            e, n = t["e0"] + (j + 0.5) * 10, t["n0"] - (i + 0.5) * 10
            lon, lat = to_ll.transform(e, n)
            vec = t["q"][i, j].astype(np.float32) * np.float32(s[i, j]) if status == "valid" else None
            zone, n_north = northern(t)
            pts.append({"lon": lon, "lat": lat, "status": status, "vector": vec, "zone": f"utm{zone:02d}",
                        "e": e, "n": (n - t["n0"] + n_north) if layout == "geoemb:" else n,
                        # v1: the builder masks water with NaN; geoemb: the note's sentinels
                        "scale": (float(s[i, j]) if land[i, j] else float("nan")) if layout == "tessera:v1"
                        else float(geoemb_scales(t)[i, j])})
    return pts
