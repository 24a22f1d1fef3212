// Bokeh draws each image glyph (the map) and each colour bar through a canvas of its own that is never in the
// page, and reads it back with getImageData at every update; Chromium then logs a hint to create such a canvas
// with {willReadFrequently: true} (a CPU-backed canvas, for which readbacks are cheap). BokehJS offers no option
// for it, so its 2d contexts are given that default here, before BokehJS loads: only on canvases that have no
// class and are not in the document when their context is made (those offscreen image canvases). Bokeh's plot
// layers (class "bk-layer") and the page's own canvases (in the document) keep the browser's default.
const getContext = HTMLCanvasElement.prototype.getContext;
HTMLCanvasElement.prototype.getContext = function (type, options) {
  if (type === "2d" && !this.isConnected && !this.className && options?.willReadFrequently === undefined) {
    return getContext.call(this, type, { ...options, willReadFrequently: true });
  }
  return getContext.call(this, type, options);
};
