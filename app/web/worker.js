// Python's thread: Pyodide, the packages and the explorer's Python (Panel, Bokeh's Python side, the
// tools) run in this Web Worker, so that no Python work ever holds the page's UI thread. The page
// (boot.js) keeps BokehJS, the preview and everything a worker cannot touch: the DOM, the URL,
// localStorage, downloads, window.tesseraApi and messages from a host page.
//
// Python reaches the page through `self.tesseraPage` (its Python side is app/page.py):
//   info                 the page's boot facts: href, search, hash, origin, framed, host, storage
//   post(msg, transfer)  a message to the page
//   call(method, ...args) a Promise of the page's answer
//   on(kind, fn)         fn(msg) for each message of `kind` from the page (queued until fn is set)
//
// Page -> worker messages: boot, reply (to a call), worker (the tesseraWorker commands: stats,
// resetStats, forgetBytes, python, packages), and the kinds Python registers with on() (patch, api, host).
performance.setResourceTimingBufferSize(100000); // every download counted (benchmarks/browser.py)
let tessera = null; // the data path (app/js/tessera.js), imported at boot with the page's bridge options
const pending = new Map();
const handlers = new Map();
const queued = new Map();
let nextId = 0;
let pyodide = null;

// Messages to the page wait until it has sent `boot`: it sets its handler as it sends that, and a
// worker's message with no handler on the page is lost.
let early = [];
const post = (msg, transfer) => (early ? early.push([msg, transfer]) : self.postMessage(msg, transfer || []));
const mark = (name, at = performance.now()) => post({ type: "mark", name, at: performance.timeOrigin + at });
const progress = (step, pct, detail = "") => post({ type: "progress", step, pct, detail });

self.tesseraPage = {
  info: null,
  post,
  call: (method, ...args) =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      pending.set(id, { resolve, reject });
      post({ type: "call", id, method, args });
    }),
  on(kind, fn) {
    handlers.set(kind, fn);
    for (const msg of queued.get(kind) || []) fn(msg);
    queued.delete(kind);
  },
};

const loaded = () => {
  if (!tessera) throw new Error("the worker's data path loads once Python has its packages");
  return tessera;
};

// The page's tesseraWorker commands (tests and benchmarks): this thread's fetch log and caches, and Python.
const commands = {
  stats() {
    const t = loaded();
    return { requests: t.stats.requests, bytes: t.stats.bytes, log: t.stats.log.slice(), prefetch: { ...t.prefetchStats } };
  },
  resetStats: () => loaded().resetStats(),
  forgetBytes: () => loaded().forgetBytes(),
  packages: () => (pyodide ? Object.keys(pyodide.loadedPackages) : []),
  resourceBytes: () => performance.getEntriesByType("resource").reduce((s, e) => s + e.transferSize, 0),
  async python(code) {
    const r = await pyodide.runPythonAsync(code);
    return r && typeof r.toJs === "function" ? r.toJs({ dict_converter: Object.fromEntries }) : r;
  },
};

// Pyodide starts loading as soon as this worker exists, before the page's boot message: its core is
// most of the start-up and needs nothing from the page (which creates this worker first of all).
let pyodideAt = null;
// Pyodide runs without WebAssembly JS Promise Integration (JSPI), which it uses when the browser has it (Chromium
// does): with it, Pyodide 0.27.7 loses 16 bytes of its 5 MiB C stack on every callback of its event loop (it
// restores the stack pointer only on errors; fixed upstream in pyodide#6250), so any session died of a stack
// overflow ("memory access out of bounds") after some 300,000 callbacks: a 20,000-point label import was enough.
// JSPI serves only Python code that blocks on a Promise (run_sync), which the explorer and Panel do not use.
// Pyodide looks for it (WebAssembly.Suspending, or the older Suspender) as its runtime loads, below.
for (const name of ["Suspending", "Suspender", "promising"]) delete WebAssembly[name];
const python = (async () => {
  const { loadPyodide } = await import("./pyodide/pyodide.mjs");
  // Python's output goes to the page's console, where the tests and a developer look for tracebacks.
  const out = (level) => (text) => post({ type: "console", level, text });
  const py = await loadPyodide({ indexURL: new URL("pyodide/", location.href).href, stdout: out("log"),
                                 stderr: out("error") });
  pyodideAt = performance.now(); // marked once the page has sent `boot`, with this time
  return py;
})();
python.catch(() => {}); // a failure is reported where start() awaits it

