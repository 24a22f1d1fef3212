"""Whole-shard encode/decode for the Zarr v3 `sharding_indexed` codec, as our arrays use it.

Why by hand: zarr-python encodes a 256x256 shard of 4x4 inner chunks through
its async per-chunk pipeline at about 1.4 s per embeddings shard; the same
4096 Blosc calls made directly take about 0.1 s.  The builder writes every
shard through `encode_shard`; the pyramid and the Python reader API
(builder.reader.shards) read whole shards through `decode_shard`, and the
tests prove that zarr-python reads what we write value for value (and we read
what it writes).  The browser does not use this module: the explorer reads
through zarrita (app/js), which decodes shards itself.

The layout handled (what builder.store declares): inner codecs [bytes
(little endian), blosc, crc32c] (stores built before per-chunk checksums:
[bytes, blosc]); index codecs [bytes little endian, crc32c]; index at the
end; empty inner chunks marked (2^64-1, 2^64-1) and omitted.  The inner
crc32c is the Zarr v3 `crc32c` codec: 4 bytes, little endian, appended to
the compressed chunk (zarr-python and tensorstore verify it on read).
`ShardIndex` is the one parser of the shard index (its size derived from the
chunk grid, its crc32c checked): decode_shard, validate --deep and the
virtual writer use it.

This module needs only numpy: the compressor and the checksum are passed in
(numcodecs' Blosc and google_crc32c).
"""
from __future__ import annotations

import math
import struct
from typing import Callable

import numpy as np

EMPTY = 2**64 - 1
ENTRY_BYTES = 16  # one index entry: offset and length, two little-endian uint64
CRC_BYTES = 4     # the crc32c after the index entries (index codecs [bytes little endian, crc32c])


def has_chunk_crc(sharding_config: dict) -> bool:
    """True when the inner codecs of a `sharding_indexed` configuration end with crc32c."""
    codecs = sharding_config.get("codecs") or []
    return bool(codecs) and codecs[-1].get("name") == "crc32c"


def open_chunk(raw: bytes, crc32c: Callable[[bytes], int]) -> bytes:
    """The compressed payload of an inner chunk ending in its crc32c; ValueError when the checksum differs."""
    if len(raw) < 4:
        raise ValueError(f"inner chunk of {len(raw)} bytes is shorter than its crc32c checksum")
    (stored,) = struct.unpack("<I", raw[-4:])
    if stored != crc32c(raw[:-4]):
        raise ValueError("crc32c checksum mismatch (corrupt inner chunk)")
    return raw[:-4]


