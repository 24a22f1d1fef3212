// The UMAP worker: umap-js on one sample's vectors, in a Web Worker of its own (app/js/umap.js starts one per run),
// so that the embedding holds neither the page's thread nor Python's. Bundled by esbuild into vendor/umap-worker.js
// (builder/site.py).
//
// In:  {vectors: Float32Array (n x d, row-major), n, d, nNeighbors, minDist, seed}
// Out: {epoch, total} as each epoch of the layout's optimisation ends (the first with epoch 0, once the neighbour graph
//      is built), then {ok: true, xy: Float32Array (n x 2, row-major)} or {ok: false, message}
//
// Every random draw of umap-js (its random-projection forest, NN-descent, the initial layout and the negative
// samples) goes through the `random` it is given: a seeded generator (seedrandom) makes the layout a function of
// the vectors and the settings.
import seedrandom from "seedrandom";
import { UMAP } from "umap-js";

self.onmessage = ({ data: { vectors, n, d, nNeighbors, minDist, seed } }) => {
  try {
    const rows = Array.from({ length: n }, (_, i) => Array.from(vectors.subarray(i * d, (i + 1) * d)));
    const umap = new UMAP({ nComponents: 2, nNeighbors, minDist, random: seedrandom(`tessera-umap-${seed}`) });
    // what umap.fit does (initializeFit, then optimizeLayout), with each epoch told as it ends
    const total = umap.initializeFit(rows);
    self.postMessage({ epoch: 0, total });
    umap.optimizeLayout((epoch) => {
      self.postMessage({ epoch, total });
    });
    const layout = umap.getEmbedding();
    const xy = new Float32Array(2 * n);
    layout.forEach(([x, y], i) => {
      xy[2 * i] = x;
      xy[2 * i + 1] = y;
    });
    self.postMessage({ ok: true, xy }, [xy.buffer]);
  } catch (err) {
    self.postMessage({ ok: false, message: String(err && err.message ? err.message : err) });
  }
};
