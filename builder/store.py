"""Zarr v3 layout of a year store: creating zone groups and their arrays.

zarr-python does the format work (sharding codec, Blosc, metadata); this
module only decides shapes, codecs and attributes from the convention.
zarr's LocalStore writes each key to a temporary file and renames it into
place, so a shard is either absent or complete on disk, never half-written.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import jsonschema
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec

from builder import convention as conv
from builder.describe import TESSERA, StoreError, describe
from builder.atomic import PARTIAL
from builder.errors import BuildError
from builder.grid import ZoneGrid

SHARDED = ("embeddings", "scales", "rgb")


@dataclass(frozen=True)
class Layout:
    shard: int = conv.SHARD
    chunk: int = conv.CHUNK
    cname: str = "zstd"
    clevel: int = 3

    def compressor(self, dtype: str) -> BloscCodec:
        # Bit-shuffling int8/uint8 groups the slowly varying high bits of neighbouring
        # values (measured on demo shards: 1.15x vs 1.03x with byte shuffle); byte
        # shuffle suits the float32 scales.
        shuffle = "bitshuffle" if np.dtype(dtype).itemsize == 1 else "shuffle"
        return BloscCodec(cname=self.cname, clevel=self.clevel, shuffle=shuffle)


def read_root(path: Path) -> dict | None:
    """The root zarr.json of the group at `path` (a directory), or None when there is no group there."""
    meta = Path(path) / "zarr.json"
    if not meta.exists():
        return None
    try:
        doc = json.loads(meta.read_text())
    except ValueError:
        raise BuildError("zarr.json is not valid JSON", str(meta)) from None
    if not isinstance(doc, dict) or doc.get("zarr_format") != 3 or doc.get("node_type") != "group":
        raise BuildError("not a Zarr v3 group", str(meta))
    return doc


def open_year(path: Path, year: int) -> zarr.Group:
    """Open or create the root group of a year store, refusing any other dataset (the root read by
    builder/describe.py, so a bad root is the same one line as everywhere else)."""
    path = Path(path)
    doc = read_root(path)
    if doc is None:
        if path.exists() and any(path.iterdir()):
            raise BuildError("target exists and is not a Zarr store; refusing to write into it", str(path))
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BuildError(f"cannot create the store ({e.strerror})", str(path)) from None
        if not os.access(path, os.W_OK):
            raise BuildError("target is not writable", str(path))
        # Attributes in the same write as the group: a kill can never leave an unmarked root behind.
        return zarr.open_group(zarr.storage.LocalStore(path), mode="w", zarr_format=3, attributes=conv.root_attrs(year))
    if not os.access(path, os.W_OK):
        raise BuildError("target is not writable", str(path))
    try:
        info = describe(doc, str(path), jsonschema=jsonschema)
    except StoreError as e:
        if e.kind == "version":
            raise BuildError(f"store has tessera:dataset_version={e.version!r:.80}; this builder writes "
                             f"{conv.DATASET_VERSION!r} and will not mix them", str(path)) from None
        raise BuildError(str(e)) from None  # names the store already
    if info.kind != TESSERA:
        raise BuildError(f"not a tessera: v1 year store but a {info.kind} root; refusing to write into it", str(path))
    if info.year != year:
        raise BuildError(f"store is for year {info.year}, not {year}", str(path))
    return zarr.open_group(zarr.storage.LocalStore(path), mode="r+", zarr_format=3, use_consolidated=False)


def consolidate(path: Path) -> None:
    """Inline every child's metadata into the root zarr.json (zarr-python's v3 consolidated
    metadata), so a browser learns the zones and arrays of a store from one request."""
    zarr.consolidate_metadata(zarr.storage.LocalStore(path))


def _sharded(group: zarr.Group, name: str, shape: tuple[int, ...], dtype: str, fill, layout: Layout,
             dims: list[str]) -> zarr.Array:
    tail = shape[2:]
    return group.create_array(
        name, shape=shape, dtype=dtype, fill_value=fill,
        shards=(layout.shard, layout.shard, *tail), chunks=(layout.chunk, layout.chunk, *tail),
        # crc32c after Blosc: every inner chunk carries its checksum (validate --deep, zarr-python, tensorstore)
        compressors=[layout.compressor(dtype), Crc32cCodec()], dimension_names=dims, overwrite=True,
        config={"write_empty_chunks": False})


def write_coords(group: zarr.Group, grid: ZoneGrid, n_bands: int) -> None:
    """The three coordinate arrays: uncompressed, unsharded, one chunk each."""
    for name, values in (("easting", conv.easting_coords(grid.origin_e, grid.width)),
                         ("northing", conv.northing_coords(grid.origin_n, grid.height)),
                         ("band", np.arange(n_bands, dtype=np.int32))):
        spec = conv.ZONE_ARRAYS[name]
        arr = group.create_array(name, shape=values.shape, dtype=spec["dtype"], chunks=values.shape,
                                 compressors=None, filters=None, fill_value=0,
                                 dimension_names=spec["dims"], overwrite=True)
        arr[:] = values


def create_zone(root: zarr.Group, grid: ZoneGrid, n_bands: int, rgb: bool, layout: Layout) -> zarr.Group:
    g = root.create_group(grid.name, overwrite=True)
    h, w = grid.height, grid.width
    for name, shape in (("embeddings", (h, w, n_bands)), ("scales", (h, w)), ("rgb", (h, w, 4))):
        if name == "rgb" and not rgb:
            continue
        spec = conv.ZONE_ARRAYS[name]
        _sharded(g, name, shape, spec["dtype"], spec["fill"], layout, spec["dims"])
    write_coords(g, grid, n_bands)
    return g


def resize_zone(group: zarr.Group, grid: ZoneGrid, n_bands: int) -> None:
    for name in SHARDED:
        if name in group:
            arr = group[name]
            arr.resize((grid.height, grid.width, *arr.shape[2:]))
    write_coords(group, grid, n_bands)


def clean_partials(where: Path) -> int:
    """Remove temporary files left under `where` by a write that was killed (never visible as shard keys)."""
    n = 0
    for p in Path(where).rglob(f"*{PARTIAL}"):
        p.unlink(missing_ok=True)
        n += 1
    return n


def move_shards(src: Path, dst: Path, dr: int, dc: int) -> None:
    """Move every shard file under src/c to dst/c, shifted by (dr, dc) shards.  Idempotent."""
    base = src / "c"
    if not base.exists():
        return
    for p in sorted(base.rglob("*")):
        if p.is_file():
            parts = p.relative_to(base).parts
            target = dst.joinpath("c", str(int(parts[0]) + dr), str(int(parts[1]) + dc), *parts[2:])
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(p, target)
    shutil.rmtree(base, ignore_errors=True)