def chunk_grid(shard_shape: tuple[int, ...], chunk_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Inner chunks per dimension of a shard; ValueError when they do not divide it."""
    if any(s % c for s, c in zip(shard_shape, chunk_shape)):
        raise ValueError(f"inner chunks {chunk_shape} do not divide the shard {shard_shape}")
    return tuple(s // c for s, c in zip(shard_shape, chunk_shape))


class ShardIndex:
    """The index at the end of one shard: (offset, length) of each inner chunk in C order of the chunk
    grid, (EMPTY, EMPTY) for an absent one, then the crc32c of those entries.  Its size follows from the
    grid alone (`nbytes`); `read` checks the crc32c whenever a checksum function is given."""

    def __init__(self, grid: tuple[int, ...], table: np.ndarray, shard_bytes: int):
        self.grid = tuple(int(g) for g in grid)
        self.table = table              # (n, 2) little-endian uint64
        self.shard_bytes = shard_bytes  # length of the whole shard, index included

    @staticmethod
    def nbytes(grid: tuple[int, ...]) -> int:
        """Bytes of the index (entries and checksum) of a shard with this chunk grid."""
        return ENTRY_BYTES * math.prod(int(g) for g in grid) + CRC_BYTES

    @classmethod
    def read(cls, buf: bytes | memoryview, grid: tuple[int, ...],
             crc32c: Callable[[bytes], int] | None) -> ShardIndex:
        """The index at the end of `buf` (a whole shard, or any tail of it at least `nbytes` long);
        ValueError when `buf` is too short or (crc32c given) the checksum differs."""
        size = cls.nbytes(grid)
        if len(buf) < size:
            raise ValueError(f"shard of {len(buf)} bytes is shorter than its index ({size} bytes)")
        raw = bytes(buf[len(buf) - size: len(buf) - CRC_BYTES])
        if crc32c is not None:
            (stored,) = struct.unpack("<I", bytes(buf[len(buf) - CRC_BYTES:]))
            if stored != crc32c(raw):
                raise ValueError("shard index checksum mismatch (corrupt or truncated shard)")
        return cls(grid, np.frombuffer(raw, dtype="<u8").reshape(-1, 2), len(buf))

    @staticmethod
    def encode(table: np.ndarray, crc32c: Callable[[bytes], int]) -> bytes:
        """The index bytes for an (n, 2) table of offsets and lengths: entries, then their crc32c."""
        raw = np.ascontiguousarray(table, dtype="<u8").tobytes()
        return raw + struct.pack("<I", crc32c(raw))

    @property
    def data_end(self) -> int:
        """Where the chunk data ends and the index begins (for a whole shard)."""
        return self.shard_bytes - self.nbytes(self.grid)

    def chunks(self) -> list[tuple[int, int, int]]:
        """(linear index, offset, length) of every stored inner chunk."""
        return [(int(i), int(self.table[i, 0]), int(self.table[i, 1]))
                for i in np.flatnonzero(self.table[:, 0] != EMPTY)]

    def coord(self, i: int) -> tuple[int, ...]:
        """Grid coordinates of inner chunk `i`."""
        return tuple(int(x) for x in np.unravel_index(i, self.grid))


def _blocks(shard: np.ndarray, chunk_shape: tuple[int, ...]) -> np.ndarray:
    """View of the shard as (n0, n1, ..., c0, c1, ...) inner chunks in C order."""
    grid = chunk_grid(shard.shape, chunk_shape)
    shape = [x for pair in zip(grid, chunk_shape) for x in pair]
    nd = len(grid)
    order = list(range(0, 2 * nd, 2)) + list(range(1, 2 * nd, 2))
    return shard.reshape(shape).transpose(order)


def encode_shard(shard: np.ndarray, chunk_shape: tuple[int, ...], fill,
                 compress_rows: Callable[[np.ndarray], list[bytes]],
                 crc32c: Callable[[bytes], int], chunk_crc: bool = False) -> bytes | None:
    """Bytes of one shard, or None when every inner chunk equals the fill value (write nothing).
    `compress_rows`: the compressed bytes of each row of a (k, chunk size) array of inner chunks
    (builder.bloscframe.RowCompressor.rows).
    `chunk_crc`: append each compressed inner chunk's crc32c (the inner codecs end with crc32c)."""
    shard = np.ascontiguousarray(shard)
    if shard.dtype.byteorder == ">":
        shard = shard.astype(shard.dtype.newbyteorder("<"))
    blocks = _blocks(shard, chunk_shape)
    grid = blocks.shape[: len(chunk_shape)]
    n = int(np.prod(grid))
    flat = np.ascontiguousarray(blocks).reshape(n, -1)  # one copy: every inner chunk a contiguous row
    if isinstance(fill, float) and np.isnan(fill):
        empty = np.isnan(flat).all(axis=1)
    else:
        empty = (flat == fill).all(axis=1)
    if empty.all():
        return None
    keep = np.flatnonzero(~empty)
    pack = struct.Struct("<I").pack
    parts = compress_rows(flat if keep.size == n else flat[keep])
    if chunk_crc:
        parts = [data + pack(crc32c(data)) for data in map(bytes, parts)]
    lengths = np.fromiter(map(len, parts), dtype="<u8", count=len(parts))
    index = np.full((n, 2), EMPTY, dtype="<u8")
    index[keep, 0] = np.cumsum(lengths) - lengths
    index[keep, 1] = lengths
    parts.append(ShardIndex.encode(index, crc32c))
    return b"".join(parts)


def read_index(buf: bytes | memoryview, n_chunks: int, crc32c: Callable[[bytes], int] | None = None) -> np.ndarray:
    """(n, 2) uint64 offsets/lengths from the end of a shard; checks the crc32c when given (ShardIndex.read)."""
    return ShardIndex.read(buf, (n_chunks,), crc32c).table


def decode_shard(buf: bytes | memoryview | None, shard_shape: tuple[int, ...], chunk_shape: tuple[int, ...],
                 dtype, fill, decompress: Callable[[bytes], bytes],
                 crc32c: Callable[[bytes], int] | None = None, chunk_crc: bool = False) -> np.ndarray:
    """The (shard_shape) array held in `buf`; a missing shard (None) is all fill.
    `chunk_crc`: inner chunks end with their crc32c, verified when `crc32c` is given."""
    dtype = np.dtype(dtype).newbyteorder("<")
    if buf is None:
        return np.full(shard_shape, fill, dtype=dtype)
    grid = chunk_grid(shard_shape, chunk_shape)
    table = ShardIndex.read(buf, grid, crc32c).table
    filled = _decode_chunks(buf, table.tolist(), chunk_shape, dtype, fill, decompress, crc32c, chunk_crc)
    nd = len(grid)
    shaped = filled.reshape((*grid, *chunk_shape))
    order = [x for i in range(nd) for x in (i, nd + i)]
    return np.ascontiguousarray(shaped.transpose(order)).reshape(shard_shape)


def _decode_chunks(buf: bytes | memoryview, entries: list, chunk_shape: tuple[int, ...], dtype, fill, decompress,
                   crc32c, chunk_crc: bool) -> np.ndarray:
    """The inner chunks at `entries` ([offset, length] as Python ints; EMPTY: absent, left fill) of the shard
    bytes `buf`, decoded into one (n, *chunk_shape) array.  Per chunk this is a slice, the checksum, the
    decompression and one copy of its bytes into place: a shard of 4x4-px chunks has 4,096 of them, so no
    numpy call is made per chunk (they cost more than decompressing a 64-byte chunk)."""
    out = np.full((len(entries), *chunk_shape), fill, dtype=dtype)
    dest = memoryview(out.reshape(-1).view(np.uint8))
    size = out.itemsize * math.prod(chunk_shape)
    raw_all = buf if isinstance(buf, bytes) else bytes(buf)
    for k, (off, ln) in enumerate(entries):
        if off == EMPTY:
            continue
        raw = raw_all[off:off + ln]
        if chunk_crc:
            raw = open_chunk(raw, crc32c) if crc32c is not None else raw[:-4]
        data = decompress(raw)
        if len(data) != size:
            raise ValueError(f"inner chunk decodes to {len(data)} bytes, not {size}")
        dest[k * size:(k + 1) * size] = data
    return out


def decode_window(buf: bytes | memoryview | None, shard_shape: tuple[int, ...], chunk_shape: tuple[int, ...],
                  dtype, fill, decompress: Callable[[bytes], bytes], box: tuple[int, int, int, int],
                  crc32c: Callable[[bytes], int] | None = None, chunk_crc: bool = False) -> np.ndarray:
    """Rows a0:a1, cols b0:b1 (`box`, in the shard's pixels; whole trailing dims) decoding only the inner
    chunks they touch: a small window of a shard of 4x4-px chunks costs its few chunks, not 4096."""
    a0, a1, b0, b1 = box
    dtype = np.dtype(dtype).newbyteorder("<")
    trail = tuple(shard_shape[2:])
    if tuple(chunk_shape[2:]) != trail:  # trailing dims split into several chunks: decode the whole shard
        return decode_shard(buf, shard_shape, chunk_shape, dtype, fill, decompress, crc32c, chunk_crc)[a0:a1, b0:b1]
    if buf is None:
        return np.full((a1 - a0, b1 - b0, *trail), fill, dtype=dtype)
    grid = chunk_grid(shard_shape, chunk_shape)
    table = ShardIndex.read(buf, grid, crc32c).table
    c0, c1 = chunk_shape[:2]
    i0, i1, j0, j1 = a0 // c0, (a1 - 1) // c0 + 1, b0 // c1, (b1 - 1) // c1 + 1
    entries = table.reshape(grid[0], grid[1], 2)[i0:i1, j0:j1].reshape(-1, 2).tolist()
    chunks = _decode_chunks(buf, entries, chunk_shape, dtype, fill, decompress, crc32c, chunk_crc)
    ni, nj = i1 - i0, j1 - j0
    out = chunks.reshape(ni, nj, c0, c1, *trail).swapaxes(1, 2).reshape(ni * c0, nj * c1, *trail)
    return out[a0 - i0 * c0:a1 - i0 * c0, b0 - j0 * c1:b1 - j0 * c1]


def array_shard_key(sr: int, sc: int, ndim: int) -> str:
    """Key of shard (sr, sc) of a 2- or 3-D array inside the array, with the default '/' chunk key encoding."""
    return "/".join(["c", str(sr), str(sc), *(["0"] * (ndim - 2))])


def shard_key(name: str, sr: int, sc: int, ndim: int) -> str:
    """Store key of shard (sr, sc) of the 2- or 3-D array at `name`."""
    return f"{name}/{array_shard_key(sr, sc, ndim)}"
