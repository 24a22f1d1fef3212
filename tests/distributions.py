"""Test-only writers of the upstream distributions the reader opens, straight through zarr-python.

Each writer draws its own values (a seeded generator), writes them in the distribution's layout and
returns them, so a test compares what the reader returns with these arrays, never with the reader's own
reads.  Nothing here comes from the builder's store code or from builder.reader.

* `write_geoemb_v2`: a `geoemb:` store of a v2 model with the nested-depth arrays `embeddings_d4`,
  `embeddings_d16` (root `geoemb:depths`), each the first D bands of `embeddings` byte for byte, with
  larger inner chunks, and their `band_d{D}` coordinates (`depth_names`: another name for a depth's array);
  `add_depth_array` adds one of any band count (more than the embeddings', none) to a zone of such a store.
* `write_dclimate`: the dClimate v1.1 plain Zarr copy: the geoemb: layout (time, band, y, x) with
  256 x 256 x 128 inner chunks, PCodec-encoded scales (numcodecs' `pcodec`), per-pixel quality arrays
  (`s2_obs_count`, `s1_asc_obs_count`, `s1_desc_obs_count`, `s2_month_covered`, `s1_month_covered`)
  and `years_complete` on each zone group (a year not listed reads as no data).

Values: int8 in [-127, 127]; scales finite > 0 on valid pixels, NaN on water, +inf on land without data,
so every status appears in every zone and year.  Zone grids are shard-aligned in EPSG:326NN; a southern
zone lies at negative northings (the northern CRS extended south).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BloscCodec
from zarr.codecs.numcodecs import PCodec

from geoemb_writer import CONVENTION

GSD = 10.0
BANDS = 128
QUALITY = ("s2_obs_count", "s1_asc_obs_count", "s1_desc_obs_count", "s2_month_covered", "s1_month_covered")


@dataclass
class ZoneTruth:
    """What a writer put in one zone: its grid and the (T, B, H, W) / (T, H, W) arrays, by year index."""

    name: str
    x0: float
    y1: float  # top edge (EPSG:326NN; negative in the south)
    emb: np.ndarray
    scales: np.ndarray
    quality: dict = field(default_factory=dict)

    def pixel_centre(self, row: int, col: int) -> tuple[float, float]:
        return self.x0 + (col + 0.5) * GSD, self.y1 - (row + 0.5) * GSD


@dataclass
class Truth:
    path: Path
    years: list[int]
    zones: dict[str, ZoneTruth]
    years_complete: list[int] | None = None


def _values(rng, T: int, H: int, W: int) -> tuple[np.ndarray, np.ndarray]:
    """Random (T, B, H, W) int8 and (T, H, W) float32 scales with water (NaN) and no data (+inf) patches;
    embeddings are 0 where the scale is not finite (as the writer upstream leaves them)."""
    emb = rng.integers(-127, 128, size=(T, BANDS, H, W), dtype=np.int8)
    scl = rng.uniform(0.001, 0.05, size=(T, H, W)).astype(np.float32)
    scl[:, : H // 8, : W // 8] = np.nan  # water in the top-left corner
    scl[:, H - H // 8:, W - W // 8:] = np.inf  # land without data in the bottom-right one
    emb[np.broadcast_to(~np.isfinite(scl)[:, None], emb.shape)] = 0
    return emb, scl


def _root(path: Path, model: str, extra: dict | None = None):
    root = zarr.open_group(zarr.storage.LocalStore(path), mode="w", zarr_format=3)
    root.attrs.update({
        "zarr_conventions": [CONVENTION], "geoemb:type": "pixel", "geoemb:dimensions": BANDS,
        "geoemb:model": f"https://example.org/tessera/{model}", "geoemb:data_type": "int8", "geoemb:gsd": GSD,
        "geoemb:spatial_layout": "utm_zones", "geoemb:build_version": "tests/distributions",
        "geoemb:quantization": {"method": "per_pixel_scale", "original_dtype": "float32", "quantized_dtype": "int8",
                                "scale": {"type": "array", "array_name": "scales", "nodata": "+inf"}},
        **(extra or {})})
    return root


def _zone_group(root, zone: int, x0: float, y1: float, H: int, W: int, years: list[int], attrs: dict | None = None):
    g = root.create_group(f"utm{zone:02d}")
    g.attrs.update({"proj:code": f"EPSG:{32600 + zone}", "spatial:dimensions": ["y", "x"],
                    "spatial:transform": [GSD, 0.0, x0, 0.0, -GSD, y1],
                    "spatial:bbox": [x0, y1 - H * GSD, x0 + W * GSD, y1],
                    "spatial:shape": [H, W], "spatial:registration": "pixel", **(attrs or {})})
    blosc = BloscCodec(cname="zstd", clevel=3)
    for name, values in (("x", x0 + (np.arange(W) + 0.5) * GSD), ("y", y1 - (np.arange(H) + 0.5) * GSD),
                         ("time", np.array(years, dtype=np.int32)), ("band", np.arange(BANDS, dtype=np.int32))):
        a = g.create_array(name, shape=values.shape, dtype=values.dtype, chunks=values.shape, compressors=[blosc],
                           dimension_names=[name])
        a[:] = values
    return g


DEPTH_CHUNK = {4: 128, 16: 64}  # inner chunk edges of the depth arrays: 64 KiB a chunk, as the 32 x 32 x 128 one


def write_geoemb_v2(path: Path, *, years=(2023, 2024), depths=(4, 16), seed: int = 2,
                    depth_names: dict[int, str] | None = None) -> Truth:
    """One northern zone (utm30, 512 x 512 px over Sussex west of Greenwich), shards 256, inner chunks 32
    (full vectors) and DEPTH_CHUNK (depth arrays: larger chunks of fewer bands).  `depth_names`: the array name of
    a depth D when not `embeddings_d{D}` (e.g. {16: "embeddings_d016"})."""
    years = list(years)
    rng = np.random.default_rng(seed)
    root = _root(path, "v2-beta", {"geoemb:depths": list(depths)})
    blosc = BloscCodec(cname="zstd", clevel=3)
    zone, x0, y1, H, W = 30, 691_200.0, 5_652_480.0, 512, 512
    g = _zone_group(root, zone, x0, y1, H, W, years)
    emb, scl = _values(rng, len(years), H, W)
    e = g.create_array("embeddings", shape=emb.shape, dtype="int8", fill_value=0, shards=(1, BANDS, 256, 256),
                       chunks=(1, BANDS, 32, 32), compressors=[blosc], dimension_names=["time", "band", "y", "x"])
    e[:] = emb
    for d in depths:
        chunk = DEPTH_CHUNK[d]
        name = (depth_names or {}).get(d, f"embeddings_d{d}")
        a = g.create_array(name, shape=(len(years), d, H, W), dtype="int8", fill_value=0,
                           shards=(1, d, 256, 256), chunks=(1, d, chunk, chunk),
                           compressors=[blosc], dimension_names=["time", f"band_d{d}", "y", "x"])
        a[:] = emb[:, :d]
        c = g.create_array(f"band_d{d}", shape=(d,), dtype="int32", chunks=(d,), dimension_names=[f"band_d{d}"])
        c[:] = np.arange(d, dtype=np.int32)
    s = g.create_array("scales", shape=scl.shape, dtype="float32", fill_value=np.inf, shards=(1, 256, 256),
                       chunks=(1, 32, 32), compressors=[blosc], dimension_names=["time", "y", "x"])
    s[:] = scl
    zarr.consolidate_metadata(zarr.storage.LocalStore(path))
    return Truth(path, years, {f"utm{zone:02d}": ZoneTruth(f"utm{zone:02d}", x0, y1, emb, scl)})


def add_depth_array(path: Path, name: str, bands: int, zone: str = "utm30") -> None:
    """Add an int8 array `name` of `bands` bands (any number, 0 included) and the embeddings' other axes to `zone`
    of a write_geoemb_v2 store, filled with 1, and consolidate the metadata again."""
    g = zarr.open_group(str(path / zone), mode="r+")
    T, _, H, W = g["embeddings"].shape
    a = g.create_array(name, shape=(T, bands, H, W), dtype="int8", fill_value=0, chunks=(1, max(bands, 1), 64, 64),
                       dimension_names=["time", "band_x", "y", "x"])
    if bands:
        a[:] = np.ones(a.shape, np.int8)
    zarr.consolidate_metadata(zarr.storage.LocalStore(path))


# utm31 north (east of Greenwich, Sussex) and utm34 south (the Cape Peninsula, negative northings)
DCLIMATE_ZONES = ((31, 307_200.0, 5_652_480.0), (34, 256_000.0, -3_768_320.0))


def write_dclimate(path: Path, *, years=(2024, 2025), complete=(2024,), px: int = 512, seed: int = 3) -> Truth:
    """The dClimate plain copy: one group per zone (DCLIMATE_ZONES), px x px pixels each, shards 512,
    inner chunks 256 x 256 x 128 (8 MiB int8), scales chunks 256 x 256 encoded by PCodec."""
    years = list(years)
    rng = np.random.default_rng(seed)
    root = _root(path, "v1.1")
    blosc = BloscCodec(cname="zstd", clevel=3)
    zones = {}
    for zone, x0, y1 in DCLIMATE_ZONES:
        g = _zone_group(root, zone, x0, y1, px, px, years, {"years_complete": list(complete)})
        emb, scl = _values(rng, len(years), px, px)
        e = g.create_array("embeddings", shape=emb.shape, dtype="int8", fill_value=0, shards=(1, BANDS, 512, 512),
                           chunks=(1, BANDS, 256, 256), compressors=[blosc], dimension_names=["time", "band", "y", "x"])
        e[:] = emb
        s = g.create_array("scales", shape=scl.shape, dtype="float32", fill_value=np.inf, shards=(1, 512, 512),
                           chunks=(1, 256, 256), serializer=PCodec(level=8), compressors=None,
                           dimension_names=["time", "y", "x"])
        s[:] = scl
        quality = {}
        for name in QUALITY:
            dtype = np.uint16 if name.endswith("month_covered") else np.uint8
            q = rng.integers(0, 4096 if dtype == np.uint16 else 60, size=scl.shape).astype(dtype)
            a = g.create_array(name, shape=q.shape, dtype=dtype, fill_value=0, chunks=(1, 256, 256),
                               compressors=[blosc], dimension_names=["time", "y", "x"])
            a[:] = q
            quality[name] = q
        name = f"utm{zone:02d}"
        zones[name] = ZoneTruth(name, x0, y1, emb, scl, quality)
    zarr.consolidate_metadata(zarr.storage.LocalStore(path))
    return Truth(path, years, zones, list(complete))
