// The map first: while Pyodide and Panel load (seconds), the store's global_rgb preview is drawn
// here, in JavaScript, on a canvas where the Panel map will appear; it pans (drag) and zooms (wheel).
// Python takes the view over when it builds its map (`handover()`, app/main.py) and closes the
// preview once that map is drawn.  Reads go through the page's copy of the bridge (window.tesseraJS);
// Python, in its worker (app/web/worker.js), has its own.
//
// The view is Web Mercator like the Bokeh map's: a centre (metres) and metres per canvas pixel.
// Pixels are sampled nearest from one level window (a coarse level for a world view; after a wheel zoom
// settles, the view's level is read again, `refine`), a screen column and a screen row at a time: in
// Mercator, longitude depends on x only, latitude on y only.
// The projection is the bridge's (app/js/mercator.js, window.tesseraJS.mercator): one copy, the coastlines'.
import { checkCatalog, chunksPresent, mercator, pickStore } from "./vendor/tessera.mjs";

const { R, lonToX, latToY, xToLon, yToLat } = mercator;
const D = Math.PI / 180;

// The Bokeh map's size (app/session.py MAP_W, MAP_H; tests/test_browser_preview.py checks they agree).
export const WIDTH = 760, HEIGHT = 520;
const MAX_WINDOW_PX = 2048 * 2048; // at most this many level pixels are read (16 MB of RGBA)
const DEFAULT_SPAN_M = 20_000; // app/main.py: a lon/lat in the URL without span

const unwrap = (r) => {
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
};

// The store Python will open (app/catalog.py load_catalog): ?store= or #store=, else the catalog's
// store of #year= (or ?year=), else its last one.  Anything unexpected: no preview (Python reports it).
async function chooseStore(js, q, h) {
  const store = h.get("store") || q.get("store");
  if (store) return new URL(store, location.href).href.replace(/\/+$/, "");
  const catalog = new URL(q.get("catalog") || "data/catalog.json", location.href).href;
  const cat = checkCatalog(JSON.parse(unwrap(await js.fetchJSON(catalog))), catalog); // builder/core/catalog.py's rules
  const pick = pickStore(cat, Number(h.get("year") || q.get("year")));
  return new URL(pick.url, catalog).href.replace(/\/+$/, "");
}

// global_rgb levels from the consolidated metadata (builder/core/describe.py levels), finest first.
function levels(rootMeta) {
  const nodes = (rootMeta.consolidated_metadata || {}).metadata || {};
  const layout = ((nodes.global_rgb || {}).attributes || {}).multiscales?.layout || [];
  const out = [];
  for (const it of layout) {
    const arr = nodes[`global_rgb/${it.asset}/rgb`], t = it["spatial:transform"];
    const [height, width] = (arr && Array.isArray(arr.shape) && arr.shape) || [];
    const chunk = arr?.chunk_grid?.configuration?.chunk_shape?.[0];
    const lvl = { index: Number(it.asset), res: Array.isArray(t) ? t[0] : NaN, height, width, chunk };
    const count = (v) => Number.isSafeInteger(v) && v > 0;
    if (Number.isSafeInteger(lvl.index) && lvl.res > 0 && lvl.res < 360 && count(height) && count(width) && count(chunk)) {
      lvl.present = chunksPresent(arr.attributes?.chunks_present, Math.ceil(height / chunk), Math.ceil(width / chunk));
      out.push(lvl);
    }
  }
  return out.sort((a, b) => a.res - b.res); // store metadata is data: anything odd is left out
}

