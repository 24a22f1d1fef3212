"""scikit-learn on first use: in Pyodide it is loaded then (from the site's own, sha256-verified
lock wheels: scikit-learn, scipy, joblib, threadpoolctl, openblas), never at start-up.  The user's first
label starts the load (`prefetch`): classifying needs labels, so the 26 MB arrive while the user labels,
not after the first "Classify" click.  Its first import (`sklearn`) says so in the tool's step before it starts:
the load and the import take about 10 s in Pyodide."""
from __future__ import annotations

import asyncio
import sys

_loading = None


def prefetch():
    """Start loading scikit-learn, once; the future of the load (None on CPython, where it is installed)."""
    global _loading
    if sys.platform != "emscripten":
        return None
    if _loading is None:
        import pyodide_js
        _loading = asyncio.ensure_future(pyodide_js.loadPackage("scikit-learn"))
    return _loading


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
        await loading
    import sklearn.base  # noqa: F401 (the import itself: seconds in Pyodide)


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
