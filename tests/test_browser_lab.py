"""The notebook in real Chromium: the lab (JupyterLite in the site's lab/, `python -m builder site`) opens with every
request on 127.0.0.1, and each example notebook (app/notebooks/) runs all its cells in the Pyodide kernel without
an error, printing the same figures, within 1e-6, as the same notebook run in CPython on the same stores."""
from __future__ import annotations

import ast
import json
import time
from urllib.parse import parse_qsl, quote

import pytest

from browser_util import REPO, wait_state
from notebook_util import NOTEBOOKS, assert_close, run_in_cpython

pytestmark = pytest.mark.browser
ARTIFACTS = REPO / "artifacts"

PANEL = "window.jupyterapp && jupyterapp.shell.currentWidget"
KERNEL_IDLE = (f"(() => {{ const p = {PANEL}; const k = p && p.sessionContext && p.sessionContext.session"
               " && p.sessionContext.session.kernel; return !!k && k.status === 'idle'; })()")
RUN_ALL = """async () => {
    const panel = jupyterapp.shell.currentWidget;
    await panel.context.ready;
    await jupyterapp.commands.execute('notebook:run-all-cells');
    return panel.content.widgets.map((w) => w.model.toJSON());
}"""


def run_notebook(page, server, name: str) -> list[dict]:
    """The cells (nbformat JSON) of notebook `name` once the lab ran all of them."""
    page.goto(server + f"lab/notebooks/index.html?path={name}")
    page.wait_for_function(KERNEL_IDLE, timeout=300_000)
    return run_all_cells(page, name)


def run_all_cells(page, name: str = "the notebook") -> list[dict]:
    """Run every cell of the notebook shown; its cells (nbformat JSON) once the last one has printed."""
    cells = page.evaluate(RUN_ALL)
    deadline = time.monotonic() + 300  # run-all resolves when the last cell was sent; wait for its output
    while not [o for o in cells[-1].get("outputs", []) if o.get("output_type") == "stream"] \
            and not any(o.get("output_type") == "error" for c in cells for o in c.get("outputs", [])):
        assert time.monotonic() < deadline, f"{name}: the last cell printed nothing"
        page.wait_for_timeout(500)
        cells = page.evaluate("() => jupyterapp.shell.currentWidget.content.widgets.map((w) => w.model.toJSON())")
    return cells


def last_printed(cells: list[dict]) -> str:
    """The last line the last cell printed."""
    text = "".join("".join(o["text"]) if isinstance(o["text"], list) else o["text"]
                   for o in cells[-1]["outputs"] if o.get("output_type") == "stream")
    return text.strip().splitlines()[-1]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_each_example_notebook_runs_in_the_lab_offline_and_matches_cpython(path, page, server, site):
    seen = []
    page.context.on("request", lambda r: seen.append(r.url))  # the kernel's worker and the service worker too
    cells = run_notebook(page, server, path.name)
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(c.get("execution_count") for c in code), f"{path.name}: a cell did not run"
    text = "".join("".join(o["text"]) if isinstance(o["text"], list) else o["text"]
                   for o in code[-1]["outputs"] if o.get("output_type") == "stream")
    browser = json.loads(text.strip().splitlines()[-1])
    images = [o for c in code for o in c.get("outputs", []) if "image/png" in (o.get("data") or {})]
    assert images, f"{path.name}: no figure was drawn"
    cpython, _ = run_in_cpython(path, site)
    assert_close(browser, cpython)
    outside = [u for u in seen if not u.startswith(("http://127.0.0.1", "data:", "blob:"))]
    assert not outside, f"requests left the machine: {outside[:5]}"
    assert any("/pyodide/pyodide.asm.wasm" in u for u in seen)  # the site's own Pyodide, not a CDN's
    assert any("/data/2024.zarr/" in u for u in seen)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"lab-{path.stem}.png"), full_page=True)


VIEW_NOTEBOOK = REPO / "app" / "notebooks" / "5-a-view-from-the-explorer.ipynb"
OPENED = "() => document.body.dataset.tesseraView"
SAVED = """async (name) => {
    const m = await jupyterapp.serviceManager.contents.get(name, {content: true});
    return m.content.cells.map((c) => [c.metadata.tags || [], Array.isArray(c.source) ? c.source.join('') : c.source]);
}"""


