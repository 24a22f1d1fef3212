// The page's warm-up document (app/warmup.py) at site-build time, made in the site's own Pyodide under node, so its
// JSON is of the very Panel and Bokeh versions the browser runs.
// Usage: `node warmup.mjs PYODIDE_DIR OUT_FILE PANEL_CDN_ROOT LOCK_PACKAGES(comma-separated) WHEEL...`.
import fs from "fs";
const [, , pyodideDir, outFile, cdnRoot, lockPackages, ...wheels] = process.argv;
const { loadPyodide } = await import(pyodideDir + "/pyodide.mjs");
const py = await loadPyodide({ indexURL: pyodideDir + "/" });
await py.loadPackage([...lockPackages.split(",").filter(Boolean), ...wheels], { messageCallback: () => {} });
// `import panel` under Pyodide imports its browser glue (panel.io.pyodide), which takes XMLHttpRequest from the JS
// globals at import; node has none, and nothing here calls it.
globalThis.XMLHttpRequest = class {};
py.globals.set("PANEL_CDN_ROOT", cdnRoot); // Panel's stylesheets, as the worker sets it (relative to the page here)
py.runPython("import os\nos.environ['PANEL_CDN_ROOT'] = PANEL_CDN_ROOT");
fs.writeFileSync(outFile, py.runPython("from app.warmup import document_json\ndocument_json()"));
