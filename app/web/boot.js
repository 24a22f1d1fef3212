// Boot sequence: the store's global preview first (JavaScript, app/web/preview.js: state "map"),
// while Pyodide, then the packages, then the Python app load, with a progress indicator (state
// "ready" once the Panel map is interactive); any failure is shown in the page (state "error").
import * as tessera from "./vendor/tessera.mjs";
import { startPreview } from "./preview.js";

window.tesseraJS = tessera;
const timings = (window.tesseraTimings = { start: performance.now() });
const el = (id) => document.getElementById(id);
const PREVIEW_WAIT_MS = 1500;

function progress(step, pct, detail = "") {
  el("loading-step").textContent = step;
  el("loading-bar").value = pct;
  el("loading-detail").textContent = detail;
}

export function showError(title, message) {
  el("loading").hidden = true;
  if (window.tesseraPreview) window.tesseraPreview.close();
  const box = el("error");
  box.hidden = false;
  box.innerHTML = "";
  const t = document.createElement("div");
  t.className = "title";
  t.textContent = title;
  const m = document.createElement("div");
  m.className = "message";
  m.textContent = message;
  box.append(t, m);
  document.body.dataset.state = "error";
}
window.tesseraShowError = showError;

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = src;
    s.onload = resolve;
    s.onerror = () => reject(new Error("could not load " + src));
    document.head.append(s);
  });
}

async function main() {
  const params = new URLSearchParams(location.search);
  if (params.get("embed") === "1") document.body.classList.add("embed");
  const boot = (window.tesseraBoot = await (await fetch("boot.json")).json()); // lazy_wheels: loaded on first use
  // The map first: not awaited; a store without a preview (or any failure here) just shows none,
  // Python reports real problems with the store itself.
  const preview = startPreview(tessera, el("preview"), boot.geography, () => {
    timings.map = performance.now();
    document.body.dataset.state = "map";
  }).catch((err) => console.warn("no preview:", err && err.message));
  progress("Loading Python (Pyodide " + boot.pyodide + ")…", 5);
  // Pyodide's two largest files download meanwhile (into the HTTP cache: pyodide/ is cacheable), but
  // its start-up and the Bokeh/Panel scripts, which hold the main thread for seconds, wait for the
  // preview's first paint (at most PREVIEW_WAIT_MS): they would otherwise delay it by as much.
  // (Each body is drained: an unread body stalls its download, and Pyodide's own request for the same
  // URL would wait on the HTTP cache entry.)
  for (const f of ["pyodide.asm.wasm", "python_stdlib.zip"]) {
    fetch("pyodide/" + f).then((r) => r.body && r.body.pipeTo(new WritableStream())).catch(() => {});
  }
  await Promise.race([preview, new Promise((ok) => setTimeout(ok, PREVIEW_WAIT_MS))]);
  const { loadPyodide } = await import("./pyodide/pyodide.mjs");
  // Bokeh and Panel JS load in order, while Pyodide boots.
  const scripts = (async () => {
    for (const src of boot.scripts) await loadScript(src);
  })();
  const pyodide = await loadPyodide({ indexURL: new URL("pyodide/", location.href).href });
  await scripts;
  timings.pyodide = performance.now();
  progress("Loading packages…", 35, boot.lock_packages.join(", "));
  const wheels = boot.wheels.map((w) => new URL(w, location.href).href);
  await pyodide.loadPackage([...boot.lock_packages, ...wheels], { messageCallback: () => {} });
  timings.packages = performance.now();
  progress("Starting the app…", 75);
  pyodide.globals.set("PANEL_CDN_ROOT", new URL(boot.panel_cdn_root, location.href).href);
  await pyodide.runPythonAsync(`
import os
os.environ["PANEL_CDN_ROOT"] = PANEL_CDN_ROOT
import app.main
await app.main.start("app-root")
`);
  timings.app = performance.now();
  el("loading").hidden = true;
  if (document.body.dataset.state !== "error") document.body.dataset.state = "ready"; // app/main.py sets it first
  window.pyodide = pyodide;
}

main().catch((err) => {
  console.error(err);
  // A Python exception's message is its whole traceback: the page shows its last line only.
  const lines = String(err && err.message ? err.message : err).trim().split("\n");
  showError("The explorer could not start", lines[lines.length - 1]);
});
