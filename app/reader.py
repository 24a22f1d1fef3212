"""Where the app's bytes come from: one small interface, two implementations.

`Source` is what the explorer needs from a store: its root document (with
consolidated metadata) and boxes of arrays.  In the browser `JSSource`
calls zarrita through `window.tesseraJS` (app/js/tessera.js); on CPython
`ZarrSource` reads the same store with zarr-python, which is how the
explorer's logic is tested outside a browser.
"""
from __future__ import annotations

import json
from typing import Sequence

import numpy as np

Selection = Sequence[tuple[int, int] | None]


class SourceError(Exception):
    """A store that cannot be read, with the kind of failure (notfound, range, network, version, http)."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


class Source:
    url: str

    async def meta(self) -> dict:
        raise NotImplementedError

    async def node(self, path: str) -> dict | None:
        """The metadata document (zarr.json) of the node at `path`, None when there is none (for stores
        without consolidated metadata)."""
        raise NotImplementedError

    async def read(self, path: str, sel: Selection, whole: bool = False) -> np.ndarray:
        """Box `sel` ([start, stop) per dimension, None for all) of the array at `path`.

        whole=True asks for whole-shard reads (regions); False for the fewest bytes (pixels).
        """
        raise NotImplementedError


_DTYPES = {"int8": np.int8, "uint8": np.uint8, "float32": np.float32, "float64": np.float64, "int32": np.int32,
           "uint16": np.uint16, "int16": np.int16, "uint32": np.uint32, "int64": np.int64}


class JSSource(Source):
    def __init__(self, url: str):
        self.url = url
        self._meta = None

    async def meta(self) -> dict:
        if self._meta is None:
            import js
            res = json.loads(await js.tesseraJS.openSource(self.url))
            if not res["ok"]:
                raise SourceError(res["error"]["kind"], res["error"]["message"])
            self._meta = res["meta"]
        return self._meta

    async def node(self, path: str) -> dict | None:
        import js
        res = json.loads(await js.tesseraJS.readNode(self.url, path))
        if not res["ok"]:
            raise SourceError(res["error"]["kind"], res["error"]["message"])
        return res["meta"]

    async def read(self, path: str, sel: Selection, whole: bool = False) -> np.ndarray:
        import js
        from pyodide.ffi import to_js
        res = await js.tesseraJS.read(self.url, path, to_js([list(s) if s is not None else None for s in sel]), whole)
        if not res.ok:
            raise SourceError(res.error.kind, res.error.message)
        dtype = _DTYPES[str(res.dtype)]
        shape = tuple(int(x) for x in res.shape.to_py())
        buf = res.data.to_py()
        return np.frombuffer(buf, dtype=dtype).reshape(shape).copy()


class ZarrSource(Source):
    """zarr-python over a local path or fsspec URL (CPython only)."""

    def __init__(self, url: str, storage_options: dict | None = None):
        self.url = url
        self.storage_options = storage_options

    async def meta(self) -> dict:
        import fsspec
        try:
            with fsspec.open(self.url.rstrip("/") + "/zarr.json", "rb", **(self.storage_options or {})) as f:
                return json.loads(f.read())
        except FileNotFoundError:
            raise SourceError("notfound", f"no Zarr store at {self.url}") from None

    async def node(self, path: str) -> dict | None:
        import fsspec
        try:
            with fsspec.open(f"{self.url.rstrip('/')}/{path}/zarr.json", "rb", **(self.storage_options or {})) as f:
                return json.loads(f.read())
        except FileNotFoundError:
            return None

    async def read(self, path: str, sel: Selection, whole: bool = False) -> np.ndarray:
        import zarr
        arr = zarr.open_array(self.url.rstrip("/") + "/" + path, mode="r", storage_options=self.storage_options)
        return np.asarray(arr[tuple(slice(*s) if s is not None else slice(None) for s in sel)])
