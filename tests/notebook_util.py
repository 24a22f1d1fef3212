"""The example notebooks (app/notebooks/) run in CPython, cell by cell, as the lab's kernel runs them: top-level
await, matplotlib without a screen, the stores of a built site read from its directory (app/notebook.py reads
$TESSERA_SITE there)."""
from __future__ import annotations

import ast
import asyncio
import io
import json
import math
import os
from contextlib import redirect_stdout
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "app" / "notebooks").glob("*.ipynb"))


def code_cells(path: Path) -> list[str]:
    """The code cells' sources, without IPython's line magics (`%matplotlib inline`: CPython draws with Agg)."""
    return ["".join(line for line in c["source"] if not line.startswith("%"))
            for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def run_in_cpython(path: Path, site: Path) -> tuple[dict, str]:
    """(the notebook's `result`, the last cell's printed text) from running every code cell in one namespace."""
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["TESSERA_SITE"] = str(site)
    ns: dict = {}
    out = io.StringIO()

    async def run() -> None:
        for src in code_cells(path):
            code = compile(src, path.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            with redirect_stdout(out):
                r = eval(code, ns)  # noqa: S307 -- the project's own notebooks
                if asyncio.iscoroutine(r):
                    await r

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(1) as pool:  # a thread of its own: a Playwright session keeps a loop in this one
        pool.submit(asyncio.run, run()).result()
    import matplotlib.pyplot as plt
    plt.close("all")
    return ns["result"], out.getvalue().strip().splitlines()[-1]


def assert_close(got, want, path: str = "result", tol: float = 1e-6) -> None:
    """Equal structure; numbers within `tol` (relative to the larger magnitude, absolute below 1)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (path, got, want)
        for k in want:
            assert_close(got[k], want[k], f"{path}.{k}", tol)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (path, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, f"{path}[{i}]", tol)
    elif isinstance(want, bool) or isinstance(want, str) or want is None:
        assert got == want, (path, got, want)
    else:
        assert isinstance(got, (int, float)) and not isinstance(got, bool), (path, got)
        assert math.isclose(got, want, rel_tol=tol, abs_tol=tol), (path, got, want)
