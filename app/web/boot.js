// Boot sequence: the store's global preview first (JavaScript, app/web/preview.js: state "map");
// meanwhile Pyodide, the packages and the Python app load in a Web Worker (app/web/worker.js), so the
// page stays responsive throughout; state "ready" once the Panel map is interactive; any failure is
// shown in the page (state "error").
//
// This thread keeps what a worker cannot do, and does it when Python asks (app/page.py lists the
// messages): BokehJS renders the documents Python builds and syncs them both ways as JSON patches;
// the URL hash, localStorage, downloads, window.tesseraApi and a host page's messages are served here.
import "./canvas.js"; // before BokehJS: the 2d contexts it reads back (app/web/canvas.js)
import { showBusy } from "./busy.js";

const timings = (window.tesseraTimings = { start: performance.now() });
const el = (id) => document.getElementById(id);
const STORAGE_PREFIX = "tessera-"; // the localStorage entries Python may read (app/tools/labels.py)

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

function save(data, name, mime) {
  const url = URL.createObjectURL(new Blob([data], { type: mime }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

// The Bokeh document Python renders, synced both ways. A change made here goes to Python as a JSON
// patch; while Python is busy with one, later changes wait in order and go as one patch when Python
// says it is idle again. A newer value of the same property replaces an older one (a range dragged,
// the mouse moved), except on models tagged EVERY_CHANGE (app/main.py: the taps, each a click that
// must reach Python).
const doc = { js: null, patching: 0, busy: false, queue: [] };
const EVERY_CHANGE = "every-change";
const SENT_AFTER_RENDER = "sent-after-render"; // app/page.py: data set while the document was built, sent once connected

// `change()` applied to the document as Python's own patches are: not sent to Python (its copy has them already).
function quietly(change) {
  doc.patching += 1;
  try {
    change();
  } finally {
    doc.patching -= 1;
  }
}

// A file chosen in a FileInput (the label import) goes to Python as base64 in a patch: a file over the documents'
// size limit (LIMITS.metadataBytes, app/js/fetching.js) is not sent, as Python would hold all of it before any check;
// Python is told, for its status line (app/tools/ui.py). Its size in bytes, else 0.
function oversizedFile(event) {
  for (const e of event.events ?? [event]) {
    if (e.attr !== "value" || !e.model || e.model.type !== "FileInput" || e.value == null) continue;
    // the file's size from its base64 text: 3 bytes per 4 characters, less the '=' padding
    const bytes = [e.value].flat().reduce((n, v) => {
      const b64 = String(v);
      return n + Math.floor((b64.length * 3) / 4) - (b64.endsWith("==") ? 2 : b64.endsWith("=") ? 1 : 0);
    }, 0);
    if (bytes > window.tesseraJS.LIMITS.metadataBytes) return bytes;
  }
  return 0;
}

function sendChange(worker, event) {
  if (doc.patching > 0) return; // the echo of a patch from Python
  const bytes = oversizedFile(event);
  if (bytes) {
    worker.postMessage({ type: "file-refused", bytes, limit: window.tesseraJS.LIMITS.metadataBytes });
    return;
  }
  if (doc.busy) {
    if (event.model && event.attr && !(event.model.tags || []).includes(EVERY_CHANGE))
      doc.queue = doc.queue.filter((e) => !(e.model === event.model && e.attr === event.attr));
    doc.queue.push(event);
    return;
  }
  sendPatch(worker, [event]);
}

function sendPatch(worker, events) {
  let patch;
  try {
    patch = doc.js.create_json_patch(events);
  } catch (err) {
    console.error("tessera: a change could not be sent to Python:", err);
    doc.busy = false;
    return;
  }
  doc.busy = true;
  worker.postMessage({ type: "patch", patch });
}

// Resolves once `done()` holds (checked every 20 ms), or after `limitMs` whatever it says.
async function until(done, limitMs = 10_000) {
  const end = performance.now() + limitMs;
  while (performance.now() < end && !done()) await new Promise((ok) => setTimeout(ok, 20));
}

// Wait until BokehJS has laid out and painted every document (Document.is_idle), for at most 10 s.
// Observed before Python moved to the worker, cause not pinned down: a link's pins and
// selection restored while the first layout was still settling froze the renderer in about one boot in
// three (tests/test_browser.py test_state_is_restored_from_the_url); Python restores them after this.
// BokehJS says so itself (each document's `idle` signal, emitted as it turns idle), rather than being asked every 20 ms.
function firstLayout() {
  const docs = window.Bokeh ? window.Bokeh.documents : [];
  const idle = () => docs.length > 0 && docs.every((d) => d.is_idle);
  return new Promise((ok) => {
    if (idle()) return ok();
    const timer = setTimeout(ok, 10_000);
    for (const d of docs)
      d.idle.connect(() => {
        if (idle()) {
          clearTimeout(timer);
          ok();
        }
      });
  });
}

// Wait until every figure of the document has a view that has finished its first paint (figures added after the
// first layout too, which Document.is_idle does not follow), for at most 10 s; then one more frame.
async function plotsPainted() {
  const painted = (m) => {
    const view = window.Bokeh.index.find_one(m);
    return view != null && view.has_finished();
  };
  await until(() => [...window.Bokeh.documents[0].all_models].filter((m) => m.type === "Figure").every(painted));
  await new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok)));
}

