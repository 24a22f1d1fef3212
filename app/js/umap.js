// UMAP for Python (app/tools/umapjs.py, through tesseraJS.umap): each run starts a Web Worker of its own
// (vendor/umap-worker.js, app/js/umap-worker.js), hands it the sample's vectors and ends it with the answer, so the
// embedding runs neither on the page's thread nor on Python's (itself a worker, app/web/worker.js, which Panel and
// every other command share).
export const UMAP_WORKER = "vendor/umap-worker.js"; // beside the site's root (builder/site.py _js)

// `onEpoch(epoch, total)`, when given, is called as each epoch of the layout ends (the first time with epoch 0).
export function runUmap(vectors, n, d, nNeighbors, minDist, seed, onEpoch = null) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(UMAP_WORKER, location.href));
    const done = (fn, value) => {
      worker.terminate();
      fn(value);
    };
    worker.onmessage = ({ data }) => {
      if ("epoch" in data) {
        if (onEpoch) onEpoch(data.epoch, data.total);
      } else if (data.ok) done(resolve, data.xy);
      else done(reject, new Error(`UMAP: ${data.message}`));
    };
    worker.onerror = (event) => {
      event.preventDefault();
      done(reject, new Error(`UMAP worker: ${event.message || "it could not start"}`));
    };
    // a copy: the caller's buffer stays its own (Python's memory when it comes from Pyodide)
    const copy = vectors.slice();
    worker.postMessage({ vectors: copy, n, d, nNeighbors, minDist, seed }, [copy.buffer]);
  });
}
