"""Assemble the self-hosted site in static/: Pyodide, every wheel, every JS asset.

Nothing is fetched from a CDN at run time.  The packages come from the registries
(builder/sitepkgs.py: Pyodide and its lock wheels verified by sha256, pinned pure
wheels).  This module adds the app itself (app/ plus the pure core of builder/,
builder/core/) as one more wheel, Pyodide bytecode for the pure wheels, the zarrita
bundle (esbuild), the Bokeh and Panel JavaScript/CSS taken from those same wheels (so
the JS and Python versions always match), boot.json, the documentation (builder/docs.py: Sphinx, docs/
into docs/), and `static/site-manifest.json`
listing every file with its sha256.  The dev server is builder/serve.py.
"""
from __future__ import annotations

import base64
import json
import shutil
import zipfile
from pathlib import Path

from builder import wheels as wheel_files
from builder.atomic import write_bytes
from builder.sitepkgs import (BACKGROUND_WHEELS, BOKEH_JS, FIRST_STYLESHEETS, PURE_WHEELS,  # noqa: F401
                              PYODIDE_VERSION, _lazy_wheels, _npm, _pure_wheels, _pyodide, _run, _sha256, cache_lock)

REPO = Path(__file__).resolve().parent.parent
# The pure core the explorer imports: the package builder/core/ whole (stdlib + numpy only;
# tests/test_contract.py checks that the explorer reaches nothing else of builder/).
CORE_PACKAGE = REPO / "builder" / "core"
CORE_ERRORS = CORE_PACKAGE / "errors.json"  # the kinds of a failed read: builder/core/source.py's and the JavaScript's
# Coastlines and borders (world-atlas 2.0.2, Natural Earth 1:50m): copied by _js, named in boot.json for the
# preview (app/web/preview.js) and the Panel map (app/main.py), which share one decoded copy.
GEOGRAPHY = "vendor/world-atlas/countries-50m.json"
PANEL_CDN_ROOT = "vendor/panel/"  # Panel's JS and CSS in the site (boot.json; the worker makes it absolute)
IFRAME_RESIZER = ("iframeResizer.min.js", "iframeResizer.contentWindow.min.js")  # host page's, framed page's


def _app_wheel(out: Path) -> str:
    """The browser half of this project as a wheel: app/ and the pure modules of builder/ it imports."""
    from builder import __version__
    files = {p.relative_to(REPO).as_posix(): p.read_bytes() for p in sorted((REPO / "app").rglob("*.py"))}
    files["builder/__init__.py"] = (REPO / "builder" / "__init__.py").read_bytes()
    for p in sorted([*CORE_PACKAGE.glob("*.py"), CORE_ERRORS]):
        files[p.relative_to(REPO).as_posix()] = p.read_bytes()
    name = f"tessera_explorer_app-{__version__}-py3-none-any.whl"
    wheel_files.pack(out / "wheels" / name, files, "tessera-explorer-app", __version__)
    return name


def _add_pycs(node: Path, out: Path, wheels: list[str], cache: Path, keep_source: tuple[str, ...] = ()) -> None:
    """Bytecode compiled by Pyodide's own CPython (under node) for the pure wheels.

    Importing Panel and Bokeh from source costs seconds of compilation in the browser; with bytecode
    (unchecked-hash .pyc) it is skipped. The wheels in `keep_source` (the app's own, whose tracebacks a
    developer reads) gain __pycache__/*.cpython-312.pyc beside their sources; the others ship the bytecode
    alone, in place of the sources (wheels.sourceless): about 2 MB less to download and unpack before the
    explorer starts, and no source file for each import to look at.
    """
    import tempfile
    paths = [out / "wheels" / w for w in wheels]
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        _run(["node", str(REPO / "builder" / "pycompile.mjs"), str(out / "pyodide"), tmp, *map(str, paths)])
        for i, whl in enumerate(paths):
            extra = {p.relative_to(Path(tmp) / str(i)).as_posix(): p.read_bytes()
                     for p in (Path(tmp) / str(i)).rglob("*.pyc")}
            if extra and whl.name in keep_source:
                wheel_files.add_members(whl, extra)
            elif extra:
                wheel_files.sourceless(whl, extra)


