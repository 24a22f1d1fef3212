"""Whole shards and whole chunks of Zarr v3 arrays as objects, without zarr-python.

The build's tasks write and read a shard or a chunk at a time; zarr-python's per-call overhead (an event-loop
round trip, selection and merge logic, one inner chunk at a time through its codec pipeline) cost more than
the encoding itself (builder/core/shardio.py says why in detail).  zarr-python creates the arrays
(builder/store.py) and reads what is written here value for value (tests/test_shardio.py, test_pyramid.py).
An array is a builder.sink.Sink rooted at its directory (a local path is taken as one), so the same code
writes a local store and an object store: a shard is one object, written whole.
This module imports no zarr: the build's worker processes import it, and zarr's import alone took a
quarter of a second of their start.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import google_crc32c
import numcodecs
import numpy as np

from builder.bloscframe import SHUFFLES, RowCompressor, decompress
from builder.errors import BuildError
from builder.sink import Sink, as_sink


def _blosc(cfg: dict):
    """numcodecs' Blosc from a Zarr v3 blosc codec configuration."""
    return numcodecs.Blosc(cname=cfg["cname"], clevel=cfg["clevel"], shuffle=SHUFFLES[cfg["shuffle"]])


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
    def read(cls, array: Sink | Path) -> "ShardSpec":
        array = as_sink(array)
        return cls.parse(_metadata(array), str(array))

    @classmethod
    def read_many(cls, zone: Sink, arrays: list[str]) -> dict[str, "ShardSpec"]:
        """The specs of several arrays of a group, by path (their zarr.json read at once: concurrently from an
        object store)."""
        docs = zone.get_many([f"{a}/zarr.json" for a in arrays])
        out = {}
        for a in arrays:
            raw = docs.get(f"{a}/zarr.json")
            if raw is None:
                raise BuildError("no zarr.json: not an array", str(zone / a))
            out[a] = cls.parse(json.loads(raw), str(zone / a))
        return out

    @classmethod
    def parse(cls, meta: dict, where: str) -> "ShardSpec":
        sharding = meta["codecs"][0]
        if sharding["name"] != "sharding_indexed":
            raise BuildError("array is not sharded", where)
        from builder.core.shardio import has_chunk_crc
        fv = meta["fill_value"]
        blosc = next(c for c in sharding["configuration"]["codecs"] if c["name"] == "blosc")["configuration"]
        return cls(tuple(meta["chunk_grid"]["configuration"]["chunk_shape"]),
                   tuple(sharding["configuration"]["chunk_shape"]), meta["data_type"],
                   float("nan") if fv == "NaN" else fv, dict(blosc), has_chunk_crc(sharding["configuration"]))


def _metadata(array: Sink) -> dict:
    raw = array.get("zarr.json")
    if raw is None:
        raise BuildError("no zarr.json: not an array", str(array))
    return json.loads(raw)


