// A press on the map (a finger touching it, or the mouse's main button going down) reads the pixel under it
// ahead, as a mouse at rest over the map does after 40 ms (app/tools/scatter_ui.py HOVER_JS; Explorer.hover in
// app/session.py): the tap or click that follows the press, ~100 ms later, then finds its bytes read or in flight.
// A finger never rests over the map before it touches it, so without this every tap waited for its reads. The place
// reaches Python the same way as the resting mouse's: as the data of the "hover-source" model. A press that starts
// a pan reads one pixel for nothing (~4 KB; none zoomed out, where a click reads no pixel ahead).
//
// BokehJS has no event for a pointer going down (its Tap comes when it goes up), so this listens on the page, in
// the capture phase, for presses inside the map's frame: the map's view may be built again, the page stays.
let shown = null; // the document whose map presses read ahead (the one the page renders last)

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

export function readAheadOnPress(doc) {
  if (shown === null) document.addEventListener("pointerdown", onPress, { capture: true, passive: true });
  shown = doc;
}
