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
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import google_crc32c
import jsonschema
import numcodecs
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec

from builder import convention as conv
from builder.describe import TESSERA, StoreError, describe
from builder.atomic import PARTIAL, write_bytes
from builder.bloscframe import RowCompressor, decompress
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


# --------------------------------------------------------------------------
# Fast whole-shard I/O (see builder.shardio for why this is not zarr-python)
# --------------------------------------------------------------------------
def _blosc(cfg: dict):
    """numcodecs' Blosc from a Zarr v3 blosc codec configuration."""
    return numcodecs.Blosc(cname=cfg["cname"], clevel=cfg["clevel"],
                           shuffle={"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}[cfg["shuffle"]])


def _codecs(layout_meta: dict):
    """(Blosc, crc32c) from an array's codec metadata."""
    cfg = next(c for c in layout_meta["codecs"][0]["configuration"]["codecs"] if c["name"] == "blosc")["configuration"]
    return _blosc(cfg), google_crc32c.value


@dataclass(frozen=True)
class ShardSpec:
    """The codec settings of one sharded array, parsed once from its zarr.json (`read`) and passed to the
    tasks that write its shards (builder/shardtask.py) instead of each task re-reading them."""

    shard_shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    dtype: str
    fill: float | int
    blosc: dict  # the blosc codec's configuration
    chunk_crc: bool  # inner chunks carry a crc32c (stores built before per-chunk checksums do not)

    @classmethod
    def read(cls, array_dir: Path) -> "ShardSpec":
        meta = json.loads((Path(array_dir) / "zarr.json").read_text())
        sharding = meta["codecs"][0]
        if sharding["name"] != "sharding_indexed":
            raise BuildError("array is not sharded", str(array_dir))
        from builder.shardio import has_chunk_crc
        fv = meta["fill_value"]
        blosc = next(c for c in sharding["configuration"]["codecs"] if c["name"] == "blosc")["configuration"]
        return cls(tuple(meta["chunk_grid"]["configuration"]["chunk_shape"]),
                   tuple(sharding["configuration"]["chunk_shape"]), meta["data_type"],
                   float("nan") if fv == "NaN" else fv, dict(blosc), has_chunk_crc(sharding["configuration"]))


class ShardedArrayFiles:
    """Read and write whole shards of one sharded array in a local zone directory."""

    def __init__(self, array_dir: Path, spec: ShardSpec | None = None):
        self.dir = Path(array_dir)
        spec = spec or ShardSpec.read(self.dir)
        self.shard_shape, self.chunk_shape = spec.shard_shape, spec.chunk_shape
        self.dtype, self.fill, self.chunk_crc = np.dtype(spec.dtype), spec.fill, spec.chunk_crc
        self.compress_rows, self.decompress = RowCompressor(spec.blosc).rows, decompress
        self.crc = google_crc32c.value

    def path(self, sr: int, sc: int) -> Path:
        from builder.shardio import shard_key
        return self.dir.parent / shard_key(self.dir.name, sr, sc, len(self.shard_shape))

    def write(self, sr: int, sc: int, data: np.ndarray) -> bool:
        """Write (atomically: temp file + rename) or, when all fill, remove the shard.  True if a file exists."""
        from builder.shardio import encode_shard
        if tuple(data.shape) != self.shard_shape:
            raise ValueError(f"shard data {data.shape} is not {self.shard_shape}")
        blob = encode_shard(data.astype(self.dtype, copy=False), self.chunk_shape, self.fill, self.compress_rows, self.crc,
                            self.chunk_crc)
        p = self.path(sr, sc)
        if blob is None:
            p.unlink(missing_ok=True)
            return False
        write_bytes(p, blob)
        return True

    def read(self, sr: int, sc: int) -> np.ndarray:
        from builder.shardio import decode_shard
        p = self.path(sr, sc)
        buf = p.read_bytes() if p.exists() else None
        return decode_shard(buf, self.shard_shape, self.chunk_shape, self.dtype, self.fill, self.decompress, self.crc,
                            self.chunk_crc)

    def read_region(self, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """Rows r0:r1, cols c0:c1 (whole trailing dims), assembled from the inner chunks they touch."""
        from builder.shardio import decode_window
        s0, s1 = self.shard_shape[:2]
        out = np.full((r1 - r0, c1 - c0, *self.shard_shape[2:]), self.fill, dtype=self.dtype)
        for sr in range(r0 // s0, (r1 - 1) // s0 + 1):
            for sc in range(c0 // s1, (c1 - 1) // s1 + 1):
                p = self.path(sr, sc)
                if not p.exists():
                    continue
                a0, a1 = max(r0, sr * s0), min(r1, (sr + 1) * s0)
                b0, b1 = max(c0, sc * s1), min(c1, (sc + 1) * s1)
                box = (a0 - sr * s0, a1 - sr * s0, b0 - sc * s1, b1 - sc * s1)  # only the inner chunks it touches
                out[a0 - r0:a1 - r0, b0 - c0:b1 - c0] = decode_window(
                    p.read_bytes(), self.shard_shape, self.chunk_shape, self.dtype, self.fill, self.decompress, box,
                    self.crc, self.chunk_crc)
        return out


class ChunkedArrayFiles:
    """Read and write whole chunks of one regular (unsharded) array with codecs [bytes, blosc, crc32c] in a
    local directory: the global_rgb levels (builder.pyramid).  Why not zarr-python: its per-call overhead
    (an event-loop round trip, selection and merge logic) cost more than encoding a 256x256x4 chunk, and the
    pyramid moves whole chunks only.  The bytes are zarr-python's (tests/test_pyramid.py reads them back
    through zarr): the chunk's C-order bytes, Blosc, then its crc32c (little endian); an all-fill chunk has
    no file (write_empty_chunks false)."""

    def __init__(self, array_dir: Path):
        self.dir = Path(array_dir)
        meta = json.loads((self.dir / "zarr.json").read_text())
        names = [c["name"] for c in meta["codecs"]]
        if meta["chunk_grid"]["name"] != "regular" or names != ["bytes", "blosc", "crc32c"]:
            raise BuildError(f"not a regular [bytes, blosc, crc32c] array: {names}", str(self.dir))
        self.shape = tuple(meta["shape"])
        self.chunk_shape = tuple(meta["chunk_grid"]["configuration"]["chunk_shape"])
        self.dtype = np.dtype(meta["data_type"]).newbyteorder("<")
        self.fill = meta["fill_value"]
        self.compress, self.decompress = RowCompressor(meta["codecs"][1]["configuration"]).one, decompress
        self.crc = google_crc32c.value

    def path(self, *idx: int) -> Path:
        """The chunk file at grid index `idx` (trailing dimensions, one chunk wide, at index 0)."""
        full = [*idx, *([0] * (len(self.chunk_shape) - len(idx)))]
        return self.dir.joinpath("c", *map(str, full))

    def read(self, *idx: int) -> np.ndarray:
        """The whole chunk (fill where it has no file); ValueError when its crc32c differs."""
        from builder.shardio import open_chunk
        p = self.path(*idx)
        if not p.exists():
            return np.full(self.chunk_shape, self.fill, dtype=self.dtype)
        raw = open_chunk(p.read_bytes(), self.crc)
        return np.frombuffer(self.decompress(raw), dtype=self.dtype).reshape(self.chunk_shape)

    def write(self, data: np.ndarray, *idx: int) -> bool:
        """Write the whole chunk (atomically: temp file + rename), or remove it when all fill; True if a
        file exists.  Parts of an edge chunk outside the array must hold the fill value, as zarr-python
        writes them."""
        p = self.path(*idx)
        if tuple(data.shape) != self.chunk_shape:
            raise ValueError(f"chunk data {data.shape} is not {self.chunk_shape}")
        data = np.ascontiguousarray(data, dtype=self.dtype)
        if (data == self.fill).all():
            p.unlink(missing_ok=True)
            return False
        blob = bytes(self.compress(data))
        blob += struct.pack("<I", self.crc(blob))
        write_bytes(p, blob)
        return True
