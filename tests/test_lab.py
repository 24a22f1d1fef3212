"""The notebook: the lab (JupyterLite in the site's lab/) configured on the site's own Pyodide with no other origin,
the kernel's reader (app/notebook.py) on CPython, and the example notebooks run top to bottom in CPython on real
demo stores built by the real CLI."""
from __future__ import annotations

import json
from urllib.parse import urljoin

import numpy as np
import pytest
import zarr

from app import notebook
from builder import lab
from builder.sitepkgs import provisa_wheel
from conftest import run_async, run_cli
from notebook_util import NOTEBOOKS, REPO, run_in_cpython


@pytest.fixture(scope="module")
def demo_site(tmp_path_factory):
    """A site directory holding the demo stores of 256 px tiles (2023, 2024), as the browser tests' site has."""
    site = tmp_path_factory.mktemp("nb-site")
    work = tmp_path_factory.mktemp("nb-work")
    run_cli("demo", "--out", str(site / "data"), "--tiles", str(work / "tiles"), "--record", str(work / "record"),
            "--px", "256", "--scheduler", "threads", "-q", "--no-dense")
    return site


def test_the_labs_configuration_names_nothing_on_another_origin():
    doc = lab.config()
    urls = lab.urls_in_config(doc)
    assert "./../pyodide/pyodide.js" in urls and "./pypi/all.json" in urls  # the checker sees the kernel's URLs
    base = "http://127.0.0.1:8000/lab/"
    for url in urls:
        assert urljoin(base, url).startswith("http://127.0.0.1:8000/"), url
    kernel = doc["jupyter-config-data"]["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]
    assert kernel["disablePyPIFallback"] is True
    # the checker itself: a CDN URL anywhere in a config is found
    bad = json.loads(json.dumps(doc))
    bad["jupyter-config-data"]["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]["pyodideUrl"] = \
        "https://cdn.jsdelivr.net/pyodide/v0.27.7/full/pyodide.js"
    assert any(not urljoin(base, u).startswith("http://127.0.0.1:8000/") for u in lab.urls_in_config(bad))


def test_the_lab_is_built_from_jupyterlite_0_5_1_and_the_pyodide_kernel_0_5_2_with_its_own_lock(tmp_path):
    """build_lab on a site holding the Pyodide lock and the wheels it adds: every jupyter-lite.json of the lab names
    no other origin, the lock adds the app's wheel with its real sha256, the notebooks are listed."""
    import hashlib
    out = tmp_path / "site"
    (out / "pyodide").mkdir(parents=True)
    lock = {"info": {"version": "0.27.7"}, "packages": {"numpy": {"name": "numpy", "file_name": "numpy.whl"}}}
    (out / "pyodide" / "pyodide-lock.json").write_text(json.dumps(lock))
    (out / "wheels").mkdir()
    for name in ("tessera_explorer_app-1-py3-none-any.whl", "jsonschema-4.17.3-py3-none-any.whl",
                 "attrs-23.2.0-py3-none-any.whl", "pyrsistent-0.19.3-py3-none-any.whl",
                 "bokeh-3.7.3-py3-none-any.whl", "pyyaml-6.0.3-py3-none-any.whl"):
        (out / "wheels" / name).write_bytes(name.encode())
    lab.build_lab(out, provisa_wheel(REPO / ".cache"))
    root = out / "lab"
    assert (root / "index.html").is_file() and (root / "lab" / "index.html").is_file()
    assert not list(root.rglob("*.map"))
    for cfg in root.rglob("jupyter-lite.json"):
        for url in lab.urls_in_config(json.loads(cfg.read_text())):
            assert "//" not in url, (cfg, url)  # relative, or a path of this site: never another origin
    ext = json.loads((root / lab.KERNEL_EXT / "package.json").read_text())
    assert ext["version"] == "0.5.2"
    assert json.loads((root / "jupyter-lite.json").read_text())["jupyter-config-data"]["appVersion"] == "0.5.1"
    got = json.loads((root / "pyodide-lock.json").read_text())["packages"]["tessera-explorer-app"]
    whl = out / "wheels" / "tessera_explorer_app-1-py3-none-any.whl"
    assert got["sha256"] == hashlib.sha256(whl.read_bytes()).hexdigest()
    assert (out / "pyodide" / got["file_name"]).resolve() == whl.resolve()
    listing = json.loads((root / "api" / "contents" / "all.json").read_text())
    assert sorted(c["name"] for c in listing["content"]) == [p.name for p in NOTEBOOKS] and len(NOTEBOOKS) == 5
    for c in listing["content"]:
        assert (root / "files" / c["name"]).read_bytes() == (REPO / "app" / "notebooks" / c["name"]).read_bytes()
    # JupyterLab's page loads the script that opens an explorer view as a notebook, before its own bundle
    html = (root / "lab" / "index.html").read_text()
    assert html.count('<script src="../lab-view.js"></script>') == 1
    assert html.index("lab-view.js") < html.index("</head>")
    assert (root / "lab-view.js").read_bytes() == (REPO / "app" / "web" / "lab-view.js").read_bytes()
    script = (root / "lab-view.js").read_text()
    assert '"5-a-view-from-the-explorer.ipynb"' in script and (REPO / "app" / "notebooks" / "5-a-view-from-the-explorer.ipynb").exists()


def test_the_notebook_reader_reads_what_zarr_python_reads(demo_site):
    """app.notebook on CPython against zarr-python opened directly on the same store."""
    url = str(demo_site / "data" / "2024.zarr")
    store = run_async(notebook.open_store(url))
    assert store.year == 2024 and "utm30" in store.zones
    region = run_async(store.read_region((-0.062, 50.842, -0.038, 50.858)))
    r0, r1, c0, c1 = region.window
    assert (r1 - r0) > 100 and (c1 - c0) > 100
    z = zarr.open_group(url, mode="r")
    q = np.asarray(z["utm30/embeddings"][r0:r1, c0:c1])
    s = np.asarray(z["utm30/scales"][r0:r1, c0:c1])
    ok = np.isfinite(s) & (s > 0)
    assert ok.sum() > 0.9 * ok.size
    np.testing.assert_array_equal(region.valid, ok)
    np.testing.assert_array_equal(region.vectors[ok], q[ok].astype(np.float32) * s[ok][:, None])
    lon, lat = region.lonlat()
    v, status = run_async(store.probe(float(lon[5, 7]), float(lat[5, 7])))
    assert status == "valid" and np.array_equal(v, region.vectors[5, 7])
    with pytest.raises(ValueError, match="more than 10 per side"):
        run_async(store.read_region((-0.062, 50.842, -0.038, 50.858), max_side=10))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_each_example_notebook_runs_top_to_bottom_in_cpython(path, demo_site):
    result, printed = run_in_cpython(path, demo_site)
    assert json.loads(printed) == result
    numbers = json.dumps(result)
    assert "NaN" not in numbers
    assert result  # each notebook's figures (compared with the browser's in tests/test_browser_lab.py)


def test_an_explorer_link_gives_its_view_to_a_notebook():
    """app.notebook.view reads the hash the explorer writes (app/state.py UrlState); the box is a square around the
    centre as wide as the view, at most 2,560 m, in degrees of a sphere of 111,320 m per degree."""
    import math
    v = notebook.view("http://host/lab/x#store=https://data.example/2024.zarr&year=2024&lon=-0.0500000"
                      "&lat=50.8500000&span=1500.000&sel=-0.050000,50.850000&pins=-0.045000,50.852000;1.5,2.5")
    assert v.store == "https://data.example/2024.zarr" and v.year == 2024
    assert v.selected == (-0.05, 50.85) and v.pins == [(-0.045, 50.852), (1.5, 2.5)]
    dlat = 750 / 111_320
    dlon = dlat / math.cos(math.radians(50.85))
    assert np.allclose(v.box, (-0.05 - dlon, 50.85 - dlat, -0.05 + dlon, 50.85 + dlat), rtol=0, atol=1e-12)
    wide = notebook.view("#store=data/2024.zarr&lon=10&lat=0&span=900000")  # a zoomed-out view: 2,560 m read
    assert wide.year is None and wide.store.endswith("data/2024.zarr") and wide.store != "data/2024.zarr"
    assert np.isclose(wide.box[3] - wide.box[1], 2560 / 111_320, rtol=0, atol=1e-12)
    for bad, why in (("#year=x&store=a&lon=1&lat=2", "year 'x' is not a whole number"),
                     ("#lon=1&lat=2", "names no store"), ("#store=a&year=2024", "names no view centre"),
                     ("#store=a&lon=1&lat=90", "names no view centre")):
        with pytest.raises(ValueError, match=why):
            notebook.view(bad)
