"""zarr stores for the reader (a local path or any fsspec URL): metadata read within bounds, shard indexes kept
between reads.

`BoundedMetadataStore`: every zarr.json zarr-python asks for is read as at most builder/core/bounds.py's limit
(the root's ROOT_JSON_MAX, any other NODE_JSON_MAX) plus one byte and checked by its rule (values,
nesting) before zarr-python parses it; a document out of bounds is a MetadataError (a ValueError, one
line naming the document), never a 300 MB read or a RecursionError.

zarr-python 3 already reads sharded arrays the way a point reader should: for a selection that does not
cover a whole shard it fetches the shard index with one suffix-range request and then only the inner
chunks the selection needs, each once per call (tests/test_reader.py counts the requests on the wire),
so no shard reader is written here.  What zarr-python does not do is keep the index between calls:
every read that touches a shard fetches its index again (64 KiB for a tessera: v1 shard, 256 KiB for a
4096 x 4096 geoemb: shard).  `IndexCachingStore` is the few lines that keep them: a byte-bounded LRU of
suffix-range reads (the index sits at the end of the shard in both layouts, zarr's default), shared by
concurrent readers of the same shard.  A cache lives as long as the store object: reopen the store to
see a republished one.
"""
from __future__ import annotations

import asyncio
import os
from collections import OrderedDict

import fsspec

from zarr.abc.store import RangeByteRequest, SuffixByteRequest
from zarr.storage import FsspecStore, LocalStore, WrapperStore

from builder.core.bounds import NODE_JSON_MAX, ROOT_JSON_MAX, parse_json

MAX_INDEX_BYTES = 64 << 20  # 1024 v1 shard indexes, 256 geoemb ones
METADATA = "zarr.json"


class BoundedMetadataStore(WrapperStore):
    """Reads zarr.json documents within builder/core/bounds.py's limits (see the module docstring)."""

    def __init__(self, store, url: str = ""):
        super().__init__(store)
        self.url = url

    def _with_store(self, store):
        return type(self)(store, self.url)

    async def get(self, key, prototype, byte_range=None):
        if byte_range is not None or (key != METADATA and not key.endswith("/" + METADATA)):
            return await self._store.get(key, prototype, byte_range)
        limit = ROOT_JSON_MAX if key == METADATA else NODE_JSON_MAX
        buf = await self._store.get(key, prototype, RangeByteRequest(0, limit + 1))
        if buf is not None:
            parse_json(buf.to_bytes(), f"{self.url}/{key}" if self.url else key, limit)
        return buf


class IndexCachingStore(WrapperStore):
    def __init__(self, store, max_bytes: int = MAX_INDEX_BYTES):
        super().__init__(store)
        self.max_bytes = max_bytes
        self._cache: OrderedDict = OrderedDict()
        self._size = 0
        self._inflight: dict = {}

    def _with_store(self, store):
        return type(self)(store, self.max_bytes)

    async def get(self, key, prototype, byte_range=None):
        if not isinstance(byte_range, SuffixByteRequest):
            return await self._store.get(key, prototype, byte_range)
        k = (key, byte_range.suffix)
        if k in self._cache:
            self._cache.move_to_end(k)
            return self._cache[k]
        task = self._inflight.get(k)
        if task is None:  # zarr runs every store call on its one event loop: no lock needed
            task = self._inflight[k] = asyncio.ensure_future(self._store.get(key, prototype, byte_range))
            try:
                buf = await task
            finally:
                self._inflight.pop(k, None)
            self._remember(k, buf)
            return buf
        return await task

    def _remember(self, k, buf) -> None:
        size = 0 if buf is None else len(buf)  # None: no shard there, remembered too (no repeated 404s)
        if size > self.max_bytes:
            return
        self._cache[k] = buf
        self._size += size
        while self._size > self.max_bytes:
            _, old = self._cache.popitem(last=False)
            self._size -= 0 if old is None else len(old)


def is_url(url: str) -> bool:
    return "://" in url and not url.startswith("file://")


def base_store(url: str, storage_options: dict | None = None):
    """A read-only zarr store for a local path (LocalStore) or an fsspec URL (FsspecStore: http(s), s3, ...)."""
    if is_url(url):
        return FsspecStore.from_url(url, storage_options=storage_options or None, read_only=True)
    path = url[len("file://"):] if url.startswith("file://") else url
    return LocalStore(os.path.abspath(path), read_only=True)


def reader_store(url: str, storage_options: dict | None = None) -> IndexCachingStore:
    return IndexCachingStore(BoundedMetadataStore(base_store(url, storage_options), url))


def byte_source(url: str, storage_options: dict | None = None):
    """(synchronous fsspec filesystem, root path) of a store, for whole-shard reads (builder.reader.shards)."""
    if is_url(url):
        return fsspec.core.url_to_fs(url, **(storage_options or {}))
    return fsspec.filesystem("file"), os.path.abspath(url[len("file://"):] if url.startswith("file://") else url)
