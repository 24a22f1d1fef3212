"""Blosc (version 1 frames, the Zarr v3 `blosc` codec) for the many small inner chunks of one shard.

c-blosc 1, which numcodecs and tensorstore both call, creates and frees a zstd context on every call.
An embeddings shard is 4,096 inner chunks of 2 KB, and for chunks that small the context's set-up is
about half of the shard's encode time.  No library offers a Blosc 1 encoder with a reusable context
(python-blosc and numcodecs wrap the same c-blosc; c-blosc 2 writes another frame), so this module
writes the frame itself for the one case that matters:

  zstd, clevel 1-8, 1-byte elements, bitshuffle or no shuffle, MIN_BUFFERSIZE <= chunk < L1 bytes.

c-blosc stores such a chunk as one block of one stream: a 16-byte header, one block start, the
stream's compressed length, then the zstd frame of the (bit-shuffled) bytes at zstd level 2*clevel-1.
Here all of a shard's chunks are bit-shuffled in one numpy pass and each is compressed with one
reused python-zstandard compressor; the bytes are c-blosc's own (tests/test_bloscframe.py compares
them byte for byte with numcodecs, and decodes them with numcodecs and zarr-python).

A chunk that c-blosc stores uncompressed (one under MIN_BUFFERSIZE bytes, as the scales' and previews'
4x4-px chunks are, or one zstd does not shrink enough, as most of a realistic embeddings shard's are)
is its bytes behind a header that depends only on the settings, the size and the element size: that
header is taken from c-blosc's own frame the first time and reused (a c-blosc call per such chunk cost
a realistic 52N tile's build more CPU than its embeddings' zstd; for a chunk zstd did not shrink, it
also compressed the chunk a second time).  Any other case is passed to numcodecs.

`decompress` reads a frame that c-blosc stored uncompressed (a chunk under 128 bytes, as the previews'
4x4-px chunks are) by slicing it: numcodecs' per-call checks cost ten times that, and the global_rgb
pyramid reads tens of thousands of such chunks.

A `RowCompressor` holds a zstd context and the headers it took from c-blosc: use one per thread.
"""
from __future__ import annotations

import struct

import numpy as np

L1 = 32 * 1024        # c-blosc's L1: a buffer below it is compressed as one block
MIN_BUFFERSIZE = 128  # c-blosc copies a buffer below it uncompressed
VERSION, VERSION_ZSTD = 2, 1
DONT_SPLIT, BITSHUFFLE, MEMCPYED, ZSTD_FORMAT = 0x10, 0x04, 0x02, 4 << 5
HEADER = 16
SHUFFLES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
# header (version, versionlz, flags, typesize, nbytes, blocksize, cbytes), one block start, the stream's length
_FRAME = struct.Struct("<BBBBIIIIi")

_M1, _M2, _M3 = np.uint64(0x00AA00AA00AA00AA), np.uint64(0x0000CCCC0000CCCC), np.uint64(0x00000000F0F0F0F0)
_S7, _S14, _S28 = np.uint64(7), np.uint64(14), np.uint64(28)