def _js(node: Path, out: Path) -> None:
    vend = out / "vendor"
    vend.mkdir(parents=True, exist_ok=True)
    esbuild = node / ".bin" / "esbuild"
    entry = node.parent / "tessera.js"  # bundled next to node_modules so imports resolve there
    for src in [*(REPO / "app" / "js").glob("*.js"), CORE_ERRORS]:  # fetching.js imports "./errors.json"
        shutil.copy(src, node.parent / src.name)
    # zarrita imports each compression codec (numcodecs' wasm builds: Blosc, Zstd, LZ4, 1.4 MB in all) when a
    # chunk first needs it: split off into chunks of their own, a page loads only those its stores use (Blosc,
    # for every TESSERA store: the page asks for it at once, app/js/tessera.js loadCodecs). Named by content,
    # so hosts may cache them for good (builder/serve.py, netlify.toml).
    shutil.rmtree(vend / "chunks", ignore_errors=True)
    _run([str(esbuild), str(entry), "--bundle", "--format=esm", "--minify", "--splitting", f"--outdir={vend}",
          "--entry-names=[name]", "--chunk-names=chunks/[name]-[hash]", "--out-extension:.js=.mjs",
          "--log-level=error"], cwd=node.parent)
    # UMAP's worker (app/js/umap-worker.js: umap-js and seedrandom), a classic script the data path starts per run
    # (app/js/umap.js UMAP_WORKER); 114 kB that no page loads until a UMAP runs.
    _run([str(esbuild), str(node.parent / "umap-worker.js"), "--bundle", "--format=iife", "--minify",
          f"--outfile={vend / 'umap-worker.js'}", "--log-level=error"], cwd=node.parent)
    (vend / "world-atlas").mkdir(exist_ok=True)  # coastlines and borders (Natural Earth), fetched after start-up
    for name in (Path(GEOGRAPHY).name, "LICENSE"):
        shutil.copy(node / "world-atlas" / name, vend / "world-atlas" / name)
    # iframe-resizer 4.4.5 (MIT; its 5.x line is GPL-3.0): the explorer loads the content script when it is in a frame
    # (app/web/boot.js), a host page the other one (builder/sphinx_ext.py, docs/embedding.md).
    (vend / "iframe-resizer").mkdir(exist_ok=True)
    for name in IFRAME_RESIZER:
        shutil.copy(node / "iframe-resizer" / "js" / name, vend / "iframe-resizer" / name)


def _bokeh_panel_assets(cache: Path, out: Path) -> None:
    """Bokeh and Panel JS/CSS from their wheels (the versions the browser will import)."""
    dl = cache / "pypi"
    vend = out / "vendor"
    bokeh_whl = next(dl.glob(f"bokeh-{PURE_WHEELS['bokeh']}-*.whl"))
    panel_whl = next(dl.glob(f"panel-{PURE_WHEELS['panel']}-*.whl"))
    (vend / "bokeh").mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(bokeh_whl) as z:
        for name in BOKEH_JS:
            write_bytes(vend / "bokeh" / name, z.read(f"bokeh/server/static/js/{name}"))
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
            write_bytes(target, z.read(n))


def _in_background(wheel: str) -> bool:
    """Whether a wheel file is one the worker loads once the explorer is ready (sitepkgs.BACKGROUND_WHEELS), not at
    start-up. A wheel's file name starts with its project's name."""
    return wheel.split("-")[0] in BACKGROUND_WHEELS


def _web(out: Path, lock_pkgs: list[str], background_pkgs: list[str], wheels: list[str],
         lazy: dict[str, str]) -> None:
    for p in (REPO / "app" / "web").iterdir():
        if p.is_file():
            shutil.copy(p, out / p.name)
    later = [w for w in wheels if _in_background(w)]
    panel_dist = f"vendor/panel/{PURE_WHEELS['panel']}/dist/"  # Panel's files, under its version (netlify.toml)
    lock = json.loads((out / "pyodide" / "pyodide-lock.json").read_text())["packages"]
    # The start-up lock packages' files with the integrity Pyodide's loadPackage checks them against (the lock's
    # sha256 in Subresource Integrity form): the worker requests them while Pyodide starts (app/web/worker.js).
    sri = lambda hexdigest: "sha256-" + base64.b64encode(bytes.fromhex(hexdigest)).decode()
    lock_files = {f"pyodide/{lock[n]['file_name']}": sri(lock[n]["sha256"]) for n in lock_pkgs}
    boot = {"pyodide": PYODIDE_VERSION, "lock_packages": lock_pkgs, "lock_files": lock_files,
            "background_packages": background_pkgs,
            "wheels": [f"wheels/{w}" for w in wheels if w not in later],
            "background_wheels": [f"wheels/{w}" for w in later],
            "lazy_wheels": {k: f"wheels/{w}" for k, w in lazy.items()}, "panel_cdn_root": PANEL_CDN_ROOT,
            "geography": GEOGRAPHY, "warmup": "warmup.json",
            "scripts": [f"vendor/bokeh/{n}" for n in BOKEH_JS] + [panel_dist + "panel.min.js"],
            "stylesheets": [panel_dist + n for n in FIRST_STYLESHEETS]}
    write_bytes(out / "boot.json", json.dumps(boot, indent=1).encode())