// The zones' lon/lat boxes (w, s, e, n) from the consolidated metadata (proj:code EPSG:326NN / 327NN and the
// UTM spatial:bbox): where the store has data.  The transverse Mercator inverse to first order of Krueger's
// series (builder/core/utm.py has it to third order), off by under 0.001 degree; readWindow grows the boxes by
// ZONE_GROW_DEG.  A level without a record of its chunks (chunksPresent) is read only in the chunks touching
// them (the builder writes no other: a sparse pyramid's missing chunks would each be a failed request), and the
// first view frames them (firstBox).
// Anything odd in a zone's attributes leaves that zone out.
// The rectifying radius, k0, and the series' first terms beta_1 and delta_1 (WGS 84).
const ZONE_GROW_DEG = 0.002, TM_A = 6367449.146, TM_K0 = 0.9996, TM_B1 = 0.00083773182, TM_D1 = 0.0033565515;
function zoneBoxes(rootMeta) {
  const nodes = (rootMeta.consolidated_metadata || {}).metadata || {};
  const out = [];
  for (const [name, node] of Object.entries(nodes)) {
    const a = (node && node.attributes) || {};
    const m = /^EPSG:(32[67])(\d{2})$/.exec(String(a["proj:code"] || ""));
    const b = a["spatial:bbox"];
    if (!/^utm\d{2}$/.test(name) || !m || !Array.isArray(b) || b.length !== 4 || !b.every(Number.isFinite)) continue;
    const cm = -183 + 6 * Number(m[2]), north0 = m[1] === "327" ? 1e7 : 0;
    let w = Infinity, s = Infinity, e = -Infinity, n = -Infinity;
    for (const E of [b[0], (b[0] + b[2]) / 2, b[2]]) {
      for (const N of [b[1], (b[1] + b[3]) / 2, b[3]]) {
        const eta0 = (E - 500000) / (TM_K0 * TM_A), xi0 = (N - north0) / (TM_K0 * TM_A);
        const xi = xi0 - TM_B1 * Math.sin(2 * xi0) * Math.cosh(2 * eta0), eta = eta0 - TM_B1 * Math.cos(2 * xi0) * Math.sinh(2 * eta0);
        const chi = Math.asin(Math.sin(xi) / Math.cosh(eta));
        const lat = (chi + TM_D1 * Math.sin(2 * chi)) / D, lon = cm + Math.atan2(Math.sinh(eta), Math.cos(xi)) / D;
        w = Math.min(w, lon); e = Math.max(e, lon); s = Math.min(s, lat); n = Math.max(n, lat);
      }
    }
    if ([w, s, e, n].every(Number.isFinite)) out.push([w, s, e, n]);
  }
  return out;
}

// The lon/lat box to frame first: the union of the largest group (by area) of the zones' boxes, boxes within
// GAP_DEG of each other being one group (app/footprints.py first_box: the rule Python applies when there is
// no preview).  Sussex and the Cape are two groups: the first view shows one of them, not the sea between.
const GAP_DEG = 2;
function firstBox(boxes) {
  const close = (a, b) => a[0] < b[2] + GAP_DEG && b[0] < a[2] + GAP_DEG && a[1] < b[3] + GAP_DEG && b[1] < a[3] + GAP_DEG;
  let groups = [];
  for (const b of boxes) {
    const near = groups.filter((g) => g.some((o) => close(b, o)));
    groups = [...groups.filter((g) => !near.includes(g)), [b, ...near.flat()]];
  }
  const area = (g) => g.reduce((t, [w, s, e, n]) => t + (e - w) * (n - s), 0);
  const best = groups.reduce((a, g) => (a === null || area(g) > area(a) ? g : a), null);
  if (!best) return [-180, -60, 180, 75];
  return [Math.min(...best.map((b) => b[0])), Math.min(...best.map((b) => b[1])),
          Math.max(...best.map((b) => b[2])), Math.max(...best.map((b) => b[3]))];
}