function afterPaint() {
  // The task after the next frame's paint (requestAnimationFrame runs just before that paint). A hidden page
  // paints no frame: it resolves at once, or when it is hidden meanwhile. A page whose frames are held back
  // while it shows (an iframe scrolled out of view) resolves after 1 s.
  return new Promise((ok) => {
    if (document.hidden) return ok();
    const done = () => {
      document.removeEventListener("visibilitychange", done);
      ok();
    };
    document.addEventListener("visibilitychange", done);
    requestAnimationFrame(() => setTimeout(done, 0));
    setTimeout(done, 1000);
  });
}

// A Bokeh document as Python sends it (app/page.py `document`: JSON strings), built by BokehJS into the element of id
// `target`; its views.
async function embed({ docs_json, render_items, root_ids }, target) {
  const items = JSON.parse(render_items);
  const roots = JSON.parse(root_ids);
  items[0].roots = { [roots[0]]: target };
  items[0].root_ids = roots;
  const [views] = await window.Bokeh.embed.embed_items(JSON.parse(docs_json), items);
  return views;
}

// The warm-up (app/warmup.py): the first document BokehJS builds in a page costs about four times what it costs again
// (its code runs for the first time, its stylesheets are parsed, its fonts measured; ~490 ms, then ~125 ms, measured).
// This one is built in a hidden element off screen, painted once and removed with its views; it is never in
// Bokeh.documents afterwards, nor is anything of it left in the page.
async function warmUp(url) {
  if (!url) return;
  const response = await fetch(url, { signal: AbortSignal.timeout(5000) }); // the explorer's start-up waits for it
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  const json = await response.json();
  const host = Object.assign(document.createElement("div"), { id: "tessera-warm-up" });
  host.setAttribute("aria-hidden", "true");
  host.style.cssText = "position: absolute; left: -10000px; top: 0; width: 1600px; visibility: hidden";
  document.body.append(host);
  const Bokeh = window.Bokeh;
  const known = Bokeh.documents.length;
  try {
    const views = await embed(json, host.id);
    await afterPaint(); // its first paint (at once in a hidden page, which paints nothing)
    for (const view of views.roots.values()) view.remove();
  } finally {
    Bokeh.documents.splice(known);
    host.remove();
  }
}

function hostMessages(worker) {
  // A host page's commands (app/messages.py decides which origins are obeyed): each goes to Python
  // with its origin; the reply goes back to the window that sent it, addressed to that origin.
  const sources = new Map();
  let next = 0;
  window.addEventListener("message", (e) => {
    const d = e.data;
    if (!d || typeof d !== "object" || d.tessera === undefined || !("cmd" in d)) return; // not ours
    let data;
    try {
      data = structuredClone(d);
    } catch (err) {
      // Not plain data (a function, a DOM node) or nested too deeply to copy: Python answers with why, when it obeys
      // the sender's origin (app/messages.py).
      const id = typeof d.id === "string" || typeof d.id === "number" ? d.id : null;
      data = { tessera: d.tessera === 1 ? 1 : null, id, cmd: null, unreadable: String(err && err.message ? err.message : err) };
    }
    const id = ++next;
    sources.set(id, e.source);
    worker.postMessage({ type: "host", id, origin: e.origin, data });
  });
  return sources;
}

// Python first, in its own thread (it holds none of this one): the worker starts loading Pyodide, the
// longest part of the start-up, while this page fetches its data path and boot.json.
const worker = new Worker("worker.js", { type: "module" });

