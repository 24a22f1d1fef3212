"""zarr-python's transport of builder/core/source.py's `Source` protocol: the store a reader in the core
(builder/core/reader.py StoreModel) reads on CPython, local or at any fsspec URL.  The browser's is app/reader.py
JSSource."""
from __future__ import annotations

import json

import fsspec
import numpy as np
import zarr

from builder.core.source import PIXEL, Box, Hint, Source, SourceError, as_slices


class ZarrSource(Source):
    """zarr-python over a local path or fsspec URL (CPython only)."""

    prefetches = False  # zarr-python reads what it reads: nothing to warm

    def __init__(self, url: str, storage_options: dict | None = None):
        self.url = url
        self.storage_options = storage_options

    async def meta(self) -> dict:
        try:
            with fsspec.open(self.url.rstrip("/") + "/zarr.json", "rb", **(self.storage_options or {})) as f:
                return json.loads(f.read())
        except FileNotFoundError:
            raise SourceError("notfound", f"no Zarr store at {self.url}") from None

    async def node(self, path: str) -> dict | None:
        try:
            with fsspec.open(f"{self.url.rstrip('/')}/{path}/zarr.json", "rb", **(self.storage_options or {})) as f:
                return json.loads(f.read())
        except FileNotFoundError:
            return None

    async def read(self, path: str, box: Box, hint: str = PIXEL) -> np.ndarray:
        Hint.of(hint)  # zarr-python reads what it reads; the hint is checked all the same
        arr = zarr.open_array(self.url.rstrip("/") + "/" + path, mode="r", storage_options=self.storage_options)
        return np.asarray(arr[as_slices(box)])

    async def read_ranges(self, key: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        fs, root = fsspec.core.url_to_fs(self.url.rstrip("/"), **(self.storage_options or {}))
        return [fs.cat_file(f"{root}/{key}", int(o), int(o) + int(n)) for o, n in ranges]

    async def prefetch(self, items: list[tuple[str, list]]) -> dict | None:
        return None
