// The host side of the explorer's message contract, version 1 (docs/embedding.md; app/messages.py), for the
// iframes the `tessera-explorer` directive writes (builder/sphinx_ext.py). Each frame sizes itself to the
// explorer with iframe-resizer, loaded from the explorer's own site; `tesseraExplorer.send(frame, cmd, ...args)`
// is a Promise of the command's result, or an Error with the explorer's one-line reason.
(() => {
  const VERSION = 1; // the contract version this page speaks; the explorer refuses any other
  const SELECTOR = "iframe.tessera-explorer-frame";
  const frames = new Map(); // iframe -> {origin, pending: Map(id -> {resolve, reject}), ready, markReady}

  function entry(frame) {
    if (typeof frame === "string") frame = document.getElementById(frame);
    if (!frame || !frames.has(frame)) throw new Error("not a tessera-explorer frame on this page");
    return frames.get(frame);
  }

  function register(frame) {
    if (frames.has(frame)) return;
    let markReady;
    const ready = new Promise((ok) => (markReady = ok));
    frames.set(frame, { origin: new URL(frame.src, location.href).origin, pending: new Map(), next: 1, ready, markReady });
  }

  window.addEventListener("message", (ev) => {
    for (const [frame, f] of frames) {
      if (ev.source !== frame.contentWindow || ev.origin !== f.origin) continue;
      const m = ev.data;
      if (!m || typeof m !== "object" || m.tessera !== VERSION) return; // iframe-resizer's, or not ours
      if (m.event === "ready") {
        frame.dataset.tesseraState = "ready";
        f.markReady();
        frame.dispatchEvent(new CustomEvent("tessera-ready"));
        return;
      }
      const p = f.pending.get(m.id);
      if (!p) return;
      f.pending.delete(m.id);
      if (m.ok) p.resolve(m.result);
      else p.reject(new Error(String(m.error)));
      return;
    }
  });

  const scripts = new Map(); // iframe-resizer's URL -> Promise of its load
  function resizer(url) {
    if (!scripts.has(url)) {
      scripts.set(url, new Promise((ok, fail) => {
        const s = Object.assign(document.createElement("script"), { src: url });
        s.onload = ok;
        s.onerror = () => fail(new Error("could not load " + url));
        document.head.append(s);
      }));
    }
    return scripts.get(url);
  }

  function sizeToContent(frame) {
    const f = frames.get(frame);
    const min = Number(frame.dataset.tesseraMinHeight) || 0;
    resizer(frame.dataset.tesseraResizer).then(() => {
      // Width too: the explorer's layout is wider than most text columns, and its wrapper scrolls sideways (a frame's
      // own scroll bars would change the height it measures). Polled every 500 ms as well (a negative interval):
      // the explorer's layout changes inside shadow roots, which iframe-resizer's mutation observer does not see.
      window.iFrameResize({ checkOrigin: [f.origin], minHeight: min, sizeWidth: true, interval: -500,
                            warningTimeout: 0, scrolling: false }, frame);
    }, (err) => console.warn("tessera-explorer: the frame keeps its height:", err.message));
  }

  window.tesseraExplorer = {
    version: VERSION,
    frames: () => [...frames.keys()],
    // Resolves when the explorer in `frame` (the element or its id) says it is ready.
    ready: (frame) => entry(frame).ready,
    send(frame, cmd, ...args) {
      const f = entry(frame);
      const el = typeof frame === "string" ? document.getElementById(frame) : frame;
      return new Promise((resolve, reject) => {
        const id = f.next++;
        f.pending.set(id, { resolve, reject });
        el.contentWindow.postMessage({ tessera: VERSION, id, cmd, args }, f.origin);
      });
    },
  };

  function start() {
    for (const frame of document.querySelectorAll(SELECTOR)) {
      register(frame);
      sizeToContent(frame);
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