async function main() {
  worker.onerror = (e) => {
    const started = document.body.dataset.state === "ready";
    showError(started ? "The explorer's Python stopped" : "The explorer could not start",
              e.message || (started ? "its worker failed" : "its worker failed to load"));
  };
  const params = new URLSearchParams(location.search);
  if (params.get("embed") === "1") document.body.classList.add("embed");
  const [tessera, { startPreview }, { readAheadOnPress, setAhead }, boot] = await Promise.all([
    import("./vendor/tessera.mjs"), import("./preview.js"), import("./press.js"),
    fetch("boot.json").then((r) => r.json())]);
  window.tesseraJS = tessera; // this thread's data path: the preview's reads
  tessera.loadCodecs();
  window.tesseraBoot = boot; // lazy_wheels: loaded on first use
  const storage = {};
  try {
    for (let i = 0; i < localStorage.length; i++) {
      const k = localStorage.key(i);
      if (k.startsWith(STORAGE_PREFIX)) storage[k] = localStorage.getItem(k);
    }
  } catch (err) {
    console.warn("tessera: no localStorage here (labels will not persist):", err && err.message);
  }
  const framed = window.parent !== window;
  // In a frame, iframe-resizer's content script lets a host page size the frame to the explorer (docs/embedding.md);
  // it does nothing until the host asks. A failure costs the sizing only.
  if (framed) loadScript("vendor/iframe-resizer/iframeResizer.contentWindow.min.js")
    .catch((err) => console.warn("tessera: the frame cannot size itself:", err.message));
  // iframe-resizer watches the page's own DOM; the explorer's layout changes inside shadow roots (a card opened, a tab
  // drawn), which it does not see: a change of the explorer's size is told to it (window.parentIFrame, once the host
  // asked it to size the frame).
  if (framed) new ResizeObserver(() => window.parentIFrame?.size()).observe(el("app-root"));
  const host = location.ancestorOrigins && location.ancestorOrigins.length ? location.ancestorOrigins[0] : null;
  worker.postMessage({ type: "boot", boot, bridgeOptions: window.tesseraBridgeOptions,
                       page: { href: location.href, search: location.search, hash: location.hash,
                               origin: location.origin, framed, host, storage } });
  // The map first: not awaited; a store without a preview (or any failure here) just shows none,
  // Python reports real problems with the store itself.
  startPreview(tessera, el("preview"), boot.geography, () => {
    timings.map = performance.now();
    document.body.dataset.state = "map";
  }).catch((err) => console.warn("no preview:", err && err.message));
  progress("Loading Python (Pyodide " + boot.pyodide + ")…", 5);
  // The Bokeh and Panel scripts (2.5 MB) hold this thread while they run, and would share the link with
  // Pyodide's core and the packages: they load in order once Python has its packages (the worker's
  // `packages` mark), while it imports Panel, which keeps one core busy and leaves the network idle.
  let packagesIn;
  const packages = new Promise((ok) => (packagesIn = ok));
  const scripts = (async () => {
    await packages;
    // Panel's stylesheets of the first document come with the scripts: a <link rel=stylesheet> of the same URL in
    // the first layout then takes the preloaded response instead of waiting a round trip for it.
    for (const href of boot.stylesheets) {
      document.head.append(Object.assign(document.createElement("link"), { rel: "preload", as: "style", href }));
    }
    for (const src of boot.scripts) await loadScript(src);
  })();
  // Then BokehJS builds a small document of the explorer's kinds of models off screen, and drops it (warmUp), while
  // Python still imports Panel: the explorer's own document, later, is built in a quarter of the time. A failure here
  // costs that gain only.
  const warmed = scripts.then(() => warmUp(boot.warmup)).then(
    () => (timings.warm = performance.now()),
    (err) => console.warn("tessera: no warm-up:", err && err.message));

  const calls = {
    preview: (method) => (window.tesseraPreview ? window.tesseraPreview[method]() ?? null : null),
    geography: (url) => tessera.loadGeography(url), // the preview's decoded copy (one fetch, one decode)
    plotsPainted: () => plotsPainted().then(() => null), // the changes applied before this call, painted
    afterPaint: () => afterPaint().then(() => null), // the frame after the changes applied before this call
    async render({ docs_json, render_items, root_ids, target }) {
      await scripts;
      await warmed;
      const views = await embed({ docs_json, render_items, root_ids }, target);
      doc.js = [...views.roots.values()][0].model.document;
      doc.js.on_change((e) => sendChange(worker, e), false);
      // A press on the map reads its pixel ahead of the tap, and a tap shows the spectrum sent ahead (app/web/press.js).
      readAheadOnPress(doc.js, quietly);
      await firstLayout();
      for (const m of doc.js.all_models) {
        const d = (m.tags || []).includes(SENT_AFTER_RENDER) ? m.data : null;
        if (d) m.setv({ data: d instanceof Map ? new Map(d) : { ...d } }, { check_eq: false });
      }
      return null;
    },
  };
  const apiCalls = new Map();
  let apiNext = 0, sources = null;
  const handlers = {
    progress: (m) => progress(m.step, m.pct, m.detail),
    busy: (m) => showBusy(m.what), // a tool's step under way (app/tools/steps.py), or none
    mark(m) {
      timings[m.name] = m.at - performance.timeOrigin;
      if (m.name === "packages") packagesIn();
    },
    state(m) {
      document.body.dataset.state = m.state;
      if (m.state === "ready") el("loading").hidden = true;
    },
    error: (m) => showError(m.title, m.message),
    console: (m) => console[m.level](m.text),
    hash: (m) => history.replaceState(null, "", location.pathname + location.search + m.hash),
    storage(m) {
      try {
        if (m.value == null) localStorage.removeItem(m.key); // Python's None (page.storage_remove)
        else localStorage.setItem(m.key, m.value);
      } catch (err) {
        console.warn("tessera: could not save " + m.key + ":", err && err.message);
      }
    },
    download: (m) => save(m.data, m.name, m.mime),
    async call(m) {
      try {
        worker.postMessage({ type: "reply", id: m.id, ok: true, value: await calls[m.method](...m.args) });
      } catch (err) {
        worker.postMessage({ type: "reply", id: m.id, ok: false, error: String(err && err.message ? err.message : err) });
      }
    },
    patch: (m) => quietly(() => doc.js.apply_json_patch(m.patch, m.buffers)),
    ahead: (m) => setAhead(m), // the spectrum a tap on the pixel read ahead shows (app/web/press.js)
    idle() {
      const events = doc.queue;
      doc.queue = [];
      if (events.length) sendPatch(worker, events);
      else doc.busy = false;
    },
    api(m) {
      // window.tesseraApi: each command a Promise of Python's answer (app/api.py)
      const call = (name) => (...args) => new Promise((resolve, reject) => {
        // checked for depth here: the copy to the worker recurses, and overflows on arguments nested thousands deep
        const problem = window.tesseraJS.valueProblem(args, `the arguments of ${name}`);
        if (problem) return reject(new Error(problem));
        const id = ++apiNext;
        apiCalls.set(id, { resolve, reject });
        worker.postMessage({ type: "api", id, name, args });
      });
      window.tesseraApi = Object.fromEntries(m.names.map((n) => [n, call(n)]));
      sources = hostMessages(worker);
    },
    "api-reply"(m) {
      const p = apiCalls.get(m.id);
      apiCalls.delete(m.id);
      m.ok ? p.resolve(m.value) : p.reject(new Error(m.error));
    },
    "host-reply"(m) {
      const source = sources.get(m.id);
      sources.delete(m.id);
      if (source && m.reply) source.postMessage(m.reply, m.origin); // no reply: refused, or not ours
    },
    "host-ready": (m) => window.parent.postMessage({ tessera: 1, event: "ready" }, m.origin),
    "worker-reply"(m) {
      const p = workerCalls.get(m.id);
      workerCalls.delete(m.id);
      m.ok ? p.resolve(m.value) : p.reject(new Error(m.error));
    },
  };
  worker.onmessage = (e) => {
    try {
      handlers[e.data.type](e.data);
    } catch (err) {
      console.error("tessera: the page could not handle a " + e.data.type + " message:", err);
    }
  };
  // For tests, benchmarks and a developer's console: the worker's fetch log and caches, and Python.
  const workerCalls = new Map();
  let workerNext = 0;
  const ask = (name) => (...args) => new Promise((resolve, reject) => {
    const id = ++workerNext;
    workerCalls.set(id, { resolve, reject });
    worker.postMessage({ type: "worker", id, name, args });
  });
  window.tesseraWorker = Object.fromEntries(["stats", "resetStats", "forgetBytes", "packages", "resourceBytes", "python"]
    .map((n) => [n, ask(n)]));
}

main().catch((err) => {
  console.error(err);
  worker.terminate(); // the page cannot serve it: no Pyodide download for nothing
  showError("The explorer could not start", String(err && err.message ? err.message : err));
});
