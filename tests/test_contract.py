"""The import contract: the pure core imports nothing heavy, the explorer nothing of the builder but the core."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from builder.site import BROWSER_CORE

REPO = Path(__file__).resolve().parent.parent
CORE = {f"builder.{m.removesuffix('.py')}" for m in BROWSER_CORE}
FORBIDDEN_IN_CORE = {"zarr", "dask", "distributed", "fsspec", "panel", "bokeh", "param", "numcodecs", "pyproj", "xarray"}
# What the site ships for the explorer (Pyodide's lock packages and the pure wheels of builder/site.py).
BROWSER_PACKAGES = {"numpy", "panel", "bokeh", "param", "js", "pyodide", "pyodide_js", "PIL", "tifffile", "jsonschema"}
# Shipped by the site but loaded on first use (builder/site.py LAZY_PACKAGES; app/tools/lazy.py).
LAZY = {"sklearn"}
# app/reader.py's ZarrSource is the CPython implementation of the Source seam (zarr-python); it imports
# these inside its methods and is never used in the browser.
CPYTHON_ONLY = {"reader.py": {"zarr", "fsspec"}}


def imports(path: Path) -> set[str]:
    """Absolute module names imported anywhere in the file (function-level imports included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module in ("app", "builder"):  # `from builder.core import convention` imports builder.core.convention
                out |= {f"{node.module}.{a.name}" for a in node.names}
            else:
                out.add(node.module)
    return out


def module_file(name: str) -> Path | None:
    p = REPO / Path(*name.split("."))
    return p.with_suffix(".py") if p.with_suffix(".py").exists() else None


def test_core_imports_only_stdlib_numpy_and_itself():
    for name in sorted(CORE):
        for imp in imports(module_file(name)):
            top = imp.split(".")[0]
            assert top not in FORBIDDEN_IN_CORE, f"{name} imports {imp}"
            assert top in sys.stdlib_module_names or top in ("numpy", "__future__") or imp in CORE, f"{name} imports {imp}"


def test_explorer_imports_of_the_builder_are_exactly_the_shipped_core():
    reached = set()
    for path in sorted((REPO / "app").rglob("*.py")):
        for imp in imports(path):
            top = imp.split(".")[0]
            if top == "builder":
                if module_file(imp) is not None:
                    assert imp in CORE, f"app/{path.name} imports {imp}, which is not part of the core"
                    reached.add(imp)
            elif top != "app":
                assert top in sys.stdlib_module_names or top in BROWSER_PACKAGES | LAZY | CPYTHON_ONLY.get(path.name, set()) \
                    or top == "__future__", \
                    f"app/{path.name} imports {imp}, which the site does not ship"
    for name in list(reached):  # the core's own imports of the core
        reached |= {i for i in imports(module_file(name)) if i in CORE}
    assert reached == CORE, f"the site ships {sorted(CORE)} but the explorer reaches {sorted(reached)}"


def test_lazy_packages_are_imported_only_inside_functions():
    """scikit-learn is loaded on first use (app/tools/lazy.py): no module-level import of it in the explorer."""
    for path in sorted((REPO / "app").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:  # module-level statements only
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] in LAZY for n in names), f"{path.name} imports {names} at module level"
