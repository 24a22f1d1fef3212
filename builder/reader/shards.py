"""Windows of a sharded array: small whole shards decoded by builder.core.shardio, everything else by zarr-python.

Why not zarr-python alone: it decodes a tessera: v1 shard's 4096 inner chunks (4x4x128) one at a time
through its async codec pipeline, 0.86 s per 256 x 256 embeddings shard here, and a window that does not
cover whole shards costs one range request per inner chunk (thousands).  builder.core.shardio (which the
builder and the explorer already use) makes the same Blosc calls directly: 0.014 s per shard, one GET.
So a shard is fetched whole and decoded by shardio when it is small (at most WHOLE_MAX bytes decoded)
and the window needs at least WHOLE_MIN_CHUNKS of its inner chunks, with exactly the codecs shardio
handles ([bytes, blosc(, crc32c)], index [bytes, crc32c] at the end; crc32c verified); otherwise
zarr-python reads the window (ranged inner-chunk reads: points, and geoemb:'s 128 KiB inner chunks).
The window assembly is builder.arrayfiles.ShardedArrayFiles.read_region's, which reads local files only;
this one reads any fsspec URL.  A shard the array's record says does not exist (builder/core/chunkruns.py) is
fill, with no request, for windows and for points (`points`: the pixels of zarr-python's coordinate selections).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future

import numpy as np

from builder.core.chunkruns import record_of
from builder.core.shardio import decode_shard, has_chunk_crc, shard_key
from builder.arrayfiles import _codecs  # Blosc + crc32c from the array's codec metadata (the builder's own helper)

WHOLE_MAX = 64 << 20  # a v1 embeddings shard is 8 MiB decoded; a geoemb 4096^2 x 128 shard 2 GiB: never whole
WHOLE_MIN_CHUNKS = 64  # below this, per-chunk range reads cost less than a whole shard
# Decoded whole shards kept per array: a region's `embeddings` and `scales` blocks both need the scales
# shard, often at the same moment in two dask threads; it is fetched and decoded once.
KEEP_BYTES = 32 << 20


def _shardio_codecs(meta: dict):
    """(blosc, crc32c, chunk_crc) when shardio decodes this array's shards exactly, else None."""
    sharding = (meta.get("codecs") or [{}])[0]
    cfg = sharding.get("configuration") or {}
    inner = [c.get("name") for c in cfg.get("codecs") or []]
    index = [c.get("name") for c in cfg.get("index_codecs") or []]
    sep = (meta.get("chunk_key_encoding") or {}).get("configuration", {}).get("separator", "/")
    if (sharding.get("name") != "sharding_indexed" or inner not in (["bytes", "blosc"], ["bytes", "blosc", "crc32c"])
            or index != ["bytes", "crc32c"] or cfg.get("index_location", "end") != "end" or sep != "/"
            or meta.get("chunk_key_encoding", {}).get("name", "default") != "default"):
        return None
    blosc, crc = _codecs(meta)
    return blosc, crc, has_chunk_crc(cfg)