def _warmup(out: Path, cache: Path, lock_pkgs: list[str], wheels: list[str]) -> None:
    """warmup.json: the document the page builds off screen while Python imports Panel (app/warmup.py).

    Made by app/warmup.py in the site's Pyodide under node (builder/warmup.mjs) with the start-up wheels, about 6 s;
    kept in the cache under the Pyodide version, the wheels' names (so their versions) and the text of the app's
    modules it runs (app/warmup.py, app/page.py: the app's wheel keeps its name as they change)."""
    import hashlib
    start_up = sorted(w for w in wheels if not _in_background(w))
    sources = [(REPO / "app" / m).read_text() for m in ("warmup.py", "page.py")]
    key = hashlib.sha256(json.dumps([PYODIDE_VERSION, lock_pkgs, start_up, sources]).encode()).hexdigest()
    kept = cache / "warmup" / f"{key[:24]}.json"
    if not kept.exists():
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_suffix(".part")
        _run(["node", str(REPO / "builder" / "warmup.mjs"), str(out / "pyodide"), str(tmp), PANEL_CDN_ROOT,
              ",".join(lock_pkgs), *(str(out / "wheels" / w) for w in start_up)])
        tmp.replace(kept)
    shutil.copy(kept, out / "warmup.json")


def _manifest(out: Path) -> dict:
    files = {}
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        if p.is_file() and not rel.startswith("data/") and rel != "site-manifest.json":
            files[rel] = {"sha256": _sha256(p), "bytes": p.stat().st_size}
    doc = {"pyodide": PYODIDE_VERSION, "files": files}
    write_bytes(out / "site-manifest.json", json.dumps(doc, indent=1).encode())
    return doc


def build_site(out: Path, cache: Path, quiet: bool = False) -> dict:
    out = Path(out)
    cache = Path(cache)
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    with cache_lock(cache):  # the cache's npm tree is also where the bundle is built (_js)
        return _build_site(out, cache, say)


def _build_site(out: Path, cache: Path, say) -> dict:
    say("site: npm packages (pyodide, zarrita, esbuild)")
    node = _npm(cache)
    say("site: Pyodide core and lock wheels (sha256-verified against pyodide-lock.json)")
    lock_pkgs, background_pkgs = _pyodide(node, cache, out)
    say("site: pure-Python wheels")
    wheels = _pure_wheels(cache, out)
    app_wheel = _app_wheel(out)
    wheels.append(app_wheel)
    lazy = _lazy_wheels(cache, out)
    say("site: bytecode for Pyodide's CPython 3.12 (compiled by Pyodide under node)")
    _add_pycs(node, out, wheels + list(lazy.values()), cache, keep_source=(app_wheel,))
    say("site: JavaScript bundle and Bokeh/Panel assets")
    _js(node, out)
    _bokeh_panel_assets(cache, out)
    _web(out, lock_pkgs, background_pkgs, wheels, lazy)
    say("site: the page's warm-up document (app/warmup.py, by Pyodide under node)")
    _warmup(out, cache, lock_pkgs, wheels)
    say("site: the documentation (Sphinx, docs/ -> docs/)")
    from builder.docs import build_docs
    build_docs(out / "docs")
    say("site: the notebook (JupyterLite on the site's Pyodide, lab/)")
    from builder.lab import build_lab
    from builder.sitepkgs import provisa_wheel
    build_lab(out, provisa_wheel(cache))
    doc = _manifest(out)
    total = sum(f["bytes"] for f in doc["files"].values())
    say(f"site: {len(doc['files'])} files, {total / 1e6:.1f} MB in {out}")
    return doc
