"""scikit-learn on first use: in Pyodide it is loaded then (from the site's own, sha256-verified
lock wheels: scikit-learn, scipy, joblib, threadpoolctl, openblas), never at start-up.  The user's first
label starts the load (`prefetch`): classifying needs labels, so the 26 MB arrive while the user labels,
not after the first "Classify" click.  Its first import (`sklearn`) says so in the tool's step before it starts:
the load and the import take about 10 s in Pyodide."""
from __future__ import annotations

import asyncio
import sys

from app.tools.steps import first_line


class Load:
    """One load of a package, started on first call and shared by every later one; a load that fails (or is
    cancelled) is forgotten, so the next call starts another (a network failure is not kept until the page
    reloads).  `start`: the coroutine function (or one returning an awaitable) of the load itself."""

    def __init__(self, start):
        self.start = start
        self.future = None

    def __call__(self) -> asyncio.Future:
        if self.future is None:
            self.future = asyncio.ensure_future(self.start())
            self.future.add_done_callback(self._forget_failure)
        return self.future

    def forget(self) -> None:
        """Start a new load at the next call (this one did not bring what it should have)."""
        self.future = None

    def _forget_failure(self, future: asyncio.Future) -> None:
        # run before any awaiter of the load resumes (callbacks in the order added); retrieving the exception here
        # also keeps an unawaited prefetch's failure out of asyncio's "never retrieved" log
        if future is self.future and (future.cancelled() or future.exception() is not None):
            self.forget()


def _load_sklearn():
    import pyodide_js
    return pyodide_js.loadPackage("scikit-learn")


_sklearn = Load(_load_sklearn)


def prefetch():
    """Start loading scikit-learn unless it is loaded or loading; the future of the load (None on CPython, where it
    is installed)."""
    if sys.platform != "emscripten":
        return None
    return _sklearn()


LOADING = "loading scikit-learn (first use, about 10 s)"


async def sklearn(step=None) -> None:
    """Make `import sklearn` work, and import it. The first time, `step` (app/tools/steps.py) says so in its status
    line, sent to the page before the load and the import block; should the load fail, the step's failure line
    replaces it."""
    if "sklearn.base" in sys.modules:
        return
    if step is not None:
        step.say(LOADING)
        await asyncio.sleep(0)  # the status change goes out before the import holds the interpreter
    loading = prefetch()
    if loading is not None:
        await asyncio.shield(loading)  # one tool's run stopped while it waits leaves the load to the others
    try:
        import sklearn.base  # noqa: F401 (the import itself: seconds in Pyodide)
    except ImportError as e:
        # Pyodide's loadPackage logs a failed fetch on the console and resolves: the load is forgotten here too
        _sklearn.forget()
        raise ImportError(f"scikit-learn could not be loaded ({first_line(e)}); the browser console says why") from e


async def chunked(fn, x, rows: int = 32768, step=None, what: str = "pixel block"):
    """fn over x in blocks of `rows`, yielding to the event loop between blocks (the page stays responsive); each
    block counted to `step`'s counter (app/tools/steps.py) when given: "{what} 3 of 8"."""
    import numpy as np
    parts = []
    count = step.counter(-(-len(x) // rows), what) if step is not None else None
    for i in range(0, len(x), rows):
        parts.append(fn(x[i:i + rows]))
        if count is not None:
            count.at(len(parts))
        await asyncio.sleep(0)
    if count is not None:
        count.end()
    if not parts:
        return fn(x[:0])
    return np.concatenate(parts)
