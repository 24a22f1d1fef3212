"""Where the browser's bytes come from: `JSSource`, the transport of builder/core/source.py's `Source` protocol
that calls zarrita through `window.tesseraJS` (app/js/tessera.js).

Its CPython counterpart, with which the explorer's logic is tested outside a browser, is
builder/reader/source.py's ZarrSource.
"""
from __future__ import annotations

import json

import numpy as np

from builder.core.source import PIXEL, Box, Hint, Source, SourceError, as_slices

_DTYPES = {"int8": np.int8, "uint8": np.uint8, "float32": np.float32, "float64": np.float64, "int32": np.int32,
           "uint16": np.uint16, "int16": np.int16, "uint32": np.uint32, "int64": np.int64}


async def bridge(name: str, *args):
    """Call window.tesseraJS.<name>: its one result shape {ok, value} | {ok: false, error: {kind, message}}
    (app/js/tessera.js) becomes the value, or a SourceError of the same kind."""
    import js
    res = await getattr(js.tesseraJS, name)(*args)
    if not res.ok:
        raise SourceError(str(res.error.kind), str(res.error.message))
    return res.value


class JSSource(Source):
    """`big_reads` (app/bigreads.py BigReads), when given, says a read of big chunks before it starts, shows its
    progress and can cancel it; without it every read goes straight to the data path."""

    prefetches = True  # the shard indexes of the boxes (app/js/prefetch.js)

    def __init__(self, url: str, big_reads=None):
        self.url = url
        self.big_reads = big_reads
        self._meta = None

    async def meta(self) -> dict:
        if self._meta is None:
            self._meta = json.loads(str(await bridge("openSource", self.url)))
        return self._meta

    async def node(self, path: str) -> dict | None:
        return json.loads(str(await bridge("readNode", self.url, path)))

    async def read(self, path: str, box: Box, hint: str = PIXEL) -> np.ndarray:
        from pyodide.ffi import to_js
        sel = [None if s.start is None and s.stop is None else [s.start, s.stop] for s in as_slices(box)]
        if self.big_reads is not None:
            out = await self.big_reads.read(self.url, path, to_js(sel), Hint.of(hint).value)
        else:
            out = await bridge("read", self.url, path, to_js(sel), Hint.of(hint).value)
        dtype = _DTYPES[str(out.dtype)]
        shape = tuple(int(x) for x in out.shape.to_py())
        return np.frombuffer(out.data.to_py(), dtype=dtype).reshape(shape).copy()

    async def read_ranges(self, key: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        from pyodide.ffi import to_js
        out = await bridge("readBytes", f"{self.url.rstrip('/')}/{key}", to_js([[int(o), int(n)] for o, n in ranges]))
        return [bytes(b.to_py()) for b in out]

    async def prefetch(self, items: list[tuple[str, list]]) -> dict | None:
        from pyodide.ffi import to_js
        sel = [[path, [None if s is None else [int(s[0]), int(s[1])] for s in box]] for path, box in items]
        out = await bridge("prefetchIndexes", self.url, to_js(sel))
        return {"files": int(out.files), "bytes": int(out.bytes), "superseded": bool(out.superseded)}