def link_cell(cells: list) -> str:
    """The text the LINK cell's Python literal holds (ast.literal_eval: a string literal, never code)."""
    [source] = [src for tags, src in cells if "tessera-view" in tags]
    tree = ast.parse(source)
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Assign), source
    assert [t.id for t in tree.body[0].targets] == ["LINK"], source
    return ast.literal_eval(tree.body[0].value)


def test_the_explorers_view_opens_as_a_notebook_that_reads_the_same_pixels(page, server, site, tmp_path):
    """The explorer's "Open this view in a notebook" link makes a new notebook in the lab whose first cell holds
    the view (store, year, centre, width, selection, pins); run in the lab's kernel, it prints the figures the
    same notebook prints in CPython on that link."""
    view = "#year=2024&lon=-0.0500000&lat=50.8500000&span=1500.000&sel=-0.050000,50.850000&pins=-0.045000,50.852000"
    page.goto(server + "index.html" + view)
    assert wait_state(page) == "ready"
    anchor = page.locator("a.tessera-notebook")
    anchor.wait_for(state="attached", timeout=60_000)
    href = anchor.get_attribute("href")
    assert href.startswith("lab/lab/index.html#view=")
    page.goto(server + href)
    page.wait_for_function(OPENED, timeout=300_000)
    name = page.evaluate(OPENED)
    assert name == "this-view.ipynb"
    link = link_cell(page.evaluate(SAVED, name))
    fields = dict(parse_qsl(link))
    assert fields["store"].endswith("data/2024.zarr") and fields["year"] == "2024"
    assert abs(float(fields["lon"]) + 0.05) < 1e-6 and abs(float(fields["lat"]) - 50.85) < 1e-6
    assert abs(float(fields["span"]) - 1500) < 1
    for key, want in (("pins", (-0.045, 50.852)), ("sel", (-0.05, 50.85))):  # the pixel's centre: within 10 m
        got = [float(x) for x in fields[key].split(",")]
        assert abs(got[0] - want[0]) < 2e-4 and abs(got[1] - want[1]) < 1e-4, (key, got)
    assert page.evaluate("() => window.location.hash") == ""  # a reload makes no second copy
    page.wait_for_function(KERNEL_IDLE, timeout=300_000)
    cells = run_all_cells(page)
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{errors[0].get('ename')}: {errors[0].get('evalue')}"
    browser = json.loads(last_printed(cells))
    nb = json.loads(VIEW_NOTEBOOK.read_text())
    for c in nb["cells"]:
        if "tessera-view" in c["metadata"].get("tags", []):
            c["source"] = [f"LINK = {link!r}\n"]
    copy = tmp_path / VIEW_NOTEBOOK.name
    copy.write_text(json.dumps(nb))
    cpython, _ = run_in_cpython(copy, site)
    assert_close(browser, cpython)
    assert browser["pixels"] > 1000  # the view's 1.5 km square (150 x 150 pixels) holds data
    assert len(browser["points"]) == 2 and all(p is not None for p in browser["points"])


def test_a_view_link_is_data_bounded_and_never_code(page, server):
    """A link over the limit is refused in one console line and makes no notebook; quotes, backslashes, newlines
    and markup in a link reach the notebook as one string literal that holds exactly the link."""
    errors, dialogs = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(server + "lab/lab/index.html#view=" + "x" * 9000)
    page.wait_for_function("() => window.jupyterapp", timeout=300_000)
    listing = page.evaluate("async () => { await jupyterapp.restored;"
                            " return (await jupyterapp.serviceManager.contents.get('', {content: true}))"
                            ".content.map((c) => c.name); }")
    assert not [n for n in listing if n.startswith("this-view")], listing
    refused = [e for e in errors if "view was not opened" in e]
    assert refused == ["tessera: the explorer's view was not opened: its link is 9000 characters, more than 8192"]
    hostile = 'store=x"\\\n\'"""</script><img src=x onerror=alert(1)>&year=2024&lon=1&lat=2\u2028'
    page.goto(server + "lab/lab/index.html#view=" + quote(hostile, safe=""))
    page.wait_for_function(OPENED, timeout=300_000)
    assert link_cell(page.evaluate(SAVED, page.evaluate(OPENED))) == hostile
    page.wait_for_function("() => jupyterapp.shell.currentWidget && jupyterapp.shell.currentWidget.context"
                           " && jupyterapp.shell.currentWidget.context.path === 'this-view.ipynb'", timeout=60_000)
    assert not dialogs  # the markup was shown as text, never run