class WindowReader:
    """`read(ys, xs)`: rows ys, cols xs (and every trailing element) of a 2-D or (H, W, B) sharded array."""

    def __init__(self, array, fs, root: str):
        self.array, self.fs, self.root = array, fs, root.rstrip("/")
        shard = array.shards
        self.codecs = None
        if shard is not None and tuple(shard[2:]) == tuple(array.shape[2:]) and \
                int(np.prod(shard)) * array.dtype.itemsize <= WHOLE_MAX:
            self.codecs = _shardio_codecs(array.metadata.to_dict())
        self.shard, self.chunk = shard, array.chunks
        # the shards that exist, when the array records them (builder/core/chunkruns.py): the others are fill, read
        # with no request (a request for one is a 404 the store's host logs)
        self.present = record_of(dict(array.attrs), array.shape, shard) if shard is not None else None
        self._kept: OrderedDict[tuple[int, int], Future] = OrderedDict()
        self._lock = threading.Lock()
        if self.codecs:
            self._keep = max(1, KEEP_BYTES // (int(np.prod(shard)) * array.dtype.itemsize))

    def _whole(self, sr: int, sc: int) -> np.ndarray:
        with self._lock:
            fut = self._kept.get((sr, sc))
            mine = fut is None
            if mine:
                fut = self._kept[(sr, sc)] = Future()
                while len(self._kept) > self._keep:
                    self._kept.popitem(last=False)
            else:
                self._kept.move_to_end((sr, sc))
        if mine:
            try:
                fut.set_result(self._decode(sr, sc))
            except BaseException as e:
                with self._lock:
                    self._kept.pop((sr, sc), None)
                fut.set_exception(e)
        return fut.result()

    def _decode(self, sr: int, sc: int) -> np.ndarray:
        blosc, crc, chunk_crc = self.codecs
        try:
            buf = self.fs.cat_file(f"{self.root}/{shard_key(self.array.path, sr, sc, self.array.ndim)}")
        except FileNotFoundError:
            buf = None  # an unwritten shard: all fill
        return decode_shard(buf, tuple(self.shard), tuple(self.chunk), self.array.dtype, self.array.fill_value,
                            blosc.decode, crc, chunk_crc)

    def points(self, rows: np.ndarray, cols: np.ndarray, read) -> np.ndarray:
        """`read(rows, cols)` (a coordinate selection of the array: one value or vector per pixel) of the pixels in
        shards that exist; the others are fill, with no request (zarr-python would ask for their shard index)."""
        if self.present is None or not len(rows):
            return np.asarray(read(rows, cols))
        sy, sx = self.shard[:2]
        shards, where = np.unique(np.stack([rows // sy, cols // sx], axis=1), axis=0, return_inverse=True)
        keep = np.array([(int(i), int(j)) in self.present for i, j in shards])[where.ravel()]
        if keep.all():
            return np.asarray(read(rows, cols))
        out = np.full((len(rows), *self.array.shape[2:]), self.array.fill_value, dtype=self.array.dtype)
        if keep.any():
            out[keep] = read(rows[keep], cols[keep])
        return out

    def read(self, ys: slice, xs: slice) -> np.ndarray:
        if self.codecs is None:
            return np.asarray(self.array[ys, xs])
        (y0, y1, dy), (x0, x1, dx) = ys.indices(self.array.shape[0]), xs.indices(self.array.shape[1])
        if dy != 1 or dx != 1:
            return np.asarray(self.array[ys, xs])
        out = np.empty((max(y1 - y0, 0), max(x1 - x0, 0), *self.array.shape[2:]), dtype=self.array.dtype)
        sy, sx = self.shard[:2]
        cy, cx = self.chunk[:2]
        for sr in range(y0 // sy, (y1 - 1) // sy + 1 if y1 > y0 else 0):
            a0, a1 = max(y0, sr * sy), min(y1, (sr + 1) * sy)
            for sc in range(x0 // sx, (x1 - 1) // sx + 1 if x1 > x0 else 0):
                b0, b1 = max(x0, sc * sx), min(x1, (sc + 1) * sx)
                if self.present is not None and (sr, sc) not in self.present:
                    out[a0 - y0:a1 - y0, b0 - x0:b1 - x0] = self.array.fill_value
                    continue
                n_chunks = ((a1 - 1) // cy - a0 // cy + 1) * ((b1 - 1) // cx - b0 // cx + 1)
                if n_chunks >= WHOLE_MIN_CHUNKS:
                    part = self._whole(sr, sc)[a0 - sr * sy:a1 - sr * sy, b0 - sc * sx:b1 - sc * sx]
                else:
                    part = np.asarray(self.array[a0:a1, b0:b1])
                out[a0 - y0:a1 - y0, b0 - x0:b1 - x0] = part
        return out