// The start-up packages are requested while Pyodide's core starts: after its wasm is compiled, Pyodide's
// synchronous start-up holds this thread for seconds with the link idle. loadPackage then takes the
// responses under way (the `fetch` below hands each one out once; every other request goes to the network
// as before). They wait until the wasm, which everything waits on, is in, so as not to share the link with
// it. That moment is taken from WebAssembly.instantiateStreaming, wrapped here: nothing else runs on this
// thread between its end and the synchronous start-up (a PerformanceObserver's callback waited until
// Pyodide was in). A body larger than the browser's buffer for unread responses (about 2 MB: numpy's 3 MB
// wheel) finishes once loadPackage reads it.
const earlyResponses = new Map(); // absolute URL -> Promise<Response>
const networkFetch = self.fetch.bind(self);
self.fetch = (resource, options) => {
  const url = String(resource instanceof Request ? resource.url : resource);
  const response = earlyResponses.get(url);
  if (!response) return networkFetch(resource, options);
  earlyResponses.delete(url);
  return response;
};
let startupPackages = null; // [absolute URL, integrity or null], from boot.json (below)
let coreCompiled = false;
let loadingPackages = false; // once loadPackage has begun, its own requests are under way: none early then
function requestPackagesEarly() {
  if (!startupPackages || !coreCompiled || loadingPackages) return;
  for (const [url, integrity] of startupPackages) {
    // A failure is reported by loadPackage, which receives this promise; the browser says no more than "Failed
    // to fetch" (for bytes that differ from the lock's sha256 too), so the URL says which package.
    const response = networkFetch(url, integrity ? { integrity } : {}).catch((err) => {
      throw new TypeError(`${url}: ${err && err.message ? err.message : err}`);
    });
    response.catch(() => {});
    earlyResponses.set(url, response);
  }
  startupPackages = [];
}
// Their list is this worker's own copy of boot.json, asked for as it starts: the page's boot message carries the
// same file, but it comes once the page has imported its data path and preview, which on a loaded machine was
// after Pyodide was in (and the packages waited for it). A failure here leaves them to loadPackage, as before.
const absolute = (path) => new URL(path, location.href).href;
const startupFiles = (boot) => [
  ...Object.entries(boot.lock_files).map(([path, integrity]) => [absolute(path), integrity]),
  ...boot.wheels.map((w) => [absolute(w), null]),
];
networkFetch("boot.json")
  .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`boot.json: HTTP ${r.status}`))))
  .then((boot) => {
    startupPackages = startupPackages || startupFiles(boot);
    requestPackagesEarly();
  })
  .catch(() => {});
const instantiateStreaming = WebAssembly.instantiateStreaming;
WebAssembly.instantiateStreaming = async (...args) => {
  const compiled = await instantiateStreaming(...args);
  coreCompiled = true;
  requestPackagesEarly();
  return compiled;
};

async function start({ boot, page, bridgeOptions }) {
  self.tesseraBoot = boot; // lazy_wheels, geography (app/raster.py, app/main.py)
  self.tesseraPage.info = page;
  progress("Loading Python (Pyodide " + boot.pyodide + ")…", 5);
  const wheels = boot.wheels.map(absolute);
  startupPackages = startupPackages || startupFiles(boot); // if this worker's own boot.json has not come
  requestPackagesEarly();
  pyodide = await python;
  mark("pyodide", pyodideAt);
  // The data path (app/js/tessera.js): store reads happen here, beside Python. It reads its options
  // (app/js/ranges.js) as it loads: the page's, passed on (a benchmark's baseline sets them there). The
  // coastlines are the page's: its preview has them decoded already, so they are asked for, not fetched.
  // Imported once Pyodide is in: the page's copy of the same file is in the HTTP cache by then, where
  // two requests at once from the page and this worker would download it twice.
  self.tesseraBridgeOptions = bridgeOptions;
  const data = import("./vendor/tessera.mjs");
  data.catch(() => {}); // a failure is reported where it is awaited, below
  progress("Loading packages…", 35, boot.lock_packages.join(", "));
  loadingPackages = true;
  // loadPackage reports a package it could not load to errorCallback and goes on: the start-up stops there,
  // in one line naming it, rather than at the first import that misses it.
  const failed = [];
  await pyodide.loadPackage([...boot.lock_packages, ...wheels], { messageCallback: () => {},
                                                                 errorCallback: (text) => failed.push(text) });
  if (failed.length) throw new Error(failed.map((t) => t.replace(/\s+/g, " ").trim()).join(" "));
  mark("packages");
  tessera = await data;
  self.tesseraJS = { ...tessera, loadGeography: (url) => self.tesseraPage.call("geography", url) };
  progress("Starting the app…", 75);
  pyodide.globals.set("PANEL_CDN_ROOT", new URL(boot.panel_cdn_root, location.href).href);
  await pyodide.runPythonAsync(`
import os
os.environ["PANEL_CDN_ROOT"] = PANEL_CDN_ROOT
import app.main
await app.main.start("app-root")
`);
  mark("app");
  // What the start-up does not import (builder/sitepkgs.py BACKGROUND_PACKAGES and BACKGROUND_WHEELS:
  // pandas, Pillow for PNG exports, ...): loaded now, off the start-up path.
  const later = boot.background_wheels.map(absolute);
  pyodide.loadPackage([...boot.background_packages, ...later], { messageCallback: () => {} })
    .then(() => mark("background"))
    .catch((err) => post({ type: "console", level: "warn", text: "background packages: " + err.message }));
}

self.onmessage = async (event) => {
  const msg = event.data;
  if (msg.type === "boot") {
    for (const [m, transfer] of early) self.postMessage(m, transfer || []);
    early = null;
    start(msg).catch((err) => {
      // A Python exception's message is its whole traceback: the page shows its last line only.
      const lines = String(err && err.message ? err.message : err).trim().split("\n");
      post({ type: "console", level: "error", text: String(err && err.stack ? err.stack : err) });
      post({ type: "error", title: "The explorer could not start", message: lines[lines.length - 1] });
    });
  } else if (msg.type === "reply") {
    const p = pending.get(msg.id);
    pending.delete(msg.id);
    if (p) msg.ok ? p.resolve(msg.value) : p.reject(new Error(msg.error));
  } else if (msg.type === "worker") {
    try {
      post({ type: "worker-reply", id: msg.id, ok: true, value: await commands[msg.name](...msg.args) });
    } catch (err) {
      post({ type: "worker-reply", id: msg.id, ok: false, error: String(err && err.message ? err.message : err) });
    }
  } else if (handlers.has(msg.type)) {
    try {
      await handlers.get(msg.type)(msg);
    } catch (err) {
      // One message Python could not handle: said on the page's console, and the explorer goes on.
      post({ type: "console", level: "error", text: String(err && err.stack ? err.stack : err) });
    }
  } else {
    if (!queued.has(msg.type)) queued.set(msg.type, []);
    queued.get(msg.type).push(msg);
  }
};