// A window of a level, read chunk by chunk: only the chunks that exist (the level's record, chunksPresent) or,
// without a record, that touch a zone's box (zoneBoxes), pasted into one transparent RGBA image of the window.  Resolves to {data, shape} as js.read does, or throws.
async function readWindow(js, url, lvl, win, zones) {
  const h = win.r1 - win.r0, w = win.c1 - win.c0, data = new Uint8Array(h * w * 4), c = lvl.chunk, step = c * lvl.res;
  const reads = [];
  for (let i = Math.floor(win.r0 / c); i * c < win.r1; i++) {
    for (let j = Math.floor(win.c0 / c); j * c < win.c1; j++) {
      const cw = -180 + j * step, cn = 90 - i * step;
      const g = ZONE_GROW_DEG + lvl.res;
      if (lvl.present ? !lvl.present(i, j) : !zones.some(([zw, zs, ze, zn]) => zw - g < cw + step && ze + g > cw && zs - g < cn && zn + g > cn - step)) continue;
      const r0 = Math.max(win.r0, i * c), r1 = Math.min(win.r1, (i + 1) * c), c0 = Math.max(win.c0, j * c), c1 = Math.min(win.c1, (j + 1) * c);
      reads.push(js.read(url, `global_rgb/${lvl.index}/rgb`, [[r0, r1], [c0, c1], null], "region").then((got) => {
        const v = unwrap(got);
        for (let r = 0; r < r1 - r0; r++) {
          data.set(v.data.subarray(r * (c1 - c0) * 4, (r + 1) * (c1 - c0) * 4), ((r0 - win.r0 + r) * w + (c0 - win.c0)) * 4);
        }
      }));
    }
  }
  await Promise.all(reads);
  return { data, shape: [h, w, 4] };
}

// Rows and columns of `lvl` covering a lon/lat box, clamped to the level.
function windowOf(lvl, w, s, e, n) {
  const clamp = (v, hi) => Math.max(0, Math.min(hi, v));
  return { r0: clamp(Math.floor((90 - n) / lvl.res), lvl.height), r1: clamp(Math.ceil((90 - s) / lvl.res), lvl.height),
           c0: clamp(Math.floor((w + 180) / lvl.res), lvl.width), c1: clamp(Math.ceil((e + 180) / lvl.res), lvl.width) };
}
const size = (win) => (win.r1 - win.r0) * (win.c1 - win.c0);

// The level and window to read for a view's lon/lat box: the level at about screen resolution (the
// coarsest whose pixel is no larger than a screen pixel), over three views' width, coarser while that
// window has more than MAX_WINDOW_PX pixels.  The first paint of a view in the hash and the re-read
// after a zoom both use it.
function levelFor(lv, w, s, e, n) {
  const dw = e - w, dh = n - s;
  const i = Math.max(0, lv.findLastIndex((l) => l.res <= dw / WIDTH));
  const lvl = lv.slice(i).find((l) => size(windowOf(l, w - dw, s - dh, e + dw, n + dh)) <= MAX_WINDOW_PX) || lv[lv.length - 1];
  return { lvl, win: windowOf(lvl, w - dw, s - dh, e + dw, n + dh) };
}
const SETTLE_MS = 200; // a zoom has settled when no wheel event came for this long

class Preview {
  constructor(root) {
    this.root = root;
    this.base = root.querySelector("canvas.base");
    this.over = root.querySelector("canvas.coast");
    this.view = null; // {cx, cy, mpp}
    this.moved = false;
    this.framed = false; // the view is this preview's framing of the data (the URL hash had no view)
    this.frozen = false;
    this.closed = false;
    this.img = null; // {data, level, r0, c0, h, w}
    this.coast = null;
    this.pending = false;
    this.source = null; // {js, url, levels}: where finer levels are read after a zoom
    this.settle = null; // the timer that calls refine once the wheel is at rest
    this.ticket = 0; // refine's reads: only the newest one is painted
  }

  lonlatBox() {
    const { cx, cy, mpp } = this.view;
    return [xToLon(cx - (WIDTH / 2) * mpp), yToLat(cy - (HEIGHT / 2) * mpp), xToLon(cx + (WIDTH / 2) * mpp), yToLat(cy + (HEIGHT / 2) * mpp)];
  }

  centred(lon, lat, span) {
    this.view = { cx: lonToX(lon), cy: latToY(lat), mpp: span / Math.cos(lat * D) / WIDTH };
  }

  fit(w, s, e, n) { // as app/session.py fit_box: the box with a 10 % margin
    const x0 = lonToX(w), x1 = lonToX(e), y0 = latToY(s), y1 = latToY(n);
    const half = (Math.max(x1 - x0, ((y1 - y0) * WIDTH) / HEIGHT) / 2) * 1.1;
    this.view = { cx: (x0 + x1) / 2, cy: (y0 + y1) / 2, mpp: (2 * half) / WIDTH };
    this.framed = true;
  }

