"""The import contract: the pure core imports nothing heavy, the explorer nothing of the builder but the core."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import builder.core
from builder.site import CORE_PACKAGE

REPO = Path(__file__).resolve().parent.parent
# Every module of the core package, as the site ships it (builder/site.py packs builder/core/ whole).
CORE = {"builder.core"} | {f"builder.core.{p.stem}" for p in CORE_PACKAGE.glob("*.py") if p.stem != "__init__"}
FORBIDDEN_IN_CORE = {"zarr", "dask", "distributed", "fsspec", "panel", "bokeh", "param", "numcodecs", "pyproj", "xarray"}
# What the site ships for the explorer (Pyodide's lock packages and the pure wheels of builder/site.py).
BROWSER_PACKAGES = {"numpy", "panel", "bokeh", "param", "js", "pyodide", "pyodide_js", "PIL", "tifffile", "jsonschema"}
# Shipped by the site but loaded on first use (builder/site.py LAZY_PACKAGES; app/tools/lazy.py).
LAZY = {"sklearn"}
# The notebook's reader on CPython reads through zarr-python (builder/reader/source.py ZarrSource), imported inside
# the one function that picks a transport, on CPython only (app/notebook.py source); never in the browser.
CPYTHON_ONLY = {"notebook.py": {"builder.reader.source"}}


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
    if (p / "__init__.py").exists():
        return p / "__init__.py"
    return p.with_suffix(".py") if p.with_suffix(".py").exists() else None


def test_core_imports_only_stdlib_numpy_and_itself():
    for name in sorted(CORE):
        for imp in imports(module_file(name)):
            top = imp.split(".")[0]
            assert top not in FORBIDDEN_IN_CORE, f"{name} imports {imp}"
            assert top in sys.stdlib_module_names or top in ("numpy", "__future__") or imp in CORE, f"{name} imports {imp}"


def test_the_explorer_reaches_the_builder_only_through_its_core_package():
    for path in sorted((REPO / "app").rglob("*.py")):
        for imp in imports(path):
            top = imp.split(".")[0]
            if top == "builder":
                assert imp in CORE | CPYTHON_ONLY.get(path.name, set()), \
                    f"app/{path.name} imports {imp}, which is not part of builder.core"
            elif top != "app":
                assert top in sys.stdlib_module_names or top in BROWSER_PACKAGES | LAZY | CPYTHON_ONLY.get(path.name, set()) \
                    or top == "__future__", \
                    f"app/{path.name} imports {imp}, which the site does not ship"


def test_the_core_states_its_public_api_and_each_name_resolves():
    assert set(builder.core.MODULES) == {m.removeprefix("builder.core.") for m in CORE} - {"builder.core"}
    for name in builder.core.__all__:
        assert getattr(builder.core, name) is not None, name
    # a name the API does not state is an AttributeError, not a silent None
    try:
        builder.core.no_such_name
    except AttributeError:
        pass
    else:
        raise AssertionError("builder.core.no_such_name resolved")


def test_every_public_class_of_the_core_is_a_stated_public_name():
    """`__all__` states the core's API: each public class a core module defines is in it, and resolves to that class."""
    for name in sorted(CORE - {"builder.core"}):
        for node in ast.parse(module_file(name).read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                assert node.name in builder.core.__all__, f"{name}.{node.name} is not in builder.core.__all__"
                assert getattr(builder.core, node.name) is getattr(sys.modules[name], node.name), node.name


def _classes(path: Path) -> list[ast.ClassDef]:
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]


def _bases(cls: ast.ClassDef) -> set[str]:
    return {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in cls.bases}


def test_the_explorers_reader_is_the_cores():
    """The reader (open a store, its kinds, pixels, windows) is builder/core/reader.py and kinds.py: the explorer
    defines no model or store kind of its own, subclasses none of the core's, and its one `Source` is the browser's
    transport (app/reader.py JSSource)."""
    core = {n for n in builder.core.NAMES if isinstance(getattr(builder.core, n), type)}  # the core's classes
    sources = []
    for path in sorted((REPO / "app").rglob("*.py")):
        where = f"app/{path.relative_to(REPO / 'app')}"
        for cls in _classes(path):
            assert not cls.name.endswith("Model"), f"{where} defines {cls.name}: the reader is builder.core.reader's"
            assert cls.name not in core, f"{where} defines {cls.name}, a second copy of the core's"
            assert not _bases(cls) & (core - {"Source"}), f"{where}: {cls.name} subclasses the core's {_bases(cls)}"
            if "Source" in _bases(cls):
                sources.append(f"{where}:{cls.name}")
    assert sources == ["app/reader.py:JSSource"]
    assert {"StoreModel", "YearStore", "YearsIndex", "TimeAxisStore", "Pixel", "SourceError", "Source"} <= core


def test_lazy_packages_are_imported_only_inside_functions():
    """scikit-learn is loaded on first use (app/tools/lazy.py): no module-level import of it in the explorer."""
    for path in sorted((REPO / "app").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:  # module-level statements only
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] in LAZY for n in names), f"{path.name} imports {names} at module level"


# Tests of which kind a store is (v1 year store, multi-year index, geoemb:), which builder/core/kinds.py's classes
# answer.
KIND_TESTS = re.compile(r"\btime_axis\b|\byears is (not )?None\b|\.kind\s*[!=]=\s*(GEOEMB|STACK|TESSERA)\b"
                        r"|isinstance\([^)]*\b(YearStore|ManyYears|YearsIndex|TimeAxisStore)\b")


def test_the_explorer_asks_a_stores_kind_and_never_tests_it():
    """No mode flags where a class per kind would do: the explorer and its reader (builder/core/reader.py, geoemb.py)
    ask `model.kind` (builder/core/kinds.py, one class per store kind, chosen at open) what differs, and test no
    layout's time axis, `years is None` or StoreInfo kind."""
    paths = [*sorted((REPO / "app").rglob("*.py")), CORE_PACKAGE / "reader.py", CORE_PACKAGE / "geoemb.py"]
    found = [f"{path.relative_to(REPO)}:{i}: {line.strip()}" for path in paths
             for i, line in enumerate(path.read_text().splitlines(), 1) if KIND_TESTS.search(line)]
    assert not found, "\n".join(found)
