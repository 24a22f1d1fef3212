"""Reads of big chunks in the browser: said before they start, their progress shown, a way to cancel them.

A pixel of a store whose inner chunks are large costs a whole chunk (the dClimate copy's 256x256x128 int8 chunks:
8.4 MB each). Every read through `BigReads.read` carries an id; the data path calls back (app/js/tessera.js
watchBigReads) when one is about to fetch a megabyte or more of big chunks (app/js/chunks.js: the chunks of 1 MiB or
more it touches that are not kept decoded), before its first request. The status line then says so ("Reading 8.4 MB for this pixel…", PURPOSE),
shows the bytes received once it takes longer than FIRST_S, and until it ends `busy` is true and `cancel()` aborts
it (its requests stop; it fails with the "cancelled" kind). Small reads cost one id and nothing else.
When the last big read ends, the status line is what it was before, unless something else said otherwise since.
"""
from __future__ import annotations

import asyncio
import contextvars
import itertools

from app import views
from app.reader import bridge

FIRST_S = 1.0  # progress is shown for a read that takes longer than this...
EVERY_S = 0.25  # ...updated this often
# What the reads under way are for, in the status line: "this pixel" while a click is read (app/session.py select);
# the tasks a caller starts inherit it (asyncio copies the context into each task).
PURPOSE = contextvars.ContextVar("purpose", default="the map and tools")


def megabytes(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


class BigReads:
    """`owner` has the `status` line (HTML) and the `reading` flag that shows its Cancel button (app/session.py)."""

    def __init__(self, owner):
        self.owner = owner
        self._purposes: dict[str, str] = {}  # every read under way: what it is for
        self._big: dict[str, int] = {}  # the big ones: their bytes
        self._count = itertools.count(1)
        self._listening = None
        self._before = ""  # the status line before the first big read under way...
        self._said = None  # ...and the last one said here: restored when they end, unless something said otherwise

    @property
    def busy(self) -> bool:
        return bool(self._big)

    async def read(self, url: str, path: str, sel, hint: str):
        """tesseraJS.read's value for this box (`sel` already converted for JavaScript)."""
        if self._listening is None:
            import js
            from pyodide.ffi import create_proxy
            self._listening = create_proxy(self._on_big)  # kept: JavaScript holds it for the session
            js.tesseraJS.watchBigReads(self._listening)
        rid = f"read-{next(self._count)}"
        self._purposes[rid] = PURPOSE.get()
        try:
            return await bridge("read", url, path, sel, hint, rid)
        finally:
            self._purposes.pop(rid)
            if self._big.pop(rid, None) is not None and not self._big:
                self.owner.reading = False
                if self.owner.status == self._said:
                    self.owner.status = self._before

    def _say(self, text: str) -> None:
        self._said = self.owner.status = text

    def _on_big(self, rid: str, nbytes) -> None:
        """Called by JavaScript as read `rid` is about to fetch `nbytes` of big chunks (before its first request)."""
        what = self._purposes.get(rid)
        if what is None:
            return
        if not self._big:
            self._before = self.owner.status
        total = self._big[rid] = int(nbytes)
        self._say(views.html("Reading {} for {}…", megabytes(total), what))
        self.owner.reading = True
        # Not cancelled when the read ends (Pyodide reports a cancelled task nobody awaits): it ends by itself.
        asyncio.ensure_future(self._progress(rid, total, what))

    async def _progress(self, rid: str, total: int, what: str) -> None:
        import js
        await asyncio.sleep(FIRST_S)
        while rid in self._big:
            got = int(js.tesseraJS.readProgress().received)
            self._say(views.html("Reading {} for {}: {} received…", megabytes(total), what, megabytes(got)))
            await asyncio.sleep(EVERY_S)

    def cancel(self) -> None:
        """Abort every big read under way (each fails with the "cancelled" kind)."""
        import js
        for rid in list(self._big):
            js.tesseraJS.cancelRead(rid)