  schedule() {
    if (this.pending || this.closed) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.draw();
    });
  }

  draw() {
    const { cx, cy, mpp } = this.view;
    const ctx = this.base.getContext("2d");
    const out = ctx.createImageData(WIDTH, HEIGHT);
    const im = this.img;
    if (im) {
      const cols = new Int32Array(WIDTH), rows = new Int32Array(HEIGHT);
      for (let i = 0; i < WIDTH; i++) {
        const c = Math.floor((xToLon(cx + (i + 0.5 - WIDTH / 2) * mpp) + 180) / im.level.res) - im.c0;
        cols[i] = c >= 0 && c < im.w ? c : -1;
      }
      for (let j = 0; j < HEIGHT; j++) {
        const r = Math.floor((90 - yToLat(cy + (HEIGHT / 2 - j - 0.5) * mpp)) / im.level.res) - im.r0;
        rows[j] = r >= 0 && r < im.h ? r : -1;
      }
      const src = im.data, dst = out.data;
      for (let j = 0; j < HEIGHT; j++) {
        if (rows[j] < 0) continue;
        const line = rows[j] * im.w;
        for (let i = 0; i < WIDTH; i++) {
          if (cols[i] < 0) continue;
          const a = (line + cols[i]) * 4, b = (j * WIDTH + i) * 4;
          dst[b] = src[a]; dst[b + 1] = src[a + 1]; dst[b + 2] = src[a + 2]; dst[b + 3] = src[a + 3];
        }
      }
    }
    ctx.putImageData(out, 0, 0);
    this.drawCoast();
  }

  drawCoast() { // on a canvas of its own, so the base canvas holds the store's pixels only
    const ctx = this.over.getContext("2d");
    ctx.clearRect(0, 0, WIDTH, HEIGHT);
    if (!this.coast) return;
    const { cx, cy, mpp } = this.view;
    const xs = this.coast.coast_x, ys = this.coast.coast_y;
    ctx.beginPath();
    let pen = false;
    for (let k = 0; k < xs.length; k++) {
      if (Number.isNaN(xs[k])) { pen = false; continue; }
      const px = WIDTH / 2 + (xs[k] - cx) / mpp, py = HEIGHT / 2 - (ys[k] - cy) / mpp;
      if (pen) ctx.lineTo(px, py); else ctx.moveTo(px, py);
      pen = true;
    }
    ctx.strokeStyle = "#1d3557";
    ctx.lineWidth = 1.2;
    ctx.stroke();
  }

  listen() {
    let drag = null;
    const c = this.over;
    c.addEventListener("pointerdown", (e) => {
      if (this.frozen) return;
      drag = { x: e.clientX, y: e.clientY };
      c.setPointerCapture(e.pointerId);
    });
    c.addEventListener("pointermove", (e) => {
      if (!drag || this.frozen) return;
      this.view.cx -= (e.clientX - drag.x) * this.view.mpp;
      this.view.cy += (e.clientY - drag.y) * this.view.mpp;
      drag = { x: e.clientX, y: e.clientY };
      this.moved = true;
      this.schedule();
    });
    const end = () => { drag = null; };
    c.addEventListener("pointerup", end);
    c.addEventListener("pointercancel", end);
    c.addEventListener("wheel", (e) => {
      e.preventDefault();
      if (this.frozen) return;
      const r = c.getBoundingClientRect();
      const px = e.clientX - r.left - WIDTH / 2, py = e.clientY - r.top - HEIGHT / 2;
      const v = this.view;
      const x = v.cx + px * v.mpp, y = v.cy - py * v.mpp; // the point under the cursor stays put
      v.mpp = Math.max(0.5, Math.min((2 * Math.PI * R) / WIDTH, v.mpp * Math.exp(e.deltaY * 0.002)));
      v.cx = x - px * v.mpp;
      v.cy = y + py * v.mpp;
      this.moved = true;
      this.schedule();
      clearTimeout(this.settle);
      this.settle = setTimeout(() => this.refine(), SETTLE_MS);
    }, { passive: false });
  }

  // After a zoom settles: the level for the view now (levelFor), read and painted unless the image
  // drawn has that level or a finer one and covers the view.  Nearest-neighbour from one coarse level
  // is blocky once zoomed in; this keeps the preview at about screen resolution.
  async refine() {
    const src = this.source, im = this.img;
    if (!src || this.closed) return;
    const [w, s, e, n] = this.lonlatBox();
    const { lvl, win } = levelFor(src.levels, w, s, e, n);
    const res = im.level.res;
    const covers = w >= -180 + im.c0 * res && e <= -180 + (im.c0 + im.w) * res &&
                   n <= 90 - im.r0 * res && s >= 90 - (im.r0 + im.h) * res;
    if ((res <= lvl.res && covers) || size(win) === 0 || size(win) > MAX_WINDOW_PX) return;
    const ticket = ++this.ticket;
    let got;
    try {
      got = await readWindow(src.js, src.url, lvl, win, src.zones);
    } catch {
      return; // a failed read keeps the image drawn
    }
    if (this.closed || ticket !== this.ticket) return; // an overtaken read too
    this.img = { data: got.data, level: lvl, r0: win.r0, c0: win.c0, h: got.shape[0], w: got.shape[1] };
    this.draw(); // at once: the canvas never shows another level than this.img
  }

  // For Python: the view shown ({lon, lat, span} as the URL hash holds them: the centre and the
  // ground width there, app/session.py centred_box) when the user moved it or when it is this
  // preview's framing of the data (no view in the hash: one framing, computed here once, so the map
  // does not jump at "ready"); null otherwise (the hash's view, or nothing painted yet: Python frames).
  // The preview stops following input: Python's map opens at this view.
  handover() {
    this.frozen = true;
    this.over.style.cursor = "progress";
    return this.view && (this.moved || this.framed) ? this.where() : null;
  }

  where() {
    const lat = yToLat(this.view.cy);
    return { lon: xToLon(this.view.cx), lat, span: WIDTH * this.view.mpp * Math.cos(lat * D) };
  }

  close() {
    this.closed = true;
    this.root.hidden = true;
  }
}