class ShardedArrayFiles:
    """Read and write whole shards of one sharded array (a Sink at the array, or a local directory)."""

    def __init__(self, array: Sink | Path, spec: ShardSpec | None = None):
        self.sink = as_sink(array)
        spec = spec or ShardSpec.read(self.sink)
        self.shard_shape, self.chunk_shape = spec.shard_shape, spec.chunk_shape
        self.dtype, self.fill, self.chunk_crc = np.dtype(spec.dtype), spec.fill, spec.chunk_crc
        self.compress_rows, self.decompress = RowCompressor(spec.blosc).rows, decompress
        self.crc = google_crc32c.value

    def key(self, sr: int, sc: int) -> str:
        from builder.core.shardio import array_shard_key
        return array_shard_key(sr, sc, len(self.shard_shape))

    def write(self, sr: int, sc: int, data: np.ndarray) -> bool:
        """Write (whole: a temporary file renamed, or one PUT) or, when all fill, remove the shard.  True if one
        exists."""
        from builder.core.shardio import encode_shard
        if tuple(data.shape) != self.shard_shape:
            raise ValueError(f"shard data {data.shape} is not {self.shard_shape}")
        blob = encode_shard(data.astype(self.dtype, copy=False), self.chunk_shape, self.fill, self.compress_rows, self.crc,
                            self.chunk_crc)
        if blob is None:
            self.sink.delete(self.key(sr, sc))
            return False
        self.sink.write(self.key(sr, sc), blob)
        return True

    def read(self, sr: int, sc: int) -> np.ndarray:
        from builder.core.shardio import decode_shard
        buf = self.sink.get(self.key(sr, sc))
        return decode_shard(buf, self.shard_shape, self.chunk_shape, self.dtype, self.fill, self.decompress, self.crc,
                            self.chunk_crc)

    def read_region(self, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """Rows r0:r1, cols c0:c1 (whole trailing dims), assembled from the inner chunks they touch."""
        from builder.core.shardio import decode_window
        s0, s1 = self.shard_shape[:2]
        out = np.full((r1 - r0, c1 - c0, *self.shard_shape[2:]), self.fill, dtype=self.dtype)
        for sr in range(r0 // s0, (r1 - 1) // s0 + 1):
            for sc in range(c0 // s1, (c1 - 1) // s1 + 1):
                buf = self.sink.get(self.key(sr, sc))
                if buf is None:
                    continue
                a0, a1 = max(r0, sr * s0), min(r1, (sr + 1) * s0)
                b0, b1 = max(c0, sc * s1), min(c1, (sc + 1) * s1)
                box = (a0 - sr * s0, a1 - sr * s0, b0 - sc * s1, b1 - sc * s1)  # only the inner chunks it touches
                out[a0 - r0:a1 - r0, b0 - c0:b1 - c0] = decode_window(
                    buf, self.shard_shape, self.chunk_shape, self.dtype, self.fill, self.decompress, box,
                    self.crc, self.chunk_crc)
        return out


class ChunkedArrayFiles:
    """Read and write whole chunks of one regular (unsharded) array with codecs [bytes, blosc, crc32c] in a
    Sink (or local directory): the global_rgb levels (builder.pyramid).  Why not zarr-python: its per-call overhead
    (an event-loop round trip, selection and merge logic) cost more than encoding a 256x256x4 chunk, and the
    pyramid moves whole chunks only.  The bytes are zarr-python's (tests/test_pyramid.py reads them back
    through zarr): the chunk's C-order bytes, Blosc, then its crc32c (little endian); an all-fill chunk has
    no file (write_empty_chunks false)."""

    def __init__(self, array: Sink | Path):
        self.sink = as_sink(array)
        meta = _metadata(self.sink)
        names = [c["name"] for c in meta["codecs"]]
        if meta["chunk_grid"]["name"] != "regular" or names != ["bytes", "blosc", "crc32c"]:
            raise BuildError(f"not a regular [bytes, blosc, crc32c] array: {names}", str(self.sink))
        self.shape = tuple(meta["shape"])
        self.chunk_shape = tuple(meta["chunk_grid"]["configuration"]["chunk_shape"])
        self.dtype = np.dtype(meta["data_type"]).newbyteorder("<")
        self.fill = meta["fill_value"]
        self.compress, self.decompress = RowCompressor(meta["codecs"][1]["configuration"]).one, decompress
        self.crc = google_crc32c.value

    def key(self, *idx: int) -> str:
        """The chunk's key at grid index `idx` (trailing dimensions, one chunk wide, at index 0)."""
        full = [*idx, *([0] * (len(self.chunk_shape) - len(idx)))]
        return "/".join(["c", *map(str, full)])

    def read(self, *idx: int) -> np.ndarray:
        """The whole chunk (fill where it has no object); ValueError when its crc32c differs."""
        from builder.core.shardio import open_chunk
        buf = self.sink.get(self.key(*idx))
        if buf is None:
            return np.full(self.chunk_shape, self.fill, dtype=self.dtype)
        raw = open_chunk(buf, self.crc)
        return np.frombuffer(self.decompress(raw), dtype=self.dtype).reshape(self.chunk_shape)

    def write(self, data: np.ndarray, *idx: int) -> bool:
        """Write the whole chunk (one whole object), or remove it when all fill; True if one exists.  Parts of
        an edge chunk outside the array must hold the fill value, as zarr-python writes them."""
        if tuple(data.shape) != self.chunk_shape:
            raise ValueError(f"chunk data {data.shape} is not {self.chunk_shape}")
        data = np.ascontiguousarray(data, dtype=self.dtype)
        if (data == self.fill).all():
            self.sink.delete(self.key(*idx))
            return False
        blob = bytes(self.compress(data))
        blob += struct.pack("<I", self.crc(blob))
        self.sink.write(self.key(*idx), blob)
        return True