def bitshuffle_rows(rows: np.ndarray) -> np.ndarray:
    """c-blosc's bitshuffle of 1-byte elements applied to each row of a (n, m) uint8 array (m % 8 == 0):
    row k becomes its 8 bit planes, plane b holding bit b of every element, element 8j+i at bit i of
    byte j.  Each 8-element group, read as a little-endian uint64, is an 8x8 bit matrix whose transpose
    (Hacker's Delight, transpose8) holds its 8 plane bytes; the planes are then gathered per row."""
    n, m = rows.shape
    x = np.ascontiguousarray(rows, dtype=np.uint8).view("<u8")  # (n, m / 8): element i of a group in byte i
    t = (x ^ (x >> _S7)) & _M1
    x = x ^ t ^ (t << _S7)
    t = (x ^ (x >> _S14)) & _M2
    x = x ^ t ^ (t << _S14)
    t = (x ^ (x >> _S28)) & _M3
    x = x ^ t ^ (t << _S28)
    return x.view(np.uint8).reshape(n, m // 8, 8).transpose(0, 2, 1).reshape(n, m)


class RowCompressor:
    """Blosc-compress inner chunks given as the rows of a 2-D array, with the settings of a Zarr v3 blosc
    codec configuration; the element size is the array's (as numcodecs takes it from the buffer)."""

    def __init__(self, cfg: dict):
        from numcodecs import blosc
        self._blosc = blosc
        self.cname, self.clevel = str(cfg["cname"]), int(cfg["clevel"])
        self.shuffle = SHUFFLES[cfg["shuffle"]]
        self.blocksize = int(cfg.get("blocksize") or 0)
        self._fast = self.cname == "zstd" and 1 <= self.clevel <= 8 and self.shuffle in (0, 2) and self.blocksize == 0
        self._zstd = None
        self._flags = DONT_SPLIT | ZSTD_FORMAT | (BITSHUFFLE if self.shuffle == 2 else 0)
        self._copied: dict[tuple[str, int], bytes] = {}  # (dtype, chunk bytes) -> c-blosc's header of a copied chunk

    def one(self, buf) -> bytes:
        """One chunk (its element size is the buffer's), through numcodecs' blosc module: the bytes of
        numcodecs.Blosc(...).encode without that class's per-call checks."""
        return self._blosc.compress(buf, self.cname.encode(), self.clevel, self.shuffle, self.blocksize)

    def _copy_of(self, row: np.ndarray) -> bytes:
        """c-blosc's frame of one chunk; when c-blosc stored it uncompressed, its header is kept for the chunks
        of that dtype and size it will also store uncompressed (the header depends on nothing else)."""
        frame = bytes(self.one(row))
        if len(frame) == HEADER + row.nbytes and frame[2] & MEMCPYED:
            self._copied[(row.dtype.str, row.nbytes)] = frame[:HEADER]
        return frame

    def rows(self, rows: np.ndarray) -> list[bytes]:
        """The Blosc frame of each row of `rows` (any dtype; a row is one chunk's C-order bytes)."""
        rows = np.ascontiguousarray(rows)
        m = rows.shape[1] * rows.itemsize
        if m < MIN_BUFFERSIZE:  # every such chunk is copied: one header before each row, in one numpy pass
            head = self._copied.get((rows.dtype.str, m))
            if head is None and len(rows):
                self._copy_of(rows[0])
                head = self._copied.get((rows.dtype.str, m))
            if head is not None:
                frames = np.empty((len(rows), HEADER + m), dtype=np.uint8)
                frames[:, :HEADER] = np.frombuffer(head, dtype=np.uint8)
                frames[:, HEADER:] = rows.view(np.uint8).reshape(len(rows), m)
                blob, w = frames.tobytes(), HEADER + m
                return [blob[k:k + w] for k in range(0, len(blob), w)]
        if not (self._fast and rows.itemsize == 1 and MIN_BUFFERSIZE <= m < L1 and (self.shuffle == 0 or m % 8 == 0)):
            return [self.one(r) for r in rows]
        raw = rows.view(np.uint8).reshape(len(rows), m)
        data = bitshuffle_rows(raw) if self.shuffle == 2 else raw
        if self._zstd is None:
            import zstandard
            self._zstd = zstandard.ZstdCompressor(level=2 * self.clevel - 1)
        compress, frame, flags = self._zstd.compress, _FRAME.pack, self._flags
        out = []
        for k in range(len(data)):
            z = compress(data[k])
            if len(z) < m - 8:
                out.append(frame(VERSION, VERSION_ZSTD, flags, 1, m, m, 24 + len(z), 20, len(z)) + z)
                continue
            # c-blosc gives the stream m - 8 bytes (nbytes + 16 of room, less 24 before it); a stream that
            # does not fit is stored uncompressed, behind the header c-blosc gave the first such chunk
            head = self._copied.get((raw.dtype.str, m))
            out.append(head + raw[k].tobytes() if head is not None else self._copy_of(raw[k]))
        return out


def decompress(frame) -> bytes:
    """The bytes a Blosc frame holds (a frame not stored uncompressed, or not of its stated size, goes to
    numcodecs, whatever it makes of it)."""
    if len(frame) > HEADER and frame[2] & MEMCPYED and len(frame) == HEADER + int.from_bytes(frame[4:8], "little"):
        return bytes(frame[HEADER:])  # stored uncompressed: c-blosc checks this size and copies the rest
    from numcodecs import blosc
    return blosc.decompress(frame)