// Open the store, read one level window, paint it; then coastlines (world-atlas, as the Panel map
// will show them).  Resolves to the Preview, or null when the store has no global_rgb.
export async function startPreview(js, root, geographyUrl, onPaint) {
  const p = (window.tesseraPreview = new Preview(root)); // at once: Python's handover() always finds it
  const q = new URLSearchParams(location.search), h = new URLSearchParams(location.hash.slice(1));
  const url = await chooseStore(js, q, h);
  const meta = JSON.parse(unwrap(await js.openSource(url)));
  const lv = levels(meta), zones = zoneBoxes(meta);
  if (!lv.length) return null;
  let lvl, win;
  const lon = parseFloat(h.get("lon")), lat = parseFloat(h.get("lat"));
  if (Number.isFinite(lon) && Number.isFinite(lat)) { // the view the URL names, at about screen resolution
    p.centred(lon, lat, parseFloat(h.get("span")) || DEFAULT_SPAN_M);
    ({ lvl, win } = levelFor(lv, ...p.lonlatBox()));
  } else { // the largest group of zones, framed (firstBox), at about screen resolution
    p.fit(...firstBox(zones));
    ({ lvl, win } = levelFor(lv, ...p.lonlatBox()));
  }
  if (size(win) > MAX_WINDOW_PX) return null; // no level small enough
  const got = await readWindow(js, url, lvl, win, zones);
  p.img = { data: got.data, level: lvl, r0: win.r0, c0: win.c0, h: got.shape[0], w: got.shape[1] };
  p.source = { js, url, levels: lv, zones };
  p.store = url;
  if (p.closed || p.frozen || document.body.dataset.state) return p; // Python (or an error) got there first
  root.hidden = false;
  p.draw();
  p.listen();
  onPaint();
  js.loadGeography(geographyUrl).then((g) => {
    if (g.ok) {
      p.coast = g.value;
      p.schedule();
    }
  });
  return p;
}

