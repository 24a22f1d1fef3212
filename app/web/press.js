// A press on the map (a finger touching it, or the mouse's main button going down) reads the pixel under it
// ahead, as a mouse at rest over the map does after 40 ms (app/tools/scatter_ui.py HOVER_JS; Explorer.hover in
// app/session.py): the tap or click that follows the press, ~100 ms later, then finds its bytes read or in flight.
// A finger never rests over the map before it touches it, so without this every tap waited for its reads. The place
// reaches Python the same way as the resting mouse's: as the data of the "hover-source" model. A press that starts
// a pan reads one pixel for nothing (~4 KB; none zoomed out, where a click reads no pixel ahead).
//
// BokehJS has no event for a pointer going down (its Tap comes when it goes up), so this listens on the page, in
// the capture phase, for presses inside the map's frame: the map's view may be built again, the page stays.
//
// Once Python has read a pixel ahead (a press's, or a resting mouse's), it sends the spectrum a tap there would show,
// with the pixel's footprint on the map (ExplorerUI._send_ahead in app/main.py). A tap inside that footprint shows it
// at once, from the tap's own handler (the map's Tap callback, TAP_JS in app/main.py, asks through a "tessera-tap"
// event), and tells Python which spectrum it showed; Python then selects the pixel, which sends nothing more to the
// spectrum when the state has not changed meanwhile. Without this the spectrum came in Python's answer to the tap,
// which Chromium holds back until the page has painted a frame after an input (messages from a worker are
// deferred then), and then painted a frame later still.
let shown = null; // the document whose map presses read ahead (the one the page renders last)
let quietly = (change) => change(); // applies a change without sending it to Python (boot.js)
let ahead = null; // {id, quad: [x0, y0, ..., x3, y3] (Web Mercator), data: the spectrum source's columns}

function onPress(e) {
  if (!e.isPrimary || (e.pointerType === "mouse" && e.button !== 0)) return;
  const map = shown.get_model_by_name("map");
  const src = shown.get_model_by_name("hover-source");
  const view = map == null || src == null ? null : window.Bokeh.index.find_one(map);
  if (view == null || !e.composedPath().includes(view.el)) return;
  const r = view.el.getBoundingClientRect(), f = view.frame.bbox;
  const sx = e.clientX - r.left - f.left, sy = e.clientY - r.top - f.top;
  if (!(sx >= 0 && sy >= 0 && sx <= f.width && sy <= f.height)) return; // on an axis or the toolbar
  const xr = map.x_range, yr = map.y_range, w = (xr.end - xr.start) / f.width, h = (yr.end - yr.start) / f.height;
  const x = xr.start + sx * w, y = yr.end - sy * h;
  clearTimeout(window.__tesseraHoverTimer); // a mouse's rest there would only say it again
  // A mouse that rested here has said so already (HOVER_JS): telling Python again would only make it busy as the
  // click comes. Within a screen pixel counts as here.
  const d = src.data, was = d instanceof Map ? [d.get("x"), d.get("y")] : [d.x, d.y];
  if (was[0] && was[0].length === 1 && Math.abs(was[0][0] - x) <= w && Math.abs(was[1][0] - y) <= h) return;
  src.data = { x: [x], y: [y] };
}

// Whether (x, y) lies in the convex quadrilateral q (its corners in turn round it; on an edge counts as inside).
function inside(q, x, y) {
  let side = 0;
  for (let i = 0; i < 8; i += 2) {
    const ax = q[i], ay = q[i + 1], bx = q[(i + 2) % 8], by = q[(i + 3) % 8];
    const s = Math.sign((bx - ax) * (y - ay) - (by - ay) * (x - ax));
    if (s !== 0 && side !== 0 && s !== side) return false;
    if (s !== 0) side = s;
  }
  return true;
}

function onTap(e) {
  const tap = e.detail;
  const src = shown && shown.get_model_by_name("spectrum-source");
  if (ahead === null || src == null || !inside(ahead.quad, tap.x, tap.y)) return;
  quietly(() => { src.data = { ...ahead.data }; });
  tap.ahead = ahead.id;
}

// Python's message: the spectrum sent ahead, or none (id null: label mode, another year).
export function setAhead(msg) {
  ahead = msg.id == null ? null : { id: msg.id, quad: msg.quad, data: msg.data };
}

export function readAheadOnPress(doc, quiet) {
  if (shown === null) {
    document.addEventListener("pointerdown", onPress, { capture: true, passive: true });
    document.addEventListener("tessera-tap", onTap);
  }
  shown = doc;
  quietly = quiet;
}
