"""The notebook in real Chromium: the lab (JupyterLite in the site's lab/, `python -m builder site`) opens with every
request on 127.0.0.1, and each example notebook (app/notebooks/) runs all its cells in the Pyodide kernel without
an error, printing the same figures, within 1e-6, as the same notebook run in CPython on the same stores."""
from __future__ import annotations

import json
import time

import pytest

from browser_util import REPO
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
    cells = page.evaluate(RUN_ALL)
    deadline = time.monotonic() + 300  # run-all resolves when the last cell was sent; wait for its output
    while not [o for o in cells[-1].get("outputs", []) if o.get("output_type") == "stream"] \
            and not any(o.get("output_type") == "error" for c in cells for o in c.get("outputs", [])):
        assert time.monotonic() < deadline, f"{name}: the last cell printed nothing"
        page.wait_for_timeout(500)
        cells = page.evaluate("() => jupyterapp.shell.currentWidget.content.widgets.map((w) => w.model.toJSON())")
    return cells


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
